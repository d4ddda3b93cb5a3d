//! `system.tidemark.copy_runs`: one row per COPY INCREMENTAL run, failures included, appended
//! as blind Delta appends (which never conflict with each other).

use std::sync::Arc;

use datafusion::arrow::array::{
    ArrayRef, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use deltalake::writer::{DeltaWriter, RecordBatchWriter};
use deltalake::{DeltaTable, TableProperty};

use super::group_commit::Registry;
use crate::catalog::{SYSTEM, TableName};
use crate::engine::Session;
use crate::error::{Error, Result};

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

/// Start loading the history table in the background, so that the write at the end of a
/// run finds it loaded (the run's own work overlaps the log replay).
pub fn prefetch(session: &Session) {
    let warehouse = session.warehouse.clone();
    tokio::spawn(async move {
        let name = table_name();
        let slot = warehouse.kept(&name);
        let mut kept = slot.lock().await;
        if kept.is_none()
            && warehouse.table_exists(&name)
            && let Ok(t) = warehouse.open(&name).await
        {
            *kept = Some(t);
        }
    });
}

/// One blind append of a batch of records.
async fn write(session: &Session, records: Vec<RunRecord>) -> Result<()> {
    let batch = to_batch(&records)?;
    let slot = session.warehouse.kept(&table_name());
    let mut kept = slot.lock().await;
    let mut last = None;
    for _ in 0..8 {
        match append_batch(session, &mut kept, &batch).await {
            Ok(()) => return Ok(()),
            Err(e) => {
                // Two first writers racing to create the table: the loser appends next time.
                last = Some(e);
                tokio::time::sleep(std::time::Duration::from_millis(25)).await;
            }
        }
    }
    Err(last
        .unwrap_or_else(|| Error::Other("history write failed".into()))
        .context("cannot record the run in system.tidemark.copy_runs"))
}

/// Append `batch` as one Parquet file and one commit, on the kept table (refreshed first).
/// No query plan is built: this runs once per copy and must stay cheap.
async fn append_batch(
    session: &Session,
    kept: &mut Option<DeltaTable>,
    batch: &RecordBatch,
) -> Result<()> {
    let name = table_name();
    let mut table = match kept.take() {
        Some(mut t) => {
            t.update_incremental(None).await?;
            t
        }
        None if session.warehouse.table_exists(&name) => session.warehouse.open(&name).await?,
        None => create(session).await?,
    };
    let mut writer = RecordBatchWriter::for_table(&table)?;
    writer.write(batch.clone()).await?;
    writer.flush_and_commit(&mut table).await?;
    super::upkeep::after_commit(&table).await;
    if super::upkeep::needs_compaction(&table) {
        // Best effort, like the checkpoint: a failed compaction leaves more files to read.
        if let Ok((t, _)) = table.clone().optimize().await {
            table = t;
        }
    }
    *kept = Some(table);
    Ok(())
}

/// Create the empty history table (no retry: a lost race is retried as an append).
async fn create(session: &Session) -> Result<DeltaTable> {
    let fields = schema()
        .fields()
        .iter()
        .map(|f| crate::engine::types::arrow_to_delta(f))
        .collect::<Result<Vec<_>>>()?;
    Ok(session
        .warehouse
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
