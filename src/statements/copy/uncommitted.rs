//! Files a write made and did not commit, removed when the write is dropped (Ctrl-C,
//! SIGTERM, an error) before its commit began. The write goes through a copy of the target
//! table whose object store notes every data file put under the table. A write into
//! `_delta_log/` (the commit itself) that succeeds, or is still running when the write is
//! dropped, ends the guard's duty, since from then on the files may be in the log, and
//! removing a logged file would lose rows; a conditional put refused because another commit
//! holds the version did not land. A file left by a write dropped during its commit is only
//! unreferenced bytes, which VACUUM removes.
//!
//! A copy's guard also knows the target commit the run read ([`Uncommitted::expecting`]):
//! a commit is put only while that commit is still there unchanged, so that a target dropped
//! and made again by another process never takes the copy's commit.

use std::ops::Range;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use deltalake::DeltaTable;
use deltalake::logstore::object_store::path::Path;
use deltalake::logstore::object_store::{
    self, CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult,
};
use futures::stream::BoxStream;

use super::metadata::ReadCommit;
use crate::catalog::log::Immutable;

/// The guard: create it before a write, write through [`Uncommitted::table`], drop it after.
pub(crate) struct Uncommitted {
    state: Arc<Noted>,
    /// The commit of the target version the run read: a commit of the write is put only
    /// while it is still there unchanged ([`Uncommitted::expecting`]).
    read: Option<Arc<ReadCommit>>,
    /// The version after the one the write read: its commit takes it, or a later one past
    /// commits that only appended ([`Uncommitted::compacting`]).
    over_appends_from: Option<u64>,
}

struct Noted {
    /// The table's local directory (files are noted relative to it). None: a table on an
    /// object store, whose uncommitted files stay there, unreferenced.
    dir: Option<PathBuf>,
    /// Each file, and whether it was a multipart upload (which may leave `name#part`).
    files: Mutex<Vec<(String, bool)>>,
    /// Writes into the log begun and not (yet) ended: a dropped write stays counted.
    log_in_flight: AtomicUsize,
    /// A write into the log succeeded (or may have): the files may be in the log.
    log_landed: AtomicBool,
    /// The run's own flag, for the history's wording: set when a commit begins.
    commit_started: Arc<AtomicBool>,
    /// A commit was refused because the target commit the run read is gone or changed.
    replaced: AtomicBool,
    /// A commit was refused because a commit since the version read did more than append.
    overtaken: AtomicBool,
}

impl Noted {
    /// Whether the files may be in the log (then they stay).
    fn may_be_logged(&self) -> bool {
        self.log_landed.load(Ordering::SeqCst) || self.log_in_flight.load(Ordering::SeqCst) > 0
    }
}

impl Uncommitted {
    /// A guard over the table in `dir`; `commit_started` is set when its commit begins.
    pub(crate) fn new(dir: Option<PathBuf>, commit_started: Arc<AtomicBool>) -> Self {
        Uncommitted {
            state: Arc::new(Noted {
                dir,
                files: Mutex::new(vec![]),
                log_in_flight: AtomicUsize::new(0),
                log_landed: AtomicBool::new(false),
                replaced: AtomicBool::new(false),
                overtaken: AtomicBool::new(false),
                commit_started,
            }),
            read: None,
            over_appends_from: None,
        }
    }

    /// A guard for an OPTIMIZE of `table` (named `name`) as read: its files are removed (on a
    /// local disk) when it commits nothing; its commit takes the version after the one read,
    /// or a later one only past commits that just appended files, and only while the commit
    /// of the version read is still there unchanged (not a table dropped and made again).
    /// delta-rs' OPTIMIZE commits after others whatever its commit properties say, and its
    /// conflict check lets a removal through after another commit removed the same files with
    /// no data change (another compaction): each would add a copy of the rows. Any other
    /// commit between makes this one fail as a conflict ([`Uncommitted::conflict_if_overtaken`]).
    pub(crate) async fn compacting(table: &DeltaTable, name: &crate::catalog::TableName) -> Self {
        let mut guard = Uncommitted::new(
            table.log_store().root_url().to_file_path().ok(),
            Arc::new(AtomicBool::new(false)),
        );
        guard.over_appends_from = Some(table.version().map_or(0, |v| v + 1));
        guard.expecting(ReadCommit::of(table, name).await)
    }

    /// `e`, or a conflict when a commit of the write was refused for coming after a commit
    /// that did more than append ([`Uncommitted::compacting`]).
    pub(crate) fn conflict_if_overtaken(&self, e: crate::error::Error) -> crate::error::Error {
        if self.state.overtaken.load(Ordering::SeqCst) {
            crate::error::Error::Conflict(format!(
                "another writer changed the table or removed files while this compaction ran; nothing was committed ({e})"
            ))
        } else {
            e
        }
    }

