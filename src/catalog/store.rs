//! The warehouse's object store: the local file system, with a cheaper listing of a directory
//! from an offset. Opening a Delta table lists its `_delta_log` from the last checkpoint on; a
//! log keeps a file per commit for `delta.logRetentionDuration` (30 days), so a table committed
//! to every few minutes holds thousands of them. The plain local store turns every name into an
//! object path before comparing it with the offset, which costs more than replaying the few
//! commits after the checkpoint. This one compares the names first and reads metadata only for
//! the ones it returns. A new object (a commit, a data file) is written without a staged file
//! (see [`create_unnamed`]).
//!
//! The plain store hands every call to tokio's blocking pool: a thread woken to open a file, a
//! second to read it, the task woken again when each is done. A job copying a table makes a
//! few dozen such calls (its source's log and file, its target's log, its commit), each one
//! a trip through the pool's one lock, contended by every thread of the process: 140 futex
//! calls and 30 `sched_yield`s a table, a third of the job's time in the kernel. Here the
//! small ones (a file's metadata, a read of at most [`INLINE_BYTES`], a put of as much, a
//! directory of a few hundred names) are done where they are asked for, as the file system's
//! cache answers them in microseconds. A larger read is only opened here (to learn its size)
//! and is then the plain store's, as are larger writes and every other call.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use deltalake::logstore::object_store::local::LocalFileSystem;
use deltalake::logstore::object_store::path::Path;
use deltalake::logstore::object_store::{
    CopyOptions, GetOptions, GetResult, GetResultPayload, ListResult, MultipartUpload, ObjectMeta,
    ObjectStore, PutMode, PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions,
    Result,
};
use futures::stream::{self, BoxStream, StreamExt};

/// Above this many names after the offset, the plain listing is as cheap: hand it over.
const FEW: usize = 256;

/// The most bytes read or written in the asking task rather than on the blocking pool: a
/// commit, a checkpoint of a few thousand files, a small table's data file.
const INLINE_BYTES: u64 = 1 << 20;

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

/// What the plain store says of a file: its entity tag (inode, modification time in
/// microseconds, size, as it makes them) and modification time.
fn object_meta(md: &std::fs::Metadata, location: Path) -> ObjectMeta {
    use std::os::unix::fs::MetadataExt;
    let modified = md.modified().unwrap_or(std::time::UNIX_EPOCH);
    let mtime = modified
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_micros();
    ObjectMeta {
        location,
        last_modified: modified.into(),
        size: md.len(),
        e_tag: Some(format!("{:x}-{:x}-{:x}", md.ino(), mtime, md.len())),
        version: None,
    }
}

/// The plain store's error for a file that is not there.
fn not_found(
    path: &std::path::Path,
    source: std::io::Error,
) -> deltalake::logstore::object_store::Error {
    deltalake::logstore::object_store::Error::NotFound {
        path: path.to_string_lossy().into_owned(),
        source: Box::new(source),
    }
}

/// The bytes of `file` in `range`; None when the file ends first or a read fails.
fn read_range(file: &std::fs::File, range: Range<u64>) -> Option<Bytes> {
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0; (range.end - range.start) as usize];
    file.read_exact_at(&mut buf, range.start).ok()?;
    Some(Bytes::from(buf))
}

/// [`ObjectStore::get_opts`] of a plainly named file done here and now, the way the plain
/// store does it, when the file is missing or what is asked is at most [`INLINE_BYTES`]; None
/// for anything else (a directory, a failed precondition, a bad range, an I/O error), which
/// the plain store then answers with its own result.
fn get_here(location: &Path, options: &GetOptions) -> Option<Result<GetResult>> {
    let path = plain_path(location)?;
    let file = match std::fs::File::open(&path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Some(Err(not_found(&path, e)));
        }
        Err(_) => return None,
    };
    let md = file.metadata().ok()?;
    if md.is_dir() {
        return None;
    }
    let meta = object_meta(&md, location.clone());
    options.check_preconditions(&meta).ok()?;
    let range = match &options.range {
        Some(r) => r.as_range(meta.size).ok()?,
        None => 0..meta.size,
    };
    let bytes = if options.head {
        Bytes::new()
    } else {
        if range.end - range.start > INLINE_BYTES {
            return None;
        }
        read_range(&file, range.clone())?
    };
    Some(Ok(GetResult {
        payload: GetResultPayload::Stream(stream::once(async move { Ok(bytes) }).boxed()),
        meta,
        range,
        attributes: Default::default(),
    }))
}

