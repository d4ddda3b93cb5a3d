//! Where the warehouse keeps its names: a local directory, or a prefix on an object store
//! (`tidemark s3://bucket/wh`). A [`Place`] is one directory or file of the warehouse's tree
//! (`<catalog>/<schema>/<table>`, a link, a view's definition), with the few operations the
//! catalog needs on it. On a store a directory is a key prefix: it exists while something is
//! under it (an empty catalog or schema keeps a marker object), and a table exists when its
//! `_delta_log/` holds a version, as on disk.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use deltalake::logstore::object_store::{
    self, ObjectStore, ObjectStoreExt, PutPayload, path::Path as Key,
};
use futures::{StreamExt, TryStreamExt};
use url::Url;

use crate::error::{Error, Result};

/// The object that keeps an empty directory (a new catalog or schema) on a store.
const MARKER: &str = ".tidemark-dir";

/// One object store bucket the warehouse lives in.
pub struct Bucket {
    /// `s3://bucket`, for URLs and messages.
    base: Url,
    store: Arc<dyn ObjectStore>,
    /// The runtime the store's connections belong to: the catalog's questions are
    /// synchronous (DataFusion asks for table names without awaiting).
    runtime: tokio::runtime::Handle,
    /// What this statement has learnt of the names (see [`Place::begin_statement`]).
    seen: std::sync::Mutex<HashMap<(Ask, String), Seen>>,
}

/// A question about a key whose answer a statement keeps.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Ask {
    Read,
    IsFile,
    IsDir,
    HasVersion,
}

/// The answer kept.
#[derive(Clone)]
enum Seen {
    Bytes(Option<Vec<u8>>),
    Yes(bool),
}

impl fmt::Debug for Bucket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Bucket({})", self.base)
    }
}

impl Bucket {
    /// The answer to `ask` about `key`: kept from earlier in this statement, or asked of the
    /// store with `f` (and kept when `keep` allows it; an error never is).
    fn remember(
        &self,
        ask: Ask,
        key: &str,
        keep: impl Fn(&Seen) -> bool,
        f: impl FnOnce() -> Result<Seen>,
    ) -> Result<Seen> {
        let id = (ask, key.to_string());
        if let Some(seen) = self.seen.lock().ok().and_then(|s| s.get(&id).cloned()) {
            return Ok(seen);
        }
        let seen = f()?;
        if keep(&seen)
            && let Ok(mut kept) = self.seen.lock()
        {
            kept.insert(id, seen.clone());
        }
        Ok(seen)
    }

    /// Run the change `f` (a write or a removal) to its end; whatever happened, what was kept
    /// may be wrong now.
    fn change<T: Send>(&self, f: impl Future<Output = T> + Send) -> T {
        let done = self.wait(f);
        self.forget();
        done
    }

    /// A change through this process: nothing kept holds any more.
    fn forget(&self) {
        if let Ok(mut kept) = self.seen.lock() {
            kept.clear();
        }
    }

    /// Run `f` to its end from synchronous code: on the runtime's own threads without
    /// stalling them (tokio's `block_in_place`), elsewhere on the runtime directly.
    fn wait<T: Send>(&self, f: impl Future<Output = T> + Send) -> T {
        use tokio::runtime::{Handle, RuntimeFlavor};
        match Handle::try_current() {
            Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(|| h.block_on(f))
            }
            // A single-threaded runtime cannot wait on itself: another thread waits.
            Ok(_) => std::thread::scope(|s| {
                s.spawn(|| self.runtime.block_on(f))
                    .join()
                    .expect("a store request does not panic")
            }),
            Err(_) => self.runtime.block_on(f),
        }
    }
}

/// `bytes` written to a hidden file beside `p` (its directory made first), to be moved or
/// linked into place whole.
fn staged(p: &Path, bytes: &[u8]) -> Result<PathBuf> {
    let dir = p.parent().expect("a file is in a directory");
    std::fs::create_dir_all(dir)?;
    let name = p.file_name().unwrap_or_default().to_string_lossy();
    let tmp = dir.join(format!(".{name}.{}.tmp", uuid::Uuid::new_v4().simple()));
    std::fs::write(&tmp, bytes)?;
    Ok(tmp)
}

/// A directory or file of the warehouse.
#[derive(Clone, Debug)]
pub enum Place {
    Local(PathBuf),
    /// `key` is the path inside the bucket, without leading or trailing `/`.
    Store {
        bucket: Arc<Bucket>,
        key: String,
    },
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Place::Local(p) => write!(f, "{}", p.display()),
            Place::Store { bucket, key } => {
                write!(f, "{}/{key}", bucket.base.as_str().trim_end_matches('/'))
            }
        }
    }
}

