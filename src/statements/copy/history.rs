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
                if !warehouse.table_exists(&table_name()) {
                    create(session).await?;
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
    let mut version = appendable.next_version;
    loop {
        let entry = CommitOrBytes::LogBytes(bytes.clone());
        match log_store
            .write_commit_entry(version, entry, uuid::Uuid::new_v4())
            .await
        {
            Ok(()) => break,
            Err(TransactionError::VersionAlreadyExists(_)) => {
                let theirs = log_store.read_commit_entry(version).await?;
                if theirs.is_none_or(|c| changes_table(&c)) {
                    return Err(Error::Conflict(format!(
                        "version {version} of {} changed the table; opening it again",
                        table_name()
                    )));
                }
                version += 1;
            }
            Err(e) => return Err(deltalake::DeltaTableError::from(e).into()),
        }
    }
    appendable.next_version = version + 1;
    *kept = Some(appendable);
    if crate::statements::upkeep::checkpoint_due(&log_store, version).await {
        // Upkeep needs the file list: one full load every few runs (on an object store from
        // the listing of the log this statement made, with this commit added). Compact
        // first, so that the one checkpoint is of the compacted table.
        let mut table = warehouse.handle(&table_name()).await?;
        table
            .load()
            .await
            .map_err(|e| Error::from(e).context(format!("opening {}", table_name())))?;
        if crate::statements::upkeep::needs_compaction(&table) {
            // Best effort, like the checkpoint: a failed compaction leaves more files to read.
            let size = std::num::NonZeroU64::new(crate::statements::upkeep::COMPACTED_FILE_BYTES)
                .expect("a compacted file's size is not zero");
            if let Ok((t, _)) = table.clone().optimize().with_target_size(size).await {
                table = t;
            }
        }
        crate::statements::upkeep::maintain(&table).await;
    }
    Ok(())
}

/// Whether a commit's actions change what an append must know (protocol or metadata).
fn changes_table(commit: &[u8]) -> bool {
    commit.split(|b| *b == b'\n').any(|line| {
        serde_json::from_slice::<serde_json::Value>(line)
            .ok()
            .is_some_and(|v| v.get("metaData").is_some() || v.get("protocol").is_some())
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
    use super::changes_table;

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
    }
}
