//! FOR EACH: typed row references, per-iteration scope, concurrency bounds shown by the
//! result's start times and durations, failure isolation, and the scripting form.

use crate::common::{ok, run, warehouse};

#[test]
fn row_values_are_typed_and_usable_in_identifier() {
    let (_d, wh) = warehouse();
    ok(&wh, "CREATE TABLE a (x INT)");
    ok(&wh, "CREATE TABLE b (x INT)");
    let out = ok(
        &wh,
        "FOR EACH r IN (SELECT * FROM (VALUES ('a', 1), ('b', 2)) AS v(name, n)) CONCURRENCY 2 DO \
           INSERT INTO IDENTIFIER(r.name) VALUES (r.n * 10); \
           INSERT INTO IDENTIFIER(name) VALUES (n + 1); \
         END FOR",
    );
    assert!(
        out.starts_with("iteration,name,n,status,started_at,duration_ms,rows_affected,error\n"),
        "{out}"
    );
    assert_eq!(ok(&wh, "SELECT x FROM a ORDER BY x"), "x\n2\n10\n");
    assert_eq!(ok(&wh, "SELECT x FROM b ORDER BY x"), "x\n3\n20\n");
}

#[test]
fn each_iteration_has_its_own_variables() {
    let (_d, wh) = warehouse();
    ok(&wh, "CREATE TABLE log (i INT, v INT)");
    let out = ok(
        &wh,
        "DECLARE v INT DEFAULT 0; \
         FOR EACH r IN (SELECT * FROM (VALUES (1), (2), (3)) AS t(i)) CONCURRENCY 3 DO \
           SET VAR v = v + r.i; \
           DECLARE local INT DEFAULT 100; \
           INSERT INTO log VALUES (r.i, v + local); \
         END FOR; \
         SELECT v",
    );
    assert!(
        out.ends_with("v\n0\n"),
        "the session's v is untouched: {out}"
    );
    assert_eq!(
        ok(&wh, "SELECT i, v FROM log ORDER BY i"),
        "i,v\n1,101\n2,102\n3,103\n"
    );
}

/// Iterations' [start, end) intervals in microseconds from the result table.
fn intervals(csv: &str) -> Vec<(i64, i64)> {
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let s = header.iter().position(|h| *h == "started_at").unwrap();
    let d = header.iter().position(|h| *h == "duration_ms").unwrap();
    lines
        .filter(|l| l.contains(",succeeded,"))
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            let start = chrono::DateTime::parse_from_rfc3339(f[s])
                .unwrap()
                .timestamp_micros();
            (start, start + f[d].parse::<i64>().unwrap() * 1000)
        })
        .collect()
}

/// The most intervals overlapping at one instant.
fn max_overlap(iv: &[(i64, i64)]) -> usize {
    iv.iter()
        .map(|(s, _)| iv.iter().filter(|(a, b)| a <= s && s < b).count())
        .max()
        .unwrap_or(0)
}

#[test]
fn concurrency_bounds_the_running_iterations() {
    let (_d, wh) = warehouse();
    ok(
        &wh,
        "CREATE TABLE src AS SELECT * FROM samples.wanderbricks.bookings",
    );
    let body = "DO CREATE OR REPLACE TABLE IDENTIFIER('t' || CAST(r.i AS STRING)) AS SELECT * FROM src CROSS JOIN (SELECT 1) ORDER BY booking_id; END FOR";
    let serial = ok(
        &wh,
        &format!(
            "FOR EACH r IN (SELECT * FROM (VALUES (1), (2), (3), (4), (5), (6)) AS t(i)) CONCURRENCY 1 {body}"
        ),
    );
    assert_eq!(max_overlap(&intervals(&serial)), 1, "{serial}");
    let parallel = ok(
        &wh,
        &format!(
            "FOR EACH r IN (SELECT * FROM (VALUES (1), (2), (3), (4), (5), (6)) AS t(i)) CONCURRENCY 3 {body}"
        ),
    );
    let overlap = max_overlap(&intervals(&parallel));
    assert!(
        (2..=3).contains(&overlap),
        "at most 3 and more than one at once: {overlap}\n{parallel}"
    );
}

