//! The kill suite: the full job (two FOR EACH loops over a control table of 10 sources, APPEND
//! and MERGE ON, timestamp and integer watermarks) is SIGKILLed at random moments while a
//! writer process keeps inserting and updating source rows. After a final clean run every
//! target equals its source, every control row equals its source's maximum, and every
//! successful history row matches a commit of its target.
//!
//! `TIDEMARK_KILLS` sets the number of kills (default 24); `TIDEMARK_KILL_SEED` replays a run.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::common::{Rng, ok, warehouse};

const SOURCES: usize = 10;

/// Source i: APPEND when even, MERGE ON (id) when odd; timestamp watermark when i % 4 < 2.
fn mode(i: usize) -> &'static str {
    if i.is_multiple_of(2) {
        "append"
    } else {
        "merge"
    }
}

fn wm(i: usize) -> &'static str {
    if i % 4 < 2 { "ts" } else { "seq" }
}

const JOB: &str = "
FOR EACH r IN (SELECT * FROM ctl WHERE mode = 'append') CONCURRENCY 4 DO
  COPY INCREMENTAL IDENTIFIER(r.source_table) INTO IDENTIFIER(r.target_table) CONTROL TABLE ctl;
END FOR;
FOR EACH r IN (SELECT * FROM ctl WHERE mode = 'merge') CONCURRENCY 4 DO
  COPY INCREMENTAL IDENTIFIER(r.source_table) INTO IDENTIFIER(r.target_table) CONTROL TABLE ctl MERGE ON (id);
END FOR;
";

fn tidemark(wh: &Path) -> Command {
    let mut c = Command::new(assert_cmd::cargo::cargo_bin("tidemark"));
    c.arg(wh).args(["--format", "csv"]);
    c
}

/// A new tidemark process over the suite's warehouse (CSV output).
pub(crate) type Cmd = Arc<dyn Fn() -> Command + Send + Sync>;

/// Where the suite runs: tidemark processes over one warehouse (a local directory or a
/// warehouse on an object store), and how its commits are read for the final check.
pub(crate) struct Lake {
    pub cmd: Cmd,
    /// A local directory holding the default schema's tables (at least their
    /// `_delta_log/*.json`): the warehouse's own, or a copy fetched from the store.
    pub logs: Box<dyn Fn() -> PathBuf>,
    /// The warehouse directory, when it is local (kept for a post-mortem).
    pub local: Option<PathBuf>,
}

impl Lake {
    fn on(wh: &Path) -> Lake {
        let (a, b) = (wh.to_path_buf(), wh.to_path_buf());
        Lake {
            cmd: Arc::new(move || tidemark(&a)),
            logs: Box::new(move || b.join("main/default")),
            local: Some(wh.to_path_buf()),
        }
    }

    /// Run `sql` in one process; its output (stdout and stderr) and whether it succeeded.
    fn run(&self, sql: &str) -> (bool, String, String) {
        let out = (self.cmd)().args(["-c", sql]).output().unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    }

    /// The first value `q` gives (it must succeed); a NULL is empty.
    fn value(&self, q: &str) -> String {
        let (ok, out, err) = self.run(q);
        assert!(ok, "{q}: {err}");
        // CSV writes a record of one NULL as `""` (an empty line would be no record).
        let line = out.lines().nth(1).unwrap_or_default();
        if line == "\"\"" {
            String::new()
        } else {
            line.to_string()
        }
    }
}