impl Place {
    /// The root of a warehouse on the store at `url` (`s3://bucket/prefix`), its credentials
    /// and endpoint from the environment; must be called inside the runtime.
    pub fn on_store(url: &Url) -> Result<Place> {
        let runtime = tokio::runtime::Handle::current();
        // A runtime of one thread could not wait for the store from the catalog's synchronous
        // questions (see [`Bucket::wait`]).
        if runtime.runtime_flavor() != tokio::runtime::RuntimeFlavor::MultiThread {
            return Err(Error::Invalid(format!(
                "a warehouse on a store ({}) needs a multi-threaded tokio runtime",
                super::external::shown(url)
            )));
        }
        let (store, prefix) = super::external::root_store(url)?;
        let mut base = url.clone();
        base.set_path("");
        Ok(Place::Store {
            bucket: Arc::new(Bucket {
                base,
                store,
                runtime,
                seen: Default::default(),
            }),
            key: prefix.as_ref().trim_matches('/').to_string(),
        })
    }

    /// Whether a request of this process to this place's store has been answered (always, for
    /// a local place).
    pub fn answered(&self) -> bool {
        match self {
            Place::Local(_) => true,
            Place::Store { bucket, .. } => {
                super::log_cache::answered(&super::external::store_name(&bucket.base))
            }
        }
    }

    /// Whether the store answers for this place (its bucket exists, the credentials hold).
    pub async fn reachable(&self) -> Result<()> {
        let Place::Store { bucket, key } = self else {
            return Ok(());
        };
        let prefix = Self::key(key, "");
        bucket
            .store
            .list_with_delimiter((!key.is_empty()).then_some(&prefix))
            .await
            .map(|_| ())
            .map_err(|e| {
                Error::Invalid(format!(
                    "cannot reach the warehouse {self}: {e} (check the bucket, {})",
                    super::external::store_settings(&bucket.base)
                ))
            })
    }

    /// A statement begins: on a store, the names it asks about are asked of the store once
    /// and kept until the statement ends or this process changes one (a statement asks
    /// whether `orders` is a table, a view or a link many times while it is planned). A name
    /// another process makes or drops meanwhile is seen by the next statement. A table is
    /// never taken to be missing from what was kept: a statement creating one sees it.
    pub fn begin_statement(&self) {
        if let Place::Store { bucket, .. } = self {
            bucket.forget();
        }
        // A store that did not answer the last statement is asked again, and the logs of
        // tables are listed afresh.
        super::log_cache::forget_failures();
        super::log_cache::forget_listings();
    }

    /// The local path, when this place is on the local file system.
    pub fn local(&self) -> Option<&Path> {
        match self {
            Place::Local(p) => Some(p),
            Place::Store { .. } => None,
        }
    }

    /// `name` inside this directory.
    pub fn join(&self, name: &str) -> Place {
        match self {
            Place::Local(p) => Place::Local(p.join(name)),
            Place::Store { bucket, key } => Place::Store {
                bucket: bucket.clone(),
                key: if key.is_empty() {
                    name.to_string()
                } else {
                    format!("{key}/{name}")
                },
            },
        }
    }

    /// The directory this place is in.
    pub fn parent(&self) -> Option<Place> {
        match self {
            Place::Local(p) => p.parent().map(|p| Place::Local(p.to_path_buf())),
            Place::Store { bucket, key } => key.rsplit_once('/').map(|(k, _)| Place::Store {
                bucket: bucket.clone(),
                key: k.to_string(),
            }),
        }
    }

    /// The place as a directory URL, as delta-rs opens tables.
    pub fn url(&self) -> Result<Url> {
        match self {
            Place::Local(p) => Url::from_directory_path(p)
                .map_err(|_| Error::Invalid(format!("cannot turn {} into a URL", p.display()))),
            Place::Store { bucket, key } => {
                let mut url = bucket.base.clone();
                if let Ok(mut segments) = url.path_segments_mut() {
                    segments.clear();
                    segments.extend(key.split('/').filter(|s| !s.is_empty()));
                    segments.push("");
                }
                Ok(url)
            }
        }
    }

