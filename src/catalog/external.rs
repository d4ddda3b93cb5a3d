//! External tables: a warehouse name (`main.default.orders`) for a Delta table that lives at a
//! location of its own (`CREATE TABLE t LOCATION 's3://bucket/orders'`), as Databricks has
//! them. The name is a directory of the warehouse holding one small file, the link, with the
//! location's URL; the table's data and log stay at the location (DROP TABLE removes the
//! link, never the data). Object stores are written only where commits are safe: the store
//! must refuse a second conditional PUT of one key (what Delta's commits rely on), which
//! tidemark checks once per store before its first write there.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Mutex;

use deltalake::DeltaTable;
use deltalake::logstore::object_store::{self, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use url::Url;

use super::place::Place;
use crate::error::{Error, Result};

/// The link's file name inside the name's directory.
pub const LINK: &str = "_tidemark_location";

/// The environment variable that lets tidemark write to a store whose conditional PUT does
/// not hold (a concurrent writer's commit can then be overwritten: rows lost).
pub const RISK_ENV: &str = "TIDEMARK_RISK_UNSAFE_COMMITS";

/// A flag line of a managed table's link: the table belongs to its name (DROP TABLE deletes
/// its data), as tables in a schema with a MANAGED LOCATION do.
const MANAGED: &str = "managed";
/// A flag line of a link whose table is being created: not a table yet (a create stopped
/// half-way leaves no name that cannot be opened; the next create takes over).
const CREATING: &str = "creating";

/// A directory's link, read once: the place, and its flags.
pub struct Link {
    pub url: Url,
    /// A managed table's: its data goes with its name.
    pub managed: bool,
    /// A table still being created: not a table yet.
    pub creating: bool,
    /// The creating link's own mark: which create wrote it.
    pub token: Option<String>,
}

/// The marks of the creating links this process wrote (see [`write_creating_link`]).
static MINE: Mutex<Option<HashSet<String>>> = Mutex::new(None);

/// A line of a creating link that names the create that wrote it.
const TOKEN: &str = "token ";

/// Whether this process wrote the creating link `link` (a failed create removes only its own:
/// another process's create may be about to commit there).
pub fn is_mine(link: &Link) -> bool {
    link.token.as_ref().is_some_and(|t| {
        MINE.lock()
            .map(|m| m.as_ref().is_some_and(|m| m.contains(t)))
            .unwrap_or(false)
    })
}

/// The link in `dir`, or None; a link the store cannot give is an error (unlike
/// [`read_link`]), for statements that must not guess.
pub fn try_read_link(dir: &Place) -> Result<Option<Link>> {
    Ok(dir.join(LINK).read()?.and_then(|b| parse_link(&b)))
}

/// The link in `dir`, if it has one (an external or managed table's, or a schema's or
/// catalog's MANAGED LOCATION).
pub fn read_link(dir: &Place) -> Option<Link> {
    try_read_link(dir).ok().flatten()
}

/// Whether `dir` has a link naming a table: a link that is not a creating one. A link that
/// cannot be read still names one (opening it says what is wrong).
pub fn names_table(dir: &Place) -> bool {
    try_names_table(dir).unwrap_or(true)
}

/// [`names_table`], with a link the store cannot give an error.
pub fn try_names_table(dir: &Place) -> Result<bool> {
    Ok(dir
        .join(LINK)
        .read()?
        .is_some_and(|bytes| !parse_link(&bytes).is_some_and(|l| l.creating)))
}

fn parse_link(bytes: &[u8]) -> Option<Link> {
    let text = std::str::from_utf8(bytes).ok()?;
    let mut lines = text.lines();
    let url = Url::parse(lines.next()?.trim()).ok()?;
    let (mut managed, mut creating, mut token) = (false, false, None);
    for flag in lines {
        managed |= flag == MANAGED;
        creating |= flag == CREATING;
        if let Some(t) = flag.strip_prefix(TOKEN) {
            token = Some(t.to_string());
        }
    }
    Some(Link {
        url,
        managed,
        creating,
        token,
    })
}

/// The location a directory links to, if it does.
pub fn link(dir: &Place) -> Option<Url> {
    read_link(dir).map(|l| l.url)
}

/// Make `dir` name the place `url` (`managed`: a table whose data goes with its name): the
/// link is written whole, so a reader finds it or nothing.
pub fn write_link(dir: &Place, url: &Url, managed: bool) -> Result<()> {
    write_flags(dir, url, managed, false)
}

/// A link for a table about to be created at `url`: followed by the create, not a table
/// until [`finish_link`]. Written only where there is no link yet: the link another process
/// wrote first is returned instead (two creates of one name then meet at one place, where
/// the Delta log lets one of them commit).
pub fn write_creating_link(dir: &Place, url: &Url, managed: bool) -> Result<Option<Link>> {
    let token = uuid::Uuid::new_v4().simple().to_string();
    let mut text = link_text(url, managed, true);
    text.extend_from_slice(format!("{TOKEN}{token}\n").as_bytes());
    if dir.join(LINK).write_new(text)? {
        if let Ok(mut m) = MINE.lock() {
            m.get_or_insert_with(HashSet::new).insert(token);
        }
        return Ok(None);
    }
    Ok(Some(read_link(dir).ok_or_else(|| {
        Error::Conflict(format!(
            "{dir} is being linked by another process at this moment; run the statement again"
        ))
    })?))
}

/// The table of a creating link exists now: the link names it.
pub fn finish_link(dir: &Place) -> Result<()> {
    match read_link(dir) {
        Some(l) if l.creating => write_link(dir, &l.url, l.managed),
        _ => Ok(()),
    }
}

fn write_flags(dir: &Place, url: &Url, managed: bool, creating: bool) -> Result<()> {
    dir.join(LINK).write(link_text(url, managed, creating))
}

fn link_text(url: &Url, managed: bool, creating: bool) -> Vec<u8> {
    let mut text = format!("{url}\n");
    if managed {
        text.push_str(MANAGED);
        text.push('\n');
    }
    if creating {
        text.push_str(CREATING);
        text.push('\n');
    }
    text.into_bytes()
}

/// Whether the places `a` and `b` overlap: one is `b` or lies under the other. Spellings of
/// one store are one: `s3a://` is `s3://`, and an Azure container is one place whichever way
/// it is written (`az://c/x`, `azure://c/x`, `abfss://c@account.../x`: the account of `az://`
/// comes from the environment, so any two accounts count as one here).
pub fn overlaps(a: &Url, b: &Url) -> bool {
    let place = |u: &Url| -> (String, String, Vec<String>) {
        let mut segments: Vec<String> = u
            .path_segments()
            .map(|s| s.filter(|p| !p.is_empty()).map(str::to_string).collect())
            .unwrap_or_default();
        let host = u.host_str().unwrap_or_default().to_string();
        match u.scheme() {
            "s3a" | "s3" => ("s3".into(), host, segments),
            "az" | "azure" => ("azure".into(), host, segments),
            "abfs" | "abfss" => ("azure".into(), u.username().to_string(), segments),
            scheme => {
                segments.insert(0, u.username().to_string());
                (scheme.to_string(), host, segments)
            }
        }
    };
    let ((sa, ha, a), (sb, hb, b)) = (place(a), place(b));
    if sa != sb || ha != hb {
        return false;
    }
    let n = a.len().min(b.len());
    a[..n] == b[..n]
}

/// `name` under the location `base` (`s3://b/s` and `t`: `s3://b/s/t`).
pub fn child(base: &Url, name: &str) -> Url {
    let mut url = base.clone();
    if let Ok(mut segments) = url.path_segments_mut() {
        segments.pop_if_empty().push(name);
    }
    url
}

/// A handle on whatever is at `url` (a table or not yet).
pub fn handle_at(url: &Url) -> Result<DeltaTable> {
    if is_remote(url) {
        Ok(builder(url)?.build()?)
    } else {
        Ok(deltalake::DeltaTableBuilder::from_url(url.clone())?.build()?)
    }
}

/// Whether a Delta table is at `url` (an unreachable store is an error naming it).
pub async fn holds_table(url: &Url) -> Result<bool> {
    if let Ok(path) = url.to_file_path()
        && !path.exists()
    {
        return Ok(false);
    }
    let mut there = handle_at(url)?;
    match there.load().await {
        Ok(()) => Ok(true),
        Err(deltalake::DeltaTableError::NotATable(_))
        | Err(deltalake::DeltaTableError::InvalidTableLocation(_)) => Ok(false),
        Err(e) => Err(Error::from(e).context(format!("cannot read {}", shown(url)))),
    }
}

/// Delete everything under `url` (a dropped managed table's data and log).
pub async fn delete_all(url: &Url) -> Result<()> {
    use futures::TryStreamExt;
    if !is_remote(url) {
        if let Ok(path) = url.to_file_path() {
            match std::fs::remove_dir_all(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
                _ => {}
            }
        }
        return Ok(());
    }
    let store = handle_at(url)?.log_store().object_store(None);
    let objects: Vec<object_store::ObjectMeta> = store
        .list(None)
        .try_collect()
        .await
        .map_err(|e| Error::Other(format!("cannot list {}: {e}", shown(url))))?;
    for o in objects {
        store.delete(&o.location).await.map_err(|e| {
            Error::Other(format!(
                "cannot delete {} under {}: {e}",
                o.location,
                shown(url)
            ))
        })?;
    }
    Ok(())
}

/// The object stores tidemark reaches: S3 (`s3a://` is `s3://`), Azure Blob Storage and ADLS
/// Gen2 (`az://container/path`, `abfss://container@account.dfs.core.windows.net/path`), and
/// Google Cloud Storage (`gs://bucket/path`).
pub const STORE_SCHEMES: [&str; 7] = ["s3", "s3a", "az", "azure", "abfs", "abfss", "gs"];

/// Whether `scheme` names an object store tidemark reaches.
pub fn is_store_scheme(scheme: &str) -> bool {
    STORE_SCHEMES.contains(&scheme.to_ascii_lowercase().as_str())
}

/// Whether `name` can be an Azure container's (3 to 63 lower-case letters, digits and dashes):
/// anything else in an ADLS URL's user name is refused without being shown.
fn is_container_name(name: &str) -> bool {
    (3..=63).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// A place the user typed, for messages: parsed and shown without credentials, or only its
/// scheme when it does not parse.
pub fn shown_text(text: &str) -> String {
    match Url::parse(text) {
        Ok(url) => shown(&url),
        Err(_) => match text.split_once("://") {
            Some((scheme, _)) => format!("{scheme}://..."),
            None => text.to_string(),
        },
    }
}

/// Whether the URL's user name is the container (ADLS Gen2's `container@account...`), not a
/// credential.
fn names_container(url: &Url) -> bool {
    matches!(url.scheme(), "abfs" | "abfss")
}

/// Where a store of `url`'s kind takes its endpoint and credentials from, for messages.
pub fn store_settings(url: &Url) -> &'static str {
    match url.scheme() {
        "az" | "azure" | "abfs" | "abfss" => {
            "AZURE_STORAGE_ACCOUNT_NAME with AZURE_STORAGE_ACCOUNT_KEY (or another Azure credential), AZURE_STORAGE_USE_EMULATOR for Azurite"
        }
        "gs" => {
            "GOOGLE_SERVICE_ACCOUNT (a service account's key file), or GOOGLE_APPLICATION_CREDENTIALS"
        }
        _ => {
            "the endpoint AWS_ENDPOINT_URL and the credentials (AWS_ACCESS_KEY_ID, AWS_PROFILE, ...)"
        }
    }
}

/// A LOCATION as a URL: an object store ([`STORE_SCHEMES`]), a `file://` URL or a local path
/// (made absolute).
pub fn parse_location(text: &str) -> Result<Url> {
    let text = text.trim();
    if text.is_empty() {
        return Err(Error::Invalid("LOCATION '' names no place".into()));
    }
    let url = match Url::parse(text) {
        // `C:\...` parses as a scheme of one letter; tidemark runs on Unix, but be plain.
        Ok(url) if url.scheme().len() > 1 => {
            if (!url.username().is_empty() && !names_container(&url))
                || url.password().is_some()
                || url.query().is_some()
                || url.fragment().is_some()
            {
                return Err(Error::Invalid(format!(
                    "LOCATION '{}' carries credentials or parameters: give the place only (s3://bucket/path), and credentials through the environment ({}), never in SQL",
                    shown(&url),
                    store_settings(&url)
                )));
            }
            url
        }
        _ => {
            let path = real_path(&std::path::absolute(text)?);
            return Url::from_directory_path(&path).map_err(|_| {
                Error::Invalid(format!("LOCATION '{text}' is not a usable directory path"))
            });
        }
    };
    match url.scheme() {
        "abfs" | "abfss" if !is_container_name(url.username()) => Err(Error::Invalid(format!(
            "LOCATION {}://...{} names no container (write {}://container@account.dfs.core.windows.net/path; a container's name is 3 to 63 lower-case letters, digits and dashes)",
            url.scheme(),
            url.host_str().map(|h| format!("@{h}")).unwrap_or_default(),
            url.scheme()
        ))),
        scheme if is_store_scheme(scheme) => {
            if url.host_str().is_none_or(str::is_empty) {
                return Err(Error::Invalid(format!(
                    "LOCATION '{}' names no bucket (write {scheme}://bucket/path)",
                    shown(&url)
                )));
            }
            // One spelling per store (`azure://` is `az://`, `abfs://` is `abfss://`).
            let canonical = match scheme {
                "azure" => Some("az"),
                "abfs" => Some("abfss"),
                _ => None,
            };
            match canonical {
                Some(to) => Url::parse(&format!("{to}{}", &url.as_str()[scheme.len()..]))
                    .map_err(|e| Error::Invalid(format!("LOCATION '{}': {e}", shown(&url)))),
                None => Ok(url),
            }
        }
        "file" => {
            // `..`, `.` and symbolic links resolved: the place itself, as the checks compare it.
            let path = url.to_file_path().map_err(|_| {
                Error::Invalid(format!("LOCATION '{text}' is not a usable file:// URL"))
            })?;
            Url::from_directory_path(real_path(&path)).map_err(|_| {
                Error::Invalid(format!("LOCATION '{text}' is not a usable directory path"))
            })
        }
        "adl" | "wasb" | "wasbs" => Err(Error::Invalid(format!(
            "LOCATION {}: {}:// is not served (for Azure write az://container/path or abfss://container@account.dfs.core.windows.net/path)",
            shown(&url),
            url.scheme()
        ))),
        other => Err(Error::Invalid(format!(
            "LOCATION {}: unknown scheme {other}:// (tidemark reads s3://, az://, abfss://, gs://, file:// and local paths)",
            shown(&url)
        ))),
    }
}

/// How long a request to an object store is retried before it fails (object_store's default is
/// three minutes: a mistyped endpoint would hang a shell that long). The environment variable
/// of this name overrides it (`90s`, `5min`).
pub const RETRY_TIMEOUT_ENV: &str = "TIDEMARK_STORE_RETRY_TIMEOUT";

/// A handle on the table at `url` on an object store: the store's own handler, with its
/// credentials and endpoint from the environment (`AWS_ENDPOINT_URL`, `AWS_PROFILE`, ...).
/// Its commits are read once per process ([`super::log_cache`]).
pub fn builder(url: &Url) -> Result<deltalake::DeltaTableBuilder> {
    let (root, _prefix) = root_store(url)?;
    Ok(deltalake::DeltaTableBuilder::from_url(url.clone())?
        .with_storage_backend(root, url.clone())
        .with_storage_options(store_options(url)))
}

/// The options the store at `url` is opened with.
fn store_options(url: &Url) -> std::collections::HashMap<String, String> {
    let timeout = std::env::var(RETRY_TIMEOUT_ENV).unwrap_or_else(|_| "30s".into());
    let mut options = std::collections::HashMap::from([("retry_timeout".to_string(), timeout)]);
    // A named profile with no keys in the environment: its credentials are read through the
    // AWS credential chain even with an endpoint set (deltalake skips the chain for a custom
    // endpoint, and the requests of a local server's or another provider's users went out
    // unsigned).
    let set = |name: &str| std::env::var(name).is_ok_and(|v| !v.is_empty());
    if url.scheme().starts_with("s3") && set("AWS_PROFILE") && !set("AWS_ACCESS_KEY_ID") {
        options.insert("AWS_FORCE_CREDENTIAL_LOAD".to_string(), "true".to_string());
    }
    options
}

/// The store of the bucket `url` is in (its handler's own, commits read once per process),
/// and the path of `url` inside it.
pub fn root_store(
    url: &Url,
) -> Result<(
    std::sync::Arc<dyn object_store::ObjectStore>,
    object_store::path::Path,
)> {
    let config = deltalake::logstore::StorageConfig::parse_options(store_options(url))?;
    let scheme = Url::parse(&format!("{}://", url.scheme()))
        .map_err(|e| Error::Invalid(format!("{}: {e}", shown(url))))?;
    let factory = deltalake::logstore::object_store_factories()
        .get(&scheme)
        .map(|f| f.value().clone())
        .ok_or_else(|| {
            Error::Invalid(format!(
                "{}: no object store for {}://",
                shown(url),
                url.scheme()
            ))
        })?;
    let (root, prefix) = factory.parse_url_opts(url, &config)?;
    let root: std::sync::Arc<dyn object_store::ObjectStore> =
        std::sync::Arc::new(super::log_cache::CachedLog::new(root, store_name(url)));
    Ok((root, prefix))
}

/// `path` with `.` and `..` resolved by name, then symbolic links by the file system as far as
/// it exists (the rest of a place not made yet is kept as written).
pub fn real_path(path: &Path) -> std::path::PathBuf {
    use std::path::Component;
    let mut plain = std::path::PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                plain.pop();
            }
            Component::CurDir => {}
            other => plain.push(other),
        }
    }
    let mut existing = plain.clone();
    let mut rest = vec![];
    while !existing.exists() {
        match (
            existing.file_name().map(|n| n.to_owned()),
            existing.parent(),
        ) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                existing = parent.to_path_buf();
            }
            _ => return plain,
        }
    }
    let mut real = std::fs::canonicalize(&existing).unwrap_or(existing);
    for name in rest.into_iter().rev() {
        real.push(name);
    }
    real
}

