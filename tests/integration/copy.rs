//! COPY INCREMENTAL: start points, ties, types, MERGE ON, LOOKBACK, DRY RUN, hostile control
//! rows, and exactly-once under real process kills (fail points) and concurrent runs.

use std::path::Path;

use crate::common::{ok, run, sql, tidemark, warehouse};

/// The single value of a one-row, one-column query.
fn value(wh: &Path, query: &str) -> String {
    let out = ok(wh, query);
    let mut lines = out.lines();
    lines.next();
    lines.next().unwrap_or_default().to_string()
}

/// Source `src` (id, ts with ties, note) and the tutorial-style control table `ctl`.
fn setup(wh: &Path) {
    sql(
        wh,
        &[
            "CREATE TABLE src (id BIGINT NOT NULL, ts TIMESTAMP, note STRING)",
            "INSERT INTO src VALUES (1, '2024-01-01 00:00:01', 'a'), (2, '2024-01-01 00:00:02', 'b')",
            "INSERT INTO src VALUES (3, '2024-01-01 00:00:03', 'c'), (4, '2024-01-01 00:00:03', 'd')",
            "CREATE TABLE ctl (source_table STRING NOT NULL, target_table STRING NOT NULL, watermark_column STRING NOT NULL, last_watermark TIMESTAMP NOT NULL)",
            "INSERT INTO ctl VALUES ('main.default.src', 'main.default.dst', 'ts', '1970-01-01')",
        ],
    );
}

const COPY: &str = "COPY INCREMENTAL FROM src INTO dst CONTROL TABLE ctl";

/// Target equals source as a multiset, and the control row holds the source's maximum.
fn assert_exact(wh: &Path) {
    let diff = value(
        wh,
        "SELECT count(*) FROM ((SELECT id, ts, note, count(*) AS c FROM src GROUP BY 1, 2, 3) EXCEPT (SELECT id, ts, note, count(*) FROM dst GROUP BY 1, 2, 3))",
    );
    assert_eq!(diff, "0", "source rows missing from the target");
    assert_eq!(
        value(wh, "SELECT count(*) FROM dst"),
        value(wh, "SELECT count(*) FROM src WHERE ts IS NOT NULL")
    );
    assert_eq!(
        value(wh, "SELECT count(*) - count(DISTINCT id) FROM dst"),
        "0",
        "duplicated rows"
    );
    assert_eq!(
        value(wh, "SELECT last_watermark FROM ctl"),
        value(wh, "SELECT max(ts) FROM src")
    );
}

#[test]
fn full_load_then_increment_then_nothing_new() {
    let (_d, wh) = warehouse();
    setup(&wh);
    let first = sql(&wh, &[COPY]);
    assert!(first.contains(",4,0,"), "4 rows copied, 0 NULL: {first}");
    assert_exact(&wh);
    // A row tied with the recorded high-water mark, and a newer one.
    sql(
        &wh,
        &[
            "INSERT INTO src VALUES (5, '2024-01-01 00:00:03', 'tie'), (6, '2024-01-01 00:00:04', 'new')",
        ],
    );
    let second = sql(&wh, &[COPY]);
    assert!(
        second.contains("2024-01-01T00:00:03Z,2024-01-01T00:00:04Z,2,"),
        "{second}"
    );
    assert_exact(&wh);
    let third = sql(&wh, &[COPY]);
    assert!(
        third.contains(",0,0,") && third.contains("nothing_new"),
        "{third}"
    );
    assert_exact(&wh);
    // Every run is in the history with its range.
    let history = ok(
        &wh,
        "SELECT rows_copied, status FROM system.tidemark.copy_runs ORDER BY started_at",
    );
    assert_eq!(
        history,
        "rows_copied,status\n4,succeeded\n2,succeeded\n0,nothing_new\n"
    );
}

/// A copy finds its last run whatever commits came after it in its target (another pair's
/// run, an OPTIMIZE, a plain INSERT) or not (its own run last): nothing copied twice.
#[test]
fn a_copy_finds_its_last_run_past_other_commits_of_its_target() {
    let (_d, wh) = warehouse();
    let out = sql(
        &wh,
        &[
            "CREATE TABLE a (id BIGINT NOT NULL, ts TIMESTAMP)",
            "CREATE TABLE b (id BIGINT NOT NULL, ts TIMESTAMP)",
            "INSERT INTO a VALUES (1, '2024-01-01 00:00:01')",
            "INSERT INTO b VALUES (101, '2024-01-01 00:00:01')",
            "COPY INCREMENTAL a INTO dst WATERMARK ts",
            "COPY INCREMENTAL b INTO dst WATERMARK ts",
            "INSERT INTO a VALUES (2, '2024-01-01 00:00:02')",
            "COPY INCREMENTAL a INTO dst WATERMARK ts",
            "OPTIMIZE dst",
            "INSERT INTO dst VALUES (1000, '2030-01-01')",
            "INSERT INTO b VALUES (102, '2024-01-01 00:00:02')",
            "COPY INCREMENTAL b INTO dst WATERMARK ts",
            "COPY INCREMENTAL b INTO dst WATERMARK ts",
        ],
    );
    assert!(out.contains("nothing_new"), "{out}");
    assert_eq!(
        value(&wh, "SELECT count(*) * 1000 + count(DISTINCT id) FROM dst"),
        "5005",
        "{out}"
    );
}

#[test]
fn ties_are_copied_once_whichever_run_they_arrive_in() {
    let (_d, wh) = warehouse();
    setup(&wh);
    sql(&wh, &[COPY]);
    for round in 0..3 {
        sql(
            &wh,
            &[&format!(
                "INSERT INTO src VALUES ({}, '2024-01-01 00:00:03', 'late tie')",
                100 + round
            )],
        );
        sql(&wh, &[COPY]);
        assert_exact(&wh);
    }
}

