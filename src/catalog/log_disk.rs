//! The log files of tables on object stores, kept on the local disk between processes. A job
//! run by cron every few minutes opens the same tables each time, and its own copy history
//! grows by one commit a run: without this, each run reads again from the store every commit
//! since the last checkpoint, and the checkpoint too. Commits and checkpoints are written once
//! and never change while their table lives, so they are kept here as they were read (or
//! written) and used again only when the store's listing in this process shows the very object
//! (same size and entity tag, see [`super::log_cache`]): a table dropped and made again at the
//! same place, by any process on any machine, is read afresh.
//!
//! The directory is `TIDEMARK_CACHE_DIR` (set it empty for no cache), else the user's cache
//! directory (`~/.cache/tidemark`). Its files are the owner's only: they hold the tables'
//! schemas and column statistics. Deleting it is always safe. A log's files older than its
//! newest checkpoint kept here are deleted when that checkpoint is kept (readers start from
//! it), so each table keeps about one checkpoint interval of commits. A failure to read or
//! write here is never an error: the store is asked instead.
//!
//! Beside the logs, the small data files this machine writes (see [`save_data`]) are kept
//! too, about 64 MiB of them, the oldest let go first.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use deltalake::logstore::object_store::ObjectMeta;

use super::log::{DIR, Immutable, immutable};

/// The environment variable naming the cache directory (empty: none).
pub const CACHE_DIR_ENV: &str = "TIDEMARK_CACHE_DIR";

/// The first line of every kept file, then its size, entity tag, time and the CRC-32 of its
/// bytes, then its bytes. A file whose bytes do not match (a disk that lost them) is not used.
const MAGIC: &str = "tidemark delta log file 2";

/// Where log files are kept, if anywhere.
fn root() -> Option<&'static Path> {
    static ROOT: OnceLock<Option<PathBuf>> = OnceLock::new();
    ROOT.get_or_init(|| made_root("delta_log")).as_deref()
}

/// Where small data files this machine wrote are kept, if anywhere (see [`save_data`]).
fn data_root() -> Option<&'static Path> {
    static ROOT: OnceLock<Option<PathBuf>> = OnceLock::new();
    ROOT.get_or_init(|| made_root("data_files")).as_deref()
}

/// The cache directory's subdirectory `name`, made if need be, when it is this user's alone.
fn made_root(name: &str) -> Option<PathBuf> {
    // Unit tests keep nothing in the user's cache directory.
    if cfg!(test) {
        return None;
    }
    let root = match std::env::var_os(CACHE_DIR_ENV) {
        Some(dir) if dir.is_empty() => None,
        Some(dir) => Some(PathBuf::from(dir).join(name)),
        None => dirs::cache_dir().map(|d| d.join("tidemark").join(name)),
    }?;
    // Made first (only by this user, as 0700), then checked: a directory someone else
    // made there first is not used.
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&root)
        .ok()?;
    private(&root).then_some(root)
}

/// Whether `dir` is this user's alone (or not made yet): files another user could write there
/// would be read as tables' logs.
fn private(dir: &Path) -> bool {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    match std::fs::symlink_metadata(dir) {
        Ok(m) => {
            // SAFETY: geteuid has no preconditions and cannot fail.
            let me = unsafe { libc::geteuid() };
            m.is_dir() && m.uid() == me && m.permissions().mode() & 0o022 == 0
        }
        Err(e) => e.kind() == std::io::ErrorKind::NotFound,
    }
}

/// The settings that say which server a bucket's name is on (a local S3 server and AWS can
/// both have a bucket `lake`), as the stores' handlers read them from the environment.
const ENDPOINT_SETTINGS: &[&str] = &[
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "AWS_ENDPOINT",
    "AWS_PROFILE",
    "AZURE_STORAGE_ACCOUNT_NAME",
    "AZURE_STORAGE_ACCOUNT",
    "AZURE_STORAGE_USE_EMULATOR",
    "AZURITE_BLOB_STORAGE_URL",
    "AZURE_ENDPOINT",
    "GOOGLE_SERVICE_ACCOUNT",
    "GOOGLE_SERVICE_ACCOUNT_PATH",
    // (A key names its server too; only a hash of it is kept, in a directory's name.)
    "GOOGLE_SERVICE_ACCOUNT_KEY",
    "GOOGLE_APPLICATION_CREDENTIALS",
];

/// Which servers this process's store names are on (see [`ENDPOINT_SETTINGS`]).
fn endpoints() -> &'static str {
    static ENDPOINTS: OnceLock<String> = OnceLock::new();
    ENDPOINTS.get_or_init(|| {
        ENDPOINT_SETTINGS
            .iter()
            .filter_map(|name| Some(format!("{name}={}\n", std::env::var(name).ok()?)))
            .collect()
    })
}

