//! Every commit tidemark makes to a Delta table goes through [`commit`] (one of delta-rs'
//! operations), [`commit_actions`] (actions tidemark wrote itself) or [`append_actions`] (the
//! same, for a writer that needs only the new version), and with it the table's
//! upkeep. Small tables gain a commit per run (control tables, the run history, a target fed
//! small increments), and a Delta table's cost to open grows with the commits since its last
//! checkpoint and with its number of files: tidemark checkpoints small tables often, cleans
//! up expired log files in batches, and compacts the history itself, so that opening them
//! after 10,000 runs costs what it costs after 10.

use std::future::IntoFuture;

use deltalake::checkpoints;
use deltalake::kernel::Action;
use deltalake::kernel::transaction::{CommitBuilder, CommitProperties};
use deltalake::operations;
use deltalake::protocol::DeltaOperation;
use deltalake::table::config::TablePropertiesExt;
use deltalake::{DeltaResult, DeltaTable};

/// A checkpoint every this many commits (Delta's default is 100; replaying a JSON commit costs
/// about a millisecond, so 100 commits would double the cost of a small run).
pub(crate) const CHECKPOINT_EVERY: u64 = 10;

/// Compact the history once it holds this many files (each run appends one; a checkpoint
/// carries every file's entry, so their number is what opening the table costs).
pub(crate) const COMPACT_AT_FILES: usize = 32;

/// Tables with at most this many files get the frequent checkpoints (a checkpoint rewrites
/// every file's entry: on a big table Delta's interval of 100 is the better trade).
const SMALL_TABLE_FILES: usize = 1000;

/// One of delta-rs' operations that commits (WRITE, UPDATE, DELETE, MERGE, ALTER, OPTIMIZE).
pub(crate) trait Operation: IntoFuture<Output = DeltaResult<Self::Done>> + Sized {
    /// What the operation returns: the table at its new version, with or without metrics.
    type Done: AtVersion;
    fn with_properties(self, props: CommitProperties) -> Self;
}

/// A committed table, as an operation returns it.
pub(crate) trait AtVersion {
    fn table(&self) -> &DeltaTable;
}

impl AtVersion for DeltaTable {
    fn table(&self) -> &DeltaTable {
        self
    }
}

impl<M> AtVersion for (DeltaTable, M) {
    fn table(&self) -> &DeltaTable {
        &self.0
    }
}

macro_rules! operations {
    ($($builder:ty => $done:ty),* $(,)?) => {$(
        impl Operation for $builder {
            type Done = $done;
            fn with_properties(self, props: CommitProperties) -> Self {
                self.with_commit_properties(props)
            }
        }
    )*};
}

operations! {
    operations::write::WriteBuilder => DeltaTable,
    operations::update::UpdateBuilder => (DeltaTable, operations::update::UpdateMetrics),
    operations::delete::DeleteBuilder => (DeltaTable, operations::delete::DeleteMetrics),
    operations::merge::MergeBuilder => (DeltaTable, operations::merge::MergeMetrics),
    operations::add_column::AddColumnBuilder => DeltaTable,
    operations::constraints::ConstraintBuilder => DeltaTable,
    operations::drop_constraints::DropConstraintBuilder => DeltaTable,
    operations::set_tbl_properties::SetTablePropertiesBuilder => DeltaTable,
    operations::restore::RestoreBuilder => (DeltaTable, operations::restore::RestoreMetrics),
}

impl<'a> Operation for operations::optimize::OptimizeBuilder<'a> {
    type Done = (DeltaTable, operations::optimize::Metrics);
    fn with_properties(self, props: CommitProperties) -> Self {
        self.with_commit_properties(props)
    }
}

/// Run `op`, committing with `props`, then the table's upkeep.
pub(crate) async fn commit<O: Operation>(op: O, props: CommitProperties) -> DeltaResult<O::Done> {
    let done = op.with_properties(tidemarks(props)).await?;
    after_commit(done.table()).await;
    Ok(done)
}

/// What an OPTIMIZE rewrites beyond bin-packing every partition's small files.
#[derive(Debug, Default)]
pub(crate) struct Layout {
    /// Only the partitions these select (ANDed); none: every partition.
    pub partitions: Vec<super::maintenance::partitions::PartitionFilter>,
    /// Z-order every selected partition's files by these columns (dotted paths for nested
    /// fields) instead of bin-packing its small ones.
    pub zorder: Vec<String>,
}

