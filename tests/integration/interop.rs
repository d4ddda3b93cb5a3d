//! Tables written by tidemark open in Python's `deltalake` with the same rows and types, and
//! tables Python writes into the warehouse layout are tidemark tables.

use crate::common::{ok, python, warehouse};

fn py() -> String {
    python().expect(
        "Python with the deltalake package is needed for interop tests: run scripts/test.sh, which installs it into .peers/",
    )
}

fn run_py(code: &str) -> String {
    // Python's deltalake sometimes aborts while tearing down its runtime at interpreter exit
    // (SIGABRT after all output is written); leave without the teardown.
    let code = format!("{code}\nimport os, sys\nsys.stdout.flush()\nos._exit(0)\n");
    let out = std::process::Command::new(py())
        .args(["-c", &code])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "python failed ({:?}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

#[test]
fn python_reads_what_tidemark_writes() {
    let (_d, wh) = warehouse();
    ok(
        &wh,
        "CREATE TABLE t (id BIGINT NOT NULL, name STRING, ts TIMESTAMP, d DATE, amount DECIMAL(10,2), ok BOOLEAN, x DOUBLE)",
    );
    ok(
        &wh,
        "INSERT INTO t VALUES (1, 'a', '2024-01-01T00:00:00.000001Z', '2024-01-01', 1.25, true, 0.5), (2, NULL, NULL, NULL, NULL, NULL, NULL)",
    );
    ok(&wh, "UPDATE t SET name = 'b' WHERE id = 2");
    ok(
        &wh,
        "COPY INCREMENTAL samples.wanderbricks.users INTO users WATERMARK created_at",
    );
    let path = wh.join("main/default/t");
    let out = run_py(&format!(
        "from deltalake import DeltaTable\n\
         t = DeltaTable({path:?})\n\
         tbl = t.to_pyarrow_table().sort_by('id')\n\
         print(t.version())\n\
         print(tbl.schema.to_string(show_schema_metadata=False, show_field_metadata=False))\n\
         print(tbl.to_pylist())\n\
         u = DeltaTable({users:?}).to_pyarrow_table()\n\
         print(u.num_rows)\n",
        path = path.display().to_string(),
        users = wh.join("main/default/users").display().to_string()
    ));
    insta::assert_snapshot!(out);
}

#[test]
fn tidemark_reads_updates_and_merges_what_python_writes() {
    let (_d, wh) = warehouse();
    let path = wh.join("main/default/py");
    run_py(&format!(
        "import pyarrow as pa, datetime as dt\n\
         from deltalake import write_deltalake\n\
         t = pa.table({{'id': pa.array([1, 2, 3], pa.int64()), 'name': ['a', 'b', 'c'],\n\
              'ts': pa.array([dt.datetime(2024, 1, i, tzinfo=dt.timezone.utc) for i in (1, 2, 3)], pa.timestamp('us', tz='UTC'))}})\n\
         write_deltalake({p:?}, t)\n\
         write_deltalake({p:?}, t.slice(0, 1), mode='append')\n",
        p = path.display().to_string()
    ));
    assert_eq!(
        ok(&wh, "SELECT count(*) AS n, max(ts) AS m FROM py"),
        "n,m\n4,2024-01-03T00:00:00Z\n"
    );
    ok(&wh, "INSERT INTO py VALUES (4, 'd', '2024-01-04')");
    ok(&wh, "UPDATE py SET name = 'B' WHERE id = 2");
    ok(
        &wh,
        "CREATE TABLE changes AS SELECT * FROM (VALUES (3, 'C'), (5, 'e')) AS v(id, name)",
    );
    ok(
        &wh,
        "MERGE INTO py USING changes s ON py.id = s.id WHEN MATCHED THEN UPDATE SET name = s.name WHEN NOT MATCHED THEN INSERT (id, name) VALUES (s.id, s.name)",
    );
    assert_eq!(
        ok(&wh, "SELECT id, name FROM py ORDER BY id, name"),
        "id,name\n1,a\n1,a\n2,B\n3,C\n4,d\n5,e\n"
    );
    let back = run_py(&format!(
        "from deltalake import DeltaTable\nprint(sorted(DeltaTable({p:?}).to_pyarrow_table().column('name').to_pylist()))",
        p = path.display().to_string()
    ));
    assert_eq!(back.trim(), "['B', 'C', 'a', 'a', 'd', 'e']");
}