#[test]
fn a_failing_iteration_ends_only_itself() {
    let (_d, wh) = warehouse();
    ok(&wh, "CREATE TABLE t (x INT)");
    let out = run(
        &wh,
        "FOR EACH r IN (SELECT * FROM (VALUES (1), (0), (3)) AS v(i)) CONCURRENCY 2 DO \
           INSERT INTO t VALUES (10 / r.i); \
           INSERT INTO missing VALUES (1); \
         END FOR",
    );
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        stdout.lines().filter(|l| l.contains(",failed,")).count(),
        3,
        "{stdout}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("3 of 3 iterations failed"), "{stderr}");
    // Iterations 1 and 3 ran their first statement before failing on the second.
    assert_eq!(ok(&wh, "SELECT x FROM t ORDER BY x"), "x\n3\n10\n");
}

#[test]
fn the_scripting_form_runs_in_the_session() {
    let (_d, wh) = warehouse();
    let out = ok(
        &wh,
        "DECLARE total INT DEFAULT 0; \
         FOR r AS SELECT * FROM (VALUES (1), (2), (3), (4)) AS v(i) DO SET VAR total = total + r.i; END FOR; \
         FOR SELECT * FROM (VALUES (10)) AS v(i) DO SET VAR total = total + i; END FOR; \
         SELECT total",
    );
    assert!(out.ends_with("total\n20\n"), "{out}");
}

#[test]
fn the_one_statement_job_copies_in_parallel_and_skips_inactive_rows() {
    let (_d, wh) = warehouse();
    let mut stmts = vec![
        "CREATE TABLE ctl (source_table STRING, target_table STRING, watermark_column STRING, last_watermark BIGINT, active BOOLEAN)".to_string(),
    ];
    for i in 0..20 {
        stmts.push(format!("CREATE TABLE s{i} (id BIGINT, v STRING)"));
        stmts.push(format!(
            "INSERT INTO s{i} VALUES ({i}, 'a'), ({}, 'b')",
            i + 100
        ));
        stmts.push(format!(
            "INSERT INTO ctl VALUES ('s{i}', 't{i}', 'id', -1, {})",
            i != 7
        ));
    }
    let mut cmd = crate::common::tidemark(&wh);
    cmd.args(["--format", "csv"]);
    for s in &stmts {
        cmd.args(["-c", s]);
    }
    assert!(cmd.output().unwrap().status.success());
    let out = ok(
        &wh,
        "COPY INCREMENTAL USING CONTROL TABLE ctl CONCURRENCY 8",
    );
    assert_eq!(
        out.lines().filter(|l| l.contains(",succeeded,")).count(),
        19,
        "{out}"
    );
    assert!(!wh.join("main/default/t7").exists(), "inactive row skipped");
    assert_eq!(
        ok(
            &wh,
            "SELECT count(*) AS n FROM ctl WHERE active AND last_watermark = CAST(regexp_replace(source_table, 's', '') AS BIGINT) + 100"
        ),
        "n\n19\n"
    );
    let again = ok(
        &wh,
        "COPY INCREMENTAL USING CONTROL TABLE ctl WHERE source_table <> 's3' CONCURRENCY 8",
    );
    assert_eq!(
        again
            .lines()
            .filter(|l| l.contains(",nothing_new,"))
            .count(),
        18,
        "{again}"
    );
    // A pair named by two rows is copied by neither, even when the WHERE keeps one of them;
    // the rows after it are still read as their own.
    ok(&wh, "INSERT INTO ctl VALUES ('s5', 't5', 'id', -1, true)");
    let out = run(
        &wh,
        "COPY INCREMENTAL USING CONTROL TABLE ctl WHERE source_table IN ('s5', 's6') AND last_watermark > 0 CONCURRENCY 2",
    );
    let out = String::from_utf8_lossy(&out.stdout).to_string();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    // The two rows run at once, in either order.
    assert!(
        lines[1..]
            .iter()
            .any(|l| l.contains(",s5,t5,") && l.contains("has 2 rows for source_table")),
        "{out}"
    );
    assert!(
        lines[1..]
            .iter()
            .any(|l| l.contains(",s6,t6,") && l.contains(",nothing_new,")),
        "{out}"
    );
}