/// OPTIMIZE `table` (named `name`; delta-rs' bin-packing, files of the table's
/// `delta.targetFileSize`, or its Z-ordering, of the partitions `layout` selects) through
/// [`Uncommitted::compacting`]: its commit takes the version after the one read, or a later
/// one past commits that only appended, on the very table read; otherwise a conflict,
/// nothing committed, and on a local disk its files removed. The files are written with
/// strings as the table stores them, not as string views (which delta-rs would write into
/// their Arrow schema, and Python's `deltalake` cannot filter).
///
/// [`Uncommitted::compacting`]: super::copy::uncommitted::Uncommitted::compacting
pub(crate) async fn optimize_next(
    session: &crate::engine::Session,
    table: &DeltaTable,
    name: &crate::catalog::TableName,
    layout: &Layout,
) -> crate::error::Result<operations::optimize::Metrics> {
    let guard = super::copy::uncommitted::Uncommitted::compacting(table, name).await;
    let filters: Vec<_> = layout.partitions.iter().map(|f| f.literal()).collect();
    let mut optimize = guard
        .table(table)
        .optimize()
        .with_filters(&filters)
        .with_session_state(super::dml::without_view_types(session));
    if !layout.zorder.is_empty() {
        optimize = optimize.with_type(operations::optimize::OptimizeType::ZOrder(
            layout.zorder.clone(),
        ));
    }
    match commit(optimize, CommitProperties::default()).await {
        Ok((_, metrics)) => Ok(metrics),
        Err(e) => Err(guard
            .conflict_if_replaced(guard.conflict_if_overtaken(e.into()))
            .await),
    }
}

/// Commit `actions` on top of the version of `table` they were written against (a commit
/// that landed since is checked by delta-rs, or refused when `props` allow no retries), then
/// the table's upkeep. Returns the table at its new version.
pub(crate) async fn commit_actions(
    table: &DeltaTable,
    actions: Vec<Action>,
    operation: DeltaOperation,
    props: CommitProperties,
) -> DeltaResult<DeltaTable> {
    let finalized = CommitBuilder::from(tidemarks(props))
        .with_actions(actions)
        .build(Some(table.snapshot()?), table.log_store(), operation)
        .await?;
    let mut committed = table.clone();
    committed.state = Some(finalized.snapshot());
    after_commit(&committed).await;
    Ok(committed)
}

/// [`commit_actions`] for a writer that needs only the new version (a copy's append):
/// delta-rs reads the log again after every commit to build the table's new state (a listing
/// and a replay of the commits since the checkpoint); that is done only when the commit is due
/// a checkpoint (tidemark's or Delta's), which needs it.
pub(crate) async fn append_actions(
    table: &DeltaTable,
    actions: Vec<Action>,
    operation: DeltaOperation,
    props: CommitProperties,
) -> DeltaResult<u64> {
    let snapshot = table.snapshot()?;
    let delta_interval = snapshot.table_config().checkpoint_interval().get();
    let committed = CommitBuilder::from(tidemarks(props))
        .with_actions(actions)
        .build(Some(snapshot), table.log_store(), operation)
        .into_prepared_commit_future()
        .await?
        .await?;
    let version = committed.version;
    let ours = checkpoint_due(&table.log_store(), version).await;
    if ours || (version + 1).is_multiple_of(delta_interval) {
        // Best effort, as the upkeep is: the commit stands whatever happens after it.
        if let Ok(finalized) = committed.await
            && ours
        {
            let mut table = table.clone();
            table.state = Some(finalized.snapshot());
            maintain(&table).await;
        }
    }
    Ok(version)
}

/// Commit properties of the writes that read the table's state (UPDATE, DELETE, MERGE, file
/// rewrites, schema and metadata changes, RESTORE): never committed over another writer's
/// commit (delta-rs' conflict check lets some through); a conflict reruns the whole statement
/// on the new state ([`super::retry`]).
pub(crate) fn never_over_another() -> CommitProperties {
    CommitProperties::default().with_max_retries(0)
}

