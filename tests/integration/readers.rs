//! Other readers of what tidemark writes: Python `deltalake`, polars, Sail (through a Spark
//! Connect client) and DuckDB (on the Parquet files of each version) read every kind of table
//! tidemark writes, at every version,
//! the same rows tidemark reads; and each file's exact min and max, used as filters, find as
//! many rows in each reader as tidemark's own read holds (a reader that skips files on
//! inexact statistics finds fewer). `target/readers-matrix.md` gets the matrix
//! `docs/compatibility.md` shows.

use std::path::Path;

use crate::common::{sql, tidemark, warehouse};
use crate::interop::run_py;

/// The Python side: for each (table, version, tidemark's rows as NDJSON), every reader's full
/// read and filtered counts. Prints one line per check and `MISMATCH` lines for failures.
const CHECK: &str = r#"
import json, sys, datetime, decimal, os
import pyarrow as pa, polars as pl, duckdb
from deltalake import DeltaTable

# Sail (LakeSail's Spark Connect server, Rust) on 127.0.0.1, read through a Spark client.
os.environ.setdefault("RUST_LOG", "warn")
import warnings
warnings.filterwarnings("ignore", category=FutureWarning)
from pysail.spark import SparkConnectServer
from pyspark.sql import SparkSession, functions as F
sail = SparkConnectServer(ip="127.0.0.1", port=0)
sail.start(background=True)
sail_host, sail_port = sail.listening_address
spark = SparkSession.builder.remote(f"sc://{sail_host}:{sail_port}").getOrCreate()
spark.conf.set("spark.sql.session.timeZone", "UTC")

def sail_df(path, version):
    return spark.read.format("delta").option("versionAsOf", version).load(path)

spec = json.load(open(SPEC))