/// A control table with a CHECK constraint is advanced by an UPDATE that checks it (the
/// row-by-row advance evaluates no constraint): the job advances every row all the same, and
/// a constraint the advance would break stops it with the constraint named.
#[test]
fn a_control_table_with_a_check_constraint_is_advanced_and_checked() {
    let (_d, wh) = warehouse();
    let mut stmts = vec![
        "CREATE TABLE ctl (source_table STRING, target_table STRING, watermark_column STRING, last_watermark BIGINT)".to_string(),
        "ALTER TABLE ctl ADD CONSTRAINT small CHECK (last_watermark < 105)".to_string(),
    ];
    for i in 0..6 {
        stmts.push(format!("CREATE TABLE s{i} (id BIGINT)"));
        stmts.push(format!("INSERT INTO s{i} VALUES ({i}), ({})", i + 100));
        stmts.push(format!("INSERT INTO ctl VALUES ('s{i}', 't{i}', 'id', -1)"));
    }
    let mut cmd = crate::common::tidemark(&wh);
    for s in &stmts {
        cmd.args(["-c", s]);
    }
    assert!(cmd.output().unwrap().status.success());
    let out = run(
        &wh,
        "COPY INCREMENTAL USING CONTROL TABLE ctl WHERE source_table < 's5' CONCURRENCY 4",
    );
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        ok(
            &wh,
            "SELECT source_table, last_watermark FROM ctl ORDER BY 1"
        ),
        "source_table,last_watermark\ns0,100\ns1,101\ns2,102\ns3,103\ns4,104\ns5,-1\n"
    );
    let out = run(
        &wh,
        "COPY INCREMENTAL USING CONTROL TABLE ctl CONCURRENCY 4",
    );
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{said}");
    assert!(said.contains("CHECK constraint small"), "{said}");
    assert_eq!(
        ok(
            &wh,
            "SELECT last_watermark FROM ctl WHERE source_table = 's5'"
        ),
        "last_watermark\n-1\n"
    );
}

/// After a job's first batch of advances the process keeps the control table's files, and the
/// next batches rewrite it without delta-rs (files read straight from Parquet, the commit put
/// at the next version): a process killed before such a commit (its new files written) loses
/// no advance and doubles no row when the job runs again. A partitioned control table is kept
/// as delta-rs' state instead and never gets there.
#[cfg(feature = "failpoints")]
#[test]
fn later_batches_advance_without_delta_rs_and_a_kill_before_their_commit_loses_nothing() {
    for partitioned in [false, true] {
        let (_d, wh) = warehouse();
        let mut script = format!(
            "CREATE TABLE ctl (source_table STRING NOT NULL, target_table STRING NOT NULL, \
             watermark_column STRING NOT NULL, last_watermark BIGINT NOT NULL){};\n",
            if partitioned {
                " PARTITIONED BY (watermark_column)"
            } else {
                ""
            }
        );
        let mut rows = vec![];
        let mut counts = vec![];
        for i in 0..20 {
            script.push_str(&format!(
                "CREATE TABLE s{i} (id BIGINT);\nINSERT INTO s{i} VALUES ({i}), ({});\n",
                1000 + i
            ));
            rows.push(format!("('s{i}', 't{i}', 'id', -1)"));
            counts.push(format!(
                "SELECT count(*) AS n, count(DISTINCT id) AS d FROM t{i}"
            ));
        }
        script.push_str(&format!("INSERT INTO ctl VALUES {};\n", rows.join(", ")));
        let out = crate::common::tidemark(&wh)
            .write_stdin(script)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        // The first statement's single batch keeps the table; the second's batches use it.
        let job = |failpoint: Option<&str>| {
            let mut cmd = crate::common::tidemark(&wh);
            cmd.args([
                "-c",
                "COPY INCREMENTAL USING CONTROL TABLE ctl WHERE source_table = 's0'",
                "-c",
                "COPY INCREMENTAL USING CONTROL TABLE ctl CONCURRENCY 4",
            ]);
            if let Some(f) = failpoint {
                cmd.env("FAILPOINTS", f);
            }
            cmd.output().unwrap()
        };
        let out = job(Some("copy::before_direct_advance=return"));
        if partitioned {
            assert!(out.status.success(), "{out:?}");
        } else {
            assert!(
                !out.status.success() && out.status.code().is_none(),
                "the process must die at its first kept batch: {out:?}"
            );
        }
        let out = job(None);
        assert!(out.status.success(), "{out:?}");
        let all = format!(
            "SELECT sum(n) AS n, sum(d) AS d FROM ({})",
            counts.join(" UNION ALL ")
        );
        assert_eq!(ok(&wh, &all), "n,d\n40,40\n", "partitioned: {partitioned}");
        let advanced = "SELECT count(*) AS n FROM ctl \
             WHERE last_watermark = 1000 + CAST(substr(source_table, 2) AS BIGINT)";
        assert_eq!(ok(&wh, advanced), "n\n20\n", "partitioned: {partitioned}");
        let rows = "SELECT count(*) AS n FROM ctl";
        assert_eq!(ok(&wh, rows), "n\n20\n", "partitioned: {partitioned}");
        // New rows in two sources: copied once, their rows advanced again.
        ok(&wh, "INSERT INTO s3 VALUES (2000)");
        ok(&wh, "INSERT INTO s17 VALUES (2001)");
        let out = job(None);
        assert!(out.status.success(), "{out:?}");
        assert_eq!(ok(&wh, &all), "n,d\n42,42\n", "partitioned: {partitioned}");
        assert_eq!(
            ok(
                &wh,
                "SELECT source_table, last_watermark FROM ctl \
                 WHERE source_table IN ('s3', 's17', 's4') ORDER BY 1"
            ),
            "source_table,last_watermark\ns17,2001\ns3,2000\ns4,1004\n"
        );
        assert_eq!(ok(&wh, rows), "n\n20\n", "partitioned: {partitioned}");
    }
}

