//! Files read as a table, for `read_files(...)` and `COPY INTO`: a path (a file, a directory,
//! or a glob), Spark's reader options by name, and one schema across the files. Every option
//! is applied or refused by name; a malformed record stops the read (Spark's FAILFAST), never
//! becomes a silent NULL. Local paths only: object-store URLs are refused by name.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use datafusion::catalog::TableProvider;
use datafusion::datasource::file_format::FileFormat;
use datafusion::datasource::file_format::csv::CsvFormat;
use datafusion::datasource::file_format::file_compression_type::FileCompressionType;
use datafusion::datasource::file_format::json::JsonFormat;
use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::listing::{
    ListingOptions, ListingTable, ListingTableConfig, ListingTableUrl,
};
use datafusion::execution::object_store::ObjectStoreUrl;
use regex::Regex;

use super::Session;
use super::types::type_name;
use crate::error::{Error, Result};

/// A file format tidemark reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    Csv,
    Json,
    Parquet,
}

impl Format {
    /// The format a name (`csv`, `JSON`, ...) stands for; Spark's other formats by name.
    pub(crate) fn parse(name: &str) -> Result<Format> {
        match name.to_ascii_lowercase().as_str() {
            "csv" => Ok(Format::Csv),
            "json" => Ok(Format::Json),
            "parquet" => Ok(Format::Parquet),
            other @ ("avro" | "orc" | "text" | "binaryfile" | "xml" | "delta") => {
                Err(Error::Invalid(format!(
                    "file format {} is not supported: tidemark reads CSV, JSON and PARQUET files{}",
                    other.to_uppercase(),
                    if other == "delta" {
                        " (a Delta table is read by its name, or copied with COPY INCREMENTAL)"
                    } else {
                        ""
                    }
                )))
            }
            other => Err(Error::Invalid(format!(
                "unknown file format '{other}': CSV, JSON or PARQUET"
            ))),
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Format::Csv => "CSV",
            Format::Json => "JSON",
            Format::Parquet => "PARQUET",
        }
    }

    /// The format a file's extension names, if it names one.
    pub(crate) fn of_extension(path: &str) -> Option<Format> {
        let (stem, _) = compression_of(path);
        let ext = stem.rsplit_once('.')?.1.to_ascii_lowercase();
        match ext.as_str() {
            "csv" | "tsv" => Some(Format::Csv),
            "json" | "jsonl" | "ndjson" => Some(Format::Json),
            "parquet" => Some(Format::Parquet),
            _ => None,
        }
    }
}

/// One file to read.
#[derive(Debug, Clone)]
pub(crate) struct SourceFile {
    /// Absolute.
    pub path: PathBuf,
    pub size: u64,
    /// Last modification, milliseconds since the epoch.
    pub modified_ms: i64,
}

impl SourceFile {
    /// The file's `file://` URL: its identity (what COPY INTO records as loaded).
    pub(crate) fn url(&self) -> Result<url::Url> {
        url::Url::from_file_path(&self.path)
            .map_err(|_| Error::Invalid(format!("{} is not an absolute path", self.path.display())))
    }
}

/// Who reads, for messages and defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reader {
    ReadFiles,
    CopyInto,
}

impl Reader {
    fn name(self) -> &'static str {
        match self {
            Reader::ReadFiles => "read_files",
            Reader::CopyInto => "COPY INTO",
        }
    }
}

/// How files are read: Spark's reader options, with Spark's defaults.
#[derive(Debug, Clone)]
pub(crate) struct ReadOptions {
    pub format: Format,
    /// CSV: the first line of each file names the columns (else `_c0`, `_c1`, ...).
    pub header: bool,
    delimiter: u8,
    quote: u8,
    escape: Option<u8>,
    comment: Option<u8>,
    /// `multiLine` as given (CSV files are always read with quoted values spanning lines;
    /// JSON and Parquet refuse it).
    multi_line: bool,
    /// CSV: infer column types (else every column is a STRING).
    pub infer_types: bool,
    /// The columns as given (`schema => 'a INT, b STRING'`): no inference.
    pub schema: Option<SchemaRef>,
    /// `key=value` directories are read as plain directories (Spark's recursiveFileLookup:
    /// no partition inference); nested directories are always read.
    recursive_lookup: bool,
    /// Only files whose name matches (`pathGlobFilter`, `fileNamePattern`).
    file_name: Option<Glob>,
    /// Files named in FILES that do not exist are skipped (COPY INTO's default).
    pub ignore_missing: bool,
    /// `key=value` directories are read without their partition column
    /// (`partitionColumns = ''`); else they are refused.
    pub ignore_partitions: bool,
}

