//! Rendering of query results in the shell's output formats.

use std::fmt;
use std::io::{self, Write};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use arrow::csv::WriterBuilder as CsvWriterBuilder;
use arrow::datatypes::SchemaRef;
use arrow::error::ArrowError;
use arrow::json::WriterBuilder as JsonWriterBuilder;
use arrow::json::writer::{JsonArray, JsonFormat, LineDelimited};
use arrow::record_batch::RecordBatch;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use arrow::util::pretty::pretty_format_batches_with_options;
use clap::ValueEnum;

/// Output formats of the shell (`--format`, `\format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Boxed ASCII table for humans.
    Table,
    /// Comma-separated values with a header line.
    Csv,
    /// Tab-separated values with a header line.
    Tsv,
    /// One JSON array of objects.
    Json,
    /// One JSON object per line.
    Ndjson,
    /// GitHub-flavoured markdown table.
    Markdown,
}

impl Format {
    /// Human formats get row caps and the count/timing line on the output.
    fn is_human(self) -> bool {
        matches!(self, Format::Table | Format::Markdown)
    }
}

/// Parses `\format NAME` arguments case-insensitively, with the same names as clap.
impl FromStr for Format {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        <Self as ValueEnum>::from_str(s.trim(), true).map_err(|_| {
            let names: Vec<String> = Self::value_variants()
                .iter()
                .map(Format::to_string)
                .collect();
            format!("unknown format '{s}'; valid formats: {}", names.join(", "))
        })
    }
}

/// Shows the format by its lowercase name (e.g. in `\format` with no argument).
impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let value = self.to_possible_value().expect("no variant is skipped");
        f.write_str(value.get_name())
    }
}

/// How results are printed.
#[derive(Debug, Clone)]
pub struct PrintOptions {
    /// Output format.
    pub format: Format,
    /// Row cap for table & markdown output; `None` = unlimited.
    pub max_rows: Option<usize>,
    /// Suppress the "N rows" / "OK" status line.
    pub quiet: bool,
    /// Append the elapsed time to the status line.
    pub timing: bool,
}

/// Write `batches` (all with `schema`) to `out` in the format chosen by `opts`.
///
/// Human formats (table, markdown) are capped at `max_rows` and followed by a
/// "N rows" line (plus timing); machine formats carry data only, with the
/// status line going to stderr when timing is on. Statements with an empty
/// schema and no rows (DDL) print just "OK" for human formats.
pub fn print_batches(
    out: &mut dyn Write,
    schema: &SchemaRef,
    batches: &[RecordBatch],
    opts: &PrintOptions,
    elapsed: Option<Duration>,
) -> io::Result<()> {
    let total: usize = batches.iter().map(RecordBatch::num_rows).sum();
    let timing = match (opts.timing, elapsed) {
        (true, Some(d)) => format!(" in {:.3}s", d.as_secs_f64()),
        _ => String::new(),
    };
    if total == 0 && schema.fields().is_empty() {
        return status(out, opts, &format!("OK{timing}"));
    }
    let shown = if opts.format.is_human() {
        capped(schema, batches, opts.max_rows)
    } else {
        Vec::new()
    };
    let shown_rows: usize = shown.iter().map(RecordBatch::num_rows).sum();
    match opts.format {
        Format::Table => {
            let options = FormatOptions::new()
                .with_null("NULL")
                .with_display_error(true);
            let table = pretty_format_batches_with_options(&shown, &options).map_err(arrow_err)?;
            writeln!(out, "{table}")?;
        }
        Format::Markdown => {
            write_markdown(out, schema, &shown)?;
            if shown_rows < total || !opts.quiet {
                // A blank line ends the markdown table; otherwise the trailer
                // would be parsed as another table row.
                writeln!(out)?;
            }
        }
        Format::Csv => write_csv(out, schema, batches, b',')?,
        Format::Tsv => write_csv(out, schema, batches, b'\t')?,
        Format::Json => {
            write_json::<JsonArray>(out, batches)?;
            writeln!(out)?;
        }
        Format::Ndjson => write_json::<LineDelimited>(out, batches)?,
    }
    if opts.format.is_human() && shown_rows < total {
        writeln!(out, "(showing {shown_rows} of {total} rows)")?;
    }
    let noun = if total == 1 { "row" } else { "rows" };
    status(out, opts, &format!("{total} {noun}{timing}"))?;
    out.flush()
}