#[test]
fn a_hundred_tables_at_concurrency_16_twice_at_once_advance_every_row() {
    let (_d, wh) = warehouse();
    let mut script = String::from(
        "CREATE TABLE ctl (source_table STRING NOT NULL, target_table STRING NOT NULL, watermark_column STRING NOT NULL, last_watermark BIGINT NOT NULL);\n",
    );
    let mut rows = vec![];
    for i in 0..100 {
        script.push_str(&format!("CREATE TABLE s{i} (id BIGINT, v STRING);\nINSERT INTO s{i} VALUES ({i}, 'a'), ({}, 'b');\n", 1000 + i));
        rows.push(format!("('s{i}', 't{i}', 'id', -1)"));
    }
    script.push_str(&format!("INSERT INTO ctl VALUES {};\n", rows.join(", ")));
    let out = crate::common::tidemark(&wh)
        .write_stdin(script)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let job = "COPY INCREMENTAL USING CONTROL TABLE ctl CONCURRENCY 16";
    let spawn = || {
        std::process::Command::new(assert_cmd::cargo::cargo_bin("tidemark"))
            .arg(&wh)
            .args(["--format", "csv", "-c", job])
            .output()
    };
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(spawn);
        let b = s.spawn(spawn);
        (a.join().unwrap().unwrap(), b.join().unwrap().unwrap())
    });
    for o in [&a, &b] {
        assert!(
            o.status.success(),
            "no conflict reaches the user: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    assert_eq!(
        ok(
            &wh,
            "SELECT count(*) AS n FROM ctl WHERE last_watermark = CAST(substr(source_table, 2) AS BIGINT) + 1000"
        ),
        "n\n100\n"
    );
    let all: Vec<String> = (0..100)
        .map(|i| format!("SELECT 't{i}' AS t, id FROM t{i}"))
        .collect();
    let union = all.join(" UNION ALL ");
    assert_eq!(
        ok(&wh, &format!("SELECT count(*) AS n FROM ({union})")),
        "n\n200\n"
    );
    assert_eq!(
        ok(
            &wh,
            &format!(
                "SELECT count(*) AS dup FROM (SELECT t, id FROM ({union}) GROUP BY t, id HAVING count(*) > 1)"
            )
        ),
        "dup\n0\n",
        "each row once"
    );
}

#[test]
fn frequently_advanced_tables_are_checkpointed_and_their_old_logs_removed() {
    // tidemark's upkeep, not delta-rs' per-commit clean-up: a checkpoint every 10 commits, and
    // log files the table's retention no longer keeps removed then. Versions 0-27: the last
    // checkpoint is at 18 or later, whatever the table's shift.
    let (_d, wh) = warehouse();
    let script = "CREATE TABLE c (k STRING, n BIGINT);
        INSERT INTO c VALUES ('a', 0);
        ALTER TABLE c SET TBLPROPERTIES ('delta.logRetentionDuration' = 'interval 0 seconds');
        FOR SELECT * FROM range(25) DO UPDATE c SET n = n + 1; END FOR;";
    let out = run(&wh, script);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(ok(&wh, "SELECT n FROM c"), "n\n25\n");
    let log = wh.join("main/default/c/_delta_log");
    let names: Vec<String> = std::fs::read_dir(&log)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    let has = |n: &str| names.iter().any(|x| x == n);
    let checkpoints = crate::common::checkpoint_versions(&log);
    assert!(
        checkpoints.last().is_some_and(|v| *v >= 18),
        "{checkpoints:?}: {names:?}"
    );
    assert!(
        !has("00000000000000000001.json"),
        "expired logs removed: {names:?}"
    );
    assert!(has("00000000000000000027.json"), "{names:?}");
}

