//! COPY INCREMENTAL from databases: a PostgreSQL and a MariaDB server of the tests' own and a
//! SQLite file as sources, alone and in a control-table job with a Delta source. Exactly once
//! through ties, NULL watermarks, concurrent inserts, a long transaction that commits rows
//! below the mark (caught by LOOKBACK), MERGE ON, and a server stopped mid-copy.

use std::io::Write;
use std::path::Path;

use crate::common::warehouse;
use crate::foreign::{err_env, ok_env, sql_env};
use crate::servers::{MariaDb, Postgres};

const PG_ENV: [(&str, &str); 1] = [("TIDEMARK_SECRET_SHOP_PG", "s3cret-pw")];

/// The connection and foreign catalog `shop` over `pg`'s database `shop`.
fn pg_catalog(wh: &Path, pg: &Postgres) {
    let create = format!(
        "CREATE CONNECTION pg TYPE postgresql OPTIONS (host '127.0.0.1', port '{}', user 'shopper', password secret('shop', 'pg'), sslmode 'disable')",
        pg.port
    );
    ok_env(
        wh,
        &PG_ENV,
        &[
            &create,
            "CREATE FOREIGN CATALOG shop USING CONNECTION pg OPTIONS (database 'shop')",
        ],
    );
}

/// The single value a one-row, one-column query returns (csv output).
fn value(wh: &Path, sql: &str) -> String {
    let out = ok_env(wh, &PG_ENV, &[sql]);
    let line = out.lines().nth(1).unwrap_or_default();
    match line.strip_prefix('"').and_then(|l| l.strip_suffix('"')) {
        Some(quoted) => quoted.replace("\"\"", "\""),
        None => line.to_string(),
    }
}

