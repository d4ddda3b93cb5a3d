//! Log files read once per process from an object store, and once per machine with
//! [`super::log_disk`]. A Delta commit (`_delta_log/00000000000000000007.json`) or checkpoint
//! is written once, by a conditional PUT, and never changes while its table lives; delta-rs
//! reads the same commits several times in one statement (opening the table, planning its
//! scan, reading its history), and a checkpoint in many small ranges (25 reads of one when it
//! writes the next), each time a request to the store. This store keeps the commits and
//! checkpoints it has read or written whole and answers later reads of them, whole or in
//! ranges, from memory or the local disk, but only while the log's latest listing in this
//! process shows the very object that was kept (same size and entity tag): a table dropped and
//! made again at the same place (by this process or another) has new files of the same names,
//! which are read afresh.
//!
//! A reader opens a table by reading `_last_checkpoint` and then listing the log from the
//! checkpoint it names: two requests. Here the first is a listing from the checkpoint kept
//! from the last open (on disk, by any process), which shows `_last_checkpoint` as well, so
//! the kept copy answers the read while the listing shows that very object, and the listing
//! answers the reader's own. The listing then answers every open of that log in the same
//! statement for a few seconds, with this process's own commits and checkpoints added as it
//! writes them (a commit only when it directly follows the listing's newest); any other write
//! to the log, a refused one included, or the next statement, lets it go. A small data file
//! written on this machine is read from its copy kept here (data files' names are never
//! used twice). Everything else (other listings, other data files, reads of files the
//! process has not listed, conditional reads) goes to the store.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use deltalake::logstore::object_store::path::Path;
use deltalake::logstore::object_store::{
    Attributes, CopyOptions, GetOptions, GetResult, GetResultPayload, ListResult, MultipartUpload,
    ObjectMeta, ObjectStore, PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions,
    Result,
};
use futures::stream::BoxStream;

use super::log::{Immutable, immutable};

/// Bytes kept in memory at most; past it, everything kept is let go.
const KEPT_BYTES: usize = 256 << 20;
/// A file larger than this is not kept (a large table's checkpoint is read in ranges).
const LARGEST: u64 = 16 << 20;
/// A data file this process writes is kept (see [`super::log_disk::save_data`]) when it is no
/// larger than this: a run's history, a control table's file, a small increment.
const SMALL_DATA: u64 = 256 << 10;

/// Whether `location` names a Delta data file: a Parquet file outside any log named
/// `part-...` with a UUID, as delta-rs' (tidemark's), Spark's and Databricks' data files are,
/// so that the name is never written again with other bytes. A Parquet file a user names
/// (`COPY ... TO 's3://b/out.parquet'`, or `'.../<uuid>.parquet'`, then rewritten by another
/// tool) is not one: it is always read from the store.
fn data_file(location: &Path) -> bool {
    log_of(location).is_none()
        && location.filename().is_some_and(|name| {
            name.starts_with("part-")
                && name.ends_with(".parquet")
                && name
                    .as_bytes()
                    .windows(36)
                    .any(|w| std::str::from_utf8(w).is_ok_and(|w| uuid::Uuid::try_parse(w).is_ok()))
        })
}

/// `inner` (the root store of one bucket, `name`) with its log files read once.
pub struct CachedLog {
    inner: Arc<dyn ObjectStore>,
    name: String,
}

/// Files kept in memory: by store and path, what the store said of each and its bytes.
type Kept = HashMap<String, (ObjectMeta, Bytes)>;

/// The files kept, and their bytes in all.
static READ: Memory = Mutex::new(None);
/// The files as the latest listing of their log showed them, by store and path.
/// Ordered, so that the end of a listing looks only at the names under its prefix (a job over
/// thousands of tables lists thousands of logs).
static LISTED: Mutex<Option<BTreeMap<String, ObjectMeta>>> = Mutex::new(None);
/// Small data files this process wrote, by store and path, and their bytes in all: apart from
/// the log files, so that a load of many small files never pushes those out.
static WRITTEN: Memory = Mutex::new(None);
/// Bytes of [`WRITTEN`] at most; past it, everything kept there is let go.
const WRITTEN_BYTES: usize = 32 << 20;
/// One fetch of a file at a time: the ranges of one checkpoint are asked for at once.
static FETCHING: Mutex<Option<HashMap<String, Arc<tokio::sync::Mutex<()>>>>> = Mutex::new(None);

/// Whether `a` and `b` describe one object: same size and same entity tag (compared without
/// quotes: Azure quotes it in the answer to a PUT and not in a listing). Without tags, never:
/// a time and a size do not tell a file made again within the second.
pub(super) fn same_object(a: &ObjectMeta, b: &ObjectMeta) -> bool {
    a.size == b.size
        && match (&a.e_tag, &b.e_tag) {
            (Some(x), Some(y)) => x.trim_matches('"') == y.trim_matches('"'),
            _ => false,
        }
}

/// The name of the hint a Delta log keeps of its newest checkpoint.
const HINT: &str = "_last_checkpoint";

/// How long a log's listing answers this process's opens of it (within one statement).
const LISTING_LIFE: std::time::Duration = std::time::Duration::from_secs(5);

/// A log's listing from a version on, as this statement's opens of the log are answered.
#[derive(Clone)]
struct Listing {
    /// Where the listing starts (exclusive): the log's path and a version's 20 digits.
    after: Path,
    /// What it showed, in name order: the log's files from `after` up to and including the
    /// first name at or past `_last_checkpoint`, and this process's own writes since.
    items: Vec<ObjectMeta>,
    /// Whether the store's listing ended there (else more names follow the last item).
    whole: bool,
    made: std::time::Instant,
    /// When it was asked for, in this process's order of listings: a listing asked for
    /// later never gives way to one asked for earlier.
    seq: u64,
}

impl Listing {
    /// What the listing says of `_last_checkpoint` at `location`: Some(meta) when shown,
    /// Some(None) when it shows there is none, None when it cannot tell.
    fn hint(&self, location: &Path) -> Option<Option<&ObjectMeta>> {
        if let Some(meta) = self.items.iter().find(|m| m.location == *location) {
            return Some(Some(meta));
        }
        let past = self
            .items
            .last()
            .is_some_and(|m| m.location.as_ref() > location.as_ref());
        (self.whole || past).then_some(None)
    }