/// A new table's place must hold nothing yet (as Databricks refuses a non-empty location):
/// VACUUM and a managed table's DROP would delete what else is there.
pub async fn check_empty(url: &Url) -> Result<()> {
    use futures::StreamExt;
    let found = if let Ok(path) = url.to_file_path() {
        std::fs::read_dir(&path)
            .ok()
            .and_then(|mut d| d.next())
            .and_then(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().to_string())
    } else {
        let store = handle_at(url)?.log_store().object_store(None);
        match store.list(None).next().await {
            Some(Ok(o)) => Some(o.location.to_string()),
            Some(Err(e)) => {
                return Err(Error::Other(format!("cannot list {}: {e}", shown(url))));
            }
            None => None,
        }
    };
    match found {
        Some(name) => Err(Error::AlreadyExists(format!(
            "{} is not empty (it holds {name}, and no Delta table): a table is made only where nothing is, since VACUUM and DROP would delete what else is there; choose an empty place",
            shown(url)
        ))),
        None => Ok(()),
    }
}

/// Whether `url` is on an object store (not the local file system).
pub fn is_remote(url: &Url) -> bool {
    url.scheme() != "file"
}

/// A location for messages: without user name, password or query (credentials).
pub fn shown(url: &Url) -> String {
    let mut url = url.clone();
    if !(names_container(&url) && is_container_name(url.username())) {
        let _ = url.set_username("");
    }
    let _ = url.set_password(None);
    url.set_query(None);
    url.set_fragment(None);
    url.to_string()
}