fn setup(lake: &Lake) {
    let mut stmts = vec![
        "CREATE TABLE ctl (source_table STRING NOT NULL, target_table STRING NOT NULL, watermark_column STRING NOT NULL, last_watermark STRING NOT NULL, mode STRING NOT NULL)".to_string(),
    ];
    for i in 0..SOURCES {
        stmts.push(format!(
            "CREATE TABLE s{i} (id BIGINT NOT NULL, v BIGINT, ts TIMESTAMP, seq BIGINT)"
        ));
        stmts.push(format!(
            "INSERT INTO ctl VALUES ('s{i}', 't{i}', '{}', '{}', '{}')",
            wm(i),
            if wm(i) == "ts" {
                "1970-01-01T00:00:00Z"
            } else {
                "-1"
            },
            mode(i)
        ));
    }
    let mut cmd = (lake.cmd)();
    for s in &stmts {
        cmd.args(["-c", s]);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// One write to the sources: an insert anywhere, or an update of a MERGE source. `seq`
/// grows with every write, like a real watermark; `ts` is the write's time truncated to the
/// second, so it never goes back and rows often tie with the high-water mark.
fn write_once(cmd: &Cmd, rng: &mut Rng, next_id: &mut i64, seq: &mut i64) {
    let i = (rng.next() % SOURCES as u64) as usize;
    *seq += 1;
    let sql = if mode(i) == "merge" && rng.next().is_multiple_of(3) && *next_id > 0 {
        let id = (rng.next() % (*next_id as u64).max(1)) as i64;
        format!(
            "UPDATE s{i} SET v = v + 1, ts = date_trunc('second', now()), seq = {seq} WHERE id = {id}"
        )
    } else {
        let id = *next_id;
        *next_id += 1;
        format!("INSERT INTO s{i} VALUES ({id}, 0, date_trunc('second', now()), {seq})")
    };
    let _ = cmd()
        .args(["-c", &sql])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// A thread that keeps writing to the sources until `stop` is set.
fn spawn_writer(cmd: &Cmd, stop: &Arc<AtomicBool>, seed: u64) -> std::thread::JoinHandle<()> {
    let (cmd, stop) = (cmd.clone(), stop.clone());
    std::thread::spawn(move || {
        let mut rng = Rng(seed);
        let (mut next_id, mut seq) = (0, 0);
        while !stop.load(Ordering::Relaxed) {
            write_once(&cmd, &mut rng, &mut next_id, &mut seq);
        }
    })
}

/// With `TIDEMARK_KEEP_FAILED=dir`, a local warehouse that fails its check is copied there
/// first, for a post-mortem.
fn keep_for_post_mortem(lake: &Lake, seed: u64) {
    let (Ok(dir), Some(wh)) = (std::env::var("TIDEMARK_KEEP_FAILED"), &lake.local) else {
        return;
    };
    let to = Path::new(&dir).join(format!("seed-{seed}-{}", std::process::id()));
    let _ = std::process::Command::new("cp")
        .arg("-a")
        .arg(wh)
        .arg(&to)
        .status();
    eprintln!("kept the warehouse at {}", to.display());
}

fn check(lake: &Lake, seed: u64) {
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        check_invariants(lake, seed)
    }));
    if let Err(e) = result {
        keep_for_post_mortem(lake, seed);
        std::panic::resume_unwind(e);
    }
}

