//! PostgreSQL tables read in one snapshot, over several connections when the table is large.
//!
//! Every read of one table provider runs in one `REPEATABLE READ READ ONLY` transaction's
//! snapshot. The first read opens that transaction on a connection it keeps (the *holder*),
//! which exports its snapshot (`pg_export_snapshot()`); a read that finds the holder busy
//! imports the snapshot on a connection of its own (`SET TRANSACTION SNAPSHOT`), and so do the
//! extra connections of a split read. The holder's `txid_current_snapshot()` is the snapshot's
//! name, which a copy records with its run.
//!
//! A large table scanned whole (PostgreSQL itself would read every page: its plan is a
//! sequential scan) is split into ranges of pages (`ctid`), one connection each, all in the
//! one snapshot: together they read each row exactly once. An index scan, a LIMIT, a view, a
//! partitioned or inherited table, or a server before 14 (no TID range scans) is read with
//! one query.
//!
//! Connections leave a transaction before they go back to the pool: a connection dropped in
//! one is rolled back by a task of its own first.

use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::TableProvider;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::Expr as EngineExpr;
use datafusion::physical_expr::EquivalenceProperties;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
};
use datafusion::sql::unparser::dialect::PostgreSqlDialect;
use datafusion_federation::FederatedTableProviderAdaptor;
use datafusion_table_providers::sql::db_connection_pool::dbconnection::AsyncDbConnection;
use datafusion_table_providers::sql::db_connection_pool::dbconnection::postgresconn::{
    PostgresConnection, PostgresPooledConnection,
};
use datafusion_table_providers::sql::db_connection_pool::postgrespool::PostgresConnectionPool;
use datafusion_table_providers::sql::sql_provider_datafusion::SqlTable;
use futures::{StreamExt, TryStreamExt};

use super::SnapshotReads;
use crate::catalog::foreign::connect::Secrets;
use tokio_postgres::types::ToSql;

/// The provider's own table: its SQL for a scan.
type PgTable = SqlTable<PostgresPooledConnection, &'static (dyn ToSql + Sync)>;

/// Pages one connection reads at the least: smaller tables are read with one query.
const PAGES_PER_CONNECTION: i64 = 1024;

/// The reads of one PostgreSQL table provider, all in one snapshot.
pub(in crate::catalog::foreign) struct PostgresReads {
    pool: Arc<PostgresConnectionPool>,
    table: Arc<dyn TableProvider>,
    /// The table as PostgreSQL names it, quoted (`"public"."orders"`).
    relation: String,
    /// How many connections one scan may use.
    connections: usize,
    snapshot: tokio::sync::OnceCell<Arc<Held>>,
    /// The snapshot the running statement's reads of this database share, if any.
    shared: Option<super::Shared>,
    secrets: Secrets,
}

impl std::fmt::Debug for PostgresReads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "snapshot reads of {}", self.relation)
    }
}

/// The open transaction whose snapshot every read shares.
pub(super) struct Held {
    /// `pg_export_snapshot()`'s id: None where the server refuses to export (then no read
    /// can join the snapshot, and reads take turns on the holder).
    id: Option<String>,
    /// `txid_current_snapshot()`: `xmin:xmax:xip,...` (None where the server has no such
    /// function).
    name: Option<String>,
    /// The server's `server_version_num`.
    version: i32,
    holder: Arc<tokio::sync::Mutex<Leased>>,
}

/// A pooled connection in a transaction, rolled back before it returns to the pool.
struct Leased(Option<PostgresConnection>);

impl Drop for Leased {
    fn drop(&mut self) {
        let Some(conn) = self.0.take() else {
            return;
        };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = conn.conn.batch_execute("ROLLBACK").await;
                drop(conn);
            });
        }
    }
}

impl Leased {
    fn conn(&self) -> DfResult<&PostgresConnection> {
        self.0.as_ref().ok_or_else(|| {
            DataFusionError::Execution(
                "a PostgreSQL read after its snapshot's transaction ended (the reads of a run are over once its rows are written)".into(),
            )
        })
    }
}

