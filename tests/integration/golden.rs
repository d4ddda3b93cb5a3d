//! Delta tables that Spark and Databricks wrote: the Delta project's golden tables, as the
//! delta-kernel-rs repository ships them (`tests/data/golden/`, see its README). For each
//! table tidemark must read what the table's own `expected/` data says (an independent
//! reference written by Spark), copy it whole and from a middle value, decoded and as whole
//! files, copy nothing on a second run, and follow the table's history one copy per commit.
//! Tables a correct reader must refuse must be refused. The outcome of every table is
//! declared below; `target/golden-matrix.md` gets the matrix `docs/compatibility.md` shows.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use datafusion::arrow::array::{Array, RecordBatch};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Schema};
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::prelude::ParquetReadOptions;
use tidemark::{Session, Settings};

use crate::common::repo;

/// What a table must give.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Expect {
    /// Read equal to its expected data; copies and replay as checked below.
    Reads,
    /// A reader must refuse it: the error contains this text.
    Refused(&'static str),
    /// Read equal to its expected data but for this column, whose expected values are not
    /// what the Delta protocol says (see `TABLES`).
    ReadsExcept(&'static str),
}

/// Every vendored table and what it must give. Tables not listed fail the test, so a new
/// archive is looked at before it counts.
const TABLES: &[(&str, Expect)] = &[
    ("124-decimal-decode-bug", Expect::Reads),
    ("125-iterator-bug", Expect::Reads),
    ("basic-decimal-table", Expect::Reads),
    ("basic-decimal-table-legacy", Expect::Reads),
    ("basic-with-inserts-deletes-checkpoint", Expect::Reads),
    ("basic-with-inserts-merge", Expect::Reads),
    ("basic-with-inserts-overwrite-restore", Expect::Reads),
    ("basic-with-inserts-updates", Expect::Reads),
    (
        "basic-with-vacuum-protocol-check-feature",
        Expect::Refused("[VacuumProtocolCheck]"),
    ),
    (
        "canonicalized-paths-normal-a",
        Expect::Refused("/some/unqualified/absolute/path not found"),
    ),
    (
        "canonicalized-paths-normal-b",
        Expect::Refused("/some/unqualified/absolute/path not found"),
    ),
    (
        "canonicalized-paths-special-a",
        Expect::Refused("/some/unqualified/with space/p@#h not found"),
    ),
    (
        "canonicalized-paths-special-b",
        Expect::Refused("/some/unqualified/with space/p@#h not found"),
    ),
    ("checkpoint", Expect::Refused("at least 8 bytes")),
    ("corrupted-last-checkpoint-kernel", Expect::Reads),
    (
        "data-reader-absolute-paths-escaped-chars",
        Expect::Refused("No table metadata"),
    ),
    ("data-reader-array-complex-objects", Expect::Reads),
    ("data-reader-array-primitives", Expect::Reads),
    ("data-reader-date-types-America", Expect::Reads),
    ("data-reader-date-types-Asia", Expect::Reads),
    ("data-reader-date-types-Etc", Expect::Reads),
    ("data-reader-date-types-Iceland", Expect::Reads),
    ("data-reader-date-types-Jst", Expect::Reads),
    ("data-reader-date-types-Pst", Expect::Reads),
    ("data-reader-date-types-utc", Expect::Reads),
    ("data-reader-escaped-chars", Expect::Reads),
    ("data-reader-map", Expect::Reads),
    ("data-reader-nested-struct", Expect::Reads),
    (
        "data-reader-nullable-field-invalid-schema-key",
        Expect::Reads,
    ),
    // Spark wrote the partition value `2021-09-08 11:11:11` in its session's zone
    // (America/Los_Angeles) and reads it back there; the protocol's timestamps are UTC, as
    // delta-kernel-rs and delta-rs (and Databricks' default UTC session) read it.
    (
        "data-reader-partition-values",
        Expect::ReadsExcept("as_timestamp"),
    ),
    ("data-reader-primitives", Expect::Reads),
    ("data-reader-timestamp_ntz", Expect::Reads),
    ("data-reader-timestamp_ntz-id-mode", Expect::Reads),
    ("data-reader-timestamp_ntz-name-mode", Expect::Reads),
    ("data-skipping-basic-stats-all-types", Expect::Reads),
    (
        "data-skipping-basic-stats-all-types-checkpoint",
        Expect::Reads,
    ),
    (
        "data-skipping-basic-stats-all-types-columnmapping-id",
        Expect::Reads,
    ),
    (
        "data-skipping-basic-stats-all-types-columnmapping-name",
        Expect::Reads,
    ),
    (
        "data-skipping-change-stats-collected-across-versions",
        Expect::Reads,
    ),
    ("data-skipping-partition-and-data-column", Expect::Reads),
    ("decimal-various-scale-precision", Expect::Reads),
    (
        "delete-re-add-same-file-different-transactions",
        Expect::Refused("at least 8 bytes"),
    ),
    ("deltalog-commit-info", Expect::Refused("schemaString")),
    ("deltalog-getChanges", Expect::Reads),
    ("deltalog-invalid-protocol-version", Expect::Refused("")),
    (
        "deltalog-state-reconstruction-from-checkpoint-missing-metadata",
        Expect::Refused(""),
    ),
    (
        "deltalog-state-reconstruction-from-checkpoint-missing-protocol",
        Expect::Refused(""),
    ),
    (
        "deltalog-state-reconstruction-without-metadata",
        Expect::Refused(""),
    ),
    (
        "deltalog-state-reconstruction-without-protocol",
        Expect::Refused(""),
    ),
    ("dv-partitioned-with-checkpoint", Expect::Reads),
    ("dv-with-columnmapping", Expect::Reads),
    ("kernel-timestamp-int96", Expect::Reads),
    ("kernel-timestamp-pst", Expect::Reads),
    ("kernel-timestamp-timestamp_micros", Expect::Reads),
    ("kernel-timestamp-timestamp_millis", Expect::Reads),
    ("log-replay-dv-key-cases", Expect::Reads),
    ("log-replay-latest-metadata-protocol", Expect::Reads),
    ("log-replay-special-characters", Expect::Reads),
    ("log-replay-special-characters-a", Expect::Reads),
    (
        "log-replay-special-characters-b",
        Expect::Refused("special p@#h not found"),
    ),
    ("multi-part-checkpoint", Expect::Reads),
    ("no-delta-log-folder", Expect::Refused("")),
    ("only-checkpoint-files", Expect::Reads),
    ("parquet-all-types", Expect::Reads),
    ("parquet-all-types-legacy-format", Expect::Reads),
    ("snapshot-data0", Expect::Reads),
    ("snapshot-data1", Expect::Reads),
    ("snapshot-data2", Expect::Reads),
    ("snapshot-data2-deleted", Expect::Reads),
    ("snapshot-data3", Expect::Reads),
    ("snapshot-repartitioned", Expect::Reads),
    ("snapshot-vacuumed", Expect::Reads),
    ("table-with-columnmapping-mode-id", Expect::Reads),
    ("table-with-columnmapping-mode-name", Expect::Reads),
    ("time-travel-partition-changes-a", Expect::Reads),
    ("time-travel-partition-changes-b", Expect::Reads),
    ("time-travel-schema-changes-a", Expect::Reads),
    ("time-travel-schema-changes-b", Expect::Reads),
    ("time-travel-start", Expect::Reads),
    ("time-travel-start-start20", Expect::Reads),
    ("time-travel-start-start20-start40", Expect::Reads),
    ("update-deleted-directory", Expect::Refused("schemaString")),
    ("v2-checkpoint-json", Expect::Reads),
    ("v2-checkpoint-parquet", Expect::Reads),
    ("versions-not-contiguous", Expect::Refused("")),
];

fn golden_dir() -> PathBuf {
    repo().join("tests/data/golden")
}

/// Unpack one archive; returns the table's directory (holding `delta/` and maybe `expected/`).
pub(crate) fn unpack(name: &str, into: &Path) -> PathBuf {
    let file = std::fs::File::open(golden_dir().join(format!("{name}.tar.zst"))).unwrap();
    let decoder = zstd::Decoder::new(file).unwrap();
    tar::Archive::new(decoder).unpack(into).unwrap();
    into.join(name)
}

/// Rows as sorted strings, each column cast to the type `like` gives it (the expected data's
/// types: Spark's, which tidemark's must convert to without loss).
fn canon(batches: &[RecordBatch], like: &Schema) -> Result<Vec<String>, String> {
    let opts = FormatOptions::default().with_null("NULL");
    let mut rows = vec![];
    for b in batches {
        let schema = b.schema();
        let mut cols = vec![];
        for f in like.fields() {
            let i = schema
                .fields()
                .iter()
                .position(|g| g.name() == f.name())
                .or_else(|| {
                    schema
                        .fields()
                        .iter()
                        .position(|g| g.name().eq_ignore_ascii_case(f.name()))
                })
                .ok_or_else(|| format!("no column `{}` in {schema}", f.name()))?;
            let c = cast(b.column(i), f.data_type())
                .map_err(|e| format!("column `{}` as {}: {e}", f.name(), f.data_type()))?;
            cols.push(c);
        }
        let fmts = cols
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref() as &dyn Array, &opts))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| e.to_string())?;
        for r in 0..b.num_rows() {
            let cells: Vec<String> = fmts.iter().map(|f| f.value(r).to_string()).collect();
            rows.push(cells.join(" | "));
        }
    }
    rows.sort();
    Ok(rows)
}

