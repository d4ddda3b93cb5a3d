//! What a copy writes into its target commit's metadata ([`RunMetadata`], under the key
//! `tidemark`), and reading it back: the mark of this pair's last committed run, found by its
//! `txn` version, or the target's newest commit read straight from the log by name.

use datafusion::arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use deltalake::DeltaTable;
use deltalake::logstore::object_store::{
    ObjectMeta, ObjectStore, ObjectStoreExt, path::Path as StorePath,
};
use futures::TryStreamExt;
use serde::{Deserialize, Serialize};

use crate::catalog::TableName;
use crate::engine::types::display_exact;
use crate::error::Result;

/// Key of tidemark's entry in a target commit's metadata.
pub(super) const META_KEY: &str = "tidemark";

/// The application id of the `txn` action for a source/target pair.
pub fn app_id(source: &TableName, target: &TableName) -> String {
    format!("tidemark-copy:{source}->{target}")
}

/// A mark as exact JSON: integers for timestamps (µs or ns) and dates (days), the digits of a
/// decimal as text (a JSON number would go through a double), never formatted text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum Mark {
    Us(i64),
    Ns(i64),
    Days(i64),
    Int(i64),
    Dec(String),
    Str(String),
}

impl Mark {
    /// The mark of a watermark value; None for NULL and types a watermark cannot have.
    pub(super) fn of(v: &ScalarValue) -> Option<Mark> {
        Some(match v {
            ScalarValue::TimestampMicrosecond(Some(x), _) => Mark::Us(*x),
            ScalarValue::TimestampNanosecond(Some(x), _) => Mark::Ns(*x),
            ScalarValue::TimestampMillisecond(Some(x), _) => Mark::Us(x * 1000),
            ScalarValue::TimestampSecond(Some(x), _) => Mark::Us(x * 1_000_000),
            ScalarValue::Date32(Some(d)) => Mark::Days(i64::from(*d)),
            ScalarValue::Int8(Some(i)) => Mark::Int(i64::from(*i)),
            ScalarValue::Int16(Some(i)) => Mark::Int(i64::from(*i)),
            ScalarValue::Int32(Some(i)) => Mark::Int(i64::from(*i)),
            ScalarValue::Int64(Some(i)) => Mark::Int(*i),
            ScalarValue::Decimal128(Some(_), _, _) => Mark::Dec(display_exact(v)),
            ScalarValue::Utf8(Some(s))
            | ScalarValue::LargeUtf8(Some(s))
            | ScalarValue::Utf8View(Some(s)) => Mark::Str(s.clone()),
            _ => return None,
        })
    }

    /// The mark as a value of type `dt` (None if it cannot be one).
    pub(super) fn value(&self, dt: &DataType) -> Option<ScalarValue> {
        // Timestamps keep their instant number; the zone (or none, for NTZ) is the watermark's.
        let tz = match dt {
            DataType::Timestamp(_, tz) => tz.clone(),
            _ => Some("UTC".into()),
        };
        let raw = match self {
            Mark::Us(us) => ScalarValue::TimestampMicrosecond(Some(*us), tz),
            Mark::Ns(ns) => ScalarValue::TimestampNanosecond(Some(*ns), tz),
            Mark::Days(d) => ScalarValue::Date32(Some(i32::try_from(*d).ok()?)),
            Mark::Int(i) => ScalarValue::Int64(Some(*i)),
            Mark::Dec(s) | Mark::Str(s) => ScalarValue::Utf8(Some(s.clone())),
        };
        raw.cast_to(dt).ok()
    }
}