fn check_invariants(lake: &Lake, seed: u64) {
    for i in 0..SOURCES {
        let cols = "id, v, ts, seq";
        let diff = lake.value(&format!(
            "SELECT count(*) FROM ((SELECT {cols}, count(*) AS c FROM s{i} GROUP BY {cols}) EXCEPT (SELECT {cols}, count(*) FROM t{i} GROUP BY {cols}))"
        ));
        let (ns, nt) = (
            lake.value(&format!("SELECT count(*) FROM s{i}")),
            lake.value(&format!("SELECT count(*) FROM t{i}")),
        );
        if diff != "0" || ns != nt {
            // What a post-mortem needs first: the pair's control row, its runs and the
            // target's commits as the runs recorded them.
            let show = |q: &str| {
                let (_, out, err) = lake.run(q);
                format!("{out}{err}")
            };
            let ctl = show(&format!("SELECT * FROM ctl WHERE source_table = 's{i}'"));
            let runs = show(&format!(
                "SELECT run_id, status, previous_mark, new_mark, rows_copied, source_version, target_version, error FROM system.tidemark.copy_runs WHERE source = 'main.default.s{i}' ORDER BY started_at"
            ));
            let history = show(&format!("DESCRIBE HISTORY t{i}"));
            panic!(
                "seed {seed}: t{i} ({}) differs from s{i}: {diff} rows missing, {ns} vs {nt}\ncontrol row:\n{ctl}\nruns:\n{runs}\ntarget history:\n{history}",
                mode(i)
            );
        }
        let mark = lake.value(&format!(
            "SELECT last_watermark FROM ctl WHERE source_table = 's{i}'"
        ));
        let max = lake.value(&format!("SELECT CAST(max({}) AS STRING) FROM s{i}", wm(i)));
        let max_ts = lake.value(&format!("SELECT max({}) FROM s{i}", wm(i)));
        let untouched = max_ts.is_empty() && (mark == "1970-01-01T00:00:00Z" || mark == "-1");
        assert!(
            mark == max || mark == max_ts || untouched,
            "seed {seed}: ctl row of s{i} is {mark}, source max {max_ts}"
        );
    }
    // Every successful run in the history is a commit of its target with the same run id.
    let (ok, runs, err) = lake.run(
        "SELECT run_id, target, target_version FROM system.tidemark.copy_runs WHERE status = 'succeeded'",
    );
    assert!(ok, "{err}");
    let logs = (lake.logs)();
    let mut checked = 0;
    for line in runs.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        let table = f[1].rsplit('.').next().unwrap();
        let version: u64 = f[2].parse().unwrap();
        let log = logs.join(format!("{table}/_delta_log"));
        let Ok(commit) = std::fs::read_to_string(log.join(format!("{version:020}.json"))) else {
            // Cleaned up by log retention: then older than every commit kept.
            let kept = std::fs::read_dir(&log)
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().to_string();
                    name.strip_suffix(".json")?.parse::<u64>().ok()
                })
                .min();
            assert!(
                kept.is_some_and(|k| k > version),
                "seed {seed}: commit {version} of {table} is not under {} (oldest kept: {kept:?})",
                log.display()
            );
            continue;
        };
        checked += 1;
        assert!(
            commit.contains(f[0]),
            "seed {seed}: history run {} is not commit {version} of {table}",
            f[0]
        );
    }
    assert!(
        checked > 0 || runs.lines().count() <= 1,
        "seed {seed}: no commit of a successful run was found under {}",
        logs.display()
    );
}

/// The kill suite over `lake`: the job SIGKILLed `kills` times at random moments while a
/// writer keeps changing the sources, then a clean run and the invariants.
pub(crate) fn killed_jobs(lake: &Lake, kills: usize, seed: u64) {
    eprintln!("kill suite seed {seed} ({kills} kills)");
    setup(lake);
    let stop = Arc::new(AtomicBool::new(false));
    let writer = spawn_writer(&lake.cmd, &stop, seed ^ 0xABCD);
    let mut rng = Rng(seed);
    let mut killed = 0;
    while killed < kills {
        let mut child = (lake.cmd)()
            .args(["-c", JOB])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(50 + rng.next() % 900));
        if child.try_wait().unwrap().is_none() {
            child.kill().unwrap();
            killed += 1;
        }
        let _ = child.wait();
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    let (ok, out, err) = lake.run(JOB);
    assert!(ok, "seed {seed}: final run failed: {out}\n{err}");
    check(lake, seed);
}