/// A short description of how two sorted row lists differ.
fn diff(actual: &[String], expected: &[String]) -> Option<String> {
    if actual == expected {
        return None;
    }
    let mut a: BTreeMap<&str, i64> = BTreeMap::new();
    for r in actual {
        *a.entry(r).or_default() += 1;
    }
    for r in expected {
        *a.entry(r).or_default() -= 1;
    }
    let extra: Vec<_> = a.iter().filter(|(_, n)| **n > 0).take(3).collect();
    let missing: Vec<_> = a.iter().filter(|(_, n)| **n < 0).take(3).collect();
    Some(format!(
        "{} rows, expected {}; extra {extra:?}; missing {missing:?}",
        actual.len(),
        expected.len()
    ))
}

async fn query(s: &mut Session, sql: &str) -> Result<(Schema, Vec<RecordBatch>), String> {
    let out = tidemark::run(s, sql).await.map_err(|e| e.to_string())?;
    Ok((out.schema.as_ref().clone(), out.batches))
}

async fn count(s: &mut Session, sql: &str) -> Result<i64, String> {
    let (_, b) = query(s, sql).await?;
    let c = cast(b[0].column(0), &DataType::Int64).map_err(|e| e.to_string())?;
    Ok(c.as_any()
        .downcast_ref::<datafusion::arrow::array::Int64Array>()
        .unwrap()
        .value(0))
}