    /// The object key of `name` in this directory (of this place itself when `name` is "").
    /// Keys are raw, as delta-rs makes them from a table's URL (names with characters a
    /// store would escape are refused before they get here: see `Warehouse::check_store_name`).
    fn key(key: &str, name: &str) -> Key {
        let parts: Vec<&str> = key
            .split('/')
            .chain(name.split('/'))
            .filter(|p| !p.is_empty())
            .collect();
        Key::parse(parts.join("/")).unwrap_or_else(|_| Key::from_iter(parts))
    }

    fn store_error(&self, doing: &str, e: object_store::Error) -> Error {
        Error::Other(format!("cannot {doing} {self}: {e}"))
    }

    /// Whether this directory exists.
    pub fn is_dir(&self) -> bool {
        match self {
            Place::Local(p) => p.is_dir(),
            Place::Store { bucket, key } => {
                let prefix = Self::key(key, "");
                let ask = || {
                    Ok(Seen::Yes(bucket.wait(async {
                        matches!(bucket.store.list(Some(&prefix)).next().await, Some(Ok(_)))
                    })))
                };
                matches!(
                    bucket.remember(Ask::IsDir, key, |_| true, ask),
                    Ok(Seen::Yes(true))
                )
            }
        }
    }

    /// Whether this file exists.
    pub fn is_file(&self) -> bool {
        match self {
            Place::Local(p) => p.is_file(),
            Place::Store { bucket, key } => {
                let k = Self::key(key, "");
                let ask = || {
                    Ok(Seen::Yes(
                        bucket.wait(async { bucket.store.head(&k).await.is_ok() }),
                    ))
                };
                matches!(
                    bucket.remember(Ask::IsFile, key, |_| true, ask),
                    Ok(Seen::Yes(true))
                )
            }
        }
    }

