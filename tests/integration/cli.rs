//! The command line as users see it: stdout, stderr and exit code for `-c`, `-f`, stdin,
//! meta-commands and errors (insta snapshots).

use std::fmt::Write as _;

use crate::common::{ok, run, tidemark, warehouse};

/// stdout, stderr and exit code as one snapshot text, temp paths masked.
fn transcript(out: &std::process::Output, wh: &std::path::Path) -> String {
    let mask = |s: &[u8]| {
        String::from_utf8_lossy(s).replace(&wh.parent().unwrap().display().to_string(), "[TMP]")
    };
    let mut t = String::new();
    writeln!(t, "exit: {}", out.status.code().unwrap_or(-1)).unwrap();
    writeln!(t, "--- stdout\n{}", mask(&out.stdout)).unwrap();
    writeln!(t, "--- stderr\n{}", mask(&out.stderr)).unwrap();
    t
}

#[test]
fn command_runs_sql_and_prints_a_table() {
    let (_d, wh) = warehouse();
    let out = tidemark(&wh)
        .args(["-c", "SELECT 1 AS one, 'a' AS letter"])
        .output()
        .unwrap();
    insta::assert_snapshot!(transcript(&out, &wh));
}

#[test]
fn formats() {
    let (_d, wh) = warehouse();
    let mut all = String::new();
    for f in ["csv", "tsv", "json", "ndjson", "markdown", "table"] {
        let out = tidemark(&wh)
            .args(["--format", f, "-c", "SELECT 1 AS n, 'x,y' AS s, CAST(NULL AS INT) AS z UNION ALL SELECT 2, 'q', 3 ORDER BY n"])
            .output()
            .unwrap();
        writeln!(all, "== {f}\n{}", transcript(&out, &wh)).unwrap();
    }
    insta::assert_snapshot!(all);
}

#[test]
fn script_stops_at_first_error_with_file_line_col() {
    let (d, wh) = warehouse();
    let script = d.path().join("job.sql");
    std::fs::write(
        &script,
        "CREATE SCHEMA main.s;\nCREATE TABLE main.s.t (id INT);\n\nINSERT INTO main.s.t VALUES (1);\nSELECT * FROM main.s.tt;\nINSERT INTO main.s.t VALUES (2);\n",
    )
    .unwrap();
    std::fs::create_dir_all(wh.join("main")).unwrap();
    let out = tidemark(&wh).arg("-f").arg(&script).output().unwrap();
    insta::assert_snapshot!(transcript(&out, &wh));
    // The statement after the error did not run.
    assert_eq!(ok(&wh, "SELECT count(*) AS n FROM main.s.t"), "n\n1\n");
}

#[test]
fn continue_on_error_runs_everything_but_still_fails() {
    let (_d, wh) = warehouse();
    let out = tidemark(&wh)
        .args([
            "--continue-on-error",
            "--format",
            "csv",
            "-c",
            "SELECT 1 AS a; SELECT nope; SELECT 3 AS c",
        ])
        .output()
        .unwrap();
    insta::assert_snapshot!(transcript(&out, &wh));
}

#[test]
fn stdin_is_a_script() {
    let (_d, wh) = warehouse();
    let out = tidemark(&wh)
        .args(["--format", "csv"])
        .write_stdin("-- comment; with semicolon\nSELECT 'a;b' AS s;\n\\format json\nSELECT 2 AS n;\nSELECT\n  1 +\n  FROM;\n")
        .output()
        .unwrap();
    insta::assert_snapshot!(transcript(&out, &wh));
}

#[test]
fn commands_and_files_run_in_the_order_given() {
    let (d, wh) = warehouse();
    let f = d.path().join("second.sql");
    std::fs::write(&f, "SELECT 2 AS n;").unwrap();
    let out = tidemark(&wh)
        .args(["--format", "csv", "-c", "SELECT 1 AS n"])
        .arg("-f")
        .arg(&f)
        .args(["-c", "SELECT 3 AS n"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), "n\n1\nn\n2\nn\n3\n");
}