#[test]
fn microseconds_are_never_confused() {
    let (_d, wh) = warehouse();
    sql(
        &wh,
        &[
            "CREATE TABLE s (id BIGINT, ts TIMESTAMP)",
            "INSERT INTO s VALUES (1, '2024-01-01T00:00:00.000100Z')",
            "INSERT INTO s VALUES (2, '2024-01-01T00:00:00.000900Z')",
            "COPY INCREMENTAL s INTO t WATERMARK ts SINCE TIMESTAMP '2024-01-01T00:00:00.000899Z'",
        ],
    );
    assert_eq!(ok(&wh, "SELECT id FROM t"), "id\n2\n");
    sql(
        &wh,
        &[
            "INSERT INTO s VALUES (3, '2024-01-01T00:00:00.000901Z')",
            "COPY INCREMENTAL s INTO t WATERMARK ts",
        ],
    );
    assert_eq!(ok(&wh, "SELECT id FROM t ORDER BY id"), "id\n2\n3\n");
}

#[test]
fn control_tables_of_other_types() {
    for (ctl_type, wm_type, initial, rows) in [
        ("BIGINT", "BIGINT", "0", "(1, 10), (2, 20)"),
        (
            "DATE",
            "DATE",
            "'1970-01-01'",
            "(1, '2024-01-01'), (2, '2024-02-01')",
        ),
        (
            "STRING",
            "TIMESTAMP",
            "'1970-01-01T00:00:00Z'",
            "(1, '2024-01-01T00:00:00.123456Z'), (2, '2024-01-02')",
        ),
        ("STRING", "BIGINT", "'0'", "(1, 5), (2, 7)"),
        (
            "TIMESTAMP",
            "DATE",
            "'1970-01-01'",
            "(1, '2024-01-01'), (2, '2024-02-01')",
        ),
    ] {
        let (_d, wh) = warehouse();
        sql(
            &wh,
            &[
                &format!("CREATE TABLE s (id INT, w {wm_type})"),
                &format!("INSERT INTO s VALUES {rows}"),
                &format!(
                    "CREATE TABLE c (source_table STRING, target_table STRING, watermark_column STRING, last_watermark {ctl_type})"
                ),
                &format!("INSERT INTO c VALUES ('s', 't', 'w', {initial})"),
                "COPY INCREMENTAL s INTO t CONTROL TABLE c",
                "COPY INCREMENTAL s INTO t CONTROL TABLE c",
            ],
        );
        assert_eq!(
            value(&wh, "SELECT count(*) FROM t"),
            "2",
            "{ctl_type}/{wm_type}"
        );
        let stored = value(&wh, "SELECT last_watermark FROM c");
        let max = value(&wh, "SELECT max(w) FROM s");
        if ctl_type == "TIMESTAMP" && wm_type == "DATE" {
            assert_eq!(stored, format!("{max}T00:00:00Z"));
        } else {
            assert_eq!(stored, max, "{ctl_type}/{wm_type}");
        }
    }
}

#[test]
fn a_control_column_that_cannot_hold_the_mark_is_an_error_before_copying() {
    let (_d, wh) = warehouse();
    setup(&wh);
    sql(
        &wh,
        &[
            "CREATE TABLE c2 (source_table STRING, target_table STRING, last_watermark DATE)",
            "INSERT INTO c2 VALUES ('src', 'dst', '1970-01-01')",
        ],
    );
    let out = run(
        &wh,
        "COPY INCREMENTAL src INTO dst WATERMARK ts CONTROL TABLE c2",
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("last_watermark is DATE") && err.contains("cannot hold it exactly"),
        "{err}"
    );
    assert!(!wh.join("main/default/dst").exists(), "nothing copied");
    let history = ok(&wh, "SELECT status FROM system.tidemark.copy_runs");
    assert_eq!(history, "status\nfailed\n");
}

#[test]
fn missing_or_ambiguous_control_rows_are_errors() {
    let (_d, wh) = warehouse();
    setup(&wh);
    let out = run(&wh, "COPY INCREMENTAL src INTO other CONTROL TABLE ctl");
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("has no row for source_table = 'main.default.src'")
    );
    sql(
        &wh,
        &["INSERT INTO ctl VALUES ('src', 'dst', 'ts', '1970-01-01')"],
    );
    let out = run(&wh, COPY);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("has 2 rows"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!wh.join("main/default/dst").exists());
}

#[test]
fn null_watermarks_are_counted_never_copied() {
    let (_d, wh) = warehouse();
    sql(
        &wh,
        &[
            "CREATE TABLE s (id INT, w BIGINT)",
            "INSERT INTO s VALUES (1, 1), (2, NULL), (3, NULL)",
        ],
    );
    let out = sql(&wh, &["COPY INCREMENTAL s INTO t WATERMARK w"]);
    assert!(out.contains(",1,2,"), "1 copied, 2 NULL: {out}");
    assert_eq!(value(&wh, "SELECT count(*) FROM t"), "1");
    // Nothing new (answered from the logs alone): the NULL rows are still counted.
    let out = sql(&wh, &["COPY INCREMENTAL s INTO t WATERMARK w"]);
    assert!(
        out.contains(",0,2,") && out.contains("nothing_new"),
        "{out}"
    );
    // A new version with only a NULL row: nothing to copy, one more NULL row counted.
    let out = sql(
        &wh,
        &[
            "INSERT INTO s VALUES (4, NULL)",
            "COPY INCREMENTAL s INTO t WATERMARK w",
        ],
    );
    assert!(
        out.contains(",0,3,") && out.contains("nothing_new"),
        "{out}"
    );
    assert_eq!(value(&wh, "SELECT count(*) FROM t"), "1");
}

