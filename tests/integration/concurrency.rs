//! Two tidemark processes writing one table at the same moment: inserts both land; racing
//! updates retry or fail with a clear, retryable error; no commit is lost or half-applied.

use std::process::Command;

use crate::common::{ok, warehouse};

fn spawn(wh: &std::path::Path, sql: &str) -> std::process::Child {
    spawn_held(wh, sql, "")
}

/// `sql` in a process of its own, with fail points set (`FAILPOINTS`, empty for none).
fn spawn_held(wh: &std::path::Path, sql: &str, failpoints: &str) -> std::process::Child {
    Command::new(assert_cmd::cargo::cargo_bin("tidemark"))
        .arg(wh)
        .args(["--format", "csv", "-c", sql])
        .env("FAILPOINTS", failpoints)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn concurrent_inserts_both_land() {
    let (_d, wh) = warehouse();
    ok(&wh, "CREATE TABLE t (id INT, who STRING)");
    for round in 0..3 {
        let children: Vec<_> = (0..4)
            .map(|p| {
                spawn(
                    &wh,
                    &format!("INSERT INTO t VALUES ({round}, 'p{p}'), ({round}, 'p{p}')"),
                )
            })
            .collect();
        for c in children {
            let out = c.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    assert_eq!(ok(&wh, "SELECT count(*) AS n FROM t"), "n\n24\n");
}

/// A query reads each table's log once: the rows come from the version its names were bound
/// against, even when another writer commits between its binding and its planning (the
/// planner used to open the table again, and read the other writer's rows).
#[test]
fn a_query_reads_the_version_it_was_bound_against() {
    let (d, wh) = warehouse();
    ok(&wh, "CREATE TABLE t (id INT)");
    ok(&wh, "INSERT INTO t VALUES (1), (2)");
    let go = d.path().join("go");
    let held = d.path().join("go.held");
    let child = spawn_held(
        &wh,
        "SELECT count(*) AS n, max(id) AS m FROM t",
        &format!("query::bound=return(until:{})", go.display()),
    );
    // A bound on a wait, not a measure of speed.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    while !held.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the query never got bound"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    ok(&wh, "INSERT INTO t VALUES (3)");
    std::fs::write(&go, "").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "n,m\n2,2\n");
    assert_eq!(ok(&wh, "SELECT count(*) AS n FROM t"), "n\n3\n");
}

#[test]
fn racing_updates_are_never_lost_or_half_applied() {
    let (_d, wh) = warehouse();
    ok(&wh, "CREATE TABLE c (k INT, n BIGINT)");
    ok(&wh, "INSERT INTO c VALUES (1, 0)");
    let children: Vec<_> = (0..4)
        .map(|_| spawn(&wh, "UPDATE c SET n = n + 1"))
        .collect();
    let mut succeeded = 0;
    for c in children {
        let out = c.wait_with_output().unwrap();
        if out.status.success() {
            succeeded += 1;
        } else {
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                err.contains("can be run again"),
                "a failed racer says it is retryable: {err}"
            );
        }
    }
    assert!(succeeded >= 1);
    // Every successful UPDATE is in the table exactly once.
    assert_eq!(ok(&wh, "SELECT n FROM c"), format!("n\n{succeeded}\n"));
}

/// A DELETE or UPDATE rewrites files it read; a commit landing in between (here an OPTIMIZE,
/// whose compacted file still holds the rows) must make it run again on the new state, never
/// commit over it: no deleted row survives, no updated row is doubled.
#[test]
fn a_rewrite_never_commits_over_a_concurrent_optimize() {
    for (stmt, check, want) in [
        (
            "DELETE FROM t WHERE id > 0",
            "SELECT count(*) AS n FROM t",
            "n\n0\n",
        ),
        (
            "UPDATE t SET v = 'u'",
            "SELECT count(*) AS n, min(v) AS v FROM t",
            "n,v\n3,u\n",
        ),
    ] {
        let (_d, wh) = crate::common::warehouse();
        crate::common::sql(
            &wh,
            &[
                "CREATE TABLE t (id INT, v STRING)",
                "INSERT INTO t VALUES (1, 'a')",
                "INSERT INTO t VALUES (2, 'b')",
                "INSERT INTO t VALUES (3, 'c')",
            ],
        );
        let slow = spawn_held(&wh, stmt, "rewrite::before_commit=1*sleep(2000)");
        std::thread::sleep(std::time::Duration::from_millis(700));
        let optimized = crate::common::ok(&wh, "OPTIMIZE t");
        assert!(optimized.contains("1,3"), "{optimized}");
        let out = slow.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{stmt}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(crate::common::ok(&wh, check), want, "{stmt}");
    }
}

/// The same for a `MERGE ON` copy: an OPTIMIZE of the target between the copy's read and its
/// commit makes the copy run again; every key stays once in the target.
#[test]
fn a_merge_copy_never_commits_over_a_concurrent_optimize() {
    let (_d, wh) = crate::common::warehouse();
    crate::common::sql(
        &wh,
        &[
            "CREATE TABLE s (id INT, v STRING, ts INT)",
            "INSERT INTO s VALUES (1, 'a', 1), (2, 'b', 2)",
            "COPY INCREMENTAL s INTO t WATERMARK ts MERGE ON (id)",
            "INSERT INTO s VALUES (3, 'c', 3)",
            "COPY INCREMENTAL s INTO t WATERMARK ts MERGE ON (id)",
            "INSERT INTO t VALUES (10, 'x', 0)",
            "INSERT INTO t VALUES (11, 'y', 0)",
            "INSERT INTO s VALUES (1, 'a2', 4)",
        ],
    );
    let slow = spawn_held(
        &wh,
        "COPY INCREMENTAL s INTO t WATERMARK ts MERGE ON (id)",
        "copy::before_merge=1*sleep(2000)",
    );
    std::thread::sleep(std::time::Duration::from_millis(900));
    let optimized = crate::common::ok(&wh, "OPTIMIZE t");
    assert!(optimized.contains("1,3"), "{optimized}");
    let out = slow.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        crate::common::ok(&wh, "SELECT id, v FROM t ORDER BY id, v"),
        "id,v\n1,a2\n2,b\n3,c\n10,x\n11,y\n"
    );
}

