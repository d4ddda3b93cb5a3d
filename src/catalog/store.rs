//! The warehouse's object store: the local file system, with a cheaper listing of a directory
//! from an offset. Opening a Delta table lists its `_delta_log` from the last checkpoint on; a
//! log keeps a file per commit for `delta.logRetentionDuration` (30 days), so a table committed
//! to every few minutes holds thousands of them. The plain local store turns every name into an
//! object path before comparing it with the offset, which costs more than replaying the few
//! commits after the checkpoint. This one compares the names first and reads metadata only for
//! the ones it returns. A new object that must not exist yet (a commit) is written without a
//! staged file (see [`create_unnamed`]). Everything else is the plain local store's.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use deltalake::logstore::object_store::local::LocalFileSystem;
use deltalake::logstore::object_store::path::Path;
use deltalake::logstore::object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    ObjectStoreExt, PutMode, PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions,
    Result,
};
use futures::stream::{self, BoxStream, StreamExt};

/// Above this many names after the offset, the plain listing is as cheap: hand it over.
const FEW: usize = 256;

/// The local file system rooted at `/`, with [`ObjectStore::list_with_offset`] made cheap for
/// directories of plainly named files.
#[derive(Debug)]
pub struct WarehouseStore {
    inner: Arc<LocalFileSystem>,
}

impl WarehouseStore {
    pub fn new() -> Self {
        WarehouseStore {
            inner: Arc::new(LocalFileSystem::new()),
        }
    }
}

impl Default for WarehouseStore {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Display for WarehouseStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "WarehouseStore({})", self.inner)
    }
}

/// A name that is the same as a file name and as an object path segment (no escaping), and
/// that the plain listing would not skip (it skips in-progress uploads, named `...#n`).
fn plain(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

/// The names in `dir` that sort after `offset` as object paths under `prefix`, sorted; None
/// when the directory holds a name this listing does not handle, or too many after the offset.
fn names_after(dir: &std::path::Path, prefix: &str, offset: &str) -> Option<Vec<String>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Some(vec![]),
        Err(_) => return None,
    };
    let mut names = vec![];
    for entry in entries {
        let name = entry.ok()?.file_name().into_string().ok()?;
        if !plain(&name) {
            return None;
        }
        let location = format!("{prefix}/{name}");
        if location.as_str() > offset {
            names.push(name);
            if names.len() > FEW {
                return None;
            }
        }
    }
    names.sort();
    Some(names)
}

/// The file of an object path whose segments are all [`plain`] (a file name equal to the
/// segment); None for any other path.
fn plain_path(location: &Path) -> Option<std::path::PathBuf> {
    let mut path = std::path::PathBuf::from("/");
    for part in location.parts() {
        let part = part.as_ref();
        if !plain(part) || part == "." || part == ".." {
            return None;
        }
        path.push(part);
    }
    (path.as_os_str().len() > 1).then_some(path)
}