#[test]
fn merge_on_upserts_the_latest_row_per_key() {
    let (_d, wh) = warehouse();
    sql(
        &wh,
        &[
            "CREATE TABLE s (id INT, v STRING, updated BIGINT)",
            "INSERT INTO s VALUES (1, 'a', 1), (2, 'b', 2)",
            "COPY INCREMENTAL s INTO t WATERMARK updated MERGE ON (id)",
            "INSERT INTO s VALUES (1, 'a2', 3), (1, 'a3', 4), (3, 'c', 5)",
            "COPY INCREMENTAL s INTO t WATERMARK updated MERGE ON (id)",
            "COPY INCREMENTAL s INTO t WATERMARK updated MERGE ON (id)",
        ],
    );
    assert_eq!(
        ok(&wh, "SELECT id, v FROM t ORDER BY id"),
        "id,v\n1,a3\n2,b\n3,c\n"
    );
}

#[test]
fn lookback_catches_late_rows_without_duplicates() {
    let (_d, wh) = warehouse();
    sql(
        &wh,
        &[
            "CREATE TABLE s (id INT, ts TIMESTAMP)",
            "INSERT INTO s VALUES (1, '2024-01-01 10:00:00'), (2, '2024-01-01 12:00:00')",
            "COPY INCREMENTAL s INTO t WATERMARK ts",
            "INSERT INTO s VALUES (3, '2024-01-01 11:30:00')",
            "COPY INCREMENTAL s INTO t WATERMARK ts",
        ],
    );
    assert_eq!(
        value(&wh, "SELECT count(*) FROM t"),
        "2",
        "a late row is below the mark"
    );
    sql(
        &wh,
        &[
            "COPY INCREMENTAL s INTO t WATERMARK ts LOOKBACK INTERVAL '1' HOUR",
            "COPY INCREMENTAL s INTO t WATERMARK ts LOOKBACK INTERVAL '1' HOUR",
        ],
    );
    assert_eq!(ok(&wh, "SELECT id FROM t ORDER BY id"), "id\n1\n2\n3\n");
}

#[test]
fn a_merge_copy_into_a_new_target_with_lookback_counts_every_row_it_copies() {
    let (_d, wh) = warehouse();
    ok(
        &wh,
        "CREATE TABLE s (id INT, ts INT); INSERT INTO s VALUES (1, 1), (2, 2), (3, 3), (4, 4)",
    );
    let out = ok(
        &wh,
        "COPY INCREMENTAL s INTO t WATERMARK ts MERGE ON (id) SINCE 3 LOOKBACK 2",
    );
    let row = out.lines().nth(1).unwrap_or_default().to_string();
    assert_eq!(row.split(',').nth(5), Some("4"), "{out}");
    assert_eq!(value(&wh, "SELECT count(*) FROM t"), "4");
}

#[test]
fn dry_run_changes_nothing() {
    let (_d, wh) = warehouse();
    setup(&wh);
    let out = sql(
        &wh,
        &["COPY INCREMENTAL FROM src INTO dst CONTROL TABLE ctl DRY RUN"],
    );
    assert!(out.contains(",4,0,") && out.contains("dry_run"), "{out}");
    assert!(!wh.join("main/default/dst").exists());
    // The dry run is in the history, as what it was.
    assert_eq!(
        value(&wh, "SELECT status FROM system.tidemark.copy_runs"),
        "dry_run"
    );
    assert_eq!(
        value(&wh, "SELECT last_watermark FROM ctl"),
        "1970-01-01T00:00:00Z"
    );
}

#[test]
fn new_source_columns_reach_the_target_and_type_changes_are_errors() {
    let (_d, wh) = warehouse();
    setup(&wh);
    sql(
        &wh,
        &[
            COPY,
            "ALTER TABLE src ADD COLUMN extra INT",
            "INSERT INTO src VALUES (9, '2024-02-01', 'x', 42)",
            COPY,
        ],
    );
    assert_eq!(
        ok(&wh, "SELECT id, extra FROM dst WHERE extra IS NOT NULL"),
        "id,extra\n9,42\n"
    );
    sql(
        &wh,
        &[
            "CREATE TABLE s2 (id BIGINT, ts TIMESTAMP, note INT)",
            "INSERT INTO s2 VALUES (1, '2030-01-01', 1)",
        ],
    );
    let out = run(&wh, "COPY INCREMENTAL s2 INTO dst WATERMARK ts");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("column 'note' is INT in source main.default.s2 but STRING in target"),
        "{err}"
    );
}

#[test]
fn hostile_control_rows_are_clear_errors_that_touch_nothing() {
    let (_d, wh) = warehouse();
    setup(&wh);
    sql(
        &wh,
        &[
            "INSERT INTO ctl VALUES ('x; DROP TABLE ctl', 'main.default.t1', 'ts', '1970-01-01')",
            "INSERT INTO ctl VALUES ('`it''s`', 'main.default.t2', 'ts', '1970-01-01')",
            "INSERT INTO ctl VALUES ('main.default.src', 'main.default.t3', 'nope', '1970-01-01')",
            "CREATE SCHEMA notables",
        ],
    );
    std::fs::create_dir_all(wh.join("main/notables/plain_dir")).unwrap();
    sql(
        &wh,
        &[
            "INSERT INTO ctl VALUES ('main.notables.plain_dir', 'main.default.t4', 'ts', '1970-01-01')",
        ],
    );
    let out = run(&wh, "COPY INCREMENTAL USING CONTROL TABLE ctl");
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(
            "(source_table 'x; DROP TABLE ctl'): 'x; DROP TABLE ctl' is not a valid name"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("table 'main.default.`it''s`' not found") || stdout.contains("it's"),
        "{stdout}"
    );
    assert!(
        stdout.contains("watermark column 'nope' not found in main.default.src"),
        "{stdout}"
    );
    assert!(
        stdout.contains("main.notables.plain_dir is not a Delta table"),
        "{stdout}"
    );
    // The good row still ran; the control table is intact.
    assert_eq!(value(&wh, "SELECT count(*) FROM ctl"), "5");
    assert_eq!(value(&wh, "SELECT count(*) FROM dst"), "4");
    for t in ["t1", "t2", "t3", "t4"] {
        assert!(
            !wh.join("main/default").join(t).exists(),
            "{t} must not be created"
        );
    }
}