/// How a directory is listed (with its nested directories, as Spark lists them).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Walk {
    /// `key=value` directories are read (their value is not a column); else refused.
    pub ignore_partitions: bool,
}

impl ReadOptions {
    /// Options from `key = value` pairs (keys in any case). `format` is the reader's own
    /// (COPY INTO's FILEFORMAT) or taken from the pairs, else from `path`'s extension.
    pub(crate) fn parse(
        reader: Reader,
        format: Option<Format>,
        pairs: &[(String, String)],
        path: &str,
    ) -> Result<ReadOptions> {
        let who = reader.name();
        let mut format = format;
        let mut o = ReadOptions {
            format: Format::Csv,
            header: false,
            delimiter: b',',
            quote: b'"',
            escape: Some(b'\\'),
            comment: None,
            multi_line: false,
            infer_types: reader == Reader::ReadFiles,
            schema: None,
            recursive_lookup: false,
            file_name: None,
            ignore_missing: reader == Reader::CopyInto,
            ignore_partitions: false,
        };
        // Each option by its one name, with the name the user gave it.
        let mut seen: std::collections::HashMap<String, &str> = std::collections::HashMap::new();
        for (key, value) in pairs {
            let k = key.to_ascii_lowercase();
            // One option under two names (sep and delimiter) is given twice too.
            let canonical = match k.as_str() {
                "headers" => "header",
                "delimiter" => "sep",
                "inferschema" => "infercolumntypes",
                "filenamepattern" => "pathglobfilter",
                "charset" => "encoding",
                other => other,
            };
            if seen.insert(canonical.to_string(), key).is_some() {
                return Err(Error::Invalid(format!(
                    "{who}: option {key} is given twice"
                )));
            }
            let flag = || parse_bool(who, key, value);
            let one_char = || parse_char(who, key, value);
            match k.as_str() {
                "format" if reader == Reader::ReadFiles => format = Some(Format::parse(value)?),
                "header" | "headers" => o.header = flag()?,
                "sep" | "delimiter" => {
                    o.delimiter = one_char()?.ok_or_else(|| {
                        Error::Invalid(format!("{who}: option {key} cannot be empty"))
                    })?
                }
                "quote" => o.quote = one_char()?.ok_or_else(|| {
                    Error::Invalid(format!(
                        "{who}: option {key} cannot be empty (tidemark always reads quoted values)"
                    ))
                })?,
                "escape" => o.escape = one_char()?,
                "comment" => o.comment = one_char()?,
                "multiline" => o.multi_line = flag()?,
                "inferschema" | "infercolumntypes" => o.infer_types = flag()?,
                "schema" => o.schema = Some(parse_schema(who, value)?),
                "recursivefilelookup" => o.recursive_lookup = flag()?,
                "pathglobfilter" | "filenamepattern" => o.file_name = Some(Glob::new(value)?),
                "ignoremissingfiles" => o.ignore_missing = flag()?,
                // tidemark merges the files' columns by name in any case.
                "mergeschema" => {
                    flag()?;
                }
                "nullvalue" if value.is_empty() => {}
                "encoding" | "charset"
                    if value.eq_ignore_ascii_case("utf-8")
                        || value.eq_ignore_ascii_case("utf8") => {}
                "mode" if value.eq_ignore_ascii_case("failfast") => {}
                "ignorecorruptfiles" if !flag()? => {}
                "partitioncolumns" if value.is_empty() => o.ignore_partitions = true,
                "mode" => {
                    return Err(Error::Invalid(format!(
                        "{who}: mode {value} is not supported: tidemark reads FAILFAST (a malformed record stops the read and names its value; nothing is written)"
                    )));
                }
                "nullvalue" | "encoding" | "charset" | "ignorecorruptfiles"
                | "partitioncolumns" => {
                    return Err(Error::Invalid(format!(
                        "{who}: option {key} = '{value}' is not supported (tidemark reads NULL as an empty field, UTF-8 text, stops on a corrupt file and reads no partition columns)"
                    )));
                }
                "dateformat"
                | "timestampformat"
                | "locale"
                | "timezone"
                | "rescueddatacolumn"
                | "schemahints"
                | "modifiedafter"
                | "modifiedbefore"
                | "linesep"
                | "ignoreleadingwhitespace"
                | "ignoretrailingwhitespace"
                | "emptyvalue"
                | "nanvalue"
                | "positiveinf"
                | "negativeinf"
                | "skiprows"
                | "badrecordspath"
                | "samplingratio"
                | "primitivesasstring"
                | "prefersdecimal"
                | "allowcomments"
                | "allowsinglequotes"
                | "datetimerebasemode"
                | "int96rebasemode"
                | "usestrictglobber"
                | "schemaevolutionmode"
                | "enforceschema"
                | "preferdate"
                | "maxcolumns"
                | "infertimestamp"
                | "columnnameofcorruptrecord"
                | "unescapedquotehandling" => {
                    return Err(Error::Invalid(format!(
                        "{who}: option {key} is not supported yet (the options tidemark reads: {})",
                        KNOWN.join(", ")
                    )));
                }
                _ => {
                    return Err(Error::Invalid(format!(
                        "{who}: unknown option {key} (the options tidemark reads: {})",
                        KNOWN.join(", ")
                    )));
                }
            }
        }
        o.format = match format {
            Some(f) => f,
            None => Format::of_extension(path.trim_end_matches('/')).ok_or_else(|| {
                Error::Invalid(format!(
                    "{who}: give the files' format (format => 'csv' | 'json' | 'parquet'): neither {path} nor all its files end in .csv, .json or .parquet"
                ))
            })?,
        };
        if o.format != Format::Csv {
            let csv_only = [
                "header",
                "sep",
                "quote",
                "escape",
                "comment",
                "infercolumntypes",
            ];
            if let Some((_, k)) = seen.iter().find(|(k, _)| csv_only.contains(&k.as_str())) {
                return Err(Error::Invalid(format!(
                    "{who}: option {k} applies to CSV files (JSON and Parquet values keep their own types), and these are {}",
                    o.format.name()
                )));
            }
            if o.multi_line {
                return Err(Error::Invalid(format!(
                    "{who}: multiLine {} is not supported: tidemark reads JSON Lines (one object per line) and Parquet files",
                    o.format.name()
                )));
            }
        }
        Ok(o)
    }

