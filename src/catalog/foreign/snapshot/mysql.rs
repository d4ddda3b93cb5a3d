//! MySQL and MariaDB tables read in one snapshot.
//!
//! The first read of a table provider opens `START TRANSACTION WITH CONSISTENT SNAPSHOT, READ
//! ONLY` at `REPEATABLE READ` (the level at which InnoDB keeps one read view for the whole
//! transaction) on a connection it keeps (the *holder*); later reads take the holder in turn.
//! MySQL cannot share a snapshot between connections, so a read that overlaps another read of
//! the same table (the two sides of a self-join) opens a consistent snapshot of its own; the
//! reads of a COPY INCREMENTAL run come one after another, all on the holder.
//!
//! Several connections in one snapshot (`read_connections` above 1, a base table of 16 MB
//! and more with a one-column integer primary key): another connection takes `LOCK TABLES
//! <table> READ` (no write to the table can commit while it holds it, and it waits at most a
//! second for writes under way, else the table is read by one connection), the holder and
//! the *spares* open their consistent snapshots, and the lock is released: every one of them
//! sees the same rows of the table (mydumper's way). A read of the whole table (the server's
//! plan is a full scan) is then split over the spares by ranges of the key, each row in
//! exactly one range.
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
use std::sync::atomic::{AtomicBool, Ordering};

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

/// The longest the table's lock is held while the snapshots of a split read open.
const LOCKED_AT_MOST: std::time::Duration = std::time::Duration::from_secs(10);

/// Bytes of table data one connection of a split read reads at the least (smaller tables
/// are read by one: 16 MB and more are split, as PostgreSQL's 2,048 pages).
const BYTES_PER_CONNECTION: u64 = 8 << 20;

/// The reads of one MySQL or MariaDB table provider, all in one snapshot.
pub(in crate::catalog::foreign) struct MySqlReads {
    pool: Arc<MySQLConnectionPool>,
    table: MyTable,
    /// The table as the database names it, quoted (`` `shop`.`orders` ``).
    relation: String,
    /// The schema and the table as the database spells them.
    names: (String, String),
    /// How many connections one read of the table may use.
    connections: usize,
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
    /// Connections in the holder's snapshot for split reads (none for a table read by one).
    spares: Vec<Arc<tokio::sync::Mutex<Leased>>>,
    /// The integer primary key a split read divides, quoted (with spares).
    key: Option<String>,
    /// Whether a split scan holds the spares.
    claimed: AtomicBool,
}

/// A split scan's hold on the spares, given up when its plan is dropped and its reads have
/// ended (each partition's task keeps it).
struct Claim(Arc<Held>);

impl Claim {
    /// The spares, unless another split scan holds them.
    fn take(held: &Arc<Held>) -> Option<Claim> {
        held.claimed
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
            .then(|| Claim(held.clone()))
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        self.0.claimed.store(false, Ordering::Release);
    }
}

/// What opening a snapshot on a connection gave.
struct Opened {
    /// Whether the connection is in a consistent snapshot (the server may refuse one).
    consistent: bool,
    /// The snapshot's name (see the module's documentation).
    name: Option<String>,
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
    /// The holder or a spare: a connection of the held snapshot.
    Held(tokio::sync::OwnedMutexGuard<Leased>),
    Own(Leased),
}