    /// The file's bytes; None when there is no such file.
    pub fn read(&self) -> Result<Option<Vec<u8>>> {
        match self {
            Place::Local(p) => match std::fs::read(p) {
                Ok(b) => Ok(Some(b)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(Error::Other(format!("cannot read {}: {e}", p.display()))),
            },
            Place::Store { bucket, key } => {
                let k = Self::key(key, "");
                let ask = || {
                    bucket.wait(async {
                        match bucket.store.get(&k).await {
                            Ok(r) => r
                                .bytes()
                                .await
                                .map(|b| Seen::Bytes(Some(b.to_vec())))
                                .map_err(|e| self.store_error("read", e)),
                            Err(object_store::Error::NotFound { .. }) => Ok(Seen::Bytes(None)),
                            Err(e) => Err(self.store_error("read", e)),
                        }
                    })
                };
                match bucket.remember(Ask::Read, key, |_| true, ask)? {
                    Seen::Bytes(bytes) => Ok(bytes),
                    Seen::Yes(_) => Ok(None),
                }
            }
        }
    }

    /// Write the file whole: a reader finds the old one or the new one (locally a temporary
    /// file renamed over it; an object store's PUT is whole by itself).
    pub fn write(&self, bytes: Vec<u8>) -> Result<()> {
        match self {
            Place::Local(p) => {
                let tmp = staged(p, &bytes)?;
                std::fs::rename(&tmp, p).inspect_err(|_| {
                    let _ = std::fs::remove_file(&tmp);
                })?;
                Ok(())
            }
            Place::Store { bucket, key } => {
                let k = Self::key(key, "");
                bucket.change(async {
                    bucket
                        .store
                        .put(&k, PutPayload::from(bytes))
                        .await
                        .map(|_| ())
                        .map_err(|e| self.store_error("write", e))
                })
            }
        }
    }

    /// Write the file whole if there is none yet: false (and nothing written) when there is
    /// one. Two processes writing it at once: one writes, the other is told.
    pub fn write_new(&self, bytes: Vec<u8>) -> Result<bool> {
        match self {
            Place::Local(p) => {
                let tmp = staged(p, &bytes)?;
                // A hard link is made only where no file is, with the whole text at once.
                let linked = std::fs::hard_link(&tmp, p);
                let _ = std::fs::remove_file(&tmp);
                match linked {
                    Ok(()) => Ok(true),
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
                    // A file system without hard links: made only where none is, then written.
                    Err(_) => {
                        use std::io::Write;
                        match std::fs::OpenOptions::new()
                            .write(true)
                            .create_new(true)
                            .open(p)
                        {
                            Ok(mut f) => {
                                f.write_all(&bytes)?;
                                f.sync_all()?;
                                Ok(true)
                            }
                            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
                            Err(e) => Err(e.into()),
                        }
                    }
                }
            }
            Place::Store { bucket, key } => {
                let k = Self::key(key, "");
                bucket.change(async {
                    let create = object_store::PutOptions {
                        mode: object_store::PutMode::Create,
                        ..Default::default()
                    };
                    match bucket
                        .store
                        .put_opts(&k, PutPayload::from(bytes), create)
                        .await
                    {
                        Ok(_) => Ok(true),
                        Err(object_store::Error::AlreadyExists { .. })
                        | Err(object_store::Error::Precondition { .. }) => Ok(false),
                        Err(e) => Err(self.store_error("write", e)),
                    }
                })
            }
        }
    }

    /// Remove the file; false when there was none.
    pub fn remove_file(&self) -> Result<bool> {
        match self {
            Place::Local(p) => match std::fs::remove_file(p) {
                Ok(()) => Ok(true),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
                Err(e) => Err(Error::Other(format!("cannot remove {}: {e}", p.display()))),
            },
            Place::Store { bucket, key } => {
                let k = Self::key(key, "");
                bucket.change(async {
                    // A store's DELETE of nothing succeeds: ask first.
                    match bucket.store.head(&k).await {
                        Err(object_store::Error::NotFound { .. }) => return Ok(false),
                        Err(e) => return Err(self.store_error("read", e)),
                        Ok(_) => {}
                    }
                    bucket
                        .store
                        .delete(&k)
                        .await
                        .map(|_| true)
                        .map_err(|e| self.store_error("remove", e))
                })
            }
        }
    }

    /// Make this directory (and its parents). On a store a marker object keeps it.
    pub fn make_dir(&self) -> Result<()> {
        match self {
            Place::Local(p) => Ok(std::fs::create_dir_all(p)?),
            Place::Store { .. } => self.join(MARKER).write(vec![]),
        }
    }

    /// Remove this directory if it is empty (on a store: its marker, if it has one).
    pub fn remove_empty_dir(&self) {
        match self {
            Place::Local(p) => {
                let _ = std::fs::remove_dir(p);
            }
            Place::Store { .. } => {
                let _ = self.join(MARKER).remove_file();
            }
        }
    }

    /// Remove this directory and all it holds. On a store a table's log goes first: a
    /// removal stopped half-way leaves files that name no table.
    pub fn remove_dir_all(&self) -> Result<()> {
        match self {
            Place::Local(p) => match std::fs::remove_dir_all(p) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
                _ => Ok(()),
            },
            Place::Store { bucket, key } => {
                let prefix = Self::key(key, "");
                bucket.change(async {
                    let keys: Vec<Key> = bucket
                        .store
                        .list(Some(&prefix))
                        .map_ok(|o| o.location)
                        .try_collect()
                        .await
                        .map_err(|e| self.store_error("list", e))?;
                    // The log first, then the rest, each in batches.
                    let (log, rest): (Vec<Key>, Vec<Key>) = keys
                        .into_iter()
                        .partition(|k| super::log::in_log(k.as_ref()));
                    for batch in [log, rest] {
                        let gone = bucket.store.delete_stream(
                            futures::stream::iter(batch.into_iter().map(Ok)).boxed(),
                        );
                        let results: Vec<_> = gone.collect().await;
                        for r in results {
                            match r {
                                Ok(_) | Err(object_store::Error::NotFound { .. }) => {}
                                Err(e) => return Err(self.store_error("remove", e)),
                            }
                        }
                    }
                    Ok(())
                })
            }
        }
    }

    /// The names in this directory: its sub-directories (`dirs`) or its files, sorted, without
    /// hidden ones (a leading `.`); `_` names are the warehouse's own, and left out of
    /// directories.
    pub fn list(&self, dirs: bool) -> Vec<String> {
        self.try_list(dirs).unwrap_or_default()
    }

