//! Upkeep of the small tables tidemark commits to on every run (control tables, the run
//! history): they gain a commit per run, and a Delta table's cost to open grows with the
//! commits since its last checkpoint and with its number of files. tidemark checkpoints them
//! often and compacts the history itself, so that opening them after 10,000 runs costs what it
//! costs after 10.

use deltalake::DeltaTable;
use deltalake::checkpoints;
use deltalake::kernel::transaction::CommitProperties;
use deltalake::table::config::TablePropertiesExt;

/// A checkpoint every this many commits (Delta's default is 100; replaying a JSON commit costs
/// about a millisecond, so 100 commits would double the cost of a small run).
pub const CHECKPOINT_EVERY: u64 = 10;

/// Compact the history once it holds this many files (each run appends one; a checkpoint
/// carries every file's entry, so their number is what opening the table costs).
pub const COMPACT_AT_FILES: usize = 32;

/// Tables with at most this many files get the frequent checkpoints (a checkpoint rewrites
/// every file's entry: on a big table Delta's interval of 100 is the better trade).
pub const SMALL_TABLE_FILES: usize = 1000;

/// Commit properties for tidemark's writes. delta-rs would otherwise clean up expired log
/// files after every commit, listing (and stat-ing) the whole `_delta_log` each time: 70 ms
/// once a table holds 11,000 commit files. [`after_commit`] does it every few commits instead.
pub fn commit_properties() -> CommitProperties {
    CommitProperties::default().with_cleanup_expired_logs(Some(false))
}

/// After a commit of `table` by tidemark: checkpoint a small table when its version is due,
/// and remove log files its retention no longer keeps. Best effort: a failed checkpoint leaves
/// the table as correct as before, only slower to open.
pub async fn after_commit(table: &DeltaTable) {
    if table
        .version()
        .is_some_and(|v| v > 0 && v.is_multiple_of(CHECKPOINT_EVERY))
    {
        maintain(table).await;
    }
}

/// Checkpoint a small table now and remove the log files its retention no longer keeps.
pub async fn maintain(table: &DeltaTable) {
    let small = table
        .snapshot()
        .is_ok_and(|s| s.log_data().num_files() <= SMALL_TABLE_FILES);
    if small && write_checkpoint(table).await.is_err() {
        let _ = checkpoints::create_checkpoint(table, None).await;
    }
    // (A big table gets Delta's own checkpoint every delta.checkpointInterval commits.)
    if table
        .snapshot()
        .is_ok_and(|s| s.table_config().enable_expired_log_cleanup())
    {
        // Log files older than the table's delta.logRetentionDuration (30 days unless set)
        // and covered by a checkpoint are no longer needed to read it.
        let _ = checkpoints::cleanup_metadata(table, None).await;
    }
}

/// Whether an append-only table of tidemark's has grown enough files to compact.
pub fn needs_compaction(table: &DeltaTable) -> bool {
    table
        .snapshot()
        .is_ok_and(|s| s.log_data().num_files() >= COMPACT_AT_FILES)
}

/// Rows per row group of a checkpoint written by [`write_checkpoint`].
const CHECKPOINT_ROW_GROUP: usize = 65_536;