    /// How to list a directory.
    pub(crate) fn walk(&self) -> Walk {
        Walk {
            ignore_partitions: self.ignore_partitions || self.recursive_lookup,
        }
    }

    /// The engine's reader for these options, for files compressed as `compression`.
    fn file_format(
        &self,
        session: &Session,
        infer: bool,
        compression: FileCompressionType,
    ) -> Arc<dyn FileFormat> {
        match self.format {
            Format::Csv => Arc::new(
                CsvFormat::default()
                    .with_file_compression_type(compression)
                    .with_has_header(self.header)
                    .with_delimiter(self.delimiter)
                    .with_quote(self.quote)
                    .with_escape(self.escape)
                    .with_comment(self.comment)
                    // Quoted values may hold line breaks, multiLine or not: a file is never
                    // split at a line break, which could fall inside a quoted value.
                    .with_newlines_in_values(true)
                    // Every record is looked at: a type seen only late in a file is still
                    // found (0: no inference, every column a string).
                    .with_schema_infer_max_rec(if infer { usize::MAX } else { 0 }),
            ),
            Format::Json => Arc::new(
                JsonFormat::default()
                    .with_file_compression_type(compression)
                    .with_schema_infer_max_rec(usize::MAX),
            ),
            Format::Parquet => {
                // Spark's INT96 timestamps are instants: TIMESTAMP, in microseconds.
                let mut parquet = session.ctx.state().table_options().parquet.clone();
                parquet.global.coerce_int96 = Some("us".into());
                parquet.global.coerce_int96_tz = Some("UTC".into());
                Arc::new(ParquetFormat::default().with_options(parquet))
            }
        }
    }
}