/// [`ObjectStore::get_ranges`] of a plainly named file done here, when the ranges are at most
/// [`INLINE_BYTES`] in all and lie within the file; None otherwise (the plain store's way).
fn get_ranges_here(location: &Path, ranges: &[Range<u64>]) -> Option<Vec<Bytes>> {
    let total: u64 = ranges.iter().map(|r| r.end.saturating_sub(r.start)).sum();
    if total > INLINE_BYTES || ranges.iter().any(|r| r.start > r.end) {
        return None;
    }
    let file = std::fs::File::open(plain_path(location)?).ok()?;
    let size = file.metadata().ok()?.len();
    if ranges.iter().any(|r| r.end > size) {
        return None;
    }
    ranges
        .iter()
        .map(|r| read_range(&file, r.clone()))
        .collect()
}

/// Create the file `path`, which must not exist, holding `payload`, the way the plain store's
/// [`PutMode::Create`] (or its overwrite of a name that is free) does but without its staged
/// file: the bytes go to an unnamed file in the directory (`O_TMPFILE`), which is given its
/// name only when whole (`linkat`, refused if the name exists). Readers never see a part of
/// it, and a process killed on the way leaves nothing. The staged file's removal was a
/// deleted inode per commit, and ext4 without a journal skips the inodes deleted in the last
/// minute (six, while their inode table block is not yet written back) each time it makes a
/// file: a job committing 10,000 tables spent a growing share of its time there. A missing
/// directory (a new table's first commit and first data file) is made first, as the plain
/// store makes it, so a new table deletes nothing either (a partition's `col=value`
/// directory is not a plain name: its files still go the plain store's way).
///
/// None when this way is not open here (a file system without unnamed files, a directory that
/// cannot be made, no `/proc`, a write or link that failed): the plain store then does the put,
/// and reports its own errors. Nothing but directories was created in that case. A file system
/// or sandbox that refuses unnamed files or their link turns this way off for the rest of the
/// process (each commit would otherwise be written twice).
#[cfg(any(target_os = "linux", target_os = "android"))]
fn create_unnamed(path: &std::path::Path, payload: &PutPayload) -> Option<Result<PutResult>> {
    use std::io::Write;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::OpenOptionsExt;
    use std::os::unix::io::AsRawFd;
    use std::sync::atomic::{AtomicBool, Ordering};
    static UNAVAILABLE: AtomicBool = AtomicBool::new(false);
    if UNAVAILABLE.load(Ordering::Relaxed) {
        return None;
    }
    let dir = path.parent()?;
    let open = || {
        std::fs::OpenOptions::new()
            .write(true)
            .mode(0o666)
            .custom_flags(libc::O_TMPFILE)
            .open(dir)
    };
    let opened = match open() {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(dir).ok()?;
            open()
        }
        opened => opened,
    };
    let mut file = match opened {
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
            // (A directory removed meanwhile, a table dropped while a copy wrote, is ENOENT
            // too: then `/proc` is there, and the way stays open.)
            let no_proc = source.raw_os_error() == Some(libc::ENOENT)
                && !std::path::Path::new("/proc/self/fd").is_dir();
            if no_proc
                || matches!(
                    source.raw_os_error(),
                    Some(libc::EPERM | libc::EACCES | libc::EXDEV | libc::EOPNOTSUPP)
                )
            {
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
    // The plain store's entity tag, which its `head` of the file reports.
    Some(Ok(PutResult {
        e_tag: object_meta(&meta, Path::default()).e_tag,
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
        let overwrite = matches!(opts.mode, PutMode::Overwrite);
        if (overwrite || matches!(opts.mode, PutMode::Create))
            && opts.attributes.is_empty()
            && let Some(path) = plain_path(location)
            // A file to replace (`_last_checkpoint`) is the plain store's to replace.
            && !(overwrite && std::fs::symlink_metadata(&path).is_ok())
        {
            let created = if payload.content_length() as u64 <= INLINE_BYTES {
                create_unnamed(&path, &payload)
            } else {
                let data = payload.clone();
                tokio::task::spawn_blocking(move || create_unnamed(&path, &data))
                    .await
                    .ok()
                    .flatten()
            };
            match created {
                // A file that is there already is the plain store's to replace.
                Some(Err(deltalake::logstore::object_store::Error::AlreadyExists { .. }))
                    if overwrite => {}
                Some(created) => return created,
                None => {}
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
        if let Some(got) = get_here(location, &options) {
            return got;
        }
        self.inner.get_opts(location, options).await
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        if let Some(got) = get_ranges_here(location, ranges) {
            return Ok(got);
        }
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
        // Read when the stream is first polled, as the plain listing is.
        stream::once(async move {
            let dir = std::path::Path::new("/").join(prefix.as_ref());
            let (p, o) = (prefix.to_string(), offset.to_string());
            let names =
                crate::catalog::log::probe_log(&dir, &p, &o).or_else(|| names_after(&dir, &p, &o));
            let Some(names) = names else {
                return inner.list_with_offset(Some(&prefix), &offset);
            };
            let listed = names.into_iter().map(move |name| {
                let location = prefix.clone().join(name.as_str());
                match std::fs::metadata(dir.join(&name)) {
                    Ok(md) if md.is_file() => {
                        stream::iter([Ok(object_meta(&md, location))]).boxed()
                    }
                    // A directory (or a file gone meanwhile): the plain listing of it.
                    _ => inner.list_with_offset(Some(&location), &offset),
                }
            });
            stream::iter(listed.collect::<Vec<_>>()).flatten().boxed()
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
    use deltalake::logstore::object_store::ObjectStoreExt;
    use futures::TryStreamExt;

    use super::*;

    async fn listed(store: &dyn ObjectStore, dir: &std::path::Path, offset: &str) -> Vec<String> {
        let prefix = Path::from(dir.to_str().unwrap());
        let offset = prefix.clone().join(offset);
        let mut out: Vec<String> = store
            .list_with_offset(Some(&prefix), &offset)
            .map_ok(|m| {
                format!(
                    "{} {} {:?} {}",
                    m.location, m.size, m.e_tag, m.last_modified
                )
            })
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
        // A missing directory is made (as the plain store makes it), and a name that is not
        // plain goes the plain store's way, with the same outcome.
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
                // A new table's first commit: its directories are made and the file is
                // linked in, with no staged file (a deleted inode each), and what the store
                // says of it is what the plain store's head says.
                let first = d.path().join("u/_delta_log/00000000000000000000.json");
                let made = match create_unnamed(&first, &payload()) {
                    Some(Ok(made)) => made,
                    other => panic!("{other:?}"),
                };
                let plain = LocalFileSystem::new();
                let at = Path::from(first.to_str().unwrap());
                assert_eq!(made.e_tag, plain.head(&at).await.unwrap().e_tag);
                assert_eq!(std::fs::read(&first).unwrap(), b"{\"a\":1}\n{}");
                assert!(store.put_opts(&at, payload(), create()).await.is_err());
            }
        }
        assert!(plain_path(&Path::from("a/b.json")).is_some());
        assert!(plain_path(&Path::from("a/b#1.json")).is_none());
    }

    /// What a store answers to a read, as comparable text: the object's metadata (entity tag
    /// and time included), the range and the bytes, or the kind of error.
    /// (A read of the metadata only is answered by its metadata: its payload is not read.)
    async fn answer(store: &dyn ObjectStore, at: &Path, options: GetOptions) -> String {
        let head = options.head;
        match store.get_opts(at, options).await {
            Ok(got) => {
                let (meta, range) = (got.meta.clone(), got.range.clone());
                let bytes = if head {
                    Bytes::new()
                } else {
                    got.bytes().await.unwrap()
                };
                let sum = crc32fast::hash(&bytes);
                format!("{meta:?} {range:?} {} bytes, crc {sum:x}", bytes.len())
            }
            Err(deltalake::logstore::object_store::Error::NotFound { path, .. }) => {
                format!("not found: {path}")
            }
            Err(deltalake::logstore::object_store::Error::Precondition { .. }) => {
                "precondition".to_string()
            }
            Err(deltalake::logstore::object_store::Error::NotModified { .. }) => {
                "not modified".to_string()
            }
            Err(e) => format!("error {}", e.to_string().split(':').next().unwrap_or("")),
        }
    }

    /// Reads answered here, without the blocking pool, are the plain store's answers: every
    /// kind of range, a read of the metadata only, preconditions, a missing file, a directory
    /// and a file larger than is read here.
    #[tokio::test]
    #[allow(clippy::single_range_in_vec_init)] // lists of one range each, as asked
    async fn reads_answered_here_are_the_plain_stores() {
        let d = tempfile::tempdir().unwrap();
        let small: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
        let large: Vec<u8> = (0..(INLINE_BYTES as u32 + 10))
            .map(|i| (i % 13) as u8)
            .collect();
        std::fs::write(d.path().join("small.json"), &small).unwrap();
        std::fs::write(d.path().join("empty.json"), b"").unwrap();
        std::fs::write(d.path().join("large.parquet"), &large).unwrap();
        std::fs::create_dir(d.path().join("dir")).unwrap();
        let at = |name: &str| Path::from(d.path().join(name).to_str().unwrap());
        let (plain, ours) = (LocalFileSystem::new(), WarehouseStore::new());
        let tag = plain.head(&at("small.json")).await.unwrap().e_tag.unwrap();
        let options = |i: usize| -> GetOptions {
            use deltalake::logstore::object_store::GetRange;
            let mut o = GetOptions::default();
            match i {
                0 => {}
                1 => o.head = true,
                2 => o.range = Some(GetRange::Bounded(10..20)),
                3 => o.range = Some(GetRange::Offset(4990)),
                4 => o.range = Some(GetRange::Suffix(7)),
                5 => o.range = Some(GetRange::Bounded(4990..6000)),
                6 => o.range = Some(GetRange::Offset(9000)),
                7 => o.if_match = Some(tag.clone()),
                8 => o.if_match = Some("another".into()),
                9 => o.if_none_match = Some(tag.clone()),
                _ => unreachable!(),
            }
            o
        };
        for name in [
            "small.json",
            "empty.json",
            "large.parquet",
            "missing.json",
            "dir",
        ] {
            for i in 0..10 {
                let want = answer(&plain, &at(name), options(i)).await;
                assert_eq!(
                    answer(&ours, &at(name), options(i)).await,
                    want,
                    "{name}, options {i}"
                );
            }
        }
        assert!(
            answer(&ours, &at("small.json"), options(0))
                .await
                .contains("e_tag: Some")
        );
        // ... and the small file's reads were answered here, not handed over.
        for i in [0, 1, 2, 3, 4, 5, 7] {
            assert!(
                get_here(&at("small.json"), &options(i)).is_some(),
                "options {i}"
            );
        }
        assert!(matches!(
            get_here(&at("missing.json"), &options(0)),
            Some(Err(
                deltalake::logstore::object_store::Error::NotFound { .. }
            ))
        ));
        assert!(get_here(&at("large.parquet"), &options(0)).is_none());
        assert!(get_ranges_here(&at("small.json"), &[0..10, 4990..5000]).is_some());
        for ranges in [
            vec![0..10, 100..4000, 4999..5000],
            vec![],
            vec![4990..5001],
            vec![0..0],
        ] {
            let want = plain
                .get_ranges(&at("small.json"), &ranges)
                .await
                .map_err(|e| e.to_string());
            let got = ours
                .get_ranges(&at("small.json"), &ranges)
                .await
                .map_err(|e| e.to_string());
            assert_eq!(got, want, "{ranges:?}");
        }
        let whole = [0..INLINE_BYTES + 10];
        assert_eq!(
            ours.get_ranges(&at("large.parquet"), &whole).await.unwrap(),
            vec![Bytes::from(large.clone())]
        );
        assert!(ours.get_ranges(&at("missing.json"), &[0..1]).await.is_err());
        // A put here (of a name that is free, then one that is taken) is what the plain store
        // would have made: the bytes, and the entity tag its head reports.
        let short = b"{}".to_vec();
        for (name, bytes) in [
            ("new.json", &small),
            ("small.json", &large),
            ("new.json", &short),
        ] {
            let put = ours
                .put(&at(name), PutPayload::from(bytes.clone()))
                .await
                .unwrap();
            assert_eq!(std::fs::read(d.path().join(name)).unwrap(), *bytes);
            assert_eq!(
                put.e_tag,
                plain.head(&at(name)).await.unwrap().e_tag,
                "{name}"
            );
        }
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