/// tidemark's entry in a target commit: what the run read and where it left the mark.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub(super) struct RunMetadata {
    #[serde(deserialize_with = "lenient")]
    pub app_id: String,
    /// This pair's run number: the version of the commit's `txn` action.
    #[serde(deserialize_with = "lenient")]
    pub run: i64,
    #[serde(deserialize_with = "lenient")]
    pub run_id: String,
    #[serde(deserialize_with = "lenient")]
    pub source: String,
    #[serde(deserialize_with = "lenient")]
    pub source_version: Option<i64>,
    /// The source's Delta table id (a table dropped and created again starts its versions
    /// over).
    #[serde(deserialize_with = "lenient")]
    pub source_id: Option<String>,
    /// The source's newest commit file as the run found it: a later run that finds this very
    /// file still the newest knows the source is unchanged, without reading its log.
    #[serde(deserialize_with = "lenient")]
    pub source_commit: Option<CommitFile>,
    /// The database snapshot the run read (PostgreSQL's `txid_current_snapshot()`).
    #[serde(deserialize_with = "lenient")]
    pub source_snapshot: Option<String>,
    #[serde(deserialize_with = "lenient")]
    pub watermark_column: String,
    /// The watermark's type, as Arrow writes it (`Timestamp(µs, "UTC")`).
    #[serde(deserialize_with = "lenient")]
    pub watermark_type: Option<String>,
    /// The start point the run copied from.
    #[serde(deserialize_with = "lenient")]
    pub previous_mark: Option<Mark>,
    /// What the control row held when the run started: a later run that finds the control row
    /// still there knows this commit's mark was never recorded in it.
    #[serde(deserialize_with = "lenient")]
    pub control_mark: Option<Mark>,
    #[serde(deserialize_with = "lenient")]
    pub new_mark: Option<Mark>,
    /// The source files that may hold rows at the new mark: the next run need not look for
    /// ties at the mark unless another file may hold some.
    #[serde(deserialize_with = "lenient")]
    pub mark_files: Option<Vec<String>>,
    #[serde(deserialize_with = "lenient")]
    pub rows: i64,
    /// Source rows with a NULL watermark at `source_version` (a run that finds the source there
    /// again reports them without reading it).
    #[serde(deserialize_with = "lenient")]
    pub null_rows: Option<i64>,
    /// What was read: source files linked whole, and files decoded and filtered.
    #[serde(deserialize_with = "lenient")]
    pub whole_files: Option<usize>,
    #[serde(deserialize_with = "lenient")]
    pub decoded_files: Option<usize>,
}

/// One commit file of a log, as the store describes it. Delta commits are written once and
/// never rewritten, so a file of the same name with the same size and entity tag (or, without
/// one, modification time) is the same commit; a table dropped and made again writes new ones.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct CommitFile {
    pub size: u64,
    pub e_tag: Option<String>,
    pub modified_ms: i64,
}

impl CommitFile {
    pub(super) fn of(meta: &ObjectMeta) -> Self {
        CommitFile {
            size: meta.size,
            e_tag: meta.e_tag.clone(),
            modified_ms: meta.last_modified.timestamp_millis(),
        }
    }

    /// Whether `self` and `other` describe one file.
    pub(super) fn same(&self, other: &CommitFile) -> bool {
        let tag = |t: &Option<String>| t.as_deref().map(|t| t.trim_matches('"').to_string());
        self.size == other.size
            && match (tag(&self.e_tag), tag(&other.e_tag)) {
                (Some(a), Some(b)) => a == b,
                _ => self.modified_ms == other.modified_ms,
            }
    }
}

/// A field read leniently: a value of another type reads as the field's default, so that one
/// odd field never hides the rest of the entry (a lost mark would copy rows again).
fn lenient<'de, D, T>(d: D) -> std::result::Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::de::DeserializeOwned + Default,
{
    let v = serde_json::Value::deserialize(d)?;
    Ok(serde_json::from_value(v).unwrap_or_default())
}

impl RunMetadata {
    pub(super) fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("run metadata is plain data")
    }

    /// A commit's entry, if it has one tidemark can read.
    pub(super) fn from_commit(
        info: &std::collections::HashMap<String, serde_json::Value>,
    ) -> Option<Self> {
        Self::from_entry(info.get(META_KEY)?)
    }

    /// Read tidemark's entry itself.
    pub(super) fn from_entry(entry: &serde_json::Value) -> Option<Self> {
        serde_json::from_value(entry.clone()).ok()
    }
}

/// This pair's last committed run, read from the target with the watermark's type.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct LastRun {
    /// The control row's `last_watermark` the run saw (None without a control row).
    pub control: Option<ScalarValue>,
    /// The start point the run copied from.
    pub previous: Option<ScalarValue>,
    pub mark: Option<ScalarValue>,
    pub source_version: Option<i64>,
    pub source_id: Option<String>,
    /// The source files that could hold rows at `mark`, when the run recorded them.
    pub mark_files: Option<Vec<String>>,
}