/// A watermark column of the table: its first top-level column of a type copies order by
/// (timestamps, dates, integers, decimals, strings, in that preference).
fn watermark(schema: &Schema) -> Option<String> {
    let rank = |t: &DataType| match t {
        DataType::Timestamp(..) => Some(0),
        DataType::Date32 => Some(1),
        DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64 => Some(2),
        DataType::Decimal128(..) => Some(3),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => Some(4),
        DataType::Dictionary(_, v) if v.is_string() => Some(4),
        _ => None,
    };
    schema
        .fields()
        .iter()
        .filter_map(|f| rank(f.data_type()).map(|r| (r, f.name().clone())))
        .min_by_key(|(r, _)| *r)
        .map(|(_, n)| n)
}

fn ident(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

/// The outcome of one table, for the matrix.
#[derive(Default)]
struct Outcome {
    read: String,
    copies: String,
    replay: String,
    failures: Vec<String>,
}

impl Outcome {
    fn fail(&mut self, what: String) {
        self.failures.push(what);
    }
}

fn session(wh: &Path, whole_files: bool) -> Session {
    Session::new(
        wh,
        Settings {
            whole_files,
            ..Settings::default()
        },
    )
}

/// Full copy, a second run, a copy from a middle value; decoded and with whole files.
async fn check_copies(wh: &Path, src: &str, wm: &str, like: &Schema, out: &mut Outcome) {
    let w = ident(wm);
    for whole in [true, false] {
        let mut s = session(wh, whole);
        let tag = if whole { "whole" } else { "decoded" };
        let full = format!("c_full_{tag}");
        let copy = format!("COPY INCREMENTAL {src} INTO {full} WATERMARK {w}");
        if let Err(e) = query(&mut s, &copy).await {
            out.fail(format!("full copy ({tag}): {e}"));
            continue;
        }
        let reference = query(
            &mut s,
            &format!("SELECT * FROM {src} WHERE {w} IS NOT NULL"),
        )
        .await
        .and_then(|(_, b)| canon(&b, like));
        let copied = query(&mut s, &format!("SELECT * FROM {full}"))
            .await
            .and_then(|(_, b)| canon(&b, like));
        match (copied, reference) {
            (Ok(c), Ok(r)) => {
                if let Some(d) = diff(&c, &r) {
                    out.fail(format!("full copy ({tag}): {d}"));
                }
            }
            (c, r) => out.fail(format!("full copy ({tag}): {c:?} / {r:?}")),
        }
        let version = |s: &Session, t: &str| {
            let log = s
                .warehouse()
                .root()
                .local()
                .unwrap()
                .join("main/default")
                .join(t)
                .join("_delta_log");
            std::fs::read_dir(log)
                .map(|d| {
                    d.filter(|e| {
                        e.as_ref()
                            .is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".json"))
                    })
                    .count()
                })
                .unwrap_or(0)
        };
        let before = version(&s, &full);
        match query(&mut s, &copy).await {
            Ok((_, b)) => {
                let rows = b
                    .first()
                    .and_then(|f| canon(&b, &f.schema()).ok())
                    .unwrap_or_default()
                    .join("\n");
                if !rows.contains("nothing_new") || version(&s, &full) != before {
                    out.fail(format!("second run ({tag}) was not a no-op: {rows}"));
                }
            }
            Err(e) => out.fail(format!("second run ({tag}): {e}")),
        }
        // From the middle value: rows above it.
        let n = count(&mut s, &format!("SELECT count({w}) FROM {src}"))
            .await
            .unwrap_or(0);
        if n < 2 {
            continue;
        }
        let mid = format!("c_mid_{tag}");
        let steps = [
            format!(
                "DECLARE OR REPLACE VARIABLE m = (SELECT {w} FROM {src} WHERE {w} IS NOT NULL ORDER BY {w} LIMIT 1 OFFSET {})",
                n / 2
            ),
            format!("COPY INCREMENTAL {src} INTO {mid} WATERMARK {w} SINCE m"),
        ];
        let mut failed = false;
        for step in &steps {
            if let Err(e) = query(&mut s, step).await {
                out.fail(format!("copy from the middle ({tag}): {e}"));
                failed = true;
                break;
            }
        }
        if failed {
            continue;
        }
        let reference = query(&mut s, &format!("SELECT * FROM {src} WHERE {w} > m"))
            .await
            .and_then(|(_, b)| canon(&b, like));
        let copied = query(&mut s, &format!("SELECT * FROM {mid}"))
            .await
            .and_then(|(_, b)| canon(&b, like));
        match (copied, reference) {
            (Ok(c), Ok(r)) => {
                if let Some(d) = diff(&c, &r) {
                    out.fail(format!("copy from the middle ({tag}): {d}"));
                }
            }
            // Nothing above the middle value: no target was created.
            (Err(e), Ok(r)) if r.is_empty() && e.contains("not found") => {}
            (c, r) => out.fail(format!("copy from the middle ({tag}): {c:?} / {r:?}")),
        }
    }
    if out.failures.is_empty() {
        out.copies = "full, from the middle, second run: decoded and whole files".into();
    }
}

