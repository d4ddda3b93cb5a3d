//! Drawing the table format: values to cells (NULL marker, escapes, multi-line cells), widths
//! fitted to the terminal, borders and padded rows, and markdown's header.

use super::*;
use arrow::datatypes::SchemaRef;
use arrow::datatypes::{DataType, TimeUnit};
use arrow::record_batch::RecordBatch;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use console::{measure_text_width, truncate_str};
use std::io::{self, Write};

/// Each row of `batch` as display text: NULL as the null marker, a value reading like the
/// marker quoted, control characters escaped, timestamps with microseconds and their zone.
pub(super) fn cells(batch: &RecordBatch, opts: &PrintOptions) -> io::Result<Vec<Vec<String>>> {
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
pub(super) fn escape_but_newlines(s: &str) -> String {
    s.replace("\r\n", "\n")
        .split('\n')
        .map(escape)
        .collect::<Vec<_>>()
        .join("\n")
}

/// A cell's lines, each with whether the value goes on below it (psql marks those with `+`
/// in the column's gutter, where no value can put it).
pub(super) fn cell_lines(cell: &str) -> Vec<(&str, bool)> {
    let lines: Vec<&str> = cell.split('\n').collect();
    let last = lines.len() - 1;
    lines
        .into_iter()
        .enumerate()
        .map(|(i, l)| (l, i < last))
        .collect()
}

/// The width a cell takes: its widest line.
pub(super) fn cell_width(cell: &str) -> usize {
    cell_lines(cell)
        .iter()
        .map(|(l, _)| measure_text_width(l))
        .max()
        .unwrap_or(0)
}

/// Tabs, newlines and other control characters as escapes, so one value stays one line.
pub(super) fn escape(s: &str) -> String {
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
pub(super) fn table_width(widths: &[usize]) -> usize {
    1 + widths.iter().map(|w| w + 3).sum::<usize>()
}

/// Narrows the widest columns until the table fits `limit` (columns keep 3 characters).
pub(super) fn fit(widths: &mut [usize], limit: usize) {
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

pub(super) fn border(widths: &[usize]) -> String {
    let mut line = String::from("+");
    for w in widths {
        line.push_str(&"-".repeat(w + 2));
        line.push('+');
    }
    line
}

/// A row as drawn: as many lines as its tallest cell.
pub(super) fn row_lines(cells: &[String], widths: &[usize], right: &[bool]) -> Vec<String> {
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
pub(super) fn row_line(cells: &[(&str, bool)], widths: &[usize], right: &[bool]) -> String {
    let mut line = String::from("|");
    for (((cell, goes_on), w), r) in cells.iter().zip(widths).zip(right) {
        let cell = truncate_str(cell, *w, "…");
        line.push(' ');
        line.push_str(&pad(&cell, *w, *r));
        line.push_str(if *goes_on { "+|" } else { " |" });
    }
    line
}

pub(super) fn pad(text: &str, width: usize, right: bool) -> String {
    let fill = " ".repeat(width.saturating_sub(measure_text_width(text)));
    if right {
        format!("{fill}{text}")
    } else {
        format!("{text}{fill}")
    }
}

pub(super) fn markdown_header(out: &mut dyn Write, schema: &SchemaRef) -> io::Result<()> {
    let header: Vec<String> = schema
        .fields()
        .iter()
        .map(|f| md_escape(f.name()))
        .collect();
    writeln!(out, "| {} |", header.join(" | "))?;
    writeln!(out, "{}|", "|---".repeat(header.len()))
}

/// Makes a value safe inside a markdown table cell.
pub(super) fn md_escape(s: &str) -> String {
    escape(s).replace('|', "\\|")
}