/// The file keeping the object `key` (`s3://bucket/a/t/_delta_log/<name>`): one directory a
/// log, named by a hash of the log's place and its server. Two logs of one hash are still
/// told apart by the size and entity tag checked on every use.
fn place(root: &Path, key: &str) -> Option<PathBuf> {
    let (log, name) = key.rsplit_once('/')?;
    let dir = crate::fnv1a(format!("{}{log}", endpoints()).as_bytes());
    Some(root.join(format!("{dir:016x}")).join(name))
}

fn header(meta: &ObjectMeta, bytes: &[u8]) -> String {
    format!(
        "{MAGIC}\n{}\n{}\n{}\n{:08x}\n",
        meta.size,
        meta.e_tag.as_deref().unwrap_or(""),
        meta.last_modified.timestamp_nanos_opt().unwrap_or(0),
        crc32fast::hash(bytes)
    )
}

fn text(line: Option<&[u8]>) -> Option<&str> {
    std::str::from_utf8(line?).ok()
}

/// The bytes kept for `key`, when they are the object `listed` (see
/// [`super::log_cache::same_object`]).
pub async fn load(key: &str, listed: &ObjectMeta) -> Option<Bytes> {
    load_in(root()?, key, listed).await
}

/// What is kept for `key` whatever object it was, and what the store said of it then: a
/// mutable file's last known content (`_last_checkpoint`), to be checked against a listing
/// before it is used.
pub async fn load_kept(key: &str, location: &deltalake::Path) -> Option<(ObjectMeta, Bytes)> {
    kept_in(root()?, key, location).await
}

async fn load_in(root: &Path, key: &str, listed: &ObjectMeta) -> Option<Bytes> {
    let (kept, bytes) = kept_in(root, key, &listed.location).await?;
    super::log_cache::same_object(&kept, listed).then_some(bytes)
}

async fn kept_in(
    root: &Path,
    key: &str,
    location: &deltalake::Path,
) -> Option<(ObjectMeta, Bytes)> {
    let file = tokio::fs::read(place(root, key)?).await.ok()?;
    let mut lines = file.splitn(6, |&b| b == b'\n');
    if text(lines.next())? != MAGIC {
        return None;
    }
    let size: u64 = text(lines.next())?.parse().ok()?;
    let e_tag = text(lines.next())?;
    let nanos: i64 = text(lines.next())?.parse().ok()?;
    let crc = u32::from_str_radix(text(lines.next())?, 16).ok()?;
    let body = lines.next()?.len();
    let kept = ObjectMeta {
        location: location.clone(),
        last_modified: chrono::DateTime::from_timestamp_nanos(nanos),
        size,
        e_tag: (!e_tag.is_empty()).then(|| e_tag.to_string()),
        version: None,
    };
    // The body is the file's tail: handed on without a copy.
    let file = Bytes::from(file);
    let bytes = file.slice(file.len() - body..);
    (body as u64 == size && crc32fast::hash(&bytes) == crc).then_some((kept, bytes))
}

/// Keep `bytes`, the object `meta` of `key`. A checkpoint kept makes the log's older files
/// useless: they are deleted.
pub async fn save(key: &str, meta: &ObjectMeta, bytes: &Bytes) {
    if let Some(root) = root() {
        save_in(root, key, meta, bytes).await
    }
}

async fn save_in(root: &Path, key: &str, meta: &ObjectMeta, bytes: &Bytes) {
    let Some(file) = place(root, key) else { return };
    let Some(dir) = file.parent() else { return };
    if write(dir, &file, meta, bytes).await.is_err() {
        return;
    }
    if let Some(Immutable::Checkpoint(version)) = immutable(key) {
        prune(dir, version).await;
    }
}

async fn write(dir: &Path, file: &Path, meta: &ObjectMeta, bytes: &Bytes) -> std::io::Result<()> {
    use tokio::io::AsyncWriteExt;
    static MADE: AtomicU64 = AtomicU64::new(0);
    tokio::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .await?;
    // Written aside, then renamed: a reader sees the whole file or none.
    let aside = dir.join(format!(
        ".{}.{}.{}",
        file.file_name().and_then(|n| n.to_str()).unwrap_or("file"),
        std::process::id(),
        MADE.fetch_add(1, Ordering::Relaxed)
    ));
    let written = async {
        let mut out = tokio::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&aside)
            .await?;
        out.write_all(header(meta, bytes).as_bytes()).await?;
        out.write_all(bytes).await?;
        out.flush().await?;
        drop(out);
        tokio::fs::rename(&aside, file).await
    }
    .await;
    if written.is_err() {
        let _ = tokio::fs::remove_file(&aside).await;
    }
    written
}

