//! Tables written by tidemark open in Python's `deltalake` with the same rows and types, and
//! tables Python writes into the warehouse layout are tidemark tables.

use crate::common::{ok, python, warehouse};

fn py() -> String {
    python().expect(
        "Python with the deltalake package is needed for interop tests: run scripts/test.sh, which installs it into .peers/",
    )
}

pub(crate) fn run_py(code: &str) -> String {
    // Python's deltalake sometimes aborts while tearing down its runtime at interpreter exit
    // (SIGABRT after all output is written); leave without the teardown.
    let code = format!("{code}\nimport os, sys\nsys.stdout.flush()\nos._exit(0)\n");
    // As a script file, not `-c`: pyspark's client looks for a Spark installation when the
    // main module has no file.
    let script = tempfile::Builder::new().suffix(".py").tempfile().unwrap();
    std::fs::write(script.path(), &code).unwrap();
    let out = std::process::Command::new(py())
        .arg(script.path())
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

#[test]
fn checkpoints_keep_tombstones_in_row_groups_of_their_own() {
    // A control table updated 25 times: tidemark checkpoints it every 10 versions (shifted by
    // a hash of its place), the last time at version 17 or later. Each update
    // leaves a tombstone; the checkpoint holds them (Delta keeps them 7 days) in row groups
    // without any other action, so readers skipping on `add.path IS NOT NULL` never decode
    // them. Python's deltalake reads the table at the checkpoint and after it.
    let (_d, wh) = warehouse();
    let script = "CREATE TABLE c (k STRING, n BIGINT);
        INSERT INTO c VALUES ('a', 0), ('b', 100);
        FOR SELECT * FROM range(25) DO UPDATE c SET n = n + 1 WHERE k = 'a'; END FOR;";
    let out = crate::common::run(&wh, script);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let log = wh.join("main/default/c/_delta_log");
    let at = *crate::common::checkpoint_versions(&log).last().unwrap();
    assert!(at >= 17, "checkpointed at {at}");
    let file = std::fs::File::open(log.join(format!("{at:020}.checkpoint.parquet"))).unwrap();
    use datafusion::parquet::file::reader::{FileReader, SerializedFileReader};
    let reader = SerializedFileReader::new(file).unwrap();
    let (mut removes, mut adds, mut groups) = (0, 0, vec![]);
    for rg in reader.metadata().row_groups() {
        let nulls = |col: &str| {
            let c = rg
                .columns()
                .iter()
                .find(|c| c.column_path().string() == col)
                .unwrap();
            c.statistics().unwrap().null_count_opt().unwrap() as i64
        };
        let rows = rg.num_rows();
        let (r, a) = (rows - nulls("remove.path"), rows - nulls("add.path"));
        assert!(
            r == 0 || r == rows,
            "a row group mixes tombstones with other actions"
        );
        removes += r;
        adds += a;
        groups.push(if r > 0 { "tombstones" } else { "actions" });
    }
    // Versions 0 (create), 1 (insert), 2..=at (updates): a tombstone each, 1 live file.
    assert_eq!((removes, adds), (at as i64 - 1, 1), "{groups:?}");
    assert!(groups.contains(&"actions") && groups.contains(&"tombstones"));
    let last: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(log.join("_last_checkpoint")).unwrap())
            .unwrap();
    assert_eq!(last["version"], at);

    assert_eq!(
        ok(&wh, "SELECT k, n FROM c ORDER BY k"),
        "k,n\na,25\nb,100\n"
    );
    let path = wh.join("main/default/c").display().to_string();
    let out = run_py(&format!(
        "from deltalake import DeltaTable\n\
         for v in ({at}, None):\n\
         \x20   t = DeltaTable({path:?}, version=v)\n\
         \x20   print(t.version(), sorted(t.to_pyarrow_table().to_pylist(), key=lambda r: r['k']))\n"
    ));
    assert_eq!(
        out,
        format!(
            "{at} [{{'k': 'a', 'n': {}}}, {{'k': 'b', 'n': 100}}]\n26 [{{'k': 'a', 'n': 25}}, {{'k': 'b', 'n': 100}}]\n",
            at - 1
        )
    );
}