def norm(v):
    if v is None:
        return None
    if isinstance(v, datetime.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(datetime.timezone.utc).replace(tzinfo=None)
            return "tz:" + v.isoformat()
        return "ntz:" + v.isoformat()
    if isinstance(v, datetime.date):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return str(v.normalize()) if v != 0 else "0"
    if isinstance(v, float):
        return repr(v)
    return v

def parse(v, t):
    """tidemark's NDJSON value as the Python value of Arrow type t."""
    if v is None:
        return None
    if pa.types.is_timestamp(t):
        d = datetime.datetime.fromisoformat(v.replace("Z", "+00:00"))
        if t.tz is not None and d.tzinfo is None:
            d = d.replace(tzinfo=datetime.timezone.utc)
        return d
    if pa.types.is_date(t):
        return datetime.date.fromisoformat(v)
    if pa.types.is_decimal(t):
        return decimal.Decimal(str(v))
    if pa.types.is_floating(t):
        return float(v)
    return v

def rows_of(table):
    cols = table.column_names
    out = [tuple(norm(x) for x in (r[c] for c in cols)) for r in table.to_pylist()]
    return sorted(out, key=repr)

def check(name, path, version, ndjson, partitions):
    dt = DeltaTable(path, version=version)
    ref_table = dt.to_pyarrow_table()
    schema = ref_table.schema
    cols = schema.names
    tm = [json.loads(l, parse_float=decimal.Decimal) for l in open(ndjson) if l.strip()]
    tm_rows = sorted((tuple(norm(parse(r.get(c), schema.field(c).type)) for c in cols) for r in tm), key=repr)
    files = dt.file_uris()
    plain = [c for c in cols if c not in partitions]
    readers = {
        "deltalake": lambda: ref_table,
        "polars": lambda: pl.read_delta(path, version=version).to_arrow(),
        "sail": lambda: sail_df(path, version).toArrow(),
    }
    results = {}
    for reader, read in readers.items():
        try:
            t = read().select(cols)
            got = rows_of(t)
            results[reader] = "ok" if got == tm_rows else f"MISMATCH {len(got)} rows vs tidemark {len(tm_rows)}: {[r for r in got if r not in tm_rows][:2]} / {[r for r in tm_rows if r not in got][:2]}"
        except Exception as e:
            results[reader] = f"MISMATCH error {type(e).__name__}: {e}"
    # DuckDB reads the Parquet files themselves: the non-partition columns.
    try:
        if files:
            q = "SELECT " + ", ".join('"%s"' % c for c in plain) + " FROM read_parquet(?)"
            t = duckdb.execute(q, [files]).to_arrow_table()
            got = rows_of(t)
        else:
            got = []
        idx = [cols.index(c) for c in plain]
        want = sorted((tuple(r[i] for i in idx) for r in tm_rows), key=repr)
        results["duckdb"] = "ok" if got == want else f"MISMATCH {len(got)} rows vs tidemark {len(want)}"
    except Exception as e:
        results["duckdb"] = f"MISMATCH error {type(e).__name__}: {e}"
    # Filters at every file's exact min and max.
    filters = 0
    actions = pa.table(dt.get_add_actions(flatten=True)).to_pylist()
    for a in actions:
        for c in plain:
            for bound in ("min", "max"):
                v = a.get(f"{bound}.{c}")
                if v is None:
                    continue
                filters += 1
                i = cols.index(c)
                want = sum(1 for r in tm_rows if r[i] is not None and r[i] == norm(v))
                counts = {}
                try:
                    counts["deltalake"] = dt.to_pyarrow_table(filters=[(c, "=", v)]).num_rows
                except Exception as e:
                    counts["deltalake"] = f"error {e}"
                try:
                    lit = pl.lit(v, dtype=pl.from_arrow(ref_table.select([c])).dtypes[0])
                    counts["polars"] = pl.scan_delta(path, version=version).filter(pl.col(c) == lit).collect().height
                except Exception as e:
                    counts["polars"] = f"error {e}"
                try:
                    df = sail_df(path, version)
                    counts["sail"] = df.filter(F.col(c) == F.lit(v).cast(df.schema[c].dataType)).count()
                except Exception as e:
                    counts["sail"] = f"error {e}"
                try:
                    counts["duckdb"] = duckdb.execute('SELECT count(*) FROM read_parquet(?) WHERE "%s" = ?' % c, [files, v]).fetchone()[0]
                except Exception as e:
                    counts["duckdb"] = f"error {e}"
                for reader, n in counts.items():
                    if n != want and results.get(reader) == "ok":
                        results[reader] = f"MISMATCH {c} = {v!r} ({bound} of a file): {n} rows, tidemark {want}"
    for reader, r in results.items():
        print(f"{name}@{version}\t{reader}\t{r}\t{len(tm_rows)} rows, {filters} filters")

for item in spec:
    check(item["name"], item["path"], item["version"], item["ndjson"], item["partitions"])
spark.stop()
sail.stop()
"#;

/// The versions of a table (0 to its latest).
fn versions(table: &Path) -> Vec<u64> {
    let mut v: Vec<u64> = std::fs::read_dir(table.join("_delta_log"))
        .unwrap()
        .filter_map(|e| {
            let n = e.ok()?.file_name().to_string_lossy().to_string();
            n.strip_suffix(".json")?.parse().ok()
        })
        .collect();
    v.sort();
    v
}

#[test]
fn python_deltalake_polars_sail_and_duckdb_read_every_table_tidemark_writes() {
    let (dir, wh) = warehouse();
    let cols = "id BIGINT NOT NULL, name STRING, ts TIMESTAMP, ntz TIMESTAMP_NTZ, d DATE, amount DECIMAL(10,2), wide DECIMAL(38,6), ok BOOLEAN, x DOUBLE, i INT";
    let row = |id: i64| {
        format!(
            "({id}, 'n{id}', TIMESTAMP '2024-01-{:02} 10:00:00.{:06}', '2024-02-{:02} 00:00:00', DATE '2024-03-{:02}', {id}.25, CAST('12345678901234567890.{:06}' AS DECIMAL(38,6)), {}, {id}.5, {})",
            id % 28 + 1,
            id,
            id % 28 + 1,
            id % 28 + 1,
            id,
            id % 2 == 0,
            id * 3
        )
    };
    let rows = |ids: std::ops::Range<i64>| ids.map(row).collect::<Vec<_>>().join(", ");
    let mut stmts = vec![
        format!("CREATE TABLE plain ({cols})"),
        format!("INSERT INTO plain VALUES {}", rows(1..20)),
        format!("INSERT INTO plain VALUES {}, (100, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)", rows(20..40)),
        "UPDATE plain SET name = 'updated', amount = amount + 1 WHERE id % 5 = 0".into(),
        "DELETE FROM plain WHERE id % 7 = 0".into(),
        format!("MERGE INTO plain USING (SELECT * FROM (VALUES {}) AS v(id, name, ts, ntz, d, amount, wide, ok, x, i)) s ON plain.id = s.id WHEN MATCHED THEN UPDATE SET name = 'merged' WHEN NOT MATCHED THEN INSERT *", rows(35..45)),
        "CREATE TABLE parted (id INT, v STRING, p STRING, n INT) PARTITIONED BY (p, n)".into(),
        "INSERT INTO parted VALUES (1, 'a', 'x', 1), (2, 'b', '', 2), (3, 'c', NULL, NULL), (4, 'd', 'x', 2)".into(),
        "UPDATE parted SET v = 'z' WHERE id = 1".into(),
        "CREATE TABLE constrained (id INT NOT NULL, v STRING DEFAULT 'dflt', amt DECIMAL(20,4) DEFAULT 0)".into(),
        "ALTER TABLE constrained ADD CONSTRAINT positive CHECK (id > 0)".into(),
        "INSERT INTO constrained (id) VALUES (1), (2)".into(),
        "INSERT INTO constrained VALUES (3, 'x', 12345678901234.5678)".into(),
        "UPDATE constrained SET v = 'upd' WHERE id = 2".into(),
        "DELETE FROM constrained WHERE id = 1".into(),
        "DELETE FROM parted WHERE p IS NULL AND id = 2".into(),
        "CREATE TABLE ctas AS SELECT id, name, ts, wide FROM plain WHERE id < 30".into(),
        "CREATE TABLE ctl (source_table STRING, target_table STRING, watermark_column STRING, last_watermark TIMESTAMP)".into(),
        "INSERT INTO ctl VALUES ('main.default.plain', 'main.default.job_target', 'ts', NULL)".into(),
    ];
    stmts.push("COPY INCREMENTAL plain INTO linked WATERMARK id".into());
    let refs: Vec<&str> = stmts.iter().map(String::as_str).collect();
    sql(&wh, &refs);
    // A decoded copy, and the control table and history across their checkpoints (one every
    // 10 commits, the first on a version from 10 to 19, by the table's place): twenty job
    // runs, each after new rows.
    let out = tidemark(&wh)
        .args([
            "--no-whole-file-copies",
            "-c",
            "COPY INCREMENTAL plain INTO decoded WATERMARK id",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // One process: its runs after the first advance the control row as kept by this process
    // (no delta-rs in the commit, see `copy::control::kept`).
    let mut runs = vec![];
    for k in 0..20 {
        runs.push(format!(
            "INSERT INTO plain VALUES {}",
            // Later than every row before: each run copies them, advancing the mark.
            rows(1000 + k * 3..1003 + k * 3).replace(
                "TIMESTAMP '2024-01-",
                &format!("TIMESTAMP '{}-01-", 2025 + k)
            )
        ));
        runs.push("COPY INCREMENTAL USING CONTROL TABLE ctl".to_string());
    }
    sql(&wh, &runs.iter().map(String::as_str).collect::<Vec<_>>());
    let tables = [
        ("plain", "main/default/plain", vec![]),
        ("parted", "main/default/parted", vec!["p", "n"]),
        ("constrained", "main/default/constrained", vec![]),
        ("ctas", "main/default/ctas", vec![]),
        ("linked", "main/default/linked", vec![]),
        ("decoded", "main/default/decoded", vec![]),
        ("ctl", "main/default/ctl", vec![]),
        ("job_target", "main/default/job_target", vec![]),
        ("copy_runs", "system/tidemark/copy_runs", vec![]),
    ];
    let mut spec = vec![];
    for (name, rel, partitions) in &tables {
        let path = wh.join(rel);
        let qualified = rel.replace('/', ".");
        for v in versions(&path) {
            let ndjson = dir.path().join(format!("{name}@{v}.ndjson"));
            let out = tidemark(&wh)
                .args([
                    "--format",
                    "ndjson",
                    "-q",
                    "-c",
                    &format!("SELECT * FROM {qualified} VERSION AS OF {v}"),
                ])
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{name}@{v}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            std::fs::write(&ndjson, &out.stdout).unwrap();
            spec.push(serde_json::json!({
                "name": name, "path": path, "version": v, "ndjson": ndjson, "partitions": partitions,
            }));
        }
    }
    let spec_file = dir.path().join("spec.json");
    std::fs::write(&spec_file, serde_json::to_string(&spec).unwrap()).unwrap();
    let report = run_py(&format!(
        "SPEC = {:?}\n{CHECK}",
        spec_file.display().to_string()
    ));
    let mut matrix =
        String::from("| table@version | reader | result | checked |\n| --- | --- | --- | --- |\n");
    for line in report.lines() {
        let cells: Vec<&str> = line.split('\t').collect();
        matrix.push_str(&format!("| {} |\n", cells.join(" | ")));
    }
    let _ = std::fs::write(
        crate::common::repo().join("target/readers-matrix.md"),
        &matrix,
    );
    // Known and not tidemark's: Sail 0.7.2 cannot time-travel to a version older than the
    // table's latest checkpoint ("Missing commit file: expected version 0, found N"), for
    // tables any writer checkpointed (Python deltalake's too). An error, never other rows, and
    // only below the latest checkpoint: Sail must read every version from it on.
    let latest_checkpoint: std::collections::HashMap<&str, u64> = tables
        .iter()
        .filter_map(|(name, rel, _)| {
            let log = wh.join(rel).join("_delta_log");
            Some((*name, *crate::common::checkpoint_versions(&log).last()?))
        })
        .collect();
    let below_checkpoint = |l: &str| {
        let Some((name, version)) = l.split('\t').next().and_then(|c| c.split_once('@')) else {
            return false;
        };
        let version: u64 = version.parse().unwrap_or(u64::MAX);
        latest_checkpoint.get(name).is_some_and(|c| version < *c)
    };
    let known = |l: &str| {
        l.contains("\tsail\t")
            && l.contains("Missing commit file: expected version 0")
            && below_checkpoint(l)
    };
    let bad: Vec<&str> = report
        .lines()
        .filter(|l| l.contains("MISMATCH") && !known(l))
        .collect();
    assert!(bad.is_empty(), "{}", bad.join("\n"));
    let sail_ok = report
        .lines()
        .filter(|l| l.contains("\tsail\tok\t"))
        .count();
    let sail_due = spec.len() - report.lines().filter(|l| known(l)).count();
    assert!(
        sail_ok == sail_due && sail_ok >= tables.len(),
        "Sail read {sail_ok} versions right of {sail_due}:\n{report}"
    );
    assert!(report.lines().count() >= 3 * 20, "{report}");
}