/// `copy` run by a tidemark process of its own with the fail points `failpoints`, its output
/// piped.
fn copy_in_background(
    wh: &Path,
    env: &[(&str, &str)],
    copy: &str,
    failpoints: &str,
) -> std::process::Child {
    std::process::Command::new(assert_cmd::cargo::cargo_bin("tidemark"))
        .arg(wh)
        .envs(env.iter().copied())
        .env("NO_COLOR", "1")
        .env("FAILPOINTS", failpoints)
        .args(["--format", "csv", "-c", copy])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// The PostgreSQL statements logged since `from` bytes into the server's log.
fn logged_since(pg: &Postgres, from: usize) -> String {
    let log = std::fs::read_to_string(pg.log()).unwrap();
    log.get(from..).unwrap_or_default().to_string()
}

#[test]
fn a_postgres_table_is_copied_exactly_once_and_lookback_closes_the_watermark_hole() {
    let pg = Postgres::start();
    // Pairs of rows share a watermark (ties); one row has none.
    pg.psql(
        "CREATE TABLE public.orders (id bigint PRIMARY KEY, customer text, amount numeric(12,2), updated_at timestamptz, local_at timestamp, day date, tags jsonb, uid uuid, flags int[], note varchar(20));
         INSERT INTO public.orders SELECT i, 'c' || (i % 3), i * 1.25, timestamptz '2024-01-01 00:00:00+00' + (i / 2) * interval '1 minute', timestamp '2024-01-01' + i * interval '1 second', date '2024-01-01' + (i % 30), '{\"k\": 1}', md5(i::text)::uuid, ARRAY[i, i + 1], 'n' || i FROM generate_series(1, 1000) i;
         INSERT INTO public.orders (id, customer, amount) VALUES (5000, 'no watermark', 1);
         ALTER TABLE public.orders OWNER TO shopper;",
        "shop",
    );
    let (_d, wh) = warehouse();
    pg_catalog(&wh, &pg);
    // A control table mixing a database source and a Delta source.
    ok_env(
        &wh,
        &PG_ENV,
        &[
            "CREATE TABLE events (id BIGINT, at TIMESTAMP)",
            "INSERT INTO events SELECT id, TIMESTAMP '2024-01-01 00:00:00' + make_interval(0, 0, 0, 0, 0, 0, id) FROM range(1, 101)",
            "CREATE TABLE ctl (source_table STRING NOT NULL, target_table STRING NOT NULL, watermark_column STRING NOT NULL, last_watermark TIMESTAMP)",
            "INSERT INTO ctl VALUES ('shop.public.orders', 'orders_copy', 'updated_at', NULL), ('events', 'events_copy', 'at', NULL)",
        ],
    );
    let before = logged_since(&pg, 0).len();
    let out = ok_env(&wh, &PG_ENV, &["COPY INCREMENTAL USING CONTROL TABLE ctl"]);
    assert_eq!(out.matches("succeeded").count(), 2, "{out}");
    assert_eq!(
        value(
            &wh,
            "SELECT concat_ws('/', count(*), count(DISTINCT id), sum(amount)) FROM orders_copy"
        ),
        "1000/1000/625625.00"
    );
    assert_eq!(value(&wh, "SELECT count(*) FROM events_copy"), "100");
    // Every column in a Delta type that holds it exactly.
    assert_eq!(
        value(
            &wh,
            "SELECT concat_ws('/', typeof(amount), typeof(updated_at), typeof(local_at), typeof(day), typeof(tags), typeof(uid), typeof(flags), typeof(note)) FROM orders_copy LIMIT 1"
        ),
        "decimal(12,2)/timestamp/timestamp_ntz/date/string/string/array<int>/string"
    );
    assert_eq!(
        value(
            &wh,
            "SELECT concat_ws('/', updated_at, local_at, uid, flags[0]) FROM orders_copy WHERE id = 7"
        ),
        "2024-01-01 00:03:00/2024-01-01 00:00:07/8f14e45f-ceea-167a-5a36-dedd4bea2543/7"
    );
    assert_eq!(
        value(
            &wh,
            "SELECT CAST(last_watermark AS STRING) FROM ctl WHERE target_table = 'orders_copy'"
        ),
        "2024-01-01 08:20:00"
    );
    // The first run read the rows once, with every column, and sent no predicate but the
    // watermark's IS [NOT] NULL (the NULL rows are counted, never copied).
    let first = logged_since(&pg, before);
    let reads: Vec<&str> = first
        .lines()
        .filter(|l| l.contains("FROM \"public\".\"orders\""))
        .collect();
    let all_columns = reads.iter().filter(|l| l.contains("\"tags\"")).count();
    assert_eq!(all_columns, 1, "{first}");
    let only_null_checks = |l: &&str| {
        l.split(" WHERE ").nth(1).is_none_or(|w| {
            w.replace("\"orders\".", "")
                .replace("\"updated_at\" IS NOT NULL", "")
                .replace("\"updated_at\" IS NULL", "")
                .chars()
                .all(|c| " ()AND".contains(c))
        })
    };
    assert!(reads.iter().all(only_null_checks), "{first}");

    // A tie at the mark committed after the run, new rows, and a long transaction that
    // stamps a row below the mark and commits after the next run.
    let mut long = pg.session("shop");
    writeln!(
        long.stdin.as_mut().unwrap(),
        "BEGIN; INSERT INTO public.orders VALUES (2000, 'late', 2, timestamptz '2024-01-01 08:19:30+00', NULL, NULL, NULL, NULL, NULL, 'late');"
    )
    .unwrap();
    pg.psql(
        "INSERT INTO public.orders SELECT i, 'c', 1, timestamptz '2024-01-01 08:20:00+00' + (i - 1001) * interval '1 minute', NULL, NULL, NULL, NULL, NULL, NULL FROM generate_series(1001, 1010) i",
        "shop",
    );
    let before = logged_since(&pg, 0).len();
    let out = ok_env(&wh, &PG_ENV, &["COPY INCREMENTAL USING CONTROL TABLE ctl"]);
    assert!(
        out.contains("succeeded,")
            && out.contains(",10,,2024-01-01T08:20:00Z,2024-01-01T08:29:00Z"),
        "ten new rows, the tie at the mark among them:\n{out}"
    );
    assert!(out.contains("nothing_new"), "{out}");
    let second = logged_since(&pg, before);
    assert!(
        second.lines().any(|l| l.contains("\"orders\"")
            && l.contains("\"updated_at\" >")
            && l.contains("08:20:00")),
        "the watermark predicate runs in PostgreSQL:\n{second}"
    );
    writeln!(long.stdin.as_mut().unwrap(), "COMMIT;").unwrap();
    drop(long.stdin.take());
    assert!(long.wait().unwrap().success());
    // The hole: the late row is below the mark, so a plain run never sees it...
    let out = ok_env(&wh, &PG_ENV, &["COPY INCREMENTAL USING CONTROL TABLE ctl"]);
    assert_eq!(out.matches("nothing_new").count(), 2, "{out}");
    assert_eq!(
        value(&wh, "SELECT count(*) FROM orders_copy WHERE id = 2000"),
        "0"
    );
    // ... LOOKBACK re-reads the last hour and copies only what the target lacks.
    let lookback = "COPY INCREMENTAL shop.public.orders INTO orders_copy WATERMARK updated_at CONTROL TABLE ctl LOOKBACK INTERVAL 1 HOUR";
    let out = ok_env(&wh, &PG_ENV, &[lookback]);
    assert!(out.contains(",1,1,"), "{out}");
    let out = ok_env(&wh, &PG_ENV, &[lookback]);
    assert!(out.contains("nothing_new"), "{out}");
    assert_eq!(
        value(
            &wh,
            "SELECT concat_ws('/', count(*), count(DISTINCT id)) FROM orders_copy"
        ),
        "1011/1011"
    );

    // Rows inserted while copies run: after the last run, the target holds each row once.
    let writer = {
        let sql: Vec<String> = (0..20)
            .map(|k| {
                format!(
                    "INSERT INTO public.orders SELECT i, 'w', 1, timestamptz '2024-02-01 00:00:00+00' + i * interval '1 second', NULL, NULL, NULL, NULL, NULL, NULL FROM generate_series({}, {}) i;",
                    10_000 + k * 50,
                    10_049 + k * 50
                )
            })
            .collect();
        let mut s = pg.session("shop");
        let mut stdin = s.stdin.take().unwrap();
        std::thread::spawn(move || {
            for stmt in sql {
                writeln!(stdin, "{stmt}").unwrap();
                std::thread::sleep(std::time::Duration::from_millis(30));
            }
            drop(stdin);
            s.wait().unwrap()
        })
    };
    for _ in 0..3 {
        ok_env(&wh, &PG_ENV, &["COPY INCREMENTAL USING CONTROL TABLE ctl"]);
    }
    assert!(writer.join().unwrap().success());
    ok_env(&wh, &PG_ENV, &["COPY INCREMENTAL USING CONTROL TABLE ctl"]);
    assert_eq!(
        value(
            &wh,
            "SELECT concat_ws('/', count(*), count(DISTINCT id)) FROM orders_copy"
        ),
        "2011/2011"
    );

    // A DRY RUN reads and reports; MERGE ON keeps each key's newest row.
    pg.psql(
        "UPDATE public.orders SET amount = 99, updated_at = timestamptz '2024-03-01 00:00:00+00' WHERE id = 7",
        "shop",
    );
    let out = ok_env(
        &wh,
        &PG_ENV,
        &[
            "COPY INCREMENTAL shop.public.orders INTO orders_copy WATERMARK updated_at CONTROL TABLE ctl DRY RUN",
        ],
    );
    assert!(out.contains("dry_run"), "{out}");
    assert_eq!(value(&wh, "SELECT count(*) FROM orders_copy"), "2011");
    let merge =
        "COPY INCREMENTAL shop.public.orders INTO orders_latest WATERMARK updated_at MERGE ON (id)";
    ok_env(&wh, &PG_ENV, &[merge]);
    pg.psql(
        "UPDATE public.orders SET amount = 100, updated_at = timestamptz '2024-03-02 00:00:00+00' WHERE id = 7",
        "shop",
    );
    let out = ok_env(&wh, &PG_ENV, &[merge]);
    assert!(out.contains("succeeded"), "{out}");
    assert_eq!(
        value(
            &wh,
            "SELECT concat_ws('/', count(*), max(amount) FILTER (WHERE id = 7)) FROM orders_latest"
        ),
        "2011/100.00"
    );
    // A column no Delta type holds exactly is refused by name, before anything is read.
    pg.psql(
        "CREATE TABLE public.shifts (id int, at timestamptz, starts time); ALTER TABLE public.shifts OWNER TO shopper;",
        "shop",
    );
    let e = err_env(
        &wh,
        &PG_ENV,
        &["COPY INCREMENTAL shop.public.shifts INTO shifts WATERMARK at"],
    );
    assert!(
        e.contains("column 'starts' of shop.public.shifts") && e.contains("cannot hold"),
        "{e}"
    );
    // So is a column the reader maps to something else than its values: a range (read as its
    // two bounds), a bit string or a geometric shape (read as bytes).
    pg.psql(
        "CREATE TABLE public.spans (id int, at timestamptz, span int4range, flags bit(3), area box); \
         INSERT INTO public.spans VALUES (1, now(), '[1,5)', B'101', '((0,0),(1,1))'); \
         ALTER TABLE public.spans OWNER TO shopper;",
        "shop",
    );
    for (column, pg_type, drop) in [
        ("span", "int4range", "span"),
        ("flags", "bit(3)", "flags"),
        ("area", "box", "area"),
    ] {
        let e = err_env(
            &wh,
            &PG_ENV,
            &["COPY INCREMENTAL shop.public.spans INTO spans WATERMARK at"],
        );
        assert!(
            e.contains(&format!(
                "column '{column}' of shop.public.spans is {pg_type} in the database"
            )) && e.contains("cannot hold exactly"),
            "{e}"
        );
        pg.psql(
            &format!("ALTER TABLE public.spans DROP COLUMN {drop};"),
            "shop",
        );
    }
    // The refused runs made no target; without those columns the table copies.
    let e = err_env(&wh, &PG_ENV, &["SELECT count(*) FROM spans"]);
    assert!(e.contains("spans"), "{e}");
    ok_env(
        &wh,
        &PG_ENV,
        &["COPY INCREMENTAL shop.public.spans INTO spans WATERMARK at"],
    );
    assert_eq!(value(&wh, "SELECT count(*) FROM spans"), "1");
    // Nothing is ever written to the database.
    let e = err_env(
        &wh,
        &PG_ENV,
        &["COPY INCREMENTAL orders_copy INTO shop.public.orders WATERMARK updated_at"],
    );
    assert!(
        e.contains("shop is a foreign catalog (connection pg)"),
        "{e}"
    );
}

#[test]
fn a_postgres_server_stopped_mid_copy_fails_the_run_and_the_next_run_copies_each_row_once() {
    let pg = Postgres::start();
    pg.psql(
        "CREATE TABLE public.big (id bigint PRIMARY KEY, at timestamptz NOT NULL, pad text);
         INSERT INTO public.big SELECT i, timestamptz '2024-01-01 00:00:00+00' + i * interval '1 second', repeat('x', 200) FROM generate_series(1, 300000) i;
         ALTER TABLE public.big OWNER TO shopper;",
        "shop",
    );
    let (_d, wh) = warehouse();
    pg_catalog(&wh, &pg);
    let copy = "COPY INCREMENTAL shop.public.big INTO big_copy WATERMARK at";
    // Each batch takes 100 ms more: the server stops while its 70 MB of rows stream.
    let child = copy_in_background(&wh, &PG_ENV, copy, "copy::database_batch=sleep(100)");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while !std::fs::read_to_string(pg.log())
        .unwrap()
        .lines()
        .any(|l| l.contains("\"big\"") && l.contains("\"pad\""))
    {
        assert!(std::time::Instant::now() < deadline, "the copy never read");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(100));
    pg.kill();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "the copy outlived its server:\n{}\n{stderr}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(stderr.contains("shop.public.big"), "{stderr}");
    assert!(!stderr.contains("s3cret-pw"), "{stderr}");
    // Nothing committed: the target holds no row, and the run is in the history as failed.
    let (_, out, _) = sql_env(&wh, &PG_ENV, &["SELECT count(*) FROM big_copy"]);
    assert!(out.is_empty() || out.contains("\n0\n"), "{out}");
    assert_eq!(
        value(
            &wh,
            "SELECT status FROM system.tidemark.copy_runs WHERE target LIKE '%big_copy'"
        ),
        "failed"
    );
    // With the server down, a run fails naming the connection, and writes nothing.
    let e = err_env(&wh, &PG_ENV, &[copy]);
    assert!(e.contains("connection pg"), "{e}");
    // Back up: the next run copies every row once, and the one after has nothing new.
    pg.start_server();
    let out = ok_env(&wh, &PG_ENV, &[copy]);
    assert!(out.contains(",300000,0,"), "{out}");
    let out = ok_env(&wh, &PG_ENV, &[copy]);
    assert!(out.contains("nothing_new"), "{out}");
    assert_eq!(
        value(
            &wh,
            "SELECT concat_ws('/', count(*), count(DISTINCT id), max(at)) FROM big_copy"
        ),
        "300000/300000/2024-01-04 11:20:00"
    );
}

#[test]
fn a_large_postgres_table_is_read_over_several_connections_in_one_snapshot() {
    let pg = Postgres::start();
    // 300,000 rows of about 150 bytes: over 4,096 pages, so four connections read it.
    pg.psql(
        "CREATE TABLE public.big (id bigint PRIMARY KEY, at timestamptz NOT NULL, pad text);
         INSERT INTO public.big SELECT i, timestamptz '2024-01-01 00:00:00+00' + i * interval '1 second', repeat('x', 100) FROM generate_series(1, 300000) i;
         CREATE INDEX ON public.big (at);
         ALTER TABLE public.big OWNER TO shopper; ANALYZE public.big;",
        "shop",
    );
    let (_d, wh) = warehouse();
    pg_catalog(&wh, &pg);
    let copy = "COPY INCREMENTAL shop.public.big INTO big_copy WATERMARK at";
    let before = logged_since(&pg, 0).len();
    // The connections that join the run's snapshot wait before they read until the test
    // lets them go: meanwhile another session updates half of the rows (their new versions
    // land on other pages) and adds rows above every watermark, and commits.
    let go = _d.path().join("go");
    let child = copy_in_background(
        &wh,
        &PG_ENV,
        copy,
        &format!("foreign::joined_snapshot=return(until:{})", go.display()),
    );
    // A bound on a wait, not a measure of speed: a loaded machine may take long to start.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    while logged_since(&pg, before)
        .matches("SET TRANSACTION SNAPSHOT")
        .count()
        < 3
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the copy never read in parts:\n{}",
            logged_since(&pg, before)
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    pg.psql(
        "UPDATE public.big SET pad = 'changed' WHERE id % 2 = 0 AND id < 300000;
         INSERT INTO public.big SELECT i, timestamptz '2025-01-01 00:00:00+00' + i * interval '1 second', 'new' FROM generate_series(300001, 300100) i;",
        "shop",
    );
    let mut child = child;
    assert!(
        child.try_wait().unwrap().is_none(),
        "the copy ended before the table changed"
    );
    std::fs::write(&go, "").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The rows as they were when the run began: each once, none changed, none added.
    assert_eq!(
        value(
            &wh,
            "SELECT concat_ws('/', count(*), count(DISTINCT id), sum(id), count_if(pad <> repeat('x', 100))) FROM big_copy"
        ),
        "300000/300000/45000150000/0"
    );
    // One exported snapshot, which the other connections join; the rows read by four
    // queries, each of its own pages.
    let log = logged_since(&pg, before);
    assert_eq!(log.matches("pg_export_snapshot()").count(), 1, "{log}");
    let joined: std::collections::BTreeSet<&str> = log
        .split("SET TRANSACTION SNAPSHOT '")
        .skip(1)
        .filter_map(|rest| rest.split('\'').next())
        .collect();
    assert_eq!(joined.len(), 1, "{log}");
    assert!(
        log.matches("SET TRANSACTION SNAPSHOT").count() >= 3,
        "{log}"
    );
    let reads: Vec<&str> = log
        .lines()
        .filter(|l| {
            l.contains("FROM \"public\".\"big\"") && l.contains("\"pad\"") && !l.contains("EXPLAIN")
        })
        .collect();
    assert_eq!(reads.len(), 4, "{log}");
    assert_eq!(
        reads.iter().filter(|l| l.contains("ctid")).count(),
        4,
        "{log}"
    );
    // The run records the snapshot it read, by PostgreSQL's name for it.
    let snapshot = value(
        &wh,
        "SELECT source_snapshot FROM system.tidemark.copy_runs WHERE target LIKE '%big_copy'",
    );
    let parts: Vec<&str> = snapshot.split(':').collect();
    assert!(
        parts.len() == 3 && parts[0].parse::<u64>().is_ok() && parts[1].parse::<u64>().is_ok(),
        "{snapshot}"
    );
    // The next run, an increment (an index scan, one query), copies the added rows only.
    let before = logged_since(&pg, 0).len();
    let out = ok_env(&wh, &PG_ENV, &[copy]);
    assert!(out.contains(",100,0,"), "{out}");
    let log = logged_since(&pg, before);
    let reads: Vec<&str> = log
        .lines()
        .filter(|l| {
            l.contains("FROM \"public\".\"big\"") && l.contains("\"pad\"") && !l.contains("EXPLAIN")
        })
        .collect();
    // The ties at the mark, and the rows above it.
    assert_eq!(reads.len(), 2, "{log}");
    assert!(reads.iter().all(|r| !r.contains("ctid")), "{log}");
    assert_eq!(
        value(
            &wh,
            "SELECT concat_ws('/', count(*), count(DISTINCT id), count_if(pad = 'new')) FROM big_copy"
        ),
        "300100/300100/100"
    );
    // One connection when told.
    let (_d2, wh2) = warehouse();
    ok_env(
        &wh2,
        &PG_ENV,
        &[
            &format!(
                "CREATE CONNECTION pg TYPE postgresql OPTIONS (host '127.0.0.1', port '{}', user 'shopper', password secret('shop', 'pg'), sslmode 'disable', read_connections '1')",
                pg.port
            ),
            "CREATE FOREIGN CATALOG shop USING CONNECTION pg OPTIONS (database 'shop')",
        ],
    );
    let before = logged_since(&pg, 0).len();
    assert_eq!(
        value(&wh2, "SELECT count(*) FROM shop.public.big"),
        "300100"
    );
    let log = logged_since(&pg, before);
    assert!(
        !log.contains("ctid") && !log.contains("SET TRANSACTION SNAPSHOT"),
        "{log}"
    );
    let e = err_env(
        &wh2,
        &PG_ENV,
        &[
            "CREATE CONNECTION pg2 TYPE postgresql OPTIONS (host 'h', user 'u', read_connections '0')",
        ],
    );
    assert!(
        e.contains("read_connections") && e.contains("1 to 16"),
        "{e}"
    );
    let e = err_env(
        &wh2,
        &PG_ENV,
        &[
            "CREATE CONNECTION pg3 TYPE postgresql OPTIONS (host 'h', user 'u', read_connections secret('shop', 'pg'))",
        ],
    );
    assert!(
        e.contains("read_connections") && e.contains("not a secret"),
        "{e}"
    );
}

/// The thread of each statement in a MariaDB general log (`<time>? <thread> <command>\t<text>`).
fn mariadb_threads(log: &str) -> Vec<(&str, &str)> {
    log.lines()
        .filter_map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            let at = words.windows(2).position(|w| {
                w[0].bytes().all(|b| b.is_ascii_digit())
                    && matches!(w[1], "Query" | "Execute" | "Prepare")
            })?;
            Some((words[at], l))
        })
        .collect()
}

