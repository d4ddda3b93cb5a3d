//! Unit tests of the clause checks: every clause sqlparser accepts is run or refused by name.

use super::*;
use datafusion::sql::sqlparser::ast::Statement as Sql;

fn check(sql: &str) -> Result<()> {
    // Through tidemark's own parser: the whole statement must parse.
    let stmt = crate::parser::parse(sql, &crate::parser::SyntaxOnly)
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    match stmt {
        crate::parser::Statement::Sql(s) => match *s {
            Sql::CreateTable(c) => create_table(&c),
            Sql::Insert(i) => insert(&i),
            Sql::Update(u) => update(&u),
            Sql::Delete(d) => delete(&d),
            Sql::Merge(m) => merge(&m),
            s @ Sql::CreateSchema { .. } => create_schema(&s).map(|_| ()),
            s @ Sql::Drop { .. } => drop(&s).map(|_| ()),
            other => panic!("not covered: {other}"),
        },
        other => panic!("not covered: {other}"),
    }
}

#[test]
fn honoured_create_table_clauses_pass() {
    for sql in [
        "CREATE TABLE t (a INT) USING DELTA PARTITIONED BY (a) TBLPROPERTIES ('x' = '1')",
        "CREATE OR REPLACE TABLE t AS SELECT 1 AS a",
        "CREATE TABLE IF NOT EXISTS t (a INT)",
    ] {
        check(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
}

#[test]
fn other_create_table_clauses_are_refused_by_name() {
    for (sql, named) in [
        ("CREATE EXTERNAL TABLE t (a INT)", "LOCATION"),
        ("CREATE TABLE t (a INT) STORED AS PARQUET", "STORED AS"),
        ("CREATE TEMPORARY TABLE t (a INT)", "TEMPORARY"),
        ("CREATE TABLE t LIKE s", "LIKE"),
    ] {
        let e = check(sql).expect_err(sql).to_string();
        assert!(e.contains(named), "{sql}: {e}");
        assert!(e.contains("not supported"), "{sql}: {e}");
    }
}

#[test]
fn other_insert_clauses_are_refused_by_name() {
    check("INSERT INTO t VALUES (1)").unwrap();
    check("INSERT OVERWRITE TABLE t SELECT 1").unwrap();
    check("INSERT INTO t (a) SELECT 1").unwrap();
    // Static partition values are filled in by INSERT itself.
    check("INSERT INTO t PARTITION (p = 1) VALUES (1)").unwrap();
    for (sql, named) in [
        (
            "INSERT INTO t VALUES (1) ON CONFLICT (a) DO NOTHING",
            "ON CONFLICT",
        ),
        ("INSERT INTO t VALUES (1) RETURNING a", "RETURNING"),
    ] {
        let e = check(sql).expect_err(sql).to_string();
        assert!(e.contains(named), "{sql}: {e}");
    }
}

#[test]
fn update_delete_merge_drop_and_create_schema_clauses_are_honoured_or_refused_by_name() {
    for sql in [
        "UPDATE t SET a = 1 WHERE b = 2",
        "UPDATE t AS x SET a = 1",
        "DELETE FROM t WHERE a = 1",
        "MERGE INTO t USING s VERSION AS OF 1 AS s ON t.a = s.a WHEN MATCHED THEN DELETE",
        "MERGE INTO t AS x USING (SELECT 1 AS a) s ON x.a = s.a WHEN NOT MATCHED THEN INSERT *",
        "MERGE INTO t USING s ON t.a = s.a WHEN NOT MATCHED BY SOURCE THEN DELETE",
        "CREATE SCHEMA IF NOT EXISTS s",
        "DROP TABLE IF EXISTS t",
        "DROP SCHEMA s CASCADE",
        "DROP SCHEMA s RESTRICT",
    ] {
        check(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    let mut unparsed = vec![];
    for (sql, named) in [
        ("UPDATE t SET a = 1 RETURNING a", "RETURNING"),
        ("UPDATE t SET a = 1 FROM s", "FROM"),
        (
            "UPDATE t VERSION AS OF 1 SET a = 1",
            "VERSION/TIMESTAMP AS OF",
        ),
        ("DELETE FROM t WHERE a = 1 RETURNING a", "RETURNING"),
        ("DELETE FROM t USING s WHERE t.a = s.a", "USING"),
        ("DELETE FROM t, s WHERE a = 1", "several tables"),
        ("DELETE FROM t TABLESAMPLE (10 PERCENT)", "TABLESAMPLE"),
        (
            "MERGE INTO t TABLESAMPLE (10 PERCENT) USING s ON t.a = s.a WHEN MATCHED THEN DELETE",
            "TABLESAMPLE",
        ),
        (
            "MERGE INTO t USING (SELECT 1 AS a) TABLESAMPLE (10 PERCENT) AS s ON t.a = s.a WHEN MATCHED THEN DELETE",
            "TABLESAMPLE",
        ),
        (
            "MERGE INTO t USING s ON t.a = s.a WHEN MATCHED THEN UPDATE SET a = 1 DELETE WHERE a = 2",
            "DELETE WHERE",
        ),
        (
            "MERGE INTO t USING s ON t.a = s.a WHEN NOT MATCHED THEN INSERT (a) VALUES (1) WHERE s.a > 1",
            "INSERT ... WHERE",
        ),
        ("DROP TABLE t PURGE", "PURGE"),
        (
            "MERGE INTO t USING s AS x(b, a) ON t.a = x.a WHEN MATCHED THEN DELETE",
            "column names",
        ),
        (
            "MERGE INTO t USING (SELECT 1, 2) AS x(b, a) ON t.a = x.a WHEN MATCHED THEN DELETE",
            "column names",
        ),
        ("DROP TEMPORARY TABLE t", "TEMPORARY"),
        ("CREATE SCHEMA s WITH (a = 'b')", "WITH"),
        ("CREATE SCHEMA s OPTIONS (a = 'b')", "OPTIONS"),
        ("CREATE SCHEMA AUTHORIZATION u", "AUTHORIZATION"),
    ] {
        match crate::parser::parse(sql, &crate::parser::SyntaxOnly) {
            // A clause the dialect does not even parse is refused by the parser.
            Err(_) => unparsed.push(sql),
            Ok(_) => {
                let e = check(sql).expect_err(sql).to_string();
                assert!(e.contains(named), "{sql}: {e}");
                assert!(e.contains("not supported"), "{sql}: {e}");
            }
        }
    }
    assert!(unparsed.len() <= 5, "{unparsed:?}");
}
