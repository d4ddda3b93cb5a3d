//! Commit files read once per process from an object store. A Delta commit
//! (`_delta_log/00000000000000000007.json`) is written once, by a conditional PUT, and never
//! changes while its table lives; delta-rs reads the same commits several times in one
//! statement (opening the table, planning its scan, reading its history), each time a request
//! to the store. This store keeps the commits it has read whole and answers later whole reads
//! of them from memory, but only while the log's latest listing shows the very object that was
//! read (same size and entity tag): a table dropped and made again at the same place (by this
//! process or another) has new commits of the same names, which are read afresh. Everything
//! else (listings, `_last_checkpoint`, data files, ranges, writes) goes to the store.

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

/// Commits kept at most (about a few MB for ordinary commits).
const KEPT: usize = 4096;
/// A commit larger than this is not kept.
const LARGEST: usize = 1 << 20;

/// `inner` (the root store of one bucket, `name`) with its commits read once.
pub struct CachedLog {
    inner: Arc<dyn ObjectStore>,
    name: String,
}

/// The commits read, by store and path.
static READ: Mutex<Option<HashMap<String, (ObjectMeta, Bytes)>>> = Mutex::new(None);
/// The commits as the latest listing of their log showed them, by store and path.
static LISTED: Mutex<Option<HashMap<String, ObjectMeta>>> = Mutex::new(None);

/// Whether `a` and `b` describe one object: same size, and same entity tag (or, without one,
/// same modification time).
fn same_object(a: &ObjectMeta, b: &ObjectMeta) -> bool {
    a.size == b.size
        && match (&a.e_tag, &b.e_tag) {
            (Some(x), Some(y)) => x == y,
            _ => a.last_modified == b.last_modified,
        }
}

/// Note the commits a listing shows (see [`LISTED`]).
fn noted(
    name: String,
    listed: BoxStream<'static, Result<ObjectMeta>>,
) -> BoxStream<'static, Result<ObjectMeta>> {
    use futures::StreamExt;
    Box::pin(listed.inspect(move |item| {
        if let Ok(meta) = item
            && is_commit(&meta.location)
            && let Ok(mut l) = LISTED.lock()
        {
            let l = l.get_or_insert_with(HashMap::new);
            if l.len() >= 4 * KEPT {
                l.clear();
            }
            l.insert(format!("{name}/{}", meta.location), meta.clone());
        }
    }))
}

impl CachedLog {
    pub fn new(inner: Arc<dyn ObjectStore>, name: String) -> Self {
        CachedLog { inner, name }
    }

    fn key(&self, location: &Path) -> String {
        format!("{}/{location}", self.name)
    }
}

/// A commit file: `.../_delta_log/` then 20 digits and `.json`.
fn is_commit(location: &Path) -> bool {
    let s = location.as_ref();
    let Some((dir, name)) = s.rsplit_once('/') else {
        return false;
    };
    (dir == crate::catalog::log::DIR || dir.ends_with(&format!("/{}", crate::catalog::log::DIR)))
        && name.len() == 25
        && name.ends_with(".json")
        && name[..20].bytes().all(|b| b.is_ascii_digit())
}

/// A plain read of the whole object: no range, no condition, no version.
fn whole(o: &GetOptions) -> bool {
    o.range.is_none()
        && o.if_match.is_none()
        && o.if_none_match.is_none()
        && o.if_modified_since.is_none()
        && o.if_unmodified_since.is_none()
        && o.version.is_none()
        && !o.head
}

fn answer(meta: ObjectMeta, bytes: Bytes) -> GetResult {
    let len = bytes.len() as u64;
    GetResult {
        payload: GetResultPayload::Stream(Box::pin(futures::stream::once(
            async move { Ok(bytes) },
        ))),
        meta,
        range: 0..len,
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
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        if !(whole(&options) && is_commit(location)) {
            return self.inner.get_opts(location, options).await;
        }
        let key = self.key(location);
        let kept = READ
            .lock()
            .ok()
            .and_then(|r| r.as_ref().and_then(|r| r.get(&key).cloned()));
        let listed = LISTED
            .lock()
            .ok()
            .and_then(|l| l.as_ref().and_then(|l| l.get(&key).cloned()));
        if let (Some((meta, bytes)), Some(listed)) = (kept, listed)
            && same_object(&meta, &listed)
        {
            return Ok(answer(meta, bytes));
        }
        let got = self.inner.get_opts(location, options).await?;
        let meta = got.meta.clone();
        let bytes = got.bytes().await?;
        if bytes.len() <= LARGEST
            && let Ok(mut r) = READ.lock()
        {
            let r = r.get_or_insert_with(HashMap::new);
            if r.len() >= KEPT {
                r.clear();
            }
            r.insert(key, (meta.clone(), bytes.clone()));
        }
        Ok(answer(meta, bytes))
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        // A commit deleted (log clean-up) is never read again by name: readers list first.
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
        let store = CachedLog::new(Arc::new(InMemory::new()), "mem://again".into());
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
        store.delete(&commit).await.unwrap();
        store
            .put(&commit, PutPayload::from_static(b"new!"))
            .await
            .unwrap();
        let _: Vec<_> = store.list(Some(&log)).try_collect().await.unwrap();
        assert_eq!(read(&store, &commit).await.as_ref(), b"new!");
    }

    #[test]
    fn only_commits_are_kept() {
        assert!(is_commit(&Path::from(
            "t/_delta_log/00000000000000000007.json"
        )));
        assert!(is_commit(&Path::from(
            "_delta_log/00000000000000000007.json"
        )));
        assert!(!is_commit(&Path::from("t/_delta_log/_last_checkpoint")));
        assert!(!is_commit(&Path::from(
            "t/_delta_log/00000000000000000007.crc"
        )));
        assert!(!is_commit(&Path::from(
            "t/_delta_log/00000000000000000010.checkpoint.parquet"
        )));
        assert!(!is_commit(&Path::from("t/part-0.json")));
    }
}
