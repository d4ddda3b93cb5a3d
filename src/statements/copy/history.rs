//! `system.tidemark.copy_runs`: one row per COPY INCREMENTAL run, failures included, appended
//! as blind Delta appends (which never conflict with each other).

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::array::{
    ArrayRef, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use deltalake::kernel::transaction::{CommitData, TransactionError};
use deltalake::logstore::CommitOrBytes;
use deltalake::writer::{DeltaWriter, RecordBatchWriter};
use deltalake::{BlindDeltaTable, DeltaTable, TableProperty};

use crate::catalog::{SYSTEM, TableName, Warehouse};

/// The history table kept open between appends, per warehouse root, instead of replaying its
/// log again: its protocol and metadata (no file list), and the version the next append tries
/// first. `None` until first opened (or after a failed write).
type Kept = Arc<tokio::sync::Mutex<Option<Appendable>>>;

static KEPT: std::sync::LazyLock<std::sync::Mutex<HashMap<String, Kept>>> =
    std::sync::LazyLock::new(Default::default);

/// The history table of `warehouse`, kept open.
fn kept(warehouse: &Warehouse) -> Kept {
    let mut kept = KEPT.lock().unwrap_or_else(|e| e.into_inner());
    kept.entry(warehouse.root().to_string())
        .or_default()
        .clone()
}

/// An append-only table kept open.
#[derive(Debug)]
struct Appendable {
    table: BlindDeltaTable,
    next_version: u64,
    /// The number of small files the history had at a version this process loaded it at
    /// (its checkpoint): the next look at compaction needs no load while those and the
    /// appends since cannot reach the number that calls for one.
    small_files: Option<(u64, usize)>,
}
use crate::engine::Session;
use crate::error::{Error, Result};
use crate::statements::group_commit::Registry;

/// The history table's name.
pub fn table_name() -> TableName {
    TableName::new(SYSTEM, "tidemark", "copy_runs")
}

/// One run as recorded.
#[derive(Debug, Clone, Default)]
pub struct RunRecord {
    pub run_id: String,
    pub started_at_us: i64,
    pub finished_at_us: i64,
    pub source: String,
    pub target: String,
    pub watermark_column: Option<String>,
    pub previous_mark: Option<String>,
    pub new_mark: Option<String>,
    pub rows_copied: i64,
    pub null_watermark_rows: i64,
    pub source_version: Option<i64>,
    pub target_version: Option<i64>,
    pub status: String,
    pub error: Option<String>,
    /// The database snapshot the run read (PostgreSQL's `txid_current_snapshot()`).
    pub source_snapshot: Option<String>,
    /// Set once the run's target commit has begun (not a history column).
    pub commit_started: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

/// Schema of `system.tidemark.copy_runs` (and of COPY's result row, minus the run id/times).
pub fn schema() -> SchemaRef {
    let ts = DataType::Timestamp(
        datafusion::arrow::datatypes::TimeUnit::Microsecond,
        Some("UTC".into()),
    );
    Arc::new(Schema::new(vec![
        Field::new("run_id", DataType::Utf8, false),
        Field::new("started_at", ts.clone(), false),
        Field::new("finished_at", ts, false),
        Field::new("source", DataType::Utf8, false),
        Field::new("target", DataType::Utf8, false),
        Field::new("watermark_column", DataType::Utf8, true),
        Field::new("previous_mark", DataType::Utf8, true),
        Field::new("new_mark", DataType::Utf8, true),
        Field::new("rows_copied", DataType::Int64, false),
        Field::new("null_watermark_rows", DataType::Int64, false),
        Field::new("source_version", DataType::Int64, true),
        Field::new("target_version", DataType::Int64, true),
        Field::new("duration_ms", DataType::Int64, false),
        Field::new("status", DataType::Utf8, false),
        Field::new("error", DataType::Utf8, true),
        Field::new("source_snapshot", DataType::Utf8, true),
    ]))
}

/// Rows as a batch of [`schema`].
pub fn to_batch(records: &[RunRecord]) -> Result<RecordBatch> {
    let s = |f: &dyn Fn(&RunRecord) -> Option<String>| -> ArrayRef {
        Arc::new(StringArray::from(records.iter().map(f).collect::<Vec<_>>()))
    };
    let i = |f: &dyn Fn(&RunRecord) -> Option<i64>| -> ArrayRef {
        Arc::new(Int64Array::from(records.iter().map(f).collect::<Vec<_>>()))
    };
    let t = |f: &dyn Fn(&RunRecord) -> i64| -> ArrayRef {
        Arc::new(
            TimestampMicrosecondArray::from(records.iter().map(f).collect::<Vec<_>>())
                .with_timezone("UTC"),
        )
    };
    Ok(RecordBatch::try_new(
        schema(),
        vec![
            s(&|r| Some(r.run_id.clone())),
            t(&|r| r.started_at_us),
            t(&|r| r.finished_at_us),
            s(&|r| Some(r.source.clone())),
            s(&|r| Some(r.target.clone())),
            s(&|r| r.watermark_column.clone()),
            s(&|r| r.previous_mark.clone()),
            s(&|r| r.new_mark.clone()),
            i(&|r| Some(r.rows_copied)),
            i(&|r| Some(r.null_watermark_rows)),
            i(&|r| r.source_version),
            i(&|r| r.target_version),
            i(&|r| Some((r.finished_at_us - r.started_at_us) / 1000)),
            s(&|r| Some(r.status.clone())),
            s(&|r| r.error.clone()),
            s(&|r| r.source_snapshot.clone()),
        ],
    )?)
}

/// Queued history rows: concurrent copies of this process share history commits.
static APPENDS: Registry<RunRecord> = Registry::new();

/// Append run records to the history table, creating it on first use.
pub async fn append(session: &Session, records: &[RunRecord]) -> Result<()> {
    if records.is_empty() {
        return Ok(());
    }
    fail::fail_point!("copy::during_history_write", |_| std::process::abort());
    let name = table_name();
    let group = APPENDS.group(&name);
    for r in records {
        group
            .submit(r.clone(), |batch| write(session, batch))
            .await?;
    }
    Ok(())
}

/// Start opening the history table in the background, so that the write at the end of a
/// run finds it open (the run's own work overlaps the log replay).
pub fn prefetch(session: &Session) {
    let warehouse = session.warehouse().clone();
    tokio::spawn(async move {
        let slot = kept(&warehouse);
        let mut kept = slot.lock().await;
        // A history not made yet fails to open (its first append makes it).
        if kept.is_none()
            && let Ok(t) = open_appendable(&warehouse).await
        {
            *kept = Some(t);
        }
    });
}

/// The history table's protocol and metadata, without its file list: an append needs no more.
async fn open_appendable(warehouse: &Warehouse) -> Result<Appendable> {
    let log_store = warehouse.handle(&table_name()).await?.log_store();
    let table = BlindDeltaTable::try_new_with_log_store(log_store).await?;
    let next_version = table.version() + 1;
    Ok(Appendable {
        table,
        next_version,
        small_files: None,
    })
}

/// One blind append of a batch of records.
async fn write(session: &Session, records: Vec<RunRecord>) -> Result<()> {
    let batch = to_batch(&records)?;
    let slot = kept(session.warehouse());
    let mut kept = slot.lock().await;
    // Two first writers racing to create the table, or another writer that changed the
    // table's metadata, are conflicts: open it again and append next time.
    let mut retry = crate::statements::retry::Retry::up_to(crate::statements::retry::SMALL_WRITE);
    loop {
        match append_batch(session, &mut kept, &batch).await {
            Ok(()) => return Ok(()),
            Err(e) => retry
                .again(e)
                .await
                .map_err(|e| e.context("cannot record the run in system.tidemark.copy_runs"))?,
        }
    }
}

/// Append `batch` as one Parquet file and one commit. No query plan and no file list: this
/// runs once per copy and must stay cheap. Appends never conflict with each other or with a
/// compaction, so a version taken by another writer is simply skipped, unless that commit
/// changed the table's protocol or metadata (then the table is opened again).
async fn append_batch(
    session: &Session,
    kept: &mut Option<Appendable>,
    batch: &RecordBatch,
) -> Result<()> {
    let warehouse = &session.warehouse();
    let mut appendable = match kept.take() {
        Some(a) => a,
        None => {
            // Another process may be creating the table this moment: a race, tried again.
            let opened = async {
                if !warehouse.table_exists(&table_name())
                    && let Err(e) = create(session).await
                    // Made by another process meanwhile (which may have appended already):
                    // opened as it is.
                    && !warehouse.table_exists(&table_name())
                {
                    return Err(e);
                }
                open_appendable(warehouse).await
            };
            opened.await.map_err(|e| {
                let log = warehouse
                    .table_path(&table_name())
                    .ok()
                    .and_then(|p| p.local().map(crate::catalog::log::dir));
                // (On an object store a failed open is taken for that race too.)
                if log
                    .and_then(|log| crate::catalog::log::newest_version(&log))
                    .is_none_or(|(v, _)| v == 0)
                {
                    // No commit yet, or only the creating one: another process creating it.
                    Error::Conflict(format!("opening {}: {e}", table_name()))
                } else {
                    e
                }
            })?
        }
    };
    // A history table made before a column was added gets it (nullable: older rows hold
    // NULL), in a commit of its own; then it is opened again.
    let missing = schema()
        .fields()
        .iter()
        .filter(|f| appendable.table.schema().field(f.name()).is_none())
        .map(|f| crate::engine::types::arrow_to_delta(f))
        .collect::<Result<Vec<_>>>()?;
    if !missing.is_empty() {
        let table = warehouse.open(&table_name()).await?;
        table
            .add_columns()
            .with_fields(missing)
            .await
            .map_err(|e| Error::Conflict(format!("adding columns to {}: {e}", table_name())))?;
        return Err(Error::Conflict(format!(
            "{} gained columns; opening it again",
            table_name()
        )));
    }
    // The record's columns in the table's order (a column of the table this build does not
    // know makes the append fail, naming the schemas: it is never left out silently).
    let columns: Vec<usize> = appendable
        .table
        .schema()
        .fields()
        .filter_map(|f| batch.schema().index_of(f.name()).ok())
        .collect();
    let batch = batch.project(&columns)?;
    // In the table's own schema (a table another writer made may have nullable columns).
    let batch = match appendable.table.arrow_schema() {
        Ok(theirs) => batch.clone().with_schema(theirs).unwrap_or(batch),
        Err(_) => batch,
    };
    let mut writer = RecordBatchWriter::for_blind_appends(&appendable.table)?;
    writer.write(batch).await?;
    let adds = writer.flush().await?;
    let (actions, operation) = crate::statements::append_commit(adds);
    let bytes = CommitData::new(actions, operation, HashMap::new(), vec![])
        .get_bytes()
        .map_err(deltalake::DeltaTableError::from)?;
    let log_store = appendable.table.log_store();
    let version = match commit_past(&log_store, appendable.next_version, &bytes, |c| {
        !changes_table(c)
    })
    .await?
    {
        Ok(version) => version,
        Err(theirs) => {
            return Err(Error::Conflict(format!(
                "version {theirs} of {} changed the table; opening it again",
                table_name()
            )));
        }
    };
    appendable.next_version = version + 1;
    *kept = Some(appendable);
    // The row is recorded: what follows is upkeep, best effort (a failure leaves more files
    // to read, never fails the run).
    upkeep(warehouse, kept, version, &log_store).await;
    Ok(())
}

/// The history's upkeep after this process appended `version`: a checkpoint every few
/// versions, and halfway between them a look at whether its small files are to be compacted.
/// Each needs the file list: one full load (on an object store from the listing of the log
/// this statement made, with this commit added).
async fn upkeep(
    warehouse: &Warehouse,
    kept: &mut Option<Appendable>,
    version: u64,
    log_store: &deltalake::logstore::LogStoreRef,
) {
    use crate::statements::upkeep::{
        COMPACT_AT_FILES, checkpoint_due, compactable_files, compaction_due, maintain,
    };
    // A compaction that failed (a file it cannot read) is not tried again by this process:
    // each try would load the table and read the files again.
    static COMPACTION_FAILED: std::sync::atomic::AtomicBool =
        std::sync::atomic::AtomicBool::new(false);
    let due = checkpoint_due(log_store, version).await;
    let compaction = compaction_due(log_store, version)
        && !COMPACTION_FAILED.load(std::sync::atomic::Ordering::Relaxed);
    if !due && !compaction {
        return;
    }
    // Too few small files for a compaction even if every append since added one.
    if !due
        && let Some((at, n)) = kept.as_ref().and_then(|a| a.small_files)
        && n as u64 + version.saturating_sub(at) < COMPACT_AT_FILES as u64
    {
        return;
    }
    let load = || async {
        let mut table = warehouse.handle(&table_name()).await?;
        table.load().await?;
        Ok::<_, Error>(table)
    };
    let Ok(table) = load().await else { return };
    let small = compactable_files(&table);
    if let (Some(a), Some(v)) = (kept.as_mut(), table.version()) {
        a.small_files = Some((v, small));
    }
    if due {
        maintain(&table).await;
        return;
    }
    if small < COMPACT_AT_FILES {
        return;
    }
    match compact(&table).await {
        Ok(Some(compacted)) => {
            if let Some(a) = kept.as_mut() {
                a.next_version = a.next_version.max(compacted + 1);
                a.small_files = None;
            }
            // The compaction's own version may be one a checkpoint is due at.
            if checkpoint_due(log_store, compacted).await
                && let Ok(table) = load().await
            {
                maintain(&table).await;
            }
        }
        Ok(None) => {}
        Err(e) => {
            COMPACTION_FAILED.store(true, std::sync::atomic::Ordering::Relaxed);
            eprintln!("warning: could not compact {}: {e}", table_name())
        }
    }
}

/// Merge small files of the history (up to about [`upkeep::COMPACTED_FILE_BYTES`] of them)
/// into one, in a commit of their own that changes no data (Delta's OPTIMIZE); the version
/// committed, or None when there was nothing to do or another writer's commit removed or
/// changed what it read (the next compaction tries again). Each file is read whole, and not
/// at all when this machine wrote it (kept on the local disk, see
/// `catalog::log_disk::save_data`): compacting a history a cron job on one machine wrote
/// makes two requests, the new file and the commit, and so does one on a history a few
/// machines write (each merges its own files, see [`merges_own_only`]). A file older than a
/// column of the table gets it as NULL. A table with partitions or deletion vectors (not one
/// tidemark writes) is left alone.
///
/// [`upkeep::COMPACTED_FILE_BYTES`]: crate::statements::upkeep::COMPACTED_FILE_BYTES
async fn compact(table: &DeltaTable) -> Result<Option<u64>> {
    use crate::statements::upkeep::{COMPACTED_FILE_BYTES, compactable};
    use datafusion::arrow::array::new_null_array;
    use deltalake::DeltaTableError as E;
    use deltalake::kernel::Action;
    use deltalake::logstore::object_store::ObjectStoreExt;
    use deltalake::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let snapshot = table.snapshot()?;
    if !snapshot.metadata().partition_columns().is_empty()
        || !compaction_keeps_protocol(snapshot.protocol())
        || snapshot
            .log_data()
            .iter()
            .any(|f| f.remove_action(false).deletion_vector.is_some())
    {
        return Ok(None);
    }
    // A name that may have been percent-encoded in the log is left alone: its remove must
    // name the file exactly as its add did, and delta-rs gives the decoded name.
    let candidates: Vec<_> = snapshot
        .log_data()
        .iter()
        .filter(|file| {
            compactable(file.size())
                && file
                    .path()
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
        })
        .collect();
    // On an object store, reading a file another machine wrote is a request: while there are
    // few of them, each machine merges only the files it wrote (see `merges_own_only`).
    let url = table.log_store().root_url().clone();
    let here: Vec<bool> = candidates
        .iter()
        .map(|f| crate::catalog::written_here(&url, &f.object_store_path()))
        .collect();
    let own_only = merges_own_only(&here);
    let mut small = vec![];
    let mut bytes_in = 0;
    for (file, here) in candidates.into_iter().zip(here) {
        if (here || !own_only) && bytes_in < COMPACTED_FILE_BYTES {
            bytes_in += file.size() as u64;
            small.push(file);
        }
    }
    if small.len() < 2 {
        return Ok(None);
    }
    let store = table.object_store();
    let mut writer = RecordBatchWriter::for_table(table)?;
    let schema = writer.arrow_schema();
    for file in &small {
        let got = store
            .get(&file.object_store_path())
            .await
            .map_err(E::from)?;
        let bytes = got.bytes().await.map_err(E::from)?;
        let reader = ParquetRecordBatchReaderBuilder::try_new(bytes)
            .and_then(|b| b.build())
            .map_err(E::from)?;
        for batch in reader {
            let batch = batch?;
            let columns = schema
                .fields()
                .iter()
                .map(|field| match batch.column_by_name(field.name()) {
                    Some(c) if c.data_type() == field.data_type() => Ok(c.clone()),
                    Some(c) => Ok(datafusion::arrow::compute::cast(c, field.data_type())?),
                    None => Ok(new_null_array(field.data_type(), batch.num_rows())),
                })
                .collect::<Result<Vec<_>>>()?;
            writer
                .write(RecordBatch::try_new(schema.clone(), columns)?)
                .await?;
        }
    }
    let adds = writer.flush().await?;
    let written: Vec<_> = adds.iter().map(|a| a.path.clone()).collect();
    let actions: Vec<Action> = adds
        .into_iter()
        .map(|mut add| {
            add.data_change = false;
            Action::Add(add)
        })
        .chain(small.iter().map(|f| Action::Remove(f.remove_action(false))))
        .collect();
    let operation = deltalake::protocol::DeltaOperation::Optimize {
        predicate: None,
        target_size: COMPACTED_FILE_BYTES as i64,
    };
    let bytes = CommitData::new(actions, operation, HashMap::new(), vec![])
        .get_bytes()
        .map_err(E::from)?;
    // Other writers' appends since the snapshot change nothing this commit read: it goes
    // after them. A commit that removed files or changed the table makes it give up.
    let committed = commit_past(&table.log_store(), snapshot.version() + 1, &bytes, |c| {
        !changes_table(c) && !removes(c)
    })
    .await
    .map(|c| c.ok());
    if matches!(committed, Ok(None)) {
        // Given up: the merged file is in no commit, and deleted. (After an error the commit
        // may have landed: the file is left, for VACUUM if it is in none.)
        for path in written {
            let _ = store.delete(&deltalake::Path::from(path)).await;
        }
    }
    committed
}

/// Whether a compaction merges only the small files this machine wrote (kept here, read with
/// no request), given which of them it did (`here`): when other machines' files are among them
/// (several workers append to one history on a store), this machine wrote two or more, and
/// merging those brings the small files back under [`COMPACT_AT_FILES`]. Then every worker
/// merges its own and a run that compacts reads no data file back. Otherwise all are merged,
/// one read each of the files another machine wrote: on one machine (all its own), with no
/// cache on this machine's disk (only the file this process just wrote is kept), or with so
/// many workers that merging its own files would not be enough.
///
/// [`COMPACT_AT_FILES`]: crate::statements::upkeep::COMPACT_AT_FILES
fn merges_own_only(here: &[bool]) -> bool {
    let own = here.iter().filter(|h| **h).count();
    let foreign = here.len() - own;
    own >= 2 && foreign > 0 && foreign + 1 < crate::statements::upkeep::COMPACT_AT_FILES
}

/// Whether a compaction's plain commit (new file added, old ones removed, nothing else) keeps
/// the table's protocol: every writer feature is one that asks nothing more of such a commit.
/// Row tracking, in-commit timestamps, clustering and Iceberg compatibility (turned on by
/// another tool) ask for more: such a history is not compacted.
pub(super) fn compaction_keeps_protocol(protocol: &deltalake::kernel::Protocol) -> bool {
    const PLAIN: &[&str] = &[
        "appendOnly",
        "invariants",
        "checkConstraints",
        "changeDataFeed",
        "generatedColumns",
        "identityColumns",
        "columnMapping",
        "timestampNtz",
        "domainMetadata",
        "vacuumProtocolCheck",
        "v2Checkpoint",
        "deletionVectors",
        "typeWidening",
        "typeWidening-preview",
    ];
    protocol
        .writer_features()
        .is_none_or(|f| f.iter().all(|f| PLAIN.contains(&f.to_string().as_str())))
}

/// Write `bytes` as the commit of `version`, or of the first free version after it when the
/// commits that took those are ones `passes` lets through (other writers' appends): the
/// version committed, or Err with the version of a commit it does not. Finding its own bytes
/// at a version (a PUT the client sent again after it landed) is its commit.
pub(super) async fn commit_past(
    log_store: &deltalake::logstore::LogStoreRef,
    mut version: u64,
    bytes: &bytes::Bytes,
    passes: impl Fn(&[u8]) -> bool,
) -> Result<std::result::Result<u64, u64>> {
    loop {
        let entry = CommitOrBytes::LogBytes(bytes.clone());
        match log_store
            .write_commit_entry(version, entry, uuid::Uuid::new_v4())
            .await
        {
            Ok(()) => return Ok(Ok(version)),
            Err(TransactionError::VersionAlreadyExists(_)) => {
                match log_store.read_commit_entry(version).await? {
                    Some(theirs) if theirs == *bytes => return Ok(Ok(version)),
                    Some(theirs) if passes(&theirs) => version += 1,
                    _ => return Ok(Err(version)),
                }
            }
            Err(e) => return Err(deltalake::DeltaTableError::from(e).into()),
        }
    }
}

/// Whether a commit's actions change what an append must know (protocol or metadata).
fn changes_table(commit: &[u8]) -> bool {
    has_action(commit, &["metaData", "protocol"])
}

/// Whether a commit removes files.
fn removes(commit: &[u8]) -> bool {
    has_action(commit, &["remove"])
}

/// Whether a commit has an action of one of these kinds.
fn has_action(commit: &[u8], kinds: &[&str]) -> bool {
    commit.split(|b| *b == b'\n').any(|line| {
        serde_json::from_slice::<serde_json::Value>(line)
            .ok()
            .is_some_and(|v| kinds.iter().any(|k| v.get(k).is_some()))
    })
}

/// Create the empty history table (no retry: a lost race is retried as an append).
async fn create(session: &Session) -> Result<DeltaTable> {
    let fields = schema()
        .fields()
        .iter()
        .map(|f| crate::engine::types::arrow_to_delta(f))
        .collect::<Result<Vec<_>>>()?;
    Ok(session
        .warehouse()
        .create_builder(&table_name())
        .await?
        .with_columns(fields)
        // Small metadata: statistics for the run id and times only, and compacted files'
        // tombstones dropped from checkpoints after an hour (see upkeep).
        .with_configuration_property(TableProperty::DataSkippingNumIndexedCols, Some("3"))
        .with_configuration_property(
            TableProperty::DeletedFileRetentionDuration,
            Some("interval 1 hour"),
        )
        .await?)
}

#[cfg(test)]
mod tests {
    use super::{changes_table, compact, compaction_keeps_protocol, merges_own_only, removes};
    use crate::statements::upkeep::COMPACT_AT_FILES;
    use datafusion::arrow::array::{Int64Array, RecordBatch};
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use deltalake::DeltaTable;
    use deltalake::writer::{DeltaWriter, RecordBatchWriter};
    use std::sync::Arc;

    async fn table_at(dir: &std::path::Path) -> DeltaTable {
        let url = url::Url::from_directory_path(dir).unwrap();
        let mut t = deltalake::DeltaTableBuilder::from_url(url)
            .unwrap()
            .build()
            .unwrap();
        t.load().await.unwrap();
        t
    }

    async fn append(t: &mut DeltaTable, id: i64) {
        let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, true)]));
        let batch =
            RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(vec![id]))]).unwrap();
        let mut w = RecordBatchWriter::for_table(t).unwrap();
        w.write(batch).await.unwrap();
        w.flush_and_commit(t).await.unwrap();
    }

    async fn ids(dir: &std::path::Path) -> Vec<i64> {
        let t = table_at(dir).await;
        let ctx = datafusion::prelude::SessionContext::new();
        let provider = t.table_provider().await.unwrap();
        let batches = ctx.read_table(provider).unwrap().collect().await.unwrap();
        let mut ids: Vec<i64> = batches
            .iter()
            .flat_map(|b| {
                let c = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
                c.values().to_vec()
            })
            .collect();
        ids.sort();
        ids
    }

    fn parquet_files(dir: &std::path::Path) -> usize {
        std::fs::read_dir(dir)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .ends_with(".parquet")
            })
            .count()
    }

    /// A compaction goes after another writer's appends made since its snapshot, and gives up
    /// (deleting its file) after another writer's removes: no row lost or doubled either way.
    #[tokio::test]
    async fn a_compaction_lets_appends_through_and_gives_up_after_removes() {
        let d = tempfile::tempdir().unwrap();
        let url = url::Url::from_directory_path(d.path()).unwrap();
        let mut t = deltalake::DeltaTableBuilder::from_url(url)
            .unwrap()
            .build()
            .unwrap()
            .create()
            .with_columns(vec![deltalake::kernel::StructField::new(
                "id",
                deltalake::kernel::DataType::LONG,
                true,
            )])
            .await
            .unwrap();
        for id in 0..4 {
            append(&mut t, id).await;
        }
        // Loaded at version 4; another writer appends version 5.
        let stale = table_at(d.path()).await;
        append(&mut table_at(d.path()).await, 4).await;
        assert_eq!(compact(&stale).await.unwrap(), Some(6));
        assert_eq!(ids(d.path()).await, [0, 1, 2, 3, 4]);
        assert_eq!(
            table_at(d.path())
                .await
                .snapshot()
                .unwrap()
                .log_data()
                .num_files(),
            2
        );
        // Loaded at version 7; another writer's compaction (removes) takes version 8.
        append(&mut table_at(d.path()).await, 5).await;
        let stale = table_at(d.path()).await;
        assert_eq!(compact(&table_at(d.path()).await).await.unwrap(), Some(8));
        let files = parquet_files(d.path());
        assert_eq!(compact(&stale).await.unwrap(), None);
        assert_eq!(
            parquet_files(d.path()),
            files,
            "the given-up file is deleted"
        );
        assert_eq!(ids(d.path()).await, [0, 1, 2, 3, 4, 5]);
    }

    #[test]
    fn a_history_whose_protocol_asks_more_of_commits_is_not_compacted() {
        let protocol = |writer: &str| {
            serde_json::from_str::<deltalake::kernel::Protocol>(&format!(
                r#"{{"minReaderVersion":1,"minWriterVersion":7,"writerFeatures":[{writer}]}}"#
            ))
            .unwrap()
        };
        assert!(compaction_keeps_protocol(&protocol(
            r#""appendOnly","invariants""#
        )));
        assert!(!compaction_keeps_protocol(&protocol(
            r#""appendOnly","rowTracking""#
        )));
        assert!(!compaction_keeps_protocol(&protocol(
            r#""inCommitTimestamp""#
        )));
        let legacy = r#"{"minReaderVersion":1,"minWriterVersion":2}"#;
        assert!(compaction_keeps_protocol(
            &serde_json::from_str(legacy).unwrap()
        ));
    }

    #[test]
    fn each_machine_merges_its_own_history_files_when_that_is_enough() {
        let files = |own: usize, foreign: usize| {
            let mut here = vec![true; own];
            here.extend(vec![false; foreign]);
            here
        };
        // One machine, or nothing kept here (a local table): all.
        assert!(!merges_own_only(&files(40, 0)));
        assert!(!merges_own_only(&files(0, 40)));
        // No cache on disk: only the file this process wrote is kept; all are merged.
        assert!(!merges_own_only(&files(1, 34)));
        // Several machines: its own only, when that leaves fewer than COMPACT_AT_FILES.
        assert!(merges_own_only(&files(17, 18)));
        assert!(merges_own_only(&files(2, COMPACT_AT_FILES - 2)));
        assert!(!merges_own_only(&files(3, COMPACT_AT_FILES - 1)));
    }

    #[test]
    fn only_protocol_or_metadata_changes_stop_a_blind_append() {
        let append = br#"{"commitInfo":{"operation":"WRITE"}}
{"add":{"path":"a.parquet","size":1}}"#;
        let compaction = br#"{"commitInfo":{"operation":"OPTIMIZE"}}
{"remove":{"path":"a.parquet"}}
{"add":{"path":"b.parquet","size":1}}"#;
        let schema = br#"{"commitInfo":{"operation":"ADD COLUMN"}}
{"metaData":{"id":"x"}}"#;
        let upgrade = br#"{"protocol":{"minReaderVersion":3}}"#;
        assert!(!changes_table(append));
        assert!(!changes_table(compaction));
        assert!(changes_table(schema));
        assert!(changes_table(upgrade));
        assert!(!removes(append) && removes(compaction) && !removes(schema));
    }
}
