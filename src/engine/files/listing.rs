//! Which files a path names: a file, a directory with its nested directories, or a glob as
//! Databricks writes them; hidden files (`_SUCCESS`, `.crc`) left out, each file by its
//! canonical path.

use std::path::{Path, PathBuf};

use regex::Regex;

use super::ReadOptions;
use super::options::Walk;
use crate::error::{Error, Result};

/// One file to read: on the local file system or an object store.
#[derive(Debug, Clone)]
pub(crate) struct SourceFile {
    /// `file:///absolute/path` or `s3://bucket/key`: the file's identity (what COPY INTO
    /// records as loaded).
    pub url: url::Url,
    pub size: u64,
    /// Last modification, milliseconds since the epoch.
    pub modified_ms: i64,
}

impl SourceFile {
    /// The file's URL.
    pub(crate) fn url(&self) -> Result<url::Url> {
        Ok(self.url.clone())
    }

    /// The file's local path (None: on an object store).
    pub(crate) fn local(&self) -> Option<PathBuf> {
        self.url
            .to_file_path()
            .ok()
            .filter(|_| self.url.scheme() == "file")
    }

    /// The file for messages: its local path, or its URL.
    pub(crate) fn shown(&self) -> String {
        match self.local() {
            Some(p) => p.display().to_string(),
            None => crate::catalog::external::shown(&self.url),
        }
    }

    /// The file's name (its last path part).
    pub(crate) fn name(&self) -> String {
        self.url
            .path_segments()
            .and_then(|mut s| s.next_back().map(str::to_string))
            .map(|n| {
                percent_encoding::percent_decode_str(&n)
                    .decode_utf8_lossy()
                    .into_owned()
            })
            .unwrap_or_default()
    }

    /// The file's text as given (for its extension and compression).
    pub(crate) fn text(&self) -> String {
        match self.local() {
            Some(p) => p.to_string_lossy().into_owned(),
            None => self.url.path().to_string(),
        }
    }
}

/// The object-store URL a user's path names (`s3://bucket/key`, `az://container/key`,
/// `gs://bucket/key`), if it is one tidemark reads: the key as written (a `?`, `#` or `%` in
/// it is part of the key, and globs keep theirs), `s3a://` read as `s3://` and `azure://` as
/// `az://` (one file, one URL: what COPY INTO records).
pub(crate) fn store_url(who: &str, path: &str) -> Result<Option<url::Url>> {
    let Some((scheme, rest)) = path.split_once("://") else {
        return Ok(None);
    };
    let scheme = match scheme.to_ascii_lowercase().as_str() {
        "s3" | "s3a" => "s3",
        "az" | "azure" => "az",
        "gs" => "gs",
        // Files are found by bucket (DataFusion keeps one store per host), and an ADLS URL's
        // container is not part of its host.
        "abfs" | "abfss" => {
            return Err(Error::Invalid(format!(
                "{who}: files on Azure are read as az://container/key (the account from AZURE_STORAGE_ACCOUNT_NAME), not {scheme}://"
            )));
        }
        _ => return Ok(None),
    };
    let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
    if scheme != "s3" && key.contains('?') && (key.contains("sig=") || key.contains("sv=")) {
        // Never echoed: a shared access signature.
        return Err(Error::Invalid(format!(
            "{who}: an {scheme}:// path holds what looks like a signature (?sig=...): give the place only, and credentials through the environment"
        )));
    }
    let plain_bucket = !bucket.is_empty()
        && bucket
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || ".-_".contains(c));
    if !plain_bucket {
        // Never echoed: it may hold credentials.
        return Err(Error::Invalid(format!(
            "{who}: an {scheme}:// path is {scheme}://bucket/key with a plain bucket name, and no credentials or parameters in it (credentials come from the environment)"
        )));
    }
    let mut url = url::Url::parse(&format!("{scheme}://{bucket}/"))
        .map_err(|e| Error::Invalid(format!("{who}: bucket {bucket}: {e}")))?;
    if let Ok(mut s) = url.path_segments_mut() {
        s.clear().extend(key.split('/').filter(|p| !p.is_empty()));
    }
    Ok(Some(url))
}

/// The raw key parts of an object-store URL made by [`store_url`].
fn key_parts(url: &url::Url) -> Vec<String> {
    url.path_segments()
        .map(|s| {
            s.filter(|p| !p.is_empty())
                .map(|p| {
                    percent_encoding::percent_decode_str(p)
                        .decode_utf8_lossy()
                        .into_owned()
                })
                .collect()
        })
        .unwrap_or_default()
}