/// The table's JSON commits, by version, if the log has every one from 0.
fn commits(delta: &Path) -> Option<Vec<PathBuf>> {
    let mut found: Vec<(u64, PathBuf)> = std::fs::read_dir(delta.join("_delta_log"))
        .ok()?
        .filter_map(|e| {
            let p = e.ok()?.path();
            let name = p.file_name()?.to_str()?.to_string();
            let v = name.strip_suffix(".json")?.parse().ok()?;
            Some((v, p))
        })
        .collect();
    found.sort();
    if found.iter().enumerate().all(|(i, (v, _))| *v == i as u64) && found.len() > 1 {
        Some(found.into_iter().map(|(_, p)| p).collect())
    } else {
        None
    }
}

/// The first file some commit adds that is not there with its logged size (vacuumed later, or
/// a log-only test table), if any.
fn missing_file(log: &[PathBuf], delta: &Path) -> Option<String> {
    for commit in log {
        for line in std::fs::read_to_string(commit).unwrap().lines() {
            let action: serde_json::Value = serde_json::from_str(line).unwrap();
            let Some(add) = action.get("add") else {
                continue;
            };
            let path = add["path"].as_str().unwrap_or_default();
            let decoded = url::Url::parse("file:///")
                .unwrap()
                .join(path)
                .ok()
                .and_then(|u| u.to_file_path().ok())
                .map(|p| p.strip_prefix("/").unwrap_or(&p).to_path_buf());
            let size = add["size"].as_u64();
            let there = decoded
                .and_then(|p| std::fs::metadata(delta.join(p)).ok())
                .is_some_and(|m| Some(m.len()) == size);
            if !there {
                return Some(path.to_string());
            }
        }
    }
    None
}