/// The add and remove actions of a table's newest commit: (rows of each added file, removed
/// files).
fn last_commit_files(table: &std::path::Path) -> (Vec<u64>, usize) {
    let log = table.join("_delta_log");
    let newest = std::fs::read_dir(&log)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.len() == 25 && n.ends_with(".json"))
        .max()
        .unwrap();
    let text = std::fs::read_to_string(log.join(newest)).unwrap();
    let (mut added, mut removed) = (vec![], 0);
    for line in text.lines() {
        let action: serde_json::Value = serde_json::from_str(line).unwrap();
        if let Some(add) = action.get("add") {
            let stats: serde_json::Value =
                serde_json::from_str(add["stats"].as_str().unwrap()).unwrap();
            added.push(stats["numRecords"].as_u64().unwrap());
        }
        removed += usize::from(action.get("remove").is_some());
    }
    (added, removed)
}

#[test]
fn a_big_control_table_is_advanced_a_file_at_a_time() {
    // Each advance rewrites the control table's files its rows are in. Written as one file of
    // 3,002 rows, the first advance lays the rows out sorted by source in files of at most
    // 512; the next one rewrites the one file its row is in.
    let (_d, wh) = warehouse();
    let script = "CREATE TABLE ctl (source_table STRING, target_table STRING, watermark_column STRING, last_watermark BIGINT);
        CREATE TABLE s0 (id BIGINT);
        CREATE TABLE s1 (id BIGINT);
        INSERT INTO s0 VALUES (1), (2);
        INSERT INTO s1 VALUES (5);
        INSERT INTO ctl SELECT 'z' || lpad(CAST(id AS STRING), 5, '0'), 'y' || CAST(id AS STRING), 'id', id FROM range(3000)
          UNION ALL VALUES ('s0', 't0', 'id', -1), ('s1', 't1', 'id', -1);";
    let out = run(&wh, script);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ctl = wh.join("main/default/ctl");
    let files = |wh: &std::path::Path| {
        let detail = ok(wh, "DESCRIBE DETAIL ctl");
        let mut lines = detail.lines();
        let header: Vec<&str> = lines.next().unwrap().split(',').collect();
        let at = header.iter().position(|h| *h == "numFiles").unwrap();
        lines
            .next()
            .unwrap()
            .split(',')
            .nth(at)
            .unwrap()
            .to_string()
    };
    assert_eq!(files(&wh), "1", "INSERT writes one file");
    let job = "COPY INCREMENTAL USING CONTROL TABLE ctl WHERE source_table IN ('s0', 's1')";
    assert_eq!(
        ok(&wh, job)
            .lines()
            .filter(|l| l.contains(",succeeded,"))
            .count(),
        2
    );
    // The two advances may land in one commit or two: either way, 3,002 rows in 6 files.
    assert_eq!(files(&wh), "6");
    ok(&wh, "INSERT INTO s1 VALUES (6)");
    ok(&wh, job);
    let (added, removed) = last_commit_files(&ctl);
    assert_eq!(removed, 1, "only the file holding s1's row");
    assert_eq!(added.len(), 1);
    assert!(added[0] <= 512, "{added:?}");
    assert_eq!(
        ok(
            &wh,
            "SELECT count(*) AS n, sum(last_watermark) AS s FROM ctl WHERE source_table LIKE 'z%'"
        ),
        "n,s\n3000,4498500\n",
        "untouched rows kept"
    );
    assert_eq!(
        ok(
            &wh,
            "SELECT source_table, last_watermark FROM ctl WHERE source_table LIKE 's%' ORDER BY 1"
        ),
        "source_table,last_watermark\ns0,2\ns1,6\n"
    );
    assert_eq!(ok(&wh, "SELECT id FROM t1 ORDER BY id"), "id\n5\n6\n");
}
