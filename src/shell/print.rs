//! Rendering of query results in the shell's output formats, batch by batch as they arrive:
//! memory for printing is a page of a table at most, whatever the row count.

use std::fmt;
use std::io::{self, Write};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use arrow::csv::WriterBuilder as CsvWriterBuilder;
use arrow::datatypes::SchemaRef;
use arrow::datatypes::{DataType, TimeUnit};
use arrow::error::ArrowError;
use arrow::json::WriterBuilder as JsonWriterBuilder;
use arrow::json::writer::{JsonArray, JsonFormat, LineDelimited};
use arrow::record_batch::RecordBatch;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use clap::ValueEnum;
use console::{measure_text_width, truncate_str};

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

/// `\x`: one line per column instead of one row per line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expanded {
    Off,
    On,
    /// Expanded when a table would be wider than the terminal.
    Auto,
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
    /// How NULL reads in table, markdown and expanded output (`\pset null`). A value that
    /// reads the same is shown quoted, so the two never look alike.
    pub null: String,
    /// `\x`.
    pub expanded: Expanded,
    /// The terminal's width when output is a terminal: wider tables are cut with `…`.
    pub width: Option<usize>,
    /// `max_rows` is the terminal's default (not asked for): a `\o` file gets every row.
    pub terminal_cap: bool,
}

impl Default for PrintOptions {
    fn default() -> Self {
        PrintOptions {
            format: Format::Table,
            max_rows: None,
            quiet: false,
            timing: false,
            null: "NULL".into(),
            expanded: Expanded::Off,
            width: None,
            terminal_cap: false,
        }
    }
}

/// Rows a table collects before it draws them (its columns are as wide as the widest value
/// seen so far; a later, wider value widens them from there on).
const PAGE: usize = 1000;

/// Writes one result to `out` batch by batch as it arrives, holding at most a page of a
/// table: `new`, then `batch` for each batch, then `finish`.
///
/// Human formats (table, markdown, expanded) are capped at `max_rows` (the rest is counted,
/// not kept) and followed by a "N rows" line (plus timing); machine formats carry data only,
/// with the status line going to stderr when timing is on. Statements with an empty schema
/// and no rows (DDL) print just "OK" for human formats.
pub struct Printer<'a> {
    out: &'a mut dyn Write,
    opts: &'a PrintOptions,
    schema: SchemaRef,
    /// Rows seen.
    total: usize,
    /// Rows written (human formats stop at the cap).
    shown: usize,
    state: State,
}

enum State {
    Table(Table),
    Expanded,
    Markdown,
    Delimited { delimiter: u8, header: bool },
    Json { first: bool },
    Ndjson,
}

/// A table being drawn page by page.
struct Table {
    page: Vec<Vec<String>>,
    /// Column widths drawn so far (empty until the header is).
    drawn: Vec<usize>,
    right: Vec<bool>,
}

impl<'a> Printer<'a> {
    /// A printer of rows of `schema`.
    pub fn new(out: &'a mut dyn Write, schema: SchemaRef, opts: &'a PrintOptions) -> Self {
        let state = match opts.format {
            Format::Table if opts.expanded == Expanded::On => State::Expanded,
            Format::Table => State::Table(Table {
                page: vec![],
                drawn: vec![],
                right: schema
                    .fields()
                    .iter()
                    .map(|f| f.data_type().is_numeric())
                    .collect(),
            }),
            Format::Markdown => State::Markdown,
            Format::Csv => State::Delimited {
                delimiter: b',',
                header: true,
            },
            Format::Tsv => State::Delimited {
                delimiter: b'\t',
                header: true,
            },
            Format::Json => State::Json { first: true },
            Format::Ndjson => State::Ndjson,
        };
        Printer {
            out,
            opts,
            schema,
            total: 0,
            shown: 0,
            state,
        }
    }

    /// Rows seen so far.
    pub fn rows(&self) -> usize {
        self.total
    }

