//! Step 4 of a copy: one Delta commit carrying the rows, the `txn` action of this pair's run
//! and the run's [`RunMetadata`]. Exactly once: before writing, nobody may have committed
//! this pair's run since the run read the target ([`check_txn`]), and delta-rs refuses the
//! commit when one that landed meanwhile carries the pair's `txn`. A new target is created
//! (empty) in a commit of its own first, so that the data commit always meets an existing
//! table and its `txn` check. The target must also still be the table the run read: the
//! commit file of the version read unchanged ([`same_target`]), before the write and again
//! just before the commit is put (in the store the write goes through, see
//! [`super::uncommitted`]). Every
//! strategy commits through [`upkeep`], which runs the table's upkeep (checkpoints, log
//! clean-up) after.

use datafusion::arrow::datatypes::DataType;
use deltalake::DeltaTable;
use deltalake::kernel::transaction::CommitProperties;
use deltalake::kernel::{Add, StructField, Transaction};

use super::metadata::{CommitFile, META_KEY, Mark, RunMetadata};
use super::plan::{CopyPlan, Strategy};
use super::resolve::Resolved;
use super::start::StartPoint;
use super::write::Written;
use crate::engine::Session;
use crate::error::{Error, Result};
use crate::statements::table::storable;
use crate::statements::upkeep;

/// The commit properties of run `run_id`: the `txn` action and the run's metadata.
pub(super) fn properties(
    r: &Resolved,
    start: &StartPoint,
    plan: &CopyPlan,
    run_id: &str,
    source_commit: Option<CommitFile>,
) -> CommitProperties {
    let run = r.last_run + 1;
    let files = match &plan.strategy {
        Strategy::WholeFiles(f) => Some(f),
        _ => None,
    };
    let meta = RunMetadata {
        app_id: r.app.clone(),
        run,
        run_id: run_id.to_string(),
        source: r.names.source.to_string(),
        source_version: r.source.version(),
        source_id: r.source.id(),
        source_commit,
        source_snapshot: r.source.snapshot(),
        watermark_column: r.wm.clone(),
        watermark_type: Some(r.wm_type.to_string()),
        previous_mark: start.value().and_then(Mark::of),
        control_mark: r.control_mark.as_ref().and_then(Mark::of),
        new_mark: plan.new_mark.as_ref().and_then(Mark::of),
        mark_files: plan.mark_files.clone(),
        rows: plan.rows,
        null_rows: Some(plan.null_rows),
        whole_files: files.map(|f| f.whole.len()),
        decoded_files: files.map(|f| f.decode.len()),
    };
    CommitProperties::default()
        .with_application_transaction(Transaction::new(&r.app, run))
        .with_metadata(vec![(META_KEY.to_string(), meta.to_json())])
}

/// Exactly once: nobody may have committed this pair's run since the run read the target,
/// and the target is still the table it read ([`same_target`]). Almost always the target
/// has no version past the one read: two look-ups at once (that version's commit and the
/// next one's) answer (a commit landing after
/// it is checked by delta-rs when this run commits: one that carries this pair's `txn`
/// refuses ours as a conflict, and the run starts over). Otherwise the target's log is read
/// again for this pair's `txn`: from the version read on, or whole when the table could not
/// be told the same.
pub(super) async fn check_txn(r: &Resolved) -> Result<()> {
    let Some(t) = &r.target else {
        return Ok(());
    };
    let store = t.log_store().object_store(None);
    let read = t.version().unwrap_or(0);
    let (next, same) = tokio::join!(
        super::metadata::commit_file(store.as_ref(), read + 1),
        same_target(r)
    );
    let fresh = match same.unwrap_or(None) {
        Some(false) => return Err(replaced(r)),
        Some(true) if matches!(next, Ok(None)) => return Ok(()),
        Some(true) => {
            // The log from the version read on is that table's own: brought up to date.
            let mut fresh = t.clone();
            fresh.update_state().await?;
            fresh
        }
        None => {
            // Read afresh, not brought up to date from the state read (which would take
            // another table's commits for its own), and compared by table id; on a store,
            // not from the log's listing this statement kept.
            crate::catalog::forget_listings();
            let mut fresh = DeltaTable::new(t.log_store().clone());
            fresh.load().await?;
            if fresh.snapshot()?.metadata().id() != t.snapshot()?.metadata().id() {
                return Err(replaced(r));
            }
            fresh
        }
    };
    let now = fresh
        .snapshot()?
        .transaction_version(fresh.log_store().as_ref(), &r.app)
        .await?
        .unwrap_or(0);
    if now != r.last_run {
        return Err(Error::Conflict(format!(
            "another run of this copy committed run {now} first"
        )));
    }
    Ok(())
}

