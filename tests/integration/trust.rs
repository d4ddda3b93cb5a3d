//! Right answer or a clear error, never a wrong answer: copies, the shell and tables written
//! by others (issue 13's items that need a process, a file system or Python).

use std::path::Path;

use crate::common::{ok, run, sql, tidemark, warehouse};
use crate::interop::run_py;

/// The commits in a table's log.
fn commits(table: &Path) -> usize {
    std::fs::read_dir(table.join("_delta_log"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".json"))
        })
        .count()
}

#[test]
fn a_merge_copy_with_nothing_new_copies_and_commits_nothing() {
    let (_d, wh) = warehouse();
    sql(
        &wh,
        &[
            "CREATE TABLE s (id INT, v STRING, updated BIGINT)",
            "INSERT INTO s VALUES (1, 'a', 1), (2, 'b', 2), (3, 'c', 2)",
            "COPY INCREMENTAL s INTO t WATERMARK updated MERGE ON (id)",
        ],
    );
    let t = wh.join("main/default/t");
    let before = commits(&t);
    let out = sql(
        &wh,
        &["COPY INCREMENTAL s INTO t WATERMARK updated MERGE ON (id)"],
    );
    assert!(out.contains("nothing_new"), "{out}");
    assert_eq!(commits(&t), before, "a run with nothing new committed");
    // A row that arrives later at the mark (a tie) is still new, and merged once.
    sql(
        &wh,
        &[
            "INSERT INTO s VALUES (4, 'd', 2)",
            "COPY INCREMENTAL s INTO t WATERMARK updated MERGE ON (id)",
        ],
    );
    assert_eq!(
        ok(&wh, "SELECT id, v FROM t ORDER BY id"),
        "id,v\n1,a\n2,b\n3,c\n4,d\n"
    );
    let after = commits(&t);
    assert_eq!(after, before + 1);
    let out = sql(
        &wh,
        &["COPY INCREMENTAL s INTO t WATERMARK updated MERGE ON (id)"],
    );
    assert!(out.contains("nothing_new"), "{out}");
    assert_eq!(commits(&t), after);
}

#[test]
fn control_table_runs_say_what_happened() {
    let (_d, wh) = warehouse();
    sql(
        &wh,
        &[
            "CREATE TABLE a (id INT, ts TIMESTAMP)",
            "INSERT INTO a VALUES (1, '2024-01-01'), (2, '2024-01-02')",
            "CREATE TABLE b (id INT, ts TIMESTAMP)",
            "INSERT INTO b VALUES (1, '2024-01-01')",
            "CREATE TABLE ctl (source_table STRING, target_table STRING, watermark_column STRING, last_watermark TIMESTAMP, active BOOLEAN)",
            "INSERT INTO ctl VALUES ('main.default.a', 'main.default.a2', 'ts', '1970-01-01', true), ('main.default.b', 'main.default.b2', 'ts', '1970-01-01', false)",
        ],
    );
    let out = sql(
        &wh,
        &["COPY INCREMENTAL USING CONTROL TABLE ctl CONCURRENCY 1 DRY RUN"],
    );
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].ends_with(
            "status,started_at,duration_ms,rows_affected,error,rows_to_copy,previous_mark,new_mark"
        ),
        "{out}"
    );
    assert!(
        lines[1].starts_with("1,main.default.a,main.default.a2,ts,dry_run,"),
        "{out}"
    );
    assert!(
        lines[1].ends_with(",0,,2,1970-01-01T00:00:00Z,2024-01-02T00:00:00Z"),
        "a dry run affects no row, and says where it would take the mark: {out}"
    );
    assert!(
        lines[2].starts_with("2,main.default.b,main.default.b2,ts,skipped,"),
        "{out}"
    );
    assert!(!wh.join("main/default/a2").exists());
    let out = sql(&wh, &["COPY INCREMENTAL USING CONTROL TABLE ctl"]);
    assert!(out.contains("main.default.a2,ts,succeeded,"), "{out}");
    assert!(out.contains("main.default.b2,ts,skipped,"), "{out}");
    let out = sql(&wh, &["COPY INCREMENTAL USING CONTROL TABLE ctl"]);
    assert!(out.contains("main.default.a2,ts,nothing_new,"), "{out}");
    assert!(
        !wh.join("main/default/b2").exists(),
        "a paused row was copied"
    );
}