/// Prints the status line where the format wants it: on `out` for human
/// formats, on stderr (only with timing) for machine formats.
fn status(out: &mut dyn Write, opts: &PrintOptions, line: &str) -> io::Result<()> {
    if opts.quiet {
        Ok(())
    } else if opts.format.is_human() {
        writeln!(out, "{line}")
    } else {
        if opts.timing {
            let _ = writeln!(io::stderr(), "{line}");
        }
        Ok(())
    }
}

/// Takes at most `cap` rows by slicing batches (no concatenation or copying);
/// always yields at least one (possibly empty) batch so headers can be drawn.
fn capped(schema: &SchemaRef, batches: &[RecordBatch], cap: Option<usize>) -> Vec<RecordBatch> {
    let mut left = cap.unwrap_or(usize::MAX);
    let mut shown = Vec::new();
    for batch in batches {
        if left == 0 {
            break;
        }
        let n = batch.num_rows().min(left);
        shown.push(batch.slice(0, n)); // zero-copy: shares the column buffers
        left -= n;
    }
    if shown.is_empty() {
        shown.push(RecordBatch::new_empty(schema.clone()));
    }
    shown
}

/// Writes a GitHub markdown table with `|` escaped and newlines flattened.
fn write_markdown(
    out: &mut dyn Write,
    schema: &SchemaRef,
    batches: &[RecordBatch],
) -> io::Result<()> {
    let header: Vec<String> = schema
        .fields()
        .iter()
        .map(|f| md_escape(f.name()))
        .collect();
    writeln!(out, "| {} |", header.join(" | "))?;
    writeln!(out, "{}|", "|---".repeat(header.len()))?;
    let options = FormatOptions::new().with_null("NULL");
    for batch in batches {
        let formatters = batch
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &options))
            .collect::<Result<Vec<_>, _>>()
            .map_err(arrow_err)?;
        for row in 0..batch.num_rows() {
            let cells = formatters
                .iter()
                .map(|f| f.value(row).try_to_string().map(|s| md_escape(&s)))
                .collect::<Result<Vec<_>, _>>()
                .map_err(arrow_err)?;
            writeln!(out, "| {} |", cells.join(" | "))?;
        }
    }
    Ok(())
}

/// Makes a value safe inside a markdown table cell.
fn md_escape(s: &str) -> String {
    let mut escaped = String::with_capacity(s.len());
    for c in s.replace("\r\n", "\n").chars() {
        match c {
            '|' => escaped.push_str("\\|"),
            '\n' | '\r' => escaped.push(' '),
            c => escaped.push(c),
        }
    }
    escaped
}

/// Writes delimited text with a header line (the header even for no rows).
fn write_csv(
    out: &mut dyn Write,
    schema: &SchemaRef,
    batches: &[RecordBatch],
    delimiter: u8,
) -> io::Result<()> {
    let mut tracked = Tracked(out, None);
    let mut writer = CsvWriterBuilder::new()
        .with_header(true)
        .with_delimiter(delimiter)
        .build(&mut tracked);
    let result = if batches.is_empty() {
        writer.write(&RecordBatch::new_empty(schema.clone()))
    } else {
        batches.iter().try_for_each(|b| writer.write(b))
    };
    drop(writer);
    result.map_err(|e| match tracked.1 {
        Some(kind) => io::Error::new(kind, e),
        None => arrow_err(e),
    })
}

/// Remembers the first I/O error kind, since arrow's CSV writer turns I/O
/// errors into strings and callers need e.g. `BrokenPipe` to stop quietly.
struct Tracked<'a>(&'a mut dyn Write, Option<io::ErrorKind>);

impl Write for Tracked<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let result = self.0.write(buf);
        if let Err(e) = &result {
            self.1 = self.1.or(Some(e.kind()));
        }
        result
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

/// Writes JSON (array or line-delimited, per `F`) keeping null keys explicit.
fn write_json<F: JsonFormat>(out: &mut dyn Write, batches: &[RecordBatch]) -> io::Result<()> {
    let mut writer = JsonWriterBuilder::new()
        .with_explicit_nulls(true)
        .build::<_, F>(out);
    for batch in batches {
        writer
            .write(&string_map_keys(batch).map_err(arrow_err)?)
            .map_err(arrow_err)?;
    }
    writer.finish().map_err(arrow_err)
}