/// Bytes of small data files kept on disk (checked at a process's first save and every
/// quarter of it saved since); past it the oldest go, down to half.
const DATA_BYTES: u64 = 64 << 20;

/// Keep the small data file `key` (the object `meta`) this process has just written. Data
/// files have names no other file ever takes (a UUID in each, by every Delta writer), and are
/// never changed, only deleted: a copy kept here answers reads of that name for as long as
/// it is kept. A job's history, its control table and small increments are read again by the
/// next run on the same machine (the history's files when it is compacted): from here, not
/// the store.
pub async fn save_data(key: &str, meta: &ObjectMeta, bytes: &Bytes) {
    static SAVED: AtomicU64 = AtomicU64::new(0);
    let Some(root) = data_root() else { return };
    let Some(file) = place(root, key) else { return };
    let Some(dir) = file.parent() else { return };
    if write(dir, &file, meta, bytes).await.is_err() {
        return;
    }
    // The kept files are weighed at the first save of a process and every quarter of the
    // budget saved since.
    let before = SAVED.fetch_add(bytes.len() as u64, Ordering::Relaxed);
    if before == 0 || before / (DATA_BYTES / 4) != (before + bytes.len() as u64) / (DATA_BYTES / 4)
    {
        // Aside: the write waits for none of it (a process ending first leaves it to the next),
        // one trim at a time.
        static TRIMMING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
        if !TRIMMING.swap(true, Ordering::AcqRel) {
            tokio::spawn(async move {
                trim(root, DATA_BYTES).await;
                TRIMMING.store(false, Ordering::Release);
            });
        }
    }
}

/// The small data file kept for `key`, if this machine wrote it (see [`save_data`]).
pub async fn load_data(key: &str, location: &deltalake::Path) -> Option<(ObjectMeta, Bytes)> {
    kept_in(data_root()?, key, location).await
}

/// Whether the small data file `key` is kept here (this machine wrote it): one `stat`, no read.
pub fn keeps_data(key: &str) -> bool {
    data_root()
        .and_then(|root| place(root, key))
        .is_some_and(|file| file.is_file())
}

/// Let the data file `key` go (deleted from its table's store).
pub async fn forget_data(key: &str) {
    if let Some(file) = data_root().and_then(|root| place(root, key)) {
        let _ = tokio::fs::remove_file(file).await;
    }
}

/// Delete the oldest files kept under `root` (one level of directories) until they weigh
/// half of `budget`, when they weigh more than it.
async fn trim(root: &Path, budget: u64) {
    let mut files = Vec::new();
    let Ok(mut dirs) = tokio::fs::read_dir(root).await else {
        return;
    };
    while let Ok(Some(dir)) = dirs.next_entry().await {
        let Ok(mut entries) = tokio::fs::read_dir(dir.path()).await else {
            continue;
        };
        let mut empty = true;
        while let Ok(Some(entry)) = entries.next_entry().await {
            empty = false;
            if let Ok(m) = entry.metadata().await {
                let when = m.modified().unwrap_or(std::time::UNIX_EPOCH);
                files.push((when, m.len(), entry.path()));
            }
        }
        // A table's directory emptied by an earlier trim goes (fails if a file came since).
        if empty {
            let _ = tokio::fs::remove_dir(dir.path()).await;
        }
    }
    let mut total: u64 = files.iter().map(|f| f.1).sum();
    if total <= budget {
        return;
    }
    files.sort();
    for (_, len, path) in files {
        if total <= budget / 2 {
            break;
        }
        if tokio::fs::remove_file(&path).await.is_ok() {
            total -= len;
        }
    }
}

