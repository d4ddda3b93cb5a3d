//! Spark's file reader options by name, with Spark's defaults: each applied, or refused by
//! name (an option is never ignored), and the engine's reader they make.

use std::sync::Arc;

use datafusion::arrow::datatypes::{Field, Schema, SchemaRef};
use datafusion::datasource::file_format::FileFormat;
use datafusion::datasource::file_format::csv::CsvFormat;
use datafusion::datasource::file_format::file_compression_type::FileCompressionType;
use datafusion::datasource::file_format::json::JsonFormat;
use datafusion::datasource::file_format::parquet::ParquetFormat;

use super::Glob;
use crate::engine::Session;
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
        let (stem, _) = super::compression_of(path);
        let ext = stem.rsplit_once('.')?.1.to_ascii_lowercase();
        match ext.as_str() {
            "csv" | "tsv" => Some(Format::Csv),
            "json" | "jsonl" | "ndjson" => Some(Format::Json),
            "parquet" => Some(Format::Parquet),
            _ => None,
        }
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
    pub(super) file_name: Option<Glob>,
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

    /// The engine's CSV reader with these options.
    pub(super) fn csv_format(&self, infer: bool, compression: FileCompressionType) -> CsvFormat {
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
            .with_schema_infer_max_rec(if infer { usize::MAX } else { 0 })
    }

    /// The engine's reader for these options, for files compressed as `compression`.
    pub(super) fn file_format(
        &self,
        session: &Session,
        infer: bool,
        compression: FileCompressionType,
    ) -> Arc<dyn FileFormat> {
        match self.format {
            Format::Csv => Arc::new(self.csv_format(infer, compression)),
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
        .map(|(name, t)| {
            Ok(Field::new(
                name,
                crate::engine::types::sql_to_arrow(t)?,
                true,
            ))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Arc::new(Schema::new(fields)))
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
