//! Differential checks: what tidemark adds on top of DataFusion (session variables, column
//! DEFAULTs, MERGE, DML counts, CREATE [OR REPLACE] TABLE AS, decimals) against DuckDB running
//! the same statements. Each case is a list of steps, the same SQL in both engines or each
//! engine's spelling of it; compared steps must give the same rows (as a sorted multiset of
//! printed values; for DML, the first column: the rows affected), or fail in both.

use crate::common::warehouse;
use crate::interop::run_py;

/// One step: tidemark's SQL, DuckDB's SQL, and whether its result is compared.
struct Step {
    tidemark: &'static str,
    duckdb: &'static str,
    compare: Compare,
}

#[derive(Clone, Copy, PartialEq)]
enum Compare {
    /// Set-up only: must succeed in both.
    No,
    /// The rows, all columns.
    Rows,
    /// The first column only (DML: tidemark prints its counts, DuckDB one count).
    Count,
}

fn same(sql: &'static str, compare: Compare) -> Step {
    Step {
        tidemark: sql,
        duckdb: sql,
        compare,
    }
}

fn each(tidemark: &'static str, duckdb: &'static str, compare: Compare) -> Step {
    Step {
        tidemark,
        duckdb,
        compare,
    }
}

use Compare::{Count, No, Rows};

fn cases() -> Vec<(&'static str, Vec<Step>)> {
    vec![
        (
            "column defaults on INSERT",
            vec![
                same(
                    "CREATE TABLE d (id INT, v STRING DEFAULT 'dflt', n INT DEFAULT 7)",
                    No,
                ),
                same("INSERT INTO d (id) VALUES (1)", Count),
                same("INSERT INTO d (id, n) VALUES (2, 3), (3, NULL)", Count),
                same("INSERT INTO d (n, id) SELECT 5, 4", Count),
                same("SELECT id, v, n FROM d", Rows),
                // Too few values for the columns: an error in both, nothing inserted.
                same("INSERT INTO d VALUES (9)", Count),
                same("SELECT count(*) FROM d", Rows),
            ],
        ),
        (
            "UPDATE and DELETE counts",
            vec![
                same("CREATE TABLE u (id INT, g STRING, n INT)", No),
                same(
                    "INSERT INTO u VALUES (1, 'a', 1), (2, 'a', NULL), (3, 'b', 3), (4, NULL, 4)",
                    Count,
                ),
                same("UPDATE u SET n = n + 10 WHERE g = 'a'", Count),
                same("UPDATE u SET n = 0 WHERE g IS NULL OR n > 100", Count),
                same("UPDATE u SET g = 'z' WHERE id > 100", Count),
                same("DELETE FROM u WHERE n IS NULL", Count),
                same("DELETE FROM u WHERE g <> 'a'", Count),
                same("SELECT id, g, n FROM u", Rows),
                same("DELETE FROM u", Count),
                same("SELECT count(*) FROM u", Rows),
            ],
        ),
        (
            "MERGE",
            vec![
                same("CREATE TABLE t (id INT, v STRING, n INT DEFAULT 7)", No),
                same(
                    "INSERT INTO t VALUES (1, 'a', 1), (2, 'b', 2), (3, 'c', 3)",
                    No,
                ),
                same(
                    "CREATE TABLE s AS SELECT * FROM (VALUES (2, 'B'), (3, 'del'), (4, 'D'), (NULL, 'N')) AS x(id, v)",
                    No,
                ),
                same(
                    "MERGE INTO t USING s ON t.id = s.id WHEN MATCHED AND s.v = 'del' THEN DELETE WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT (id, v) VALUES (s.id, s.v)",
                    Count,
                ),
                same("SELECT id, v, n FROM t", Rows),
                same(
                    "MERGE INTO t USING s ON t.id = s.id WHEN NOT MATCHED BY SOURCE THEN DELETE",
                    Count,
                ),
                same("SELECT id, v, n FROM t", Rows),
                same(
                    "MERGE INTO t USING (SELECT 10 AS id, 'x' AS v) AS s2 ON t.id = s2.id WHEN NOT MATCHED THEN INSERT *",
                    Count,
                ),
                same("SELECT id, v, n FROM t", Rows),
            ],
        ),
        (
            "CREATE [OR REPLACE] TABLE AS",
            vec![
                same("CREATE TABLE r AS SELECT 1 AS id, 'a' AS v", No),
                same("SELECT * FROM r", Rows),
                same(
                    "CREATE OR REPLACE TABLE r AS SELECT 2 AS id, 3 AS w UNION ALL SELECT 4, 5",
                    No,
                ),
                same("SELECT * FROM r", Rows),
                same("CREATE TABLE r AS SELECT 1 AS id", Count),
                same("SELECT count(*) FROM r", Rows),
            ],
        ),
        (
            "session variables and columns of the same name",
            vec![
                each("DECLARE VARIABLE v INT DEFAULT 3", "SET VARIABLE v = 3", No),
                each(
                    "SELECT v + 1 AS x",
                    "SELECT getvariable('v') + 1 AS x",
                    Rows,
                ),
                same("SELECT v FROM (VALUES (1)) AS t(v)", Rows),
                same("SELECT v FROM (SELECT 5 AS v) q", Rows),
                same("CREATE TABLE vt (v INT)", No),
                same("INSERT INTO vt VALUES (10), (20)", No),
                same("SELECT v FROM vt", Rows),
                each(
                    "SET VAR v = (SELECT max(v) FROM vt)",
                    "SET VARIABLE v = (SELECT max(v) FROM vt)",
                    No,
                ),
                each(
                    "SELECT v * 2 AS x",
                    "SELECT getvariable('v') * 2 AS x",
                    Rows,
                ),
                each(
                    "SELECT count(*) FROM vt WHERE vt.v < session.v",
                    "SELECT count(*) FROM vt WHERE vt.v < getvariable('v')",
                    Rows,
                ),
            ],
        ),
        (
            "decimals are exact",
            vec![
                same("SELECT 9007199254740993.00 + 0 AS a", Rows),
                same(
                    "SELECT CAST(12345678901234567.89 AS DECIMAL(38,2)) AS a",
                    Rows,
                ),
                same("CREATE TABLE m (a DECIMAL(18,2))", No),
                same(
                    "INSERT INTO m VALUES (9007199254740993.00), (0.10), (0.20)",
                    Count,
                ),
                same("SELECT sum(a) FROM m", Rows),
                same("SELECT a FROM m WHERE a = 9007199254740993.00", Rows),
                same("SELECT a * 2 FROM m WHERE a < 1", Rows),
            ],
        ),
    ]
}

