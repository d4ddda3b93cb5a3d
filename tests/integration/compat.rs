//! The compatibility corpus: the documented examples of the Databricks SQL reference, with
//! their documented results, in `tests/compat/*.slt`. Every example runs on its own (a
//! failure does not stop the file), values are shown as Databricks shows them (timestamps
//! `2016-07-30 12:00:00`, arrays `[1,2]`, maps `{1 -> a}`, structs `{"a":1}`, doubles as
//! Java prints them), and the pass rate is reported. `tests/compat/known_failures.txt` lists
//! the examples that do not pass yet: a new failure fails the test, and so does a listed one
//! that passes (take it off the list). `TIDEMARK_COMPAT_REPORT=path` writes the failures with
//! their errors as a Markdown list.

use std::collections::BTreeSet;
use std::path::PathBuf;

use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::datatypes::{DataType, TimeUnit};
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use sqllogictest::{DefaultColumnType, Record};

use crate::slt::Db;

/// A value as Databricks shows it.
fn databricks(a: &dyn Array, i: usize) -> String {
    show(a, i, false)
}

/// `quoted`: inside a struct, where strings are shown as JSON strings.
fn show(a: &dyn Array, i: usize, quoted: bool) -> String {
    if a.is_null(i) {
        return "NULL".into();
    }
    let text = |s: &str| {
        if quoted {
            serde_json::to_string(s).unwrap_or_default()
        } else {
            s.to_string()
        }
    };
    match a.data_type() {
        DataType::Utf8 => text(a.as_string::<i32>().value(i)),
        DataType::LargeUtf8 => text(a.as_string::<i64>().value(i)),
        DataType::Utf8View => text(a.as_string_view().value(i)),
        DataType::Float64 => java_double(
            a.as_primitive::<datafusion::arrow::datatypes::Float64Type>()
                .value(i),
        ),
        DataType::Float32 => java_float(
            a.as_primitive::<datafusion::arrow::datatypes::Float32Type>()
                .value(i),
        ),
        DataType::Timestamp(unit, _) => {
            let v = match unit {
                TimeUnit::Second => a
                    .as_primitive::<datafusion::arrow::datatypes::TimestampSecondType>()
                    .value(i)
                    .saturating_mul(1_000_000),
                TimeUnit::Millisecond => a
                    .as_primitive::<datafusion::arrow::datatypes::TimestampMillisecondType>()
                    .value(i)
                    .saturating_mul(1_000),
                TimeUnit::Microsecond => a
                    .as_primitive::<datafusion::arrow::datatypes::TimestampMicrosecondType>()
                    .value(i),
                TimeUnit::Nanosecond => {
                    a.as_primitive::<datafusion::arrow::datatypes::TimestampNanosecondType>()
                        .value(i)
                        / 1_000
                }
            };
            match chrono::DateTime::from_timestamp_micros(v) {
                Some(t) => {
                    let base = t.format("%Y-%m-%d %H:%M:%S").to_string();
                    let frac = t.timestamp_subsec_micros();
                    if frac == 0 {
                        base
                    } else {
                        format!("{base}.{:06}", frac)
                            .trim_end_matches('0')
                            .to_string()
                    }
                }
                None => v.to_string(),
            }
        }
        DataType::List(_) => list(&a.as_list::<i32>().value(i), quoted),
        DataType::LargeList(_) => list(&a.as_list::<i64>().value(i), quoted),
        DataType::FixedSizeList(_, _) => list(&a.as_fixed_size_list().value(i), quoted),
        DataType::Map(_, _) => {
            let entries = a.as_map().value(i);
            let (keys, values) = (entries.column(0), entries.column(1));
            let shown: Vec<String> = (0..entries.len())
                .map(|j| {
                    format!(
                        "{} -> {}",
                        show(keys.as_ref(), j, quoted),
                        show(values.as_ref(), j, quoted)
                    )
                })
                .collect();
            format!("{{{}}}", shown.join(", "))
        }
        DataType::Struct(fields) => {
            let s = a.as_struct();
            let shown: Vec<String> = fields
                .iter()
                .zip(s.columns())
                .map(|(f, c)| {
                    format!(
                        "{}:{}",
                        serde_json::to_string(f.name()).unwrap_or_default(),
                        show(c.as_ref(), i, true)
                    )
                })
                .collect();
            format!("{{{}}}", shown.join(","))
        }
        _ => {
            let opts = FormatOptions::default().with_null("NULL");
            match ArrayFormatter::try_new(a, &opts) {
                Ok(f) => f.value(i).to_string(),
                Err(e) => format!("<{e}>"),
            }
        }
    }
}