/// Write a classic checkpoint of `table` at its version, as Delta's kernel reconciles it, with
/// the removed files' tombstones in row groups of their own. A table whose rows are updated
/// often keeps a tombstone per update for `delta.deletedFileRetentionDuration` (7 days), and
/// every reader of a checkpoint with them mixed in decodes them all. Readers that skip row
/// groups on statistics (delta-rs' kernel does: it reads `add` where `add.path` is not null)
/// never open these; every other reader reads a standard checkpoint.
async fn write_checkpoint(
    table: &DeltaTable,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    use datafusion::arrow::array::{Array, BooleanArray, RecordBatch, StructArray};
    use datafusion::arrow::compute::{filter_record_batch, is_not_null, not};
    use datafusion::parquet::arrow::{ArrowWriter, arrow_writer::ArrowWriterOptions};
    use datafusion::parquet::basic::Compression;
    use datafusion::parquet::file::properties::WriterProperties;
    use delta_kernel::checkpoint::LastCheckpointHintStats;
    use delta_kernel::engine::arrow_data::ArrowEngineData;
    use deltalake::logstore::object_store::ObjectStoreExt;

    let Some(version) = table.version() else {
        return Ok(());
    };
    // The kernel writes only V2 checkpoints for tables with that feature: leave those to it.
    let v2 = table
        .snapshot()?
        .protocol()
        .writer_features()
        .is_some_and(|f| f.iter().any(|f| format!("{f:?}").contains("V2Checkpoint")));
    if v2 {
        return Err("v2 checkpoints are written by delta-rs".into());
    }
    let log_store = table.log_store();
    let (url, engine, store) = (
        log_store.transaction_url(None)?,
        log_store.engine(None),
        log_store.object_store(None),
    );
    let runtime = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(
        move || -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
            let snapshot = delta_kernel::Snapshot::builder_for(url)
                .at_version(version)
                .build(engine.as_ref())?;
            let writer = snapshot.create_checkpoint_writer(engine.as_ref())?;
            let mut data = writer.checkpoint_data(engine.as_ref())?;
            let state = data.state();
            let props = WriterProperties::builder()
                .set_compression(Compression::SNAPPY)
                .set_max_row_group_row_count(None)
                .build();
            let options = ArrowWriterOptions::new()
                .with_properties(props)
                .with_skip_arrow_metadata(true);
            let mut out: Option<ArrowWriter<Vec<u8>>> = None;
            // (tombstones?, batches, rows): each kind is written as row groups of its own.
            let mut pending: [(Vec<RecordBatch>, usize); 2] = [(vec![], 0), (vec![], 0)];
            let write = |out: &mut Option<ArrowWriter<Vec<u8>>>,
                         batches: Vec<RecordBatch>|
             -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
                for batch in batches {
                    let w = match out {
                        Some(w) => w,
                        None => out.insert(ArrowWriter::try_new_with_options(
                            Vec::new(),
                            batch.schema(),
                            options.clone(),
                        )?),
                    };
                    w.write(&batch)?;
                }
                if let Some(w) = out {
                    w.flush()?;
                }
                Ok(())
            };
            for filtered in &mut data {
                let batch: RecordBatch =
                    (*ArrowEngineData::try_from_engine_data(filtered?.apply_selection_vector()?)?)
                        .into();
                let removes = match batch
                    .column_by_name("remove")
                    .and_then(|c| c.as_any().downcast_ref::<StructArray>())
                {
                    Some(r) => is_not_null(r)?,
                    None => BooleanArray::from(vec![false; batch.num_rows()]),
                };
                for (i, mask) in [not(&removes)?, removes].into_iter().enumerate() {
                    let part = filter_record_batch(&batch, &mask)?;
                    if part.num_rows() == 0 {
                        continue;
                    }
                    pending[i].1 += part.num_rows();
                    pending[i].0.push(part);
                    if pending[i].1 >= CHECKPOINT_ROW_GROUP {
                        write(&mut out, std::mem::take(&mut pending[i].0))?;
                        pending[i].1 = 0;
                    }
                }
            }
            for (batches, _) in pending {
                if !batches.is_empty() {
                    write(&mut out, batches)?;
                }
            }
            drop(data);
            let Some(out) = out else {
                return Err("the checkpoint has no actions".into());
            };
            let bytes = out.into_inner()?;
            let size = bytes.len() as u64;
            let path =
                deltalake::Path::from(format!("_delta_log/{version:020}.checkpoint.parquet"));
            runtime.block_on(store.put(&path, bytes.into()))?;
            let state =
                std::sync::Arc::into_inner(state).ok_or("the checkpoint state is still shared")?;
            let stats = LastCheckpointHintStats::from_reconciliation_state(state, size, 0)?;
            writer.finalize(engine.as_ref(), &stats)?;
            Ok(())
        },
    )
    .await?
}