/// Copy the table's files (with its log or not) into `to`.
fn copy_files(from: &Path, to: &Path, with_log: bool) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let name = e.file_name();
        if name == "_delta_log" && !with_log {
            continue;
        }
        if e.file_type().unwrap().is_dir() {
            copy_files(&e.path(), &to.join(&name), true);
        } else {
            std::fs::copy(e.path(), to.join(&name)).unwrap();
        }
    }
}

/// Follow the table's history: after each of its commits, one copy; the target must hold
/// what a watermark copy of each snapshot in turn holds (computed here from the snapshots:
/// rows above the running mark, and rows at the mark beyond those already copied).
async fn check_replay(wh: &Path, delta: &Path, out: &mut Outcome) {
    let Some(log) = commits(delta) else {
        out.replay = "not run: one commit, or the log does not keep every commit".into();
        return;
    };
    if let Some(gone) = missing_file(&log, delta) {
        out.replay = format!("not run: a file of an earlier version is gone ({gone})");
        return;
    }
    let src_dir = wh.join("main/default/r_src");
    copy_files(delta, &src_dir, false);
    std::fs::create_dir_all(src_dir.join("_delta_log")).unwrap();
    let mut expected: Vec<String> = vec![];
    let mut mark: Option<String> = None; // the running mark, as an SQL literal-free variable
    let mut wm: Option<(String, Schema)> = None;
    for (v, commit) in log.iter().enumerate() {
        std::fs::copy(
            commit,
            src_dir.join("_delta_log").join(commit.file_name().unwrap()),
        )
        .unwrap();
        let mut s = session(wh, v % 2 == 0);
        let Ok((schema, _)) = query(&mut s, "SELECT * FROM r_src LIMIT 0").await else {
            continue; // no table yet at this version (e.g. metadata only later)
        };
        if wm.is_none() {
            match watermark(&schema) {
                Some(w) => wm = Some((w, schema.clone())),
                None => {
                    out.replay = "not run: no watermark column".into();
                    return;
                }
            }
        }
        let (w, like) = wm.clone().unwrap();
        if let Some(gone) = like
            .fields()
            .iter()
            .find(|f| schema.field_with_name(f.name()).is_err())
        {
            out.replay = format!(
                "{v} of {} commits, one copy each; stopped where column `{}` leaves the source",
                log.len(),
                gone.name()
            );
            return;
        }
        let wq = ident(&w);
        // What this copy must add: rows above the mark; rows at the mark beyond the ones the
        // target has.
        let mut add = vec![];
        let above = match &mark {
            None => format!("SELECT * FROM r_src WHERE {wq} IS NOT NULL"),
            Some(m) => format!("SELECT * FROM r_src WHERE {wq} > {m}"),
        };
        if let Some(m) = &mark {
            let at_src = query(&mut s, &format!("SELECT * FROM r_src WHERE {wq} = {m}"))
                .await
                .and_then(|(_, b)| canon(&b, &like));
            let Ok(mut at_src) = at_src else {
                out.fail(format!("replay v{v}: {at_src:?}"));
                return;
            };
            // The expected target's rows at the mark, as canon strings.
            let at_tgt = query(&mut s, &format!("SELECT * FROM r_tgt WHERE {wq} = {m}"))
                .await
                .and_then(|(_, b)| canon(&b, &like))
                .unwrap_or_default();
            for r in at_tgt {
                if let Some(i) = at_src.iter().position(|x| *x == r) {
                    at_src.remove(i);
                }
            }
            add.extend(at_src);
        }
        match query(&mut s, &above)
            .await
            .and_then(|(_, b)| canon(&b, &like))
        {
            Ok(rows) => add.extend(rows),
            Err(e) => {
                out.fail(format!("replay v{v}: reading the source: {e}"));
                return;
            }
        }
        let next_mark = format!(
            "DECLARE OR REPLACE VARIABLE next_mark = (SELECT max({wq}) FROM r_src{})",
            mark.as_ref()
                .map(|m| format!(" WHERE {wq} > {m}"))
                .unwrap_or_default()
        );
        let copy = format!("COPY INCREMENTAL r_src INTO r_tgt WATERMARK {wq}");
        if let Err(e) = query(&mut s, &copy).await {
            out.fail(format!("replay v{v}: {e}"));
            return;
        }
        expected.extend(add);
        expected.sort();
        let got = query(&mut s, "SELECT * FROM r_tgt")
            .await
            .and_then(|(_, b)| canon(&b, &like));
        match got {
            Ok(got) => {
                if let Some(d) = diff(&got, &expected) {
                    out.fail(format!("replay after v{v}: {d}"));
                    return;
                }
            }
            Err(e) if expected.is_empty() && e.contains("not found") => {}
            Err(e) => {
                out.fail(format!("replay after v{v}: {e}"));
                return;
            }
        }
        // The mark moves to the highest watermark above it, kept as a literal of the column's
        // type through a SQL expression the next session evaluates.
        if let Err(e) = query(&mut s, &next_mark).await {
            out.fail(format!("replay v{v}: {e}"));
            return;
        }
        let b = query(&mut s, "SELECT CAST(next_mark AS STRING)")
            .await
            .map(|(_, b)| b)
            .unwrap_or_default();
        let value = b
            .first()
            .and_then(|b| canon(std::slice::from_ref(b), &b.schema()).ok())
            .and_then(|r| r.into_iter().next());
        if let Some(text) = value
            && text != "NULL"
        {
            mark = Some(format!(
                "CAST('{}' AS {})",
                text.replace('\'', "''"),
                sql_type(&like, &w)
            ));
        }
    }
    if out.failures.is_empty() {
        out.replay = format!("{} commits, one copy each", log.len());
    }
}