/// The kill suite's seed: `TIDEMARK_KILL_SEED`, else the clock's.
pub(crate) fn seed() -> u64 {
    crate::common::env_number("TIDEMARK_KILL_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    })
}

#[test]
fn killed_jobs_never_lose_or_duplicate_rows() {
    let kills: usize = crate::common::env_number("TIDEMARK_KILLS").unwrap_or(24);
    let seed = seed();
    let (_d, wh) = warehouse();
    killed_jobs(&Lake::on(&wh), kills, seed);
}

/// Three processes running the job `runs` times each at once, while a writer changes the
/// sources and another process keeps rewriting the control and history tables (UPDATE,
/// OPTIMIZE, VACUUM, DELETE): every failure is a retryable conflict, and a final run meets the
/// invariants.
pub(crate) fn racing_jobs(lake: &Lake, runs: usize, seed: u64) {
    setup(lake);
    let stop = Arc::new(AtomicBool::new(false));
    let writer = spawn_writer(&lake.cmd, &stop, seed ^ 0x5EED);
    let maintenance = {
        let (cmd, stop) = (lake.cmd.clone(), stop.clone());
        std::thread::spawn(move || {
            let stmts = [
                "UPDATE ctl SET mode = mode",
                "OPTIMIZE ctl",
                "VACUUM ctl",
                "DELETE FROM system.tidemark.copy_runs WHERE started_at < TIMESTAMP '2000-01-01'",
                "OPTIMIZE system.tidemark.copy_runs",
            ];
            let mut failures = vec![];
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                let out = cmd().args(["-c", stmts[i % stmts.len()]]).output().unwrap();
                let err = String::from_utf8_lossy(&out.stderr).to_string();
                if !out.status.success()
                    && !err.contains("can be run again")
                    && !err.contains("not found")
                {
                    failures.push(err);
                }
                i += 1;
            }
            failures
        })
    };
    let jobs: Vec<_> = (0..3)
        .map(|_| {
            let cmd = lake.cmd.clone();
            std::thread::spawn(move || {
                let mut errors = vec![];
                for _ in 0..runs {
                    let out = cmd().args(["-c", JOB]).output().unwrap();
                    if !out.status.success() {
                        errors.push(format!(
                            "{}{}",
                            String::from_utf8_lossy(&out.stdout),
                            String::from_utf8_lossy(&out.stderr)
                        ));
                    }
                }
                errors
            })
        })
        .collect();
    let job_errors: Vec<String> = jobs.into_iter().flat_map(|j| j.join().unwrap()).collect();
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    let maintenance_failures = maintenance.join().unwrap();
    assert!(
        maintenance_failures.is_empty(),
        "seed {seed}: maintenance failed without a retryable error: {maintenance_failures:?}"
    );
    for e in &job_errors {
        assert!(
            e.contains("can be run again"),
            "seed {seed}: a job failed without a clear, retryable error: {e}"
        );
        // Each failed iteration on its own (one retryable failure must not hide another).
        for line in e.lines().filter(|l| l.contains(",failed,")) {
            assert!(
                line.contains("can be run again"),
                "seed {seed}: an iteration failed without a clear, retryable error: {line}"
            );
        }
    }
    let (ok, _, err) = lake.run(JOB);
    assert!(ok, "seed {seed}: final run failed: {err}");
    check(lake, seed);
}

#[test]
fn racing_jobs_and_maintenance_keep_the_invariants() {
    let seed: u64 = crate::common::env_number("TIDEMARK_KILL_SEED").unwrap_or(42);
    let (_d, wh) = warehouse();
    racing_jobs(&Lake::on(&wh), 4, seed);
}

#[cfg(unix)]
#[test]
fn sigterm_stops_a_job_cleanly_and_the_rerun_completes_it() {
    let (_d, wh) = warehouse();
    let lake = Lake::on(&wh);
    setup(&lake);
    let mut rng = Rng(7);
    let (mut next_id, mut seq) = (0, 0);
    for _ in 0..40 {
        write_once(&lake.cmd, &mut rng, &mut next_id, &mut seq);
    }
    let child = tidemark(&wh)
        .args(["-c", JOB])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(400));
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let out = child.wait_with_output().unwrap();
    if out.status.code() != Some(0) {
        // Interrupted: a non-zero exit that says so (it may also have finished first).
        assert_eq!(
            out.status.code(),
            Some(130),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stderr).contains("cancelled"));
    }
    let (ok, _, err) = lake.run(JOB);
    assert!(ok, "{err}");
    check(&lake, 7);
}