    /// The next batch of the result.
    pub fn batch(&mut self, batch: &RecordBatch) -> io::Result<()> {
        self.total += batch.num_rows();
        let human = self.opts.format.is_human();
        let take = if human {
            let room = self.opts.max_rows.unwrap_or(usize::MAX) - self.shown;
            batch.num_rows().min(room)
        } else {
            batch.num_rows()
        };
        if human && take == 0 {
            return Ok(());
        }
        let batch = batch.slice(0, take);
        let first = self.shown;
        self.shown += take;
        match &mut self.state {
            State::Table(table) => {
                table.page.extend(cells(&batch, self.opts)?);
                // The capped rows show as soon as they are there; the rest is only counted.
                if table.page.len() >= PAGE || self.opts.max_rows == Some(self.shown) {
                    self.flush_page()?;
                }
            }
            State::Expanded => self.expanded(&batch, first)?,
            State::Markdown => {
                if first == 0 {
                    markdown_header(self.out, &self.schema)?;
                }
                for row in cells(&batch, self.opts)? {
                    let row: Vec<String> = row.iter().map(|c| md_escape(c)).collect();
                    writeln!(self.out, "| {} |", row.join(" | "))?;
                }
            }
            State::Delimited { delimiter, header } => {
                write_csv(self.out, &batch, *delimiter, *header)?;
                *header = false;
            }
            State::Json { first } => {
                if batch.num_rows() > 0 {
                    let mut buf = vec![];
                    write_json::<JsonArray>(&mut buf, &batch)?;
                    // One batch's `[...]`, joined to the others' into one array.
                    let inner = &buf[1..buf.len() - 1];
                    self.out.write_all(if *first { b"[" } else { b"," })?;
                    self.out.write_all(inner)?;
                    *first = false;
                }
            }
            State::Ndjson => write_json::<LineDelimited>(self.out, &batch)?,
        }
        self.out.flush()
    }

    /// The end of the result: the rest of the table, then the count and timing line.
    pub fn finish(mut self, elapsed: Option<Duration>) -> io::Result<()> {
        let timing = match (self.opts.timing, elapsed) {
            (true, Some(d)) => format!(" in {:.3}s", d.as_secs_f64()),
            _ => String::new(),
        };
        if self.total == 0 && self.schema.fields().is_empty() {
            return status(self.out, self.opts, &format!("OK{timing}"));
        }
        match &mut self.state {
            State::Table(_) => {
                self.flush_page()?;
                if let State::Table(table) = &self.state {
                    let line = border(&table.drawn);
                    writeln!(self.out, "{line}")?;
                }
            }
            State::Expanded => {
                if self.shown == 0 {
                    writeln!(self.out, "(0 rows)")?;
                }
            }
            State::Markdown => {
                if self.shown == 0 {
                    markdown_header(self.out, &self.schema)?;
                }
                if self.shown < self.total || !self.opts.quiet {
                    // A blank line ends the markdown table; otherwise the trailer
                    // would be parsed as another table row.
                    writeln!(self.out)?;
                }
            }
            State::Delimited { delimiter, header } => {
                if *header {
                    write_csv(
                        self.out,
                        &RecordBatch::new_empty(self.schema.clone()),
                        *delimiter,
                        true,
                    )?;
                }
            }
            State::Json { first } => {
                self.out.write_all(if *first { b"[]\n" } else { b"]\n" })?;
            }
            State::Ndjson => {}
        }
        if self.opts.format.is_human() && self.shown < self.total {
            writeln!(self.out, "(showing {} of {} rows)", self.shown, self.total)?;
        }
        let noun = if self.total == 1 { "row" } else { "rows" };
        status(
            self.out,
            self.opts,
            &format!("{} {noun}{timing}", self.total),
        )?;
        self.out.flush()
    }

