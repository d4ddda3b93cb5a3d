//! MySQL and MariaDB tables read in one snapshot.
//!
//! The first read of a table provider opens `START TRANSACTION WITH CONSISTENT SNAPSHOT, READ
//! ONLY` at `REPEATABLE READ` (the level at which InnoDB keeps one read view for the whole
//! transaction) on a connection it keeps (the *holder*); later reads take the holder in turn.
//! MySQL cannot share a snapshot between connections, so a read that overlaps another read of
//! the same table (the two sides of a self-join) opens a consistent snapshot of its own; the
//! reads of a COPY INCREMENTAL run come one after another, all on the holder.
//!
//! The snapshot's name is where the server's binary log stood: MariaDB's
//! `binlog_snapshot_file:binlog_snapshot_position` (exactly the snapshot's point), else
//! MySQL's `gtid_executed` (read just before the snapshot opened); none without a binary log.
//! A server that refuses the snapshot's statements is read without one.
//!
//! The session reads backslashes in string literals as themselves (`NO_BACKSLASH_ESCAPES`):
//! the engine's filters are written in standard SQL.
//!
//! Rows are converted to Arrow by the provider's own code, but the SQL is sent as the
//! unparser wrote it: the provider's own reads strip every `"` from it, string literals
//! included (`note = 'say "hi"'` would match `say hi`).

use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::catalog::TableProvider;
use datafusion::common::TableReference;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::Expr as EngineExpr;
use datafusion::physical_expr::EquivalenceProperties;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
};
use datafusion::sql::unparser::dialect::MySqlDialect;
use datafusion_table_providers::mysql::DynMySQLConnectionPool;
use datafusion_table_providers::sql::arrow_sql_gen::mysql::rows_to_arrow;
use datafusion_table_providers::sql::db_connection_pool::dbconnection::mysqlconn::MySQLConnection;
use datafusion_table_providers::sql::db_connection_pool::mysqlpool::MySQLConnectionPool;
use datafusion_table_providers::sql::sql_provider_datafusion::SqlTable;
use futures::StreamExt;
use mysql_async::prelude::{Queryable, ToValue};
use mysql_async::{Params, Row};

use super::SnapshotReads;
use crate::catalog::foreign::connect::Secrets;

/// The table as the provider's SQL writer sees it.
type MyTable = SqlTable<mysql_async::Conn, &'static (dyn ToValue + Sync)>;

/// The reads of one MySQL or MariaDB table provider, all in one snapshot.
pub(in crate::catalog::foreign) struct MySqlReads {
    pool: Arc<MySQLConnectionPool>,
    table: MyTable,
    /// The table as the database names it, quoted (`` `shop`.`orders` ``).
    relation: String,
    snapshot: tokio::sync::OnceCell<Arc<Held>>,
    secrets: Secrets,
}

impl std::fmt::Debug for MySqlReads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "snapshot reads of {}", self.relation)
    }
}

/// The open transaction every read takes in turn.
struct Held {
    name: Option<String>,
    holder: Arc<tokio::sync::Mutex<Leased>>,
}

/// A pooled connection in a transaction, rolled back before it returns to the pool.
struct Leased(Option<MySQLConnection>);

impl Drop for Leased {
    fn drop(&mut self) {
        let Some(conn) = self.0.take() else {
            return;
        };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = conn.conn.lock().await.query_drop("ROLLBACK").await;
            });
        }
    }
}

impl Leased {
    fn conn(&self) -> DfResult<&MySQLConnection> {
        self.0.as_ref().ok_or_else(|| {
            DataFusionError::Execution(
                "a MySQL read after its snapshot's transaction ended (the reads of a run are over once its rows are written)".into(),
            )
        })
    }
}

/// A connection a read holds while its rows stream.
enum Lease {
    Holder(tokio::sync::OwnedMutexGuard<Leased>),
    Own(Leased),
}

impl Lease {
    fn conn(&self) -> DfResult<&MySQLConnection> {
        match self {
            Lease::Holder(g) => g.conn(),
            Lease::Own(l) => l.conn(),
        }
    }
}

impl MySqlReads {
    /// Reads of `provider` (the MySQL provider's table `reference`) in one snapshot.
    pub(in crate::catalog::foreign) fn of(
        pool: Arc<MySQLConnectionPool>,
        provider: &Arc<dyn TableProvider>,
        schema: &str,
        table: &str,
        secrets: Secrets,
    ) -> MySqlReads {
        let dyn_pool: Arc<DynMySQLConnectionPool> = pool.clone();
        let reference = TableReference::partial(schema, table);
        let quote = |s: &str| format!("`{}`", s.replace('`', "``"));
        MySqlReads {
            pool,
            table: SqlTable::new_with_schema("mysql", &dyn_pool, provider.schema(), reference)
                .with_dialect(Arc::new(MySqlDialect {})),
            relation: format!("{}.{}", quote(schema), quote(table)),
            snapshot: tokio::sync::OnceCell::new(),
            secrets,
        }
    }

