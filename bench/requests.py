"""Requests and bytes on the wire: tidemark and the polars peer copying the benchmark source on
an S3-compatible store (moto's server on 127.0.0.1), each request counted by a proxy in front
of it. Prints a Markdown table (for docs/benchmarks.md).

usage: requests.py TIDEMARK SHARED_BENCH_DIR WORK_DIR [ROWS]

The source is gen_source.py's table (ROWS rows, default 100,000, in 10 commits) uploaded to
s3://lake/src; the increment is 10,000 rows in one commit. Scenarios, each one process:
a full load, a run with nothing new, a 10,000-row increment. tidemark's target is in a
catalog with a MANAGED LOCATION on the same store; the peer writes s3://lake/peer.
"""
import http.client
import http.server
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections import Counter

import boto3

tidemark, shared, work = sys.argv[1], sys.argv[2], sys.argv[3]
rows = int(sys.argv[4]) if len(sys.argv) > 4 else 100_000
python = sys.executable


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


moto_port = free_port()
moto = subprocess.Popen(
    [python, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(moto_port)],
    stdout=subprocess.DEVNULL,
    stderr=subprocess.DEVNULL,
)
for _ in range(600):
    try:
        socket.create_connection(("127.0.0.1", moto_port)).close()
        break
    except OSError:
        time.sleep(0.1)
direct = f"http://127.0.0.1:{moto_port}"

log = []
lock = threading.Lock()


class Counting(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def go(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else None
        c = http.client.HTTPConnection("127.0.0.1", moto_port)
        c.request(self.command, self.path, body=body, headers=dict(self.headers.items()))
        r = c.getresponse()
        data = r.read()
        kind = self.command
        if self.command == "GET" and ("list-type=" in self.path or self.path.rstrip("/").count("/") <= 1):
            kind = "LIST"
        with lock:
            log.append((kind, n, len(data) if self.command != "HEAD" else 0, self.path))
        self.send_response(r.status)
        for k, v in r.getheaders():
            if k.lower() not in ("transfer-encoding", "content-length", "connection"):
                self.send_header(k, v)
        # A HEAD answers with the object's length (and no body).
        length = r.getheader("Content-Length", "0") if self.command == "HEAD" else str(len(data))
        self.send_header("Content-Length", length)
        self.end_headers()
        if self.command != "HEAD":
            try:
                self.wfile.write(data)
            except BrokenPipeError:
                pass

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = go


proxy_port = free_port()
server = http.server.ThreadingHTTPServer(("127.0.0.1", proxy_port), Counting)
threading.Thread(target=server.serve_forever, daemon=True).start()
proxied = f"http://127.0.0.1:{proxy_port}"

creds = {
    "AWS_ACCESS_KEY_ID": "test",
    "AWS_SECRET_ACCESS_KEY": "test",
    "AWS_REGION": "us-east-1",
    "AWS_ALLOW_HTTP": "true",
}
s3 = boto3.client("s3", endpoint_url=direct, aws_access_key_id="test",
                  aws_secret_access_key="test", region_name="us-east-1")
s3.create_bucket(Bucket="lake")

shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
local_src = os.path.join(work, "src")
subprocess.run([python, os.path.join(shared, "gen_source.py"), local_src, str(rows), "10"],
               check=True, stdout=subprocess.DEVNULL)
data_bytes = 0
for root, _, files in os.walk(local_src):
    for f in files:
        p = os.path.join(root, f)
        key = "src/" + os.path.relpath(p, local_src)
        s3.upload_file(p, "lake", key)
        if f.endswith(".parquet"):
            data_bytes += os.path.getsize(p)


def increment():
    """10,000 rows appended to the source in one commit (straight to the store)."""
    inc = os.path.join(work, "inc")
    subprocess.run([python, os.path.join(shared, "gen_source.py"), inc, "10000", "1", str(rows)],
                   check=True, stdout=subprocess.DEVNULL)
    import deltalake
    t = deltalake.DeltaTable(inc).to_pyarrow_table()
    deltalake.write_deltalake("s3://lake/src", t, mode="append",
                              storage_options={"AWS_ENDPOINT_URL": direct, **creds})
    shutil.rmtree(inc)


def counted(run):
    with lock:
        start = len(log)
    t0 = time.perf_counter()
    run()
    elapsed = time.perf_counter() - t0
    with lock:
        part = log[start:]
    kinds = Counter(k for k, _, _, _ in part)
    if os.environ.get("REQUESTS_DETAIL"):
        for k, _, _, path in part:
            print("   ", k, path, file=sys.stderr)
        print("  ---", file=sys.stderr)
    return {
        "requests": len(part),
        "kinds": ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())),
        "up": sum(u for _, u, _, _ in part),
        "down": sum(d for _, _, d, _ in part),
        "seconds": elapsed,
    }