#[test]
fn since_means_what_cast_means() {
    let (_d, wh) = warehouse();
    sql(
        &wh,
        &[
            "CREATE TABLE s (id INT, ts TIMESTAMP, d DATE)",
            "INSERT INTO s VALUES (1, '2025-01-01 00:00:00', '2025-01-01'), (2, '2025-01-01 00:00:01', '2025-01-02'), (3, '2025-01-02 00:00:00', '2025-01-03')",
        ],
    );
    // 1735689600 is 2025-01-01T00:00:00Z in seconds, as CAST(1735689600 AS TIMESTAMP).
    sql(
        &wh,
        &["COPY INCREMENTAL s INTO t WATERMARK ts SINCE 1735689600"],
    );
    assert_eq!(ok(&wh, "SELECT id FROM t ORDER BY id"), "id\n2\n3\n");
    // Fractions of a second are kept exactly.
    sql(
        &wh,
        &["COPY INCREMENTAL s INTO t2 WATERMARK ts SINCE 1735689600.5"],
    );
    assert_eq!(ok(&wh, "SELECT id FROM t2 ORDER BY id"), "id\n2\n3\n");
    // A number is no DATE: an error naming the fix, and no target.
    let out = run(&wh, "COPY INCREMENTAL s INTO t3 WATERMARK d SINCE 20250101");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is not a DATE"), "{err}");
    assert!(!wh.join("main/default/t3").exists());
}

#[test]
fn decimal_watermarks_are_exact() {
    let (_d, wh) = warehouse();
    sql(
        &wh,
        &[
            "CREATE TABLE s (id INT, ver DECIMAL(20, 2))",
            "INSERT INTO s VALUES (1, 9007199254740993.01), (2, 9007199254740993.02)",
            "CREATE TABLE ctl (source_table STRING, target_table STRING, watermark_column STRING, last_watermark STRING)",
            "INSERT INTO ctl VALUES ('main.default.s', 'main.default.t', 'ver', NULL)",
            "COPY INCREMENTAL s INTO t CONTROL TABLE ctl",
        ],
    );
    assert_eq!(
        ok(&wh, "SELECT last_watermark FROM ctl"),
        "last_watermark\n9007199254740993.02\n"
    );
    sql(
        &wh,
        &[
            "INSERT INTO s VALUES (3, 9007199254740993.03), (4, 9007199254740993.02)",
            "COPY INCREMENTAL s INTO t CONTROL TABLE ctl",
        ],
    );
    // The tie at the mark (id 4) and the row above it arrive exactly once.
    assert_eq!(ok(&wh, "SELECT id FROM t ORDER BY id"), "id\n1\n2\n3\n4\n");
    assert_eq!(
        ok(&wh, "SELECT last_watermark FROM ctl"),
        "last_watermark\n9007199254740993.03\n"
    );
    let out = sql(&wh, &["COPY INCREMENTAL s INTO t CONTROL TABLE ctl"]);
    assert!(out.contains("nothing_new"), "{out}");
}

#[test]
fn partitioned_string_sources_copy_on_every_run() {
    let (_d, wh) = warehouse();
    sql(
        &wh,
        &[
            "CREATE TABLE s (id INT, region STRING, ts TIMESTAMP) PARTITIONED BY (region)",
            "INSERT INTO s VALUES (1, 'eu', '2024-01-01'), (2, 'us', '2024-01-02')",
            "COPY INCREMENTAL s INTO t WATERMARK ts",
            "INSERT INTO s VALUES (3, 'eu', '2024-01-03'), (4, 'apac', '2024-01-04')",
            "COPY INCREMENTAL s INTO t WATERMARK ts",
            "INSERT INTO s VALUES (5, 'us', '2024-01-05')",
            "COPY INCREMENTAL s INTO t WATERMARK ts",
        ],
    );
    assert_eq!(
        ok(&wh, "SELECT id, region FROM t ORDER BY id"),
        "id,region\n1,eu\n2,us\n3,eu\n4,apac\n5,us\n"
    );
    // The string partition column itself as the watermark.
    sql(&wh, &["COPY INCREMENTAL s INTO r WATERMARK region"]);
    assert_eq!(ok(&wh, "SELECT count(*) AS n FROM r"), "n\n5\n");
    sql(
        &wh,
        &[
            "INSERT INTO s VALUES (6, 'za', '2024-01-06')",
            "COPY INCREMENTAL s INTO r WATERMARK region",
        ],
    );
    assert_eq!(ok(&wh, "SELECT id FROM r WHERE region = 'za'"), "id\n6\n");
    assert_eq!(ok(&wh, "SELECT count(*) AS n FROM r"), "n\n6\n");
}