#[test]
fn a_mariadb_copy_reads_one_snapshot_and_records_its_binlog_position() {
    let db = MariaDb::start();
    db.sql(
        "USE shop; CREATE TABLE shop.events (id BIGINT PRIMARY KEY, at DATETIME(6) NOT NULL, note VARCHAR(20), KEY (at)) ENGINE=InnoDB;
         INSERT INTO shop.events SELECT seq, TIMESTAMP '2024-01-01 00:00:00' + INTERVAL seq SECOND, 'n' FROM seq_1_to_1000;
         UPDATE shop.events SET note = 'say \"hi\"' WHERE id = 7;
         UPDATE shop.events SET note = 'C:\\\\temp' WHERE id = 9;",
    );
    let (_d, wh) = warehouse();
    let env = [("TIDEMARK_SECRET_SHOP_MY", "m4ria-pw")];
    let create = format!(
        "CREATE CONNECTION my TYPE mysql OPTIONS (host '127.0.0.1', port '{}', user 'shopper', password secret('shop', 'my'), sslmode 'disabled')",
        db.port
    );
    ok_env(
        &wh,
        &env,
        &[
            &create,
            "CREATE FOREIGN CATALOG shop USING CONNECTION my OPTIONS (database 'shop')",
        ],
    );
    // A filter with a double quote in its string is sent as written (the driver's own reads
    // would strip the quotes and match nothing).
    let out = ok_env(
        &wh,
        &env,
        &["SELECT id FROM shop.shop.events WHERE note = 'say \"hi\"'"],
    );
    assert_eq!(out.lines().nth(1), Some("7"), "{out}");
    // A backslash is a backslash (MySQL would read it as an escape: `\t`, a tab).
    let out = ok_env(
        &wh,
        &env,
        &["SELECT id, length(note) FROM shop.shop.events WHERE note = 'C:\\\\temp'"],
    );
    assert_eq!(out.lines().nth(1), Some("9,7"), "{out}");

    // The run's snapshot is held 3 s once taken: meanwhile rows above every watermark are
    // added and committed. The run copies the rows as they were.
    let copy = "COPY INCREMENTAL shop.shop.events INTO events_copy WATERMARK at";
    let before = std::fs::read_to_string(db.log()).unwrap().len();
    let child = copy_in_background(&wh, &env, copy, "foreign::mysql_snapshot=return(3000)");
    let logged = || {
        let log = std::fs::read_to_string(db.log()).unwrap();
        log.get(before..).unwrap_or_default().to_string()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !logged().contains("WITH CONSISTENT SNAPSHOT") {
        assert!(
            std::time::Instant::now() < deadline,
            "the copy never opened a snapshot:\n{}",
            logged()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // Where the binary log stands when the snapshot is taken (nothing is written meanwhile).
    let status = String::from_utf8_lossy(&db.client("SHOW MASTER STATUS").stdout).to_string();
    let at = status
        .lines()
        .nth(1)
        .map(|l| l.split('\t').take(2).collect::<Vec<_>>().join(":"))
        .unwrap_or_default();
    db.sql("USE shop; INSERT INTO shop.events SELECT seq, TIMESTAMP '2025-01-01 00:00:00' + INTERVAL seq SECOND, 'new' FROM seq_1001_to_1050;");
    let mut child = child;
    assert!(
        child.try_wait().unwrap().is_none(),
        "the copy ended before the table changed"
    );
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains(",1000,0,"), "{stdout}");
    // Every read of the run went through the connection that opened the snapshot.
    let log = logged();
    let threads = mariadb_threads(&log);
    let opener = threads
        .iter()
        .find(|(_, l)| l.contains("WITH CONSISTENT SNAPSHOT"))
        .map(|(t, _)| *t)
        .unwrap();
    let reads: Vec<&(&str, &str)> = threads
        .iter()
        .filter(|(_, l)| l.contains("SELECT") && l.contains("`events`"))
        .collect();
    assert!(reads.len() >= 2, "{log}");
    assert!(reads.iter().all(|(t, _)| *t == opener), "{log}");
    // It records where the binary log stood: MariaDB's file and position.
    let snapshot = ok_env(
        &wh,
        &env,
        &["SELECT source_snapshot FROM system.tidemark.copy_runs WHERE target LIKE '%events_copy'"],
    );
    let snapshot = snapshot.lines().nth(1).unwrap_or_default().to_string();
    let (file, position) = snapshot.rsplit_once(':').unwrap_or_default();
    let file = file.rsplit('/').next().unwrap_or_default();
    assert!(
        file.starts_with("binlog.") && position.parse::<u64>().is_ok_and(|p| p > 0),
        "{snapshot}"
    );
    assert_eq!(format!("{file}:{position}"), at, "{status}");
    // The next run copies the added rows, each once.
    let out = ok_env(
        &wh,
        &env,
        &[
            copy,
            "SELECT concat_ws('/', count(*), count(DISTINCT id), max(id)) FROM events_copy",
        ],
    );
    assert!(out.contains(",50,0,"), "{out}");
    assert!(out.contains("1050/1050/1050"), "{out}");
}

#[test]
fn a_large_mariadb_table_is_read_over_several_connections_in_one_snapshot() {
    let db = MariaDb::start();
    // 300,000 rows of about 150 bytes: over 32 MB of data, so four connections read it.
    db.sql(
        "USE shop; CREATE TABLE shop.big (id BIGINT PRIMARY KEY, at DATETIME(6) NOT NULL, pad VARCHAR(200), KEY (at)) ENGINE=InnoDB;
         INSERT INTO shop.big SELECT seq, TIMESTAMP '2024-01-01 00:00:00' + INTERVAL seq SECOND, REPEAT('x', 100) FROM seq_1_to_300000;
         ANALYZE TABLE shop.big;",
    );
    let (_d, wh) = warehouse();
    let env = [("TIDEMARK_SECRET_SHOP_MY", "m4ria-pw")];
    let catalog = |wh: &Path, more: &str| {
        ok_env(
            wh,
            &env,
            &[
                &format!(
                    "CREATE CONNECTION my TYPE mysql OPTIONS (host '127.0.0.1', port '{}', user 'shopper', password secret('shop', 'my'), sslmode 'disabled'{more})",
                    db.port
                ),
                "CREATE FOREIGN CATALOG shop USING CONNECTION my OPTIONS (database 'shop')",
            ],
        );
    };
    let value = |wh: &Path, sql: &str| {
        let out = ok_env(wh, &env, &[sql]);
        out.lines().nth(1).unwrap_or_default().to_string()
    };
    catalog(&wh, ", read_connections '4'");
    let logged_from = |from: usize| {
        let log = std::fs::read_to_string(db.log()).unwrap();
        log.get(from..).unwrap_or_default().to_string()
    };
    let copy = "COPY INCREMENTAL shop.shop.big INTO big_copy WATERMARK at";
    let before = std::fs::read_to_string(db.log()).unwrap().len();
    // Another session updates half of the rows and adds rows above every watermark while
    // the run opens its snapshots: after the first connection opened its own, 2 s before the
    // others do (the write waits for the lock's release), and the run then holds its
    // snapshots 4 s before it reads.
    let child = copy_in_background(
        &wh,
        &env,
        copy,
        "foreign::mysql_spares=return(2000);foreign::mysql_snapshot=return(4000)",
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let locked = |log: &str| {
        log.split_once("LOCK TABLES")
            .is_some_and(|(_, after)| after.contains("WITH CONSISTENT SNAPSHOT"))
    };
    while !locked(&logged_from(before)) {
        assert!(
            std::time::Instant::now() < deadline,
            "the copy never opened its snapshots together:\n{}",
            logged_from(before)
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    db.sql(
        "USE shop; UPDATE shop.big SET pad = 'changed' WHERE id % 2 = 0 AND id < 300000;
         INSERT INTO shop.big SELECT seq, TIMESTAMP '2025-01-01 00:00:00' + INTERVAL seq SECOND, 'new' FROM seq_300001_to_300100;",
    );
    let mut child = child;
    assert!(
        child.try_wait().unwrap().is_none(),
        "the copy ended before the table changed"
    );
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The rows as they were when the run began: each once, none changed, none added.
    assert_eq!(
        value(
            &wh,
            "SELECT concat_ws('/', count(*), count(DISTINCT id), sum(id), count_if(pad <> repeat('x', 100))) FROM big_copy"
        ),
        "300000/300000/45000150000/0"
    );
    // One lock, under which five connections opened their snapshots (the holder and four
    // spares); the rows read by four queries, each a range of the key on a spare of its own.
    let log = logged_from(before);
    assert_eq!(
        log.matches("LOCK TABLES `shop`.`big` READ").count(),
        1,
        "{log}"
    );
    let threads = mariadb_threads(&log);
    let in_snapshot: std::collections::BTreeSet<&str> = threads
        .iter()
        .filter(|(_, l)| l.contains("WITH CONSISTENT SNAPSHOT"))
        .map(|(t, _)| *t)
        .collect();
    assert_eq!(in_snapshot.len(), 5, "{log}");
    let reads: Vec<&(&str, &str)> = threads
        .iter()
        .filter(|(_, l)| {
            l.contains("`big`")
                && l.contains("`pad`")
                && !l.contains("EXPLAIN")
                && !l.contains("Prepare")
        })
        .collect();
    assert_eq!(reads.len(), 4, "{log}");
    assert!(reads.iter().all(|(_, l)| l.contains("`id` ")), "{log}");
    let readers: std::collections::BTreeSet<&str> = reads.iter().map(|(t, _)| *t).collect();
    assert_eq!(readers.len(), 4, "{log}");
    assert!(readers.is_subset(&in_snapshot), "{log}");
    // The next run, an increment (a range of the watermark's index, one query), copies the
    // added rows only.
    let before = std::fs::read_to_string(db.log()).unwrap().len();
    let out = ok_env(&wh, &env, &[copy]);
    assert!(out.contains(",100,0,"), "{out}");
    let log = logged_from(before);
    assert!(
        !mariadb_threads(&log)
            .iter()
            .any(|(_, l)| l.contains("`big`") && l.contains("`id` >=")),
        "{log}"
    );
    assert_eq!(
        value(
            &wh,
            "SELECT concat_ws('/', count(*), count(DISTINCT id), count_if(pad = 'new')) FROM big_copy"
        ),
        "300100/300100/100"
    );
    // Two reads of the table at once (a self-join): each row met once.
    assert_eq!(
        value(
            &wh,
            "SELECT count(*) FROM shop.shop.big a JOIN shop.shop.big b ON a.id = b.id AND a.pad = b.pad"
        ),
        "300100"
    );
    // One connection unless told: no lock taken.
    let (_d2, wh2) = warehouse();
    catalog(&wh2, "");
    let before = std::fs::read_to_string(db.log()).unwrap().len();
    assert_eq!(value(&wh2, "SELECT count(*) FROM shop.shop.big"), "300100");
    assert!(!logged_from(before).contains("LOCK TABLES"));
}

#[test]
fn a_mariadb_table_and_a_sqlite_table_are_copied_incrementally() {
    let db = MariaDb::start();
    db.sql(
        "USE shop; CREATE TABLE shop.orders (id BIGINT PRIMARY KEY, amount DECIMAL(10,2), placed DATETIME(6), note VARCHAR(10), kind ENUM('a', 'b'), qty INT UNSIGNED, big BIGINT UNSIGNED, flags BIT(3));
         INSERT INTO shop.orders SELECT seq, seq * 0.5, TIMESTAMP '2024-01-01 00:00:00' + INTERVAL seq SECOND, 'n', 'b', 4000000000, 18446744073709551615, b'101' FROM seq_1_to_500;",
    );
    let (d, wh) = warehouse();
    let env = [("TIDEMARK_SECRET_SHOP_MY", "m4ria-pw")];
    let create = format!(
        "CREATE CONNECTION my TYPE mysql OPTIONS (host '127.0.0.1', port '{}', user 'shopper', password secret('shop', 'my'), sslmode 'disabled')",
        db.port
    );
    let copy = "COPY INCREMENTAL shop.shop.orders INTO orders_copy WATERMARK placed";
    let out = ok_env(
        &wh,
        &env,
        &[
            &create,
            "CREATE FOREIGN CATALOG shop USING CONNECTION my OPTIONS (database 'shop')",
            copy,
        ],
    );
    assert!(out.contains(",500,0,"), "{out}");
    db.sql("USE shop; INSERT INTO shop.orders SELECT seq, 1, TIMESTAMP '2024-02-01 00:00:00' + INTERVAL seq SECOND, 'm', 'a', 1, 2, b'011' FROM seq_501_to_520;");
    let out = ok_env(
        &wh,
        &env,
        &[
            "SELECT concat_ws('/', typeof(kind), kind, typeof(qty), qty, typeof(big), big, typeof(flags), flags) FROM orders_copy WHERE id = 1",
        ],
    );
    // BIT(3) b'101': its value as an unsigned number.
    assert!(
        out.contains(
            "string/b/bigint/4000000000/decimal(20,0)/18446744073709551615/decimal(20,0)/5"
        ),
        "{out}"
    );
    let out = ok_env(
        &wh,
        &env,
        &[
            copy,
            copy,
            "SELECT concat_ws('/', count(*), count(DISTINCT id), sum(amount), typeof(max(placed))) FROM orders_copy",
        ],
    );
    assert!(out.contains(",20,0,"), "{out}");
    assert!(out.contains("nothing_new"), "{out}");
    assert!(out.contains("520/520/62645.00/timestamp_ntz"), "{out}");
    let log = std::fs::read_to_string(db.log()).unwrap();
    assert!(
        log.lines()
            .any(|l| l.contains("orders") && l.contains("`placed` >")),
        "the watermark predicate runs in MariaDB:\n{log}"
    );

    // SQLite: a file of the shop's, copied by its integer key.
    let file = d.path().join("lite.db");
    let py = format!(
        "import sqlite3\nc = sqlite3.connect('{}')\nc.execute('CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT)')\nc.executemany('INSERT INTO items VALUES (?, ?)', [(i, f'item {{i}}') for i in range(1, 101)])\nc.commit()\n",
        file.display()
    );
    assert!(
        std::process::Command::new("python3")
            .args(["-c", &py])
            .status()
            .unwrap()
            .success()
    );
    let lite = format!(
        "CREATE CONNECTION lite TYPE sqlite OPTIONS (path '{}')",
        file.display()
    );
    let copy = "COPY INCREMENTAL items.main.items INTO items_copy WATERMARK id";
    let out = ok_env(
        &wh,
        &[],
        &[
            &lite,
            "CREATE FOREIGN CATALOG items USING CONNECTION lite",
            copy,
        ],
    );
    assert!(out.contains(",100,0,"), "{out}");
    let py = format!(
        "import sqlite3\nc = sqlite3.connect('{}')\nc.executemany('INSERT INTO items VALUES (?, ?)', [(i, 'new') for i in range(101, 106)])\nc.commit()\n",
        file.display()
    );
    assert!(
        std::process::Command::new("python3")
            .args(["-c", &py])
            .status()
            .unwrap()
            .success()
    );
    let out = ok_env(
        &wh,
        &[],
        &[copy, "SELECT count(*), count(DISTINCT id) FROM items_copy"],
    );
    assert!(out.contains(",5,0,"), "{out}");
    assert!(out.contains("105,105"), "{out}");
}

#[test]
fn the_postgres_tables_of_one_statement_share_a_snapshot_and_each_copy_has_its_own() {
    let pg = Postgres::start();
    pg.psql(
        "CREATE TABLE public.a (id bigint PRIMARY KEY, at timestamptz NOT NULL);
         CREATE TABLE public.b (id bigint PRIMARY KEY, at timestamptz NOT NULL);
         INSERT INTO public.a SELECT i, timestamptz '2024-01-01 00:00:00+00' + i * interval '1 minute' FROM generate_series(1, 100) i;
         INSERT INTO public.b SELECT i, timestamptz '2024-01-01 00:00:00+00' + i * interval '1 minute' FROM generate_series(1, 50) i;
         ALTER TABLE public.a OWNER TO shopper;
         ALTER TABLE public.b OWNER TO shopper;",
        "shop",
    );
    let (_d, wh) = warehouse();
    pg_catalog(&wh, &pg);
    // A join, a subquery and a write from both tables: one exported snapshot each statement.
    for statement in [
        "SELECT count(*) FROM shop.public.a JOIN shop.public.b USING (id)",
        "SELECT count(*) FROM shop.public.a WHERE id NOT IN (SELECT id FROM shop.public.b)",
        "CREATE TABLE both_ids AS SELECT id FROM shop.public.a UNION ALL SELECT id FROM shop.public.b",
    ] {
        let before = logged_since(&pg, 0).len();
        ok_env(&wh, &PG_ENV, &[statement]);
        let log = logged_since(&pg, before);
        assert_eq!(
            log.matches("pg_export_snapshot()").count(),
            1,
            "{statement}\n{log}"
        );
        assert!(log.contains("\"a\"") && log.contains("\"b\""), "{log}");
    }
    assert_eq!(value(&wh, "SELECT count(*) FROM both_ids"), "150");
    // Two copies of one job: each run records and ends a snapshot of its own.
    ok_env(
        &wh,
        &PG_ENV,
        &[
            "CREATE TABLE ctl (source_table STRING NOT NULL, target_table STRING NOT NULL, watermark_column STRING NOT NULL, last_watermark TIMESTAMP)",
            "INSERT INTO ctl VALUES ('shop.public.a', 'a_copy', 'at', NULL), ('shop.public.b', 'b_copy', 'at', NULL)",
        ],
    );
    let before = logged_since(&pg, 0).len();
    let out = ok_env(&wh, &PG_ENV, &["COPY INCREMENTAL USING CONTROL TABLE ctl"]);
    assert_eq!(out.matches("succeeded").count(), 2, "{out}");
    let log = logged_since(&pg, before);
    assert_eq!(log.matches("pg_export_snapshot()").count(), 2, "{log}");
    assert_eq!(
        value(
            &wh,
            "SELECT concat_ws('/', (SELECT count(*) FROM a_copy), (SELECT count(*) FROM b_copy), count(source_snapshot)) FROM system.tidemark.copy_runs WHERE status = 'succeeded'"
        ),
        "100/50/2"
    );
}