#[test]
fn bad_input_is_a_clear_error_and_changes_nothing() {
    let (_d, wh) = warehouse();
    ok(
        &wh,
        "CREATE TABLE orders (id BIGINT NOT NULL, placed_at TIMESTAMP, note STRING DEFAULT 'none')",
    );
    let cases = [
        "SELEC 1",
        "SELECT * FROM ordrs",
        "SELECT * FROM mian.default.orders",
        "SELECT * FROM main.defualt.orders",
        "SELECT idd FROM orders",
        "INSERT INTO orders VALUES (NULL, '2024-01-01', 'x')",
        "INSERT INTO orders (id, placed_at) VALUES (1, 'not a time')",
        "INSERT INTO samples.wanderbricks.users SELECT * FROM samples.wanderbricks.users",
        "DROP TABLE missing",
        "CREATE TABLE orders (id INT)",
        "UPDATE orders SET nope = 1",
    ];
    let mut all = String::new();
    for sql in cases {
        let out = run(&wh, sql);
        writeln!(all, "== {sql}\n{}", transcript(&out, &wh)).unwrap();
        assert_eq!(out.status.code(), Some(1), "{sql}");
    }
    insta::assert_snapshot!(all);
    assert_eq!(ok(&wh, "SELECT count(*) AS n FROM orders"), "n\n0\n");
    let history = ok(&wh, "DESCRIBE HISTORY orders");
    assert_eq!(
        history.lines().count(),
        2,
        "header and the CREATE TABLE commit only: {history}"
    );
}

#[test]
fn meta_commands_work_in_scripts() {
    let (_d, wh) = warehouse();
    let out = tidemark(&wh)
        .write_stdin(
            "CREATE TABLE t (id INT COMMENT 'the id');\n\\format csv\n\\dt\n\\d t\n\\l\n\\nope\n",
        )
        .output()
        .unwrap();
    insta::assert_snapshot!(transcript(&out, &wh));
}

#[test]
fn non_utf8_stdin_is_rejected_with_its_position() {
    let (_d, wh) = warehouse();
    let out = tidemark(&wh)
        .write_stdin(b"SELECT 1;\nSELECT '\xff';\n".to_vec())
        .output()
        .unwrap();
    insta::assert_snapshot!(transcript(&out, &wh));
}

#[test]
fn start_up_does_not_read_the_warehouse() {
    // A broken table directory must not matter to statements that do not use it.
    let (_d, wh) = warehouse();
    std::fs::create_dir_all(wh.join("main/default/broken/_delta_log")).unwrap();
    std::fs::write(
        wh.join("main/default/broken/_delta_log/00000000000000000000.json"),
        "garbage",
    )
    .unwrap();
    assert_eq!(ok(&wh, "SELECT 1 AS one"), "one\n1\n");
}

