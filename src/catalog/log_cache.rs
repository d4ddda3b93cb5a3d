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
//! which are read afresh. Everything else (listings, `_last_checkpoint`, data files, reads of
//! files the process has not listed, conditional reads) goes to the store.

use std::collections::HashMap;
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

use super::log::immutable;

/// Bytes kept in memory at most; past it, everything kept is let go.
const KEPT_BYTES: usize = 256 << 20;
/// A file larger than this is not kept (a large table's checkpoint is read in ranges).
const LARGEST: u64 = 16 << 20;

/// `inner` (the root store of one bucket, `name`) with its log files read once.
pub struct CachedLog {
    inner: Arc<dyn ObjectStore>,
    name: String,
}

/// Files kept in memory: by store and path, what the store said of each and its bytes.
type Kept = HashMap<String, (ObjectMeta, Bytes)>;

/// The files kept, and their bytes in all.
static READ: Mutex<Option<(Kept, usize)>> = Mutex::new(None);
/// The files as the latest listing of their log showed them, by store and path.
static LISTED: Mutex<Option<HashMap<String, ObjectMeta>>> = Mutex::new(None);
/// One fetch of a file at a time: the ranges of one checkpoint are asked for at once.
static FETCHING: Mutex<Option<HashMap<String, Arc<tokio::sync::Mutex<()>>>>> = Mutex::new(None);

/// Whether `a` and `b` describe one object: same size, and same entity tag (or, without one,
/// same modification time).
pub(super) fn same_object(a: &ObjectMeta, b: &ObjectMeta) -> bool {
    a.size == b.size
        && match (&a.e_tag, &b.e_tag) {
            (Some(x), Some(y)) => x == y,
            _ => a.last_modified == b.last_modified,
        }
}

/// Note the log files a listing shows (see [`LISTED`]).
fn noted(
    name: String,
    listed: BoxStream<'static, Result<ObjectMeta>>,
) -> BoxStream<'static, Result<ObjectMeta>> {
    use futures::StreamExt;
    Box::pin(listed.inspect(move |item| {
        if let Ok(meta) = item
            && immutable(meta.location.as_ref()).is_some()
            && let Ok(mut l) = LISTED.lock()
        {
            let l = l.get_or_insert_with(HashMap::new);
            if l.len() >= 1 << 16 {
                l.clear();
            }
            l.insert(format!("{name}/{}", meta.location), meta.clone());
        }
    }))
}

/// The file of `key` kept in memory, if it is the object `listed`.
fn in_memory(key: &str, listed: &ObjectMeta) -> Option<(ObjectMeta, Bytes)> {
    let read = READ.lock().ok()?;
    let (meta, bytes) = read.as_ref()?.0.get(key)?;
    same_object(meta, listed).then(|| (meta.clone(), bytes.clone()))
}

fn keep_in_memory(key: String, meta: ObjectMeta, bytes: Bytes) {
    if let Ok(mut r) = READ.lock() {
        let (files, total) = r.get_or_insert_with(Default::default);
        if *total + bytes.len() > KEPT_BYTES {
            files.clear();
            *total = 0;
        }
        *total += bytes.len();
        if let Some((_, old)) = files.insert(key, (meta, bytes)) {
            *total -= old.len();
        }
    }
}

impl CachedLog {
    pub fn new(inner: Arc<dyn ObjectStore>, name: String) -> Self {
        CachedLog { inner, name }
    }

    fn key(&self, location: &Path) -> String {
        format!("{}/{location}", self.name)
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
        // Another task may have read it while this one waited.
        if let Some(kept) = in_memory(&key, &listed) {
            return Ok(Some(kept));
        }
        let kept = match super::log_disk::load(&key, &listed).await {
            Some(bytes) => (listed, bytes),
            None => {
                let got = self.inner.get_opts(location, GetOptions::default()).await?;
                let meta = got.meta.clone();
                let bytes = got.bytes().await?;
                super::log_disk::save(&key, &meta, &bytes).await;
                (meta, bytes)
            }
        };
        keep_in_memory(key.clone(), kept.0.clone(), kept.1.clone());
        if let Ok(mut f) = FETCHING.lock()
            && let Some(f) = f.as_mut()
        {
            f.remove(&key);
        }
        Ok(Some(kept))
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
        let kept = (immutable(location.as_ref()).is_some()
            && payload.content_length() as u64 <= LARGEST)
            .then(|| payload.clone());
        let put = self.inner.put_opts(location, payload, opts).await?;
        // A file this process wrote is known without reading it, by the entity tag the store
        // gave it (the next process's listing shows the same tag).
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
            keep_in_memory(key, meta, bytes);
        }
        Ok(put)
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
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
        self.inner.get_opts(location, options).await
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        if immutable(location.as_ref()).is_some()
            && let Some((_, bytes)) = self.whole(location).await?
            && ranges
                .iter()
                .all(|r| r.start <= r.end && r.end <= bytes.len() as u64)
        {
            return Ok(ranges
                .iter()
                .map(|r| bytes.slice(r.start as usize..r.end as usize))
                .collect());
        }
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        // A file deleted (log clean-up) is never read again by name: readers list first.
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        noted(self.name.clone(), self.inner.list(prefix))
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        noted(
            self.name.clone(),
            self.inner.list_with_offset(prefix, offset),
        )
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.inner.copy_opts(from, to, options).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        self.inner.rename_opts(from, to, options).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        // Made again by another process: this one's store does not see the write.
        inner.delete(&commit).await.unwrap();
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
}