/// `url` with the key parts `rel` (`a/b.csv`) after its own.
pub(crate) fn store_child(url: &url::Url, rel: &str) -> url::Url {
    let mut u = url.clone();
    if let Ok(mut s) = u.path_segments_mut() {
        s.pop_if_empty()
            .extend(rel.split('/').filter(|p| !p.is_empty()));
    }
    u
}

/// The files of an object-store path (see [`list`]).
fn list_store(who: &str, url: &url::Url, how: Walk) -> Result<Listing> {
    let parts = key_parts(url);
    let split = parts.iter().position(|p| is_glob(p)).unwrap_or(parts.len());
    let glob = (split < parts.len())
        .then(|| Glob::new(&parts[split..].join("/")))
        .transpose()?;
    let mut base = url.clone();
    if let Ok(mut s) = base.path_segments_mut() {
        s.clear();
        s.extend(&parts[..split]);
    }
    let place = crate::catalog::Place::on_store(&base)
        .map_err(|e| e.context(format!("{who}: {}", crate::catalog::external::shown(url))))?;
    let objects = place.objects()?;
    let at = |rel: &str| store_child(&base, rel);
    // The path names one object: that file.
    if glob.is_none()
        && let Some((_, size, modified)) = objects.iter().find(|(rel, _, _)| rel.is_empty())
    {
        return Ok(Listing {
            files: vec![SourceFile {
                url: base.clone(),
                size: *size,
                modified_ms: *modified,
            }],
        });
    }
    let mut files = vec![];
    for (rel, size, modified) in &objects {
        let rel_parts: Vec<&str> = rel.split('/').collect();
        if rel.is_empty() || rel_parts.iter().any(|p| hidden(p)) || rel.ends_with("._COPYING_") {
            continue;
        }
        if let Some(g) = &glob
            && !(1..=rel_parts.len()).any(|n| g.matches(&rel_parts[..n].join("/")))
        {
            continue;
        }
        if !how.ignore_partitions
            && let Some(dir) = rel_parts[..rel_parts.len() - 1]
                .iter()
                .find(|p| p.contains('='))
        {
            return Err(Error::Invalid(format!(
                "{who}: {} is in a partition directory ({dir}), and tidemark reads no partition columns: read its files without the column (recursiveFileLookup = true, or partitionColumns = ''), or name the files with a glob",
                crate::catalog::external::shown(&at(rel))
            )));
        }
        files.push(SourceFile {
            url: at(rel),
            size: *size,
            modified_ms: *modified,
        });
    }
    // Nothing under the place (a glob's base included): no such path.
    if objects.is_empty() {
        return Err(Error::class(
            "PATH_NOT_FOUND",
            format!(
                "{who}: path does not exist: {}",
                crate::catalog::external::shown(url)
            ),
        ));
    }
    Ok(Listing { files })
}

/// The files named `names` (relative, as COPY INTO's FILES give them) inside the object-store
/// directory `base`: each with the URL a listing gives it, or None where there is none.
pub(crate) fn store_files(
    who: &str,
    base: &url::Url,
    names: &[String],
) -> Result<Vec<(url::Url, Option<SourceFile>)>> {
    let place = crate::catalog::Place::on_store(base)
        .map_err(|e| e.context(format!("{who}: {}", crate::catalog::external::shown(base))))?;
    let mut found = vec![];
    for name in names {
        let url = store_child(base, name);
        let file = place
            .join(name.trim_matches('/'))
            .file_meta()?
            .map(|(size, modified)| SourceFile {
                url: url.clone(),
                size,
                modified_ms: modified,
            });
        found.push((url, file));
    }
    Ok(found)
}

/// A glob as Databricks writes them: `*` and `?` within one path part, `[abc]`, `[a-z]`,
/// `[^a]`, `{ab,cd}` (nesting), `\` escaping the next character.
#[derive(Debug, Clone)]
pub(crate) struct Glob(Regex);