impl Lease {
    fn conn(&self) -> DfResult<&MySQLConnection> {
        match self {
            Lease::Held(g) => g.conn(),
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
        connections: usize,
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
            names: (schema.to_string(), table.to_string()),
            connections: connections.max(1),
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

    /// A new connection from the pool.
    async fn connect(&self) -> DfResult<Leased> {
        Ok(Leased(Some(
            self.pool
                .connect_direct()
                .await
                .map_err(|e| self.failed("connection", e))?,
        )))
    }

    /// The snapshot, opened on first use: on the holder alone, or with spares for a large
    /// table (see the module's documentation).
    async fn held(&self) -> DfResult<Arc<Held>> {
        self.snapshot
            .get_or_try_init(|| async {
                let leased = self.connect().await?;
                let split = match self.connections {
                    1 => None,
                    _ => self.split_key(leased.conn()?).await,
                };
                let together = match split {
                    Some((key, n)) => self
                        .open_together(&leased, n)
                        .await?
                        .map(|(name, spares)| (name, spares, Some(key))),
                    None => None,
                };
                let (name, spares, key) = match together {
                    Some(t) => t,
                    None => {
                        let opened = open(leased.conn()?)
                            .await
                            .map_err(|e| self.failed("snapshot", e))?;
                        (opened.name, vec![], None)
                    }
                };
                // Tests change the table here, after the snapshot was taken.
                crate::hold_at("foreign::mysql_snapshot").await;
                Ok(Arc::new(Held {
                    name,
                    holder: Arc::new(tokio::sync::Mutex::new(leased)),
                    spares,
                    key,
                    claimed: AtomicBool::new(false),
                }))
            })
            .await
            .cloned()
    }

    /// The key to split reads of the table by and how many spares to open, when the table
    /// is a base table large enough for two connections or more with a one-column integer
    /// primary key (None otherwise, or when the server will not say).
    async fn split_key(&self, conn: &MySQLConnection) -> Option<(String, usize)> {
        let mut c = conn.conn.lock().await;
        let (schema, table) = (&self.names.0, &self.names.1);
        let (kind, bytes): (Option<String>, Option<u64>) = c
            .exec_first(
                "SELECT TABLE_TYPE, DATA_LENGTH FROM information_schema.TABLES \
                 WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?",
                (schema.as_str(), table.as_str()),
            )
            .await
            .ok()
            .flatten()?;
        let n = (bytes? / BYTES_PER_CONNECTION).min(self.connections as u64) as usize;
        if kind.as_deref() != Some("BASE TABLE") || n < 2 {
            return None;
        }
        let keys: Vec<(String, String)> = c
            .exec(
                "SELECT c.COLUMN_NAME, c.DATA_TYPE FROM information_schema.STATISTICS s \
                 JOIN information_schema.COLUMNS c ON c.TABLE_SCHEMA = s.TABLE_SCHEMA \
                 AND c.TABLE_NAME = s.TABLE_NAME AND c.COLUMN_NAME = s.COLUMN_NAME \
                 WHERE s.TABLE_SCHEMA = ? AND s.TABLE_NAME = ? AND s.INDEX_NAME = 'PRIMARY'",
                (schema.as_str(), table.as_str()),
            )
            .await
            .ok()?;
        let [(column, kind)] = keys.as_slice() else {
            return None;
        };
        let integer = ["tinyint", "smallint", "mediumint", "int", "bigint"]
            .iter()
            .any(|t| kind.eq_ignore_ascii_case(t));
        integer.then(|| (format!("`{}`", column.replace('`', "``")), n))
    }

    /// Open the holder's snapshot and `n` spares' in the same state of the table: under a
    /// `LOCK TABLES ... READ` that another connection holds meanwhile, taken once every
    /// connection is at hand and held at most [`LOCKED_AT_MOST`] (an error past it). None
    /// (nothing opened) when the lock is not granted within a second (no privilege, a long
    /// write under way) or the server gives no consistent snapshots.
    async fn open_together(
        &self,
        holder: &Leased,
        n: usize,
    ) -> DfResult<Option<(Option<String>, Vec<Arc<tokio::sync::Mutex<Leased>>>)>> {
        // Every connection first: the lock is held only while the snapshots open.
        let mut spares = Vec::with_capacity(n);
        for _ in 0..n {
            spares.push(self.connect().await?);
        }
        let locker = self.connect().await?;
        {
            let mut l = locker.conn()?.conn.lock().await;
            let _ = l.query_drop("SET SESSION lock_wait_timeout = 1").await;
            if l.query_drop(format!("LOCK TABLES {} READ", self.relation))
                .await
                .is_err()
            {
                return Ok(None);
            }
        }
        let opened: Result<DfResult<Option<Option<String>>>, _> =
            tokio::time::timeout(LOCKED_AT_MOST, async {
                let failed = |e: mysql_async::Error| self.failed("snapshot", e);
                let first = open(holder.conn()?).await.map_err(failed)?;
                // Tests write to the table here: the write waits for the lock's release.
                crate::hold_at("foreign::mysql_spares").await;
                for spare in &spares {
                    if !open(spare.conn()?).await.map_err(failed)?.consistent {
                        return Ok(None);
                    }
                }
                Ok(first.consistent.then_some(first.name))
            })
            .await;
        locker
            .conn()?
            .conn
            .lock()
            .await
            .query_drop("UNLOCK TABLES")
            .await
            .map_err(|e| self.failed("unlock", e))?;
        let name = opened.map_err(|_| {
            self.failed(
                "snapshot",
                format!(
                    "opening {} snapshots under LOCK TABLES took over {} s (the lock is released; \
                     read_connections '1' reads the table with one connection and no lock)",
                    n + 1,
                    LOCKED_AT_MOST.as_secs()
                ),
            )
        })??;
        Ok(name.map(|name| {
            (
                name,
                spares
                    .into_iter()
                    .map(|s| Arc::new(tokio::sync::Mutex::new(s)))
                    .collect(),
            )
        }))
    }

    /// The queries of a split read of the rows `filters` keep (None when one query is the
    /// better read: no spares, another split read holds them, or the server would not read
    /// the whole table anyway), with the claim on the spares they read on.
    async fn split(
        &self,
        held: &Arc<Held>,
        projection: Option<&Vec<usize>>,
        filters: &[EngineExpr],
        whole: &str,
    ) -> DfResult<Option<(Vec<String>, Claim)>> {
        let (Some(key), Some(first)) = (&held.key, held.spares.first()) else {
            return Ok(None);
        };
        let Some(claim) = Claim::take(held) else {
            return Ok(None);
        };
        let failed = |e: mysql_async::Error| self.failed("plan", e);
        let (low, high) = {
            let spare = first.lock().await;
            let mut c = spare.conn()?.conn.lock().await;
            // Split only what the server would read whole anyway (a full scan).
            let plan: Vec<Row> = c.query(format!("EXPLAIN {whole}")).await.map_err(failed)?;
            let [step] = plan.as_slice() else {
                return Ok(None);
            };
            let access: Option<String> = step.get_opt("type").and_then(|v| v.ok());
            if access.as_deref() != Some("ALL") {
                return Ok(None);
            }
            let bounds: Option<(Option<String>, Option<String>)> = c
                .query_first(format!(
                    "SELECT CAST(MIN({key}) AS CHAR), CAST(MAX({key}) AS CHAR) FROM {}",
                    self.relation
                ))
                .await
                .map_err(failed)?;
            let parse = |v: Option<String>| v.and_then(|v| v.parse::<i128>().ok());
            match bounds {
                Some((low, high)) => match (parse(low), parse(high)) {
                    (Some(low), Some(high)) => (low, high),
                    _ => return Ok(None),
                },
                None => return Ok(None),
            }
        };
        let bounds = key_ranges(low, high, held.spares.len());
        if bounds.len() < 2 {
            return Ok(None);
        }
        let select = self.table.scan_to_sql(projection, &[], None)?;
        let predicate = match super::unqualified_conjunction(filters, &MySqlDialect {})? {
            Some(p) => format!("({p}) AND "),
            None => String::new(),
        };
        let sqls = bounds
            .iter()
            .map(|(from, to)| {
                let range = match (from, to) {
                    (None, Some(to)) => format!("{key} < {to}"),
                    (Some(from), None) => format!("{key} >= {from}"),
                    (Some(from), Some(to)) => format!("{key} >= {from} AND {key} < {to}"),
                    (None, None) => "TRUE".to_string(),
                };
                format!("{select} WHERE {predicate}{range}")
            })
            .collect();
        Ok(Some((sqls, claim)))
    }

    /// The holder when free, else a connection with a consistent snapshot of its own.
    async fn lease(&self, held: &Held) -> DfResult<Lease> {
        if let Ok(guard) = held.holder.clone().try_lock_owned() {
            return Ok(Lease::Held(guard));
        }
        let leased = self.connect().await?;
        open(leased.conn()?)
            .await
            .map_err(|e| self.failed("snapshot", e))?;
        Ok(Lease::Own(leased))
    }
}

/// Open a read-only transaction with a consistent snapshot on `conn`; the snapshot's name.
/// A server that refuses READ ONLY gets a consistent snapshot without it, and one that
/// refuses both is read without a transaction (each query its own snapshot, no name).
async fn open(conn: &MySQLConnection) -> Result<Opened, mysql_async::Error> {
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
        return Ok(Opened {
            consistent: false,
            name: None,
        });
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
        return Ok(Opened {
            consistent: true,
            name: Some(format!("{file}:{position}")),
        });
    }
    Ok(Opened {
        consistent: true,
        name: gtids.flatten().filter(|g| !g.trim().is_empty()),
    })
}

/// `n` ranges of a key from `low` to `high` (fewer when there are fewer values), as bounds
/// `[from, to)`: the first open below and the last open above, so that together they hold
/// every value, each in one.
fn key_ranges(low: i128, high: i128, n: usize) -> Vec<(Option<i128>, Option<i128>)> {
    let span = high - low + 1;
    let n = (n as i128).min(span).max(1);
    let step = (span + n - 1) / n;
    let cuts: Vec<i128> = (1..n)
        .map(|i| low + i * step)
        .filter(|c| *c <= high)
        .collect();
    let mut ranges = Vec::with_capacity(cuts.len() + 1);
    let mut from = None;
    for cut in cuts {
        ranges.push((from, Some(cut)));
        from = Some(cut);
    }
    ranges.push((from, None));
    ranges
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
        let split = match limit {
            None => self.split(&held, projection, filters, &sql).await?,
            Some(_) => None,
        };
        let (sqls, claim) = match split {
            Some((sqls, claim)) => (sqls, Some(Arc::new(claim))),
            None => (vec![sql], None),
        };
        Ok(Arc::new(MySqlScan::new(self, held, sqls, claim, schema)))
    }

