//! Foreign catalogs: a SQLite file and a real PostgreSQL server (started here, on 127.0.0.1,
//! in a throwaway data directory, as the `postgres` user when the tests run as root) read as
//! catalogs of tables, with the secrets in the environment, never in the warehouse or output.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{run, warehouse};
use crate::servers::{MariaDb, Postgres};

/// Run statements in one process with `envs` set; (success, stdout, stderr).
pub(crate) fn sql_env(wh: &Path, envs: &[(&str, &str)], stmts: &[&str]) -> (bool, String, String) {
    let mut cmd = crate::common::tidemark(wh);
    cmd.args(["--format", "csv"]);
    for (k, v) in envs {
        cmd.env(k, v);
    }
    for s in stmts {
        cmd.args(["-c", s]);
    }
    let out = cmd.output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

pub(crate) fn ok_env(wh: &Path, envs: &[(&str, &str)], stmts: &[&str]) -> String {
    let (fine, out, err) = sql_env(wh, envs, stmts);
    assert!(fine, "{stmts:?} failed:\n{out}\n{err}");
    out
}

pub(crate) fn err_env(wh: &Path, envs: &[(&str, &str)], stmts: &[&str]) -> String {
    let (fine, out, err) = sql_env(wh, envs, stmts);
    assert!(!fine, "{stmts:?} should fail:\n{out}");
    err
}

/// Run `script` with Python; what it printed.
fn python3(script: &str) -> String {
    crate::object_store::py("python3", script)
        .trim()
        .to_string()
}

/// The journal mode of the SQLite file at `db`, as SQLite reports it (`delete`, `wal`, ...).
fn journal_mode(db: &Path) -> String {
    python3(&format!(
        "import sqlite3; print(sqlite3.connect({:?}).execute('PRAGMA journal_mode').fetchone()[0])",
        db.display().to_string()
    ))
}

/// A SQLite database with an `orders` table, made by Python's sqlite3 module.
fn sqlite_db(dir: &Path) -> PathBuf {
    let path = dir.join("shop.db");
    let script = format!(
        "import sqlite3\n\
         c = sqlite3.connect({p:?})\n\
         c.execute('CREATE TABLE orders (id INTEGER PRIMARY KEY, customer TEXT, amount REAL, placed_at TEXT)')\n\
         c.executemany('INSERT INTO orders VALUES (?, ?, ?, ?)', [(i, 'c%d' % (i % 3), i * 1.5, '2024-01-%02d' % (i % 28 + 1)) for i in range(1, 101)])\n\
         c.execute('CREATE VIEW big_orders AS SELECT * FROM orders WHERE amount > 100')\n\
         c.commit()\n",
        p = path.display().to_string()
    );
    python3(&script);
    path
}

#[test]
fn a_sqlite_table_is_typed_by_its_declarations_not_its_first_row() {
    let (d, wh) = warehouse();
    let path = d.path().join("typed.db");
    let script = format!(
        "import sqlite3\n\
         c = sqlite3.connect({p:?})\n\
         c.execute('CREATE TABLE firsts (id INTEGER, v INT, name TEXT, amt REAL, ok BOOLEAN, day DATE, n NUMERIC, raw BLOB, loose)')\n\
         c.execute(\"INSERT INTO firsts VALUES (1, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)\")\n\
         c.execute(\"INSERT INTO firsts VALUES (2, 5, 'x', 2.5, 1, '2024-01-02', 3, x'0102', 7)\")\n\
         c.execute(\"INSERT INTO firsts VALUES (3, 7, 'y', 3, 0, '2024-01-03', 3.5, NULL, 8)\")\n\
         c.execute('CREATE TABLE empty (herd INTEGER, note TEXT)')\n\
         c.execute('CREATE TABLE odd (id INTEGER, v INTEGER)')\n\
         c.execute(\"INSERT INTO odd VALUES (1, 1), (2, 'not a number')\")\n\
         c.execute('CREATE VIEW doubled AS SELECT id * 2 AS twice, name FROM firsts')\n\
         c.execute('CREATE TABLE kinds (big NUMERIC, epoch DATETIME, flag BOOLEAN, half INTEGER GENERATED ALWAYS AS (big / 2) VIRTUAL)')\n\
         c.execute(\"INSERT INTO kinds (big, epoch, flag) VALUES (9007199254740993, 1704067200, 'true'), (NULL, 1704153600, 'false')\")\n\
         c.execute('CREATE TABLE many (id INTEGER, pad TEXT, stamp DATETIME, mixed, n INTEGER)')\n\
         c.executemany('INSERT INTO many VALUES (?, ?, ?, ?, ?)', [(i, 'p' * 50, f'2024-01-01 00:00:{{i % 60:02}}', i if i % 2 else str(i), 'oops' if i == 10000 else i) for i in range(20000)])\n\
         c.execute('CREATE TABLE words (w TEXT)')\n\
         c.execute(\"INSERT INTO words VALUES ('a_b'), ('axb'), ('ABC'), ('q''''q')\")\n\
         c.create_collation('backwards', lambda a, b: (a < b) - (a > b))\n\
         c.execute('CREATE TABLE collated (w TEXT COLLATE backwards, u TEXT COLLATE NOCASE)')\n\
         c.execute(\"INSERT INTO collated VALUES ('a', 'A'), ('b', 'a'), ('a', 'b'), ('a', 'a')\")\n\
         c.execute('CREATE TABLE fractions (id INTEGER, v INTEGER)')\n\
         c.execute(\"INSERT INTO fractions VALUES (1, 1), (2, 3.5)\")\n\
         c.commit()\n",
        p = path.display().to_string()
    );
    python3(&script);
    let create = format!(
        "CREATE CONNECTION lite TYPE sqlite OPTIONS (path '{}')",
        path.display()
    );
    let out = ok_env(
        &wh,
        &[],
        &[
            &create,
            "CREATE FOREIGN CATALOG lite USING CONNECTION lite",
            // The first row's NULLs do not make the columns NULL in every row.
            "SELECT sum(v), sum(amt), count(name), count_if(ok), max(day), sum(n), max(length(raw)), sum(loose) FROM lite.main.firsts",
            "SELECT typeof(v), typeof(name), typeof(amt), typeof(ok), typeof(day), typeof(n), typeof(raw), typeof(loose) FROM lite.main.firsts LIMIT 1",
            "SELECT id FROM lite.main.firsts WHERE v > 5",
            // An empty table has its columns.
            "SELECT count(*) AS empty_rows, count(herd) AS herds FROM lite.main.empty",
            "SELECT typeof(twice), typeof(name) FROM lite.main.doubled LIMIT 1",
            "SELECT sum(twice) AS twice_sum FROM lite.main.doubled",
            // Integers past 2^53 in a NUMERIC column stay exact; epoch numbers in a DATETIME
            // column are numbers; text 'true' in a BOOLEAN column is true; a generated column
            // is a column.
            "SELECT 'kinds', max(big), typeof(max(big)), sum(epoch), count_if(flag), max(half) FROM lite.main.kinds",
        ],
    );
    assert!(
        out.contains("kinds,9007199254740993,bigint,3408220800,1,4503599627370496\n"),
        "{out}"
    );
    assert!(out.contains("12,5.5,2,1,2024-01-03,6.5,2,15\n"), "{out}");
    assert!(
        out.contains("bigint,string,double,boolean,string,double,binary,bigint\n"),
        "{out}"
    );
    assert!(out.contains("id\n3\n"), "{out}");
    assert!(out.contains("empty_rows,herds\n0,0\n"), "{out}");
    assert!(out.contains("bigint,string\n"), "{out}");
    assert!(out.contains("twice_sum\n12\n"), "{out}");
    // A value that does not fit its column's type is an error, never a NULL or a number cut
    // short.
    let e = err_env(&wh, &[], &["SELECT sum(v) FROM lite.main.odd"]);
    assert!(
        e.contains("table main.odd of connection lite (sqlite)")
            && e.contains(
                "column v (declared 'INTEGER', read as BIGINT) holds the text 'not a number'"
            ),
        "{e}"
    );
    let e = err_env(&wh, &[], &["SELECT sum(v) FROM lite.main.fractions"]);
    assert!(e.contains("holds the number 3.5"), "{e}");
    // Rows stream in batches (20,000 rows in 3), filters on columns that hold one kind of
    // value are sent to SQLite, those on a column of mixed kinds are not (SQLite would compare
    // the integer 4 and the text '4' as different).
    let out = ok_env(
        &wh,
        &[],
        &[
            "EXPLAIN ANALYZE SELECT count(pad), max(stamp) FROM lite.main.many",
            "EXPLAIN SELECT id FROM lite.main.many WHERE id > 19900 AND stamp = '2024-01-01 00:00:59'",
            "SELECT count(*) AS fours FROM lite.main.many WHERE mixed = '4' OR mixed = '5'",
            "SELECT count(*) AS late, min(id) AS first FROM lite.main.many WHERE id > 19900 AND stamp = '2024-01-01 00:00:59'",
            // LIKE's backslash escapes in the engine, not in SQLite; SQLite's LIKE ignores
            // case, so NOT LIKE and ILIKE stay in the engine.
            r"SELECT count(*) AS escaped FROM lite.main.words WHERE w LIKE 'a\_%'",
            "SELECT count(*) AS unlike FROM lite.main.words WHERE w NOT LIKE 'abc'",
            "SELECT count(*) AS ilike FROM lite.main.words WHERE w ILIKE 'abc'",
            // A predicate compared with a predicate is the engine's; quotes in a value sent to
            // SQLite are written as SQLite reads them.
            "SELECT count(*) AS nested FROM lite.main.words WHERE (w LIKE 'a%') = (1 = 0)",
            "SELECT count(*) AS quoted FROM lite.main.words WHERE w = 'q''''q'",
            // A LIMIT with no filter is SQLite's; a LIMIT the engine meets first ends the read.
            "EXPLAIN SELECT id FROM lite.main.many LIMIT 3",
            "SELECT count(*) AS three FROM (SELECT id FROM lite.main.many LIMIT 3)",
            "SELECT id AS seventh FROM lite.main.many WHERE mixed = '7' LIMIT 1",
            // A collation the file's application defines is not tidemark's (SQLite cannot
            // compare under it here): the filter is the engine's. NOCASE may match more rows
            // in SQLite; the engine keeps its own.
            "SELECT count(*) AS collated FROM lite.main.collated WHERE w = 'a' AND u = 'a'",
            "EXPLAIN SELECT w FROM lite.main.collated WHERE w = 'a' AND u = 'a'",
        ],
    );
    assert!(out.contains("collated\n1\n"), "{out}");
    assert!(
        out.contains(r#"SELECT ""w"", ""u"" FROM ""collated"" WHERE (""u"" = 'a')"#),
        "{out}"
    );
    assert!(out.contains("escaped\n1\n"), "{out}");
    assert!(out.contains("unlike\n4\n"), "{out}");
    assert!(out.contains("ilike\n1\n"), "{out}");
    assert!(out.contains("nested\n2\n"), "{out}");
    assert!(out.contains("quoted\n1\n"), "{out}");
    assert!(
        out.contains(r#"SELECT ""id"" FROM ""many"" LIMIT 3"#),
        "{out}"
    );
    assert!(out.contains("three\n3\n"), "{out}");
    assert!(out.contains("seventh\n7\n"), "{out}");
    // A value that does not fit, past the first batch: the statement fails (the rows before
    // it are not a result).
    let e = err_env(&wh, &[], &["SELECT sum(n) FROM lite.main.many"]);
    assert!(
        e.contains("column n (declared 'INTEGER', read as BIGINT) holds the text 'oops'"),
        "{e}"
    );
    let scan = out
        .lines()
        .find(|l| l.contains("SqliteScan") && l.contains("metrics"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        scan.contains("output_rows=20.00 K") && scan.contains("output_batches=3"),
        "{scan}"
    );
    assert!(
        out.contains(r#"WHERE (""id"" > 19900) AND (""stamp"" = '2024-01-01 00:00:59')"#),
        "{out}"
    );
    assert!(out.contains("fours\n2\n"), "{out}");
    assert!(out.contains("late,first\n2,19919\n"), "{out}");
}

/// A SQLite file in WAL mode that its application holds open, with commits still in the WAL
/// (not yet checkpointed into the file): the read-only reads see every committed row and
/// leave the file in WAL mode.
#[test]
fn a_sqlite_file_its_application_holds_open_in_wal_mode_reads_whole() {
    use std::io::{BufRead, BufReader, Write};
    let (d, wh) = warehouse();
    let db = d.path().join("app.db");
    let script = format!(
        "import sqlite3, sys\n\
         c = sqlite3.connect({p:?})\n\
         c.execute('PRAGMA journal_mode=WAL')\n\
         c.execute('PRAGMA wal_autocheckpoint=0')\n\
         c.execute('CREATE TABLE events (id INTEGER, note TEXT)')\n\
         c.executemany('INSERT INTO events VALUES (?, ?)', [(i, 'n%d' % i) for i in range(1000)])\n\
         c.commit()\n\
         print('ready', flush=True)\n\
         sys.stdin.readline()\n\
         c.execute('INSERT INTO events VALUES (1000, \\'late\\')')\n\
         c.commit()\n\
         print('more', flush=True)\n\
         sys.stdin.readline()\n",
        p = db.display().to_string()
    );
    let mut app = Command::new("python3")
        .args(["-c", &script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut said = BufReader::new(app.stdout.take().unwrap());
    let mut line = String::new();
    said.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready");
    assert!(d.path().join("app.db-wal").exists());
    let create = format!(
        "CREATE CONNECTION app TYPE sqlite OPTIONS (path '{}')",
        db.display()
    );
    let out = ok_env(
        &wh,
        &[],
        &[
            &create,
            "CREATE FOREIGN CATALOG app USING CONNECTION app",
            "SELECT count(*) AS events, max(id) AS last FROM app.main.events",
        ],
    );
    assert!(out.contains("events,last\n1000,999\n"), "{out}");
    // A commit the application makes meanwhile is in the next statement's read.
    let mut stdin = app.stdin.take().unwrap();
    writeln!(stdin).unwrap();
    line.clear();
    said.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "more");
    let out = ok_env(
        &wh,
        &[],
        &[
            "SELECT count(*) AS events, max(note) FILTER (WHERE id = 1000) AS late FROM app.main.events",
        ],
    );
    assert!(out.contains("events,late\n1001,late\n"), "{out}");
    writeln!(stdin).unwrap();
    assert!(app.wait().unwrap().success());
    assert_eq!(journal_mode(&db), "wal");
}

#[test]
fn a_sqlite_file_is_a_catalog_of_tables() {
    let (d, wh) = warehouse();
    let db = sqlite_db(d.path());
    let create = format!(
        "CREATE CONNECTION lite TYPE sqlite OPTIONS (path '{}') COMMENT 'the shop'",
        db.display()
    );
    let out = ok_env(
        &wh,
        &[],
        &[
            &create,
            "CREATE FOREIGN CATALOG shop USING CONNECTION lite",
            "SELECT count(*), sum(amount) FROM shop.main.orders WHERE customer = 'c1'",
            "CREATE TABLE tiers (customer STRING, tier STRING)",
            "INSERT INTO tiers VALUES ('c0', 'gold'), ('c1', 'silver')",
            "SELECT t.tier, count(*) FROM shop.main.orders o JOIN tiers t ON t.customer = o.customer GROUP BY t.tier ORDER BY 1",
            "CREATE TABLE lake_orders AS SELECT * FROM shop.main.orders WHERE id <= 10",
            "SELECT count(*) FROM lake_orders",
            // Checked arithmetic is the engine's: the filter stays out of SQLite's query.
            "SELECT count(*) AS plus_one FROM shop.main.orders WHERE id + 1 <= 11 AND try_add(id, 1) > 1",
            "SHOW SCHEMAS IN shop",
            "SHOW TABLES IN shop.main",
            "SHOW VIEWS IN shop.main",
            "SELECT count(*) AS big FROM shop.main.big_orders",
            "SHOW CONNECTIONS",
            "SHOW CATALOGS",
        ],
    );
    // A view is listed as one, not as a table, and read like a table.
    assert!(
        out.contains("namespace,viewName,isTemporary\nmain,big_orders,false\n"),
        "{out}"
    );
    // SHOW TABLES lists it too, as Databricks does.
    assert_eq!(out.matches("main,big_orders,false\n").count(), 2, "{out}");
    assert!(out.contains("big\n34\n"), "{out}");
    assert!(out.contains("count(*),sum(amount)\n34,2575.5\n"), "{out}");
    assert!(out.contains("gold,33\nsilver,34\n"), "{out}");
    assert!(out.contains("count(*)\n10\n"), "{out}");
    assert!(out.contains("plus_one\n10\n"), "{out}");
    assert!(out.contains("databaseName\nmain\n"), "{out}");
    assert!(out.contains("main,orders,false"), "{out}");
    assert!(out.contains("lite,sqlite,the shop"), "{out}");
    assert!(out.contains("\nshop\n"), "{out}");
    // Reading changed nothing about the file: not its journal mode (a WAL journal would
    // change how the application that owns it writes), no journal files beside it.
    assert_eq!(journal_mode(&db), "delete");
    for beside in ["shop.db-wal", "shop.db-shm", "shop.db-journal"] {
        assert!(!d.path().join(beside).exists(), "{beside}");
    }
    // Read-only: writes are refused by name, nothing written.
    let e = err_env(
        &wh,
        &[],
        &["INSERT INTO shop.main.orders VALUES (1000, 'x', 1.0, 'y')"],
    );
    assert!(
        e.contains("shop is a foreign catalog (connection lite)"),
        "{e}"
    );
    let e = err_env(
        &wh,
        &[],
        &["COPY INCREMENTAL lake_orders INTO shop.main.orders WATERMARK id"],
    );
    assert!(e.contains("shop is a foreign catalog"), "{e}");
    let e = err_env(&wh, &[], &["DROP CONNECTION lite"]);
    assert!(e.contains("used by the foreign catalog shop"), "{e}");
    let e = err_env(&wh, &[], &["SELECT * FROM shop.main.nope"]);
    assert!(e.contains("shop.main.nope"), "{e}");
    // IF NOT EXISTS leaves the existing connection and catalog as they are; `\dt` lists a
    // foreign schema's tables.
    let out = ok_env(
        &wh,
        &[],
        &[
            "CREATE CONNECTION IF NOT EXISTS lite TYPE sqlite OPTIONS (path '/nonexistent/other.db')",
            "CREATE FOREIGN CATALOG IF NOT EXISTS shop USING CONNECTION lite",
            "DESCRIBE CONNECTION lite",
            "\\dt shop.main",
        ],
    );
    assert!(out.contains(&db.display().to_string()), "{out}");
    assert!(!out.contains("other.db"), "{out}");
    assert!(out.contains("main,orders,false"), "{out}");
    ok_env(
        &wh,
        &[],
        &[
            "DROP CATALOG shop",
            "DROP CONNECTION lite",
            "DROP CONNECTION IF EXISTS lite",
        ],
    );
    let e = err_env(&wh, &[], &["SELECT * FROM shop.main.orders"]);
    assert!(e.contains("shop"), "{e}");
    let e = err_env(&wh, &[], &["DROP CONNECTION lite"]);
    assert!(e.contains("lite"), "{e}");
    // A file that is not there is never created.
    let e = err_env(
        &wh,
        &[],
        &["CREATE CONNECTION typo TYPE sqlite OPTIONS (path '/nonexistent/shop.db')"],
    );
    assert!(
        e.contains("no database file at /nonexistent/shop.db"),
        "{e}"
    );
    assert!(!Path::new("/nonexistent/shop.db").exists());
    // A file that is not a SQLite database is refused when the connection is made.
    let notes = d.path().join("notes.txt");
    std::fs::write(
        &notes,
        "not a database, just some text that is long enough\n".repeat(20),
    )
    .unwrap();
    let e = err_env(
        &wh,
        &[],
        &[&format!(
            "CREATE CONNECTION notes TYPE sqlite OPTIONS (path '{}')",
            notes.display()
        )],
    );
    assert!(e.contains("connection notes (sqlite"), "{e}");
    assert!(e.contains("not a database"), "{e}");
    let e = err_env(&wh, &[], &["DESCRIBE CONNECTION notes"]);
    assert!(e.contains("connection notes not found"), "{e}");
}

#[test]
fn credentials_are_secrets_never_stored_or_shown() {
    let (_d, wh) = warehouse();
    let e = err_env(
        &wh,
        &[],
        &[
            "CREATE CONNECTION pg TYPE postgresql OPTIONS (host '127.0.0.1', user 'me', password 'hunter2')",
        ],
    );
    assert!(e.contains("a password is stored only as a secret"), "{e}");
    let e = err_env(
        &wh,
        &[],
        &[
            "CREATE CONNECTION pg TYPE postgresql OPTIONS (host '127.0.0.1', user 'me', password secret('shop', 'pg-pass'))",
        ],
    );
    assert!(e.contains("TIDEMARK_SECRET_SHOP_PG_PASS"), "{e}");
    let env = [("TIDEMARK_SECRET_SHOP_PG_PASS", "hunter2-secret")];
    let out = ok_env(
        &wh,
        &env,
        &[
            "CREATE CONNECTION pg TYPE postgresql OPTIONS (host '127.0.0.1', port '1', user 'me', password secret('shop', 'pg-pass'))",
            "DESCRIBE CONNECTION pg",
        ],
    );
    assert!(
        out.contains("password,\"secret('shop', 'pg-pass')\""),
        "{out}"
    );
    assert!(!out.contains("hunter2-secret"));
    let stored = std::fs::read_to_string(wh.join("_connections/pg.json")).unwrap();
    assert!(!stored.contains("hunter2-secret"), "{stored}");
    // Nothing listens on port 1: the error names the connection and where, not the secret.
    let e = err_env(
        &wh,
        &env,
        &["CREATE FOREIGN CATALOG shop USING CONNECTION pg OPTIONS (database 'shop')"],
    );
    assert!(
        e.contains("connection pg (postgresql at 127.0.0.1:1) failed"),
        "{e}"
    );
    assert!(!e.contains("hunter2-secret"), "{e}");
    assert!(
        !wh.join("shop").exists(),
        "a failed CREATE FOREIGN CATALOG writes nothing"
    );
    // The secrets file: owner-only.
    let file = wh.parent().unwrap().join("secrets.json");
    std::fs::write(&file, r#"{"shop": {"pg-pass": "from-file"}}"#).unwrap();
    let path = file.display().to_string();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = err_env(
            &wh,
            &[("TIDEMARK_SECRETS_FILE", &path)],
            &[
                "CREATE CONNECTION pg2 TYPE postgresql OPTIONS (host 'h', user 'u', password secret('shop', 'pg-pass'))",
            ],
        );
        assert!(
            e.contains("may be read by others") && e.contains("chmod 600"),
            "{e}"
        );
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    ok_env(
        &wh,
        &[("TIDEMARK_SECRETS_FILE", &path)],
        &[
            "CREATE CONNECTION pg2 TYPE postgresql OPTIONS (host 'h', user 'u', password secret('shop', 'pg-pass'))",
        ],
    );
    let e = err_env(
        &wh,
        &[],
        &["CREATE CONNECTION x TYPE snowflake OPTIONS (host 'h')"],
    );
    assert!(
        e.contains("connection type snowflake is not supported"),
        "{e}"
    );
}

#[test]
fn a_postgres_database_is_a_catalog_and_filters_run_there() {
    let pg = Postgres::start();
    pg.psql(
        "CREATE TABLE public.orders (id bigint PRIMARY KEY, customer text, amount numeric(10,2), placed_at timestamptz, local_at timestamp, tags jsonb);
         INSERT INTO public.orders SELECT i, 'c' || (i % 3), i * 1.25, timestamptz '2024-01-01 00:00:00+00' + i * interval '1 hour', timestamp '2024-01-01 00:00:00' + i * interval '1 hour', '{\"k\": 1}' FROM generate_series(1, 1000) i;
         CREATE SCHEMA sales; CREATE TABLE sales.regions (id int, name text); INSERT INTO sales.regions VALUES (1, 'north');
         CREATE TABLE sales.\"Returns\" (id int); INSERT INTO sales.\"Returns\" VALUES (1), (2); ALTER TABLE sales.\"Returns\" OWNER TO shopper;
         ALTER TABLE public.orders OWNER TO shopper; ALTER SCHEMA sales OWNER TO shopper; ALTER TABLE sales.regions OWNER TO shopper;
         CREATE TABLE public.names (s text COLLATE \"und-x-icu\"); INSERT INTO public.names VALUES ('B'), ('a'); ALTER TABLE public.names OWNER TO shopper;
         CREATE VIEW sales.north AS SELECT * FROM sales.regions WHERE name = 'north'; ALTER VIEW sales.north OWNER TO shopper;
         CREATE MATERIALIZED VIEW public.totals AS SELECT customer, sum(amount)::numeric(12,2) AS amount FROM public.orders GROUP BY customer; ALTER MATERIALIZED VIEW public.totals OWNER TO shopper;
         CREATE SCHEMA \"Sales\"; CREATE TABLE \"Sales\".upper_only (id int);",
        "shop",
    );
    let (_d, wh) = warehouse();
    let env = [("TIDEMARK_SECRET_SHOP_PG", "s3cret-pw")];
    let create = format!(
        "CREATE CONNECTION pg TYPE postgresql OPTIONS (host '127.0.0.1', port '{}', user 'shopper', password secret('shop', 'pg'), sslmode 'disable')",
        pg.port
    );
    let out = ok_env(
        &wh,
        &env,
        &[
            &create,
            "CREATE FOREIGN CATALOG shop USING CONNECTION pg OPTIONS (database 'shop')",
            "SELECT count(*), sum(amount), min(placed_at), typeof(min(amount)) FROM shop.public.orders WHERE customer = 'c1' AND id > 500",
            "SELECT typeof(placed_at), typeof(local_at), typeof(tags) FROM shop.public.orders LIMIT 1",
            "SHOW SCHEMAS IN shop",
            "SHOW TABLES IN shop.sales",
            // Beside a schema spelled "Sales": an unquoted name is read as a query reads it.
            "SHOW TABLES IN shop.SALES",
            "SHOW TABLES IN shop.`Sales`",
            "SELECT r.name, count(*) FROM shop.public.orders o JOIN shop.sales.regions r ON r.id = o.id % 2 GROUP BY r.name",
            "SELECT count(*) AS after_jan_2 FROM shop.public.orders WHERE placed_at >= TIMESTAMP '2024-01-02 00:00:00'",
            "SELECT count(*) AS returns FROM shop.sales.returns",
            "SELECT count(*) AS below FROM shop.public.orders WHERE customer < 'c1'",
            // In the column's ICU collation 'a' < 'B'; in the engine's byte order 'B' < 'a'.
            "SELECT count(*) AS byte_order FROM shop.public.names WHERE s < 'a'",
            "SHOW VIEWS IN shop.SALES",
            "SHOW VIEWS IN shop.public",
            "SELECT count(*) AS north FROM shop.sales.north",
            "SELECT sum(amount) AS total FROM shop.public.totals",
        ],
    );
    // Views and materialized views are listed as views, apart from the tables, and read.
    assert!(out.contains("sales,north,false\n"), "{out}");
    assert!(out.contains("public,totals,false\n"), "{out}");
    // The view in both SHOW TABLES of sales and its SHOW VIEWS; the table in the two SHOW
    // TABLES only (tables are not views).
    assert_eq!(out.matches("sales,north,false\n").count(), 3, "{out}");
    assert_eq!(out.matches("sales,regions,false\n").count(), 2, "{out}");
    // A schema named in another case than the database's is found, and shown as spelled
    // there; the quoted name is the other schema.
    assert_eq!(out.matches("Sales,upper_only,false").count(), 1, "{out}");
    assert!(out.contains("north\n1\n"), "{out}");
    assert!(out.contains("total\n625625.00\n"), "{out}");
    assert!(out.contains("byte_order\n1\n"), "{out}");
    // UTC whatever the server's time zone: hours 24 to 1000.
    assert!(out.contains("after_jan_2\n977\n"), "{out}");
    // A table the database spells in mixed case, named in any case.
    assert!(out.contains("returns\n2\n"), "{out}");
    // String ordering is the engine's (byte order), never the database's collation.
    assert!(out.contains("below\n333\n"), "{out}");
    assert!(
        out.contains("167,156771.25,2024-01-21T22:00:00Z,\"decimal(10,2)\""),
        "{out}"
    );
    assert!(out.contains("timestamp,timestamp_ntz,string"), "{out}");
    assert!(
        out.contains("public\nsales\n") || out.contains("public\r\nsales"),
        "{out}"
    );
    assert!(out.contains("sales,regions,false"), "{out}");
    assert!(out.contains("north,500"), "{out}");
    // The server's own log: the filter and the projection ran in PostgreSQL.
    let log = std::fs::read_to_string(pg.log()).unwrap();
    let pushed = log
        .lines()
        .find(|l| l.contains("\"orders\"") && l.contains("WHERE") && l.contains("c1"))
        .unwrap_or_else(|| panic!("no pushed-down statement in the server log:\n{log}"));
    assert!(
        pushed.contains("500") && !pushed.contains("\"tags\""),
        "{pushed}"
    );
    // Wrong password: a clear error naming the connection; the secret never shows.
    let (_d2, wh2) = warehouse();
    let bad = [("TIDEMARK_SECRET_SHOP_PG", "wrong-pw")];
    ok_env(&wh2, &bad, &[&create]);
    let e = err_env(
        &wh2,
        &bad,
        &["CREATE FOREIGN CATALOG shop USING CONNECTION pg OPTIONS (database 'shop')"],
    );
    assert!(e.contains("connection pg (postgresql at 127.0.0.1:"), "{e}");
    assert!(!e.contains("wrong-pw"), "{e}");
    assert!(!wh2.join("shop").exists());
    let _ = run(&wh, "SELECT 1");
}

#[test]
fn a_mariadb_database_is_a_catalog_and_filters_run_there() {
    let db = MariaDb::start();
    db.sql(
        "USE shop; CREATE TABLE shop.orders (id BIGINT PRIMARY KEY, customer VARCHAR(20), amount DECIMAL(10,2), placed_at DATETIME);
         INSERT INTO shop.orders SELECT seq, CONCAT('c', seq % 3), seq * 1.25, TIMESTAMP '2024-01-01 00:00:00' + INTERVAL seq HOUR FROM seq_1_to_1000;
         CREATE VIEW shop.big_orders AS SELECT * FROM shop.orders WHERE amount > 1000;",
    );
    let (_d, wh) = warehouse();
    let env = [("TIDEMARK_SECRET_SHOP_MARIA", "m4ria-pw")];
    let create = format!(
        "CREATE CONNECTION maria TYPE mysql OPTIONS (host '127.0.0.1', port '{}', user 'shopper', password secret('shop', 'maria'), sslmode 'disabled')",
        db.port
    );
    let out = ok_env(
        &wh,
        &env,
        &[
            &create,
            "CREATE FOREIGN CATALOG msh USING CONNECTION maria OPTIONS (database 'shop')",
            "SELECT count(*), sum(amount), typeof(min(amount)) FROM msh.shop.orders WHERE customer = 'c1' AND id > 500",
            "SHOW TABLES IN msh.shop",
            "SHOW VIEWS IN msh.shop",
            "SELECT count(*) AS big FROM msh.shop.big_orders",
        ],
    );
    // Listed by SHOW VIEWS, and by SHOW TABLES as Databricks does.
    assert_eq!(out.matches("shop,big_orders,false\n").count(), 2, "{out}");
    assert!(out.contains("big\n200\n"), "{out}");
    assert!(out.contains("167,"), "{out}");
    assert!(out.contains("decimal(10,2)"), "{out}");
    assert!(out.contains("shop,orders,false"), "{out}");
    let log = std::fs::read_to_string(db.log()).unwrap();
    assert!(
        log.lines()
            .any(|l| l.contains("orders") && l.contains("WHERE") && l.contains("c1")),
        "no pushed-down statement in the server log:\n{log}"
    );
}

/// Waits until the server log at `log` has a line containing `text` (a minute at most).
fn await_log(log: &Path, text: &str) {
    let start = std::time::Instant::now();
    while !std::fs::read_to_string(log)
        .unwrap_or_default()
        .contains(text)
    {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(60),
            "{text} never reached the server log"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn a_table_created_in_the_database_after_the_listing_is_found() {
    // The catalog lists the database's tables once; a name it does not know makes it list
    // them again. The run lists the tables, then waits in the database (a view that takes a
    // lock the test holds) while the test creates a table, then reads that table.
    use std::io::Write;
    let pg = Postgres::start();
    pg.psql(
        "CREATE TABLE public.first (id int); ALTER TABLE public.first OWNER TO shopper;
         CREATE FUNCTION public.wait_for_test() RETURNS int LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_advisory_xact_lock_shared(42); RETURN 1; END $$;
         CREATE VIEW public.waiter AS SELECT public.wait_for_test() AS ready; ALTER VIEW public.waiter OWNER TO shopper;",
        "shop",
    );
    let mut holder = pg.session("shop");
    let mut hold = holder.stdin.take().unwrap();
    writeln!(hold, "SELECT pg_advisory_lock(42);").unwrap();
    await_log(&pg.log(), "pg_advisory_lock(42)");
    let (_d, wh) = warehouse();
    let create = format!(
        "CREATE CONNECTION pg TYPE postgresql OPTIONS (host '127.0.0.1', port '{}', user 'shopper', password secret('shop', 'pg'), sslmode 'disable')",
        pg.port
    );
    let wh2 = wh.clone();
    let run = std::thread::spawn(move || {
        sql_env(
            &wh2,
            &[("TIDEMARK_SECRET_SHOP_PG", "s3cret-pw")],
            &[
                &create,
                "CREATE FOREIGN CATALOG shop USING CONNECTION pg OPTIONS (database 'shop')",
                "SHOW TABLES IN shop.public",
                "SELECT ready FROM shop.public.waiter",
                "SELECT count(*) AS late_rows FROM shop.public.late",
            ],
        )
    });
    // Its read of the view (identifiers quoted, as the psql that made it did not).
    await_log(&pg.log(), "\"waiter\"");
    writeln!(
        hold,
        "CREATE TABLE public.late (id int); INSERT INTO public.late VALUES (1), (2); ALTER TABLE public.late OWNER TO shopper; SELECT pg_advisory_unlock(42);"
    )
    .unwrap();
    drop(hold);
    let (ok, out, err) = run.join().unwrap();
    holder.wait().unwrap();
    assert!(ok, "{out}\n{err}");
    assert!(out.contains("public,first,false\n"), "{out}");
    assert!(!out.contains("public,late,"), "listed before: {out}");
    assert!(out.contains("late_rows\n2\n"), "{out}");
}