/// DuckDB's result for every step, one line each: `ok <json rows>` or `error ...` for a
/// compared step, `setup-ok` or `setup-error ...` for the others.
fn duckdb_results(steps: &[Step]) -> Vec<String> {
    let sql: Vec<(&str, bool)> = steps.iter().map(|s| (s.duckdb, s.compare != No)).collect();
    let json = serde_json::to_string(&sql).unwrap();
    let out = run_py(&format!(
        r#"
import duckdb, json
con = duckdb.connect()
def text(v):
    if v is None: return ""
    if isinstance(v, bool): return "true" if v else "false"
    return str(v)
for sql, compared in json.loads({json:?}):
    try:
        rows = con.execute(sql).fetchall()
    except Exception as e:
        print("error" if compared else "setup-error", json.dumps(str(e)))
        continue
    print("ok " + json.dumps([[text(v) for v in r] for r in rows]) if compared else "setup-ok")
"#
    ));
    out.lines().map(str::to_string).collect()
}

/// tidemark's results for every compared step, in the same form, from one session.
fn tidemark_results(wh: &std::path::Path, steps: &[Step]) -> Vec<String> {
    let mut script = String::new();
    for (i, s) in steps.iter().enumerate() {
        if s.compare != No {
            script.push_str(&format!("SELECT 'step {i}' AS tidemark_step;\n"));
        }
        script.push_str(s.tidemark);
        script.push_str(";\n");
        if s.compare != No {
            script.push_str("SELECT 'done' AS tidemark_step;\n");
        }
    }
    let file = wh.with_extension("sql");
    std::fs::write(&file, &script).unwrap();
    let out = crate::common::tidemark(wh)
        .args(["--format", "csv", "--continue-on-error", "-q", "-f"])
        .arg(&file)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    // Blocks between a step's markers: a header and rows, or nothing when the step failed.
    let mut results = vec![];
    let mut current: Option<Vec<String>> = None;
    let mut lines = stdout.lines().peekable();
    while let Some(line) = lines.next() {
        if line == "tidemark_step" {
            let marker = lines.next().unwrap_or_default();
            if let Some(block) = current.take() {
                results.push(block);
            }
            if marker.starts_with("step ") {
                current = Some(vec![]);
            }
            continue;
        }
        if let Some(block) = current.as_mut() {
            block.push(line.to_string());
        }
    }
    results
        .into_iter()
        .map(|block| match block.split_first() {
            None => "error".to_string(),
            Some((_header, rows)) => {
                let rows: Vec<Vec<String>> = rows.iter().map(|r| csv_fields(r)).collect();
                format!("ok {}", serde_json::to_string(&rows).unwrap())
            }
        })
        .collect()
}

