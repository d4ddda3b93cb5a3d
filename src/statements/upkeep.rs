//! Upkeep of the small tables tidemark commits to on every run (control tables, the run
//! history): they gain a commit per run, and a Delta table's cost to open grows with the
//! commits since its last checkpoint and with its number of files. tidemark checkpoints them
//! often and compacts the history itself, so that opening them after 10,000 runs costs what it
//! costs after 10.

use deltalake::DeltaTable;
use deltalake::checkpoints;

/// A checkpoint every this many commits (Delta's default is 100; replaying a JSON commit costs
/// about a millisecond, so 100 commits would double the cost of a small run).
pub const CHECKPOINT_EVERY: u64 = 10;

/// Compact the history once it holds this many files (each run appends one; a checkpoint
/// carries every file's entry, so their number is what opening the table costs).
pub const COMPACT_AT_FILES: usize = 32;

/// After a commit of `table` by tidemark: checkpoint it when its version is due. Best effort:
/// a failed checkpoint leaves the table as correct as before, only slower to open.
pub async fn after_commit(table: &DeltaTable) {
    if let Some(v) = table.version()
        && v > 0
        && v.is_multiple_of(CHECKPOINT_EVERY)
    {
        let _ = checkpoints::create_checkpoint(table, None).await;
    }
}

/// Whether an append-only table of tidemark's has grown enough files to compact.
pub fn needs_compaction(table: &DeltaTable) -> bool {
    table
        .snapshot()
        .is_ok_and(|s| s.log_data().num_files() >= COMPACT_AT_FILES)
}