impl Glob {
    pub(crate) fn new(glob: &str) -> Result<Glob> {
        let bad = |why: &str| Error::Invalid(format!("glob pattern '{glob}' {why}"));
        let mut re = String::from("^");
        let mut chars = glob.chars().peekable();
        let mut braces = 0usize;
        while let Some(c) = chars.next() {
            match c {
                '*' => re.push_str("[^/]*"),
                '?' => re.push_str("[^/]"),
                '[' => {
                    re.push('[');
                    if matches!(chars.peek(), Some('^') | Some('!')) {
                        chars.next();
                        re.push('^');
                    }
                    let mut closed = false;
                    for c in chars.by_ref() {
                        if c == ']' {
                            closed = true;
                            break;
                        }
                        if c == '\\' || c == '[' || c == '&' || c == '~' {
                            re.push('\\');
                        }
                        re.push(c);
                    }
                    if !closed {
                        return Err(bad("has a [ without its ]"));
                    }
                    re.push(']');
                }
                '{' => {
                    braces += 1;
                    re.push_str("(?:");
                }
                '}' if braces > 0 => {
                    braces -= 1;
                    re.push(')');
                }
                ',' if braces > 0 => re.push('|'),
                '\\' => match chars.next() {
                    Some(n) => re.push_str(&regex::escape(&n.to_string())),
                    None => return Err(bad("ends in a lone \\")),
                },
                c => re.push_str(&regex::escape(&c.to_string())),
            }
        }
        if braces > 0 {
            return Err(bad("has a { without its }"));
        }
        re.push('$');
        Regex::new(&re)
            .map(Glob)
            .map_err(|e| bad(&format!("is not a valid pattern: {e}")))
    }

    pub(crate) fn matches(&self, text: &str) -> bool {
        self.0.is_match(text)
    }
}

/// The files of a path.
#[derive(Debug)]
pub(crate) struct Listing {
    /// In path order.
    pub files: Vec<SourceFile>,
}

/// Whether a path part is hidden from listings (Spark's rule: `_SUCCESS`, `.crc` files,
/// `_delta_log`).
fn hidden(part: &str) -> bool {
    part.starts_with('_') || part.starts_with('.')
}

/// The local path a user's path or `file://` URL names; object-store URLs are refused.
pub(crate) fn local_path(who: &str, path: &str) -> Result<PathBuf> {
    if let Some((scheme, _)) = path.split_once("://") {
        if scheme.eq_ignore_ascii_case("file") {
            let url = url::Url::parse(path)
                .map_err(|e| Error::Invalid(format!("{who}: {path} is not a valid URL: {e}")))?;
            if url.query().is_some() || url.fragment().is_some() {
                return Err(Error::Invalid(format!(
                    "{who}: {path} has a ? or # in it: write ? as %3F and # as %23 in a file:// URL, or give the path without file://"
                )));
            }
            return url
                .to_file_path()
                .map_err(|_| Error::Invalid(format!("{who}: {path} names no local file")));
        }
        return Err(Error::Invalid(format!(
            "{who}: {} is on object storage ({scheme}://), which tidemark does not read (it reads s3://, az://, gs:// and local paths)",
            crate::catalog::external::shown_text(path)
        )));
    }
    let p = PathBuf::from(path);
    Ok(if p.is_absolute() {
        p
    } else {
        std::env::current_dir()?.join(p)
    })
}

fn is_glob(part: &str) -> bool {
    part.contains(['*', '?', '[', '{'])
}

/// The files `path` names: a file, a directory's files (its nested directories too), or
/// those a glob matches (a matched directory gives all its files).
pub(crate) fn list(who: &str, path: &str, how: Walk) -> Result<Listing> {
    if let Some(url) = store_url(who, path)? {
        return list_store(who, &url, how);
    }
    let full = local_path(who, path)?;
    let parts: Vec<String> = full
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let split = parts.iter().position(|p| is_glob(p));
    let Some(split) = split else {
        let meta = std::fs::metadata(&full).map_err(|e| not_found(who, path, e))?;
        // One name per file (no `..`, `.` or links in it): a file's URL is its identity.
        let full = std::fs::canonicalize(&full).map_err(|e| not_found(who, path, e))?;
        if meta.is_file() {
            return Ok(Listing {
                files: vec![source_file(full, &meta)],
            });
        }
        let mut files = vec![];
        walk(who, &full, how, &mut |f| {
            files.push(f);
            Ok(())
        })?;
        return Ok(Listing { files });
    };
    let base: PathBuf = parts[..split].iter().collect();
    let glob = Glob::new(&parts[split..].join("/"))?;
    let base =
        std::fs::canonicalize(&base).map_err(|e| not_found(who, &base.to_string_lossy(), e))?;
    let mut files = vec![];
    walk(who, &base, how, &mut |f| {
        let path = f.url.to_file_path().unwrap_or_default();
        let rel = path.strip_prefix(&base).unwrap_or(&path);
        let rel: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        // The file, or a directory it lies in, matches.
        if (1..=rel.len()).any(|n| glob.matches(&rel[..n].join("/"))) {
            files.push(f);
        }
        Ok(())
    })?;
    files.sort_by(|a, b| a.url.cmp(&b.url));
    Ok(Listing { files })
}