impl LastRun {
    fn of(meta: &RunMetadata, wm_type: &DataType) -> Self {
        let value = |m: &Option<Mark>| m.as_ref().and_then(|m| m.value(wm_type));
        LastRun {
            control: value(&meta.control_mark),
            previous: value(&meta.previous_mark),
            mark: value(&meta.new_mark),
            source_version: meta.source_version,
            source_id: meta.source_id.clone(),
            mark_files: meta.mark_files.clone(),
        }
    }
}

/// The commit of a target's version as a run read it: the copy commits only while it is still
/// there unchanged ([`ReadCommit::still_there`]), so that a target dropped and made again by
/// another process never takes the copy's commit.
#[derive(Clone, Debug)]
pub(super) struct ReadCommit {
    pub version: u64,
    pub bytes: bytes::Bytes,
    /// The file as the store described it when it was read.
    pub file: CommitFile,
    /// The target's name, for the error.
    pub target: String,
    /// The target's store (rooted at the table).
    pub store: std::sync::Arc<dyn ObjectStore>,
}

impl ReadCommit {
    /// The commit of `t`'s version, read now. None when it cannot be read (the version is a
    /// checkpoint's whose commit is gone).
    pub(super) async fn of(t: &DeltaTable, target: &TableName) -> Option<ReadCommit> {
        let version = t.version()?;
        let store = t.log_store().object_store(None);
        let path = StorePath::from(crate::catalog::log::commit_in_table(version));
        let got = store.get(&path).await.ok()?;
        let file = CommitFile::of(&got.meta);
        Some(ReadCommit {
            version,
            bytes: got.bytes().await.ok()?,
            file,
            target: target.to_string(),
            store,
        })
    }