/// The option names tidemark reads, for messages.
const KNOWN: [&str; 16] = [
    "format",
    "header",
    "sep",
    "quote",
    "escape",
    "comment",
    "multiLine",
    "inferColumnTypes",
    "inferSchema",
    "schema",
    "recursiveFileLookup",
    "pathGlobFilter",
    "fileNamePattern",
    "ignoreMissingFiles",
    "mergeSchema",
    "mode = 'FAILFAST'",
];

fn parse_bool(who: &str, key: &str, value: &str) -> Result<bool> {
    match value.to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(Error::Type(format!(
            "{who}: option {key} is true or false, found '{value}'"
        ))),
    }
}

/// One character, written as itself or escaped (`\t`, `\u0000`); None for an empty value or
/// `\u0000` (Spark's "none").
fn parse_char(who: &str, key: &str, value: &str) -> Result<Option<u8>> {
    let c = match value {
        "" | "\\u0000" | "\0" => return Ok(None),
        "\\t" => b'\t',
        "\\n" => b'\n',
        "\\\\" => b'\\',
        v if v.len() == 1 && v.is_ascii() => v.as_bytes()[0],
        _ => {
            return Err(Error::Invalid(format!(
                "{who}: option {key} is one ASCII character, found '{value}'"
            )));
        }
    };
    Ok(Some(c))
}

/// `'a INT, b STRING'` as columns.
fn parse_schema(who: &str, ddl: &str) -> Result<SchemaRef> {
    let columns = crate::parser::column_list_text(ddl)
        .map_err(|e| Error::Invalid(format!("{who}: schema '{ddl}' does not parse: {e}")))?;
    let fields = columns
        .iter()
        .map(|(name, t)| Ok(Field::new(name, super::types::sql_to_arrow(t)?, true)))
        .collect::<Result<Vec<_>>>()?;
    Ok(Arc::new(Schema::new(fields)))
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
            "{who}: {path} is on object storage ({scheme}://), which tidemark does not read yet: copy the files to a local directory"
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
        let rel = f.path.strip_prefix(&base).unwrap_or(&f.path);
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
    files.sort_by(|a, b| a.path.cmp(&b.path));
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
    let modified_ms = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0);
    SourceFile {
        path,
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
        Some(g) => files
            .into_iter()
            .filter(|f| {
                f.path
                    .file_name()
                    .is_some_and(|n| g.matches(&n.to_string_lossy()))
            })
            .collect(),
    }
}