fn not_found(who: &str, path: &str, e: std::io::Error) -> Error {
    if e.kind() == std::io::ErrorKind::NotFound {
        Error::class(
            "PATH_NOT_FOUND",
            format!("{who}: path does not exist: {path}"),
        )
    } else {
        Error::Io(std::io::Error::new(e.kind(), format!("{who}: {path}: {e}")))
    }
}

/// The file at `path` (named, not matched: no glob), if it is one.
pub(crate) fn file(who: &str, path: &Path) -> Result<Option<SourceFile>> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(not_found(who, &path.to_string_lossy(), e)),
    };
    if !meta.is_file() {
        return Err(Error::Invalid(format!(
            "{who}: {} is not a file",
            path.display()
        )));
    }
    let path = std::fs::canonicalize(path)?;
    Ok(Some(source_file(path, &meta)))
}

fn source_file(path: PathBuf, meta: &std::fs::Metadata) -> SourceFile {
    let url = url::Url::from_file_path(&path).expect("a canonical path is absolute");
    let modified_ms = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0);
    SourceFile {
        url,
        size: meta.len(),
        modified_ms,
    }
}

/// Every visible file under `dir` and its nested directories, in name order, each by its
/// canonical path (a file reached through two links is one file; a link back up is not
/// followed twice). A `key=value` directory is refused unless asked for without its values:
/// Databricks would read its value as a column, which tidemark does not, and dropping it
/// silently would lose it.
fn walk(
    who: &str,
    dir: &Path,
    how: Walk,
    each: &mut dyn FnMut(SourceFile) -> Result<()>,
) -> Result<()> {
    let mut seen = std::collections::HashSet::new();
    walk_from(who, dir, how, &mut seen, each)
}

fn walk_from(
    who: &str,
    dir: &Path,
    how: Walk,
    seen: &mut std::collections::HashSet<PathBuf>,
    each: &mut dyn FnMut(SourceFile) -> Result<()>,
) -> Result<()> {
    let io = |path: &Path, e: std::io::Error| not_found(who, &path.to_string_lossy(), e);
    if !seen.insert(std::fs::canonicalize(dir).map_err(|e| io(dir, e))?) {
        return Ok(());
    }
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| io(dir, e))?
        .collect::<std::io::Result<_>>()
        .map_err(|e| io(dir, e))?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name().to_string_lossy().into_owned();
        // Spark's rule: `_SUCCESS`, `.crc` files, `_delta_log`, and copies still running.
        if hidden(&name) || name.ends_with("._COPYING_") {
            continue;
        }
        let path = entry.path();
        let meta = std::fs::metadata(&path).map_err(|e| io(&path, e))?;
        if meta.is_dir() {
            if name.contains('=') && !how.ignore_partitions {
                return Err(Error::Invalid(format!(
                    "{who}: {} is a partition directory ({name}), and tidemark reads no partition columns: read its files without the column (recursiveFileLookup = true, or partitionColumns = ''), or name the files with a glob",
                    path.display()
                )));
            }
            walk_from(who, &path, how, seen, each)?;
        } else {
            let canonical = std::fs::canonicalize(&path).map_err(|e| io(&path, e))?;
            if seen.insert(canonical.clone()) {
                each(source_file(canonical, &meta))?;
            }
        }
    }
    Ok(())
}

/// Keep the files whose name matches the options' file-name filter.
pub(crate) fn filter_names(files: Vec<SourceFile>, options: &ReadOptions) -> Vec<SourceFile> {
    match &options.file_name {
        None => files,
        Some(g) => files.into_iter().filter(|f| g.matches(&f.name())).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_as_databricks_writes_them() {
        let g = Glob::new("file_[a-c].{csv,json}").unwrap();
        assert!(g.matches("file_a.csv") && g.matches("file_c.json"));
        assert!(!g.matches("file_d.csv") && !g.matches("file_a.txt"));
        let g = Glob::new("*/part-?.csv").unwrap();
        assert!(g.matches("2024/part-1.csv"));
        assert!(!g.matches("2024/x/part-1.csv"), "* stays within one part");
        let g = Glob::new("[^a]*").unwrap();
        assert!(g.matches("b.csv") && !g.matches("a.csv"));
        let g = Glob::new("{ab,c{de,fh}}").unwrap();
        assert!(g.matches("ab") && g.matches("cde") && g.matches("cfh") && !g.matches("cd"));
        assert!(Glob::new("a[bc").is_err());
        assert!(Glob::new("{a,b").is_err());
        assert!(Glob::new("a.b").unwrap().matches("a.b"));
        assert!(!Glob::new("a.b").unwrap().matches("axb"), ". is literal");
    }
}