    fn snapshot_name(&self) -> Option<String> {
        self.snapshot.get().and_then(|h| h.name.clone())
    }

    fn finish(&self) -> Option<String> {
        if let Some(held) = self.snapshot.get() {
            for conn in std::iter::once(&held.holder).chain(&held.spares) {
                if let Ok(mut leased) = conn.try_lock() {
                    drop(Leased(leased.0.take()));
                }
            }
        }
        self.snapshot_name()
    }
}

/// One query per partition, in the table's snapshot: one, or a split read's, each on a
/// spare of its own.
struct MySqlScan {
    reads: Arc<MySqlReads>,
    held: Arc<Held>,
    sqls: Vec<String>,
    /// A split read's hold on the spares.
    claim: Option<Arc<Claim>>,
    schema: SchemaRef,
    properties: Arc<PlanProperties>,
}

impl MySqlScan {
    fn new(
        reads: Arc<MySqlReads>,
        held: Arc<Held>,
        sqls: Vec<String>,
        claim: Option<Arc<Claim>>,
        schema: SchemaRef,
    ) -> Self {
        let properties = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(schema.clone()),
            Partitioning::UnknownPartitioning(sqls.len()),
            EmissionType::Incremental,
            Boundedness::Bounded,
        ));
        MySqlScan {
            reads,
            held,
            sqls,
            claim,
            schema,
            properties,
        }
    }
}