/// The SQL type name for a watermark column (for a literal of exactly its type).
fn sql_type(like: &Schema, column: &str) -> String {
    let f = like.field_with_name(column).unwrap();
    match f.data_type() {
        DataType::Timestamp(_, Some(_)) => "TIMESTAMP".into(),
        DataType::Timestamp(_, None) => "TIMESTAMP_NTZ".into(),
        DataType::Date32 => "DATE".into(),
        DataType::Int8 => "TINYINT".into(),
        DataType::Int16 => "SMALLINT".into(),
        DataType::Int32 => "INT".into(),
        DataType::Int64 => "BIGINT".into(),
        DataType::Decimal128(p, s) => format!("DECIMAL({p},{s})"),
        _ => "STRING".into(),
    }
}

async fn check_table(name: &str, expect: Expect) -> Outcome {
    let tmp = tempfile::tempdir().unwrap();
    let dir = unpack(name, tmp.path());
    let wh = tmp.path().join("wh");
    let delta = dir.join("delta");
    let table = wh.join("main/default/src");
    copy_files(&delta, &table, true);
    let mut out = Outcome::default();
    let mut s = session(&wh, true);
    let read = query(&mut s, "SELECT * FROM src").await;
    match (expect, read) {
        (Expect::Refused(text), Err(e)) => {
            if !e.contains(text) {
                out.fail(format!("refused, but not with `{text}`: {e}"));
            }
            out.read = format!("refused: {}", e.lines().next().unwrap_or(""));
            return out;
        }
        (Expect::Refused(_), Ok((_, b))) => {
            let n: usize = b.iter().map(|b| b.num_rows()).sum();
            out.fail(format!("read {n} rows from a table a reader must refuse"));
            return out;
        }
        (_, Err(e)) => {
            out.fail(format!("read: {e}"));
            return out;
        }
        (Expect::Reads | Expect::ReadsExcept(_), Ok((_, batches))) => {
            let expected_dir = dir.join("expected");
            let exp = s
                .ctx()
                .read_parquet(
                    expected_dir.to_str().unwrap(),
                    ParquetReadOptions::default(),
                )
                .await
                .map_err(|e| e.to_string());
            let exp = match exp {
                Ok(df) => {
                    let mut like = df.schema().as_arrow().clone();
                    if let Expect::ReadsExcept(column) = expect {
                        let keep: Vec<_> = like
                            .fields()
                            .iter()
                            .filter(|f| f.name() != column)
                            .cloned()
                            .collect();
                        like = Schema::new(keep);
                    }
                    df.collect()
                        .await
                        .map_err(|e| e.to_string())
                        .and_then(|b| canon(&b, &like))
                        .map(|rows| (like, rows))
                }
                Err(e) => Err(e),
            };
            let (like, expected) = match exp {
                Ok(x) => x,
                Err(e) => {
                    out.fail(format!("expected data: {e}"));
                    return out;
                }
            };
            match canon(&batches, &like) {
                Ok(actual) => match diff(&actual, &expected) {
                    None => out.read = format!("{} rows as expected", actual.len()),
                    Some(d) => {
                        out.fail(format!("read: {d}"));
                        return out;
                    }
                },
                Err(e) => {
                    out.fail(format!("read: {e}"));
                    return out;
                }
            }
        }
    }
    let (schema, _) = query(&mut s, "SELECT * FROM src LIMIT 0").await.unwrap();
    match watermark(&schema) {
        Some(wm) => check_copies(&wh, "src", &wm, &schema, &mut out).await,
        None => out.copies = "not run: no watermark column".into(),
    }
    check_replay(&wh, &delta, &mut out).await;
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn golden_tables_read_copy_and_replay_as_spark_wrote_them() {
    let mut archives: Vec<String> = std::fs::read_dir(golden_dir())
        .unwrap()
        .filter_map(|e| {
            let n = e.ok()?.file_name().to_string_lossy().to_string();
            n.strip_suffix(".tar.zst").map(str::to_string)
        })
        .collect();
    archives.sort();
    let only = std::env::var("TIDEMARK_GOLDEN").ok();
    let mut matrix =
        String::from("| table | read | copies | history replay |\n| --- | --- | --- | --- |\n");
    let mut failures = vec![];
    for name in &archives {
        if only.as_ref().is_some_and(|o| !name.contains(o.as_str())) {
            continue;
        }
        let Some((_, expect)) = TABLES.iter().find(|(n, _)| n == name) else {
            failures.push(format!("{name}: not declared in TABLES"));
            continue;
        };
        let out = check_table(name, *expect).await;
        let status = |s: &str| {
            if s.is_empty() {
                "—".to_string()
            } else {
                s.to_string()
            }
        };
        writeln!(
            matrix,
            "| `{name}` | {} | {} | {} |",
            status(&out.read),
            status(&out.copies),
            status(&out.replay)
        )
        .unwrap();
        for f in out.failures {
            failures.push(format!("{name}: {f}"));
        }
    }
    let _ = std::fs::write(repo().join("target/golden-matrix.md"), &matrix);
    assert!(failures.is_empty(), "{}\n\n{}", failures.join("\n"), matrix);
}

/// Spark's names are case-insensitive: the columns of tables Spark wrote (`tsNtz`, partitioned
/// by `tsNtzPartition`; `IntegerType` ... under column mapping) read the same in any case,
/// back-quoted or not, as in their own spelling.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spark_tables_read_without_regard_to_case() {
    let dir = tempfile::tempdir().unwrap();
    let wh = dir.path().join("wh");
    let mut s = session(&wh, false);
    let pairs = [
        (
            "data-reader-timestamp_ntz",
            "SELECT id, CAST(tsNtz AS STRING), CAST(tsNtzPartition AS STRING) FROM t WHERE tsNtzPartition IS NOT NULL ORDER BY id, tsNtz",
            "SELECT ID, CAST(tsntz AS STRING), CAST(`TSNTZPARTITION` AS STRING) FROM t WHERE tsntzpartition IS NOT NULL ORDER BY Id, TSNTZ",
        ),
        (
            "table-with-columnmapping-mode-name",
            "SELECT IntegerType, StringType, DoubleType FROM t ORDER BY IntegerType",
            "SELECT integertype, t.stringtype, `doubletype` FROM t ORDER BY INTEGERTYPE",
        ),
    ];
    for (name, exact, other) in pairs {
        let table = unpack(name, dir.path());
        query(&mut s, "DROP TABLE IF EXISTS t").await.unwrap();
        let location = table.join("delta");
        query(
            &mut s,
            &format!("CREATE TABLE t LOCATION '{}'", location.display()),
        )
        .await
        .unwrap();
        let (exact_schema, want) = query(&mut s, exact).await.unwrap();
        let (other_schema, got) = query(&mut s, other)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let rows = |b: &[RecordBatch]| {
            datafusion::arrow::util::pretty::pretty_format_batches(b)
                .unwrap()
                .to_string()
                .lines()
                .skip(3)
                .map(str::to_string)
                .collect::<Vec<_>>()
        };
        assert!(
            want.iter().map(|b| b.num_rows()).sum::<usize>() > 0,
            "{name}: no rows"
        );
        assert_eq!(rows(&want), rows(&got), "{name}");
        // Each column keeps the table's spelling in the result.
        let names = |s: &Schema| {
            s.fields()
                .iter()
                .map(|f| f.name().clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            names(&exact_schema)[..1],
            names(&other_schema)[..1],
            "{name}"
        );
    }
}
