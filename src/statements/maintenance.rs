//! OPTIMIZE (compact small files) and VACUUM (remove unreferenced files) on warehouse tables.

use datafusion::sql::sqlparser::ast::ObjectName;

use super::counts;

use crate::engine::{Output, Session};
use crate::error::{Error, Result};

/// `OPTIMIZE t`: bin-pack small files into larger ones.
pub async fn optimize(session: &Session, name: &ObjectName) -> Result<Output> {
    let table = session.table_name(name)?;
    crate::catalog::check_writable_table(&table, false)?;
    // Committed only past other writers' appends: delta-rs would let two compactions of the
    // same files both through (their removals have `dataChange` false), each adding a copy of
    // the rows. A conflict runs it again on the new state.
    // (Boxed: a statement's future is as large as its largest arm's, and scripts nest them.)
    let metrics = super::retry::on_conflict(super::retry::WHOLE_STATEMENT, || {
        Box::pin(async {
            let t = session.warehouse().open_for_write(&table).await?;
            // Tests hold an OPTIMIZE here, the table read, while another process compacts it.
            crate::hold_at("maintenance::before_optimize").await;
            super::upkeep::optimize_next(session, &t, &table).await
        })
    })
    .await
    .map_err(|e| e.context(format!("cannot optimize {table}")))?;
    Ok(counts(&[
        ("num_files_added", metrics.num_files_added as i64),
        ("num_files_removed", metrics.num_files_removed as i64),
    ]))
}

/// `VACUUM t [RETAIN n HOURS] [DRY RUN]`.
pub async fn vacuum(
    session: &Session,
    name: &ObjectName,
    retain_hours: Option<f64>,
    dry_run: bool,
) -> Result<Output> {
    let table = session.table_name(name)?;
    crate::catalog::check_writable_table(&table, false)?;
    let t = if dry_run {
        session.warehouse().open(&table).await?
    } else {
        session.warehouse().open_for_write(&table).await?
    };
    let mut builder = t.vacuum().with_dry_run(dry_run);
    if let Some(h) = retain_hours {
        if !(0.0..=876_000.0).contains(&h) {
            return Err(Error::Invalid(format!("RETAIN {h} HOURS is out of range")));
        }
        builder = builder
            .with_retention_period(chrono::Duration::milliseconds((h * 3_600_000.0) as i64))
            .with_enforce_retention_duration(false);
    }
    let (_, metrics) = builder
        .await
        .map_err(|e| Error::from(e).context(format!("cannot vacuum {table}")))?;
    Ok(counts(&[(
        "num_files_deleted",
        metrics.files_deleted.len() as i64,
    )]))
}