#[test]
fn two_processes_running_the_same_copy_land_each_row_once() {
    let (_d, wh) = warehouse();
    setup(&wh);
    for round in 0..4 {
        sql(
            &wh,
            &[&format!(
                "INSERT INTO src VALUES ({}, '2024-03-0{} 00:00:00', 'r')",
                10 + round,
                round + 1
            )],
        );
        let a = tidemark(&wh).args(["-c", COPY]).spawn_output();
        let b = tidemark(&wh).args(["-c", COPY]).spawn_output();
        let (a, b) = (a.join().expect("thread"), b.join().expect("thread"));
        assert!(
            a.status.success() && b.status.success(),
            "{}\n{}",
            String::from_utf8_lossy(&a.stderr),
            String::from_utf8_lossy(&b.stderr)
        );
        assert_exact(&wh);
    }
}

/// Run a command on a thread, so two can run at the same moment.
trait SpawnOutput {
    fn spawn_output(&mut self) -> std::thread::JoinHandle<std::process::Output>;
}

impl SpawnOutput for assert_cmd::Command {
    fn spawn_output(&mut self) -> std::thread::JoinHandle<std::process::Output> {
        let mut cmd = std::process::Command::new(self.get_program());
        cmd.args(self.get_args());
        for (k, v) in self.get_envs() {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
        std::thread::spawn(move || cmd.output().expect("run tidemark"))
    }
}

#[cfg(feature = "failpoints")]
#[test]
fn a_killed_run_is_repaired_by_the_next_without_loss_or_duplicates() {
    for point in [
        "copy::after_read",
        "copy::after_target_commit",
        "copy::during_control_update",
        "copy::during_history_write",
    ] {
        let (_d, wh) = warehouse();
        setup(&wh);
        sql(&wh, &[COPY]);
        sql(
            &wh,
            &["INSERT INTO src VALUES (5, '2024-01-01 00:00:03', 'tie'), (6, '2024-01-02', 'new')"],
        );
        let out = tidemark(&wh)
            .args(["-c", COPY])
            .env("FAILPOINTS", format!("{point}=return"))
            .output()
            .unwrap();
        assert!(
            !out.status.success() && out.status.code().is_none(),
            "{point}: the process must die: {out:?}"
        );
        // More rows arrive, including one tied with the mark the dead run may have recorded.
        sql(
            &wh,
            &["INSERT INTO src VALUES (7, '2024-01-02', 'tie2'), (8, '2024-01-03', 'newer')"],
        );
        sql(&wh, &[COPY]);
        assert_exact(&wh);
        sql(&wh, &[COPY]);
        assert_exact(&wh);
    }
}

#[test]
fn a_deliberate_reset_is_a_backfill() {
    let (_d, wh) = warehouse();
    setup(&wh);
    sql(
        &wh,
        &[
            COPY,
            "DELETE FROM dst WHERE ts > '2024-01-01 00:00:01'",
            "UPDATE ctl SET last_watermark = '2024-01-01 00:00:01'",
            COPY,
        ],
    );
    assert_exact(&wh);
}

/// Parquet files of a table directory with their hard-link counts.
#[cfg(unix)]
fn link_counts(dir: &Path) -> Vec<u64> {
    use std::os::unix::fs::MetadataExt;
    let mut v: Vec<u64> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "parquet"))
        .map(|e| e.metadata().unwrap().nlink())
        .collect();
    v.sort();
    v
}

