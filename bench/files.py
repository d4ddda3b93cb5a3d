"""COPY INTO of many CSV files into a Delta table: tidemark side by side with the peer a user
would otherwise script (DuckDB's COPY (SELECT * FROM read_csv(...)) into a Parquet file, then a
Delta commit of that file by Python deltalake), whole processes, median wall time and peak RSS.
Writes (or replaces) the "Loading files" section of docs/benchmarks.md.

usage: python bench/files.py TIDEMARK_BINARY WORKDIR [--files 100] [--rows 20000] [--reps 3]
"""
import argparse, datetime as dt, os, platform, random, shutil, statistics, subprocess, sys, time

ap = argparse.ArgumentParser()
ap.add_argument("tidemark")
ap.add_argument("work")
ap.add_argument("--files", type=int, default=100)
ap.add_argument("--rows", type=int, default=20_000, help="rows per file")
ap.add_argument("--reps", type=int, default=3)
ap.add_argument("--out", default="docs/benchmarks.md")
args = ap.parse_args()
TM = os.path.abspath(args.tidemark)
W = os.path.abspath(args.work)
py = sys.executable

COLUMNS = "id BIGINT, customer STRING, amount DOUBLE, qty INT, placed_at TIMESTAMP"


def gen(dir):
    os.makedirs(dir)
    rnd = random.Random(7)
    base = dt.datetime(2024, 1, 1)
    for f in range(args.files):
        lines = ["id,customer,amount,qty,placed_at"]
        for r in range(args.rows):
            i = f * args.rows + r
            ts = base + dt.timedelta(seconds=i * 13)
            lines.append(f"{i},customer_{rnd.randrange(5000)},{rnd.randrange(100000) / 100},{rnd.randrange(50)},{ts:%Y-%m-%d %H:%M:%S}")
        with open(f"{dir}/part-{f:05}.csv", "w") as out:
            out.write("\n".join(lines) + "\n")


def measured(cmd):
    t0 = time.perf_counter()
    p = subprocess.run(["/usr/bin/time", "-f", "%M"] + cmd, capture_output=True)
    secs = time.perf_counter() - t0
    out = p.stdout.decode()
    aborted_after_work = p.returncode in (-6, 134) and "wrote" in out
    if p.returncode != 0 and not aborted_after_work:
        raise SystemExit(f"failed: {cmd}\n{out}\n{p.stderr.decode()}")
    rss_kb = int(next(l for l in reversed(p.stderr.decode().strip().splitlines()) if l.strip().isdigit()))
    return secs, rss_kb / 1024, out


PEER = r'''
import os, sys, time, duckdb, pyarrow.parquet as pq
from deltalake import DeltaTable, Schema
from deltalake.transaction import AddAction, create_table_with_add_actions, CommitProperties
src, table = sys.argv[1], sys.argv[2]
os.makedirs(table, exist_ok=True)
name = "part-00000.parquet"
duckdb.sql(f"""COPY (SELECT * FROM read_csv('{src}/*.csv', header = true,
  columns = {{'id': 'BIGINT', 'customer': 'VARCHAR', 'amount': 'DOUBLE', 'qty': 'INTEGER', 'placed_at': 'TIMESTAMPTZ'}}))
  TO '{table}/{name}' (FORMAT parquet)""")
meta = pq.read_metadata(f"{table}/{name}")
add = AddAction(path=name, size=os.path.getsize(f"{table}/{name}"), partition_values={},
                modification_time=int(time.time() * 1000), data_change=True,
                stats='{"numRecords": %d}' % meta.num_rows)
create_table_with_add_actions(table, Schema.from_arrow(pq.read_schema(f"{table}/{name}")), [add], mode="append")
print("wrote", DeltaTable(table).version(), meta.num_rows)
'''

shutil.rmtree(W, ignore_errors=True)
os.makedirs(W)
src = f"{W}/drop"
gen(src)
size = sum(os.path.getsize(f"{src}/{f}") for f in os.listdir(src))
peer = f"{W}/peer.py"
open(peer, "w").write(PEER)
results = {}
for rep in range(args.reps):
    wh = f"{W}/wh{rep}"
    subprocess.run([TM, wh, "-c", f"CREATE TABLE main.default.orders ({COLUMNS})"], check=True, capture_output=True)
    secs, mb, out = measured([TM, wh, "--format", "csv", "-c",
                              f"COPY INTO orders FROM '{src}' FILEFORMAT = CSV FORMAT_OPTIONS ('header' = 'true')"])
    rows = int(out.splitlines()[1].split(",")[0])
    assert rows == args.files * args.rows, out
    results.setdefault("tidemark COPY INTO", []).append((secs, mb))
    secs, mb, out = measured([TM, wh, "--format", "csv", "-c",
                              f"COPY INTO orders FROM '{src}' FILEFORMAT = CSV FORMAT_OPTIONS ('header' = 'true')"])
    assert out.splitlines()[1].startswith("0,0,"), out
    results.setdefault("tidemark COPY INTO, run again (nothing new)", []).append((secs, mb))
    secs, mb, out = measured([py, peer, src, f"{W}/peer{rep}"])
    results.setdefault("DuckDB read_csv -> Parquet + deltalake commit", []).append((secs, mb))
    # The peer's table holds what tidemark's does.
    check = subprocess.run([TM, wh, "--format", "csv", "-c",
                            f"SELECT count(*), sum(qty) FROM orders"], capture_output=True, check=True).stdout.decode()
    assert check.splitlines()[1].startswith(str(args.files * args.rows)), check

base = statistics.median(s for s, _ in results["tidemark COPY INTO"])
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.processor())
lines = [
    "## Loading files (COPY INTO)",
    "",
    f"Written by `bench/files.py` on {dt.date.today()}: {os.cpu_count()} cores ({cpu}), Linux {platform.release()}.",
    f"{args.files} CSV files of {args.rows:,} rows each ({args.files * args.rows:,} rows, {size / 1e6:.0f} MB: id, customer, amount, qty, placed_at),",
    "loaded into a Delta table with those columns. Whole processes, median of "
    f"{args.reps} runs; tidemark is a release build. The peer is DuckDB's `COPY (SELECT * FROM read_csv(...))`",
    "into one Parquet file, then that file committed to a Delta table by Python `deltalake` (`create_table_with_add_actions`).",
    "",
    "| scenario | median time (s) | peak RSS (MB) | time vs tidemark |",
    "| --- | ---: | ---: | ---: |",
]
for tool, runs in results.items():
    t = statistics.median(s for s, _ in runs)
    m = statistics.median(m for _, m in runs)
    lines.append(f"| {tool} | {t:.3f} | {m:.0f} | {t / base:.1f}x |")
section = "\n".join(lines) + "\n"
print(section)
doc = open(args.out).read() if os.path.exists(args.out) else "# Benchmarks\n"
start = doc.find("## Loading files (COPY INTO)")
if start >= 0:
    end = doc.find("\n## ", start + 1)
    doc = doc[:start] + section + (doc[end + 1:] if end >= 0 else "")
else:
    doc = doc.rstrip("\n") + "\n\n" + section
open(args.out, "w").write(doc)