/// `props` as tidemark commits them. delta-rs would otherwise clean up expired log files after
/// every commit, listing (and stat-ing) the whole `_delta_log` each time: 70 ms once a table
/// holds 11,000 commit files. [`after_commit`] does it in batches instead.
fn tidemarks(props: CommitProperties) -> CommitProperties {
    props.with_cleanup_expired_logs(Some(false))
}

/// After a commit of `table` by tidemark: checkpoint a small table when its version is due,
/// and remove log files its retention no longer keeps. Best effort: a failed checkpoint leaves
/// the table as correct as before, only slower to open.
async fn after_commit(table: &DeltaTable) {
    if let Some(v) = table.version()
        && checkpoint_due(&table.log_store(), v).await
    {
        maintain(table).await;
    }
}

/// The actions (files and tombstones) a checkpoint may rewrite per commit of its interval, on
/// a local disk.
const ACTIONS_PER_COMMIT: u64 = 64;

/// The same on an object store, where each commit a reader replays after the checkpoint is a
/// request (the figure measured on a local disk is not applied there: longer intervals would
/// cost other machines' readers more requests than the checkpoints they save).
const ACTIONS_PER_COMMIT_ON_STORE: u64 = 400;

/// The intervals (in versions) between checkpoints [`checkpoint_due`] picks from: each
/// divides [`CLEANUP_EVERY`], so that the log's clean-up, which runs with a checkpoint on an
/// object store once every [`CLEANUP_EVERY`] versions (shifted as the checkpoints are), is
/// never skipped (but for a first one due before version 10).
const INTERVALS: [u64; 4] = [CHECKPOINT_EVERY, 20, 50, 100];

/// Whether a table at `version` is due a checkpoint: at every multiple of an interval that
/// grows with its last checkpoint's size. A checkpoint rewrites every action it holds, the
/// tombstones of removed files included (kept 7 days), so a run history or a control table
/// rewritten a few rows at a time holds thousands of them, and writing one every 10 commits
/// made the job's cost per table grow with the number of tables (a run of 10,000 tables made
/// about 425 control-table commits, and their checkpoints held up to 1,250 actions). The
/// interval is the shortest of [`INTERVALS`] over which a checkpoint rewrites at most
/// [`ACTIONS_PER_COMMIT`] actions per commit ([`ACTIONS_PER_COMMIT_ON_STORE`] on an object
/// store), so that a commit's share of the checkpoints stays flat; a reader opening the table
/// replays fewer JSON commits than the interval. The multiples are shifted by the table's
/// [`stagger`], and the first checkpoint comes no earlier than Delta's (version 10): a young
/// table's few commits cost less to read than a checkpoint (a checkpoint of a small table
/// costs about what six of its JSON commits do, in the kernel's three readings of it).
pub(crate) async fn checkpoint_due(
    log_store: &deltalake::logstore::LogStoreRef,
    version: u64,
) -> bool {
    let shift = stagger(log_store);
    if !shifted_multiple(version, shift, CHECKPOINT_EVERY) {
        return false;
    }
    let size = last_checkpoint_size(log_store).await.unwrap_or(0);
    let local = log_store.root_url().scheme() == "file";
    shifted_multiple(version, shift, checkpoint_interval(size, local))
}

/// Whether `version` is a multiple of `interval` shifted by `shift`, from version 10 on.
fn shifted_multiple(version: u64, shift: u64, interval: u64) -> bool {
    version >= CHECKPOINT_EVERY && (version + shift).is_multiple_of(interval)
}

/// How far a table's checkpoints (and the clean-ups and compactions that go with them) are
/// shifted from the multiples of their interval: a stable hash of the table's place, below
/// [`CLEANUP_EVERY`] (every interval divides it). A job's targets, and sources fed on the same
/// schedule, each gain a commit a run, in step; at the same versions every tenth run would
/// checkpoint all of them at once (1,000 targets: 9.6-11.5 s where the runs around it took 3.5
/// to 5 s). Shifted, each run checkpoints about a tenth of them. Readers find a checkpoint at
/// any version (`_last_checkpoint`, or the log's listing).
fn stagger(log_store: &deltalake::logstore::LogStoreRef) -> u64 {
    stagger_of(log_store.root_url().as_str())
}

/// [`stagger`] of the table at the URL `place`.
fn stagger_of(place: &str) -> u64 {
    crate::fnv1a(place.trim_end_matches('/').as_bytes()) % CLEANUP_EVERY
}