/// Create the file `path`, which must not exist, holding `payload`, the way the plain store's
/// [`PutMode::Create`] does but without its staged file: the bytes go to an unnamed file in
/// the directory (`O_TMPFILE`), which is given its name only when whole (`linkat`, refused
/// if the name exists). Readers never see a part of it, and a process killed on the way
/// leaves nothing. The staged file's removal was a deleted inode per commit, and ext4 skips
/// the inodes deleted in the last 30 seconds each time it makes a file: a job committing
/// 10,000 tables spent a growing share of its time there.
///
/// None when this way is not open here (a file system without unnamed files, a missing
/// directory, no `/proc`, a write or link that failed): the plain store then does the put, and
/// reports its own errors. Nothing was created in that case. A file system or sandbox that
/// refuses unnamed files or their link turns this way off for the rest of the process (each
/// commit would otherwise be written twice).
#[cfg(any(target_os = "linux", target_os = "android"))]
fn create_unnamed(path: &std::path::Path, payload: &PutPayload) -> Option<Result<PutResult>> {
    use std::io::Write;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    use std::os::unix::io::AsRawFd;
    use std::sync::atomic::{AtomicBool, Ordering};
    static UNAVAILABLE: AtomicBool = AtomicBool::new(false);
    if UNAVAILABLE.load(Ordering::Relaxed) {
        return None;
    }
    let dir = path.parent()?;
    let mut file = match std::fs::OpenOptions::new()
        .write(true)
        .mode(0o666)
        .custom_flags(libc::O_TMPFILE)
        .open(dir)
    {
        Ok(file) => file,
        Err(e) => {
            // Not supported by the file system (EOPNOTSUPP, or EISDIR/EINVAL from kernels or
            // layers that do not know the flag), as opposed to a missing or read-only directory.
            if matches!(
                e.raw_os_error(),
                Some(libc::EOPNOTSUPP | libc::EISDIR | libc::EINVAL)
            ) {
                UNAVAILABLE.store(true, Ordering::Relaxed);
            }
            return None;
        }
    };
    for chunk in payload.iter() {
        file.write_all(chunk).ok()?;
    }
    let meta = file.metadata().ok()?;
    let from = std::ffi::CString::new(format!("/proc/self/fd/{}", file.as_raw_fd())).ok()?;
    let to = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: both are NUL-terminated paths that outlive the call.
    let linked = unsafe {
        libc::linkat(
            libc::AT_FDCWD,
            from.as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            libc::AT_SYMLINK_FOLLOW,
        )
    };
    if linked != 0 {
        let source = std::io::Error::last_os_error();
        if source.kind() != std::io::ErrorKind::AlreadyExists {
            // No `/proc`, or a sandbox that refuses the link: the staged way from now on (a
            // full disk, where the plain store fails too, would only cost this way).
            if matches!(
                source.raw_os_error(),
                Some(libc::ENOENT | libc::EPERM | libc::EACCES | libc::EXDEV | libc::EOPNOTSUPP)
            ) {
                UNAVAILABLE.store(true, Ordering::Relaxed);
            }
            return None;
        }
        return Some(Err(
            deltalake::logstore::object_store::Error::AlreadyExists {
                path: path.to_string_lossy().into_owned(),
                source: Box::new(source),
            },
        ));
    }
    // The plain store's entity tag (inode, modification time in microseconds, size), which
    // its `head` of the file reports.
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .unwrap_or_default()
        .as_micros();
    Some(Ok(PutResult {
        e_tag: Some(format!("{:x}-{:x}-{:x}", meta.ino(), mtime, meta.size())),
        version: None,
    }))
}

/// Elsewhere than Linux: always the plain store's staged file.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn create_unnamed(_: &std::path::Path, _: &PutPayload) -> Option<Result<PutResult>> {
    None
}