    fn failed(&self, what: &str, e: impl std::fmt::Display) -> DataFusionError {
        DataFusionError::Execution(
            self.secrets
                .scrub(format!("MySQL table {}: {what}: {e}", self.relation)),
        )
    }

    /// The snapshot, opened on first use.
    async fn held(&self) -> DfResult<Arc<Held>> {
        self.snapshot
            .get_or_try_init(|| async {
                let leased = Leased(Some(
                    self.pool
                        .connect_direct()
                        .await
                        .map_err(|e| self.failed("connection", e))?,
                ));
                let name = open(leased.conn()?)
                    .await
                    .map_err(|e| self.failed("snapshot", e))?;
                // Tests change the table here, after the snapshot was taken.
                let hold = (|| -> Option<u64> {
                    fail::fail_point!("foreign::mysql_snapshot", |ms| ms
                        .and_then(|m| m.parse().ok()));
                    None
                })();
                if let Some(ms) = hold {
                    tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
                }
                Ok(Arc::new(Held {
                    name,
                    holder: Arc::new(tokio::sync::Mutex::new(leased)),
                }))
            })
            .await
            .cloned()
    }

    /// The holder when free, else a connection with a consistent snapshot of its own.
    async fn lease(&self, held: &Held) -> DfResult<Lease> {
        if let Ok(guard) = held.holder.clone().try_lock_owned() {
            return Ok(Lease::Holder(guard));
        }
        let leased = Leased(Some(
            self.pool
                .connect_direct()
                .await
                .map_err(|e| self.failed("connection", e))?,
        ));
        open(leased.conn()?)
            .await
            .map_err(|e| self.failed("snapshot", e))?;
        Ok(Lease::Own(leased))
    }
}

/// Open a read-only transaction with a consistent snapshot on `conn`; the snapshot's name.
/// A server that refuses READ ONLY gets a consistent snapshot without it, and one that
/// refuses both is read without a transaction (each query its own snapshot, no name).
async fn open(conn: &MySQLConnection) -> Result<Option<String>, mysql_async::Error> {
    let mut c = conn.conn.lock().await;
    // String literals are sent as the engine wrote them: a backslash is a backslash, not
    // MySQL's escape (`'C:\temp'` would otherwise match a tab).
    c.query_drop(
        "SET SESSION sql_mode = CONCAT_WS(',', NULLIF(@@SESSION.sql_mode, ''), 'NO_BACKSLASH_ESCAPES')",
    )
    .await?;
    // MySQL's executed GTIDs, read before the snapshot opens: at or before its point (a
    // consumer resuming there replays a few transactions rather than missing any).
    let gtids: Option<Option<String>> = c
        .query_first("SELECT @@GLOBAL.gtid_executed")
        .await
        .unwrap_or_default();
    let _ = c
        .query_drop("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        .await;
    let mut opened = false;
    for start in [
        "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY",
        "START TRANSACTION WITH CONSISTENT SNAPSHOT",
    ] {
        if c.query_drop(start).await.is_ok() {
            opened = true;
            break;
        }
    }
    if !opened {
        return Ok(None);
    }
    // MariaDB keeps the binary log position of the snapshot itself (empty without a binary
    // log). A failed query leaves a MySQL transaction open.
    let status: Vec<(String, String)> = c
        .query("SHOW SESSION STATUS LIKE 'binlog_snapshot_%'")
        .await
        .unwrap_or_default();
    let value = |name: &str| {
        status
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
            .filter(|v| !v.is_empty())
    };
    if let (Some(file), Some(position)) = (
        value("binlog_snapshot_file"),
        value("binlog_snapshot_position"),
    ) {
        return Ok(Some(format!("{file}:{position}")));
    }
    Ok(gtids.flatten().filter(|g| !g.trim().is_empty()))
}

#[async_trait::async_trait]
impl SnapshotReads for MySqlReads {
    async fn scan(
        self: Arc<Self>,
        projection: Option<&Vec<usize>>,
        filters: &[EngineExpr],
        limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let schema = match projection {
            Some(p) => Arc::new(self.table.schema().project(p)?),
            None => self.table.schema(),
        };
        let sql = self.table.scan_to_sql(projection, filters, limit)?;
        let held = self.held().await?;
        Ok(Arc::new(MySqlScan::new(self, held, sql, schema)))
    }

    fn snapshot_name(&self) -> Option<String> {
        self.snapshot.get().and_then(|h| h.name.clone())
    }

    fn finish(&self) -> Option<String> {
        if let Some(held) = self.snapshot.get()
            && let Ok(mut holder) = held.holder.try_lock()
        {
            drop(Leased(holder.0.take()));
        }
        self.snapshot_name()
    }
}

/// One query, in the table's snapshot.
struct MySqlScan {
    reads: Arc<MySqlReads>,
    held: Arc<Held>,
    sql: String,
    schema: SchemaRef,
    properties: Arc<PlanProperties>,
}

impl MySqlScan {
    fn new(reads: Arc<MySqlReads>, held: Arc<Held>, sql: String, schema: SchemaRef) -> Self {
        let properties = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(schema.clone()),
            Partitioning::UnknownPartitioning(1),
            EmissionType::Incremental,
            Boundedness::Bounded,
        ));
        MySqlScan {
            reads,
            held,
            sql,
            schema,
            properties,
        }
    }
}