/// Every file and directory under `dir` read-only (or writable again).
fn set_read_only(dir: &Path, read_only: bool) {
    let mode = if read_only { "a-w" } else { "a+w" };
    let st = std::process::Command::new("chmod")
        .args(["-R", mode])
        .arg(dir)
        .status()
        .unwrap();
    assert!(st.success());
}

#[test]
fn a_read_only_warehouse_reads_and_refuses_every_write_by_path() {
    let (dir, wh) = warehouse();
    sql(
        &wh,
        &[
            "CREATE TABLE t (id INT, s STRING)",
            "INSERT INTO t VALUES (1, 'a')",
            "CREATE TABLE ctl (source_table STRING, target_table STRING, watermark_column STRING, last_watermark BIGINT)",
            "INSERT INTO ctl VALUES ('t', 't2', 'id', NULL)",
        ],
    );
    // Root ignores permissions: run tidemark as `nobody` then (the tests run as root in CI).
    let root = std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    let as_reader = |stmt: &str| {
        let bin = assert_cmd::cargo::cargo_bin("tidemark");
        let mut cmd = if root {
            let mut c = std::process::Command::new("setpriv");
            c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
                .arg(&bin);
            c
        } else {
            std::process::Command::new(&bin)
        };
        cmd.arg(&wh)
            .args(["--format", "csv", "-c", stmt])
            .env("HOME", dir.path())
            .env_remove("TIDEMARK_WAREHOUSE")
            .output()
            .unwrap()
    };
    set_read_only(&wh, true);
    let mode = std::process::Command::new("chmod")
        .args(["755"])
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(mode.success());
    let before = ok(&wh, "SELECT * FROM t");
    let out = as_reader("SELECT * FROM t");
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), before);
    let dry = as_reader("COPY INCREMENTAL t INTO t2 WATERMARK id DRY RUN");
    assert!(dry.status.success(), "{dry:?}");
    for stmt in [
        "INSERT INTO t VALUES (2, 'b')",
        "UPDATE t SET s = 'z'",
        "DELETE FROM t",
        "MERGE INTO t USING (SELECT 1 AS id) s ON t.id = s.id WHEN MATCHED THEN DELETE",
        "CREATE TABLE u (id INT)",
        "CREATE TABLE u AS SELECT 1 AS id",
        "DROP TABLE t",
        "ALTER TABLE t ADD COLUMN n INT DEFAULT 1",
        "OPTIMIZE t",
        "COPY INCREMENTAL t INTO t2 WATERMARK id",
        "COPY INCREMENTAL USING CONTROL TABLE ctl",
        "CREATE SCHEMA s2",
    ] {
        let out = as_reader(stmt);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stmt}: {err}");
        assert!(
            err.contains(&format!("cannot write in {}", wh.display()))
                && err.contains("nothing was changed")
                && !err.contains("panicked"),
            "{stmt}: {err}"
        );
    }
    set_read_only(&wh, false);
    assert_eq!(ok(&wh, "SELECT * FROM t"), before);
    assert!(!wh.join("main/default/t2").exists() && !wh.join("main/default/u").exists());
    // A single read-only table in a writable warehouse: its writes are refused by its path.
    set_read_only(&wh.join("main/default/t"), true);
    let out = as_reader("INSERT INTO t VALUES (2, 'b')");
    let err = String::from_utf8_lossy(&out.stderr);
    let table_dir = wh.join("main/default/t");
    assert!(
        out.status.code() == Some(1)
            && err.contains(&format!("cannot write in {}", table_dir.display())),
        "{err}"
    );
    for stmt in [
        "OPTIMIZE t",
        "ALTER TABLE t SET TBLPROPERTIES ('a' = 'b')",
        "COPY INCREMENTAL ctl INTO t WATERMARK source_table",
    ] {
        let out = as_reader(stmt);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.code() == Some(1) && !err.contains("panicked"),
            "{stmt}: {err}"
        );
    }
    set_read_only(&table_dir, false);
    assert_eq!(ok(&wh, "SELECT * FROM t"), before);
}

