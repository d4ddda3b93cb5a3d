//! Statements on one table whose results are more than a line: SHOW CREATE TABLE re-creates
//! the table it shows, DESCRIBE DETAIL, RESTORE by timestamp, and what Python `deltalake`
//! reads after RENAME, ALTER COLUMN and RESTORE.

use crate::common::{ok, run, tidemark, warehouse};

/// The rows of one statement's result, as JSON objects.
fn rows(wh: &std::path::Path, sql: &str) -> Vec<serde_json::Value> {
    let out = tidemark(wh)
        .args(["--format", "ndjson", "-c", sql])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{sql}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn show_create(wh: &std::path::Path, table: &str) -> String {
    rows(wh, &format!("SHOW CREATE TABLE {table}"))[0]["createtab_stmt"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn show_create_table_re_creates_the_table() {
    let (_d, wh) = warehouse();
    ok(
        &wh,
        "CREATE TABLE t (id BIGINT NOT NULL COMMENT 'the key', region STRING, amount DECIMAL(10,2) DEFAULT 0, `odd name` TIMESTAMP) \
         PARTITIONED BY (region) COMMENT 'it''s a table' TBLPROPERTIES ('team' = 'sales', 'delta.appendOnly' = 'false')",
    );
    ok(
        &wh,
        "ALTER TABLE t ADD CONSTRAINT positive CHECK (amount >= 0)",
    );
    let shown = show_create(&wh, "t");
    assert!(
        shown.starts_with("CREATE TABLE main.default.t (\n  id BIGINT NOT NULL COMMENT 'the key',\n  region STRING,\n  amount DECIMAL(10,2) DEFAULT 0,\n  `odd name` TIMESTAMP)\nUSING DELTA\nPARTITIONED BY (region)\nCOMMENT 'it''s a table'\nTBLPROPERTIES (\n"),
        "{shown}"
    );
    assert!(
        shown.contains("'delta.constraints.positive' = 'amount >= "),
        "{shown}"
    );
    // Run what it printed under another name: the same table again.
    let again = shown.replacen("main.default.t (", "main.default.t2 (", 1);
    ok(&wh, &again);
    assert_eq!(
        show_create(&wh, "t2"),
        shown.replacen("main.default.t (", "main.default.t2 (", 1)
    );
    assert_eq!(rows(&wh, "DESCRIBE t2"), rows(&wh, "DESCRIBE t"));
    // The constraint holds in the copy, and its protocol makes every writer check it.
    let out = run(&wh, "INSERT INTO t2 VALUES (1, 'eu', -1, NULL)");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("failed validation check"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let detail = &rows(&wh, "DESCRIBE DETAIL t2")[0];
    assert!(
        detail["minWriterVersion"].as_i64().unwrap() >= 3,
        "{detail}"
    );
    ok(&wh, "INSERT INTO t2 (id, region) VALUES (1, 'eu')");
    assert_eq!(
        ok(&wh, "SELECT amount FROM t2"),
        "amount\n0.00\n",
        "the DEFAULT is the copy's too"
    );
    // A column named like a table constraint's first word is back-quoted.
    ok(&wh, "CREATE TABLE k (`check` INT, `primary` STRING)");
    let k = show_create(&wh, "k");
    assert!(k.contains("  `check` INT,\n  `primary` STRING)"), "{k}");
    ok(&wh, &k.replacen("main.default.k (", "main.default.k2 (", 1));
    // A CREATE TABLE AS cannot take constraints it has not checked.
    let out = run(
        &wh,
        "CREATE TABLE t3 TBLPROPERTIES ('delta.constraints.c' = 'id > 0') AS SELECT 1 AS id",
    );
    assert!(!out.status.success());
}

#[test]
fn describe_detail_says_what_the_table_is() {
    let (_d, wh) = warehouse();
    ok(
        &wh,
        "CREATE TABLE t (id INT, p STRING) PARTITIONED BY (p) COMMENT 'c' TBLPROPERTIES ('k' = 'v')",
    );
    ok(&wh, "INSERT INTO t VALUES (1, 'a'), (2, 'b')");
    let d = &rows(&wh, "DESCRIBE DETAIL t")[0];
    assert_eq!(d["format"], "delta");
    assert_eq!(d["name"], "main.default.t");
    assert_eq!(d["description"], "c");
    assert_eq!(d["numFiles"], 2);
    assert!(d["sizeInBytes"].as_i64().unwrap() > 0);
    assert_eq!(d["partitionColumns"], serde_json::json!(["p"]));
    assert_eq!(d["properties"]["k"], "v");
    assert_eq!(
        d["location"].as_str().unwrap(),
        wh.join("main/default/t").display().to_string()
    );
    assert!(d["lastModified"].as_str().is_some() && d["createdAt"].as_str().is_some());
    assert!(d["id"].as_str().is_some_and(|id| id.len() == 36));
    // A CREATE TABLE AS keeps its comment too; CSV writes the list columns as text.
    ok(
        &wh,
        "CREATE TABLE g COMMENT 'from a query' AS SELECT 1 AS x",
    );
    assert_eq!(
        rows(&wh, "DESCRIBE DETAIL g")[0]["description"],
        "from a query"
    );
    let csv = ok(&wh, "DESCRIBE DETAIL t");
    assert!(csv.contains(",[p],[],2,"), "{csv}");
}

#[test]
fn restore_by_timestamp_and_what_python_reads_after_ddl() {
    let (_d, wh) = warehouse();
    ok(&wh, "CREATE TABLE t (id BIGINT, note STRING)");
    ok(&wh, "INSERT INTO t VALUES (1, 'a'), (2, 'b')");
    let history = rows(&wh, "DESCRIBE HISTORY t");
    let v1_time = history.iter().find(|r| r["version"] == 1).unwrap()["timestamp"]
        .as_str()
        .unwrap()
        .to_string();
    // Time travel goes by the commit files' times (as Spark's), a few milliseconds after the
    // commit's own timestamp: aim between version 1 and the next commit.
    std::thread::sleep(std::time::Duration::from_millis(600));
    ok(&wh, "DELETE FROM t WHERE id = 1");
    ok(&wh, "INSERT INTO t VALUES (3, 'c')");
    ok(
        &wh,
        &format!(
            "RESTORE TABLE t TO TIMESTAMP AS OF TIMESTAMP '{v1_time}' + INTERVAL 300 MILLISECONDS"
        ),
    );
    assert_eq!(ok(&wh, "SELECT id FROM t ORDER BY id"), "id\n1\n2\n");
    ok(&wh, "ALTER TABLE t ALTER COLUMN note SET NOT NULL");
    ok(&wh, "ALTER TABLE t ALTER COLUMN note COMMENT 'free text'");
    ok(&wh, "COMMENT ON TABLE t IS 'restored'");
    ok(&wh, "ALTER TABLE t RENAME TO kept");
    let path = wh.join("main/default/kept");
    let out = crate::interop::run_py(&format!(
        "from deltalake import DeltaTable\n\
         t = DeltaTable({p:?})\n\
         f = t.schema().fields[1]\n\
         print(t.version(), sorted(t.to_pyarrow_table()['id'].to_pylist()), f.nullable, f.metadata.get('comment'), t.metadata().description)\n",
        p = path.display().to_string()
    ));
    assert_eq!(out.trim(), "7 [1, 2] False free text restored");
}

/// `DESCRIBE EXTENDED`: the columns, a blank row, then the details as Databricks names them,
/// followed by DESCRIBE DETAIL's.
#[test]
fn describe_extended_lists_columns_then_details() {
    let (_d, wh) = warehouse();
    ok(
        &wh,
        "CREATE TABLE t (id INT NOT NULL, p STRING) PARTITIONED BY (p) TBLPROPERTIES ('team' = 'core')",
    );
    let all = rows(&wh, "DESCRIBE TABLE EXTENDED t");
    let pair = |r: &serde_json::Value| {
        (
            r["col_name"].as_str().unwrap_or_default().to_string(),
            r["data_type"].as_str().unwrap_or_default().to_string(),
        )
    };
    let pairs: Vec<(String, String)> = all.iter().map(pair).collect();
    assert_eq!(pairs[0], ("id".into(), "INT".into()));
    assert_eq!(all[0]["nullable"], serde_json::json!(false));
    assert_eq!(pairs[1], ("p".into(), "STRING".into()));
    assert_eq!(pairs[2], (String::new(), String::new()));
    assert_eq!(pairs[3].0, "# Detailed Table Information");
    for (k, v) in [
        ("Catalog", "main"),
        ("Database", "default"),
        ("Table", "t"),
        ("Type", "MANAGED"),
        ("Provider", "delta"),
        ("partitionColumns", "[p]"),
        ("properties", "{team: core}"),
    ] {
        assert!(
            pairs.iter().any(|(a, b)| a == k && b == v),
            "{k} = {v} missing in {pairs:?}"
        );
    }
    // A view: its columns, then what it is.
    ok(&wh, "CREATE VIEW v AS SELECT id FROM t");
    let view: Vec<(String, String)> = rows(&wh, "DESCRIBE EXTENDED v").iter().map(pair).collect();
    assert!(view.contains(&("Type".into(), "VIEW".into())), "{view:?}");
}

/// VACUUM runs FULL, as Databricks': a data file no version names (a killed write's) is
/// deleted once older than the retention, the log and hidden files are not, and a file gone
/// already is not counted again.
#[test]
fn vacuum_deletes_orphaned_files_once() {
    let (_d, wh) = warehouse();
    ok(&wh, "CREATE TABLE t (id INT)");
    ok(&wh, "INSERT INTO t VALUES (1), (2)");
    let dir = wh.join("main/default/t");
    let orphan = dir.join("part-00000-0d7e1a3c-5b7e-4a0e-9a53-1f2f3c4d5e6f-c000.snappy.parquet");
    std::fs::write(&orphan, b"PAR1 left by a killed write").unwrap();
    let hidden = dir.join("_scratch");
    std::fs::write(&hidden, b"not Delta's").unwrap();
    let vacuum = |sql: &str| {
        let all = rows(
            &wh,
            &format!("SET spark.databricks.delta.retentionDurationCheck.enabled = false; {sql}"),
        );
        all.last().unwrap()["num_files_deleted"].as_i64().unwrap()
    };
    assert_eq!(vacuum("VACUUM t RETAIN 0 HOURS DRY RUN"), 1);
    assert!(orphan.exists());
    assert_eq!(vacuum("VACUUM t RETAIN 0 HOURS"), 1);
    assert!(!orphan.exists() && hidden.exists());
    assert_eq!(vacuum("VACUUM t RETAIN 0 HOURS"), 0);
    assert_eq!(
        ok(&wh, "SELECT sum(id) FROM t").trim().lines().last(),
        Some("3")
    );
    // Within the retention (7 days by default), a new orphan stays.
    std::fs::write(&orphan, b"PAR1 again").unwrap();
    assert_eq!(vacuum("VACUUM t"), 0);
    assert!(orphan.exists());
    // A partition value that is escaped in the path (`p=a%3Ab%20c`) is found all the same.
    ok(
        &wh,
        "CREATE TABLE parts (id INT, p STRING) PARTITIONED BY (p)",
    );
    ok(&wh, "INSERT INTO parts VALUES (1, 'a:b c'), (2, 'plain')");
    ok(&wh, "INSERT OVERWRITE parts VALUES (3, 'a:b c')");
    let parquet = |dir: &str| {
        std::fs::read_dir(wh.join("main/default/parts").join(dir))
            .map(|d| d.count())
            .unwrap_or(0)
    };
    let escaped = std::fs::read_dir(wh.join("main/default/parts"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .find(|n| n.starts_with("p=a"))
        .unwrap();
    assert_eq!((parquet(&escaped), parquet("p=plain")), (2, 1));
    assert_eq!(vacuum("VACUUM parts RETAIN 0 HOURS DRY RUN"), 2);
    assert_eq!(vacuum("VACUUM parts RETAIN 0 HOURS"), 2);
    assert_eq!((parquet(&escaped), parquet("p=plain")), (1, 0));
    ok(&wh, "INSERT OVERWRITE parts VALUES (4, 'a:b c')");
    assert_eq!(vacuum("VACUUM parts RETAIN 0 HOURS"), 1);
    assert_eq!(parquet(&escaped), 1);
    assert_eq!(ok(&wh, "SELECT id FROM parts").lines().last(), Some("4"));
}