/// Commits between checkpoints for a checkpoint of `size` actions, on a local disk or not.
fn checkpoint_interval(size: u64, local: bool) -> u64 {
    let most = if local {
        ACTIONS_PER_COMMIT
    } else {
        ACTIONS_PER_COMMIT_ON_STORE
    };
    INTERVALS
        .into_iter()
        .find(|i| size.div_ceil(*i) <= most)
        .unwrap_or(INTERVALS[INTERVALS.len() - 1])
}

/// The number of actions in a table's last checkpoint, from `_last_checkpoint`.
async fn last_checkpoint_size(log_store: &deltalake::logstore::LogStoreRef) -> Option<u64> {
    use deltalake::logstore::object_store::ObjectStoreExt;
    let path = log_store.log_path().clone().join("_last_checkpoint");
    let bytes = log_store
        .object_store(None)
        .get(&path)
        .await
        .ok()?
        .bytes()
        .await
        .ok()?;
    let hint: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    hint.get("size")?.as_u64()
}

/// Checkpoint a small table now and remove the log files its retention no longer keeps.
pub(crate) async fn maintain(table: &DeltaTable) {
    let small = table
        .snapshot()
        .is_ok_and(|s| s.log_data().num_files() <= SMALL_TABLE_FILES);
    if small && write_checkpoint(table).await.is_err() {
        let _ = checkpoints::create_checkpoint(table, None).await;
    }
    // (A big table gets Delta's own checkpoint every delta.checkpointInterval commits.)
    let Ok(snapshot) = table.snapshot() else {
        return;
    };
    if snapshot.table_config().enable_expired_log_cleanup() {
        // Log files older than the table's delta.logRetentionDuration (30 days unless set)
        // and covered by a checkpoint are no longer needed to read it. The clean-up lists
        // (and stats) the whole log: it runs when a batch of commits has expired, and every
        // CLEANUP_EVERY versions whatever the log's names say.
        let retention = snapshot.table_config().log_retention_duration();
        let cutoff = std::time::SystemTime::now().checked_sub(retention);
        let version = snapshot.version();
        let due = (version + stagger(&table.log_store())).is_multiple_of(CLEANUP_EVERY)
            || match (local_dir(table), cutoff) {
                (Some(dir), Some(cutoff)) => {
                    batch_expired(&crate::catalog::log::dir(&dir), version, cutoff)
                }
                // On an object store the clean-up's listing of the whole log is requests (one
                // a thousand commits), and so would be finding the oldest commit: it waits for
                // the thousandth version (shifted as the checkpoints are).
                (None, _) => false,
                (Some(_), None) => true,
            };
        if due {
            let _ = checkpoints::cleanup_metadata(table, None).await;
        }
    }
}

/// A clean-up of the log runs at least this often (in versions), expired commits or not.
const CLEANUP_EVERY: u64 = 1000;

/// A clean-up runs once this many commits have expired. Delta's clean-up keeps the commit of
/// the checkpoint it stops at, usually itself expired: waiting for one expired commit would
/// list the whole log on every upkeep pass of a table older than its retention.
const CLEANUP_BATCH: u64 = 100;

/// The local directory of a table in a file-system warehouse.
fn local_dir(table: &DeltaTable) -> Option<std::path::PathBuf> {
    table.log_store().root_url().to_file_path().ok()
}

/// Whether a batch of the log's oldest commits expired: the commit [`CLEANUP_BATCH`] versions
/// after the oldest (or the newest, if the log is shorter) was written before `cutoff`.
/// Commits form an unbroken run of versions up to the newest (a clean-up removes the oldest
/// first), so a binary search over names finds the oldest in a few stat calls where a
/// listing reads every name. Any doubt answers true.
fn batch_expired(dir: &std::path::Path, newest: u64, cutoff: std::time::SystemTime) -> bool {
    match oldest_commit(dir, newest) {
        Some(oldest) => written_before(dir, (oldest + CLEANUP_BATCH).min(newest), cutoff),
        None => true,
    }
}

/// Whether commit `version` of the log at `dir` was written before `cutoff` (true if unsure).
fn written_before(dir: &std::path::Path, version: u64, cutoff: std::time::SystemTime) -> bool {
    std::fs::metadata(crate::catalog::log::commit_path(dir, version))
        .and_then(|m| m.modified())
        .map_or(true, |written| written < cutoff)
}

