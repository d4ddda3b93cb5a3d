//! A database table's reads in one snapshot: every read of one table provider (one statement;
//! one COPY INCREMENTAL run, whose count, window and rows are separate queries) sees the
//! database as of one moment, and a copy records which.
//!
//! - PostgreSQL ([`postgres`]): one `REPEATABLE READ READ ONLY` transaction, whose exported
//!   snapshot other connections join; large tables are read over several. The tables of one
//!   database a statement reads share one snapshot (see [`statement`]).
//! - MySQL and MariaDB ([`mysql`]): one `START TRANSACTION WITH CONSISTENT SNAPSHOT, READ
//!   ONLY` on one connection, which the reads take in turn; with `read_connections`, a large
//!   table's snapshot is opened on several connections at once under a brief `LOCK TABLES
//!   ... READ`, and a whole-table read is split over them by ranges of its primary key.

mod mysql;
mod postgres;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use datafusion::error::Result as DfResult;
use datafusion::logical_expr::Expr as EngineExpr;
use datafusion::physical_plan::ExecutionPlan;
use datafusion_table_providers::sql::db_connection_pool::postgrespool::PostgresConnectionPool;

pub(super) use mysql::MySqlReads;
pub(super) use postgres::PostgresReads;

/// The reads of one database table, in one snapshot.
#[async_trait::async_trait]
pub(super) trait SnapshotReads: std::fmt::Debug + Send + Sync {
    /// The plan that reads `projection` of the rows `filters` keep (at most `limit`), in the
    /// snapshot (opened by the first scan).
    async fn scan(
        self: Arc<Self>,
        projection: Option<&Vec<usize>>,
        filters: &[EngineExpr],
        limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>>;

    /// The snapshot's name as the database gives it, once a read has opened it (None where
    /// the database has no name for it).
    fn snapshot_name(&self) -> Option<String>;

    /// End the snapshot's transaction: every read has run (a later one fails, naming this).
    /// Returns the snapshot's name.
    fn finish(&self) -> Option<String>;
}

/// A snapshot several tables' reads share: opened by the first.
type Shared = Arc<tokio::sync::OnceCell<Arc<postgres::Held>>>;

/// The running statement's shared PostgreSQL snapshots, by connection pool: each kept while
/// a table provider that reads in it lives (the tables of one query, planned together), the
/// pool kept so that its address names no other while the statement runs.
type Snapshots = HashMap<
    usize,
    (
        Arc<PostgresConnectionPool>,
        Weak<tokio::sync::OnceCell<Arc<postgres::Held>>>,
    ),
>;

tokio::task_local! {
    static STATEMENT: Arc<Mutex<Snapshots>>;
}

/// Run `work` as one statement: the PostgreSQL tables of one database a query of it reads
/// together (a join, a subquery, `INSERT ... SELECT`) are read in one snapshot. A script's
/// or loop's queries one after another each have their own; outside (and in [`alone`]) each
/// table provider reads in a snapshot of its own.
pub async fn statement<F: std::future::Future>(work: F) -> F::Output {
    STATEMENT.scope(Default::default(), work).await
}

/// Run `work` with snapshots of its own, not the statement's: a copy's source, whose run
/// records and ends its snapshot.
pub async fn alone<F: std::future::Future>(work: F) -> F::Output {
    statement(work).await
}

/// The running statement's snapshot for the database of `pool` while another provider
/// reads in it, else a new one (None outside a statement).
fn shared(pool: &Arc<PostgresConnectionPool>) -> Option<Shared> {
    let key = Arc::as_ptr(pool) as usize;
    STATEMENT
        .try_with(|s| {
            let mut map = s.lock().ok()?;
            if let Some(cell) = map.get(&key).and_then(|(_, cell)| cell.upgrade()) {
                return Some(cell);
            }
            let cell: Shared = Default::default();
            map.insert(key, (pool.clone(), Arc::downgrade(&cell)));
            Some(cell)
        })
        .ok()
        .flatten()
}

/// The filters as one condition on unqualified columns, in `dialect` (None without filters):
/// the extra condition of each query of a split read.
fn unqualified_conjunction(
    filters: &[EngineExpr],
    dialect: &dyn datafusion::sql::unparser::dialect::Dialect,
) -> DfResult<Option<String>> {
    use datafusion::common::tree_node::{Transformed, TreeNode};
    let Some(all) = datafusion::logical_expr::utils::conjunction(filters.iter().cloned()) else {
        return Ok(None);
    };
    let all = all
        .transform(|e| match e {
            EngineExpr::Column(c) if c.relation.is_some() => Ok(Transformed::yes(
                EngineExpr::Column(datafusion::common::Column::new_unqualified(c.name)),
            )),
            e => Ok(Transformed::no(e)),
        })?
        .data;
    Ok(Some(
        datafusion::sql::unparser::Unparser::new(dialect)
            .expr_to_sql(&all)?
            .to_string(),
    ))
}