    /// Put a commit of the write only while `read` is still there unchanged (a target dropped
    /// and created again by another process meanwhile makes the commit fail, naming it):
    /// every strategy's commit passes here just before it is put, delta-rs' own included.
    pub(super) fn expecting(mut self, read: Option<ReadCommit>) -> Self {
        self.read = read.map(Arc::new);
        self
    }

    /// `e`, or a conflict (the run starts over on what is there now) when the write failed
    /// because the target commit the run read is gone or changed: its commit was refused
    /// here, or delta-rs failed before its put on the log of another table (a dropped
    /// target's log no longer has the version read), which one more look-up tells.
    pub(crate) async fn conflict_if_replaced(&self, e: crate::error::Error) -> crate::error::Error {
        let Some(read) = &self.read else {
            return e;
        };
        let replaced = self.state.replaced.load(Ordering::SeqCst)
            || (!matches!(e, crate::error::Error::Conflict(_))
                && matches!(read.still_there().await, Ok(false)));
        if replaced { read.replaced() } else { e }
    }

    /// Note a file (relative to the table) written outside the object store (a hard link).
    pub(crate) fn note(&self, relative: &str) {
        if let Ok(mut files) = self.state.files.lock() {
            files.push((relative.to_string(), false));
        }
    }

    /// `table`, writing through a store that notes its data files for this guard.
    pub(crate) fn table(&self, table: &DeltaTable) -> DeltaTable {
        let log_store = table.log_store();
        let config = log_store.config();
        let prefixed: Arc<dyn ObjectStore> = Arc::new(Noting {
            inner: log_store.object_store(None),
            state: self.state.clone(),
            relative: true,
            read: self.read.clone(),
            over_appends_from: self.over_appends_from,
        });
        let root: Arc<dyn ObjectStore> = Arc::new(Noting {
            inner: log_store.root_object_store(None),
            state: self.state.clone(),
            relative: false,
            read: None,
            over_appends_from: None,
        });
        let noting =
            crate::catalog::kernel::with_engine_here(deltalake::logstore::default_logstore(
                prefixed,
                root,
                config.location(),
                config.options(),
            ));
        let mut copy = DeltaTable::new(noting);
        copy.state = table.state.clone();
        copy
    }
}

impl Drop for Uncommitted {
    fn drop(&mut self) {
        if self.state.may_be_logged() {
            return;
        }
        let Some(dir) = &self.state.dir else {
            return;
        };
        let files = self
            .state
            .files
            .lock()
            .map(|f| f.clone())
            .unwrap_or_default();
        for (relative, multipart) in files {
            let path = dir.join(&relative);
            let _ = std::fs::remove_file(&path);
            // A multipart upload stopped half-way leaves `name#part` beside the file.
            if !multipart {
                continue;
            }
            if let (Some(parent), Some(name)) = (path.parent(), path.file_name()) {
                let staged = format!("{}#", name.to_string_lossy());
                if let Ok(entries) = std::fs::read_dir(parent) {
                    for entry in entries.flatten() {
                        if entry.file_name().to_string_lossy().starts_with(&staged) {
                            let _ = std::fs::remove_file(entry.path());
                        }
                    }
                }
            }
        }
    }
}

/// An object store that notes the data files put through it, refuses a commit whose target
/// was replaced (see [`Uncommitted::expecting`]) or that would follow a commit that did more
/// than append (see [`Uncommitted::compacting`]), and disarms the guard at the first write into
/// the Delta log.
#[derive(Debug)]
struct Noting {
    inner: Arc<dyn ObjectStore>,
    state: Arc<Noted>,
    /// Paths are relative to the table (the table's store), not to the store's root.
    relative: bool,
    /// The target's commit that a commit put through this store must still find unchanged.
    read: Option<Arc<ReadCommit>>,
    /// The version a commit put through this store takes, or a later one past commits that
    /// only appended.
    over_appends_from: Option<u64>,
}

impl std::fmt::Debug for Noted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Noted")
    }
}

impl std::fmt::Display for Noting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Noting({})", self.inner)
    }
}

fn in_log(location: &Path) -> bool {
    crate::catalog::log::in_log(location.as_ref())
}

/// Whether a commit's bytes only append: files added with a data change, app transactions
/// and its commitInfo (no removal, deletion vector, metadata or protocol change).
fn only_appends(bytes: &[u8]) -> bool {
    crate::catalog::log::actions(bytes).all(|action| {
        action.is_some_and(|(kind, body)| match kind.as_str() {
            "commitInfo" | "txn" => true,
            "add" => {
                body.get("dataChange") != Some(&serde_json::Value::Bool(false))
                    && body.get("deletionVector").is_none_or(|d| d.is_null())
            }
            _ => false,
        })
    })
}