impl PostgresReads {
    /// Reads of `provider` (the PostgreSQL provider's table) in one snapshot; None for a
    /// provider of another shape.
    pub(in crate::catalog::foreign) fn of(
        pool: Arc<PostgresConnectionPool>,
        provider: &Arc<dyn TableProvider>,
        schema: &str,
        table: &str,
        connections: usize,
        secrets: Secrets,
    ) -> Option<PostgresReads> {
        let inner = provider
            .downcast_ref::<FederatedTableProviderAdaptor>()
            .and_then(|a| a.table_provider.clone())
            .unwrap_or_else(|| provider.clone());
        inner.downcast_ref::<PgTable>()?;
        let quote = |s: &str| format!("\"{}\"", s.replace('"', "\"\""));
        let shared = super::shared(&pool);
        Some(PostgresReads {
            pool,
            table: inner,
            relation: format!("{}.{}", quote(schema), quote(table)),
            connections: connections.max(1),
            snapshot: tokio::sync::OnceCell::new(),
            shared,
            secrets,
        })
    }

    fn sql_table(&self) -> DfResult<&PgTable> {
        self.table
            .downcast_ref::<PgTable>()
            .ok_or_else(|| DataFusionError::Internal("not a PostgreSQL table".into()))
    }

    fn failed(&self, what: &str, e: impl std::fmt::Display) -> DataFusionError {
        DataFusionError::Execution(
            self.secrets
                .scrub(format!("PostgreSQL table {}: {what}: {e}", self.relation)),
        )
    }

    /// The snapshot, opened on first use: the statement's for the tables of this database
    /// (see [`super::statement`]) when other connections can join it, else one of its own.
    async fn held(&self) -> DfResult<Arc<Held>> {
        self.snapshot
            .get_or_try_init(|| async {
                let Some(shared) = &self.shared else {
                    return self.open().await;
                };
                let opened_here = std::sync::atomic::AtomicBool::new(false);
                let held = shared
                    .get_or_try_init(|| async {
                        opened_here.store(true, std::sync::atomic::Ordering::Relaxed);
                        self.open().await
                    })
                    .await?
                    .clone();
                // A snapshot that cannot be exported is read by its holder alone: another
                // table's reads waiting for it could wait for each other.
                if held.id.is_some() || opened_here.into_inner() {
                    Ok(held)
                } else {
                    self.open().await
                }
            })
            .await
            .cloned()
    }

    /// Open a transaction and its snapshot on a connection of its own.
    async fn open(&self) -> DfResult<Arc<Held>> {
        let conn = self
            .pool
            .connect_direct()
            .await
            .map_err(|e| self.failed("connection", e))?;
        let leased = Leased(Some(conn));
        let c = &leased.conn()?.conn;
        // Each try in a transaction of its own (a failed query ends one), the first
        // leaving whatever transaction a connection came back in. The first query
        // fixes the transaction's snapshot and exports it; a server that cannot export
        // gets a transaction without (its reads take turns on this connection), and
        // one that cannot name its snapshot records none.
        let begin = "ROLLBACK; BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY";
        let snapshot = "txid_current_snapshot()::text, current_setting('server_version_num')::int";
        let mut found = None;
        for query in [
            format!("SELECT {snapshot}, pg_export_snapshot()"),
            format!("SELECT {snapshot}"),
        ] {
            c.batch_execute(begin)
                .await
                .map_err(|e| self.failed("transaction", e))?;
            if let Ok(row) = c.query_one(&query, &[]).await {
                found = Some(row);
                break;
            }
        }
        if found.is_none() {
            c.batch_execute(begin)
                .await
                .map_err(|e| self.failed("transaction", e))?;
        }
        let (id, name, version) = match found {
            Some(row) => (
                row.try_get::<_, String>(2).ok(),
                row.try_get::<_, String>(0).ok(),
                row.try_get::<_, i32>(1).unwrap_or(0),
            ),
            None => (None, None, 0),
        };
        let id = id.filter(|id| {
            !id.is_empty() && id.chars().all(|ch| ch.is_ascii_hexdigit() || ch == '-')
        });
        Ok(Arc::new(Held {
            id,
            name,
            version,
            holder: Arc::new(tokio::sync::Mutex::new(leased)),
        }))
    }