impl std::fmt::Debug for MySqlScan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MySqlSnapshotScan {:?}", self.sqls)
    }
}

impl DisplayAs for MySqlScan {
    fn fmt_as(&self, _: DisplayFormatType, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(
            f,
            "MySqlSnapshotScan snapshot={} sql={}",
            self.held.name.as_deref().unwrap_or("unnamed"),
            self.sqls.join(" | ")
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
        let Some(sql) = self.sqls.get(partition).cloned() else {
            return datafusion::common::internal_err!(
                "MySqlSnapshotScan has no partition {partition}"
            );
        };
        let batch = context.session_config().batch_size().max(1);
        let (reads, held) = (self.reads.clone(), self.held.clone());
        // A split read's partition reads on its own spare (the claim keeps other split
        // reads off them); a single query on the holder, or a snapshot of its own.
        let spare = self
            .claim
            .as_ref()
            .map(|claim| (claim.clone(), self.held.spares.get(partition).cloned()));
        let projected = self.schema.clone();
        // The rows are read by a task of their own, which owns the connection's lock (the
        // driver's row stream borrows it), and handed over as batches; a reader that stops
        // listening ends the task at its next batch.
        let (tx, rx) = tokio::sync::mpsc::channel::<DfResult<RecordBatch>>(2);
        let task = tokio::spawn(async move {
            // A split read's claim on the spares lasts until its rows are read.
            let (_claim, spare) = match spare {
                Some((claim, spare)) => (Some(claim), Some(spare)),
                None => (None, None),
            };
            let lease = match spare {
                Some(Some(spare)) => Ok(Lease::Held(spare.lock_owned().await)),
                Some(None) => Err(DataFusionError::Internal(format!(
                    "MySQL table {}: no connection for part {partition} of a split read",
                    reads.relation
                ))),
                None => reads.lease(&held).await,
            };
            let read = match lease {
                Ok(lease) => read(&reads, &lease, &sql, projected, batch, &tx).await,
                Err(e) => Err(e),
            };
            if let Err(e) = read {
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

/// Read the rows of `sql` on `lease`, `batch` rows to a batch, into `tx` (until its reader
/// stops listening).
async fn read(
    reads: &MySqlReads,
    lease: &Lease,
    sql: &str,
    projected: SchemaRef,
    batch: usize,
    tx: &tokio::sync::mpsc::Sender<DfResult<RecordBatch>>,
) -> DfResult<()> {
    let failed = |e: &dyn std::fmt::Display| reads.failed("query", e);
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