/// Where a store is, for messages: scheme and bucket, never credentials.
pub fn store_name(url: &Url) -> String {
    match names_container(url) {
        true => format!(
            "{}://{}@{}",
            url.scheme(),
            url.username(),
            url.host_str().unwrap_or("")
        ),
        false => format!("{}://{}", url.scheme(), url.host_str().unwrap_or("")),
    }
}

/// The stores already shown to refuse a second conditional PUT (this process).
static SAFE: Mutex<Option<HashSet<String>>> = Mutex::new(None);

/// Before the first write to an object store: the store must refuse a second conditional PUT
/// of one key, else two writers committing the same version both "succeed" and one commit is
/// lost. A store that does not is refused (naming it and the way out), unless the user has
/// set [`RISK_ENV`]. deltalake's unsafe-rename mode is never used.
pub async fn check_safe_commits(table: &DeltaTable) -> Result<()> {
    let url = table.table_url().clone();
    if !is_remote(&url) {
        return Ok(());
    }
    if std::env::var("AWS_S3_ALLOW_UNSAFE_RENAME")
        .is_ok_and(|v| matches!(v.to_ascii_lowercase().as_str(), "1" | "true" | "yes" | "on"))
    {
        return Err(Error::Invalid(format!(
            "AWS_S3_ALLOW_UNSAFE_RENAME is set: tidemark never commits to {} by unsafe rename (two writers could overwrite each other's commit); unset it",
            store_name(&url)
        )));
    }
    let key = store_name(&url);
    if SAFE
        .lock()
        .map(|s| s.as_ref().is_some_and(|s| s.contains(&key)))
        .unwrap_or(false)
    {
        return Ok(());
    }
    let store = table.log_store().object_store(None);
    let probe = object_store::path::Path::from(format!(
        "{}/.tidemark-probe-{}",
        crate::catalog::log::DIR,
        uuid::Uuid::new_v4().simple()
    ));
    let create = || PutOptions {
        mode: PutMode::Create,
        ..Default::default()
    };
    let unreachable = |e: object_store::Error| {
        Error::Invalid(format!(
            "cannot write to {key} ({}): {e}; nothing was changed (check the bucket, {})",
            shown(&url),
            store_settings(&url)
        ))
    };
    store
        .put_opts(&probe, PutPayload::from_static(b"1"), create())
        .await
        .map_err(unreachable)?;
    let second = store
        .put_opts(&probe, PutPayload::from_static(b"2"), create())
        .await;
    let _ = store.delete(&probe).await;
    match second {
        Err(object_store::Error::AlreadyExists { .. }) => {}
        Err(object_store::Error::Precondition { .. }) => {}
        Err(e) => {
            return Err(Error::Invalid(format!(
                "{key} ({}) did not answer a conditional PUT (If-None-Match) as Delta commits need: {e}. Nothing was written. Use a store that supports conditional writes, or set {RISK_ENV}=1 to write anyway with the risk of lost commits",
                shown(&url)
            )));
        }
        Ok(_) if risk_taken() => {
            eprintln!(
                "warning: {key} does not refuse a second conditional PUT; writing anyway because {RISK_ENV} is set: two writers committing at once can lose one's commit"
            );
        }
        Ok(_) => {
            return Err(Error::Invalid(format!(
                "{key} does not refuse a second conditional PUT (If-None-Match) of one key, which Delta commits rely on: two writers could both commit one version and one's rows would be lost. Nothing was written. Use a store that supports conditional writes, or set {RISK_ENV}=1 to write anyway with that risk"
            )));
        }
    }
    if let Ok(mut s) = SAFE.lock() {
        s.get_or_insert_with(HashSet::new).insert(key);
    }
    Ok(())
}