    /// The newest commit the listing shows.
    fn newest_commit(&self) -> Option<u64> {
        self.items
            .iter()
            .filter_map(|m| match immutable(m.location.as_ref())? {
                Immutable::Commit(v) => Some(v),
                Immutable::Checkpoint(_) => None,
            })
            .max()
    }

    /// Add or replace the file `meta` written by this process, in name order.
    fn put(&mut self, meta: ObjectMeta) {
        match self
            .items
            .binary_search_by(|m| m.location.as_ref().cmp(meta.location.as_ref()))
        {
            Ok(i) => self.items[i] = meta,
            Err(i) => self.items.insert(i, meta),
        }
    }
}

/// This statement's listings of logs, by store and log path (see [`Listing`]).
#[derive(Default)]
struct Logs {
    listings: HashMap<String, Listing>,
    /// By log, how many times this process wrote there or let its listing go: a listing
    /// made while the count moved is not kept (it may not show a write that landed
    /// meanwhile, or be older than a listing the process has already read).
    changes: HashMap<String, u64>,
    /// How many times every listing was let go.
    forgotten: u64,
    /// The listings asked for so far (see [`Listing::seq`]).
    asked: u64,
}

static LOGS: Mutex<Option<Logs>> = Mutex::new(None);

/// Run `f` on the logs' listings.
fn logs<T>(f: impl FnOnce(&mut Logs) -> T) -> Option<T> {
    let mut l = LOGS.lock().ok()?;
    Some(f(l.get_or_insert_with(Logs::default)))
}

/// The log directory a path lies directly in, if it is a Delta log's.
fn log_of(location: &Path) -> Option<Path> {
    let (dir, _) = super::log::in_log_dir(location.as_ref())?;
    Some(Path::from(dir))
}

/// The listing of a log kept for this statement, if still young.
fn listing(key: &str) -> Option<Listing> {
    logs(|l| match l.listings.get(key) {
        Some(listing) if listing.made.elapsed() < LISTING_LIFE => Some(listing.clone()),
        Some(_) => {
            l.listings.remove(key);
            None
        }
        None => None,
    })?
}

/// Where the log `key` stands as a listing of it is asked for: (changes, forgotten, the
/// listing's [`Listing::seq`]).
fn stamp(key: &str) -> (u64, u64, u64) {
    logs(|l| {
        l.asked += 1;
        (
            l.changes.get(key).copied().unwrap_or(0),
            l.forgotten,
            l.asked,
        )
    })
    .unwrap_or((0, 0, 0))
}

/// Keep `listing` of the log `key`, asked for at `from` ([`stamp`]): only if nothing was
/// written or listed there since (it may not show that), and no listing asked for later is
/// kept already.
fn keep_listing(key: String, listing: Listing, from: (u64, u64, u64)) {
    logs(|l| {
        let now = (l.changes.get(&key).copied().unwrap_or(0), l.forgotten);
        if now != (from.0, from.1) || l.listings.get(&key).is_some_and(|k| k.seq > listing.seq) {
            return;
        }
        if l.listings.len() >= 1 << 12 {
            l.listings.clear();
        }
        l.listings.insert(key, listing);
    });
}

/// Note a change of the log `key` (a write of this process, or a listing of the store newer
/// than the one kept): `follow` adds the write to the listing kept, in the same turn of the
/// lock, and says whether it could; if not, the listing is let go.
fn changed(key: &str, follow: impl FnOnce(&mut Listing) -> bool) {
    logs(|l| {
        if l.changes.len() >= 1 << 14 {
            l.changes.clear();
            l.listings.clear();
            l.forgotten += 1;
        }
        *l.changes.entry(key.to_string()).or_insert(0) += 1;
        let kept = match l.listings.get_mut(key) {
            Some(listing) => listing.made.elapsed() < LISTING_LIFE && follow(listing),
            None => true,
        };
        if !kept {
            l.listings.remove(key);
        }
    });
}

/// Let go of the listing of the log `key`.
fn drop_listing(key: &str) {
    changed(key, |_| false)
}

/// A statement begins, or runs again what lost a race: the logs it opens are listed afresh.
pub fn forget_listings() {
    logs(|l| {
        l.listings.clear();
        l.forgotten += 1;
    });
}

/// The entity tag that keeps a log's `_last_checkpoint` as missing (no store gives it).
const ABSENT: &str = "tidemark: none";

/// Whether `meta` keeps a `_last_checkpoint` as missing.
fn absent(meta: &ObjectMeta) -> bool {
    meta.e_tag.as_deref() == Some(ABSENT)
}

/// The version `_last_checkpoint`'s bytes name.
fn hint_version(bytes: &[u8]) -> Option<u64> {
    serde_json::from_slice::<serde_json::Value>(bytes)
        .ok()?
        .get("version")?
        .as_u64()
}

/// Stores (by name) that have answered a request of this process.
static ANSWERED: Mutex<Option<HashSet<String>>> = Mutex::new(None);
/// The failure of each store that has not answered yet: its later requests in the statement
/// (and the shell's check after it) fail with it at once. A store that does not answer would
/// otherwise make every request wait out its retries (30 s each), and a statement asks several
/// things that a failure only makes "absent".
static FAILED: Mutex<Option<HashMap<String, String>>> = Mutex::new(None);

/// Whether the store `name` has answered a request of this process.
pub fn answered(name: &str) -> bool {
    ANSWERED
        .lock()
        .is_ok_and(|a| a.as_ref().is_some_and(|a| a.contains(name)))
}

/// Note the store `name`'s answer to a request: a success, or no answer at all (see
/// [`FAILED`]; a refusal such as 403 is an answer, given at once).
fn note<T>(name: &str, answer: &Result<T>) {
    match answer {
        Ok(_) => {
            if !answered(name)
                && let Ok(mut a) = ANSWERED.lock()
            {
                a.get_or_insert_with(HashSet::new).insert(name.to_string());
            }
        }
        Err(e) if no_answer(e) && !answered(name) => {
            if let Ok(mut f) = FAILED.lock() {
                f.get_or_insert_with(HashMap::new)
                    .entry(name.to_string())
                    .or_insert_with(|| e.to_string());
            }
        }
        Err(_) => {}
    }
}

/// Whether a request failed for want of an answer (no connection, no response in time), its
/// retries spent.
fn no_answer(e: &deltalake::logstore::object_store::Error) -> bool {
    use deltalake::logstore::object_store::client::{HttpError, HttpErrorKind};
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cause {
        if let Some(http) = c.downcast_ref::<HttpError>() {
            return matches!(
                http.kind(),
                HttpErrorKind::Connect | HttpErrorKind::Request | HttpErrorKind::Timeout
            );
        }
        cause = c.source();
    }
    false
}