    /// Draws the rows collected so far (the header with the first page).
    fn flush_page(&mut self) -> io::Result<()> {
        // The header, for the first page only.
        let header = match &self.state {
            State::Table(t) if t.drawn.is_empty() => self.names(),
            _ => vec![],
        };
        let State::Table(table) = &mut self.state else {
            return Ok(());
        };
        let first = table.drawn.is_empty();
        if !first && table.page.is_empty() {
            return Ok(());
        }
        let mut widths: Vec<usize> = if first {
            header.iter().map(|h| measure_text_width(h)).collect()
        } else {
            table.drawn.clone()
        };
        for row in &table.page {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell_width(cell));
            }
        }
        if first
            && self.opts.expanded == Expanded::Auto
            && let Some(limit) = self.opts.width
            && table_width(&widths) > limit
        {
            // Too wide for the terminal: one line per column instead.
            let page = std::mem::take(&mut table.page);
            self.state = State::Expanded;
            return self.expanded_rows(&page, 0);
        }
        if let Some(limit) = self.opts.width {
            fit(&mut widths, limit);
        }
        let out = &mut *self.out;
        if first {
            writeln!(out, "{}", border(&widths))?;
            let left = vec![false; widths.len()];
            let header: Vec<(&str, bool)> = header.iter().map(|h| (h.as_str(), false)).collect();
            writeln!(out, "{}", row_line(&header, &widths, &left))?;
            writeln!(out, "{}", border(&widths))?;
        } else if widths != table.drawn {
            writeln!(out, "{}", border(&widths))?;
        }
        for row in table.page.drain(..) {
            for line in row_lines(&row, &widths, &table.right) {
                writeln!(out, "{line}")?;
            }
        }
        table.drawn = widths;
        Ok(())
    }

    /// Rows of `batch` as records (`\x`), numbered from `first + 1`.
    fn expanded(&mut self, batch: &RecordBatch, first: usize) -> io::Result<()> {
        let rows = cells(batch, self.opts)?;
        self.expanded_rows(&rows, first)
    }

    /// The column names as drawn.
    fn names(&self) -> Vec<String> {
        self.schema
            .fields()
            .iter()
            .map(|f| escape(f.name()))
            .collect()
    }

    fn expanded_rows(&mut self, rows: &[Vec<String>], first: usize) -> io::Result<()> {
        let names = self.names();
        let name_width = names
            .iter()
            .map(|n| measure_text_width(n))
            .max()
            .unwrap_or(0);
        let value_width = self
            .opts
            .width
            .map(|w| w.saturating_sub(name_width + 3).max(4));
        for (i, row) in rows.iter().enumerate() {
            let title = format!("-[ RECORD {} ]", first + i + 1);
            let rule = self
                .opts
                .width
                .unwrap_or(name_width + 20)
                .min(name_width + 3 + row.iter().map(|c| cell_width(c)).max().unwrap_or(0))
                .max(measure_text_width(&title));
            writeln!(
                self.out,
                "{title}{}",
                "-".repeat(rule - measure_text_width(&title))
            )?;
            for (name, cell) in names.iter().zip(row) {
                for (n, (line, goes_on)) in cell_lines(cell).into_iter().enumerate() {
                    let value = match value_width {
                        Some(w) => truncate_str(line, w, "…"),
                        None => line.into(),
                    };
                    let label = if n == 0 { name.as_str() } else { "" };
                    let mark = if goes_on { "+" } else { "" };
                    writeln!(
                        self.out,
                        "{} | {value}{mark}",
                        pad(label, name_width, false)
                    )?;
                }
            }
        }
        Ok(())
    }
}

/// Write a whole result at once (one printer over its batches).
pub fn print_batches(
    out: &mut dyn Write,
    schema: &SchemaRef,
    batches: &[RecordBatch],
    opts: &PrintOptions,
    elapsed: Option<Duration>,
) -> io::Result<()> {
    let mut printer = Printer::new(out, schema.clone(), opts);
    for batch in batches {
        printer.batch(batch)?;
    }
    printer.finish(elapsed)
}

/// Prints the status line where the format wants it: on `out` for human
/// formats, on stderr (only with timing) for machine formats.
fn status(out: &mut dyn Write, opts: &PrintOptions, line: &str) -> io::Result<()> {
    if opts.quiet {
        Ok(())
    } else if opts.format.is_human() {
        writeln!(out, "{line}")?;
        out.flush()
    } else {
        if opts.timing {
            let _ = writeln!(io::stderr(), "{line}");
        }
        Ok(())
    }
}

