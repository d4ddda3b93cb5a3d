//! OPTIMIZE (compact small files) and VACUUM (remove unreferenced files) on warehouse tables.

use std::sync::Arc;

use datafusion::sql::sqlparser::ast::ObjectName;
use deltalake::kernel::transaction::CommitProperties;

use super::counts;

use crate::engine::{Output, Session};
use crate::error::{Error, Result};

/// `OPTIMIZE t`: bin-pack small files into larger ones.
pub async fn optimize(session: &Session, name: &ObjectName) -> Result<Output> {
    let table = session.table_name(name)?;
    crate::catalog::check_writable_table(&table, false)?;
    let t = session.warehouse().open_for_write(&table).await?;
    let optimize = t
        .optimize()
        .with_session_state(Arc::new(session.ctx().state()));
    let (_, metrics) = super::upkeep::commit(optimize, CommitProperties::default())
        .await
        .map_err(|e| Error::from(e).context(format!("cannot optimize {table}")))?;
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
