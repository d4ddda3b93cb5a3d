//! Every tutorial script in `sql/tutorial/`, run in order on a fresh warehouse, with its
//! results checked.

use crate::common::{repo, tidemark, warehouse};

fn run_script(wh: &std::path::Path, name: &str) -> String {
    let path = repo().join("sql/tutorial").join(name);
    let out = tidemark(wh)
        .args(["--format", "csv", "-f"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{name} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

#[test]
fn the_tutorial_runs_as_written() {
    let (_d, wh) = warehouse();
    let setup = run_script(&wh, "01_setup.sql");
    assert!(
        setup.contains(
            "samples.wanderbricks.users,main.config.users,created_at,1970-01-01T00:00:00Z"
        ),
        "{setup}"
    );

    let job = run_script(&wh, "02_job_for_each.sql");
    assert!(
        job.contains(
            "samples.wanderbricks.users,main.config.users,created_at,1970-01-01T00:00:00Z,succeeded"
        ),
        "{job}"
    );
    assert!(job.contains(",5000,") && job.contains(",3000,"), "{job}");

    // The one-statement job over the same control table finds nothing new.
    let again = run_script(&wh, "03_job_one_statement.sql");
    assert_eq!(
        again
            .lines()
            .filter(|l| l.contains(",nothing_new,"))
            .count(),
        2,
        "{again}"
    );
    assert!(
        again.lines().skip(1).all(|l| l.contains(",0,")),
        "nothing new: {again}"
    );

    let verify = run_script(&wh, "04_verify.sql");
    for line in verify
        .lines()
        .filter(|l| l.starts_with("users,") || l.starts_with("properties,"))
    {
        let f: Vec<&str> = line.split(',').collect();
        assert_eq!(f[1], f[2], "target rows equal source rows: {line}");
        assert_eq!(f[3], f[4], "watermark equals the source maximum: {line}");
    }

    let add = run_script(&wh, "05_add_table.sql");
    assert!(add.ends_with("hosts_copied\n1000\n"), "{add}");

    let pause = run_script(&wh, "06_pause_table.sql");
    assert!(
        pause.contains("samples.wanderbricks.properties,false"),
        "{pause}"
    );
    assert!(
        !pause.contains("main.config.properties,created_at,succeeded"),
        "paused table skipped: {pause}"
    );
    assert!(
        pause.contains("main.config.properties,created_at,skipped"),
        "the paused table is shown as skipped: {pause}"
    );

    let backfill = run_script(&wh, "07_backfill.sql");
    assert!(
        backfill.ends_with("users_complete,duplicated_users\ntrue,0\n"),
        "{backfill}"
    );
}

#[test]
fn both_job_forms_give_the_same_targets_control_rows_and_history() {
    let snapshot = |first_job: &str| {
        let (d, wh) = warehouse();
        run_script(&wh, "01_setup.sql");
        run_script(&wh, first_job);
        let q = |sql: &str| {
            let out = tidemark(&wh)
                .args(["--format", "csv", "-c", sql])
                .output()
                .unwrap();
            String::from_utf8_lossy(&out.stdout).to_string()
        };
        let state = [
            q("SELECT * FROM main.config.watermarks ORDER BY source_table"),
            q("SELECT count(*), max(created_at) FROM main.config.users"),
            q("SELECT count(*), max(created_at) FROM main.config.properties"),
            q(
                "SELECT source, target, previous_mark, new_mark, rows_copied, status FROM system.tidemark.copy_runs ORDER BY source",
            ),
        ];
        drop(d);
        state
    };
    assert_eq!(
        snapshot("02_job_for_each.sql"),
        snapshot("03_job_one_statement.sql")
    );
}

/// The job as one SQL script (`08_job_script.sql`): a control row whose source does not exist
/// is written to the log table by the handler, and the other tables are copied exactly once.
#[test]
fn the_job_as_one_script_logs_a_failing_table_and_goes_on() {
    let (_d, wh) = warehouse();
    run_script(&wh, "01_setup.sql");
    let bad = tidemark(&wh)
        .args([
            "-c",
            "INSERT INTO main.config.watermarks VALUES ('samples.wanderbricks.nope', 'main.config.nope', 'created_at', '1970-01-01')",
        ])
        .output()
        .unwrap();
    assert!(bad.status.success(), "{bad:?}");
    let first = run_script(&wh, "08_job_script.sql");
    assert!(first.contains("copied,failed\n2,1"), "{first}");
    let check = |sql: &str| {
        let out = tidemark(&wh)
            .args(["--format", "csv", "-c", sql])
            .output()
            .unwrap();
        assert!(out.status.success(), "{sql}: {out:?}");
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    assert_eq!(
        check("SELECT source_table, target_table FROM main.config.copy_failures"),
        "source_table,target_table\nsamples.wanderbricks.nope,main.config.nope\n"
    );
    assert_eq!(
        check(
            "SELECT (SELECT count(*) FROM main.config.users) AS users, (SELECT count(*) FROM main.config.properties) AS properties"
        ),
        "users,properties\n5000,3000\n"
    );
    // The marks advanced for the two tables copied; the failing row kept its own.
    assert_eq!(
        check(
            "SELECT count(*) FROM main.config.watermarks WHERE last_watermark > TIMESTAMP '1970-01-01 00:00:00'"
        ),
        "count(*)\n2\n"
    );
    // Again: nothing new is copied (no duplicates), the failing table fails again.
    let second = run_script(&wh, "08_job_script.sql");
    assert!(second.contains("copied,failed\n2,1"), "{second}");
    assert_eq!(
        check(
            "SELECT (SELECT count(*) FROM main.config.users) AS users, (SELECT count(*) FROM main.config.copy_failures) AS failures"
        ),
        "users,failures\n5000,2\n"
    );
}