/// Each row of `batch` as display text: NULL as the null marker, a value reading like the
/// marker quoted, control characters escaped, timestamps with microseconds and their zone.
fn cells(batch: &RecordBatch, opts: &PrintOptions) -> io::Result<Vec<Vec<String>>> {
    // Microseconds (Delta's precision), or every digit a nanosecond value has.
    let micros = FormatOptions::new()
        .with_null(&opts.null)
        .with_timestamp_format(Some("%Y-%m-%dT%H:%M:%S%.6f"))
        .with_timestamp_tz_format(Some("%Y-%m-%dT%H:%M:%S%.6f%:z"));
    let nanos = micros
        .clone()
        .with_timestamp_format(Some("%Y-%m-%dT%H:%M:%S%.9f"))
        .with_timestamp_tz_format(Some("%Y-%m-%dT%H:%M:%S%.9f%:z"));
    let formatters = batch
        .columns()
        .iter()
        .map(|c| {
            let options = match c.data_type() {
                DataType::Timestamp(TimeUnit::Nanosecond, _) => &nanos,
                _ => &micros,
            };
            ArrayFormatter::try_new(c.as_ref(), options)
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(arrow_err)?;
    // Logical nulls: a NullArray (`SELECT NULL`) or a run-end array has no null buffer.
    let nulls: Vec<_> = batch.columns().iter().map(|c| c.logical_nulls()).collect();
    let mut rows = Vec::with_capacity(batch.num_rows());
    for row in 0..batch.num_rows() {
        let mut cells = Vec::with_capacity(formatters.len());
        for (nulls, formatter) in nulls.iter().zip(&formatters) {
            if nulls.as_ref().is_some_and(|n| n.is_null(row)) {
                cells.push(opts.null.clone());
                continue;
            }
            let text =
                escape_but_newlines(&formatter.value(row).try_to_string().map_err(arrow_err)?);
            cells.push(if text == opts.null {
                format!("'{text}'")
            } else {
                text
            });
        }
        rows.push(cells);
    }
    Ok(rows)
}

/// Control characters but newlines as escapes: a multi-line value (an EXPLAIN plan) prints
/// on several lines of its cell, each but the last ending in `+`, as in psql.
fn escape_but_newlines(s: &str) -> String {
    s.replace("\r\n", "\n")
        .split('\n')
        .map(escape)
        .collect::<Vec<_>>()
        .join("\n")
}

/// A cell's lines, each with whether the value goes on below it (psql marks those with `+`
/// in the column's gutter, where no value can put it).
fn cell_lines(cell: &str) -> Vec<(&str, bool)> {
    let lines: Vec<&str> = cell.split('\n').collect();
    let last = lines.len() - 1;
    lines
        .into_iter()
        .enumerate()
        .map(|(i, l)| (l, i < last))
        .collect()
}

/// The width a cell takes: its widest line.
fn cell_width(cell: &str) -> usize {
    cell_lines(cell)
        .iter()
        .map(|(l, _)| measure_text_width(l))
        .max()
        .unwrap_or(0)
}

/// Tabs, newlines and other control characters as escapes, so one value stays one line.
fn escape(s: &str) -> String {
    if !s.chars().any(char::is_control) {
        return s.to_string();
    }
    let mut escaped = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\n' => escaped.push_str("\\n"),
            '\t' => escaped.push_str("\\t"),
            '\r' => escaped.push_str("\\r"),
            c if c.is_control() => escaped.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => escaped.push(c),
        }
    }
    escaped
}

/// A table's width in characters for these column widths.
fn table_width(widths: &[usize]) -> usize {
    1 + widths.iter().map(|w| w + 3).sum::<usize>()
}

/// Narrows the widest columns until the table fits `limit` (columns keep 3 characters).
fn fit(widths: &mut [usize], limit: usize) {
    while table_width(widths) > limit {
        let Some(widest) = (0..widths.len()).max_by_key(|&i| widths[i]) else {
            return;
        };
        if widths[widest] <= 3 {
            return;
        }
        widths[widest] -= 1;
    }
}

fn border(widths: &[usize]) -> String {
    let mut line = String::from("+");
    for w in widths {
        line.push_str(&"-".repeat(w + 2));
        line.push('+');
    }
    line
}