impl Session {
    /// The columns of `files` read with `options`: as given, else inferred from every file
    /// (CSV files must agree on their columns; JSON and Parquet files are merged by name).
    pub(crate) async fn file_schema(
        &self,
        who: &str,
        files: &[SourceFile],
        options: &ReadOptions,
    ) -> Result<SchemaRef> {
        if let Some(s) = &options.schema {
            if options.format == Format::Csv && options.header {
                self.check_headers(who, files, s, options).await?;
            }
            return Ok(s.clone());
        }
        let state = self.ctx.state();
        let store = self
            .ctx
            .runtime_env()
            .object_store(ObjectStoreUrl::local_filesystem())?;
        let mut merged: Option<(Vec<Field>, &SourceFile)> = None;
        for file in files {
            let compression = compression_of(&file.path.to_string_lossy()).1;
            let format = options.file_format(self, options.infer_types, compression);
            let meta = object_meta(file)?;
            let schema = format
                .infer_schema(&state, &store, std::slice::from_ref(&meta))
                .await
                .map_err(|e| {
                    Error::Invalid(format!(
                        "{who}: cannot read {} as {}: {e}",
                        file.path.display(),
                        options.format.name()
                    ))
                })?;
            let fields: Vec<Field> = schema
                .fields()
                .iter()
                .enumerate()
                .map(|(i, f)| normalized(f, i, options))
                .collect();
            merged = Some(match merged {
                None => (fields, file),
                Some((have, first)) => (merge(who, have, first, fields, file, options)?, first),
            });
        }
        // A column with no value in any file is a STRING (after the merge: a file where it is
        // empty takes another file's type).
        let mut fields: Vec<Field> = merged
            .map(|(f, _)| f)
            .unwrap_or_default()
            .into_iter()
            .map(|f| f.clone().with_data_type(without_null(f.data_type())))
            .collect();
        if options.format == Format::Json {
            // As Spark infers them: by name.
            fields.sort_by(|a, b| a.name().cmp(b.name()));
        }
        Ok(Arc::new(Schema::new(fields)))
    }

    /// CSV columns are read by position: with a header, each file's must name the given
    /// columns, in their order (else values would land in the wrong columns).
    async fn check_headers(
        &self,
        who: &str,
        files: &[SourceFile],
        schema: &Schema,
        options: &ReadOptions,
    ) -> Result<()> {
        let state = self.ctx.state();
        let store = self
            .ctx
            .runtime_env()
            .object_store(ObjectStoreUrl::local_filesystem())?;
        let wanted: Vec<String> = schema
            .fields()
            .iter()
            .map(|f| f.name().to_lowercase())
            .collect();
        for file in files {
            let compression = compression_of(&file.path.to_string_lossy()).1;
            let format = options.file_format(self, false, compression);
            let header = format
                .infer_schema(&state, &store, &[object_meta(file)?])
                .await
                .map_err(|e| {
                    Error::Invalid(format!("{who}: cannot read {}: {e}", file.path.display()))
                })?;
            let names: Vec<String> = header
                .fields()
                .iter()
                .map(|f| f.name().to_lowercase())
                .collect();
            if names != wanted {
                return Err(Error::Invalid(format!(
                    "{who}: the header of {} names ({}), and the columns given are ({}): CSV columns are read by position, so name them in the file's order",
                    file.path.display(),
                    names.join(", "),
                    wanted.join(", ")
                )));
            }
        }
        Ok(())
    }

    /// `table` registered for one statement (the guard drops it): the name FROM reads it by.
    pub(crate) fn register_for_statement(
        &self,
        table: Arc<dyn TableProvider>,
        guard: &mut super::routines::Scratch,
    ) -> Result<String> {
        let name = format!("files_{}", uuid::Uuid::new_v4().simple());
        self.catalogs
            .scratch_schema()
            .register_table(name.clone(), table)?;
        guard.add(self, name.clone());
        Ok(format!("{}.pinned.{name}", crate::catalog::SCRATCH))
    }

    /// A table reading `files` as `schema`.
    pub(crate) fn file_table(
        &self,
        files: &[SourceFile],
        schema: SchemaRef,
        options: &ReadOptions,
    ) -> Result<Arc<dyn TableProvider>> {
        if files.is_empty() {
            return Ok(Arc::new(datafusion::datasource::empty::EmptyTable::new(
                schema,
            )));
        }
        let urls = files
            .iter()
            .map(|f| Ok(ListingTableUrl::try_new(f.url()?, None)?))
            .collect::<Result<Vec<_>>>()?;
        let compression = one_compression(files, options.format)?;
        let listing = ListingOptions::new(options.file_format(self, false, compression))
            .with_file_extension("");
        // CSV columns are read by position: the schema's names are the header's or `_cN`.
        let config = ListingTableConfig::new_with_multi_paths(urls)
            .with_listing_options(listing)
            .with_schema(schema);
        Ok(Arc::new(ListingTable::try_new(config)?))
    }
}