#[async_trait]
impl ObjectStore for WarehouseStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        if matches!(opts.mode, PutMode::Create)
            && opts.attributes.is_empty()
            && let Some(path) = plain_path(location)
        {
            let data = payload.clone();
            let created = tokio::task::spawn_blocking(move || create_unnamed(&path, &data)).await;
            if let Ok(Some(created)) = created {
                return created;
            }
        }
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
        self.inner.get_opts(location, options).await
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        // Escaped segments (%xx) map to file names the plain store decodes: leave them to it.
        let Some(prefix) = prefix.filter(|p| !p.as_ref().is_empty() && !p.as_ref().contains('%'))
        else {
            return self.inner.list_with_offset(prefix, offset);
        };
        let inner = self.inner.clone();
        let prefix = prefix.clone();
        let offset = offset.clone();
        stream::once(async move {
            let dir = std::path::Path::new("/").join(prefix.as_ref());
            let (p, o) = (prefix.to_string(), offset.to_string());
            let names = tokio::task::spawn_blocking(move || {
                crate::catalog::log::probe_log(&dir, &p, &o).or_else(|| names_after(&dir, &p, &o))
            })
            .await
            .ok()
            .flatten();
            let Some(names) = names else {
                return inner.list_with_offset(Some(&prefix), &offset);
            };
            stream::iter(names)
                .map(move |name| {
                    let (inner, location) = (inner.clone(), prefix.clone().join(name));
                    let offset = offset.clone();
                    async move {
                        match inner.head(&location).await {
                            Ok(meta) => stream::iter(vec![Ok(meta)]).boxed(),
                            // A directory (or a file gone meanwhile): the plain listing of it.
                            Err(_) => inner.list_with_offset(Some(&location), &offset),
                        }
                    }
                })
                .buffered(8)
                .flatten()
                .boxed()
        })
        .flatten()
        .boxed()
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
    use futures::TryStreamExt;

    use super::*;

    async fn listed(store: &dyn ObjectStore, dir: &std::path::Path, offset: &str) -> Vec<String> {
        let prefix = Path::from(dir.to_str().unwrap());
        let offset = prefix.clone().join(offset);
        let mut out: Vec<String> = store
            .list_with_offset(Some(&prefix), &offset)
            .map_ok(|m| format!("{} {}", m.location, m.size))
            .try_collect()
            .await
            .unwrap();
        out.sort();
        out
    }

    #[tokio::test]
    async fn a_new_object_is_created_once_whole_with_no_staged_file() {
        let d = tempfile::tempdir().unwrap();
        let store = WarehouseStore::new();
        let dir = d.path().join("t/_delta_log");
        std::fs::create_dir_all(&dir).unwrap();
        let at = |name: &str| Path::from(dir.join(name).to_str().unwrap());
        let create = || PutOptions::from(PutMode::Create);
        let payload = || PutPayload::from_iter([Bytes::from("{\"a\":1}\n"), Bytes::from("{}")]);
        let commit = at("00000000000000000000.json");
        let put = store.put_opts(&commit, payload(), create()).await.unwrap();
        assert_eq!(
            std::fs::read(dir.join("00000000000000000000.json")).unwrap(),
            b"{\"a\":1}\n{}"
        );
        // The entity tag is the one the store reports for the file (and the plain store would).
        let head = store.head(&commit).await.unwrap();
        assert_eq!(put.e_tag, head.e_tag);
        assert_eq!(
            LocalFileSystem::new().head(&commit).await.unwrap().e_tag,
            head.e_tag
        );
        // A second create of the name is refused and changes nothing.
        let again = store
            .put_opts(&commit, PutPayload::from("x"), create())
            .await;
        assert!(
            matches!(
                again,
                Err(deltalake::logstore::object_store::Error::AlreadyExists { .. })
            ),
            "{again:?}"
        );
        assert_eq!(
            std::fs::read(dir.join("00000000000000000000.json")).unwrap(),
            b"{\"a\":1}\n{}"
        );
        // Nothing else appeared in the directory: no staged file, not even for a moment's trace.
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, vec!["00000000000000000000.json".to_string()]);
        // A missing directory and a name that is not plain go the plain store's way (which
        // makes the directory), with the same outcome.
        let deep = Path::from(d.path().join("new/dir/x.json").to_str().unwrap());
        store.put_opts(&deep, payload(), create()).await.unwrap();
        assert!(store.put_opts(&deep, payload(), create()).await.is_err());
        let odd = Path::from(d.path().join("a b.json").to_str().unwrap());
        store.put_opts(&odd, payload(), create()).await.unwrap();
        assert_eq!(
            std::fs::read(d.path().join("a b.json")).unwrap(),
            b"{\"a\":1}\n{}"
        );
        assert!(store.put_opts(&odd, payload(), create()).await.is_err());
        // Where the file system has unnamed files, a put is made that way.
        #[cfg(any(target_os = "linux", target_os = "android"))]
        {
            use std::os::unix::fs::OpenOptionsExt;
            let unnamed = std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_TMPFILE)
                .open(&dir)
                .is_ok();
            if unnamed {
                let made = create_unnamed(&dir.join("1.json"), &payload());
                assert!(matches!(made, Some(Ok(_))), "{made:?}");
            }
        }
        assert!(plain_path(&Path::from("a/b.json")).is_some());
        assert!(plain_path(&Path::from("a/b#1.json")).is_none());
    }

    #[tokio::test]
    async fn lists_what_the_plain_store_lists() {
        let d = tempfile::tempdir().unwrap();
        let log = d.path().join("_delta_log");
        std::fs::create_dir_all(log.join("_commits")).unwrap();
        for v in 0..40u64 {
            std::fs::write(log.join(format!("{v:020}.json")), vec![b'x'; v as usize]).unwrap();
        }
        std::fs::write(log.join("00000000000000000030.checkpoint.parquet"), b"p").unwrap();
        std::fs::write(log.join("_last_checkpoint"), b"{}").unwrap();
        std::fs::write(log.join("_commits/00000000000000000041.uuid.json"), b"c").unwrap();
        let plain = LocalFileSystem::new();
        let ours = WarehouseStore::new();
        for offset in [
            "00000000000000000000",
            "00000000000000000030",
            "00000000000000000039.json",
            "_last_checkpoint",
            "zzz",
        ] {
            let want = listed(&plain, &log, offset).await;
            assert_eq!(listed(&ours, &log, offset).await, want, "offset {offset}");
        }
        // Names the fast listing does not handle: the plain listing answers.
        std::fs::write(log.join("odd name.json"), b"o").unwrap();
        let want = listed(&plain, &log, "00000000000000000035").await;
        assert!(want.iter().any(|l| l.contains("odd")));
        assert_eq!(listed(&ours, &log, "00000000000000000035").await, want);
        // A directory that does not exist lists nothing.
        assert!(listed(&ours, &d.path().join("nope"), "0").await.is_empty());
    }

    #[tokio::test]
    async fn a_log_probed_from_a_version_lists_what_the_directory_holds() {
        let d = tempfile::tempdir().unwrap();
        let log = d.path().join("t/_delta_log");
        std::fs::create_dir_all(&log).unwrap();
        let put = |name: &str| std::fs::write(log.join(name), name).unwrap();
        // Versions 0-9 expired and removed; a checkpoint at 20 and 30, checksums, commits to 47.
        for v in 10..=47 {
            put(&format!("{v:020}.json"));
        }
        for v in [20, 30] {
            put(&format!("{v:020}.checkpoint.parquet"));
        }
        put("00000000000000000031.crc");
        put("_last_checkpoint");
        std::fs::write(log.join("_last_checkpoint"), br#"{"version":30,"size":3}"#).unwrap();
        let plain = LocalFileSystem::new();
        let ours = WarehouseStore::new();
        let offsets = [
            "00000000000000000030",
            "00000000000000000045",
            "00000000000000000047",
        ];
        for offset in offsets {
            let want = listed(&plain, &log, offset).await;
            assert_eq!(listed(&ours, &log, offset).await, want, "offset {offset}");
        }
        // Offsets no probe can answer: the directory is read, and the listing is the same.
        for offset in [
            "00000000000000000005",
            "00000000000000000048",
            "0000000000000000003",
        ] {
            let want = listed(&plain, &log, offset).await;
            assert_eq!(listed(&ours, &log, offset).await, want, "offset {offset}");
        }
        // A file system that does not count subdirectories in a directory's links (btrfs)
        // never probes: the listings above are all it shows.
        use std::os::unix::fs::MetadataExt;
        if std::fs::metadata(&log).unwrap().nlink() != 2 {
            return;
        }
        let dir = log.to_str().unwrap().trim_start_matches('/').to_string();
        let probe = |o: &str| crate::catalog::log::probe_log(&log, &dir, &format!("{dir}/{o}"));
        assert!(
            probe("00000000000000000030").is_some(),
            "the checkpoint's log is probed"
        );
        assert!(
            probe("00000000000000000005").is_none(),
            "expired versions are not guessed"
        );
        assert!(
            probe("00000000000000000048").is_none(),
            "nor versions not yet written"
        );
        // `_last_checkpoint` names version 40, which has no single-file checkpoint (another
        // form, e.g. multi-part): the directory is read.
        std::fs::write(
            log.join("_last_checkpoint"),
            br#"{"version":40,"size":3,"parts":2}"#,
        )
        .unwrap();
        assert!(probe("00000000000000000040").is_none());
        assert!(probe("00000000000000000041").is_some());
        // A multi-part checkpoint after the first version is not found by the probe (the
        // commits are: the reader replays them), and a subdirectory turns the probe off.
        put("00000000000000000044.checkpoint.0000000001.0000000002.parquet");
        let probed = probe("00000000000000000041").unwrap();
        assert!(!probed.iter().any(|n| n.contains("0000000001.0000000002")));
        assert!(probed.contains(&"00000000000000000047.json".to_string()));
        // A clean-up under way deletes old commits in no particular order: a probe from below
        // the last checkpoint that meets a gap reads the directory.
        std::fs::write(log.join("_last_checkpoint"), br#"{"version":30,"size":3}"#).unwrap();
        std::fs::remove_file(log.join("00000000000000000015.json")).unwrap();
        assert!(probe("00000000000000000012").is_none());
        assert!(probe("00000000000000000030").is_some());
        std::fs::create_dir(log.join("_sidecars")).unwrap();
        assert!(probe("00000000000000000041").is_none());
    }
}