#[test]
fn python_reads_a_decoded_copy_with_delta_encoded_columns() {
    // A decoded copy delta-encodes integers that move in small steps: pyarrow's own Parquet
    // reader (not delta-rs') must read them back exactly.
    let (_d, wh) = warehouse();
    ok(
        &wh,
        "CREATE TABLE s (id BIGINT, ts TIMESTAMP, d DATE, n INT, note STRING)",
    );
    ok(
        &wh,
        "INSERT INTO s SELECT id * 3 - 70000, to_timestamp_micros(1704067200000000 + id * 1000000 + id % 7), \
         CAST(to_timestamp(1704067200 + id * 86400) AS DATE), CAST(id % 1000 AS INT) - 500, 'n' || id FROM range(70000)",
    );
    let out = crate::common::tidemark(&wh)
        .args([
            "--no-whole-file-copies",
            "-c",
            "COPY INCREMENTAL s INTO t WATERMARK ts",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let totals = "SELECT count(*) AS n, sum(id) AS ids, sum(unix_micros(ts) % 1000003) AS ts, \
                  sum(CAST(d - DATE '2024-01-01' AS BIGINT)) AS d, sum(n) AS ns FROM ";
    let want = ok(&wh, &format!("{totals} s"));
    assert_eq!(ok(&wh, &format!("{totals} t")), want);
    let path = wh.join("main/default/t");
    let got = run_py(&format!(
        "import glob, pyarrow.compute as pc, pyarrow.parquet as pq, datetime as dt\n\
         from deltalake import DeltaTable\n\
         enc = {{e for f in glob.glob({p:?} + '/*.parquet') for rg in range(pq.ParquetFile(f).metadata.num_row_groups)\n\
                for c in range(5) for e in pq.ParquetFile(f).metadata.row_group(rg).column(c).encodings}}\n\
         assert 'DELTA_BINARY_PACKED' in enc, enc\n\
         t = DeltaTable({p:?}).to_pyarrow_table()\n\
         us = pc.cast(t.column('ts'), 'int64').to_pylist()\n\
         days = [(x - dt.date(2024, 1, 1)).days for x in t.column('d').to_pylist()]\n\
         print('n,ids,ts,d,ns')\n\
         print(f\"{{t.num_rows}},{{pc.sum(t.column('id')).as_py()}},{{sum(x % 1000003 for x in us)}},{{sum(days)}},{{pc.sum(t.column('n')).as_py()}}\")\n",
        p = path.display().to_string()
    ));
    assert_eq!(got, want);
}

/// A DEEP CLONE is a standard Delta table: Python's `deltalake` reads its rows, partition
/// values (one with a space and a slash) and properties.
#[test]
fn python_reads_a_deep_clone() {
    let (_d, wh) = warehouse();
    ok(
        &wh,
        "CREATE TABLE src (id BIGINT, p STRING) PARTITIONED BY (p) TBLPROPERTIES ('team' = 'core')",
    );
    ok(
        &wh,
        "INSERT INTO src VALUES (1, 'a'), (2, 'a b/c'), (3, NULL)",
    );
    ok(&wh, "CREATE TABLE cl DEEP CLONE src");
    let out = run_py(&format!(
        "from deltalake import DeltaTable\n\
         t = DeltaTable({p:?})\n\
         print(sorted(t.to_pyarrow_table().to_pylist(), key=lambda r: r['id']))\n\
         print(t.metadata().partition_columns, t.metadata().configuration.get('team'))\n",
        p = wh.join("main/default/cl").display().to_string()
    ));
    assert_eq!(
        out.trim(),
        "[{'id': 1, 'p': 'a'}, {'id': 2, 'p': 'a b/c'}, {'id': 3, 'p': None}]\n['p'] core"
    );
}

/// MAP, ARRAY and STRUCT columns tidemark creates and writes read back in Python's
/// deltalake with the same values and types.
#[test]
fn python_reads_map_array_and_struct_columns() {
    let (_d, wh) = warehouse();
    ok(
        &wh,
        "CREATE TABLE nested (id INT, m MAP<STRING, INT>, a ARRAY<MAP<STRING, STRUCT<x: INT>>>, s STRUCT<tags: ARRAY<STRING>, kv: MAP<INT, STRING>>)",
    );
    ok(
        &wh,
        "INSERT INTO nested VALUES (1, map('x', 1, 'y', 2), array(map('k', named_struct('x', 5))), named_struct('tags', array('a', 'b'), 'kv', map(7, 'seven'))), (2, NULL, NULL, NULL)",
    );
    let path = wh.join("main/default/nested");
    let out = run_py(&format!(
        "from deltalake import DeltaTable\n\
         tbl = DeltaTable({path:?}).to_pyarrow_table().sort_by('id')\n\
         for f in tbl.schema: print(f.name, f.type)\n\
         print(tbl.to_pylist())\n",
        path = path.display().to_string(),
    ));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[1], "m map<string, int32>", "{out}");
    assert!(lines[2].starts_with("a list<"), "{out}");
    assert!(lines[2].contains("map<string, struct<x: int32>"), "{out}");
    assert_eq!(
        lines[4],
        "[{'id': 1, 'm': [('x', 1), ('y', 2)], 'a': [[('k', {'x': 5})]], 's': {'tags': ['a', 'b'], 'kv': [(7, 'seven')]}}, {'id': 2, 'm': None, 'a': None, 's': None}]",
        "{out}"
    );
}

#[test]
fn a_copy_history_made_before_a_column_was_added_gains_it() {
    // The history table as an earlier tidemark made it: without `source_snapshot`.
    let (_d, wh) = warehouse();
    let history = wh.join("system/tidemark/copy_runs");
    run_py(&format!(
        r#"
import datetime as dt, pyarrow as pa, deltalake
ts = pa.timestamp("us", tz="UTC")
now = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
t = pa.table({{
    "run_id": pa.array(["old"]), "started_at": pa.array([now], ts), "finished_at": pa.array([now], ts),
    "source": pa.array(["main.default.a"]), "target": pa.array(["main.default.b"]),
    "watermark_column": pa.array(["at"]), "previous_mark": pa.array([None], pa.string()),
    "new_mark": pa.array([None], pa.string()), "rows_copied": pa.array([0], pa.int64()),
    "null_watermark_rows": pa.array([0], pa.int64()), "source_version": pa.array([None], pa.int64()),
    "target_version": pa.array([None], pa.int64()), "duration_ms": pa.array([0], pa.int64()),
    "status": pa.array(["succeeded"]), "error": pa.array([None], pa.string()),
}})
deltalake.write_deltalake({history:?}, t)
"#,
        history = history.display().to_string()
    ));
    ok(&wh, "CREATE TABLE s (id BIGINT, at TIMESTAMP)");
    ok(
        &wh,
        "INSERT INTO s VALUES (1, TIMESTAMP '2024-01-01 00:00:00')",
    );
    ok(&wh, "COPY INCREMENTAL s INTO t WATERMARK at");
    let out = ok(
        &wh,
        "SELECT run_id = 'old', status, source_snapshot IS NULL FROM system.tidemark.copy_runs ORDER BY started_at",
    );
    assert!(out.contains("true") && out.contains("succeeded"), "{out}");
    assert_eq!(out.matches("succeeded").count(), 2, "{out}");
    // Compacted past 32 small files, the old file among them (on a version from 32 to 41, by
    // the history's place, leaving up to 11 files after the 40 runs): every row kept, the old
    // one with its new column NULL, and another reader reads the compacted table.
    ok(&wh, &"COPY INCREMENTAL s INTO t WATERMARK at;".repeat(40));
    let out = ok(
        &wh,
        "SELECT count(*), count(DISTINCT run_id), count(*) FILTER (WHERE run_id = 'old' AND source_snapshot IS NULL) FROM system.tidemark.copy_runs",
    );
    assert!(out.ends_with("42,42,1\n"), "{out}");
    let read = run_py(&format!(
        "import deltalake\nt = deltalake.DeltaTable({history:?})\nprint(len(t.file_uris()) < 15, [h['operation'] for h in t.history()].count('OPTIMIZE'), t.to_pyarrow_table().num_rows)",
        history = history.display().to_string()
    ));
    assert_eq!(read.trim(), "True 1 42", "{read}");
}

/// Tables compacted by OPTIMIZE (all partitions, some, and Z-ordered) keep their strings as
/// `string` in the files' Arrow schema, so Python's `deltalake` filters them (with string
/// views there it failed: "no kernel matching input types (string, string_view)"), and
/// their history says which partitions each OPTIMIZE took (delta-rs records no Z-order
/// columns).
#[test]
fn python_filters_tables_tidemark_optimized() {
    let (_d, wh) = warehouse();
    ok(&wh, "CREATE TABLE s (id BIGINT, v STRING)");
    ok(&wh, "INSERT INTO s VALUES (1, 'x'), (2, 'y')");
    ok(&wh, "INSERT INTO s VALUES (3, 'x')");
    ok(&wh, "OPTIMIZE s");
    ok(
        &wh,
        "CREATE TABLE p (id BIGINT, v STRING, day DATE) PARTITIONED BY (day)",
    );
    ok(
        &wh,
        "INSERT INTO p VALUES (1, 'x', '2024-01-01'), (2, 'y', '2024-01-02')",
    );
    ok(
        &wh,
        "INSERT INTO p VALUES (3, 'x', '2024-01-01'), (4, 'x', '2024-01-02')",
    );
    ok(&wh, "OPTIMIZE p WHERE day = DATE '2024-01-01'");
    ok(&wh, "OPTIMIZE p WHERE day > '2024-01-01' ZORDER BY (v, id)");
    let out = run_py(&format!(
        "import json, pyarrow.parquet as pq\n\
         from deltalake import DeltaTable\n\
         for path in [{s:?}, {p:?}]:\n\
         \x20   t = DeltaTable(path)\n\
         \x20   rows = t.to_pyarrow_table(filters=[('v', '=', 'x')]).sort_by('id')\n\
         \x20   print(rows.column('id').to_pylist())\n\
         \x20   print(sorted({{str(pq.read_schema(u).field('v').type) for u in t.file_uris()}}))\n\
         \x20   print([(h['operation'], json.loads(h['operationParameters'].get('predicate', '[]')), h['operationParameters'].get('zOrderBy')) for h in t.history() if h['operation'] == 'OPTIMIZE'])\n",
        s = wh.join("main/default/s").display().to_string(),
        p = wh.join("main/default/p").display().to_string(),
    ));
    assert_eq!(
        out,
        "[1, 3]\n['string']\n[('OPTIMIZE', [], None)]\n\
         [1, 3, 4]\n['string']\n\
         [('OPTIMIZE', [\"day > '2024-01-01'\"], None), ('OPTIMIZE', [\"day = '2024-01-01'\"], None)]\n",
        "{out}"
    );
}

/// OPTIMIZE, of some partitions and Z-ordered, on a table Spark wrote with deletion vectors
/// (registered as an external table): the deleted rows stay deleted.
#[test]
fn optimize_keeps_a_spark_tables_deleted_rows_deleted() {
    let (_d, wh) = warehouse();
    let tmp = tempfile::tempdir().unwrap();
    let delta = crate::golden::unpack("dv-partitioned-with-checkpoint", tmp.path()).join("delta");
    ok(
        &wh,
        &format!("CREATE TABLE dv LOCATION '{}'", delta.display()),
    );
    let rows = "SELECT count(*), sum(col1), min(col2), max(col2) FROM dv";
    let before = ok(&wh, rows);
    assert_eq!(
        before,
        "count(*),sum(col1),min(col2),max(col2)\n35,1015,foo0,foo4\n"
    );
    let out = crate::common::sql(
        &wh,
        &[
            "OPTIMIZE dv WHERE part IN (0, 1, 2) ZORDER BY (col1)",
            rows,
            "OPTIMIZE dv",
            rows,
            "OPTIMIZE dv ZORDER BY col2",
            rows,
        ],
    );
    let after: Vec<&str> = out.lines().filter(|l| l.starts_with("35,")).collect();
    assert_eq!(after, vec!["35,1015,foo0,foo4"; 3], "{out}");
    // Each Z-ordering rewrote files (its files removed, the line after its header).
    let lines: Vec<&str> = out.lines().collect();
    let removed: Vec<i64> = lines
        .windows(2)
        .filter(|w| w[0] == "num_files_added,num_files_removed")
        .map(|w| w[1].split(',').nth(1).unwrap().parse().unwrap())
        .collect();
    assert_eq!(removed.len(), 3, "{out}");
    assert!(removed[0] > 0 && removed[2] > 0, "{out}");
}