/// JSON object keys are strings: maps keyed by numbers, dates or other types are written
/// with their keys as text (`{"1": "a"}`), at any depth.
fn string_map_keys(batch: &RecordBatch) -> Result<RecordBatch, ArrowError> {
    use arrow::datatypes::{DataType, Field, Fields};
    fn keyed(dt: &DataType) -> DataType {
        let field =
            |f: &Arc<Field>| Arc::new(f.as_ref().clone().with_data_type(keyed(f.data_type())));
        match dt {
            DataType::Map(entries, sorted) => {
                let DataType::Struct(kv) = entries.data_type() else {
                    return dt.clone();
                };
                let kv: Fields = kv
                    .iter()
                    .enumerate()
                    .map(|(i, f)| {
                        if i == 0 {
                            Arc::new(f.as_ref().clone().with_data_type(DataType::Utf8))
                        } else {
                            field(f)
                        }
                    })
                    .collect();
                DataType::Map(
                    Arc::new(
                        entries
                            .as_ref()
                            .clone()
                            .with_data_type(DataType::Struct(kv)),
                    ),
                    *sorted,
                )
            }
            DataType::Struct(fields) => DataType::Struct(fields.iter().map(field).collect()),
            DataType::List(f) => DataType::List(field(f)),
            DataType::LargeList(f) => DataType::LargeList(field(f)),
            DataType::FixedSizeList(f, n) => DataType::FixedSizeList(field(f), *n),
            other => other.clone(),
        }
    }
    let schema = batch.schema();
    if schema
        .fields()
        .iter()
        .all(|f| &keyed(f.data_type()) == f.data_type())
    {
        return Ok(batch.clone());
    }
    let mut fields = Vec::with_capacity(schema.fields().len());
    let mut columns = Vec::with_capacity(schema.fields().len());
    for (f, c) in schema.fields().iter().zip(batch.columns()) {
        let to = keyed(f.data_type());
        columns.push(if &to == f.data_type() {
            c.clone()
        } else {
            arrow::compute::cast(c, &to)?
        });
        fields.push(f.as_ref().clone().with_data_type(to));
    }
    RecordBatch::try_new(Arc::new(arrow::datatypes::Schema::new(fields)), columns)
}