impl std::fmt::Debug for MySqlScan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MySqlSnapshotScan {}", self.sql)
    }
}

impl DisplayAs for MySqlScan {
    fn fmt_as(&self, _: DisplayFormatType, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(
            f,
            "MySqlSnapshotScan snapshot={} sql={}",
            self.held.name.as_deref().unwrap_or("unnamed"),
            self.sql
        )
    }
}

impl ExecutionPlan for MySqlScan {
    fn name(&self) -> &str {
        "MySqlSnapshotScan"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn apply_expressions(
        &self,
        _: &mut dyn FnMut(
            &Arc<dyn datafusion::physical_expr::PhysicalExpr>,
        ) -> DfResult<datafusion::common::tree_node::TreeNodeRecursion>,
    ) -> DfResult<datafusion::common::tree_node::TreeNodeRecursion> {
        Ok(datafusion::common::tree_node::TreeNodeRecursion::Continue)
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![]
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        if children.is_empty() {
            Ok(self)
        } else {
            datafusion::common::internal_err!("MySqlSnapshotScan has no children")
        }
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DfResult<SendableRecordBatchStream> {
        if partition != 0 {
            return datafusion::common::internal_err!("MySqlSnapshotScan has one partition");
        }
        let batch = context.session_config().batch_size().max(1);
        let (reads, held, sql) = (self.reads.clone(), self.held.clone(), self.sql.clone());
        let projected = self.schema.clone();
        // The rows are read by a task of their own, which owns the connection's lock (the
        // driver's row stream borrows it), and handed over as batches; a reader that stops
        // listening ends the task at its next batch.
        let (tx, rx) = tokio::sync::mpsc::channel::<DfResult<RecordBatch>>(2);
        let task = tokio::spawn(async move {
            if let Err(e) = read(&reads, &held, &sql, projected, batch, &tx).await {
                let _ = tx.send(Err(e)).await;
            }
        });
        // The rows end when the task does; a task that panicked ends them with an error,
        // never as if every row had been read.
        let relation = self.reads.relation.clone();
        let rows = futures::stream::unfold((rx, Some(task)), move |(mut rx, task)| {
            let relation = relation.clone();
            async move {
                if let Some(batch) = rx.recv().await {
                    return Some((batch, (rx, task)));
                }
                match task?.await {
                    Ok(()) => None,
                    Err(e) => Some((
                        Err(DataFusionError::Execution(format!(
                            "MySQL table {relation}: the read stopped before its end: {e}"
                        ))),
                        (rx, None),
                    )),
                }
            }
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            self.schema.clone(),
            rows,
        )))
    }
}

/// Read the rows of `sql` in `held`'s snapshot, `batch` rows to a batch, into `tx` (until its
/// reader stops listening).
async fn read(
    reads: &MySqlReads,
    held: &Held,
    sql: &str,
    projected: SchemaRef,
    batch: usize,
    tx: &tokio::sync::mpsc::Sender<DfResult<RecordBatch>>,
) -> DfResult<()> {
    let failed = |e: &dyn std::fmt::Display| reads.failed("query", e);
    let lease = reads.lease(held).await?;
    let mut conn = lease.conn().map_err(|e| failed(&e))?.conn.lock().await;
    let mut result = conn
        .exec_iter(sql, Params::Empty)
        .await
        .map_err(|e| failed(&e))?;
    let Some(mut rows) = result.stream::<Row>().await.map_err(|e| failed(&e))? else {
        return Ok(());
    };
    let schema = Some(projected);
    let mut chunk = Vec::with_capacity(batch);
    loop {
        let row = rows.next().await.transpose().map_err(|e| failed(&e))?;
        let end = row.is_none();
        chunk.extend(row);
        if chunk.len() == batch || (end && !chunk.is_empty()) {
            let out = rows_to_arrow(&chunk, &schema).map_err(|e| failed(&e))?;
            chunk.clear();
            if tx.send(Ok(out)).await.is_err() {
                return Ok(());
            }
        }
        if end {
            return Ok(());
        }
    }
}