/// A statement begins: the stores that did not answer before are asked again (a network
/// that was down may be up; a long session is not locked out).
pub fn forget_failures() {
    if let Ok(mut f) = FAILED.lock() {
        *f = None;
    }
}

/// The failure to give at once for a request to `name`, a store that has failed and never
/// answered.
fn refused(name: &str) -> Option<deltalake::logstore::object_store::Error> {
    if answered(name) {
        return None;
    }
    let failed = FAILED.lock().ok()?.as_ref()?.get(name)?.clone();
    Some(deltalake::logstore::object_store::Error::Generic {
        store: "object store",
        source: format!("{failed} (asked before, and not asked again)").into(),
    })
}

/// A listing's items, noting the log files it shows (see [`LISTED`]) and, once it has ended
/// whole, forgetting the files under `prefix` (after `offset`) it no longer shows.
fn noted(
    name: String,
    prefix: Option<&Path>,
    offset: Option<&Path>,
    listed: BoxStream<'static, Result<ObjectMeta>>,
) -> BoxStream<'static, Result<ObjectMeta>> {
    use futures::StreamExt;
    if let Some(e) = refused(&name) {
        return Box::pin(futures::stream::once(async move { Err(e) }));
    }
    let under = format!(
        "{name}/{}",
        prefix.map(|p| format!("{p}/")).unwrap_or_default()
    );
    let after = offset.map(|o| format!("{name}/{o}"));
    let seen: Arc<Mutex<(HashSet<String>, bool)>> = Arc::default();
    let (items_seen, items_name) = (seen.clone(), name.clone());
    let items = listed.inspect(move |item| {
        note(&items_name, item);
        match item {
            Ok(meta) if immutable(meta.location.as_ref()).is_some() => {
                let key = format!("{items_name}/{}", meta.location);
                if let Ok(mut l) = LISTED.lock() {
                    let l = l.get_or_insert_with(BTreeMap::new);
                    if l.len() >= 1 << 16 {
                        l.clear();
                    }
                    l.insert(key.clone(), meta.clone());
                }
                if let Ok(mut s) = items_seen.lock() {
                    s.0.insert(key);
                }
            }
            Ok(_) => {}
            Err(_) => {
                if let Ok(mut s) = items_seen.lock() {
                    s.1 = true;
                }
            }
        }
    });
    let end = futures::stream::once(async move {
        let Ok(seen) = seen.lock() else { return None };
        let (shown, failed) = &*seen;
        if !failed {
            note(&name, &Ok(()));
            if let Ok(mut l) = LISTED.lock()
                && let Some(l) = l.as_mut()
            {
                // Kept: what the listing showed, and what comes before its offset.
                let gone: Vec<String> = l
                    .range::<str, _>((
                        std::ops::Bound::Included(under.as_str()),
                        std::ops::Bound::Unbounded,
                    ))
                    .map(|(key, _)| key)
                    .take_while(|key| key.starts_with(&under))
                    .filter(|key| after.as_ref().is_none_or(|a| *key > a) && !shown.contains(*key))
                    .cloned()
                    .collect();
                for key in gone {
                    l.remove(&key);
                }
            }
        }
        None
    })
    .filter_map(|end: Option<Result<ObjectMeta>>| async move { end });
    Box::pin(items.chain(end))
}

/// Forget what is kept of `key`: the store refused to write it, so it is not what this
/// process listed or wrote (a table made again at its place by another process).
fn forget(key: &str) {
    if let Ok(mut l) = LISTED.lock()
        && let Some(l) = l.as_mut()
    {
        l.remove(key);
    }
    let_go(&READ, key);
}

/// Let the data file `key` go, in memory and on disk: deleted, or written again.
async fn let_go_data(key: &str) {
    use std::sync::atomic::Ordering::AcqRel;
    LETTING_GO.fetch_add(1, AcqRel);
    let_go(&WRITTEN, key);
    super::log_disk::forget_data(key).await;
    LET_GO.fetch_add(1, AcqRel);
    LETTING_GO.fetch_sub(1, AcqRel);
}

/// The data files let go, and those being let go: a read that loaded a kept file from the
/// disk while one was let go does not put it back in memory (see [`CachedLog::written`]).
static LET_GO: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
static LETTING_GO: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The let-go state of data files, when none is being let go.
fn let_go_state() -> Option<u64> {
    use std::sync::atomic::Ordering::Acquire;
    (LETTING_GO.load(Acquire) == 0).then(|| LET_GO.load(Acquire))
}

/// Files kept in memory, and their bytes in all (see [`READ`] and [`WRITTEN`]).
type Memory = Mutex<Option<(Kept, usize)>>;

/// Keep `key` in `memory`, of at most `budget` bytes: past it, everything there is let go.
fn keep(memory: &Memory, budget: usize, key: String, meta: ObjectMeta, bytes: Bytes) {
    if let Ok(mut m) = memory.lock() {
        let (files, total) = m.get_or_insert_with(Default::default);
        if *total + bytes.len() > budget {
            files.clear();
            *total = 0;
        }
        *total += bytes.len();
        if let Some((_, old)) = files.insert(key, (meta, bytes)) {
            *total -= old.len();
        }
    }
}

/// Whether this machine keeps the data file `relative` of the table at `table` (on an object
/// store) because it wrote it: reading it then makes no request (see
/// [`super::log_disk::save_data`]). False for a table on the local disk (nothing is kept for it)
/// and for a file another machine wrote.
pub fn written_here(table: &url::Url, relative: &Path) -> bool {
    if table.scheme() == "file" || !data_file(relative) {
        return false;
    }
    let Ok(prefix) = Path::from_url_path(table.path()) else {
        return false;
    };
    // The table's store is the bucket's, prefixed with the table's path (as delta-rs does).
    let location: Path = prefix.parts().chain(relative.parts()).collect();
    let key = key_in(&super::external::store_name(table), &location);
    kept(&WRITTEN, &key).is_some() || super::log_disk::keeps_data(&key)
}

/// The key under which memory and disk keep the object at `location` of the store named
/// `store` (see [`super::external::store_name`]).
fn key_in(store: &str, location: &Path) -> String {
    format!("{store}/{location}")
}

/// What `memory` keeps of `key`, whatever object it was.
fn kept(memory: &Memory, key: &str) -> Option<(ObjectMeta, Bytes)> {
    memory.lock().ok()?.as_ref()?.0.get(key).cloned()
}