/// SIGTERM (as Ctrl-C) during a copy whose files are written and not yet committed removes
/// those files, records the run as `cancelled`, and the next run copies every row once.
#[cfg(unix)]
#[test]
fn a_cancelled_copy_leaves_no_files_and_is_recorded() {
    let (_d, wh) = crate::common::warehouse();
    crate::common::sql(
        &wh,
        &["CREATE TABLE s AS SELECT id, CAST(id AS STRING) AS v FROM range(20000)"],
    );
    let copy = Command::new(assert_cmd::cargo::cargo_bin("tidemark"))
        .arg(&wh)
        .args([
            "--no-whole-file-copies",
            "--format",
            "csv",
            "-c",
            "COPY INCREMENTAL s INTO t WATERMARK id",
        ])
        .env("FAILPOINTS", "copy::before_commit=return(20000)")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let target = wh.join("main/default/t");
    let parquet = |dir: &std::path::Path| -> usize {
        std::fs::read_dir(dir)
            .map(|d| {
                d.flatten()
                    .filter(|e| e.file_name().to_string_lossy().contains(".parquet"))
                    .count()
            })
            .unwrap_or(0)
    };
    let waited = std::time::Instant::now();
    while parquet(&target) == 0 && waited.elapsed() < std::time::Duration::from_secs(60) {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(parquet(&target) > 0, "the copy wrote its files");
    let killed = Command::new("kill")
        .args(["-TERM", &copy.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let out = copy.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(parquet(&target), 0, "uncommitted files removed");
    assert_eq!(
        ok(
            &wh,
            "SELECT status FROM system.tidemark.copy_runs ORDER BY started_at"
        ),
        "status\ncancelled\n"
    );
    ok(&wh, "COPY INCREMENTAL s INTO t WATERMARK id");
    assert_eq!(
        ok(&wh, "SELECT count(*) AS n, count(DISTINCT id) AS d FROM t"),
        "n,d\n20000,20000\n"
    );
}

/// A job's copy that read its control row when the job began, then waited while two other
/// runs of the same pair committed and advanced the row: the value it holds is older than
/// the target's last run, not a backfill, and nothing is copied twice.
#[test]
fn a_copy_holding_an_old_control_row_copies_nothing_twice() {
    const JOB: &str = "COPY INCREMENTAL USING CONTROL TABLE ctl";
    let (_d, wh) = warehouse();
    ok(&wh, "CREATE TABLE s (id BIGINT)");
    ok(
        &wh,
        "CREATE TABLE ctl (source_table STRING, target_table STRING, watermark_column STRING, last_watermark STRING)",
    );
    ok(&wh, "INSERT INTO ctl VALUES ('s', 't', 'id', NULL)");
    ok(&wh, "INSERT INTO s VALUES (1), (2)");
    ok(&wh, JOB);
    // Reads the row (mark 2), then holds its copy for 6 s.
    let held = spawn_held(&wh, JOB, "copy::before_resolve=return(6000)");
    std::thread::sleep(std::time::Duration::from_secs(2));
    ok(&wh, "INSERT INTO s VALUES (3)");
    ok(&wh, JOB);
    ok(&wh, "INSERT INTO s VALUES (4)");
    ok(&wh, JOB);
    let out = held.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        ok(&wh, "SELECT count(*) AS n, count(DISTINCT id) AS d FROM t"),
        "n,d\n4,4\n"
    );
    assert_eq!(
        ok(&wh, "SELECT last_watermark FROM ctl"),
        "last_watermark\n4\n"
    );
}

/// The held copy's output once it ends, after checking that it was still held when the other
/// process had done `meanwhile` (its hold had not run out) and that it succeeded.
fn held_output(mut held: std::process::Child, meanwhile: &str) -> String {
    assert!(
        held.try_wait().unwrap().is_none(),
        "the held copy's hold ran out before {meanwhile}"
    );
    let out = held.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The copy the two tests below hold: `s` into `t` by `id`.
const HELD_COPY: &str = "COPY INCREMENTAL s INTO t WATERMARK id";

/// Table `s` of ids 1 and 2 copied into `t`, then id 3 added to `s`; a copy of it started and
/// held for 10 s after writing its file, before its commit (`copy::before_commit`). Returns
/// the held process once its file is in the target's directory.
fn hold_a_copy_of_a_new_row(wh: &std::path::Path) -> std::process::Child {
    hold_a_copy_at(wh, HELD_COPY, "copy::before_commit=1*return(10000)")
}

/// The same with another copy of `s` into `t` held at another fail point.
fn hold_a_copy_at(wh: &std::path::Path, copy: &str, failpoint: &str) -> std::process::Child {
    ok(wh, "CREATE TABLE s (id BIGINT)");
    ok(wh, "INSERT INTO s VALUES (1), (2)");
    ok(wh, copy);
    ok(wh, "INSERT INTO s VALUES (3)");
    let target = wh.join("main/default/t");
    let parquet = || -> usize {
        std::fs::read_dir(&target)
            .map(|d| {
                d.flatten()
                    .filter(|e| e.path().extension().is_some_and(|x| x == "parquet"))
                    .count()
            })
            .unwrap_or(0)
    };
    let before = parquet();
    let held = spawn_held(wh, copy, failpoint);
    let waited = std::time::Instant::now();
    while parquet() == before && waited.elapsed() < std::time::Duration::from_secs(60) {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(parquet() > before, "the held copy wrote its file");
    held
}

/// A copy held after writing its files (its check of the target's `txn` passed) while another
/// run of the same pair commits: its commit is refused (the winning commit carries the pair's
/// `txn`), it starts over on fresh state, finds nothing new, and copies nothing twice.
#[test]
fn a_copy_whose_pair_committed_while_it_wrote_starts_over_and_copies_nothing_twice() {
    let (_d, wh) = warehouse();
    let held = hold_a_copy_of_a_new_row(&wh);
    let racing = ok(&wh, HELD_COPY);
    let shown = held_output(held, &format!("the racing copy finished: {racing}"));
    assert!(racing.ends_with(",succeeded\n"), "{racing}");
    assert!(shown.ends_with(",nothing_new\n"), "{shown}");
    assert_eq!(
        ok(&wh, "SELECT count(*) AS n, count(DISTINCT id) AS d FROM t"),
        "n,d\n3,3\n"
    );
    assert_eq!(
        ok(
            &wh,
            "SELECT status, rows_copied FROM system.tidemark.copy_runs ORDER BY started_at"
        ),
        "status,rows_copied\nsucceeded,2\nnothing_new,0\nsucceeded,1\n"
    );
}

/// While `held` (a copy of ids 1-3 from `s` into `t`) waits, another process drops `t` and
/// creates a new `t (id, note)` of two versions holding (100, 'new'); the held copy must start
/// over on the new table and leave it with its own row and the three copied ones.
fn make_the_target_again_under(wh: &std::path::Path, held: std::process::Child) {
    ok(wh, "DROP TABLE t");
    ok(wh, "CREATE TABLE t (id BIGINT, note STRING)");
    ok(wh, "INSERT INTO t VALUES (100, 'new')");
    let shown = held_output(held, "the target was made again");
    assert!(shown.ends_with(",succeeded\n"), "{shown}");
    assert_eq!(
        ok(wh, "SELECT id, note FROM t ORDER BY id"),
        "id,note\n1,\n2,\n3,\n100,new\n"
    );
}

/// A copy held after writing its files while another process drops its target and creates a
/// new table of that name with as many versions: its commit would land in the new table's log
/// as if it followed the old one (naming a file the drop removed). The held copy sees that
/// the commit it read is another file now, starts over on the new table, and copies every
/// source row into it once.
#[test]
fn a_copy_whose_target_was_dropped_and_created_again_starts_over_on_the_new_table() {
    let (_d, wh) = warehouse();
    let held = hold_a_copy_of_a_new_row(&wh);
    // The old table had versions 0 (created) and 1 (the first copy); so has the new one.
    make_the_target_again_under(&wh, held);
    // The new table's create, its insert and the copy: no commit of the old table's run.
    let commits = std::fs::read_dir(wh.join("main/default/t/_delta_log"))
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
        .count();
    assert_eq!(commits, 3);
}

/// A MERGE ON copy commits through delta-rs' MERGE, which puts its commit itself: held just
/// before that put while another process drops the target and creates a new table of that
/// name with as many versions, its commit is refused (its commit would land in the new
/// table's log as if it followed the old one), it starts over on the new table and merges
/// every source row into it once.
#[test]
fn a_merge_copy_whose_target_was_made_again_starts_over_on_the_new_table() {
    let (_d, wh) = warehouse();
    let held = hold_a_copy_at(
        &wh,
        "COPY INCREMENTAL s INTO t WATERMARK id MERGE ON (id)",
        "copy::before_log_put=1*return(10000)",
    );
    make_the_target_again_under(&wh, held);
}

/// A copy held after writing its files while another process drops its target (and makes
/// nothing in its place): its commit fails on a log that no longer has the version it read,
/// the run starts over, creates the target again and copies every source row into it once.
#[test]
fn a_copy_whose_target_was_dropped_while_it_wrote_creates_it_again() {
    let (_d, wh) = warehouse();
    let held = hold_a_copy_of_a_new_row(&wh);
    ok(&wh, "DROP TABLE t");
    let shown = held_output(held, "the target was dropped");
    assert!(shown.ends_with(",succeeded\n"), "{shown}");
    assert_eq!(ok(&wh, "SELECT id FROM t ORDER BY id"), "id\n1\n2\n3\n");
}

/// `sql` held at `point` for 8 s (its first time there), started once `t` holds four rows in
/// four files, and `other` run by another process while it is held (after the table `marker`,
/// made just before `sql`, exists); `sql` must then succeed. Returns `other`'s output.
fn held_while(wh: &std::path::Path, sql: &str, point: &str, other: &str) -> String {
    ok(wh, "CREATE TABLE t (id INT)");
    for id in 1..=4 {
        ok(wh, &format!("INSERT INTO t VALUES ({id})"));
    }
    let held = spawn_held(
        wh,
        &format!("CREATE TABLE marker (x INT); {sql}"),
        &format!("{point}=1*return(8000)"),
    );
    let waited = std::time::Instant::now();
    while !wh.join("main/default/marker/_delta_log").is_dir()
        && waited.elapsed() < std::time::Duration::from_secs(60)
    {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // The held statement opens `t` right after: then it waits at `point` (8 s).
    std::thread::sleep(std::time::Duration::from_secs(2));
    let out = ok(wh, other);
    let held = held.wait_with_output().unwrap();
    assert!(
        held.status.success(),
        "{sql}: {}",
        String::from_utf8_lossy(&held.stderr)
    );
    out
}

/// What `OPTIMIZE t` prints when it merges `t`'s four files.
const MERGED_FOUR: &str = "num_files_added,num_files_removed\n1,4\n";

/// The operations of `t`'s commits, oldest first.
fn operations(wh: &std::path::Path) -> Vec<String> {
    crate::common::active_files_and_operations(&wh.join("main/default/t")).1
}

/// delta-rs lets a removal through after a concurrent OPTIMIZE removed the same files
/// (`dataChange` false): an overwrite held after reading the table while another process
/// compacts it must not commit over the compaction (the compacted copy of the old rows would
/// stay), but run again on the new state.
#[test]
fn an_overwrite_racing_a_compaction_replaces_every_old_row() {
    let (_d, wh) = warehouse();
    let other = held_while(
        &wh,
        "INSERT OVERWRITE t VALUES (10)",
        "dml::before_overwrite",
        "OPTIMIZE t",
    );
    assert_eq!(other, MERGED_FOUR);
    assert_eq!(ok(&wh, "SELECT id FROM t"), "id\n10\n");
}

/// Two compactions of the same files: the second (held after reading the table) must not
/// commit over the first (each would add a copy of the rows), but find nothing left to do.
#[test]
fn two_compactions_of_the_same_files_keep_each_row_once() {
    let (_d, wh) = warehouse();
    let other = held_while(
        &wh,
        "OPTIMIZE t",
        "maintenance::before_optimize",
        "OPTIMIZE t",
    );
    assert_eq!(other, MERGED_FOUR);
    assert_eq!(
        ok(&wh, "SELECT count(*) AS n, sum(id) AS s FROM t"),
        "n,s\n4,10\n"
    );
}

/// A compaction goes after another writer's append (the appended file stays, next to the
/// merged one), and runs again after another writer's DELETE of a row it merged (which it
/// would otherwise bring back).
#[test]
fn a_compaction_goes_after_appends_and_runs_again_after_a_delete() {
    let (_d, wh) = warehouse();
    held_while(
        &wh,
        "OPTIMIZE t",
        "maintenance::before_optimize",
        "INSERT INTO t VALUES (5)",
    );
    assert_eq!(
        ok(&wh, "SELECT count(*) AS n, sum(id) AS s FROM t"),
        "n,s\n5,15\n"
    );
    let ops = operations(&wh);
    assert_eq!(ops[ops.len() - 2..], ["WRITE", "OPTIMIZE"], "{ops:?}");
    let (_d, wh) = warehouse();
    held_while(
        &wh,
        "OPTIMIZE t",
        "maintenance::before_optimize",
        "DELETE FROM t WHERE id = 1",
    );
    assert_eq!(
        ok(&wh, "SELECT count(*) AS n, sum(id) AS s FROM t"),
        "n,s\n3,9\n"
    );
}