    /// The plan that reads `projection` of the rows `filters` keep (at most `limit`).
    async fn plan(
        self: Arc<Self>,
        projection: Option<&Vec<usize>>,
        filters: &[EngineExpr],
        limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let table = self.sql_table()?;
        let schema = match projection {
            Some(p) => Arc::new(self.table.schema().project(p)?),
            None => self.table.schema(),
        };
        let whole = table.scan_to_sql(projection, filters, limit)?;
        let held = self.held().await?;
        let ranges = if limit.is_none() && held.id.is_some() && held.version >= 140000 {
            self.ranges(&held, &whole).await?
        } else {
            vec![]
        };
        let sqls = if ranges.len() < 2 {
            vec![whole]
        } else {
            let select = table.scan_to_sql(projection, &[], None)?;
            let predicate = match super::unqualified_conjunction(filters, &PostgreSqlDialect {})? {
                Some(p) => format!("({p}) AND "),
                None => String::new(),
            };
            ranges
                .iter()
                .map(|range| format!("{select} WHERE {predicate}{range}"))
                .collect()
        };
        Ok(Arc::new(SnapshotScan::new(self, held, sqls, schema)))
    }

    /// Page ranges for a split read of `sql` (none when one query is the better read).
    async fn ranges(&self, held: &Held, sql: &str) -> DfResult<Vec<String>> {
        if self.connections < 2 {
            return Ok(vec![]);
        }
        let holder = held.holder.lock().await;
        let c = &holder.conn()?.conn;
        let row = c
            .query_opt(
                "SELECT pg_relation_size(c.oid) / current_setting('block_size')::bigint, c.relkind::text, \
                 EXISTS (SELECT 1 FROM pg_inherits i WHERE i.inhparent = c.oid) \
                 FROM pg_class c WHERE c.oid = to_regclass($1)",
                &[&self.relation],
            )
            .await
            .map_err(|e| self.failed("table size", e))?;
        let Some(row) = row else {
            return Ok(vec![]);
        };
        let (pages, kind, inherited): (i64, String, bool) = (row.get(0), row.get(1), row.get(2));
        if kind != "r" || inherited || pages < 2 * PAGES_PER_CONNECTION {
            return Ok(vec![]);
        }
        // Split only what PostgreSQL would read whole anyway.
        let plan: serde_json::Value = {
            let row = c
                .query_one(&format!("EXPLAIN (FORMAT JSON) {sql}"), &[])
                .await
                .map_err(|e| self.failed("plan", e))?;
            let text: String = match row.try_get::<_, String>(0) {
                Ok(t) => t,
                Err(_) => row
                    .try_get::<_, serde_json::Value>(0)
                    .map(|v| v.to_string())
                    .map_err(|e| self.failed("plan", e))?,
            };
            serde_json::from_str(&text).map_err(|e| self.failed("plan", e))?
        };
        if !sequential(&plan[0]["Plan"]) {
            return Ok(vec![]);
        }
        let n = (self.connections as i64)
            .min(pages / PAGES_PER_CONNECTION)
            .max(1);
        let step = (pages + n - 1) / n;
        Ok((0..n)
            .map(|i| {
                let from = format!("ctid >= '({},0)'::tid", i * step);
                let to = format!("ctid < '({},0)'::tid", (i + 1) * step);
                match (i, i + 1 == n) {
                    (0, true) => "TRUE".to_string(),
                    (0, false) => to,
                    (_, true) => from,
                    _ => format!("{from} AND {to}"),
                }
            })
            .collect())
    }