fn let_go(memory: &Memory, key: &str) {
    if let Ok(mut m) = memory.lock()
        && let Some((files, total)) = m.as_mut()
        && let Some((_, old)) = files.remove(key)
    {
        *total -= old.len();
    }
}

/// The file of `key` kept in memory, if it is the object `listed`.
fn in_memory(key: &str, listed: &ObjectMeta) -> Option<(ObjectMeta, Bytes)> {
    kept(&READ, key).filter(|(meta, _)| same_object(meta, listed))
}

/// The file of `key` kept in memory, whatever object it was.
fn in_memory_any(key: &str) -> Option<(ObjectMeta, Bytes)> {
    kept(&READ, key)
}

fn keep_in_memory(key: String, meta: ObjectMeta, bytes: Bytes) {
    keep(&READ, KEPT_BYTES, key, meta, bytes)
}

impl CachedLog {
    pub fn new(inner: Arc<dyn ObjectStore>, name: String) -> Self {
        CachedLog { inner, name }
    }

    fn key(&self, location: &Path) -> String {
        key_in(&self.name, location)
    }

    /// The whole of the log file at `location`, if it is one this process has listed and not
    /// too large: from memory, else the disk, else one read of the store (kept for next time).
    async fn whole(&self, location: &Path) -> Result<Option<(ObjectMeta, Bytes)>> {
        let key = self.key(location);
        let listed = LISTED
            .lock()
            .ok()
            .and_then(|l| l.as_ref().and_then(|l| l.get(&key).cloned()));
        let Some(listed) = listed.filter(|l| l.size <= LARGEST) else {
            return Ok(None);
        };
        if let Some(kept) = in_memory(&key, &listed) {
            return Ok(Some(kept));
        }
        let turn = FETCHING.lock().ok().map(|mut f| {
            f.get_or_insert_with(HashMap::new)
                .entry(key.clone())
                .or_default()
                .clone()
        });
        let _turn = match &turn {
            Some(t) => Some(t.lock().await),
            None => None,
        };
        // The turn is let go however this ends (an error, a cancelled statement).
        let _done = Fetched(&key);
        // Another task may have read it while this one waited.
        if let Some(kept) = in_memory(&key, &listed) {
            return Ok(Some(kept));
        }
        let kept = match super::log_disk::load(&key, &listed).await {
            Some(bytes) => (listed, bytes),
            None => {
                let got = self
                    .ask(self.inner.get_opts(location, GetOptions::default()))
                    .await?;
                let meta = got.meta.clone();
                let bytes = got.bytes().await?;
                super::log_disk::save(&key, &meta, &bytes).await;
                (meta, bytes)
            }
        };
        keep_in_memory(key.clone(), kept.0.clone(), kept.1.clone());
        Ok(Some(kept))
    }

    /// The small data file at `location` as this machine wrote it, if it is kept (see
    /// [`super::log_disk::save_data`]).
    async fn written(&self, location: &Path) -> Option<(ObjectMeta, Bytes)> {
        if !data_file(location) {
            return None;
        }
        let key = self.key(location);
        if let Some(kept) = kept(&WRITTEN, &key) {
            return Some(kept);
        }
        let before = let_go_state();
        let loaded = super::log_disk::load_data(&key, location).await?;
        if before.is_some() && let_go_state() == before {
            keep(
                &WRITTEN,
                WRITTEN_BYTES,
                key,
                loaded.0.clone(),
                loaded.1.clone(),
            );
        }
        Some(loaded)
    }

    /// A plain read of the log's `_last_checkpoint` at `location` (in the log `log`): from
    /// this statement's listing of the log, else from a new listing from the checkpoint
    /// kept, else the store's answer, kept for next time.
    async fn hint(&self, location: &Path, log: &Path) -> Result<GetResult> {
        let (key, log_key) = (self.key(location), self.key(log));
        let mut known = listing(&log_key);
        let kept = match in_memory_any(&key) {
            Some(kept) => Some(kept),
            None => super::log_disk::load_kept(&key, location).await,
        };
        // A log with no hint kept as none is listed from its first version.
        let from = kept.as_ref().and_then(|(meta, bytes)| {
            if absent(meta) {
                Some(0)
            } else {
                hint_version(bytes)
            }
        });
        if known.is_none()
            && let Some(version) = from
        {
            known = Some(self.list_log(log, version).await?);
        }
        if let Some(listing) = &known {
            match listing.hint(location) {
                Some(Some(meta)) => {
                    if let Some((_, bytes)) = kept.filter(|(k, _)| same_object(k, meta)) {
                        let len = bytes.len() as u64;
                        return Ok(answer(meta.clone(), bytes, 0..len));
                    }
                }
                Some(None) => {
                    return Err(deltalake::logstore::object_store::Error::NotFound {
                        path: location.to_string(),
                        source: "not in the log's listing".into(),
                    });
                }
                None => {}
            }
        }
        let got = match self
            .ask(self.inner.get_opts(location, GetOptions::default()))
            .await
        {
            Ok(got) => got,
            Err(e) => {
                if matches!(e, deltalake::logstore::object_store::Error::NotFound { .. }) {
                    // Kept as none: the next open lists the log from its start at once.
                    let none = ObjectMeta {
                        location: location.clone(),
                        last_modified: chrono::Utc::now(),
                        size: 0,
                        e_tag: Some(ABSENT.into()),
                        version: None,
                    };
                    super::log_disk::save(&key, &none, &Bytes::new()).await;
                    keep_in_memory(key, none, Bytes::new());
                }
                if known.is_some() {
                    drop_listing(&log_key);
                }
                return Err(e);
            }
        };
        let meta = got.meta.clone();
        let bytes = got.bytes().await?;
        super::log_disk::save(&key, &meta, &bytes).await;
        keep_in_memory(key, meta.clone(), bytes.clone());
        // The hint read is newer than the listing (another writer's checkpoint, which the
        // listing does not show): the listing is let go, and the reader lists afresh.
        if let Some(listing) = known
            && !listing
                .hint(location)
                .flatten()
                .is_some_and(|m| same_object(m, &meta))
        {
            drop_listing(&log_key);
        }
        let len = bytes.len() as u64;
        Ok(answer(meta, bytes, 0..len))
    }