/// A path without its compression extension, and the compression that names
/// (`orders.csv.gz`: `orders.csv`, gzip).
fn compression_of(path: &str) -> (&str, FileCompressionType) {
    let lower = path.to_ascii_lowercase();
    for (ext, c) in [
        (".gz", FileCompressionType::GZIP),
        (".bz2", FileCompressionType::BZIP2),
        (".xz", FileCompressionType::XZ),
        (".zst", FileCompressionType::ZSTD),
    ] {
        if lower.ends_with(ext) {
            return (&path[..path.len() - ext.len()], c);
        }
    }
    (path, FileCompressionType::UNCOMPRESSED)
}

/// The one compression of the files (Parquet compresses inside the file).
fn one_compression(files: &[SourceFile], format: Format) -> Result<FileCompressionType> {
    if format == Format::Parquet {
        return Ok(FileCompressionType::UNCOMPRESSED);
    }
    let mut found: Option<(FileCompressionType, &SourceFile)> = None;
    for f in files {
        let c = compression_of(&f.path.to_string_lossy()).1;
        match &found {
            Some((have, first)) if *have != c => {
                return Err(Error::Invalid(format!(
                    "{} and {} are compressed differently: read them separately",
                    first.path.display(),
                    f.path.display()
                )));
            }
            Some(_) => {}
            None => found = Some((c, f)),
        }
    }
    Ok(found.map_or(FileCompressionType::UNCOMPRESSED, |(c, _)| c))
}

fn object_meta(file: &SourceFile) -> Result<deltalake::logstore::object_store::ObjectMeta> {
    let location = deltalake::logstore::object_store::path::Path::from_absolute_path(&file.path)
        .map_err(|e| Error::Invalid(format!("{}: {e}", file.path.display())))?;
    Ok(deltalake::logstore::object_store::ObjectMeta {
        location,
        last_modified: chrono::DateTime::from_timestamp_millis(file.modified_ms)
            .unwrap_or_default(),
        size: file.size,
        e_tag: None,
        version: None,
    })
}

/// An inferred column as tidemark shows it: a CSV file's unnamed columns `_c0`, `_c1`, ...;
/// a CSV timestamp a TIMESTAMP (UTC, microseconds).
fn normalized(f: &Field, i: usize, options: &ReadOptions) -> Field {
    let name = if options.format == Format::Csv && !options.header {
        format!("_c{i}")
    } else {
        f.name().clone()
    };
    let data_type = match f.data_type() {
        DataType::Timestamp(_, None) if options.format == Format::Csv => {
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
        }
        other => other.clone(),
    };
    Field::new(name, data_type, true)
}

/// The columns of two files as one: CSV files must have the same columns in the same order;
/// JSON and Parquet files are merged by name. Types widen as Spark's do (an integer column
/// with fractions is a DOUBLE; in CSV and JSON, any other disagreement is a STRING).
fn merge(
    who: &str,
    mut have: Vec<Field>,
    first: &SourceFile,
    fields: Vec<Field>,
    file: &SourceFile,
    options: &ReadOptions,
) -> Result<Vec<Field>> {
    let names = |f: &[Field]| f.iter().map(|f| f.name().clone()).collect::<Vec<_>>();
    if options.format == Format::Csv && names(&have) != names(&fields) {
        return Err(Error::Invalid(format!(
            "{who}: the CSV files have different columns: {} has ({}), {} has ({}); read them separately",
            first.path.display(),
            names(&have).join(", "),
            file.path.display(),
            names(&fields).join(", ")
        )));
    }
    for f in fields {
        let found = have
            .iter()
            .position(|h| h.name().eq_ignore_ascii_case(f.name()));
        match found {
            None => have.push(f),
            Some(i) if have[i].name() != f.name() => {
                return Err(Error::Invalid(format!(
                    "{who}: column {} of {} and column {} of {} differ only in case",
                    have[i].name(),
                    first.path.display(),
                    f.name(),
                    file.path.display()
                )));
            }
            Some(i) => {
                let wider =
                    widen(have[i].data_type(), f.data_type(), options.format).ok_or_else(|| {
                        Error::Type(format!(
                            "{who}: column {} is {} in {} but {} in {}",
                            f.name(),
                            type_name(have[i].data_type()),
                            first.path.display(),
                            type_name(f.data_type()),
                            file.path.display()
                        ))
                    })?;
                have[i] = Field::new(f.name(), wider, true);
            }
        }
    }
    Ok(have)
}

