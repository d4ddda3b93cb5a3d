"""The job's cost per table as the control table grows: N source tables of 100 rows (Python
`deltalake` writes them), one control table, and `COPY INCREMENTAL USING CONTROL TABLE ...
CONCURRENCY 8` timed with nothing new and with 10 new rows in every source. Prints a Markdown
table (for docs/benchmarks.md).

usage: job_scale.py TIDEMARK WORK_DIR N [N ...]
"""
import datetime as dt
import os
import shutil
import subprocess
import sys
import time

import deltalake
import pyarrow as pa

tidemark, work, sizes = sys.argv[1], sys.argv[2], [int(n) for n in sys.argv[3:]]
JOB = "COPY INCREMENTAL USING CONTROL TABLE main.src.ctl CONCURRENCY 8"
base = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)


def batch(start, n):
    ids = list(range(start, start + n))
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "created_at": pa.array([base + dt.timedelta(seconds=i) for i in ids], pa.timestamp("us", tz="UTC")),
        "v": pa.array([f"v{i}" for i in ids]),
    })


def tm(wh, *sql):
    args = [tidemark, wh, "--format", "csv"]
    for s in sql:
        args += ["-c", s]
    t0 = time.perf_counter()
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    return time.perf_counter() - t0, out


rows = []
for n in sizes:
    wh = os.path.join(work, f"wh{n}")
    shutil.rmtree(wh, ignore_errors=True)
    for i in range(n):
        deltalake.write_deltalake(f"{wh}/main/src/t{i}", batch(0, 100))
    values = ", ".join(f"('main.src.t{i}', 'main.dst.t{i}', 'created_at', TIMESTAMP '1970-01-01 00:00:00Z')" for i in range(n))
    setup = os.path.join(work, f"setup{n}.sql")
    with open(setup, "w") as f:
        f.write("CREATE SCHEMA main.dst;\n"
                "CREATE TABLE main.src.ctl (source_table STRING NOT NULL, target_table STRING NOT NULL, watermark_column STRING NOT NULL, last_watermark TIMESTAMP NOT NULL);\n"
                f"INSERT INTO main.src.ctl VALUES {values};\n")
    subprocess.run([tidemark, wh, "-q", "-f", setup], check=True, capture_output=True)
    full, out = tm(wh, JOB)
    assert out.count(",succeeded") == n, out[-2000:]
    noop = min(tm(wh, JOB)[0] for _ in range(3))
    for i in range(n):
        deltalake.write_deltalake(f"{wh}/main/src/t{i}", batch(100, 10), mode="append")
    inc, out = tm(wh, JOB)
    assert out.count(",succeeded,") == n and out.count(",10,") >= n, out[-2000:]
    rows.append((n, full, noop, inc))
    print(f"{n} tables: full {full:.2f}s, nothing new {noop:.2f}s, 10 new rows each {inc:.2f}s", file=sys.stderr)

print("| tables | first run (100 rows each) | nothing new | 10 new rows each |")
print("| ---: | ---: | ---: | ---: |")
for n, full, noop, inc in rows:
    print(f"| {n:,} | {full:.2f} s | {noop:.2f} s | {inc:.2f} s |")