    /// List the log `log` from `version` up to its `_last_checkpoint` (one request of a
    /// log of fewer than a thousand files from there), kept for this statement.
    async fn list_log(&self, log: &Path, version: u64) -> Result<Listing> {
        use futures::StreamExt;
        let after = Path::from(format!("{log}/{version:020}"));
        let hint = format!("{log}/{HINT}");
        let from = stamp(&self.key(log));
        let mut listed = noted(
            self.name.clone(),
            Some(log),
            Some(&after),
            self.inner.list_with_offset(Some(log), &after),
        );
        let (mut items, mut whole) = (Vec::new(), true);
        while let Some(item) = listed.next().await {
            let meta = item?;
            let last = meta.location.as_ref() >= hint.as_str();
            items.push(meta);
            if last {
                whole = false;
                break;
            }
        }
        let made = Listing {
            after,
            items,
            whole,
            made: std::time::Instant::now(),
            seq: from.2,
        };
        // A log with no version (a table being made, or dropped) is not kept: the statement
        // that waits for it looks again.
        if made.newest_commit().is_some() {
            keep_listing(self.key(log), made.clone(), from);
        }
        Ok(made)
    }

    /// Follow a write of this process at `location` in this statement's listing of its log:
    /// `meta` is the file written (None: a write the listing cannot follow, or a refused one).
    fn wrote(&self, location: &Path, meta: Option<ObjectMeta>) {
        let Some(log) = log_of(location) else { return };
        changed(&self.key(&log), |known| {
            let follows = match immutable(location.as_ref()) {
                Some(Immutable::Commit(v)) => known.newest_commit().is_some_and(|n| n + 1 == v),
                Some(Immutable::Checkpoint(_)) => true,
                None => location.filename() == Some(HINT),
            };
            match meta.filter(|_| follows) {
                Some(meta) => {
                    known.put(meta);
                    true
                }
                None => false,
            }
        });
    }

    /// A request to the store, refused at once if the store has failed and never answered,
    /// its answer noted (see [`FAILED`]).
    async fn ask<T>(&self, request: impl std::future::Future<Output = Result<T>>) -> Result<T> {
        if let Some(e) = refused(&self.name) {
            return Err(e);
        }
        let answer = request.await;
        note(&self.name, &answer);
        answer
    }
}

/// A multipart upload through [`CachedLog`]: the listing of the log it writes into (if any)
/// is let go when the upload starts and again when it ends, so that a listing made meanwhile
/// is not kept without the file.
#[derive(Debug)]
struct Uploading {
    upload: Box<dyn MultipartUpload>,
    /// The key of the log the file lies in.
    log: Option<String>,
    /// Whether the upload was completed or aborted (else it ends when dropped: a cancelled
    /// completion may still have landed).
    done: bool,
}

impl Uploading {
    fn ended(&mut self) {
        self.done = true;
        if let Some(log) = &self.log {
            drop_listing(log);
        }
    }
}

impl Drop for Uploading {
    fn drop(&mut self) {
        if !self.done {
            self.ended();
        }
    }
}

#[async_trait]
impl MultipartUpload for Uploading {
    fn put_part(&mut self, data: PutPayload) -> deltalake::logstore::object_store::UploadPart {
        self.upload.put_part(data)
    }

    async fn complete(&mut self) -> Result<PutResult> {
        let done = self.upload.complete().await;
        self.ended();
        done
    }

    async fn abort(&mut self) -> Result<()> {
        let done = self.upload.abort().await;
        self.ended();
        done
    }
}

/// A fetch's turn over (see [`FETCHING`]).
struct Fetched<'a>(&'a str);

impl Drop for Fetched<'_> {
    fn drop(&mut self) {
        if let Ok(mut f) = FETCHING.lock()
            && let Some(f) = f.as_mut()
        {
            f.remove(self.0);
        }
    }
}

/// A read these files can answer: no condition, no version, not only the object's metadata.
fn plain(o: &GetOptions) -> bool {
    o.if_match.is_none()
        && o.if_none_match.is_none()
        && o.if_modified_since.is_none()
        && o.if_unmodified_since.is_none()
        && o.version.is_none()
        && !o.head
}

fn answer(meta: ObjectMeta, bytes: Bytes, range: Range<u64>) -> GetResult {
    let part = bytes.slice(range.start as usize..range.end as usize);
    GetResult {
        payload: GetResultPayload::Stream(Box::pin(futures::stream::once(async move { Ok(part) }))),
        meta,
        range,
        attributes: Attributes::default(),
    }
}

impl fmt::Debug for CachedLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CachedLog({:?})", self.inner)
    }
}