/// `t` with every NULL type (a column or field with no value) a STRING.
fn without_null(t: &DataType) -> DataType {
    match t {
        DataType::Null => DataType::Utf8,
        DataType::List(f) => DataType::List(Arc::new(
            f.as_ref()
                .clone()
                .with_data_type(without_null(f.data_type())),
        )),
        DataType::Struct(fields) => DataType::Struct(
            fields
                .iter()
                .map(|f| {
                    f.as_ref()
                        .clone()
                        .with_data_type(without_null(f.data_type()))
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

fn widen(a: &DataType, b: &DataType, format: Format) -> Option<DataType> {
    use DataType::*;
    Some(match (a, b) {
        _ if a == b => a.clone(),
        (Null, t) | (t, Null) => t.clone(),
        (Int64, Float64) | (Float64, Int64) if format != Format::Parquet => Float64,
        (List(x), List(y)) if format == Format::Json => {
            let item = widen(x.data_type(), y.data_type(), format)?;
            List(Arc::new(x.as_ref().clone().with_data_type(item)))
        }
        (Struct(x), Struct(y)) if format == Format::Json => {
            let mut fields: Vec<Field> = x.iter().map(|f| f.as_ref().clone()).collect();
            for f in y.iter() {
                match fields.iter().position(|h| h.name() == f.name()) {
                    Some(i) => {
                        let t = widen(fields[i].data_type(), f.data_type(), format)?;
                        fields[i] = fields[i].clone().with_data_type(t);
                    }
                    None => fields.push(f.as_ref().clone()),
                }
            }
            fields.sort_by(|a, b| a.name().cmp(b.name()));
            Struct(fields.into())
        }
        (Date32, Timestamp(u, z)) | (Timestamp(u, z), Date32) if format == Format::Csv => {
            Timestamp(*u, z.clone())
        }
        _ if format == Format::Parquet => return None,
        _ => Utf8,
    })
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

    #[test]
    fn options_are_applied_or_refused_by_name() {
        let o = ReadOptions::parse(
            Reader::ReadFiles,
            None,
            &[
                ("header".into(), "true".into()),
                ("sep".into(), "\\t".into()),
            ],
            "/x/a.csv",
        )
        .unwrap();
        assert!(o.header && o.delimiter == b'\t' && o.format == Format::Csv);
        let e = ReadOptions::parse(
            Reader::CopyInto,
            Some(Format::Csv),
            &[("dateFormat".into(), "dd.MM.yyyy".into())],
            "/x",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("dateFormat") && e.contains("not supported"),
            "{e}"
        );
        let e = ReadOptions::parse(
            Reader::ReadFiles,
            None,
            &[("hedaer".into(), "true".into())],
            "/x/a.csv",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("unknown option hedaer"), "{e}");
        let e = ReadOptions::parse(Reader::ReadFiles, None, &[], "/x/dir")
            .unwrap_err()
            .to_string();
        assert!(e.contains("format =>"), "{e}");
        let e = ReadOptions::parse(
            Reader::ReadFiles,
            Some(Format::Json),
            &[("header".into(), "true".into())],
            "/x",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("applies to CSV"), "{e}");
    }

    #[test]
    fn types_widen_as_spark_does() {
        use DataType::*;
        assert_eq!(widen(&Int64, &Float64, Format::Csv), Some(Float64));
        assert_eq!(widen(&Int64, &Boolean, Format::Json), Some(Utf8));
        assert_eq!(widen(&Int64, &Utf8, Format::Parquet), None);
        assert_eq!(widen(&Null, &Int64, Format::Json), Some(Int64));
    }
}
