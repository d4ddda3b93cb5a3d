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
    if small {
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