impl fmt::Display for CachedLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CachedLog({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for CachedLog {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        let hint = log_of(location).is_some() && location.filename() == Some(HINT);
        let kept = ((immutable(location.as_ref()).is_some() || hint)
            && payload.content_length() as u64 <= LARGEST)
            .then(|| payload.clone());
        // A commit written only if none was there proves where the log stands.
        let follows = !matches!(immutable(location.as_ref()), Some(Immutable::Commit(_)))
            || matches!(
                opts.mode,
                deltalake::logstore::object_store::PutMode::Create
            );
        let data = (data_file(location) && payload.content_length() as u64 <= SMALL_DATA)
            .then(|| payload.clone());
        if data_file(location) {
            let_go_data(&self.key(location)).await;
        }
        let put = match self.ask(self.inner.put_opts(location, payload, opts)).await {
            Ok(put) => put,
            Err(e) => {
                use deltalake::logstore::object_store::Error as E;
                if matches!(e, E::AlreadyExists { .. } | E::Precondition { .. }) {
                    forget(&self.key(location));
                }
                self.wrote(location, None);
                return Err(e);
            }
        };
        // A file this process wrote is known without reading it, by the entity tag the store
        // gave it (the next process's listing shows the same tag).
        let mut written = None;
        if let (Some(payload), Some(e_tag)) = (kept, &put.e_tag) {
            let bytes = Bytes::from(payload);
            let meta = ObjectMeta {
                location: location.clone(),
                last_modified: chrono::Utc::now(),
                size: bytes.len() as u64,
                e_tag: Some(e_tag.clone()),
                version: put.version.clone(),
            };
            let key = self.key(location);
            super::log_disk::save(&key, &meta, &bytes).await;
            if !hint && let Ok(mut l) = LISTED.lock() {
                l.get_or_insert_with(BTreeMap::new)
                    .insert(key.clone(), meta.clone());
            }
            keep_in_memory(key, meta.clone(), bytes);
            written = Some(meta);
        }
        self.wrote(location, written.filter(|_| follows));
        if let Some(payload) = data {
            let bytes = Bytes::from(payload);
            let meta = ObjectMeta {
                location: location.clone(),
                last_modified: chrono::Utc::now(),
                size: bytes.len() as u64,
                e_tag: put.e_tag.clone(),
                version: put.version.clone(),
            };
            let key = self.key(location);
            super::log_disk::save_data(&key, &meta, &bytes).await;
            keep(&WRITTEN, WRITTEN_BYTES, key, meta, bytes);
        }
        Ok(put)
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.wrote(location, None);
        if data_file(location) {
            let_go_data(&self.key(location)).await;
        }
        let upload = self
            .ask(self.inner.put_multipart_opts(location, opts))
            .await?;
        Ok(Box::new(Uploading {
            upload,
            log: log_of(location).map(|log| self.key(&log)),
            done: false,
        }))
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        if plain(&options)
            && let Some((meta, bytes)) = self.written(location).await
        {
            let len = bytes.len() as u64;
            let range = match &options.range {
                None => Some(0..len),
                Some(r) => r.as_range(len).ok(),
            };
            if let Some(range) = range {
                return Ok(answer(meta, bytes, range));
            }
        }
        if plain(&options)
            && options.range.is_none()
            && location.filename() == Some(HINT)
            && let Some(log) = log_of(location)
        {
            return self.hint(location, &log).await;
        }
        if plain(&options)
            && immutable(location.as_ref()).is_some()
            && let Some((meta, bytes)) = self.whole(location).await?
        {
            let len = bytes.len() as u64;
            let range = match &options.range {
                None => Some(0..len),
                Some(r) => r.as_range(len).ok(),
            };
            // An invalid range gets the store's own error.
            if let Some(range) = range {
                return Ok(answer(meta, bytes, range));
            }
        }
        self.ask(self.inner.get_opts(location, options)).await
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        let kept = match self.written(location).await {
            Some(kept) => Some(kept),
            None if immutable(location.as_ref()).is_some() => self.whole(location).await?,
            None => None,
        };
        if let Some((_, bytes)) = kept
            && ranges
                .iter()
                .all(|r| r.start <= r.end && r.end <= bytes.len() as u64)
        {
            return Ok(ranges
                .iter()
                .map(|r| bytes.slice(r.start as usize..r.end as usize))
                .collect());
        }
        self.ask(self.inner.get_ranges(location, ranges)).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        use futures::StreamExt;
        // A file deleted (log clean-up) is never read again by name: readers list first. The
        // listings of the logs it is deleted from are let go, before and after.
        let let_go = |name: String| {
            move |location: &Result<Path>| {
                if let Ok(location) = location
                    && let Some(log) = log_of(location)
                {
                    drop_listing(&format!("{name}/{log}"));
                }
            }
        };
        // A data file deleted (vacuum) is let go where it is kept.
        let deleted = |name: String| {
            move |location: Result<Path>| {
                let name = name.clone();
                async move {
                    if let Ok(path) = &location
                        && data_file(path)
                    {
                        let_go_data(&format!("{name}/{path}")).await;
                    }
                    location
                }
            }
        };
        let locations = locations.inspect(let_go(self.name.clone()));
        Box::pin(
            self.inner
                .delete_stream(Box::pin(locations))
                .inspect(let_go(self.name.clone()))
                .then(deleted(self.name.clone())),
        )
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        noted(self.name.clone(), prefix, None, self.inner.list(prefix))
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        use futures::StreamExt;
        // A log listed in this statement from this offset or before: answered from there, then
        // from the store past the listing's last name if the reader reads on.
        if let Some(prefix) = prefix
            && let Some(known) = listing(&self.key(prefix))
            && log_of(offset).as_ref() == Some(prefix)
            && offset.as_ref() >= known.after.as_ref()
        {
            let shown: Vec<Result<ObjectMeta>> = known
                .items
                .iter()
                .filter(|m| m.location.as_ref() > offset.as_ref())
                .cloned()
                .map(Ok)
                .collect();
            let shown = futures::stream::iter(shown);
            if known.whole {
                return Box::pin(shown);
            }
            let from = known
                .items
                .last()
                .map(|m| m.location.clone())
                .filter(|last| last.as_ref() > offset.as_ref())
                .unwrap_or_else(|| offset.clone());
            let (inner, name, prefix) = (self.inner.clone(), self.name.clone(), prefix.clone());
            let rest = futures::stream::once(async move {
                noted(
                    name,
                    Some(&prefix),
                    Some(&from),
                    inner.list_with_offset(Some(&prefix), &from),
                )
            })
            .flatten();
            return Box::pin(shown.chain(rest));
        }
        // A listing of the store is newer than the one kept: readers must not be answered
        // from the older one after it.
        let listed = noted(
            self.name.clone(),
            prefix,
            Some(offset),
            self.inner.list_with_offset(prefix, offset),
        );
        match prefix.filter(|p| log_of(offset).as_ref() == Some(*p)) {
            Some(prefix) => {
                let key = self.key(prefix);
                drop_listing(&key);
                // And when it ends (a listing asked for meanwhile may be older).
                let end = futures::stream::once(async move {
                    drop_listing(&key);
                    None
                })
                .filter_map(|end: Option<Result<ObjectMeta>>| async move { end });
                Box::pin(listed.chain(end))
            }
            None => listed,
        }
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.ask(self.inner.list_with_delimiter(prefix)).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.wrote(to, None);
        if data_file(to) {
            let_go_data(&self.key(to)).await;
        }
        let copied = self.ask(self.inner.copy_opts(from, to, options)).await;
        self.wrote(to, None);
        copied
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        for place in [from, to] {
            self.wrote(place, None);
            if data_file(place) {
                let_go_data(&self.key(place)).await;
            }
        }
        let renamed = self.inner.rename_opts(from, to, options).await;
        for place in [from, to] {
            self.wrote(place, None);
        }
        renamed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `store` lists in `dir` after `offset`.
    async fn listed_after(store: &CachedLog, dir: &str, offset: &Path) -> Vec<ObjectMeta> {
        use futures::TryStreamExt;
        store
            .list_with_offset(Some(&Path::from(dir)), offset)
            .try_collect()
            .await
            .unwrap()
    }

    /// A table dropped and made again at the same place: its new commit of the same name is
    /// read, not the old one kept.
    #[tokio::test]
    async fn a_commit_made_again_is_read_again() {
        use deltalake::logstore::object_store::{ObjectStoreExt, memory::InMemory};
        use futures::TryStreamExt;
        let inner = Arc::new(InMemory::new());
        let store = CachedLog::new(inner.clone(), "mem://again".into());
        let commit = Path::from("t/_delta_log/00000000000000000000.json");
        let log = Path::from("t/_delta_log");
        async fn read(store: &CachedLog, commit: &Path) -> Bytes {
            let got = store.get_opts(commit, GetOptions::default()).await.unwrap();
            got.bytes().await.unwrap()
        }
        store
            .put(&commit, PutPayload::from_static(b"old"))
            .await
            .unwrap();
        let _: Vec<_> = store.list(Some(&log)).try_collect().await.unwrap();
        assert_eq!(read(&store, &commit).await.as_ref(), b"old");
        assert_eq!(read(&store, &commit).await.as_ref(), b"old");
        // Made again by another process: this one's store does not see the write. Until its
        // next listing, the commit it kept is what it reads (the store is not asked).
        inner.delete(&commit).await.unwrap();
        assert_eq!(read(&store, &commit).await.as_ref(), b"old");
        inner
            .put(&commit, PutPayload::from_static(b"new!"))
            .await
            .unwrap();
        let _: Vec<_> = store.list(Some(&log)).try_collect().await.unwrap();
        assert_eq!(read(&store, &commit).await.as_ref(), b"new!");
    }

    /// A checkpoint's ranges are answered from one read of it, kept: here the store has lost
    /// the file, and its ranges are still read.
    #[tokio::test]
    async fn a_checkpoint_is_read_once_for_all_its_ranges() {
        use deltalake::logstore::object_store::{ObjectStoreExt, memory::InMemory};
        use futures::TryStreamExt;
        let inner = Arc::new(InMemory::new());
        let store = CachedLog::new(inner.clone(), "mem://ranges".into());
        let checkpoint = Path::from("t/_delta_log/00000000000000000010.checkpoint.parquet");
        let data = Path::from("t/part-0.parquet");
        for p in [&checkpoint, &data] {
            inner
                .put(p, PutPayload::from_static(b"0123456789"))
                .await
                .unwrap();
        }
        let _: Vec<_> = store
            .list(Some(&Path::from("t")))
            .try_collect()
            .await
            .unwrap();
        let first = store.get_ranges(&checkpoint, &[2..4, 5..6]).await.unwrap();
        assert_eq!(
            (first[0].as_ref(), first[1].as_ref()),
            (&b"23"[..], &b"5"[..])
        );
        inner.delete(&checkpoint).await.unwrap();
        inner.delete(&data).await.unwrap();
        let again = store.get_ranges(&checkpoint, &[0..1, 8..10]).await.unwrap();
        assert_eq!(
            (again[0].as_ref(), again[1].as_ref()),
            (&b"0"[..], &b"89"[..])
        );
        let suffix = store
            .get_opts(
                &checkpoint,
                GetOptions {
                    range: Some(deltalake::logstore::object_store::GetRange::Suffix(3)),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(suffix.range, 7..10);
        assert_eq!(suffix.bytes().await.unwrap().as_ref(), b"789");
        // A data file is not kept.
        assert!(store.get_ranges(&data, &[0..1, 2..3]).await.is_err());
    }

    /// A small data file this process wrote is read from what it kept (here the store has
    /// lost it); a large one, one written by another, and one it deleted are the store's.
    #[tokio::test]
    async fn a_small_data_file_written_here_is_read_without_the_store() {
        use deltalake::logstore::object_store::{ObjectStoreExt, memory::InMemory};
        let inner = Arc::new(InMemory::new());
        let store = CachedLog::new(inner.clone(), "mem://data".into());
        let small = Path::from("t/part-00000-8b30d5d9-8d82-4bf8-a692-a2203a1e07dd-c000.parquet");
        let large = Path::from("t/part-00001-92b4e131-348c-4c14-8ad1-c48a61e1f291-c000.parquet");
        let theirs = Path::from("t/part-00002-fc89cf65-e1f0-4ef5-b1b8-1f25bd4563ff-c000.parquet");
        // A file a user named (even with a UUID) is never kept: it may be written again.
        for named in [
            Path::from("t/out.parquet"),
            Path::from("t/8b30d5d9-8d82-4bf8-a692-a2203a1e07dd.parquet"),
        ] {
            store
                .put(&named, PutPayload::from_static(b"mine"))
                .await
                .unwrap();
            inner
                .put(&named, PutPayload::from_static(b"theirs, later"))
                .await
                .unwrap();
            assert_eq!(
                store
                    .get(&named)
                    .await
                    .unwrap()
                    .bytes()
                    .await
                    .unwrap()
                    .as_ref(),
                b"theirs, later"
            );
        }
        store
            .put(&small, PutPayload::from_static(b"0123456789"))
            .await
            .unwrap();
        let big = vec![7u8; SMALL_DATA as usize + 1];
        store.put(&large, PutPayload::from(big)).await.unwrap();
        inner
            .put(&theirs, PutPayload::from_static(b"theirs"))
            .await
            .unwrap();
        for p in [&small, &large, &theirs] {
            inner.delete(p).await.unwrap();
        }
        let ranges = store.get_ranges(&small, &[1..3, 9..10]).await.unwrap();
        assert_eq!(
            (ranges[0].as_ref(), ranges[1].as_ref()),
            (&b"12"[..], &b"9"[..])
        );
        let whole = store.get(&small).await.unwrap().bytes().await.unwrap();
        assert_eq!(whole.as_ref(), b"0123456789");
        assert!(store.get(&large).await.is_err());
        assert!(store.get(&theirs).await.is_err());
        // Deleted (a vacuum) through this store: let go.
        store.delete(&small).await.unwrap();
        assert!(store.get(&small).await.is_err());
    }

    /// A listing of a log made while a multipart upload into it runs does not show the file:
    /// it is let go when the upload completes.
    #[tokio::test]
    async fn a_multipart_upload_into_a_log_lets_its_listing_go_when_it_ends() {
        use deltalake::logstore::object_store::{ObjectStoreExt, memory::InMemory};
        let inner = Arc::new(InMemory::new());
        let store = CachedLog::new(inner.clone(), "mem://upload".into());
        let at = |name: &str| Path::from(format!("t/_delta_log/{name}"));
        inner
            .put(
                &at("00000000000000000000.json"),
                PutPayload::from_static(b"{}"),
            )
            .await
            .unwrap();
        let hint = at(HINT);
        // No hint (kept as none); the next read lists the log from its start, kept.
        assert!(store.get(&hint).await.is_err());
        logs(|l| l.listings.remove("mem://upload/t/_delta_log"));
        let mut upload = store
            .put_multipart(&at("00000000000000000001.json"))
            .await
            .unwrap();
        assert!(store.get(&hint).await.is_err());
        assert!(logs(|l| l.listings.contains_key("mem://upload/t/_delta_log")).unwrap());
        upload
            .put_part(PutPayload::from_static(b"{}"))
            .await
            .unwrap();
        upload.complete().await.unwrap();
        let listed = listed_after(&store, "t/_delta_log", &at("00000000000000000000")).await;
        assert!(
            listed
                .iter()
                .any(|m| m.location == at("00000000000000000001.json")),
            "{listed:?}"
        );
    }

    /// A log's `_last_checkpoint` and listing answer the opens of one statement: with this
    /// process's own commit that follows the listing, without another writer's until the next
    /// statement, and never after a write the listing cannot follow.
    #[tokio::test]
    async fn a_log_listed_once_answers_the_opens_of_a_statement() {
        use deltalake::logstore::object_store::{ObjectStoreExt, PutMode, memory::InMemory};
        use futures::TryStreamExt;
        let inner = Arc::new(InMemory::new());
        let store = CachedLog::new(inner.clone(), "mem://listing".into());
        let log = Path::from("t/_delta_log");
        let at = |name: &str| Path::from(format!("t/_delta_log/{name}"));
        let commit = |v: u64| at(&format!("{v:020}.json"));
        for v in 0..=3 {
            inner
                .put(&commit(v), PutPayload::from_static(b"{}"))
                .await
                .unwrap();
        }
        inner
            .put(
                &at("00000000000000000002.checkpoint.parquet"),
                PutPayload::from_static(b"PAR1"),
            )
            .await
            .unwrap();
        let hint = at(HINT);
        inner
            .put(&hint, PutPayload::from_static(br#"{"version":2,"size":1}"#))
            .await
            .unwrap();
        let forget = || {
            logs(|l| l.listings.remove("mem://listing/t/_delta_log"));
        };
        async fn read(store: &CachedLog, path: &Path) -> Result<Bytes> {
            store
                .get_opts(path, GetOptions::default())
                .await?
                .bytes()
                .await
        }
        let names = |store: &CachedLog, from: u64| {
            let offset = Path::from(format!("t/_delta_log/{from:020}"));
            let listed = store.list_with_offset(Some(&log), &offset);
            async move {
                let listed: Vec<ObjectMeta> = listed.try_collect().await.unwrap();
                listed
                    .into_iter()
                    .map(|m| m.location.filename().unwrap().to_string())
                    .collect::<Vec<_>>()
            }
        };
        // First open: the hint from the store, kept.
        assert_eq!(
            read(&store, &hint).await.unwrap().as_ref(),
            br#"{"version":2,"size":1}"#
        );
        // The next statement lists from the kept hint's checkpoint, and that listing answers.
        forget();
        assert_eq!(
            read(&store, &hint).await.unwrap().as_ref(),
            br#"{"version":2,"size":1}"#
        );
        inner
            .put(&commit(4), PutPayload::from_static(b"{}"))
            .await
            .unwrap();
        let statement = names(&store, 2).await;
        assert_eq!(
            statement,
            [
                "00000000000000000002.checkpoint.parquet",
                "00000000000000000002.json",
                "00000000000000000003.json",
                HINT
            ],
            "another writer's commit is seen by the next statement"
        );
        // This process's own commit that follows the listing is added to it.
        inner.delete(&commit(4)).await.unwrap();
        store
            .put_opts(
                &commit(4),
                PutPayload::from_static(b"{}"),
                PutMode::Create.into(),
            )
            .await
            .unwrap();
        assert_eq!(
            names(&store, 3).await,
            [
                "00000000000000000003.json",
                "00000000000000000004.json",
                HINT
            ]
        );
        // The next statement sees the other writer's.
        forget();
        inner
            .put(&commit(5), PutPayload::from_static(b"{}"))
            .await
            .unwrap();
        read(&store, &hint).await.unwrap();
        assert_eq!(
            names(&store, 4).await,
            [
                "00000000000000000004.json",
                "00000000000000000005.json",
                HINT
            ]
        );
        // A refused write lets the listing go: the store's listing shows the other writer's.
        inner
            .put(&commit(6), PutPayload::from_static(b"{}"))
            .await
            .unwrap();
        assert!(
            store
                .put_opts(
                    &commit(6),
                    PutPayload::from_static(b"{}"),
                    PutMode::Create.into()
                )
                .await
                .is_err()
        );
        assert_eq!(
            names(&store, 5).await[..2],
            ["00000000000000000005.json", "00000000000000000006.json"]
        );
        // A new hint by another writer is read, and a hint the listing no longer shows is
        // missing.
        forget();
        inner
            .put(&hint, PutPayload::from_static(br#"{"version":4,"size":1}"#))
            .await
            .unwrap();
        assert_eq!(
            read(&store, &hint).await.unwrap().as_ref(),
            br#"{"version":4,"size":1}"#
        );
        forget();
        inner.delete(&hint).await.unwrap();
        assert!(matches!(
            read(&store, &hint).await,
            Err(deltalake::logstore::object_store::Error::NotFound { .. })
        ));
        // A log with no hint: kept as none, and the next statement lists the log from its
        // start, which answers the hint (missing) and the reader's listing.
        let other = |name: &str| Path::from(format!("u/_delta_log/{name}"));
        inner
            .put(
                &other("00000000000000000000.json"),
                PutPayload::from_static(b"{}"),
            )
            .await
            .unwrap();
        assert!(read(&store, &other(HINT)).await.is_err());
        logs(|l| l.listings.remove("mem://listing/u/_delta_log"));
        assert!(matches!(
            read(&store, &other(HINT)).await,
            Err(deltalake::logstore::object_store::Error::NotFound { .. })
        ));
        inner
            .put(
                &other("00000000000000000001.json"),
                PutPayload::from_static(b"{}"),
            )
            .await
            .unwrap();
        let listed = listed_after(&store, "u/_delta_log", &other("00000000000000000000")).await;
        assert_eq!(
            listed.len(),
            1,
            "the listing of this statement answers: {listed:?}"
        );
    }
}