/// The oldest commit of the log at `dir` whose newest version is `newest`, by binary search
/// over names; None when the newest is not there.
fn oldest_commit(dir: &std::path::Path, newest: u64) -> Option<u64> {
    let path = |v: u64| crate::catalog::log::commit_path(dir, v);
    if !path(newest).is_file() {
        return None;
    }
    // Invariant: `hi` exists; every version below `lo` is gone.
    let (mut lo, mut hi) = (0, newest);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if path(mid).is_file() {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    Some(hi)
}

/// Compaction of tidemark's append-only tables merges files smaller than this into files of
/// about this size and leaves bigger ones alone. Merging into one file of everything made
/// each compaction rewrite the whole history: a job of 10,000 copies rewrote its 60,000 rows
/// 40 times a run, and the job's cost per table grew with the number of tables.
pub(crate) const COMPACTED_FILE_BYTES: u64 = 512 * 1024;

/// Whether a file of an append-only table of tidemark's is small enough to be compacted:
/// under half [`COMPACTED_FILE_BYTES`] (a compaction's own files past that size are left
/// alone, or every compaction would rewrite them again).
pub(crate) fn compactable(size: i64) -> bool {
    (size as u64) < COMPACTED_FILE_BYTES / 2
}

/// How many files of an append-only table of tidemark's are small enough to compact (see
/// [`COMPACT_AT_FILES`]).
pub(crate) fn compactable_files(table: &DeltaTable) -> usize {
    table.snapshot().map_or(0, |s| {
        s.log_data()
            .iter()
            .filter(|f| compactable(f.size()))
            .count()
    })
}

/// Whether the append-only table's commit of `version` is followed by a look at whether it
/// needs compaction: halfway between two versions a checkpoint may be due at (multiples of
/// [`CHECKPOINT_EVERY`] shifted by the table's [`stagger`]), so that a run seldom both compacts
/// and checkpoints (each is two writes: a no-op run stays within ten requests) and the next
/// checkpoint is of the compacted table.
pub(crate) fn compaction_due(log_store: &deltalake::logstore::LogStoreRef, version: u64) -> bool {
    (version + stagger(log_store)) % CHECKPOINT_EVERY == CHECKPOINT_EVERY / 2
}

/// Rows per row group of a checkpoint written by [`write_checkpoint`].
const CHECKPOINT_ROW_GROUP: usize = 65_536;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Write a classic checkpoint of `table` at its version, as Delta's kernel reconciles it, with
/// the removed files' tombstones in row groups of their own. A table whose rows are updated
/// often keeps a tombstone per update for `delta.deletedFileRetentionDuration` (7 days), and
/// every reader of a checkpoint with them mixed in decodes them all. Readers that skip row
/// groups on statistics (delta-rs' kernel does: it reads `add` where `add.path` is not null)
/// never open these; every other reader reads a standard checkpoint.
async fn write_checkpoint(table: &DeltaTable) -> Result<(), BoxError> {
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
    let name = crate::catalog::log::checkpoint_in_table(version);
    if local_dir(table).is_some_and(|dir| dir.join(&name).exists()) {
        return Ok(());
    }
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
    tokio::task::spawn_blocking(move || -> Result<(), BoxError> {
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
        // [other actions, tombstones]: (batches, rows) pending, each kind written as row
        // groups of its own.
        let mut pending: [(Vec<RecordBatch>, usize); 2] = [(vec![], 0), (vec![], 0)];
        let write = |out: &mut Option<ArrowWriter<Vec<u8>>>,
                     batches: Vec<RecordBatch>|
         -> Result<(), BoxError> {
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
        runtime.block_on(store.put(&deltalake::Path::from(name), bytes.into()))?;
        let state =
            std::sync::Arc::into_inner(state).ok_or("the checkpoint state is still shared")?;
        let stats = LastCheckpointHintStats::from_reconciliation_state(state, size, 0)?;
        writer.finalize(engine.as_ref(), &stats)?;
        Ok(())
    })
    .await?
}

#[cfg(test)]
mod tests {
    use super::{CLEANUP_BATCH, batch_expired, checkpoint_interval, oldest_commit};
    use std::time::{Duration, SystemTime};

    #[test]
    fn the_tables_of_a_warehouse_checkpoint_on_different_runs() {
        // A job's 1,000 targets, each a commit a run: each run checkpoints about a tenth of
        // them, never all.
        let mut per_run = [0; 10];
        for i in 0..1000 {
            let shift = super::stagger_of(&format!("file:///lake/main/dst/t{i}/"));
            assert!(shift < super::CLEANUP_EVERY);
            per_run[(shift % super::CHECKPOINT_EVERY) as usize] += 1;
        }
        assert!(
            per_run.iter().all(|n| (60..=140).contains(n)),
            "{per_run:?}"
        );
        // Whatever the shift: the first checkpoint on a version from 10 to 19, then every 10.
        for shift in 0..super::CLEANUP_EVERY {
            let due: Vec<u64> = (0..40)
                .filter(|v| super::shifted_multiple(*v, shift, 10))
                .collect();
            assert!((10..20).contains(&due[0]), "{shift}: {due:?}");
            assert!(
                due.windows(2).all(|w| w[1] - w[0] == 10),
                "{shift}: {due:?}"
            );
        }
        // The same table, with or without the URL's closing slash, is shifted the same.
        assert_eq!(
            super::stagger_of("s3://lake/t"),
            super::stagger_of("s3://lake/t/")
        );
    }

    #[test]
    fn checkpoints_of_bigger_tables_come_less_often() {
        // Small tables every 10 commits; then the shortest interval over which a checkpoint
        // rewrites at most 64 actions per commit on a local disk, among intervals that divide
        // 1,000 (the log's clean-up runs with a checkpoint once every 1,000 versions), up to
        // Delta's default of 100.
        let local = |size| checkpoint_interval(size, true);
        assert_eq!(local(0), 10);
        assert_eq!(local(640), 10);
        assert_eq!(local(641), 20);
        assert_eq!(local(1_280), 20);
        assert_eq!(local(1_281), 50);
        assert_eq!(local(3_200), 50);
        assert_eq!(local(3_201), 100);
        assert_eq!(local(10_000_000), 100);
        // On an object store (each commit after the checkpoint a request for its readers):
        // up to 400 per commit.
        let store = |size| checkpoint_interval(size, false);
        assert_eq!(store(4_000), 10);
        assert_eq!(store(4_001), 20);
        assert_eq!(store(8_001), 50);
        assert_eq!(store(20_001), 100);
        for size in (0..30_000).step_by(100) {
            for local in [true, false] {
                assert!(super::CLEANUP_EVERY.is_multiple_of(checkpoint_interval(size, local)));
            }
        }
    }

    #[test]
    fn a_clean_up_waits_for_a_batch_of_expired_commits() {
        let d = tempfile::tempdir().unwrap();
        let name = |v: u64| d.path().join(format!("{v:020}.json"));
        for v in 37..=1234 {
            std::fs::write(name(v), b"{}").unwrap();
        }
        assert_eq!(oldest_commit(d.path(), 1234), Some(37));
        assert_eq!(oldest_commit(d.path(), 1235), None);
        let hour_ago = SystemTime::now() - Duration::from_secs(3600);
        let age = |v: u64| {
            std::fs::File::options()
                .write(true)
                .open(name(v))
                .unwrap()
                .set_modified(hour_ago - Duration::from_secs(60))
                .unwrap()
        };
        assert!(!batch_expired(d.path(), 1234, hour_ago));
        // The oldest commits expired, but not yet a batch of them: no clean-up (Delta's keeps
        // the commit of its last checkpoint, so one expired commit is the usual state).
        for v in 37..37 + CLEANUP_BATCH {
            age(v);
        }
        assert!(!batch_expired(d.path(), 1234, hour_ago));
        age(37 + CLEANUP_BATCH);
        assert!(batch_expired(d.path(), 1234, hour_ago));
        // A newest version that is not there: doubt, so the clean-up runs.
        assert!(batch_expired(d.path(), 1235, hour_ago));
        // A log shorter than a batch: its newest commit decides.
        let short = tempfile::tempdir().unwrap();
        for v in 0..=5 {
            std::fs::write(short.path().join(format!("{v:020}.json")), b"{}").unwrap();
        }
        assert!(!batch_expired(short.path(), 5, hour_ago));
        assert!(batch_expired(
            short.path(),
            5,
            SystemTime::now() + Duration::from_secs(1)
        ));
    }
}