/// Many workers, one warehouse: the control-table job split as `SHARD k OF 4`, four worker
/// processes at once (as four tasks of a scheduler would run it) while a writer inserts into
/// the sources, one worker SIGKILLed mid-run in each round and started again. After a final
/// run of each shard every target equals its source and every control row its source's
/// maximum; each shard copied only its own tables, and together they copied all of them.
#[test]
fn shard_workers_split_the_job_and_survive_a_killed_worker() {
    let (_d, wh) = warehouse();
    shard_workers(&|| tidemark(&wh), "", "");
}

/// [`shard_workers_split_the_job_and_survive_a_killed_worker`] with tidemark processes from
/// `cmd` (CSV output), sources named `{sources}s{i}` and targets `{targets}t{i}` (tables on an object
/// store, in `object_store.rs`).
pub(crate) fn shard_workers(cmd: &(dyn Fn() -> Command + Sync), sources: &str, targets: &str) {
    const SHARDS: u64 = 4;
    const TABLES: usize = 12;
    let seed: u64 = crate::common::env_number("TIDEMARK_KILL_SEED").unwrap_or(17);
    let run = |sql: &str| {
        let out = cmd().args(["-c", sql]).output().unwrap();
        assert!(
            out.status.success(),
            "{sql}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let value = |q: &str| run(q).lines().nth(1).unwrap_or_default().to_string();
    let mut setup = cmd();
    setup.args([
        "-c",
        "CREATE TABLE ctl (source_table STRING NOT NULL, target_table STRING NOT NULL, watermark_column STRING NOT NULL, last_watermark BIGINT NOT NULL)",
    ]);
    for i in 0..TABLES {
        setup.args([
            "-c",
            &format!("CREATE TABLE {sources}s{i} (id BIGINT NOT NULL, seq BIGINT NOT NULL)"),
        ]);
        setup.args([
            "-c",
            &format!("INSERT INTO ctl VALUES ('{sources}s{i}', '{targets}t{i}', 'seq', -1)"),
        ]);
    }
    let out = setup.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let job = |k: u64| {
        format!("COPY INCREMENTAL USING CONTROL TABLE ctl SHARD {k} OF {SHARDS} CONCURRENCY 2")
    };
    let stop = AtomicBool::new(false);
    let mut failures = vec![];
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let mut rng = Rng(seed);
            let mut seq = 0;
            while !stop.load(Ordering::Relaxed) {
                let i = rng.below(TABLES);
                seq += 1;
                let sql = format!(
                    "INSERT INTO {sources}s{i} VALUES ({seq}, {seq}), ({}, {seq})",
                    -seq
                );
                let _ = cmd().args(["-c", &sql]).output();
            }
        });
        let mut rng = Rng(seed ^ 0xF00D);
        for _round in 0..3 {
            let victim = rng.below(SHARDS as usize) as u64;
            let mut workers: Vec<(u64, std::process::Child)> = (0..SHARDS)
                .map(|k| {
                    let child = cmd()
                        .args(["-c", &job(k)])
                        .stdout(Stdio::null())
                        .stderr(Stdio::piped())
                        .spawn()
                        .unwrap();
                    (k, child)
                })
                .collect();
            std::thread::sleep(Duration::from_millis(100 + rng.next() % 600));
            let _ = workers[victim as usize].1.kill();
            for (k, child) in workers.drain(..) {
                let out = child.wait_with_output().unwrap();
                let err = String::from_utf8_lossy(&out.stderr).to_string();
                if !out.status.success() && k != victim && !err.contains("can be run again") {
                    failures.push(err);
                }
            }
            // The killed worker starts again, as its scheduler would restart the task.
            let out = cmd().args(["-c", &job(victim)]).output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr).to_string();
            if !out.status.success() && !err.contains("can be run again") {
                failures.push(err);
            }
        }
        stop.store(true, Ordering::Relaxed);
    });
    assert!(
        failures.is_empty(),
        "seed {seed}: workers failed: {failures:?}"
    );
    // A final run of each shard; each reports only its own tables, all of them together.
    let mut seen = std::collections::BTreeSet::new();
    for k in 0..SHARDS {
        let out = run(&job(k));
        for line in out.lines().skip(1) {
            let target = line.split(',').nth(2).unwrap().to_string();
            assert!(seen.insert(target.clone()), "{target} is in two shards");
        }
    }
    assert_eq!(seen.len(), TABLES, "the shards together: {seen:?}");
    for i in 0..TABLES {
        let diff = value(&format!(
            "SELECT count(*) FROM ((SELECT id, seq, count(*) FROM {sources}s{i} GROUP BY id, seq) EXCEPT ALL (SELECT id, seq, count(*) FROM {targets}t{i} GROUP BY id, seq))"
        ));
        let ns = value(&format!("SELECT count(*) FROM {sources}s{i}"));
        // t{i} exists once its shard copied s{i} (a source without rows may have none).
        let nt = match cmd()
            .args(["-c", &format!("SELECT count(*) FROM {targets}t{i}")])
            .output()
        {
            Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout)
                .lines()
                .nth(1)
                .unwrap_or_default()
                .to_string(),
            _ => String::new(),
        };
        assert!(
            diff == "0" && ns == nt || (ns == "0" && nt.is_empty()),
            "seed {seed}: t{i} differs from s{i}: {diff} rows missing, {ns} vs {nt}"
        );
        let mark = value(&format!(
            "SELECT last_watermark FROM ctl WHERE source_table = '{sources}s{i}'"
        ));
        let max = value(&format!("SELECT coalesce(max(seq), -1) FROM {sources}s{i}"));
        assert_eq!(mark, max, "seed {seed}: ctl row of s{i}");
    }
}