#[test]
fn a_warehouse_tidemark_cannot_serve_is_refused_and_nothing_is_created() {
    let (dir, _) = warehouse();
    let out = tidemark(Path::new("s3://bucket/wh"))
        .current_dir(dir.path())
        .args(["-c", "CREATE TABLE t (a INT)"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("s3://bucket/wh") && err.contains("not supported"),
        "{err}"
    );
    assert!(
        !dir.path().join("s3:").exists(),
        "a local directory was made"
    );
    let file = dir.path().join("plain-file");
    std::fs::write(&file, "x").unwrap();
    let out = tidemark(&file).args(["-c", "SELECT 1"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("plain-file") && err.contains("not a directory"),
        "{err}"
    );
}

#[test]
fn output_that_cannot_be_written_fails_the_run() {
    let (_d, wh) = warehouse();
    // Maps keyed by numbers are JSON objects with the keys as text.
    let out = tidemark(&wh)
        .args([
            "--format",
            "json",
            "-c",
            "SELECT make_map(1, 'a', 2, 'b') AS m",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "[{\"m\":{\"1\":\"a\",\"2\":\"b\"}}]\n"
    );
    // A full disk under stdout is an error and exit code 1.
    if let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") {
        #[allow(deprecated)]
        let bin = assert_cmd::cargo::cargo_bin("tidemark");
        let out = std::process::Command::new(bin)
            .arg(&wh)
            .args(["-c", "SELECT 1 AS x"])
            .stdout(full)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("cannot write the result"), "{err}");
    }
}

/// A Delta table whose Parquet file Spark-style stores timestamps as INT96, one of them
/// 9999-12-31 (outside the nanosecond range of 1677-2262).
fn int96_table(dir: &Path) {
    run_py(&format!(
        r#"
import json, os, datetime, pyarrow as pa, pyarrow.parquet as pq
d = {dir:?}
os.makedirs(os.path.join(d, "_delta_log"), exist_ok=True)
ts = [datetime.datetime(2024, 1, 1, 0, 0, 0, 1), datetime.datetime(9999, 12, 31, 23, 59, 59, 999999), datetime.datetime(1500, 6, 1)]
t = pa.table({{"id": pa.array([1, 2, 3], pa.int64()), "ts": pa.array(ts, pa.timestamp("us", tz="UTC"))}})
pq.write_table(t, os.path.join(d, "part-0.parquet"), use_deprecated_int96_timestamps=True)
schema = {{"type": "struct", "fields": [
  {{"name": "id", "type": "long", "nullable": True, "metadata": {{}}}},
  {{"name": "ts", "type": "timestamp", "nullable": True, "metadata": {{}}}}]}}
actions = [
  {{"protocol": {{"minReaderVersion": 1, "minWriterVersion": 2}}}},
  {{"metaData": {{"id": "int96-test", "format": {{"provider": "parquet", "options": {{}}}},
    "schemaString": json.dumps(schema), "partitionColumns": [], "configuration": {{}}, "createdTime": 0}}}},
  {{"add": {{"path": "part-0.parquet", "partitionValues": {{}}, "size": os.path.getsize(os.path.join(d, "part-0.parquet")),
    "modificationTime": 0, "dataChange": True}}}},
]
with open(os.path.join(d, "_delta_log", "00000000000000000000.json"), "w") as f:
    f.write("\n".join(json.dumps(a) for a in actions) + "\n")
"#,
        dir = dir.display().to_string()
    ));
}

#[test]
fn int96_timestamps_outside_the_nanosecond_range_are_read_and_copied_exactly() {
    let (_d, wh) = warehouse();
    int96_table(&wh.join("main/default/spark"));
    assert_eq!(
        ok(&wh, "SELECT id, ts FROM spark ORDER BY id"),
        "id,ts\n1,2024-01-01T00:00:00.000001Z\n2,9999-12-31T23:59:59.999999Z\n3,1500-06-01T00:00:00Z\n"
    );
    sql(
        &wh,
        &["COPY INCREMENTAL spark INTO t WATERMARK ts SINCE '2025-01-01'"],
    );
    assert_eq!(
        ok(&wh, "SELECT id, ts FROM t"),
        "id,ts\n2,9999-12-31T23:59:59.999999Z\n"
    );
    sql(&wh, &["COPY INCREMENTAL spark INTO full WATERMARK ts"]);
    assert_eq!(
        ok(&wh, "SELECT id, ts FROM full ORDER BY id"),
        "id,ts\n1,2024-01-01T00:00:00.000001Z\n2,9999-12-31T23:59:59.999999Z\n3,1500-06-01T00:00:00Z\n"
    );
}

#[test]
fn sources_whose_file_names_need_percent_encoding_copy_whole_and_decoded() {
    let (_d, wh) = warehouse();
    sql(
        &wh,
        &[
            "CREATE TABLE s (id INT, ts TIMESTAMP)",
            "INSERT INTO s VALUES (1, '2024-01-01'), (2, '2024-01-02'), (3, '2024-01-03')",
        ],
    );
    // Spark names files with characters the log must percent-encode: `a b%c.parquet` on disk
    // is `a%20b%25c.parquet` in the log.
    let t = wh.join("main/default/s");
    let file = std::fs::read_dir(&t)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .find(|n| n.ends_with(".parquet"))
        .unwrap();
    std::fs::rename(t.join(&file), t.join("a b%c.parquet")).unwrap();
    let log = t.join("_delta_log/00000000000000000001.json");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains(&file));
    std::fs::write(&log, text.replace(&file, "a%20b%25c.parquet")).unwrap();
    // The file straddles the start point: decoded and filtered.
    sql(
        &wh,
        &["COPY INCREMENTAL s INTO t WATERMARK ts SINCE '2024-01-01 12:00:00'"],
    );
    assert_eq!(ok(&wh, "SELECT id FROM t ORDER BY id"), "id\n2\n3\n");
    // Every row above the start: linked whole.
    sql(&wh, &["COPY INCREMENTAL s INTO full WATERMARK ts"]);
    assert_eq!(ok(&wh, "SELECT id FROM full ORDER BY id"), "id\n1\n2\n3\n");
}