#[cfg(unix)]
#[test]
fn whole_files_are_linked_and_only_straddling_files_decoded() {
    let (_d, wh) = warehouse();
    sql(
        &wh,
        &[
            "CREATE TABLE s (id BIGINT, ts TIMESTAMP)",
            "INSERT INTO s VALUES (1, '2024-01-01'), (2, '2024-01-02')",
            "INSERT INTO s VALUES (3, '2024-01-03'), (4, '2024-01-04')",
            "INSERT INTO s VALUES (5, '2024-01-05')",
            "COPY INCREMENTAL s INTO t WATERMARK ts SINCE TIMESTAMP '2024-01-01 12:00:00'",
        ],
    );
    // Two whole files linked (link count 2), the straddling one rewritten with its one row.
    assert_eq!(link_counts(&wh.join("main/default/t")), vec![1, 2, 2]);
    assert_eq!(ok(&wh, "SELECT id FROM t ORDER BY id"), "id\n2\n3\n4\n5\n");
    // With hard links off, whole files are byte copies.
    let out = tidemark(&wh)
        .args([
            "--no-hard-links",
            "-c",
            "COPY INCREMENTAL s INTO t2 WATERMARK ts",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(link_counts(&wh.join("main/default/t2")), vec![1, 1, 1]);
    assert_eq!(value(&wh, "SELECT count(*) FROM t2"), "5");
}

#[test]
fn a_recreated_source_at_the_same_version_is_still_read() {
    // The copy answers "nothing new" from the logs alone when the source is at the version the
    // last run copied. A source dropped and created again starts its versions over: the same
    // version number must not hide its rows.
    let source_version = |out: &str| {
        out.lines()
            .nth(1)
            .unwrap_or_default()
            .split(',')
            .nth(7)
            .unwrap_or_default()
            .to_string()
    };
    let (_d, wh) = warehouse();
    setup(&wh);
    let first = sql(&wh, &[COPY]);
    sql(
        &wh,
        &[
            "DROP TABLE src",
            "CREATE TABLE src (id BIGINT NOT NULL, ts TIMESTAMP, note STRING)",
            "INSERT INTO src VALUES (5, '2024-01-01 00:00:05', 'e'), (6, '2024-01-01 00:00:06', 'f')",
            "INSERT INTO src VALUES (7, '2024-01-01 00:00:07', 'g')",
        ],
    );
    let out = sql(&wh, &[COPY]);
    assert_eq!(
        source_version(&out),
        source_version(&first),
        "the new source is at the old one's version: {first}{out}"
    );
    assert!(out.contains(",3,0,"), "the new rows are copied: {out}");
    assert_eq!(value(&wh, "SELECT count(*) FROM dst"), "7");
    assert_eq!(
        value(&wh, "SELECT last_watermark FROM ctl"),
        "2024-01-01T00:00:07Z"
    );
}

#[test]
fn a_decoding_copy_writes_every_row_once_and_nulls_target_only_columns() {
    // With whole-file copies off, the rows are decoded and written, one writer per partition
    // of the scan, in the target's columns (a column the source lacks is NULL).
    let (_d, wh) = warehouse();
    let mut stmts =
        vec!["CREATE TABLE s (id BIGINT NOT NULL, ts TIMESTAMP, note STRING)".to_string()];
    for f in 0..6 {
        stmts.push(format!(
            "INSERT INTO s SELECT {f} * 1000 + id, to_timestamp(1704067200 + {f} * 1000 + id), 'n' || id FROM range(1000)"
        ));
    }
    stmts.push(
        "CREATE TABLE t (id BIGINT NOT NULL, ts TIMESTAMP, note STRING, extra STRING)".into(),
    );
    let stmts: Vec<&str> = stmts.iter().map(String::as_str).collect();
    sql(&wh, &stmts);
    let out = tidemark(&wh)
        .args(["--format", "csv", "--no-whole-file-copies", "-c"])
        .arg("COPY INCREMENTAL s INTO t WATERMARK ts")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&out.stdout);
    assert!(out.contains(",6000,0,"), "{out}");
    assert!(
        link_counts(&wh.join("main/default/t"))
            .iter()
            .all(|&n| n == 1)
    );
    assert_eq!(
        ok(
            &wh,
            "SELECT count(*) AS n, count(DISTINCT id) AS ids, count(extra) AS extras, min(id) AS lo, max(id) AS hi FROM t"
        ),
        "n,ids,extras,lo,hi\n6000,6000,0,0,5999\n"
    );
    assert_eq!(
        value(
            &wh,
            "SELECT count(*) FROM (SELECT id, ts, note FROM s EXCEPT SELECT id, ts, note FROM t)"
        ),
        "0"
    );
}

#[test]
fn a_decoded_copy_takes_count_and_mark_from_statistics_and_footers() {
    // With whole-file copies off, every row is decoded and written, but the rows to copy are
    // counted from the files' statistics and the new mark read from their footers: both must
    // be exact (Delta's statistics truncate timestamps to milliseconds; NULLs are not copied).
    let (_d, wh) = warehouse();
    sql(
        &wh,
        &[
            "CREATE TABLE s (id BIGINT, ts TIMESTAMP, amount DOUBLE, country STRING)",
            "INSERT INTO s SELECT id, to_timestamp_micros(1704067200000000 + id * 100 + 99), random(), 'FR' FROM range(30000)",
            "INSERT INTO s VALUES (NULL, NULL, 1.0, 'US')",
            "INSERT INTO s SELECT 30000 + id, to_timestamp_micros(1704067203000000 + id * 1000 + 1), random(), 'DE' FROM range(2000)",
        ],
    );
    let copy = |wh: &Path| {
        let out = tidemark(wh)
            .args(["--format", "csv", "--no-whole-file-copies", "-c"])
            .arg("COPY INCREMENTAL s INTO t WATERMARK ts")
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let out = copy(&wh);
    assert!(
        out.contains(",2024-01-01T00:00:04.999001Z,32000,1,"),
        "exact mark, rows and NULLs: {out}"
    );
    let same = "SELECT count(*) FROM (SELECT * FROM s WHERE ts IS NOT NULL EXCEPT SELECT * FROM t)";
    assert_eq!(value(&wh, same), "0");
    assert_eq!(value(&wh, "SELECT count(*) FROM t"), "32000");

    // A row at the mark that arrives later, and one above it: both copied, once.
    sql(
        &wh,
        &[
            "INSERT INTO s VALUES (9000, '2024-01-01 00:00:04.999001', 2.0, 'JP'), (9001, '2024-01-01 00:00:05.5', 3.0, 'JP')",
        ],
    );
    let out = copy(&wh);
    assert!(
        out.contains(",2024-01-01T00:00:05.500Z,2,1,")
            || out.contains(",2024-01-01T00:00:05.5Z,2,1,"),
        "{out}"
    );
    assert_eq!(value(&wh, same), "0");
    assert_eq!(value(&wh, "SELECT count(*) FROM t"), "32002");

    // Columns Snappy did not shrink in the source (random doubles, 240 KB in the largest
    // file) are written uncompressed; the others keep Snappy. Integers that move in small
    // steps (the ids, the timestamps) are delta-encoded, the rest plain or dictionary.
    use datafusion::parquet::basic::{Compression, Encoding};
    for (name, compression, encodings) in parquet_chunks(&wh.join("main/default/t")) {
        let want = match name.as_str() {
            "amount" => Compression::UNCOMPRESSED,
            _ => Compression::SNAPPY,
        };
        assert_eq!(compression, want, "{name}");
        let delta = encodings.contains(&Encoding::DELTA_BINARY_PACKED);
        assert_eq!(delta, name == "id" || name == "ts", "{name}: {encodings:?}");
    }

    // --plain-encodings writes no delta-encoded column.
    let out = tidemark(&wh)
        .args([
            "--format",
            "csv",
            "--no-whole-file-copies",
            "--plain-encodings",
            "-c",
        ])
        .arg("COPY INCREMENTAL s INTO plain WATERMARK ts")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        value(
            &wh,
            "SELECT count(*) FROM (SELECT * FROM plain EXCEPT SELECT * FROM t)"
        ),
        "0"
    );
    let encodings: Vec<Encoding> = parquet_chunks(&wh.join("main/default/plain"))
        .into_iter()
        .flat_map(|(_, _, e)| e)
        .collect();
    assert!(!encodings.is_empty());
    assert!(
        !encodings.contains(&Encoding::DELTA_BINARY_PACKED),
        "{encodings:?}"
    );
}

/// Every column chunk of a table directory's Parquet files, all row groups: the column's
/// name, its compression and its encodings.
fn parquet_chunks(
    dir: &Path,
) -> Vec<(
    String,
    datafusion::parquet::basic::Compression,
    Vec<datafusion::parquet::basic::Encoding>,
)> {
    use datafusion::parquet::file::reader::{FileReader, SerializedFileReader};
    let mut out = vec![];
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "parquet") {
            continue;
        }
        let reader = SerializedFileReader::new(std::fs::File::open(&path).unwrap()).unwrap();
        for rg in reader.metadata().row_groups() {
            for c in rg.columns() {
                out.push((
                    c.column_path().string(),
                    c.compression(),
                    c.encodings().collect(),
                ));
            }
        }
    }
    assert!(!out.is_empty(), "no Parquet file in {}", dir.display());
    out
}