/// What a process killed while creating a table leaves: a log directory with no version in
/// it, empty or holding only the staged first commit (`00000000000000000000.json#1`, written
/// before it is linked into place). That is no table: it is not listed, reads say it is not
/// found, and CREATE TABLE and a copy's first run create it.
#[test]
fn a_table_whose_creation_was_killed_is_no_table_and_is_created_again() {
    use crate::common::{run, sql};
    let (_d, wh) = warehouse();
    sql(
        &wh,
        &[
            "CREATE TABLE s (id BIGINT, ts BIGINT)",
            "INSERT INTO s VALUES (1, 10), (2, 20)",
        ],
    );
    let schema = wh.join("main/default");
    std::fs::create_dir_all(schema.join("empty/_delta_log")).unwrap();
    std::fs::create_dir_all(schema.join("staged/_delta_log")).unwrap();
    std::fs::write(
        schema.join("staged/_delta_log/00000000000000000000.json#1"),
        b"{\"protocol\":{\"minReaderVersion\":1",
    )
    .unwrap();
    assert_eq!(
        sql(&wh, &["SHOW TABLES"]).lines().count(),
        2,
        "only s is a table"
    );
    for t in ["empty", "staged"] {
        let out = run(&wh, &format!("SELECT * FROM {t}"));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains("not found"),
            "{t}: {err}"
        );
    }
    sql(
        &wh,
        &[
            "CREATE TABLE empty (a INT)",
            "INSERT INTO empty VALUES (7)",
            "COPY INCREMENTAL s INTO staged WATERMARK ts",
        ],
    );
    assert_eq!(ok(&wh, "SELECT a FROM empty"), "a\n7\n");
    assert_eq!(ok(&wh, "SELECT id FROM staged ORDER BY id"), "id\n1\n2\n");
}