#[test]
fn rounded_decimal_statistics_of_other_writers_never_skip_a_row() {
    let (_d, wh) = warehouse();
    ok(&wh, "SELECT 1");
    // Python deltalake logs DECIMAL statistics through float64: 9007199254740999.00 becomes
    // 9007199254740998.0, below the value the file holds.
    let src = wh.join("main/default/src");
    let log = run_py(&format!(
        r#"
import pyarrow as pa, glob
from decimal import Decimal
from deltalake import write_deltalake
t = pa.decimal128(18, 2)
for v in ["9007199254740999.00", "1.00"]:
    write_deltalake({src:?}, pa.table({{"id": pa.array([1 if v != "1.00" else 2]), "amt": pa.array([Decimal(v)], t)}}), mode="append")
print(open(sorted(glob.glob({src:?} + "/_delta_log/*.json"))[0]).read())
"#,
        src = src.display().to_string()
    ));
    assert!(log.contains("9007199254740998"), "{log}");
    assert_eq!(
        ok(&wh, "SELECT id FROM src WHERE amt = 9007199254740999.00"),
        "id\n1\n"
    );
    assert_eq!(
        ok(&wh, "SELECT id FROM src WHERE amt > 9007199254740998.00"),
        "id\n1\n"
    );
    // A copy SINCE just below the row's value copies it (the statistics say the file ends
    // at the mark); a copy by another watermark links the files without those statistics.
    assert_eq!(
        ok(
            &wh,
            "COPY INCREMENTAL src INTO t WATERMARK amt SINCE 9007199254740998.00"
        )
        .lines()
        .nth(1)
        .map(|l| l.split(',').nth(5).map(str::to_string)),
        Some(Some("1".to_string()))
    );
    assert_eq!(
        ok(&wh, "SELECT id, amt FROM t"),
        "id,amt\n1,9007199254740999.00\n"
    );
    ok(&wh, "COPY INCREMENTAL src INTO w WATERMARK id");
    let linked =
        std::fs::read_to_string(wh.join("main/default/w/_delta_log/00000000000000000001.json"))
            .unwrap();
    assert!(
        linked.contains("tm-") && !linked.contains("9007199254740998"),
        "{linked}"
    );
    assert_eq!(
        ok(&wh, "SELECT id FROM w WHERE amt = 9007199254740999.00"),
        "id\n1\n"
    );
}