/// A row as drawn: as many lines as its tallest cell.
fn row_lines(cells: &[String], widths: &[usize], right: &[bool]) -> Vec<String> {
    let split: Vec<Vec<(&str, bool)>> = cells.iter().map(|c| cell_lines(c)).collect();
    let height = split.iter().map(Vec::len).max().unwrap_or(1);
    (0..height)
        .map(|i| {
            let line: Vec<(&str, bool)> = split
                .iter()
                .map(|lines| lines.get(i).copied().unwrap_or(("", false)))
                .collect();
            row_line(&line, widths, right)
        })
        .collect()
}

/// One drawn line: each cell padded to its width, `+` in the gutter of a value that goes on.
fn row_line(cells: &[(&str, bool)], widths: &[usize], right: &[bool]) -> String {
    let mut line = String::from("|");
    for (((cell, goes_on), w), r) in cells.iter().zip(widths).zip(right) {
        let cell = truncate_str(cell, *w, "…");
        line.push(' ');
        line.push_str(&pad(&cell, *w, *r));
        line.push_str(if *goes_on { "+|" } else { " |" });
    }
    line
}

fn pad(text: &str, width: usize, right: bool) -> String {
    let fill = " ".repeat(width.saturating_sub(measure_text_width(text)));
    if right {
        format!("{fill}{text}")
    } else {
        format!("{text}{fill}")
    }
}

fn markdown_header(out: &mut dyn Write, schema: &SchemaRef) -> io::Result<()> {
    let header: Vec<String> = schema
        .fields()
        .iter()
        .map(|f| md_escape(f.name()))
        .collect();
    writeln!(out, "| {} |", header.join(" | "))?;
    writeln!(out, "{}|", "|---".repeat(header.len()))
}

/// Makes a value safe inside a markdown table cell.
fn md_escape(s: &str) -> String {
    escape(s).replace('|', "\\|")
}