wh = os.path.join(work, "wh")
env = dict(os.environ, AWS_ENDPOINT_URL=proxied, **creds)


def tm(*sql, warehouse=None):
    args = [tidemark, warehouse or wh, "-q"]
    for s in sql:
        args += ["-c", s]
    subprocess.run(args, env=env, check=True, stdout=subprocess.DEVNULL)


tm("CREATE TABLE src LOCATION 's3://lake/src'", "CREATE CATALOG lake MANAGED LOCATION 's3://lake/wh'")
copy = "COPY INCREMENTAL src INTO lake.default.dst WATERMARK created_at"

peer_code = f"""
import os, sys, datetime as dt, polars as pl
opts = {{'AWS_ENDPOINT_URL': '{proxied}', **{creds!r}}}
state = {os.path.join(work, 'peer.state')!r}
wm = open(state).read().strip() if os.path.exists(state) else '1970-01-01T00:00:00+00:00'
new = pl.scan_delta('s3://lake/src', storage_options=opts).filter(pl.col('created_at') > dt.datetime.fromisoformat(wm)).collect()
if new.height:
    new.write_delta('s3://lake/peer', mode='append', storage_options=opts)
    open(state, 'w').write(new['created_at'].max().isoformat())
"""


def peer():
    subprocess.run([python, "-c", peer_code], check=True)


# The same copy with the whole warehouse on the store (its names, history and target).
on_store = "s3://lake/whole"
tm("CREATE TABLE src LOCATION 's3://lake/src'", warehouse=on_store)
store_copy = "COPY INCREMENTAL src INTO dst WATERMARK created_at"


def tm_store():
    tm(store_copy, warehouse=on_store)


results = []
results.append(("full load", "tidemark", counted(lambda: tm(copy))))
results.append(("full load", "tidemark, warehouse on S3", counted(tm_store)))
results.append(("full load", "polars peer", counted(peer)))
results.append(("nothing new", "tidemark", counted(lambda: tm(copy))))
results.append(("nothing new", "tidemark, warehouse on S3", counted(tm_store)))
results.append(("nothing new", "polars peer", counted(peer)))
increment()
results.append(("10,000-row increment", "tidemark", counted(lambda: tm(copy))))
results.append(("10,000-row increment", "tidemark, warehouse on S3", counted(tm_store)))
results.append(("10,000-row increment", "polars peer", counted(peer)))
# Steady state: the history grows by one commit a run and is checkpointed every 10 commits,
# so a no-op run's cost depends on where in that cycle it falls. Twenty more no-op runs.
steady = [counted(tm_store) for _ in range(int(os.environ.get("STEADY_RUNS", "20")))]

print(f"Source: {rows:,} rows in 10 commits ({data_bytes / 1e6:.1f} MB of Parquet) on moto's S3 server; "
      f"tidemark's target and the peer's on the same store.\n")
print("| run | tool | requests | by kind | bytes up | bytes down |")
print("| --- | --- | ---: | --- | ---: | ---: |")
for run, tool, r in results:
    print(f"| {run} | {tool} | {r['requests']} | {r['kinds']} | {r['up']:,} | {r['down']:,} |")
if steady:
    counts = [r["requests"] for r in steady]
    print(f"\nWarehouse on S3, {len(counts)} more runs with nothing new: requests "
          f"min {min(counts)}, mean {sum(counts) / len(counts):.1f}, max {max(counts)} "
          f"({', '.join(map(str, counts))}).")

server.shutdown()
moto.terminate()
moto.wait()