#[test]
fn include_timing_and_the_environment_warehouse() {
    let (d, wh) = warehouse();
    std::fs::write(d.path().join("inner.sql"), "SELECT 'inner' AS src;\n").unwrap();
    let outer = d.path().join("outer.sql");
    std::fs::write(&outer, "\\i inner.sql\n\\timing on\nSELECT 2 AS n;\n").unwrap();
    let out = tidemark(&wh)
        .args(["--format", "csv", "-f"])
        .arg(&outer)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "src\ninner\nn\n2\n");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("Timing is on.") && err.contains("1 row in "),
        "{err}"
    );
    // $TIDEMARK_WAREHOUSE stands in for the positional argument.
    let mut cmd = assert_cmd::Command::cargo_bin("tidemark").unwrap();
    let out = cmd
        .env("TIDEMARK_WAREHOUSE", &wh)
        .args(["--format", "csv", "-c", "CREATE TABLE envt (a INT)"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(wh.join("main/default/envt/_delta_log").is_dir());
    // A file:// URL names the same directory as its path; a URL that is no local path is
    // refused before anything is written.
    let url = url::Url::from_directory_path(&wh).unwrap().to_string();
    let out = assert_cmd::Command::cargo_bin("tidemark")
        .unwrap()
        .env_remove("TIDEMARK_WAREHOUSE")
        .args([&url, "--format", "csv", "-c", "INSERT INTO envt VALUES (7)"])
        .args(["-c", "SELECT a FROM envt"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{url}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "num_affected_rows,num_inserted_rows\n1,1\na\n7\n"
    );
    assert_eq!(ok(&wh, "SELECT count(*) AS n FROM envt"), "n\n1\n");
    let out = assert_cmd::Command::cargo_bin("tidemark")
        .unwrap()
        .args(["file://elsewhere/wh", "-c", "CREATE TABLE x (a INT)"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("file:///absolute/path"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// What psql and DuckDB users expect of the display: headers read like the expression, NULL
/// unlike the string 'NULL' (and `\pset null`), control characters kept in their cell,
/// numbers right-aligned, timestamps with microseconds and zone, `\x` records.
#[test]
fn display_you_can_trust() {
    let (d, wh) = warehouse();
    let script = d.path().join("display.sql");
    std::fs::write(
        &script,
        "SELECT 1, upper('x'), 'NULL' AS s, CAST(NULL AS STRING) AS n, 'a' || chr(9) || 'b' || chr(10) || 'c' AS ctl, TIMESTAMP '2024-01-01 00:00:00.5' AS ts;\n\\pset null (null)\nSELECT CAST(NULL AS INT) AS n, '(null)' AS s;\n\\x\nSELECT 1 AS id, 'a' AS name;\n",
    )
    .unwrap();
    let out = tidemark(&wh).arg("-f").arg(&script).output().unwrap();
    insta::assert_snapshot!(transcript(&out, &wh));
}

/// Errors point where the problem is (a caret under the name) and name tidemark's keywords
/// when one is mistyped; help answers for every statement.
#[test]
fn errors_point_and_help_answers() {
    let (_d, wh) = warehouse();
    let mut all = String::new();
    for sql in [
        "SELECT *\n  FROM range(3)\n WHERE idd > 1",
        "SELECT uper('a')",
        "SELECT id,\n  id + 'x' FROM range(2)",
        "COPY INCREMENTAL s INTO t WATERMARKS ts",
        "FOR EACH r IN (SELECT 1) CONCURENCY 2 DO SELECT 1; END FOR",
        "COPY INCREMENTL s INTO t WATERMARK ts",
        "\\h COPY INCREMENTAL",
        "\\h MERGEE",
    ] {
        let out = tidemark(&wh).args(["-c", sql]).output().unwrap();
        writeln!(all, "== {sql}\n{}", transcript(&out, &wh)).unwrap();
    }
    insta::assert_snapshot!(all);
}

/// `--var NAME=VALUE` declares a STRING session variable before the first statement: a job
/// script reads it as `NAME`, `session.NAME` or the parameter marker `:NAME` (the text as
/// given, quotes and backslashes included); a marker with no variable is an error naming it.
#[test]
fn vars_from_the_command_line_reach_a_job_script() {
    let (d, wh) = warehouse();
    let script = d.path().join("job.sql");
    std::fs::write(
        &script,
        "CREATE TABLE IF NOT EXISTS events AS SELECT id, DATE '2024-01-01' + CAST(id AS INT) AS day FROM range(5);\n\
         SELECT count(*) AS n FROM events WHERE day >= :since;\n\
         SELECT session.who AS who, length(:who) AS len, :since = since AS same;\n\
         SELECT count(*) AS m FROM IDENTIFIER(:tbl);\n",
    )
    .unwrap();
    let out = tidemark(&wh)
        .args([
            "--format",
            "csv",
            "-q",
            "--var",
            "since=2024-01-03",
            "-v",
            r"who=it's a\b",
            "-v",
            "tbl=main.default.events",
        ])
        .arg("-f")
        .arg(&script)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", transcript(&out, &wh));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "num_affected_rows,num_inserted_rows\n5,5\nn\n3\nwho,len,same\nit's a\\b,8,true\nm\n5\n"
    );
    let out = tidemark(&wh)
        .args(["-q", "-c", "SELECT :missing"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(
            "[UNBOUND_SQL_PARAMETER] parameter :missing has no value: run tidemark with --var missing=VALUE"
        ),
        "{}",
        transcript(&out, &wh)
    );
    let out = tidemark(&wh)
        .args(["--var", "9lives=1", "-c", "SELECT 1"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("--var 9lives=1: '9lives' is not a variable name"),
        "{}",
        transcript(&out, &wh)
    );
}