fn list(values: &dyn Array, quoted: bool) -> String {
    let shown: Vec<String> = (0..values.len()).map(|j| show(values, j, quoted)).collect();
    format!("[{}]", shown.join(","))
}

/// A double as Java's `Double.toString` writes it (what Databricks shows).
fn java_double(f: f64) -> String {
    java(f, f.abs(), format!("{f}"), format!("{f:e}"))
}

fn java_float(f: f32) -> String {
    java(f as f64, f.abs() as f64, format!("{f}"), format!("{f:e}"))
}

fn java(f: f64, abs: f64, plain: String, scientific: String) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    if abs == 0.0 || (1e-3..1e7).contains(&abs) {
        return if plain.contains('.') {
            plain
        } else {
            format!("{plain}.0")
        };
    }
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let mantissa = if mantissa.contains('.') {
        mantissa.to_string()
    } else {
        format!("{mantissa}.0")
    };
    format!("{mantissa}E{exponent}")
}

/// Whitespace runs as one space, none after `,` or `:`, and `null` in any case as `NULL`.
#[allow(clippy::ptr_arg)]
fn normalize(s: &String) -> String {
    let collapsed = s.split_ascii_whitespace().collect::<Vec<_>>().join(" ");
    let tight = collapsed.replace(", ", ",").replace(": ", ":");
    let mut out = String::with_capacity(tight.len());
    let mut rest = tight.as_str();
    while let Some(at) = rest.to_ascii_lowercase().find("null") {
        let before = rest[..at].chars().last();
        let after = rest[at + 4..].chars().next();
        let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        out.push_str(&rest[..at]);
        out.push_str(if word(before) || word(after) {
            &rest[at..at + 4]
        } else {
            "NULL"
        });
        rest = &rest[at + 4..];
    }
    out.push_str(rest);
    out
}

/// The rows as expected, where a DOUBLE printed to its last bit may differ from the
/// documented one in its last digits (12 significant digits agree): the order an engine adds values in changes
/// the last bits of a DOUBLE, and Databricks' own answers vary so between runs.
fn close_enough(
    normalizer: sqllogictest::Normalizer,
    actual: &[Vec<String>],
    expected: &[String],
) -> bool {
    if sqllogictest::default_validator(normalizer, actual, expected) {
        return true;
    }
    let actual: Vec<String> = actual
        .iter()
        .map(|row| normalizer(&row.join(" ")))
        .collect();
    let expected: Vec<String> = expected.iter().map(normalizer).collect();
    if actual.len() != expected.len() {
        return false;
    }
    let number = regex::Regex::new(r"-?\d+\.\d+(E-?\d+)?").unwrap();
    actual.iter().zip(&expected).all(|(a, e)| {
        let (na, ne): (Vec<&str>, Vec<&str>) = (
            number.find_iter(a).map(|m| m.as_str()).collect(),
            number.find_iter(e).map(|m| m.as_str()).collect(),
        );
        number.replace_all(a, "#") == number.replace_all(e, "#")
            && na.len() == ne.len()
            && na.iter().zip(&ne).all(|(x, y)| {
                // Only DOUBLEs printed to their last bit (15 digits or more): a DECIMAL
                // shown as 2.350 where 2.35 is documented is a different answer.
                let digits = |s: &str| {
                    s.split('E').next().map_or(0, |m| {
                        m.trim_start_matches(['-', '0', '.'])
                            .chars()
                            .filter(char::is_ascii_digit)
                            .count()
                    })
                };
                match (x.parse::<f64>(), y.parse::<f64>()) {
                    (Ok(a), Ok(b)) if digits(x) >= 15 && digits(y) >= 15 => {
                        (a - b).abs() <= 1e-12 * a.abs().max(b.abs())
                    }
                    _ => x == y,
                }
            })
    })
}

