"""Copying a PostgreSQL table into Delta: tidemark side by side with the peers a user would pick,
on the same table of a PostgreSQL server started here (127.0.0.1, throwaway data directory):

- full load: tidemark's COPY INCREMENTAL vs connectorx (read_sql to Arrow) + Python deltalake's
  write_deltalake, whole processes, median wall time and peak RSS;
- an increment of --increment rows: tidemark's next COPY INCREMENTAL vs dlt's sql_table with
  its incremental cursor on the same column (pyarrow backend, Delta on the filesystem), after
  each has loaded the table once.

Writes (or replaces) the "Copying from PostgreSQL" section of docs/benchmarks.md.

usage: python bench/databases.py TIDEMARK_BINARY WORKDIR [--rows 10000000] [--increment 10000] [--reps 3]
"""
import argparse, datetime as dt, glob, os, platform, shutil, socket, statistics, subprocess, sys, time

ap = argparse.ArgumentParser()
ap.add_argument("tidemark")
ap.add_argument("work")
ap.add_argument("--rows", type=int, default=10_000_000)
ap.add_argument("--increment", type=int, default=10_000)
ap.add_argument("--reps", type=int, default=3)
ap.add_argument("--out", default="docs/benchmarks.md")
args = ap.parse_args()
TM = os.path.abspath(args.tidemark)
W = os.path.abspath(args.work)
py = sys.executable
ROOT = os.geteuid() == 0
PASSWORD = "bench-pw"


def pg_bin(name):
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found[-1] if found else name


def as_postgres(cmd):
    return (["runuser", "-u", "postgres", "--"] if ROOT else []) + cmd


class Postgres:
    def __init__(self, dir):
        self.dir = dir
        os.makedirs(dir)
        if ROOT:
            subprocess.run(["chown", "-R", "postgres", dir], check=True)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        data = f"{dir}/data"
        subprocess.run(as_postgres([pg_bin("initdb"), "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8"]),
                       check=True, capture_output=True)
        with open(f"{data}/pg_hba.conf", "w") as f:
            f.write("local all all trust\nhost all all 127.0.0.1/32 scram-sha-256\n")
        opts = f"-c listen_addresses=127.0.0.1 -p {self.port} -k {dir} -c shared_buffers=256MB -c fsync=off"
        subprocess.run(as_postgres([pg_bin("pg_ctl"), "-D", data, "-l", f"{dir}/server.log", "-o", opts, "-w", "start"]),
                       check=True, capture_output=True)
        self.psql(f"CREATE ROLE shopper LOGIN PASSWORD '{PASSWORD}'", "postgres")
        self.psql("CREATE DATABASE shop OWNER shopper", "postgres")

    def psql(self, sql, db="shop"):
        subprocess.run(as_postgres([pg_bin("psql"), "-h", self.dir, "-p", str(self.port), "-U", "postgres", "-d", db,
                                    "-v", "ON_ERROR_STOP=1", "-q", "-c", sql]), check=True)

    def stop(self):
        subprocess.run(as_postgres([pg_bin("pg_ctl"), "-D", f"{self.dir}/data", "-m", "fast", "stop"]),
                       capture_output=True)


def measured(cmd, env=None):
    t0 = time.perf_counter()
    p = subprocess.run(["/usr/bin/time", "-f", "%M"] + cmd, capture_output=True, env=env)
    secs = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"failed: {cmd}\n{p.stdout.decode()}\n{p.stderr.decode()}")
    rss_kb = int(next(l for l in reversed(p.stderr.decode().strip().splitlines()) if l.strip().isdigit()))
    return secs, rss_kb / 1024, p.stdout.decode()


CONNECTORX = r'''
import sys, connectorx as cx
from deltalake import write_deltalake
url, target = sys.argv[1], sys.argv[2]
# connectorx's parallel read (its documented fast path): 4 connections, ranges of the key,
# as many as tidemark's read_connections.
table = cx.read_sql(url, "SELECT * FROM public.orders", return_type="arrow",
                    partition_on="id", partition_num=4)
write_deltalake(target, table, mode="append")
print("rows", table.num_rows)
'''