    /// A connection in the snapshot: the holder when free, else a new one that joins it.
    async fn lease(&self, held: &Held) -> DfResult<Lease> {
        if let Ok(guard) = held.holder.clone().try_lock_owned() {
            return Ok(Lease::Holder(guard));
        }
        let Some(id) = &held.id else {
            // The snapshot cannot be shared: wait for the holder.
            return Ok(Lease::Holder(held.holder.clone().lock_owned().await));
        };
        // A pool taken up by other reads cannot stall this one: the holder, once free, serves.
        // (A pool that cannot give a connection in time leaves the read to the holder too.)
        let conn = tokio::select! {
            Ok(conn) = self.pool.connect_direct() => conn,
            holder = held.holder.clone().lock_owned() => return Ok(Lease::Holder(holder)),
        };
        let leased = Leased(Some(conn));
        leased
            .conn()?
            .conn
            .batch_execute(&format!(
                "ROLLBACK; BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SET TRANSACTION SNAPSHOT '{id}'"
            ))
            .await
            .map_err(|e| self.failed("snapshot", e))?;
        // Tests hold a read that joined the snapshot here, to change the table before it reads.
        crate::hold_at("foreign::joined_snapshot").await;
        Ok(Lease::Own(Box::new(leased)))
    }
}

#[async_trait::async_trait]
impl SnapshotReads for PostgresReads {
    async fn scan(
        self: Arc<Self>,
        projection: Option<&Vec<usize>>,
        filters: &[EngineExpr],
        limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        self.plan(projection, filters, limit).await
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

/// Whether a plan (of `EXPLAIN (FORMAT JSON)`) reads its table by a sequential scan, maybe
/// under a Gather.
fn sequential(plan: &serde_json::Value) -> bool {
    match plan["Node Type"].as_str() {
        Some("Seq Scan") => true,
        Some("Gather") => plan["Plans"]
            .as_array()
            .is_some_and(|p| p.len() == 1 && sequential(&p[0])),
        _ => false,
    }
}

/// A connection a read holds while its rows stream.
enum Lease {
    Holder(tokio::sync::OwnedMutexGuard<Leased>),
    Own(Box<Leased>),
}

impl Lease {
    fn conn(&self) -> DfResult<&PostgresConnection> {
        match self {
            Lease::Holder(g) => g.conn(),
            Lease::Own(l) => l.conn(),
        }
    }
}

/// One query per partition, every one in the same snapshot.
struct SnapshotScan {
    reads: Arc<PostgresReads>,
    held: Arc<Held>,
    sqls: Vec<String>,
    schema: SchemaRef,
    properties: Arc<PlanProperties>,
}

impl SnapshotScan {
    fn new(
        reads: Arc<PostgresReads>,
        held: Arc<Held>,
        sqls: Vec<String>,
        schema: SchemaRef,
    ) -> Self {
        let properties = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(schema.clone()),
            Partitioning::UnknownPartitioning(sqls.len()),
            EmissionType::Incremental,
            Boundedness::Bounded,
        ));
        SnapshotScan {
            reads,
            held,
            sqls,
            schema,
            properties,
        }
    }
}

impl std::fmt::Debug for SnapshotScan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PostgresSnapshotScan {:?}", self.sqls)
    }
}

impl DisplayAs for SnapshotScan {
    fn fmt_as(&self, _: DisplayFormatType, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(
            f,
            "PostgresSnapshotScan snapshot={} sql={}",
            self.held.name.as_deref().unwrap_or("unnamed"),
            self.sqls.join(" | ")
        )
    }
}

impl ExecutionPlan for SnapshotScan {
    fn name(&self) -> &str {
        "PostgresSnapshotScan"
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
            datafusion::common::internal_err!("PostgresSnapshotScan has no children")
        }
    }

    fn execute(
        &self,
        partition: usize,
        _context: Arc<TaskContext>,
    ) -> DfResult<SendableRecordBatchStream> {
        let sql = self
            .sqls
            .get(partition)
            .cloned()
            .ok_or_else(|| DataFusionError::Internal(format!("no partition {partition}")))?;
        let (reads, held, schema) = (self.reads.clone(), self.held.clone(), self.schema.clone());
        let projected = schema.clone();
        let rows = futures::stream::once(async move {
            let lease = reads.lease(&held).await?;
            let stream = AsyncDbConnection::query_arrow(lease.conn()?, &sql, &[], Some(projected))
                .await
                .map_err(|e| reads.failed("query", e))?;
            // The connection stays leased until the rows are read (or the read dropped).
            let failed = reads.clone();
            Ok::<_, DataFusionError>(stream.map(move |batch| {
                let _ = &lease;
                batch.map_err(|e| failed.failed("query", e))
            }))
        })
        .try_flatten();
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, rows)))
    }
}