#[test]
fn a_source_dictionary_that_overflowed_is_not_rebuilt() {
    // 300,000 distinct ids in one row group: the source's writer filled its 1 MB dictionary
    // (about 131,000 ids) and wrote the rest plain. The decoded copy must see the overflow
    // (a dictionary of under half the values that did not pay) and delta-encode the ids.
    let (_d, wh) = warehouse();
    sql(
        &wh,
        &[
            "CREATE TABLE s (id BIGINT, ts TIMESTAMP)",
            "INSERT INTO s SELECT id, to_timestamp(1704067200 + id) FROM range(300000)",
        ],
    );
    use datafusion::parquet::basic::Encoding;
    let source = parquet_chunks(&wh.join("main/default/s"));
    let encodings: Vec<Encoding> = source.into_iter().flat_map(|(_, _, e)| e).collect();
    assert!(
        encodings.contains(&Encoding::RLE_DICTIONARY) && encodings.contains(&Encoding::PLAIN),
        "the source should hold dictionary and plain pages: {encodings:?}"
    );
    let out = tidemark(&wh)
        .args(["--format", "csv", "--no-whole-file-copies", "-c"])
        .arg("COPY INCREMENTAL s INTO t WATERMARK ts")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        value(
            &wh,
            "SELECT count(*) FROM (SELECT * FROM s EXCEPT SELECT * FROM t)"
        ),
        "0"
    );
    for (name, _, e) in parquet_chunks(&wh.join("main/default/t")) {
        assert!(e.contains(&Encoding::DELTA_BINARY_PACKED), "{name}: {e:?}");
        assert!(!e.contains(&Encoding::RLE_DICTIONARY), "{name}: {e:?}");
    }
}

