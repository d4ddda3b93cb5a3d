//! A database table's reads in one snapshot: every read of one table provider (one statement;
//! one COPY INCREMENTAL run, whose count, window and rows are separate queries) sees the
//! database as of one moment, and a copy records which.
//!
//! - PostgreSQL ([`postgres`]): one `REPEATABLE READ READ ONLY` transaction, whose exported
//!   snapshot other connections join; large tables are read over several.
//! - MySQL and MariaDB ([`mysql`]): one `START TRANSACTION WITH CONSISTENT SNAPSHOT, READ
//!   ONLY` on one connection, which the reads take in turn.

mod mysql;
mod postgres;

use std::sync::Arc;

use datafusion::error::Result as DfResult;
use datafusion::logical_expr::Expr as EngineExpr;
use datafusion::physical_plan::ExecutionPlan;

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
