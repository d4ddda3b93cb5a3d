//! Step 7 of a copy: the target's auto compaction (Databricks' `delta.autoOptimize.autoCompact`).
//! A scheduled copy adds a file or a few to its target every run: after a year of hourly runs a
//! target would hold 8,760 small files, each an entry that opening the table reads (its
//! checkpoint carries them all) and a file that every query of it opens. Once a target holds
//! [`MIN_FILES`] small files that can be merged, the copy that finds them runs OPTIMIZE on it:
//! delta-rs' bin-packing, within each partition, of the files under the table's
//! `delta.targetFileSize` (100 MiB unless set) into files of about that size, in a commit of
//! its own that changes no row. It runs after the copy is recorded (the target's commit, the
//! control row, the history), so a failure or a kill in it loses nothing. It reads the
//! target's newest version first; a commit that lands while it runs and does more than append
//! files (or a target dropped and made again) makes it give up, and the run at the next
//! version it is due at (about ten commits later) tries again.

use deltalake::DeltaTable;
use deltalake::table::config::TablePropertiesExt;
use deltalake::table::state::DeltaTableState;

use crate::catalog::TableName;
use crate::engine::Session;
use crate::error::Result;
use crate::statements::upkeep;

/// Small files that can be merged at which a target is compacted: Databricks' auto
/// compaction's minimum (`spark.databricks.delta.autoCompact.minNumFiles`).
pub(super) const MIN_FILES: usize = 50;

/// The table property that turns auto compaction off (`'false'`); on unless so set.
pub(super) const PROPERTY: &str = "delta.autoOptimize.autoCompact";

/// After a copy committed `version` of its target (`table`: the target as the copy read it,
/// before its commit), compact the target when it is due; the number of files merged (0: not
/// due, or nothing to merge). A target is looked at only on the versions the history's
/// compaction is (halfway between two versions a checkpoint may be due at), from the file
/// list the copy already holds; only a target that needs it is read again, at its newest
/// version.
pub(super) async fn after_copy(
    session: &Session,
    table: &DeltaTable,
    version: u64,
    name: &TableName,
) -> Result<u64> {
    if !upkeep::compaction_due(&table.log_store(), version) {
        return Ok(0);
    }
    // The copy's own commit added at least one file.
    let due = |t: &DeltaTable, added: usize| {
        t.snapshot().is_ok_and(|s| {
            compacts(s)
                && super::whole_file::unmapped(t)
                && mergeable(s).is_some_and(|n| n + added >= MIN_FILES)
        })
    };
    if !due(table, 1) {
        return Ok(0);
    }
    let mut latest = table.clone();
    latest.update_incremental(None).await?;
    if !due(&latest, 0) {
        return Ok(0);
    }
    // Its commit goes only on this very table (not one dropped and made again meanwhile),
    // and only past commits that just appended.
    let metrics = upkeep::optimize_next(session, &latest, name, &upkeep::Layout::default()).await?;
    Ok(metrics.num_files_removed)
}

/// Whether a target is auto compacted: its property does not turn it off, and a compaction's
/// plain commit keeps its protocol.
fn compacts(snapshot: &DeltaTableState) -> bool {
    let on = snapshot
        .metadata()
        .configuration()
        .get(PROPERTY)
        .is_none_or(|v| !v.trim().eq_ignore_ascii_case("false"));
    on && super::history::compaction_keeps_protocol(snapshot.protocol())
}

/// The files OPTIMIZE would merge: those under the target size in partitions that hold two or
/// more of them. None when a file has a deletion vector (left to a user's OPTIMIZE).
fn mergeable(snapshot: &DeltaTableState) -> Option<usize> {
    let target = snapshot.table_config().target_file_size().get();
    let partitioned = !snapshot.metadata().partition_columns().is_empty();
    let mut small: std::collections::HashMap<Vec<(String, Option<String>)>, usize> =
        Default::default();
    for file in snapshot.log_data().iter() {
        if file.deletion_vector_descriptor().is_some() {
            return None;
        }
        if file.size() as u64 > target {
            continue;
        }
        let partition = if partitioned {
            let mut values: Vec<_> = file.partition_values_map().into_iter().collect();
            values.sort();
            values
        } else {
            vec![]
        };
        *small.entry(partition).or_default() += 1;
    }
    Some(small.values().filter(|n| **n >= 2).sum())
}