fn risk_taken() -> bool {
    std::env::var(RISK_ENV)
        .is_ok_and(|v| matches!(v.to_ascii_lowercase().as_str(), "1" | "true" | "yes" | "on"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_parse_or_are_refused_by_name() {
        assert_eq!(
            parse_location("s3://bucket/a/b").unwrap().as_str(),
            "s3://bucket/a/b"
        );
        assert!(
            parse_location("/tmp/x")
                .unwrap()
                .as_str()
                .starts_with("file:///tmp/x")
        );
        assert_eq!(parse_location("gs://b/x").unwrap().as_str(), "gs://b/x");
        assert!(
            parse_location("hdfs://b/x")
                .unwrap_err()
                .to_string()
                .contains("hdfs://")
        );
        // Azure: the container of an ADLS Gen2 URL is its user name, kept in messages and
        // in the store's name; a password there is a credential.
        let adls = parse_location("abfss://lake@acct.dfs.core.windows.net/t").unwrap();
        assert_eq!(shown(&adls), "abfss://lake@acct.dfs.core.windows.net/t");
        assert_eq!(store_name(&adls), "abfss://lake@acct.dfs.core.windows.net");
        let other = parse_location("abfss://logs@acct.dfs.core.windows.net/t").unwrap();
        assert!(!overlaps(&adls, &other));
        // One container, however it is spelled, is one place.
        for alias in [
            "az://lake/t/x",
            "azure://lake/t",
            "abfs://lake@acct.dfs.core.windows.net/t",
        ] {
            assert!(overlaps(&adls, &parse_location(alias).unwrap()), "{alias}");
        }
        assert!(!overlaps(&adls, &parse_location("az://logs/t").unwrap()));
        assert_eq!(
            parse_location("azure://lake/t").unwrap().as_str(),
            "az://lake/t"
        );
        assert_eq!(
            parse_location("abfs://lake@acct.dfs.core.windows.net/t")
                .unwrap()
                .as_str(),
            "abfss://lake@acct.dfs.core.windows.net/t"
        );
        // A user name that cannot be a container is refused and never shown.
        let err = parse_location("abfss://Secret+Key@acct.dfs.core.windows.net/t").unwrap_err();
        assert!(!err.to_string().contains("Secret"), "{err}");
        assert_eq!(
            shown_text("https://a.blob.core.windows.net/c/x?sig=SECRET"),
            "https://a.blob.core.windows.net/c/x"
        );
        assert!(parse_location("abfss://c:secret@acct.dfs.core.windows.net/t").is_err());
        assert!(parse_location("abfss://acct.dfs.core.windows.net/t").is_err());
        assert_eq!(parse_location("az://c/t").unwrap().as_str(), "az://c/t");
        assert!(parse_location("wasbs://c@a.blob.core.windows.net/t").is_err());
        assert!(
            parse_location("s3:///x")
                .unwrap_err()
                .to_string()
                .contains("bucket")
        );
        assert!(
            parse_location("ftp://h/x")
                .unwrap_err()
                .to_string()
                .contains("ftp")
        );
    }

    #[test]
    fn places_overlap_by_whole_path_segments() {
        let u = |s: &str| Url::parse(s).unwrap();
        assert!(overlaps(&u("s3://b/a"), &u("s3://b/a/")));
        assert!(overlaps(&u("s3://b/a/x"), &u("s3://b/a")));
        assert!(overlaps(&u("s3a://b/a"), &u("s3://b/a/x")));
        assert!(!overlaps(&u("s3://b/ab"), &u("s3://b/a")));
        assert!(!overlaps(&u("s3://c/a"), &u("s3://b/a")));
        assert!(parse_location("s3://k:s@b/x").is_err());
        assert!(parse_location("s3://b/x?sig=1").is_err());
    }

    #[test]
    fn a_link_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let url = Url::parse("s3://bucket/t").unwrap();
        let at = |name: &str| Place::Local(dir.path().join(name));
        write_link(&at("t"), &url, false).unwrap();
        assert_eq!(link(&at("t")), Some(url.clone()));
        assert!(!read_link(&at("t")).unwrap().managed);
        write_link(&at("m"), &url, true).unwrap();
        assert_eq!(link(&at("m")), Some(url.clone()));
        assert!(read_link(&at("m")).unwrap().managed);
        assert_eq!(link(&at("")), None);
        assert_eq!(child(&url, "x").as_str(), "s3://bucket/t/x");
        assert_eq!(
            child(&Url::parse("s3://bucket/s/").unwrap(), "x").as_str(),
            "s3://bucket/s/x"
        );
    }
}
