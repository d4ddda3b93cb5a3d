//! OPTIMIZE (compact small files) and VACUUM (remove unreferenced files) on warehouse tables.

pub(crate) mod partitions;

use datafusion::sql::sqlparser::ast::{Expr, ObjectName};
use futures::{StreamExt, TryStreamExt};

use super::counts;
use super::upkeep::Layout;

use crate::engine::{Output, Session};
use crate::error::{Error, Result};

/// `OPTIMIZE t [WHERE partition predicate] [ZORDER BY (c, ...)]`: bin-pack the small files
/// of the selected partitions into larger ones, or Z-order all their files.
pub async fn optimize(
    session: &Session,
    name: &ObjectName,
    predicate: Option<Expr>,
    zorder: Vec<Vec<String>>,
) -> Result<Output> {
    let table = session.table_name(name)?;
    crate::catalog::check_writable_table(&table, false)?;
    // Committed only past other writers' appends: delta-rs would let two compactions of the
    // same files both through (their removals have `dataChange` false), each adding a copy of
    // the rows. A conflict runs it again on the new state.
    // (Boxed: a statement's future is as large as its largest arm's, and scripts nest them.)
    let metrics = super::retry::on_conflict(super::retry::WHOLE_STATEMENT, || {
        Box::pin(async {
            let t = session.warehouse().open_for_write(&table).await?;
            let layout = layout(session, &t, &table, predicate.as_ref(), &zorder).await?;
            // Tests hold an OPTIMIZE here, the table read, while another process compacts it.
            crate::hold_at("maintenance::before_optimize").await;
            super::upkeep::optimize_next(session, &t, &table, &layout).await
        })
    })
    .await
    .map_err(|e| e.context(format!("cannot optimize {table}")))?;
    Ok(counts(&[
        ("num_files_added", metrics.num_files_added as i64),
        ("num_files_removed", metrics.num_files_removed as i64),
    ]))
}

/// The partitions a WHERE selects and the columns a ZORDER BY names, checked against the
/// table (names matched case-insensitively and spelt as the table spells them).
async fn layout(
    session: &Session,
    t: &deltalake::DeltaTable,
    table: &crate::catalog::TableName,
    predicate: Option<&Expr>,
    zorder: &[Vec<String>],
) -> Result<Layout> {
    let schema = crate::statements::table::arrow_schema(t)?;
    let snapshot = t.snapshot()?;
    let partition_names = snapshot.metadata().partition_columns();
    let label = table.to_string();
    let on = partitions::Partitioning {
        table: &label,
        partition_columns: partition_names
            .iter()
            .filter_map(|p| {
                let f = schema.field_with_name(p).ok()?;
                Some((p.clone(), partitions::comparable(f.data_type())))
            })
            .collect(),
        columns: schema.fields().iter().map(|f| f.name().clone()).collect(),
    };
    let partitions = match predicate {
        Some(p) => partitions::filters(session, p, &on).await?,
        None => vec![],
    };
    let mut columns = Vec::with_capacity(zorder.len());
    for path in zorder {
        let Some(field) = schema
            .fields()
            .iter()
            .find(|f| f.name().eq_ignore_ascii_case(&path[0]))
        else {
            return Err(Error::NotFound(format!(
                "OPTIMIZE {table} ZORDER BY names '{}', which is not a column of {table}",
                path.join(".")
            )));
        };
        if partition_names.iter().any(|p| p == field.name()) {
            return Err(Error::Invalid(format!(
                "OPTIMIZE {table} ZORDER BY names '{}', a partition column: Z-ordering sorts the rows within each partition, so name other columns",
                field.name()
            )));
        }
        if path[1..].iter().any(|p| p.contains('.')) || field.name().contains('.') {
            return Err(Error::class(
                "UNSUPPORTED_FEATURE",
                format!(
                    "OPTIMIZE {table} ZORDER BY: column names containing '.' are not supported"
                ),
            ));
        }
        let mut parts = vec![field.name().clone()];
        parts.extend(path[1..].iter().cloned());
        columns.push(parts.join("."));
    }
    Ok(Layout {
        partitions,
        zorder: columns,
    })
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
    // FULL, Databricks' default: every file of the table's directory that no version within
    // the retention reads, files a killed write left behind among them (LITE, delta-rs'
    // default, deletes only the files the log removed, and counted them again on every run).
    let kept = {
        use deltalake::table::config::TablePropertiesExt;
        t.snapshot()?
            .snapshot()
            .table_properties()
            .deleted_file_retention_duration()
    };
    let retain = match retain_hours {
        Some(h) => {
            if !(0.0..=876_000.0).contains(&h) {
                return Err(Error::Invalid(format!("RETAIN {h} HOURS is out of range")));
            }
            // Less than the table's retention is refused unless the session turned Delta's
            // guard off: a reader (or a writer still committing) may need the files it would
            // delete.
            let kept_hours = kept.as_secs_f64() / 3600.0;
            if session.settings().retention_check && h < kept_hours {
                return Err(Error::Invalid(format!(
                    "cannot vacuum {table}: RETAIN {h} HOURS is less than its delta.deletedFileRetentionDuration ({kept_hours} hours): a reader of an older version, or a writer still committing, may need those files; to delete them anyway, SET spark.databricks.delta.retentionDurationCheck.enabled = false first"
                )));
            }
            Some(chrono::Duration::milliseconds((h * 3_600_000.0) as i64))
        }
        None => None,
    };
    let vacuum = |t: deltalake::DeltaTable, dry_run: bool| {
        let mut builder = t
            .vacuum()
            .with_mode(deltalake::operations::vacuum::VacuumMode::Full)
            .with_dry_run(dry_run);
        if let Some(period) = retain {
            builder = builder
                .with_retention_period(period)
                .with_enforce_retention_duration(false);
        }
        builder
    };
    let failed =
        |e: deltalake::DeltaTableError| Error::from(e).context(format!("cannot vacuum {table}"));
    // The files the log removed are candidates even once they are gone (an earlier VACUUM
    // deleted them; delta-rs counts them as deleted again, on every run): only the ones that
    // are there count, as Databricks lists the directory.
    let store = t.log_store().object_store(None);
    let (t, planned) = vacuum(t, true).await.map_err(failed)?;
    // (The paths are the store's, already encoded: `p=a%3Ab` is parsed, not encoded again.)
    let present: std::collections::HashSet<String> = futures::stream::iter(planned.files_deleted)
        .map(|file| {
            let store = store.clone();
            async move {
                use deltalake::logstore::object_store::{
                    Error as StoreError, ObjectStoreExt, path::Path,
                };
                let path = Path::parse(&file).unwrap_or_else(|_| Path::from(file.as_str()));
                match store.head(&path).await {
                    Ok(_) => Ok(Some(file)),
                    Err(StoreError::NotFound { .. }) => Ok(None),
                    Err(e) => Err(e),
                }
            }
        })
        .buffer_unordered(16)
        .try_filter_map(|f| async move { Ok(f) })
        .try_collect()
        .await
        .map_err(|e| failed(e.into()))?;
    if dry_run || present.is_empty() {
        return Ok(counts(&[("num_files_deleted", present.len() as i64)]));
    }
    let (_, metrics) = vacuum(t, false).await.map_err(failed)?;
    let deleted = metrics
        .files_deleted
        .iter()
        .filter(|f| present.contains(*f))
        .count();
    Ok(counts(&[("num_files_deleted", deleted as i64)]))
}