    /// Whether the commit is still the one read: the file is there and described the same,
    /// or (an entity tag made from an inode that a network file system changes) read again
    /// with the same bytes. The read again is conditional, so that it goes to the store, never
    /// to a kept copy.
    pub(super) async fn still_there(&self) -> deltalake::logstore::object_store::Result<bool> {
        use deltalake::logstore::object_store::{Error as StoreError, GetOptions};
        let store = self.store.as_ref();
        let now = match commit_file(store, self.version).await? {
            Some(now) => now,
            None => return Ok(false),
        };
        if now.same(&self.file) {
            return Ok(true);
        }
        // Without an entity tag a read again could be answered from a kept copy: another file.
        if now.e_tag.is_none() {
            return Ok(false);
        }
        let path = StorePath::from(crate::catalog::log::commit_in_table(self.version));
        let options = GetOptions {
            if_match: now.e_tag.clone(),
            ..Default::default()
        };
        match store.get_opts(&path, options).await {
            Ok(got) => Ok(got.bytes().await? == self.bytes),
            Err(StoreError::NotFound { .. } | StoreError::Precondition { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// What to say when [`ReadCommit::still_there`] could not ask the store (`e`).
    pub(super) fn unchecked(&self, e: impl std::fmt::Display) -> String {
        format!(
            "cannot check that {} is still the table this run read (its commit {}): {e}",
            self.target, self.version
        )
    }

    /// The run's error when the commit is gone or another file: a conflict, so the run starts
    /// over on what is there now.
    pub(super) fn replaced(&self) -> crate::error::Error {
        replaced(self.version, &self.target)
    }
}

/// The run's error when commit `version` of `target` that it read is gone or another file (or
/// the table there now has another id): a conflict, so the run starts over.
pub(super) fn replaced(version: u64, target: &str) -> crate::error::Error {
    crate::error::Error::Conflict(format!(
        "the commit {version} of {target} that this run read is gone or is another file now (the \
         log was cleaned up, or the table dropped and perhaps created again, by another \
         process); nothing was committed, the run starts over"
    ))
}

/// This pair's last run number in target `t` (0: none) and what that run committed;
/// `newest` is the commit of `t`'s version, when it was read ([`ReadCommit::of`]).
pub(super) async fn last_run(
    t: &DeltaTable,
    newest: Option<&[u8]>,
    app: &str,
    wm_type: &DataType,
) -> Result<(i64, Option<LastRun>)> {
    // Almost always the newest commit is this pair's last run, its `txn` and tidemark's entry
    // in one commit: one read of it instead of replaying the log for the `txn` and reading
    // the history for the entry (the newest `txn` of an app is its version). Anything else,
    // a failure to read it included, is left to that path.
    if let Some(bytes) = newest
        && let Some(meta) = commit_entry(bytes).filter(|m| m.app_id == app)
        && txn_version(bytes, app) == Some(meta.run)
    {
        return Ok((meta.run, Some(LastRun::of(&meta, wm_type))));
    }
    let state = t.snapshot()?;
    let run = state
        .transaction_version(t.log_store().as_ref(), app)
        .await?
        .unwrap_or(0);
    if run == 0 {
        return Ok((0, None));
    }
    // The run's commit is almost always among the newest: look at a few, then more.
    let latest = t.version().unwrap_or(0) as usize + 1;
    let mut seen = 0;
    for limit in [8usize, 128, 2048] {
        let infos: Vec<deltalake::kernel::CommitInfo> =
            t.history(Some(limit)).try_collect().await?;
        for info in infos.iter().skip(seen) {
            if let Some(meta) = RunMetadata::from_commit(&info.info)
                && meta.app_id == app
                && meta.run == run
            {
                return Ok((run, Some(LastRun::of(&meta, wm_type))));
            }
        }
        seen = infos.len();
        if limit >= latest {
            break;
        }
    }
    Ok((run, None))
}

/// The newest version of a table and the tidemark metadata of its newest run, read straight
/// from the log directory: the newest commit's, or the one before commits that change no row
/// (a compaction after the run, see [`keeps_rows`]). None when the newest version has no JSON
/// commit or no run of tidemark's comes before its other commits.
pub(super) async fn newest_commit(table_dir: &std::path::Path) -> Option<(u64, RunMetadata)> {
    let log = crate::catalog::log::dir(table_dir);
    let (newest, true) = crate::catalog::log::newest_version(&log)? else {
        return None;
    };
    newest_run(newest, Log::Dir(&log)).await
}

/// Where [`newest_run`] reads commits: a local log directory, or a store rooted at the table.
enum Log<'a> {
    Dir(&'a std::path::Path),
    Store(&'a dyn ObjectStore),
}

impl Log<'_> {
    /// The bytes of commit `version`.
    async fn commit(&self, version: u64) -> Option<bytes::Bytes> {
        match self {
            Log::Dir(log) => std::fs::read(crate::catalog::log::commit_path(log, version))
                .ok()
                .map(bytes::Bytes::from),
            Log::Store(store) => {
                let path = StorePath::from(crate::catalog::log::commit_in_table(version));
                store.get(&path).await.ok()?.bytes().await.ok()
            }
        }
    }
}

/// The newest run's metadata from commit `newest` back: past commits that change no row, up to
/// [`ROW_KEEPING_COMMITS`] of them.
async fn newest_run(newest: u64, log: Log<'_>) -> Option<(u64, RunMetadata)> {
    let mut version = newest;
    for _ in 0..=ROW_KEEPING_COMMITS {
        let bytes = log.commit(version).await?;
        if let Some(meta) = commit_entry(&bytes) {
            return Some((newest, meta));
        }
        if !keeps_rows(&bytes) || version == 0 {
            return None;
        }
        version -= 1;
    }
    None
}

/// How many commits that change no row [`newest_commit`] looks past: the compaction after a
/// run (`compact`), and a user's OPTIMIZE or two.
const ROW_KEEPING_COMMITS: usize = 3;

/// Whether a commit's bytes change no row of the table: files added and removed with
/// `dataChange` false (OPTIMIZE, auto compaction) and its commitInfo, nothing else (no
/// metadata, protocol, transaction or change-data action).
fn keeps_rows(bytes: &[u8]) -> bool {
    let mut files = false;
    for action in crate::catalog::log::actions(bytes) {
        match action {
            Some((kind, _)) if kind == "commitInfo" => {}
            Some((kind, body))
                if (kind == "add" || kind == "remove")
                    && body.get("dataChange") == Some(&serde_json::Value::Bool(false)) =>
            {
                files = true
            }
            _ => return false,
        }
    }
    files
}

/// The same from a table on an object store (`store` rooted at the table): its
/// `_last_checkpoint`, the log listed from there, and the newest commits read by name.
pub(super) async fn newest_commit_in(store: &dyn ObjectStore) -> Option<(u64, RunMetadata)> {
    let from = match store
        .get(&StorePath::from("_delta_log/_last_checkpoint"))
        .await
    {
        Ok(got) => {
            let hint: serde_json::Value = serde_json::from_slice(&got.bytes().await.ok()?).ok()?;
            hint.get("version")?.as_u64()?
        }
        Err(deltalake::logstore::object_store::Error::NotFound { .. }) => 0,
        Err(_) => return None,
    };
    let offset = StorePath::from(format!("_delta_log/{from:020}"));
    let listed: Vec<ObjectMeta> = store
        .list_with_offset(Some(&StorePath::from("_delta_log")), &offset)
        .try_collect()
        .await
        .ok()?;
    let newest = listed
        .iter()
        .filter_map(|m| {
            let name = m.location.filename()?;
            let digits = name.strip_suffix(".json")?;
            (digits.len() == 20).then(|| digits.parse::<u64>().ok())?
        })
        .max()?;
    newest_run(newest, Log::Store(store)).await
}

/// The file of commit `version` in `store` (rooted at the table), as the store describes it
/// now (a HEAD); None when there is none.
pub(super) async fn commit_file(
    store: &dyn ObjectStore,
    version: u64,
) -> deltalake::logstore::object_store::Result<Option<CommitFile>> {
    commit_meta(store, version, true).await
}

/// The same, from a whole read of the commit (which a store's commit cache answers as the
/// store described the file when it was read).
pub(super) async fn read_commit_file(
    store: &dyn ObjectStore,
    version: u64,
) -> deltalake::logstore::object_store::Result<Option<CommitFile>> {
    commit_meta(store, version, false).await
}

async fn commit_meta(
    store: &dyn ObjectStore,
    version: u64,
    head: bool,
) -> deltalake::logstore::object_store::Result<Option<CommitFile>> {
    let path = StorePath::from(crate::catalog::log::commit_in_table(version));
    let options = deltalake::logstore::object_store::GetOptions {
        head,
        ..Default::default()
    };
    match store.get_opts(&path, options).await {
        Ok(got) => Ok(Some(CommitFile::of(&got.meta))),
        Err(deltalake::logstore::object_store::Error::NotFound { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The version of app `app`'s transaction (`txn` action) in a commit file's bytes (delta-rs
/// writes them after the files, so only `txn` lines are parsed). None for a transaction with
/// a `lastUpdated` time, which a table's `delta.setTransactionRetentionDuration` may expire:
/// the Delta kernel decides those (tidemark writes none).
fn txn_version(bytes: &[u8], app: &str) -> Option<i64> {
    bytes
        .split(|b| *b == b'\n')
        .filter(|line| line.starts_with(br#"{"txn""#))
        .find_map(|line| {
            let action: serde_json::Value = serde_json::from_slice(line).ok()?;
            let txn = action.get("txn")?;
            if txn.get("appId")?.as_str()? != app {
                return None;
            }
            if txn.get("lastUpdated").is_some_and(|t| !t.is_null()) {
                return Some(None);
            }
            Some(txn.get("version")?.as_i64())
        })
        .flatten()
}

/// tidemark's entry in the commitInfo of a commit file's bytes.
fn commit_entry(bytes: &[u8]) -> Option<RunMetadata> {
    bytes.split(|b| *b == b'\n').find_map(|line| {
        let action: serde_json::Value = serde_json::from_slice(line).ok()?;
        RunMetadata::from_entry(action.get("commitInfo")?.get(META_KEY)?)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_commit_names_the_version_of_each_app_transaction_in_it() {
        // As delta-rs writes a commit: commitInfo, files, then transactions.
        let commit = br#"{"commitInfo":{"operation":"WRITE","tidemark":{"app_id":"b","run":4}}}
{"add":{"path":"x.parquet","size":1,"stats":"{\"txn\":1}"}}
{"txn":{"appId":"a","version":7,"lastUpdated":1}}
{"txn":{"appId":"b","version":4}}
{"txn":{"appId":"d","version":2,"lastUpdated":null}}"#;
        assert_eq!(txn_version(commit, "b"), Some(4));
        assert_eq!(txn_version(commit, "d"), Some(2));
        assert_eq!(txn_version(commit, "c"), None);
        // One that a retention may expire is left to the kernel.
        assert_eq!(txn_version(commit, "a"), None);
        assert_eq!(
            commit_entry(commit).map(|m| (m.app_id, m.run)),
            Some(("b".into(), 4))
        );
        assert_eq!(txn_version(b"{\"add\":{}}", "a"), None);
    }

    #[test]
    fn marks_round_trip_exactly_and_read_the_format_already_in_tables() {
        let ts = ScalarValue::TimestampMicrosecond(Some(1_700_000_000_123_456), Some("UTC".into()));
        let dec = ScalarValue::Decimal128(Some(12345678901234567890123), 38, 4);
        for (v, json) in [
            (ts.clone(), r#"{"us":1700000000123456}"#),
            (ScalarValue::Date32(Some(20000)), r#"{"days":20000}"#),
            (ScalarValue::Int32(Some(-7)), r#"{"int":-7}"#),
            (dec.clone(), r#"{"dec":"1234567890123456789.0123"}"#),
            (ScalarValue::Utf8(Some("b".into())), r#"{"str":"b"}"#),
        ] {
            let mark = Mark::of(&v).unwrap();
            assert_eq!(serde_json::to_string(&mark).unwrap(), json);
            let back: Mark = serde_json::from_str(json).unwrap();
            assert_eq!(back.value(&v.data_type()), Some(v));
        }
        assert_eq!(Mark::of(&ScalarValue::Int64(None)), None);
        // A commit's entry as earlier versions wrote it.
        let info = serde_json::json!({"tidemark": {"app_id": "a", "run": 3, "new_mark": {"int": 9},
            "control_mark": null, "null_rows": 0, "future_key": [1], "source_version": "odd"}});
        let meta = RunMetadata::from_entry(&info["tidemark"]).unwrap();
        assert_eq!(
            (meta.run, meta.new_mark, meta.control_mark),
            (3, Some(Mark::Int(9)), None)
        );
    }

    #[tokio::test]
    async fn the_newest_commit_is_found_by_name_or_in_the_directory() {
        let d = tempfile::tempdir().unwrap();
        let log = d.path().join("_delta_log");
        std::fs::create_dir_all(&log).unwrap();
        let commit = |v: u64, meta: &str| {
            let info = format!(r#"{{"commitInfo":{{"tidemark":{{"run":{meta}}}}}}}"#);
            std::fs::write(log.join(format!("{v:020}.json")), info + "\n").unwrap();
        };
        for v in 12..=25 {
            commit(v, &v.to_string());
        }
        std::fs::write(log.join("00000000000000000020.checkpoint.parquet"), b"p").unwrap();
        std::fs::write(log.join("_last_checkpoint"), br#"{"version":20,"size":1}"#).unwrap();
        let (v, meta) = newest_commit(d.path()).await.unwrap();
        assert_eq!((v, meta.run), (25, 25));
        // A subdirectory turns probing off: the directory answers the same.
        std::fs::create_dir(log.join("_sidecars")).unwrap();
        let (v, _) = newest_commit(d.path()).await.unwrap();
        assert_eq!(v, 25);
        // A newest commit not written by tidemark: none.
        std::fs::remove_dir(log.join("_sidecars")).unwrap();
        std::fs::write(
            log.join("00000000000000000026.json"),
            b"{\"commitInfo\":{}}\n",
        )
        .unwrap();
        assert!(newest_commit(d.path()).await.is_none());
        // Compactions after the run change no row: the run is still the newest.
        let compaction = concat!(
            r#"{"commitInfo":{"operation":"OPTIMIZE"}}"#,
            "\n",
            r#"{"add":{"path":"c.parquet","dataChange":false}}"#,
            "\n",
            r#"{"remove":{"path":"a.parquet","dataChange":false}}"#,
            "\n"
        );
        std::fs::write(log.join("00000000000000000026.json"), compaction).unwrap();
        std::fs::write(log.join("00000000000000000027.json"), compaction).unwrap();
        let (v, meta) = newest_commit(d.path()).await.unwrap();
        assert_eq!((v, meta.run), (27, 25));
        // One that changes rows (an append) hides the run.
        std::fs::write(
            log.join("00000000000000000028.json"),
            compaction.replace(
                r#""path":"c.parquet","dataChange":false"#,
                r#""path":"d.parquet","dataChange":true"#,
            ),
        )
        .unwrap();
        assert!(newest_commit(d.path()).await.is_none());
    }

    #[test]
    fn only_file_rewrites_without_data_change_keep_rows() {
        let keeps = |lines: &[&str]| keeps_rows((lines.join("\n") + "\n").as_bytes());
        let info = r#"{"commitInfo":{"operation":"OPTIMIZE"}}"#;
        let add = r#"{"add":{"path":"c.parquet","dataChange":false}}"#;
        let remove = r#"{"remove":{"path":"a.parquet","dataChange":false}}"#;
        assert!(keeps(&[info, add, remove]));
        assert!(keeps(&[info, remove]));
        // No file at all, a changed row, or any other action: not known to keep the rows.
        assert!(!keeps(&[info]));
        assert!(!keeps(&[
            info,
            r#"{"add":{"path":"c.parquet","dataChange":true}}"#
        ]));
        assert!(!keeps(&[info, r#"{"remove":{"path":"a.parquet"}}"#]));
        assert!(!keeps(&[info, add, r#"{"metaData":{"id":"x"}}"#]));
        assert!(!keeps(&[info, add, r#"{"txn":{"appId":"a","version":1}}"#]));
        assert!(!keeps(&[info, add, r#"{"cdc":{"path":"x"}}"#]));
        assert!(!keeps(&[info, add, "not json"]));
    }

    #[test]
    fn watermark_types_read_back_as_written() {
        use datafusion::arrow::datatypes::TimeUnit;
        for t in [
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            DataType::Timestamp(TimeUnit::Microsecond, Some("+02:00".into())),
            DataType::Timestamp(TimeUnit::Nanosecond, None),
            DataType::Date32,
            DataType::Int32,
            DataType::Int64,
            DataType::Decimal128(38, 4),
            DataType::Utf8,
            DataType::Dictionary(Box::new(DataType::UInt16), Box::new(DataType::Utf8)),
        ] {
            assert_eq!(t.to_string().parse::<DataType>().unwrap(), t, "{t}");
        }
    }

    #[tokio::test]
    async fn the_newest_commit_and_a_commit_file_on_a_store() {
        use deltalake::logstore::object_store::{PutPayload, memory::InMemory};
        let store = InMemory::new();
        let put = |path: String, body: String| {
            let store = &store;
            async move {
                store
                    .put(&StorePath::from(path), PutPayload::from(body))
                    .await
                    .unwrap();
            }
        };
        assert!(newest_commit_in(&store).await.is_none());
        assert_eq!(commit_file(&store, 0).await.unwrap(), None);
        for v in 0..=12u64 {
            put(
                format!("_delta_log/{v:020}.json"),
                format!("{{\"add\":{{}}}}\n{{\"commitInfo\":{{\"tidemark\":{{\"run\":{v}}}}}}}\n"),
            )
            .await;
        }
        put(
            "_delta_log/00000000000000000010.checkpoint.parquet".into(),
            "p".into(),
        )
        .await;
        put(
            "_delta_log/_last_checkpoint".into(),
            r#"{"version":10,"size":1}"#.into(),
        )
        .await;
        let (v, meta) = newest_commit_in(&store).await.unwrap();
        assert_eq!((v, meta.run), (12, 12));
        // A commit file is the same file until it is written again.
        let first = commit_file(&store, 12).await.unwrap().unwrap();
        assert!(first.same(&commit_file(&store, 12).await.unwrap().unwrap()));
        assert!(first.same(&read_commit_file(&store, 12).await.unwrap().unwrap()));
        assert_eq!(read_commit_file(&store, 13).await.unwrap(), None);
        put("_delta_log/00000000000000000012.json".into(), "{}\n".into()).await;
        let again = commit_file(&store, 12).await.unwrap().unwrap();
        assert!(!first.same(&again));
        assert!(
            newest_commit_in(&store).await.is_none(),
            "no tidemark entry"
        );
    }
}