/// Writes one batch as delimited text, with the header line if `header`.
fn write_csv(
    out: &mut dyn Write,
    batch: &RecordBatch,
    delimiter: u8,
    header: bool,
) -> io::Result<()> {
    let mut tracked = Tracked(out, None);
    let mut writer = CsvWriterBuilder::new()
        .with_header(header)
        .with_delimiter(delimiter)
        .build(&mut tracked);
    let result = writer.write(batch);
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

/// Writes one batch as JSON (array or line-delimited, per `F`) keeping null keys explicit.
fn write_json<F: JsonFormat>(out: &mut dyn Write, batch: &RecordBatch) -> io::Result<()> {
    let mut writer = JsonWriterBuilder::new()
        .with_explicit_nulls(true)
        .build::<_, F>(out);
    writer
        .write(&string_map_keys(batch).map_err(arrow_err)?)
        .map_err(arrow_err)?;
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
            ..PrintOptions::default()
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
+----+---------+----------------------------------+
| id | name    | ts                               |
+----+---------+----------------------------------+
|  1 | a,\"b\"|c | 2024-01-01T00:00:00.000000+00:00 |
|  2 | NULL    | 2024-01-01T01:00:00.000000+00:00 |
+----+---------+----------------------------------+
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
| 1 | a,\"b\"\\|c | 2024-01-01T00:00:00.000000+00:00 |
| 2 | NULL | 2024-01-01T01:00:00.000000+00:00 |

2 rows
";
        assert_eq!(render_sample(Format::Markdown), expected);
        assert_eq!(md_escape("a|b\r\nc\nd"), "a\\|b\\r\\nc\\nd");
        let o = with(Format::Markdown, Some(1), true, false);
        let got = render(&sample().schema(), &[sample()], &o);
        assert!(
            got.ends_with("2024-01-01T00:00:00.000000+00:00 |\n\n(showing 1 of 2 rows)\n"),
            "{got}"
        );
    }

    /// One-column string batch.
    fn strings(values: Vec<Option<&str>>) -> RecordBatch {
        RecordBatch::try_from_iter([("s", Arc::new(StringArray::from(values)) as ArrayRef)])
            .unwrap()
    }

    /// NULL and the string 'NULL' never look alike, whatever the marker; control characters
    /// stay inside their cell.
    #[test]
    fn null_is_not_the_string_null() {
        let b = strings(vec![None, Some("NULL"), Some(""), Some("a\tb\nc")]);
        let got = render(&b.schema(), std::slice::from_ref(&b), &opts(Format::Table));
        assert!(
            got.contains("| NULL   |\n| 'NULL' |\n|        |\n| a\\tb  +|\n| c      |"),
            "{got}"
        );
        let empty = PrintOptions {
            null: String::new(),
            ..opts(Format::Table)
        };
        let got = render(&b.schema(), &[b], &empty);
        assert!(got.contains("|      |\n| NULL |\n| ''   |"), "{got}");
        // `SELECT NULL`: a NullArray has no null buffer, and is still NULL.
        let b = RecordBatch::try_from_iter([(
            "n",
            Arc::new(arrow::array::NullArray::new(1)) as ArrayRef,
        )])
        .unwrap();
        let got = render(&b.schema(), std::slice::from_ref(&b), &opts(Format::Table));
        assert!(got.contains("| NULL |"), "{got}");
    }

    /// On a terminal, a table wider than it is cut with a marker instead of wrapping.
    #[test]
    fn wide_tables_fit_the_terminal() {
        let long = "x".repeat(100);
        let b = strings(vec![Some(&long), Some("short")]);
        let o = PrintOptions {
            width: Some(30),
            ..opts(Format::Table)
        };
        let got = render(&b.schema(), &[b], &o);
        for line in got.lines().filter(|l| l.starts_with(['|', '+'])) {
            assert_eq!(console::measure_text_width(line), 30, "{got}");
        }
        assert!(got.contains("x… |"), "{got}");
    }

    /// Timestamps show every digit they hold: microseconds, or nanoseconds for a
    /// nanosecond column (a literal), never cut to six.
    #[test]
    fn timestamps_keep_their_digits() {
        let ns = arrow::array::TimestampNanosecondArray::from(vec![1_704_067_200_123_456_789]);
        let b = RecordBatch::try_from_iter([("t", Arc::new(ns) as ArrayRef)]).unwrap();
        let got = render(&b.schema(), std::slice::from_ref(&b), &opts(Format::Table));
        assert!(got.contains("| 2024-01-01T00:00:00.123456789 |"), "{got}");
    }

    /// `\x`: one line per column, records numbered across batches.
    #[test]
    fn expanded_display() {
        let o = PrintOptions {
            expanded: Expanded::On,
            ..opts(Format::Table)
        };
        let got = render(&sample().schema(), &[sample(), sample()], &o);
        assert!(got.starts_with("-[ RECORD 1 ]"), "{got}");
        assert!(
            got.contains("\nid   | 1\nname | a,\"b\"|c\nts   | 2024-01-01T00:00:00.000000+00:00\n"),
            "{got}"
        );
        assert!(got.contains("-[ RECORD 4 ]"), "{got}");
        assert!(
            got.ends_with("| NULL\nts   | 2024-01-01T01:00:00.000000+00:00\n4 rows\n"),
            "{got}"
        );
        // Auto: expanded only when the table would not fit.
        let auto = PrintOptions {
            expanded: Expanded::Auto,
            width: Some(20),
            ..opts(Format::Table)
        };
        assert!(render(&sample().schema(), &[sample()], &auto).starts_with("-[ RECORD 1 ]"));
        let wide = PrintOptions {
            width: Some(200),
            ..auto
        };
        assert!(render(&sample().schema(), &[sample()], &wide).starts_with("+----+"));
    }

    /// A long table is drawn a page at a time; a later, wider page widens the columns from
    /// there on with a rule between.
    #[test]
    fn tables_are_drawn_page_by_page() {
        let first: Vec<Option<&str>> = vec![Some("a"); PAGE];
        let batches = [strings(first), strings(vec![Some("longer")])];
        let got = render(&batches[0].schema(), &batches, &opts(Format::Table));
        let lines: Vec<&str> = got.lines().collect();
        assert_eq!(lines[3], "| a |");
        assert_eq!(lines[3 + PAGE], "+--------+");
        assert_eq!(lines[4 + PAGE], "| longer |");
        assert_eq!(lines[5 + PAGE], "+--------+");
        assert_eq!(lines[6 + PAGE], "1001 rows");
    }
}
