//! The one place that knows how a Delta log names its files (`_delta_log/`, a commit
//! `00000000000000000007.json`, a checkpoint `....checkpoint.parquet`), and finds the newest
//! version of a local log by asking for names instead of reading the directory.

use std::path::{Path, PathBuf};

/// The log's directory inside a table.
pub const DIR: &str = "_delta_log";

/// The log directory of the table at `table_dir`.
pub fn dir(table_dir: &Path) -> PathBuf {
    table_dir.join(DIR)
}

/// The name of version `version`'s file of kind `kind` (`json`, `checkpoint.parquet`, `crc`).
pub fn file_name(version: u64, kind: &str) -> String {
    format!("{version:020}.{kind}")
}

/// The commit file of `version` in the log directory `log`.
pub fn commit_path(log: &Path, version: u64) -> PathBuf {
    log.join(file_name(version, "json"))
}

/// The commit of `version`, relative to the table's root.
pub fn commit_in_table(version: u64) -> String {
    format!("{DIR}/{}", file_name(version, "json"))
}

/// The checkpoint of `version`, relative to the table's root.
pub fn checkpoint_in_table(version: u64) -> String {
    format!("{DIR}/{}", file_name(version, "checkpoint.parquet"))
}

/// Whether an object path (`a/b/c`) lies inside a table's log.
pub fn in_log(location: &str) -> bool {
    location.split('/').any(|p| p == DIR)
}

/// The actions of a commit's bytes, one per non-blank line, each as its kind and body; None
/// for a line that is not a JSON object holding exactly one action.
pub fn actions(commit: &[u8]) -> impl Iterator<Item = Option<(String, serde_json::Value)>> + '_ {
    commit
        .split(|b| *b == b'\n')
        .filter(|line| !line.iter().all(u8::is_ascii_whitespace))
        .map(|line| {
            let serde_json::Value::Object(action) = serde_json::from_slice(line).ok()? else {
                return None;
            };
            let mut fields = action.into_iter();
            match (fields.next(), fields.next()) {
                (Some(one), None) => Some(one),
                _ => None,
            }
        })
}

/// Whether the log at `log` holds a version: a commit or a checkpoint, as Delta readers name
/// them. A process killed while creating a table leaves a log directory with no version (only
/// a staged `00000000000000000000.json#1`, or nothing): that is no table, and creating it
/// again must work.
pub fn has_version(log: &Path) -> bool {
    if log.join(file_name(0, "json")).is_file() || log.join("_last_checkpoint").is_file() {
        return true;
    }
    let Ok(entries) = std::fs::read_dir(log) else {
        return false;
    };
    entries
        .flatten()
        .any(|e| e.file_name().to_str().is_some_and(is_version_file))
}

/// Whether a file name in a log directory names a version: a commit, a checkpoint, or
/// `_last_checkpoint`.
pub fn is_version_file(name: &str) -> bool {
    if name == "_last_checkpoint" {
        return true;
    }
    let Some((digits, rest)) = name.split_at_checked(20) else {
        return false;
    };
    digits.bytes().all(|b| b.is_ascii_digit())
        && rest.starts_with('.')
        && (rest.ends_with(".json") || rest.ends_with(".parquet"))
}

/// A file of a log that is written once and never changes while its table lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Immutable {
    /// `00000000000000000007.json`
    Commit(u64),
    /// `00000000000000000010.checkpoint.parquet`, a part of a multi-part checkpoint
    /// (`.checkpoint.0000000001.0000000002.parquet`) or a v2 checkpoint
    /// (`.checkpoint.<uuid>.parquet` or `.json`).
    Checkpoint(u64),
}

impl Immutable {
    pub fn version(self) -> u64 {
        match self {
            Immutable::Commit(v) | Immutable::Checkpoint(v) => v,
        }
    }
}

/// The log directory and the name of an object path lying directly in a table's log
/// (`a/b/_delta_log/<name>`).
pub fn in_log_dir(location: &str) -> Option<(&str, &str)> {
    let (dir, name) = location.rsplit_once('/')?;
    (dir == DIR || dir.ends_with(&format!("/{DIR}"))).then_some((dir, name))
}

/// What the object at `location` (`a/b/_delta_log/<name>`) is, if it is a commit or a
/// checkpoint of a log.
pub fn immutable(location: &str) -> Option<Immutable> {
    let (_, name) = in_log_dir(location)?;
    let (digits, rest) = name.split_at_checked(20)?;
    let version = digits
        .bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| digits.parse().ok())??;
    if rest == ".json" {
        Some(Immutable::Commit(version))
    } else if rest.starts_with(".checkpoint.")
        && (rest.ends_with(".parquet") || rest.ends_with(".json"))
    {
        Some(Immutable::Checkpoint(version))
    } else {
        None
    }
}

/// The newest version of the log at `log` and whether it has a JSON commit: from the last
/// checkpoint on, by name, else from every name in the directory.
pub fn newest_version(log: &Path) -> Option<(u64, bool)> {
    let probed = probe_log_from_checkpoint(log).and_then(|names| {
        names
            .iter()
            .filter_map(|n| n.strip_suffix(".json")?.parse::<u64>().ok())
            .max()
    });
    match probed {
        Some(v) => Some((v, true)),
        None => newest_in_directory(log),
    }
}