    /// [`Place::list`], with a store that does not answer an error (a directory that does not
    /// exist is empty).
    pub fn try_list(&self, dirs: bool) -> Result<Vec<String>> {
        let mut names: Vec<String> = match self {
            Place::Local(p) => {
                let Ok(entries) = std::fs::read_dir(p) else {
                    return Ok(vec![]);
                };
                entries
                    .filter_map(|e| e.ok())
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_dir() == dirs))
                    .filter_map(|e| e.file_name().into_string().ok())
                    .collect()
            }
            Place::Store { bucket, key } => {
                let prefix = Self::key(key, "");
                let listed = bucket.wait(async {
                    bucket
                        .store
                        .list_with_delimiter((!key.is_empty()).then_some(&prefix))
                        .await
                });
                let listed = listed.map_err(|e| self.store_error("list", e))?;
                if dirs {
                    listed
                        .common_prefixes
                        .iter()
                        .filter_map(|k| k.filename().map(str::to_string))
                        .collect()
                } else {
                    listed
                        .objects
                        .iter()
                        .filter_map(|o| o.location.filename().map(str::to_string))
                        .collect()
                }
            }
        };
        let hidden = |n: &str| n.starts_with('.') || (dirs && n.starts_with('_'));
        names.retain(|n| !hidden(n));
        names.sort();
        Ok(names)
    }

    /// Every object under this place on a store (the place itself if it is one), each with
    /// its key relative to the place (empty for the place itself), size and modification
    /// time in milliseconds; in key order.
    pub fn objects(&self) -> Result<Vec<(String, u64, i64)>> {
        let Place::Store { bucket, key } = self else {
            return Err(Error::Other(format!("{self} is not on an object store")));
        };
        let k = Self::key(key, "");
        // The place itself, if it is a file (the bucket itself is none).
        let mut found: Vec<(String, u64, i64)> = vec![];
        if !key.is_empty()
            && let Some((size, modified)) = self.file_meta()?
        {
            found.push((String::new(), size, modified));
        }
        found.extend(bucket.wait(async {
            let mut found = vec![];
            let mut listed = bucket.store.list((!key.is_empty()).then_some(&k));
            let dir = format!("{k}/");
            while let Some(o) = listed.next().await {
                let o = o.map_err(|e| self.store_error("list", e))?;
                let name = o.location.as_ref();
                // A folder marker of the place itself (`dir/`) is not under it.
                let rel = if key.is_empty() {
                    Some(name)
                } else {
                    name.strip_prefix(&dir)
                };
                if let Some(rel) = rel.filter(|r| !r.is_empty()) {
                    found.push((rel.to_string(), o.size, o.last_modified.timestamp_millis()));
                }
            }
            Ok::<_, Error>(found)
        })?);
        // Empty folder markers (`day/`, listed as `day`) of directories holding files.
        let dirs: std::collections::HashSet<&str> = found
            .iter()
            .flat_map(|(rel, _, _)| rel.match_indices('/').map(move |(i, _)| &rel[..i]))
            .collect();
        let markers: std::collections::HashSet<String> = found
            .iter()
            .filter(|(rel, size, _)| *size == 0 && dirs.contains(rel.as_str()))
            .map(|(rel, _, _)| rel.clone())
            .collect();
        found.retain(|(rel, _, _)| !markers.contains(rel));
        found.sort();
        Ok(found)
    }

    /// The size and modification time (ms) of this file on a store; None when there is none.
    pub fn file_meta(&self) -> Result<Option<(u64, i64)>> {
        let Place::Store { bucket, key } = self else {
            return Err(Error::Other(format!("{self} is not on an object store")));
        };
        let k = Self::key(key, "");
        bucket.wait(async {
            match bucket.store.head(&k).await {
                Ok(o) => Ok(Some((o.size, o.last_modified.timestamp_millis()))),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(self.store_error("read", e)),
            }
        })
    }

    /// Whether this directory is a Delta table: its log holds a version (see
    /// [`super::log::has_version`]).
    pub fn has_version(&self) -> bool {
        self.try_has_version().unwrap_or(false)
    }

    /// [`Place::has_version`], with a store that does not answer an error.
    pub fn try_has_version(&self) -> Result<bool> {
        match self {
            Place::Local(p) => Ok(super::log::has_version(&super::log::dir(p))),
            Place::Store { bucket, key } => {
                let log = Self::key(key, super::log::DIR);
                let ask = || {
                    bucket.wait(async {
                        let mut listed = bucket.store.list(Some(&log));
                        let dir = format!("{log}/");
                        while let Some(o) = listed.next().await {
                            let o = o.map_err(|e| self.store_error("list", e))?;
                            // Names in the log itself, not in its sub-directories.
                            let name = o.location.as_ref().strip_prefix(&dir).unwrap_or_default();
                            if !name.contains('/') && super::log::is_version_file(name) {
                                return Ok(Seen::Yes(true));
                            }
                        }
                        Ok(Seen::Yes(false))
                    })
                };
                // Only a table found is kept: one created meanwhile is found.
                let found = |s: &Seen| matches!(s, Seen::Yes(true));
                Ok(found(&bucket.remember(Ask::HasVersion, key, found, ask)?))
            }
        }
    }
}
