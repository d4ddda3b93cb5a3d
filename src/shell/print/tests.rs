//! Unit tests of the printer: paging, widths, NULL, escapes, expanded display.

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
    let table =
        "+----+------+----+\n| id | name | ts |\n+----+------+----+\n+----+------+----+\n0 rows\n";
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
    RecordBatch::try_from_iter([("s", Arc::new(StringArray::from(values)) as ArrayRef)]).unwrap()
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
    let b =
        RecordBatch::try_from_iter([("n", Arc::new(arrow::array::NullArray::new(1)) as ArrayRef)])
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