DLT = r'''
import sys, dlt
from dlt.sources.sql_database import sql_table
url, bucket = sys.argv[1].replace("postgresql://", "postgresql+psycopg2://"), sys.argv[2]
orders = sql_table(credentials=url, schema="public", table="orders", backend="pyarrow",
                   incremental=dlt.sources.incremental("updated_at"))
pipeline = dlt.pipeline(pipeline_name="bench", destination=dlt.destinations.filesystem(bucket_url=bucket),
                        dataset_name="lake", pipelines_dir=bucket + "/_pipelines")
info = pipeline.run(orders, table_format="delta")
print(info)
'''


def main():
    if os.path.exists(W):
        shutil.rmtree(W)
    os.makedirs(W)
    if ROOT:
        subprocess.run(["chmod", "755", W], check=True)
    pg = Postgres(f"{W}/pg")
    try:
        run(pg)
    finally:
        pg.stop()


def run(pg):
    n, inc = args.rows, args.increment
    print(f"loading {n:,} rows into PostgreSQL ...", flush=True)
    pg.psql(
        "CREATE TABLE public.orders (id bigint PRIMARY KEY, customer text, amount numeric(12,2), qty integer, "
        "updated_at timestamptz NOT NULL, note text); "
        f"INSERT INTO public.orders SELECT i, 'customer_' || (i % 5000), (i % 100000) / 100.0, i % 50, "
        f"timestamptz '2024-01-01 00:00:00+00' + i * interval '1 second', 'note ' || i FROM generate_series(1, {n}) i; "
        "CREATE INDEX ON public.orders (updated_at); ALTER TABLE public.orders OWNER TO shopper;")
    pg.psql("VACUUM ANALYZE public.orders")
    url = f"postgresql://shopper:{PASSWORD}@127.0.0.1:{pg.port}/shop"
    env = dict(os.environ, TIDEMARK_SECRET_SHOP_PG=PASSWORD, NO_COLOR="1")
    connect = [
        f"CREATE CONNECTION pg TYPE postgresql OPTIONS (host '127.0.0.1', port '{pg.port}', user 'shopper', "
        "password secret('shop', 'pg'), sslmode 'disable')",
        "CREATE FOREIGN CATALOG shop USING CONNECTION pg OPTIONS (database 'shop')",
    ]
    copy = "COPY INCREMENTAL shop.public.orders INTO orders WATERMARK updated_at"

    def tidemark(wh, *stmts):
        cmd = [TM, wh, "--format", "csv"]
        for s in stmts:
            cmd += ["-c", s]
        return cmd

    # The same copy read by one connection (read_connections '1'), for the split's worth.
    connect_one = [connect[0].replace("sslmode 'disable'", "sslmode 'disable', read_connections '1'"), connect[1]]
    full = {"tidemark": [], "tidemark_one": [], "connectorx": []}
    for rep in range(args.reps):
        wh = f"{W}/wh{rep}"
        subprocess.run(tidemark(wh, *connect), check=True, env=env, capture_output=True)
        secs, rss, out = measured(tidemark(wh, copy), env)
        assert f",{n}," in out, out
        full["tidemark"].append((secs, rss))
        one = f"{W}/one{rep}"
        subprocess.run(tidemark(one, *connect_one), check=True, env=env, capture_output=True)
        secs, rss, out = measured(tidemark(one, copy), env)
        assert f",{n}," in out, out
        full["tidemark_one"].append((secs, rss))
        shutil.rmtree(one)
        target = f"{W}/cx{rep}"
        secs, rss, out = measured([py, "-c", CONNECTORX, url, target])
        assert f"rows {n}" in out, out
        full["connectorx"].append((secs, rss))
        print(f"full load rep {rep}: tidemark {full['tidemark'][-1]}, one connection {full['tidemark_one'][-1]}, connectorx {full['connectorx'][-1]}", flush=True)

    # dlt loads the table once (its state then holds the cursor), like tidemark's first run.
    bucket = f"{W}/dlt"
    secs, rss, out = measured([py, "-c", DLT, url, bucket])
    print(f"dlt first load: {secs:.1f} s, {rss:.0f} MiB", flush=True)
    dlt_first = (secs, rss)

    increment = {"tidemark": [], "dlt": []}
    wh = f"{W}/wh0"
    for rep in range(args.reps):
        start = n + rep * inc
        pg.psql(
            f"INSERT INTO public.orders SELECT i, 'customer_' || (i % 5000), (i % 100000) / 100.0, i % 50, "
            f"timestamptz '2024-01-01 00:00:00+00' + i * interval '1 second', 'note ' || i "
            f"FROM generate_series({start + 1}, {start + inc}) i")
        secs, rss, out = measured(tidemark(wh, copy), env)
        assert f",{inc}," in out, out
        increment["tidemark"].append((secs, rss))
        secs, rss, out = measured([py, "-c", DLT, url, bucket])
        increment["dlt"].append((secs, rss))
        print(f"increment rep {rep}: tidemark {increment['tidemark'][-1]}, dlt {increment['dlt'][-1]}", flush=True)
    count = subprocess.run(tidemark(wh, "SELECT count(*), count(DISTINCT id) FROM orders"), env=env,
                           capture_output=True, check=True).stdout.decode()
    expected = n + args.reps * inc
    assert f"{expected},{expected}" in count, count
    report(full, increment, dlt_first)