/// Delete the log's kept files older than its checkpoint of `version`.
async fn prune(dir: &Path, version: u64) {
    let Ok(mut entries) = tokio::fs::read_dir(dir).await else {
        return;
    };
    while let Ok(Some(entry)) = entries.next_entry().await {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let stale = immutable(&format!("{DIR}/{name}")).is_some_and(|f| f.version() < version)
            // A file being written aside by a process that died (an hour is long enough).
            || (name.starts_with('.')
                && entry.metadata().await.is_ok_and(|m| {
                    m.modified()
                        .is_ok_and(|t| t.elapsed().is_ok_and(|a| a.as_secs() > 3600))
                }));
        if stale {
            let _ = tokio::fs::remove_file(entry.path()).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_is_named_the_same_everywhere() {
        // A directory's name must not change between builds: the next process looks there.
        assert_eq!(crate::fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(crate::fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }

    /// Past its budget the oldest kept files go, down to half of it; within it none.
    #[tokio::test]
    async fn the_oldest_data_files_go_past_the_budget() {
        let root = std::env::temp_dir().join(format!("tidemark-data-{}", uuid::Uuid::new_v4()));
        let start = std::time::SystemTime::now() - std::time::Duration::from_secs(100);
        for (i, dir) in ["a", "b", "a", "b", "a"].iter().enumerate() {
            std::fs::create_dir_all(root.join(dir)).unwrap();
            let path = root.join(dir).join(format!("f{i}"));
            std::fs::write(&path, [0u8; 100]).unwrap();
            let file = std::fs::File::options().write(true).open(&path).unwrap();
            file.set_modified(start + std::time::Duration::from_secs(i as u64))
                .unwrap();
        }
        let left = |root: &Path| {
            let mut names: Vec<String> = ["a", "b"]
                .iter()
                .flat_map(|d| std::fs::read_dir(root.join(d)).unwrap())
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            names
        };
        // A table's directory left empty goes.
        std::fs::create_dir_all(root.join("c")).unwrap();
        trim(&root, 500).await;
        assert_eq!(left(&root), ["f0", "f1", "f2", "f3", "f4"]);
        assert!(!root.join("c").exists());
        trim(&root, 450).await;
        assert_eq!(left(&root), ["f3", "f4"]);
        std::fs::remove_dir_all(&root).unwrap();
    }

    fn meta(key: &str, size: u64, e_tag: &str) -> ObjectMeta {
        ObjectMeta {
            location: key.into(),
            last_modified: chrono::DateTime::from_timestamp_nanos(7),
            size,
            e_tag: Some(e_tag.into()),
            version: None,
        }
    }

    /// A kept file is used only for the object it was: another entity tag or size is another
    /// object (a table made again at one place).
    #[tokio::test]
    async fn a_file_is_used_only_for_its_object() {
        let root = std::env::temp_dir().join(format!("tidemark-log-disk-{}", uuid::Uuid::new_v4()));
        let key = "s3://b/t/_delta_log/00000000000000000003.json";
        let bytes = Bytes::from_static(b"{\"commitInfo\":{}}\n");
        let kept = meta(key, bytes.len() as u64, "\"a\"");
        save_in(&root, key, &kept, &bytes).await;
        assert_eq!(load_in(&root, key, &kept).await, Some(bytes.clone()));
        assert_eq!(
            load_in(&root, key, &meta(key, bytes.len() as u64, "\"b\"")).await,
            None
        );
        assert_eq!(load_in(&root, key, &meta(key, 3, "\"a\"")).await, None);
        let other = "s3://b/u/_delta_log/00000000000000000003.json";
        assert_eq!(
            load_in(&root, other, &meta(other, bytes.len() as u64, "\"a\"")).await,
            None
        );
        // A checkpoint kept deletes the commits before it, not those after.
        let checkpoint = "s3://b/t/_delta_log/00000000000000000005.checkpoint.parquet";
        let later = "s3://b/t/_delta_log/00000000000000000006.json";
        save_in(
            &root,
            later,
            &meta(later, bytes.len() as u64, "\"c\""),
            &bytes,
        )
        .await;
        save_in(
            &root,
            checkpoint,
            &meta(checkpoint, 4, "\"d\""),
            &Bytes::from_static(b"PAR1"),
        )
        .await;
        assert_eq!(load_in(&root, key, &kept).await, None);
        assert!(
            load_in(&root, later, &meta(later, bytes.len() as u64, "\"c\""))
                .await
                .is_some()
        );
        // A kept file whose bytes changed on disk (same length) is not used.
        let file = place(&root, later).unwrap();
        let mut changed = std::fs::read(&file).unwrap();
        let last = changed.len() - 2;
        changed[last] ^= 0x01;
        std::fs::write(&file, changed).unwrap();
        assert_eq!(
            load_in(&root, later, &meta(later, bytes.len() as u64, "\"c\"")).await,
            None
        );
        let dir = place(&root, key).unwrap().parent().unwrap().to_path_buf();
        let mode = std::fs::metadata(&dir).unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(mode.permissions().mode() & 0o777, 0o700);
        // A directory others may write to is not used.
        assert!(private(&root) && private(&root.join("not yet")));
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(!private(&dir));
        std::fs::remove_dir_all(&root).unwrap();
    }
}