fn key(file: &str, sql: &str) -> String {
    format!(
        "{file}: {}",
        sql.split_whitespace().collect::<Vec<_>>().join(" ")
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn databricks_reference_examples() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/compat");
    let known: BTreeSet<String> = std::fs::read_to_string(dir.join("known_failures.txt"))
        .unwrap_or_default()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(String::from)
        .collect();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/compat exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "slt"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no tests/compat/*.slt");
    let (mut total, mut passed) = (0, 0);
    let mut failures: Vec<(String, String)> = vec![];
    let mut summary = vec![];
    for file in &files {
        let name = file.file_name().unwrap().to_string_lossy().to_string();
        let records = sqllogictest::parse_file::<DefaultColumnType>(file)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut runner = sqllogictest::Runner::new(|| async { Ok(Db::fresh(Some(databricks))) });
        runner.with_normalizer(normalize);
        runner.with_validator(close_enough);
        let (mut file_total, mut file_passed) = (0, 0);
        for record in records {
            let sql = match &record {
                Record::Query { sql, .. } | Record::Statement { sql, .. } => sql.clone(),
                _ => {
                    let _ = runner.run_async(record).await;
                    continue;
                }
            };
            file_total += 1;
            match runner.run_async(record).await {
                Ok(_) => file_passed += 1,
                Err(e) => failures.push((key(&name, &sql), e.display(false).to_string())),
            }
        }
        summary.push(format!("{name}: {file_passed} of {file_total}"));
        total += file_total;
        passed += file_passed;
    }
    println!(
        "Databricks reference examples: {passed} of {total} pass ({:.1}%)\n{}",
        100.0 * passed as f64 / total.max(1) as f64,
        summary.join("\n")
    );
    if let Ok(path) = std::env::var("TIDEMARK_COMPAT_REPORT") {
        let report: Vec<String> = failures
            .iter()
            .map(|(k, e)| {
                let e = e.lines().take(6).collect::<Vec<_>>().join(" / ");
                format!("- `{k}`: {e}")
            })
            .collect();
        std::fs::write(
            path,
            format!(
                "{passed} of {total} pass\n\n{}\n\n{}\n",
                summary.join("\n"),
                report.join("\n")
            ),
        )
        .unwrap();
    }
    let failing: BTreeSet<String> = failures.iter().map(|(k, _)| k.clone()).collect();
    let new: Vec<String> = failures
        .iter()
        .filter(|(k, _)| !known.contains(k))
        .map(|(k, e)| format!("{k}\n    {}", e.replace('\n', "\n    ")))
        .collect();
    let fixed: Vec<&String> = known.difference(&failing).collect();
    assert!(
        new.is_empty() && fixed.is_empty(),
        "examples failing that did not ({}):\n{}\n\nexamples passing now: take them off tests/compat/known_failures.txt ({}):\n{}",
        new.len(),
        new.join("\n"),
        fixed.len(),
        fixed
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn values_are_shown_as_databricks_shows_them() {
    assert_eq!(java_double(1.0), "1.0");
    assert_eq!(java_double(0.5), "0.5");
    assert_eq!(java_double(1e7), "1.0E7");
    assert_eq!(java_double(1.5e-5), "1.5E-5");
    assert_eq!(java_double(-2.25), "-2.25");
    assert_eq!(normalize(&"[1, null,  2]".to_string()), "[1,NULL,2]");
    assert_eq!(normalize(&"nullif annulled".to_string()), "nullif annulled");
}