def med(xs, i):
    return statistics.median(x[i] for x in xs)


def report(full, increment, dlt_first):
    n, inc = args.rows, args.increment
    t, c, o = full["tidemark"], full["connectorx"], full["tidemark_one"]
    it, d = increment["tidemark"], increment["dlt"]
    when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.machine())
    version = subprocess.run(as_postgres([pg_bin("postgres"), "--version"]), capture_output=True).stdout.decode().strip()
    lines = [
        "## Copying from PostgreSQL",
        "",
        f"`bench/databases.py` (in `bench/run.sh`), {when}, {os.cpu_count()} cores ({cpu}), release build, "
        f"{version} on 127.0.0.1, a table of {n:,} rows (bigint key, text, numeric(12,2), integer, "
        f"timestamptz watermark, text); median of {args.reps}, whole processes, peak RSS from `/usr/bin/time`.",
        "",
        "| work | tidemark | peer | ratio |",
        "|---|---|---|---|",
        f"| full load, wall | {med(t, 0):.2f} s | connectorx + deltalake {med(c, 0):.2f} s | {med(c, 0) / med(t, 0):.2f}x |",
        f"| full load, peak RSS | {med(t, 1):.0f} MiB | {med(c, 1):.0f} MiB | {med(t, 1) / med(c, 1):.2f} of the peer's |",
        f"| full load, one connection (`read_connections '1'`), wall | {med(o, 0):.2f} s | | {med(o, 0) / med(t, 0):.2f}x the default's |",
        f"| full load, one connection, peak RSS | {med(o, 1):.0f} MiB | | |",
        f"| {inc:,}-row increment, wall | {med(it, 0):.2f} s | dlt incremental cursor {med(d, 0):.2f} s | {med(d, 0) / med(it, 0):.1f}x |",
        f"| {inc:,}-row increment, peak RSS | {med(it, 1):.0f} MiB | {med(d, 1):.0f} MiB | |",
        "",
        f"dlt's first load of the table (pyarrow backend, Delta on the filesystem) took {dlt_first[0]:.1f} s at "
        f"{dlt_first[1]:.0f} MiB. tidemark reads the table over 4 connections (`read_connections`' default), "
        "each a range of its pages, in one exported snapshot; the server runs on the same two cores. Goals (issue 18): the full load at least as fast as connectorx at no more than half "
        "its memory; the increment at least 10x faster than dlt.",
        "",
    ]
    section = "\n".join(lines)
    doc = open(args.out).read() if os.path.exists(args.out) else "# Benchmarks\n\n"
    start = doc.find("## Copying from PostgreSQL")
    if start >= 0:
        end = doc.find("\n## ", start + 1)
        doc = doc[:start] + section + (doc[end + 1:] if end >= 0 else "")
    else:
        doc = doc.rstrip("\n") + "\n\n" + section
    open(args.out, "w").write(doc)
    print(section)


main()