#[test]
fn wide_decimals_get_no_inexact_statistics_and_others_read_the_table() {
    let (_d, wh) = warehouse();
    sql(
        &wh,
        &[
            "CREATE TABLE d (`unit price` DOUBLE, flag BOOLEAN, amt DECIMAL(20, 2), p STRING) PARTITIONED BY (p)",
            "INSERT INTO d VALUES (1.5, true, 9007199254740993.00, 'x'), (2.5, false, 1.00, 'x')",
        ],
    );
    let log =
        std::fs::read_to_string(wh.join("main/default/d/_delta_log/00000000000000000000.json"))
            .unwrap();
    // Listed back-quoted; not the BOOLEAN, the wide DECIMAL or the partition column.
    assert!(
        log.contains(r#""delta.dataSkippingStatsColumns":"`unit price`""#),
        "{log}"
    );
    let add =
        std::fs::read_to_string(wh.join("main/default/d/_delta_log/00000000000000000001.json"))
            .unwrap();
    assert!(
        !add.contains("9007199254740994"),
        "an inexact statistic: {add}"
    );
    assert_eq!(
        ok(
            &wh,
            "SELECT count(*) AS n FROM d WHERE amt = 9007199254740993.00"
        ),
        "n\n1\n"
    );
    let out = run_py(&format!(
        "from decimal import Decimal\n\
         from deltalake import DeltaTable\n\
         t = DeltaTable({dir:?})\n\
         print(t.to_pyarrow_table(filters=[('amt', '=', Decimal('9007199254740993.00'))]).num_rows)\n",
        dir = wh.join("main/default/d").display().to_string()
    ));
    assert_eq!(out.trim(), "1");
    // A control table whose `active` is not BOOLEAN is an error, not a silent "all active".
    sql(
        &wh,
        &[
            "CREATE TABLE ctl (source_table STRING, target_table STRING, watermark_column STRING, last_watermark STRING, active INT)",
            "INSERT INTO ctl VALUES ('main.default.d', 'main.default.d2', 'amt', NULL, 0)",
        ],
    );
    let out = run(&wh, "COPY INCREMENTAL USING CONTROL TABLE ctl");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("column 'active' is INT; it must be BOOLEAN"),
        "{err}"
    );
    assert!(!wh.join("main/default/d2").exists());
}

#[test]
fn add_column_with_a_default_is_one_commit_that_fills_existing_rows() {
    let (_d, wh) = warehouse();
    sql(
        &wh,
        &[
            "CREATE TABLE a (id INT, p STRING, w DECIMAL(38,2)) PARTITIONED BY (p)",
            "INSERT INTO a VALUES (1, 'x', 1.50), (2, NULL, 2.50)",
            "ALTER TABLE a ADD COLUMNS (n INT DEFAULT 7, s STRING DEFAULT 'd', z DOUBLE)",
        ],
    );
    let log = wh.join("main/default/a/_delta_log");
    assert!(log.join("00000000000000000002.json").exists());
    assert!(!log.join("00000000000000000003.json").exists());
    assert_eq!(
        ok(&wh, "SELECT id, n, s, z FROM a ORDER BY id"),
        "id,n,s,z\n1,7,d,\n2,7,d,\n"
    );
    assert_eq!(
        ok(&wh, "SELECT * FROM a VERSION AS OF 1 ORDER BY id"),
        "id,p,w\n1,x,1.50\n2,,2.50\n"
    );
    // Another reader at the new version sees the values, and the wide decimal still has no
    // (float-rounded) statistics in the rewritten files.
    let py = run_py(&format!(
        r#"
from deltalake import DeltaTable
t = DeltaTable({wh:?} + "/main/default/a", version=2)
print([(r["id"], r["n"], r["s"]) for r in t.to_pyarrow_table().sort_by("id").to_pylist()])
import json
print(sorted({{k for a in __import__("pyarrow").table(t.get_add_actions(flatten=True)).to_pylist() for k, v in a.items() if k.startswith("min.") and v is not None}}))
"#,
        wh = wh.display().to_string()
    ));
    assert_eq!(py, "[(1, 7, 'd'), (2, 7, 'd')]\n['min.id']\n");
}