#[test]
fn a_target_with_a_check_constraint_gets_only_rows_that_pass() {
    // Whole-file copies are never checked, so a constrained target takes the checked path even
    // when its schema matches the source's: a violating copy fails and copies nothing.
    let (_d, wh) = warehouse();
    sql(
        &wh,
        &[
            "CREATE TABLE s (id BIGINT, ts TIMESTAMP)",
            "INSERT INTO s SELECT id, to_timestamp(1704067200 + id) FROM range(10)",
            "CREATE TABLE t (id BIGINT, ts TIMESTAMP)",
            "ALTER TABLE t ADD CONSTRAINT big CHECK (id > 5)",
        ],
    );
    let out = tidemark(&wh)
        .args([
            "--format",
            "csv",
            "-c",
            "COPY INCREMENTAL s INTO t WATERMARK ts",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("6 rows failed validation check"), "{err}");
    assert_eq!(value(&wh, "SELECT count(*) FROM t"), "0");
    let out = sql(
        &wh,
        &["COPY INCREMENTAL s INTO t WATERMARK ts SINCE TIMESTAMP '2024-01-01 00:00:05'"],
    );
    assert!(out.contains(",4,0,"), "{out}");
    assert_eq!(value(&wh, "SELECT min(id) FROM t"), "6");
}

#[test]
fn a_target_with_comments_or_nullable_columns_still_takes_files_whole() {
    // Column comments, a nullable target column for a NOT NULL source column, other column
    // order and a nullable column the source lacks (read as NULL) change nothing in how the
    // target reads the source's files: they are linked, not decoded. A target column NOT NULL
    // where the source's is nullable, or a target-only column with a default, is not.
    let (_d, wh) = warehouse();
    sql(
        &wh,
        &[
            "CREATE TABLE s (id BIGINT NOT NULL, ts TIMESTAMP, note STRING)",
            "INSERT INTO s VALUES (1, '2024-01-01', 'a'), (2, '2024-01-02', NULL)",
            "INSERT INTO s VALUES (3, '2024-01-03', 'c')",
            "CREATE TABLE t (note STRING, loaded STRING COMMENT 'later', id BIGINT COMMENT 'the id', ts TIMESTAMP COMMENT 'when')",
            "COPY INCREMENTAL s INTO t WATERMARK ts",
            "CREATE TABLE strict (id BIGINT NOT NULL, ts TIMESTAMP NOT NULL, note STRING)",
            "COPY INCREMENTAL s INTO strict WATERMARK ts",
            "CREATE TABLE defaulted (id BIGINT, ts TIMESTAMP, note STRING, batch INT DEFAULT 7)",
            "COPY INCREMENTAL s INTO defaulted WATERMARK ts",
        ],
    );
    assert_eq!(link_counts(&wh.join("main/default/t")), vec![2, 2]);
    assert_eq!(
        ok(&wh, "SELECT id, note, loaded FROM t ORDER BY id"),
        "id,note,loaded\n1,a,\n2,,\n3,c,\n"
    );
    assert_eq!(link_counts(&wh.join("main/default/strict")), vec![1]);
    assert_eq!(value(&wh, "SELECT count(*) FROM strict"), "3");
    assert_eq!(link_counts(&wh.join("main/default/defaulted")), vec![1]);
    assert_eq!(
        value(&wh, "SELECT count(*) FROM defaulted WHERE batch = 7"),
        "3"
    );
    // Another Delta reader sees the same rows, the missing column as NULL.
    if let Some(py) = crate::common::python() {
        let code = format!(
            "from deltalake import DeltaTable\n\
             t = DeltaTable({p:?}).to_pyarrow_table().sort_by('id')\n\
             print(t.column('id').to_pylist(), t.column('loaded').to_pylist(), t.column('note').to_pylist())\n\
             import os, sys\nsys.stdout.flush()\nos._exit(0)\n",
            p = wh.join("main/default/t").display().to_string()
        );
        let out = std::process::Command::new(py)
            .args(["-c", &code])
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            "[1, 2, 3] [None, None, None] ['a', None, 'c']",
            "{out:?}"
        );
    }
}

#[test]
fn a_partitioned_target_gets_its_partition_values() {
    // The source's files mix partition values: a partitioned target cannot take them whole
    // (its partition column would read as NULL). Rows are written into their partitions.
    let (_d, wh) = warehouse();
    sql(
        &wh,
        &[
            "CREATE TABLE s (id BIGINT, ts TIMESTAMP, c STRING)",
            "INSERT INTO s VALUES (1, '2024-01-01', 'FR'), (2, '2024-01-02', 'US'), (3, '2024-01-03', 'FR')",
            "CREATE TABLE t (id BIGINT, ts TIMESTAMP, c STRING) PARTITIONED BY (c)",
            "COPY INCREMENTAL s INTO t WATERMARK ts",
            "INSERT INTO s VALUES (4, '2024-01-04', 'DE')",
            "COPY INCREMENTAL s INTO t WATERMARK ts",
        ],
    );
    assert_eq!(
        ok(&wh, "SELECT id, c FROM t ORDER BY id"),
        "id,c\n1,FR\n2,US\n3,FR\n4,DE\n"
    );
    let mut dirs: Vec<String> = std::fs::read_dir(wh.join("main/default/t"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("c="))
        .collect();
    dirs.sort();
    assert_eq!(dirs, ["c=DE", "c=FR", "c=US"]);
}

#[test]
fn target_only_default_columns_are_filled_on_insert_and_kept_on_update() {
    // A target column the source lacks takes its DEFAULT in inserted rows (APPEND and MERGE
    // ON) and keeps its value in rows a MERGE ON copy updates.
    let (_d, wh) = warehouse();
    sql(
        &wh,
        &[
            "CREATE TABLE s (id BIGINT, v STRING, ts TIMESTAMP)",
            "INSERT INTO s VALUES (1, 'a', '2024-01-01'), (2, 'b', '2024-01-02')",
            "CREATE TABLE m (id BIGINT, v STRING, ts TIMESTAMP, origin STRING NOT NULL DEFAULT 'copy')",
            "COPY INCREMENTAL s INTO m WATERMARK ts MERGE ON (id)",
            "UPDATE m SET origin = 'fixed' WHERE id = 1",
            "INSERT INTO s VALUES (1, 'a2', '2024-01-03'), (3, 'c', '2024-01-04')",
            "COPY INCREMENTAL s INTO m WATERMARK ts MERGE ON (id)",
        ],
    );
    assert_eq!(
        ok(&wh, "SELECT id, v, origin FROM m ORDER BY id"),
        "id,v,origin\n1,a2,fixed\n2,b,copy\n3,c,copy\n"
    );
}

/// A warehouse reached through a symbolic link (`/data -> /mnt/disk`): the scan names files by
/// their real path, and UPDATE, DELETE, MERGE and the job's advances find them in the log.
#[test]
fn a_warehouse_reached_through_a_symbolic_link_is_written_like_any_other() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real");
    std::fs::create_dir_all(&real).unwrap();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    for statement in [
        "CREATE TABLE main.default.s (id BIGINT, v STRING)",
        "INSERT INTO main.default.s VALUES (1, 'a'), (2, 'b'), (3, 'c')",
        "CREATE TABLE main.default.ctl (source_table STRING NOT NULL, target_table STRING NOT NULL, \
         watermark_column STRING NOT NULL, last_watermark BIGINT NOT NULL)",
        "INSERT INTO main.default.ctl VALUES ('main.default.s', 'main.default.d', 'id', 0)",
        "COPY INCREMENTAL USING CONTROL TABLE main.default.ctl",
        "UPDATE main.default.d SET v = 'B' WHERE id = 2",
        "DELETE FROM main.default.d WHERE id = 3",
        "MERGE INTO main.default.d t USING (SELECT 1 AS id, 'A' AS v) s ON t.id = s.id \
         WHEN MATCHED THEN UPDATE SET v = s.v",
    ] {
        ok(&link, statement);
    }
    let out = ok(
        &link,
        "SELECT id, v FROM main.default.d ORDER BY id; SELECT last_watermark FROM main.default.ctl",
    );
    assert_eq!(out, "id,v\n1,A\n2,B\nlast_watermark\n3\n");
}