/// Whether the target is still the table the run read: the commit file of the version read
/// is there, unchanged. A target dropped and made again at its place since (by another
/// process) has another file of that name, or none yet; a commit on top of the version read
/// would land in the new table's log as if it followed the old one. A file described
/// differently (an entity tag made from an inode that a network file system changes) is read
/// again and compared byte for byte, so that only another commit counts as another table.
/// Ok(None) when it cannot be told (the commit of the version read could not be read when the
/// run opened the target); Err when the store could not be asked (the caller then reads the
/// table afresh and compares table ids).
async fn same_target(r: &Resolved) -> Result<Option<bool>> {
    let Some(read) = &r.target_commit else {
        return Ok(None);
    };
    read.still_there()
        .await
        .map(Some)
        .map_err(|e| Error::Conflict(read.unchecked(e)))
}

/// The run's error when the target it read was replaced.
fn replaced(r: &Resolved) -> Error {
    super::metadata::replaced(
        r.target_version().unwrap_or(0) as u64,
        &r.names.target.to_string(),
    )
}

/// The target to write into: the resolved one, else a new empty one with the columns the
/// plan writes.
pub(super) async fn target(session: &Session, r: &Resolved, plan: &CopyPlan) -> Result<DeltaTable> {
    if let Some(t) = &r.target {
        session.warehouse().check_table_writable(&r.names.target)?;
        crate::catalog::external::check_safe_commits(t).await?;
        return Ok(t.clone());
    }
    let fields = match (&plan.strategy, r.source.delta()) {
        // Whole files are read as they are: the source's exact schema.
        (Strategy::WholeFiles(_), Some(st)) => st.snapshot()?.schema().fields().cloned().collect(),
        _ => storable(plan.rows_df.clone())?
            .schema()
            .fields()
            .iter()
            .map(|f| crate::engine::types::arrow_to_delta(f))
            .collect::<Result<Vec<_>>>()?,
    };
    create(session, r, fields).await
}

/// Create an empty target; if another run created it first, start over on its state.
async fn create(session: &Session, r: &Resolved, fields: Vec<StructField>) -> Result<DeltaTable> {
    use deltalake::kernel::engine::arrow_conversion::TryIntoArrow;
    let name = &r.names.target;
    let fields = fields
        .into_iter()
        .map(without_column_mapping)
        .collect::<Result<Vec<_>>>()?;
    let mut configuration = std::collections::HashMap::new();
    let typed: Vec<(String, DataType)> = fields
        .iter()
        .filter_map(|f| {
            let arrow: std::result::Result<datafusion::arrow::datatypes::Field, _> =
                f.try_into_arrow();
            arrow
                .ok()
                .map(|a| (a.name().clone(), a.data_type().clone()))
        })
        .collect();
    crate::statements::table::keep_stats_exact(&mut configuration, &typed, &[]);
    let created = session
        .warehouse()
        .create_builder(name)
        .await?
        .with_columns(fields)
        .with_configuration(configuration)
        .await;
    match created {
        Ok(t) => {
            session.warehouse().finish_create(name)?;
            Ok(t)
        }
        Err(e) => {
            session.warehouse().forget_failed_create(name).await;
            if session.warehouse().table_exists(name) {
                Err(Error::Conflict(format!(
                    "{name} was created by another run"
                )))
            } else {
                Err(Error::from(e))
            }
        }
    }
}

/// A source field as a column of a target without column mapping: its logical name, without
/// the source's physical names and ids (at every nesting level). A column-mapped source's
/// rows are read by logical name, so the target needs no mapping of its own.
fn without_column_mapping(field: StructField) -> Result<StructField> {
    fn strip(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(map) => {
                if let Some(serde_json::Value::Object(meta)) = map.get_mut("metadata") {
                    meta.retain(|k, _| {
                        !k.starts_with("delta.columnMapping.") && k != "parquet.field.id"
                    });
                }
                map.values_mut().for_each(strip);
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let mut json = serde_json::to_value(&field)
        .map_err(|e| Error::Other(format!("column {}: {e}", field.name)))?;
    strip(&mut json);
    serde_json::from_value(json).map_err(|e| Error::Other(format!("column {}: {e}", field.name)))
}

/// Commit what the writer left (files, or nothing: it committed itself). Returns the
/// target's new version.
pub(super) async fn commit(
    target: &DeltaTable,
    written: Written,
    props: CommitProperties,
) -> Result<Option<i64>> {
    let version = match written {
        Written::Files(adds) => Some(commit_adds(target, adds, props).await?),
        Written::Committed(t) => t.version().map(|v| v as i64),
    };
    fail::fail_point!("copy::after_target_commit", |_| std::process::abort());
    Ok(version)
}

/// Commit new files to `target` as one append; returns its version.
async fn commit_adds(target: &DeltaTable, adds: Vec<Add>, props: CommitProperties) -> Result<i64> {
    // Tests hold a copy here, its files written and not committed.
    crate::hold_at("copy::before_commit").await;
    let (actions, operation) = crate::statements::append_commit(adds);
    let version = upkeep::append_actions(target, actions, operation, props).await?;
    Ok(version as i64)
}