/// The newest version named in a log directory, and whether it has a JSON commit.
fn newest_in_directory(log: &Path) -> Option<(u64, bool)> {
    let mut newest: Option<(u64, bool)> = None;
    for entry in std::fs::read_dir(log).ok()? {
        let name = entry.ok()?.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some((digits, rest)) = name.split_at_checked(20) else {
            continue;
        };
        let Ok(v) = digits.parse::<u64>() else {
            continue;
        };
        let is_json = rest == ".json";
        if !is_json && !rest.starts_with('.') {
            continue;
        }
        newest = match newest {
            Some((n, j)) if n > v || (n == v && j) => Some((n, j)),
            _ => Some((v, is_json)),
        };
    }
    newest
}

/// Above this many commits after the offset, a Delta log is listed instead of probed.
const PROBED_COMMITS: u64 = 200;

/// The files of a Delta log after `offset` (the directory `prefix`, an offset naming a version
/// as Delta readers list from a checkpoint), found by asking for the names a version can have
/// instead of reading the directory: a log keeps every commit for 30 days, and reading 11,000
/// names costs 5 ms where the few after the checkpoint cost a few stat calls.
///
/// Commits are written in order and a log is cleaned up from its oldest files, so when the
/// first version is there the commits after it run up to the first one missing. The probe
/// finds, per version: the commit, a single-file checkpoint and a checksum file. It does not
/// find multi-part, V2 or compacted files after the first version: a reader then replays the
/// commits instead, and reads the same table. None (the directory is read instead) when the
/// probe stops below the version `_last_checkpoint` names (a clean-up deleting commits), when the
/// offset is not a version, the log has subdirectories, the first version has neither a
/// commit nor, if `_last_checkpoint` names it, its single-file checkpoint, or the log runs on
/// too far.
pub(crate) fn probe_log(dir: &Path, prefix: &str, offset: &str) -> Option<Vec<String>> {
    let digits = offset.strip_prefix(prefix)?.strip_prefix('/')?;
    if !prefix.ends_with(DIR) || digits.len() != 20 {
        return None;
    }
    probe(dir, digits.parse().ok()?, checkpoint_hint(dir))
}

/// The file names of the Delta log at `dir` from its last checkpoint on (from version 0
/// without one), found by probing (see [`probe_log`]); None when they must be read from the
/// directory.
fn probe_log_from_checkpoint(dir: &Path) -> Option<Vec<String>> {
    let hint = checkpoint_hint(dir);
    probe(dir, hint.unwrap_or(0), hint)
}

/// The version `_last_checkpoint` names in the log at `dir`, if it can be read.
fn checkpoint_hint(dir: &Path) -> Option<u64> {
    std::fs::read(dir.join("_last_checkpoint"))
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .and_then(|h| h.get("version").and_then(|v| v.as_u64()))
}

/// The probe of [`probe_log`] from version `first`, `hint` being what `_last_checkpoint` names.
fn probe(dir: &Path, first: u64, hint: Option<u64>) -> Option<Vec<String>> {
    // A log with subdirectories (staged commits, sidecars) has files no probe can name; a
    // directory's link count is 2 plus its subdirectories (where the file system keeps it so).
    use std::os::unix::fs::MetadataExt;
    if std::fs::metadata(dir).ok()?.nlink() != 2 {
        return None;
    }
    let exists = |name: &str| dir.join(name).is_file();
    let has = |version: u64, kind: &str| exists(&file_name(version, kind));
    // The first version must be there: its commit, or the single-file checkpoint
    // `_last_checkpoint` names (when it names another form, the directory is read).
    let readable = if hint == Some(first) {
        has(first, "checkpoint.parquet")
    } else {
        has(first, "checkpoint.parquet") || has(first, "json")
    };
    if !readable {
        return None;
    }
    let mut names = vec![];
    for version in first.. {
        if version - first > PROBED_COMMITS {
            return None;
        }
        if version > first && !has(version, "json") {
            // A gap below the last checkpoint is a clean-up under way (or cut short), not the
            // end of the log: read the directory.
            if hint.is_some_and(|h| h >= version) {
                return None;
            }
            break;
        }
        for kind in ["json", "checkpoint.parquet", "crc"] {
            if has(version, kind) {
                names.push(file_name(version, kind));
            }
        }
    }
    if exists("_last_checkpoint") {
        names.push("_last_checkpoint".into());
    }
    names.sort();
    Some(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commits_and_checkpoints_are_immutable() {
        let f = |p: &str| immutable(p);
        assert_eq!(
            f("t/_delta_log/00000000000000000007.json"),
            Some(Immutable::Commit(7))
        );
        assert_eq!(
            f("_delta_log/00000000000000000007.json"),
            Some(Immutable::Commit(7))
        );
        assert_eq!(
            f("t/_delta_log/00000000000000000010.checkpoint.parquet"),
            Some(Immutable::Checkpoint(10))
        );
        assert_eq!(
            f("t/_delta_log/00000000000000000010.checkpoint.0000000001.0000000002.parquet"),
            Some(Immutable::Checkpoint(10))
        );
        assert_eq!(
            f(
                "t/_delta_log/00000000000000000010.checkpoint.80a083e8-7026-4e79-81be-64bd76c43a11.json"
            ),
            Some(Immutable::Checkpoint(10))
        );
        assert_eq!(f("t/_delta_log/_last_checkpoint"), None);
        assert_eq!(f("t/_delta_log/00000000000000000007.crc"), None);
        assert_eq!(f("t/_delta_log/00000000000000000007.json.tmp"), None);
        assert_eq!(f("t/part-0.json"), None);
        assert_eq!(f("t/x_delta_log/00000000000000000007.json"), None);
    }
}
