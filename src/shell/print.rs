//! Rendering of query results in the shell's output formats, batch by batch as they arrive:
//! memory for printing is a page of a table at most, whatever the row count.

use std::fmt;
use std::io::{self, Write};
use std::str::FromStr;
use std::time::Duration;

mod machine;
use machine::*;

mod draw;
use draw::*;

use arrow::datatypes::SchemaRef;
use arrow::json::writer::{JsonArray, LineDelimited};
use arrow::record_batch::RecordBatch;
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
    /// The session's time zone when it is not UTC: timestamps show in it.
    pub zone: Option<std::sync::Arc<str>>,
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
            zone: None,
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
        let batch = in_zone(&batch.slice(0, take), self.opts.zone.as_ref())?;
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

#[cfg(test)]
mod tests;

/// `batch` with its timestamps in `zone` (the same instants, shown in the session's zone).
fn in_zone(batch: &RecordBatch, zone: Option<&std::sync::Arc<str>>) -> io::Result<RecordBatch> {
    let Some(zone) = zone else {
        return Ok(batch.clone());
    };
    let mut changed = false;
    let mut fields = vec![];
    let mut columns = vec![];
    for (field, column) in batch.schema().fields().iter().zip(batch.columns()) {
        match crate::engine::zone::relabeled(field.data_type(), zone) {
            Some(t) => {
                changed = true;
                columns.push(arrow::compute::cast(column, &t).map_err(arrow_err)?);
                fields.push(field.as_ref().clone().with_data_type(t));
            }
            None => {
                columns.push(column.clone());
                fields.push(field.as_ref().clone());
            }
        }
    }
    if !changed {
        return Ok(batch.clone());
    }
    RecordBatch::try_new(
        std::sync::Arc::new(arrow::datatypes::Schema::new(fields)),
        columns,
    )
    .map_err(arrow_err)
}