/// The fields of one CSV line (quotes as the csv writer makes them).
fn csv_fields(line: &str) -> Vec<String> {
    let mut fields = vec![];
    let mut field = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                field.push('"');
                chars.next();
            }
            ('"', _) => quoted = !quoted,
            (',', false) => fields.push(std::mem::take(&mut field)),
            (c, _) => field.push(c),
        }
    }
    fields.push(field);
    fields
}

/// Rows as a sorted multiset, keeping only the first column for a count.
fn canon(result: &str, compare: Compare) -> String {
    let Some(json) = result.strip_prefix("ok ") else {
        return "error".into();
    };
    let mut rows: Vec<Vec<String>> = serde_json::from_str(json).unwrap();
    if compare == Count {
        rows = rows
            .into_iter()
            .map(|r| r.into_iter().take(1).collect())
            .collect();
    }
    rows.sort();
    format!("{rows:?}")
}

#[test]
fn tidemark_and_duckdb_agree_on_defaults_merge_dml_counts_ctas_variables_and_decimals() {
    let mut report = String::new();
    let mut checked = 0;
    for (name, steps) in cases() {
        let (_d, wh) = warehouse();
        let ours = tidemark_results(&wh, &steps);
        let theirs = duckdb_results(&steps);
        assert_eq!(theirs.len(), steps.len(), "{name}: {theirs:?}");
        let compared: Vec<&Step> = steps.iter().filter(|s| s.compare != No).collect();
        let mut duck_compared = vec![];
        for (s, line) in steps.iter().zip(&theirs) {
            if s.compare == No {
                // A set-up step DuckDB refused makes the case meaningless.
                assert_eq!(line, "setup-ok", "{name}: DuckDB: `{}`", s.duckdb);
            } else {
                duck_compared.push(line);
            }
        }
        assert_eq!(ours.len(), compared.len(), "{name}: tidemark {ours:?}");
        for ((s, mine), duck) in compared.iter().zip(&ours).zip(&duck_compared) {
            let (a, b) = (canon(mine, s.compare), canon(duck, s.compare));
            report.push_str(&format!(
                "| {name} | `{}` | {} |\n",
                s.tidemark,
                if a == b { "same" } else { "DIFFERENT" }
            ));
            assert_eq!(
                a, b,
                "{name}: `{}` (tidemark) / `{}` (DuckDB)",
                s.tidemark, s.duckdb
            );
            checked += 1;
        }
    }
    let _ = std::fs::write(
        crate::common::repo().join("target/differential-matrix.md"),
        &report,
    );
    assert!(checked >= 30, "{checked}");
}