/// Converts arrow errors to `io::Error`, unwrapping wrapped I/O errors.
fn arrow_err(e: ArrowError) -> io::Error {
    match e {
        ArrowError::IoError(_, e) => e,
        e => io::Error::other(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{ArrayRef, Int64Array, StringArray, TimestampMicrosecondArray};
    use arrow::datatypes::Schema;
    use std::sync::Arc;

    /// An int, a string needing quoting/escaping, a null and a UTC timestamp.
    fn sample() -> RecordBatch {
        let micros = vec![1_704_067_200_000_000, 1_704_070_800_000_000];
        let ts = TimestampMicrosecondArray::from(micros).with_timezone("UTC");
        let name = StringArray::from(vec![Some("a,\"b\"|c"), None]);
        RecordBatch::try_from_iter([
            ("id", Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef),
            ("name", Arc::new(name) as ArrayRef),
            ("ts", Arc::new(ts) as ArrayRef),
        ])
        .unwrap()
    }

    /// A one-column batch of integers, for row-cap tests.
    fn ints(values: Vec<i64>) -> RecordBatch {
        RecordBatch::try_from_iter([("n", Arc::new(Int64Array::from(values)) as ArrayRef)]).unwrap()
    }

    /// Default options for `format`.
    fn opts(format: Format) -> PrintOptions {
        with(format, None, false, false)
    }

    /// Options with every knob spelled out.
    fn with(format: Format, max_rows: Option<usize>, quiet: bool, timing: bool) -> PrintOptions {
        PrintOptions {
            format,
            max_rows,
            quiet,
            timing,
        }
    }

    /// Prints into a string, always passing an elapsed time of 12ms.
    fn render(schema: &SchemaRef, batches: &[RecordBatch], o: &PrintOptions) -> String {
        let mut out = Vec::new();
        let elapsed = Some(Duration::from_millis(12));
        print_batches(&mut out, schema, batches, o, elapsed).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// Prints the sample batch with default options.
    fn render_sample(format: Format) -> String {
        render(&sample().schema(), &[sample()], &opts(format))
    }

    /// Names parse case-insensitively and errors list the choices.
    #[test]
    fn parse_and_display() {
        assert_eq!("CSV".parse::<Format>(), Ok(Format::Csv));
        assert_eq!(" Markdown".parse::<Format>(), Ok(Format::Markdown));
        let err = "xml".parse::<Format>().unwrap_err();
        assert!(
            err.contains("table, csv, tsv, json, ndjson, markdown"),
            "{err}"
        );
        assert_eq!(Format::Ndjson.to_string(), "ndjson");
    }

    /// Pretty table with NULL, UTC timestamps and the timed count line.
    #[test]
    fn table_with_timing() {
        let o = with(Format::Table, None, false, true);
        let expected = "\
+----+---------+----------------------+
| id | name    | ts                   |
+----+---------+----------------------+
| 1  | a,\"b\"|c | 2024-01-01T00:00:00Z |
| 2  | NULL    | 2024-01-01T01:00:00Z |
+----+---------+----------------------+
2 rows in 0.012s
";
        assert_eq!(render(&sample().schema(), &[sample()], &o), expected);
    }

    /// The cap slices across batch boundaries and adds the footer.
    #[test]
    fn table_capped_across_batches() {
        let o = with(Format::Table, Some(3), false, false);
        let batches = [ints(vec![1, 2]), ints(vec![3, 4, 5])];
        let expected =
            "+---+\n| n |\n+---+\n| 1 |\n| 2 |\n| 3 |\n+---+\n(showing 3 of 5 rows)\n5 rows\n";
        assert_eq!(render(&batches[0].schema(), &batches, &o), expected);
        let one = [ints(vec![7])];
        assert!(render(&one[0].schema(), &one, &opts(Format::Table)).ends_with("+\n1 row\n"));
    }

    /// Zero rows still show column headers where the format has them.
    #[test]
    fn empty_results_keep_headers() {
        let schema = sample().schema();
        let table = "+----+------+----+\n| id | name | ts |\n+----+------+----+\n+----+------+----+\n0 rows\n";
        assert_eq!(render(&schema, &[], &opts(Format::Table)), table);
        assert_eq!(render(&schema, &[], &opts(Format::Csv)), "id,name,ts\n");
        assert_eq!(render(&schema, &[], &opts(Format::Json)), "[]\n");
        assert_eq!(render(&schema, &[], &opts(Format::Ndjson)), "");
        let markdown = "| id | name | ts |\n|---|---|---|\n\n0 rows\n";
        assert_eq!(render(&schema, &[], &opts(Format::Markdown)), markdown);
    }

    /// Schema-less results print "OK" for human formats only.
    #[test]
    fn ddl_prints_ok() {
        let schema = Arc::new(Schema::empty());
        let timed = with(Format::Table, None, false, true);
        assert_eq!(render(&schema, &[], &timed), "OK in 0.012s\n");
        assert_eq!(render(&schema, &[], &opts(Format::Csv)), "");
        let quiet = with(Format::Markdown, None, true, false);
        assert_eq!(render(&schema, &[], &quiet), "");
    }

    /// Delimited output quotes only where needed.
    #[test]
    fn csv_and_tsv() {
        let csv = "id,name,ts\n1,\"a,\"\"b\"\"|c\",2024-01-01T00:00:00Z\n2,,2024-01-01T01:00:00Z\n";
        assert_eq!(render_sample(Format::Csv), csv);
        let tsv =
            "id\tname\tts\n1\t\"a,\"\"b\"\"|c\"\t2024-01-01T00:00:00Z\n2\t\t2024-01-01T01:00:00Z\n";
        assert_eq!(render_sample(Format::Tsv), tsv);
    }

    /// JSON output keeps nulls and never carries the count line.
    #[test]
    fn json_and_ndjson_without_status_line() {
        let rows = [
            r#"{"id":1,"name":"a,\"b\"|c","ts":"2024-01-01T00:00:00Z"}"#,
            r#"{"id":2,"name":null,"ts":"2024-01-01T01:00:00Z"}"#,
        ];
        assert_eq!(
            render_sample(Format::Json),
            format!("[{}]\n", rows.join(","))
        );
        let o = with(Format::Ndjson, None, false, true);
        let got = render(&sample().schema(), &[sample()], &o);
        assert_eq!(got, format!("{}\n{}\n", rows[0], rows[1]));
    }

    /// Markdown escapes pipes and separates the trailer with a blank line.
    #[test]
    fn markdown() {
        let expected = "\
| id | name | ts |
|---|---|---|
| 1 | a,\"b\"\\|c | 2024-01-01T00:00:00Z |
| 2 | NULL | 2024-01-01T01:00:00Z |

2 rows
";
        assert_eq!(render_sample(Format::Markdown), expected);
        assert_eq!(md_escape("a|b\r\nc\nd"), "a\\|b c d");
        let o = with(Format::Markdown, Some(1), true, false);
        let got = render(&sample().schema(), &[sample()], &o);
        assert!(
            got.ends_with("2024-01-01T00:00:00Z |\n\n(showing 1 of 2 rows)\n"),
            "{got}"
        );
    }
}