impl Noting {
    /// Whether commits `from` up to (not including) `version` all only appended files (none
    /// when `version` is `from`); any doubt answers false.
    async fn only_appends_between(&self, from: u64, version: u64) -> bool {
        if version < from {
            return false;
        }
        for v in from..version {
            let path = Path::from(crate::catalog::log::commit_in_table(v));
            let Ok(got) = object_store::ObjectStoreExt::get(self.inner.as_ref(), &path).await
            else {
                return false;
            };
            match got.bytes().await {
                Ok(bytes) if only_appends(&bytes) => {}
                _ => return false,
            }
        }
        true
    }

    /// Note a data file; a write into the log other than a conditional put counts as landed.
    fn put_at(&self, location: &Path, multipart: bool) {
        if in_log(location) {
            self.state.commit_started.store(true, Ordering::SeqCst);
            self.state.log_landed.store(true, Ordering::SeqCst);
        } else if self.relative
            && let Ok(mut files) = self.state.files.lock()
        {
            files.push((location.to_string(), multipart));
        }
    }
}

#[async_trait]
impl ObjectStore for Noting {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        if !in_log(location) {
            self.put_at(location, false);
            return self.inner.put_opts(location, payload, opts).await;
        }
        if let Some(Immutable::Commit(version)) = crate::catalog::log::immutable(location.as_ref())
        {
            if let Some(from) = self.over_appends_from
                && !self.only_appends_between(from, version).await
            {
                self.state.overtaken.store(true, Ordering::SeqCst);
                return Err(object_store::Error::Generic {
                    store: "tidemark",
                    source: format!(
                        "commit {version} refused: a commit since version {from} did more than append files"
                    )
                    .into(),
                });
            }
            // Tests hold a write's commit here, whatever wrote it.
            crate::hold_at("copy::before_log_put").await;
            if let Some(read) = &self.read {
                let fail = |what: String| object_store::Error::Generic {
                    store: "tidemark",
                    source: what.into(),
                };
                match read.still_there().await {
                    Ok(true) => {}
                    Ok(false) => {
                        // (The copy reports `read.replaced()` in place of delta-rs' wrapping of
                        // this: see `conflict_if_replaced`.)
                        self.state.replaced.store(true, Ordering::SeqCst);
                        return Err(fail(read.replaced().to_string()));
                    }
                    Err(e) => {
                        return Err(fail(format!(
                            "{}; nothing was committed",
                            read.unchecked(e)
                        )));
                    }
                }
            }
        }
        // A commit (delta-rs puts `N.json` only if absent): counted while it runs; a put
        // refused because another commit holds the name did not land.
        self.state.commit_started.store(true, Ordering::SeqCst);
        self.state.log_in_flight.fetch_add(1, Ordering::SeqCst);
        let result = self.inner.put_opts(location, payload, opts).await;
        if !matches!(result, Err(object_store::Error::AlreadyExists { .. })) {
            self.state.log_landed.store(true, Ordering::SeqCst);
        }
        self.state.log_in_flight.fetch_sub(1, Ordering::SeqCst);
        result
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.put_at(location, true);
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        self.inner.get_opts(location, options).await
    }

    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[Range<u64>],
    ) -> object_store::Result<Vec<Bytes>> {
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list_with_offset(prefix, offset)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        self.put_at(to, false);
        self.inner.copy_opts(from, to, options).await
    }

    async fn rename_opts(
        &self,
        from: &Path,
        to: &Path,
        options: object_store::RenameOptions,
    ) -> object_store::Result<()> {
        self.put_at(to, false);
        self.inner.rename_opts(from, to, options).await
    }
}

#[cfg(test)]
mod tests {
    use super::only_appends;

    #[test]
    fn only_added_files_with_a_data_change_are_appends() {
        let commit = |lines: &[&str]| only_appends((lines.join("\n") + "\n").as_bytes());
        let info = r#"{"commitInfo":{"operation":"WRITE"}}"#;
        let add = r#"{"add":{"path":"a.parquet","dataChange":true}}"#;
        let txn = r#"{"txn":{"appId":"x","version":3}}"#;
        assert!(commit(&[info, add, txn]));
        assert!(commit(&[info]));
        // A compaction's files, a removal, a deletion vector, a schema or protocol change.
        assert!(!commit(&[
            info,
            r#"{"add":{"path":"c.parquet","dataChange":false}}"#
        ]));
        assert!(!commit(&[
            info,
            add,
            r#"{"remove":{"path":"b.parquet","dataChange":true}}"#
        ]));
        assert!(!commit(&[
            info,
            r#"{"add":{"path":"a.parquet","dataChange":true,"deletionVector":{"storageType":"u"}}}"#
        ]));
        assert!(!commit(&[info, add, r#"{"metaData":{"id":"m"}}"#]));
        assert!(!commit(&[info, r#"{"protocol":{"minReaderVersion":3}}"#]));
        assert!(!commit(&[info, "{"]));
    }
}