/// Rewrite table `name`'s first data commit as another writer (Spark, polars) would have
/// logged its NULL values of partition column `p`: as empty strings.
fn log_null_partitions_as_empty(wh: &Path, name: &str) {
    let log = wh.join(format!(
        "main/default/{name}/_delta_log/00000000000000000001.json"
    ));
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains(r#""partitionValues":{"p":null}"#), "{text}");
    std::fs::write(
        &log,
        text.replace(
            r#""partitionValues":{"p":null}"#,
            r#""partitionValues":{"p":""}"#,
        ),
    )
    .unwrap();
}

#[test]
fn update_and_delete_see_empty_partition_values_of_other_writers_as_null() {
    let (_d, wh) = warehouse();
    sql(
        &wh,
        &[
            "CREATE TABLE o (id INT, v STRING, p STRING) PARTITIONED BY (p)",
            "INSERT INTO o VALUES (1, 'a', 'x'), (2, 'b', NULL), (3, 'c', NULL), (4, 'd', NULL)",
        ],
    );
    // As another writer (Spark, polars) logs it: an empty string, which the protocol reads
    // as NULL.
    log_null_partitions_as_empty(&wh, "o");
    assert_eq!(
        ok(&wh, "UPDATE o SET v = 'u' WHERE p IS NULL AND id > 2"),
        "num_affected_rows\n2\n"
    );
    assert_eq!(
        ok(&wh, "DELETE FROM o WHERE p IS NULL AND id = 2"),
        "num_affected_rows,num_deleted_rows\n1,1\n"
    );
    assert_eq!(
        ok(&wh, "SELECT id, v, p FROM o ORDER BY id"),
        "id,v,p\n1,a,x\n3,u,\n4,u,\n"
    );
    assert_eq!(
        ok(&wh, "SELECT count(*) FROM o WHERE p IS NULL"),
        "count(*)\n2\n"
    );

    // MERGE runs on delta-rs' scan, which would read '' as a value: refused with the way
    // out, which then works.
    sql(
        &wh,
        &[
            "CREATE TABLE m (id INT, p STRING) PARTITIONED BY (p)",
            "INSERT INTO m VALUES (1, 'x'), (2, NULL)",
        ],
    );
    log_null_partitions_as_empty(&wh, "m");
    let merge = "MERGE INTO m USING (SELECT 2 AS id) s ON m.id = s.id WHEN MATCHED AND m.p IS NULL THEN DELETE";
    let out = run(&wh, merge);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("UPDATE main.default.m SET p = NULL WHERE p IS NULL"),
        "{err}"
    );
    assert_eq!(ok(&wh, "SELECT count(*) FROM m"), "count(*)\n2\n");
    ok(&wh, "UPDATE main.default.m SET p = NULL WHERE p IS NULL");
    assert_eq!(
        ok(&wh, merge),
        "num_affected_rows,num_updated_rows,num_deleted_rows,num_inserted_rows\n1,0,1,0\n"
    );
    assert_eq!(ok(&wh, "SELECT id, p FROM m"), "id,p\n1,x\n");
}

#[test]
fn empty_partition_values_are_null_for_tidemark_its_copies_and_python() {
    let (_d, wh) = warehouse();
    sql(
        &wh,
        &[
            "CREATE TABLE s (id INT, p STRING) PARTITIONED BY (p)",
            "INSERT INTO s VALUES (1, 'x'), (2, ''), (3, NULL)",
            "COPY INCREMENTAL s INTO t WATERMARK id",
            "COPY INCREMENTAL s INTO u WATERMARK id SINCE 1",
        ],
    );
    for t in ["s", "t", "u"] {
        assert_eq!(
            ok(
                &wh,
                &format!("SELECT id FROM {t} WHERE p IS NULL ORDER BY id")
            ),
            "id\n2\n3\n",
            "{t}"
        );
    }
    let py = run_py(&format!(
        r#"
from deltalake import DeltaTable
for t in ["s", "t"]:
    rows = DeltaTable({wh:?} + "/main/default/" + t).to_pyarrow_table().sort_by("id").to_pylist()
    print(t, [(r["id"], r["p"]) for r in rows])
"#,
        wh = wh.display().to_string()
    ));
    assert_eq!(
        py,
        "s [(1, 'x'), (2, None), (3, None)]\nt [(1, 'x'), (2, None), (3, None)]\n"
    );
}