#[test]
fn targets_fed_small_increments_are_compacted_and_keep_every_row_once() {
    // 70 runs, each adding a file to its target (two to the partitioned one): past 50 small
    // files a run merges them (OPTIMIZE, no data change), and the later runs copy on top.
    // `delta.autoOptimize.autoCompact` = 'false' keeps a target as it is.
    let (_d, wh) = warehouse();
    let script = "CREATE TABLE src (id BIGINT, p STRING);
        INSERT INTO src VALUES (1, 'a');
        CREATE TABLE psrc (id BIGINT, p STRING) PARTITIONED BY (p);
        CREATE TABLE pt (id BIGINT, p STRING) PARTITIONED BY (p);
        COPY INCREMENTAL src INTO kept WATERMARK id;
        ALTER TABLE kept SET TBLPROPERTIES ('delta.autoOptimize.autoCompact' = 'false');
        FOR SELECT * FROM range(70) DO
          INSERT INTO src SELECT max(id) + 1, 'a' FROM src;
          INSERT INTO psrc SELECT s.id, v.q FROM src s, (VALUES ('x'), ('y')) AS v(q) WHERE s.id = (SELECT max(id) FROM src);
          COPY INCREMENTAL src INTO t WATERMARK id;
          COPY INCREMENTAL src INTO kept WATERMARK id;
          COPY INCREMENTAL psrc INTO pt WATERMARK id;
        END FOR;";
    let out = run(&wh, script);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("warning"), "{stderr}");
    let table = |name: &str| wh.join("main/default").join(name);
    let (files, ops) = crate::common::active_files_and_operations(&table("t"));
    assert!(ops.iter().any(|o| o == "OPTIMIZE"), "{ops:?}");
    // 70 before; one after the compaction (at the 50th file or up to ten runs later) and one
    // a run since.
    assert!(files <= 22, "{files} files after the compaction: {ops:?}");
    let (files, ops) = crate::common::active_files_and_operations(&table("pt"));
    assert!(ops.iter().any(|o| o == "OPTIMIZE"), "{ops:?}");
    assert!(
        files < 70,
        "{files} files (140 without compaction): {ops:?}"
    );
    let (files, ops) = crate::common::active_files_and_operations(&table("kept"));
    assert!(!ops.iter().any(|o| o == "OPTIMIZE"), "{ops:?}");
    assert_eq!(files, 71, "one file a run: {ops:?}");
    // Every row once, in tidemark and in Python's deltalake.
    let rows = "SELECT count(*) AS n, count(DISTINCT id) AS d, sum(id) AS s FROM";
    assert_eq!(ok(&wh, &format!("{rows} t")), "n,d,s\n71,71,2556\n");
    assert_eq!(ok(&wh, &format!("{rows} kept")), "n,d,s\n71,71,2556\n");
    assert_eq!(
        ok(
            &wh,
            "SELECT count(*) AS n, count(DISTINCT concat(id, p)) AS d, sum(id) AS s FROM pt"
        ),
        "n,d,s\n140,140,5110\n"
    );
    let read = crate::interop::run_py(&format!(
        "from deltalake import DeltaTable\n\
         for name in ('t', 'pt'):\n\
         \x20   ids = DeltaTable({:?} + '/' + name).to_pyarrow_table().column('id').to_pylist()\n\
         \x20   print(name, len(ids), sum(ids))\n",
        table("").display().to_string().trim_end_matches('/')
    ));
    assert_eq!(read, "t 71 2556\npt 140 5110\n");
    // After the compaction: nothing new is nothing new, and the next rows land once.
    let out = sql(
        &wh,
        &[
            "COPY INCREMENTAL src INTO t WATERMARK id",
            "INSERT INTO src VALUES (72, 'a')",
            "COPY INCREMENTAL src INTO t WATERMARK id",
            "SELECT count(*) AS n, count(DISTINCT id) AS d FROM t",
        ],
    );
    assert!(out.contains("nothing_new"), "{out}");
    assert!(out.ends_with("n,d\n72,72\n"), "{out}");
    // With a compaction as the target's newest commit, "nothing new" is still known from the
    // log alone: the full run (which would stop at this fail point) never starts.
    ok(&wh, "OPTIMIZE t");
    let (files, ops) = crate::common::active_files_and_operations(&table("t"));
    assert_eq!(ops.last().map(String::as_str), Some("OPTIMIZE"), "{ops:?}");
    // Python's filters on the compacted file: it stores strings as the table does (delta-rs
    // would write string views, which Python's `deltalake` cannot compare).
    assert_eq!(files, 1);
    let read = crate::interop::run_py(&format!(
        "from deltalake import DeltaTable\n\
         print(DeltaTable({:?}).to_pyarrow_table(filters=[('p', '=', 'a')]).num_rows)\n",
        table("t").display().to_string()
    ));
    assert_eq!(read, "72\n");
    let out = tidemark(&wh)
        .args([
            "--format",
            "csv",
            "-c",
            "COPY INCREMENTAL src INTO t WATERMARK id",
        ])
        .env("FAILPOINTS", "copy::after_read=return")
        .output()
        .unwrap();
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("nothing_new"),
        "{out:?}"
    );
}
