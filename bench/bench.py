"""tidemark's benchmark: the ../shared/bench workload, tidemark and its peers side by side in
one run, whole processes, median wall time and peak RSS. Writes docs/benchmarks.md.

usage: python bench/bench.py TIDEMARK_BINARY SHARED_BENCH_DIR WORKDIR [--reps N] [--quick]
"""
import argparse, datetime as dt, os, platform, shlex, shutil, statistics, subprocess, sys, time

ap = argparse.ArgumentParser()
ap.add_argument("tidemark")
ap.add_argument("shared")
ap.add_argument("work")
ap.add_argument("--reps", type=int, default=3)
ap.add_argument("--quick", action="store_true", help="1M-row big source instead of 10M (smoke run)")
ap.add_argument("--out", default="docs/benchmarks.md")
ap.add_argument("--print-only", action="store_true", help="only the result-printing scenario (6)")
args = ap.parse_args()
py = sys.executable
TM = os.path.abspath(args.tidemark)
SH = os.path.abspath(args.shared)
W = os.path.abspath(args.work)
BIG = 1_000_000 if args.quick else 10_000_000
BIG_NAME = "src1m" if args.quick else "src10m"


def measured(cmd):
    """Run under /usr/bin/time for peak RSS. Returns (seconds, MB, stdout)."""
    t0 = time.perf_counter()
    p = subprocess.run(["/usr/bin/time", "-f", "%M"] + cmd, capture_output=True)
    secs = time.perf_counter() - t0
    out = p.stdout.decode()
    # Python's deltalake may abort at interpreter exit after finishing its work.
    aborted_after_work = p.returncode in (-6, 134) and ("copied" in out or "wrote" in out)
    if p.returncode != 0 and not aborted_after_work:
        raise SystemExit(f"failed: {cmd}\n{out}\n{p.stderr.decode()}")
    rss_kb = int(next(l for l in reversed(p.stderr.decode().strip().splitlines()) if l.strip().isdigit()))
    return secs, rss_kb / 1024, p.stdout.decode()


def tm(wh, sql, *flags):
    return [TM, wh, "--format", "csv", *flags, "-c", sql]


def gen(path, rows, files, start=0):
    p = subprocess.run([py, f"{SH}/gen_source.py", path, str(rows), str(files), str(start)], capture_output=True)
    if p.returncode != 0 and b"wrote" not in p.stdout:
        raise SystemExit(f"gen_source failed: {p.stderr.decode()}")


results = {}  # scenario -> tool -> list of (secs, mb)


def record(scenario, tool, secs, mb):
    results.setdefault(scenario, {}).setdefault(tool, []).append((secs, mb))


def last_copy_files(table_path):
    """(whole, decoded) source files of the newest tidemark commit of a target."""
    import json
    log = os.path.join(table_path, "_delta_log")
    newest = max(f for f in os.listdir(log) if f.endswith(".json"))
    for line in open(os.path.join(log, newest)):
        info = json.loads(line).get("commitInfo")
        if info and "tidemark" in info:
            meta = info["tidemark"]
            return meta.get("whole_files"), meta.get("decoded_files")
    return None, None


files_read = {}  # source name -> (source files, whole, decoded) of the last increment


def parquet_size(path):
    return sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path) if f.endswith(".parquet"))


shutil.rmtree(W, ignore_errors=True)
wh = f"{W}/wh"
os.makedirs(f"{wh}/main/bench")
src_big = f"{wh}/main/bench/{BIG_NAME}"
src_small = f"{wh}/main/bench/src100k"
print(f"generating {BIG_NAME} and src100k ...", flush=True)
gen(src_big, BIG, 100)
gen(src_small, 100_000, 10)
big_rows, small_rows = BIG, 100_000

# 6. Printing a result holds no more memory for ten times the rows: SELECT * of a tenth and
# of the whole big source, as a table and as CSV, to a file (not a terminal).
def printed(sql, fmt):
    cmd = " ".join(["exec", TM, wh, "--format", fmt, "-c", shlex.quote(sql), "> /dev/null"])
    return measured(["sh", "-c", cmd])


for rows in [BIG // 10, BIG]:
    for fmt in ["table", "csv"]:
        for rep in range(args.reps):
            s, mb, _ = printed(f"SELECT * FROM main.bench.{BIG_NAME} LIMIT {rows}", fmt)
            record(f"print a result ({fmt}) by row count", f"tidemark, {rows:,} rows", s, mb)

if not args.print_only:
    # 1. Full load into an empty target: whole-file copies vs the decode path vs peers.
    for rep in range(args.reps):
        for d in ["cp", "tm", "tmdec", "pl", "duck"]:
            shutil.rmtree(f"{W}/{d}", ignore_errors=True)
        os.makedirs(f"{W}/cp")
        files = [f"{src_big}/{f}" for f in os.listdir(src_big) if f.endswith(".parquet")]
        s, mb, _ = measured(["cp", *files, f"{W}/cp/"])
        record("full load", "cp (physical floor)", s, mb)
        s, mb, _ = measured(tm(wh, f"COPY INCREMENTAL main.bench.{BIG_NAME} INTO main.bench.full_{rep} WATERMARK created_at"))
        record("full load", "tidemark", s, mb)
        s, mb, _ = measured(tm(wh, f"COPY INCREMENTAL main.bench.{BIG_NAME} INTO main.bench.dec_{rep} WATERMARK created_at", "--no-whole-file-copies"))
        record("full load (decode path)", "tidemark --no-whole-file-copies", s, mb)
        s, mb, _ = measured([py, f"{SH}/peer_polars.py", src_big, f"{W}/pl", f"{W}/pl.state"])
        record("full load", "polars peer", s, mb)
        record("full load (decode path)", "polars peer", s, mb)
        os.remove(f"{W}/pl.state")
        s, mb, _ = measured([py, f"{SH}/peer_duckdb_parquet.py", src_big, f"{W}/duck.parquet", "1970-01-01 00:00:00+00"])
        record("full load", "duckdb parquet->parquet", s, mb)
        for t in [f"full_{rep}", f"dec_{rep}"]:
            shutil.rmtree(f"{wh}/main/bench/{t}", ignore_errors=True)

    # 1b. The decode path's memory does not grow with the rows: a tenth, the same and twice the
    # big source, decoded whole.
    for rows in [BIG // 10, BIG, 2 * BIG]:
        src = f"{wh}/main/bench/mem_{rows}"
        gen(src, rows, max(1, rows // 100_000))
        for rep in range(args.reps):
            shutil.rmtree(f"{wh}/main/bench/mem_dec", ignore_errors=True)
            s, mb, _ = measured(tm(wh, f"COPY INCREMENTAL main.bench.mem_{rows} INTO main.bench.mem_dec WATERMARK created_at", "--no-whole-file-copies"))
            record("decode path by source size", f"tidemark, {rows:,} rows", s, mb)
        shutil.rmtree(src, ignore_errors=True)
    shutil.rmtree(f"{wh}/main/bench/mem_dec", ignore_errors=True)

    # 2. Increments of 10,000 rows and "nothing new", on both source sizes.
    for name, path, rows in [(BIG_NAME, src_big, big_rows), ("src100k", src_small, small_rows)]:
        tgt = f"inc_{name}"
        subprocess.run(tm(wh, f"COPY INCREMENTAL main.bench.{name} INTO main.bench.{tgt} WATERMARK created_at"), check=True, capture_output=True)
        shutil.rmtree(f"{W}/pl_{name}", ignore_errors=True)
        state = f"{W}/pl_{name}.state"
        if os.path.exists(state):
            os.remove(state)
        subprocess.run([py, f"{SH}/peer_polars.py", path, f"{W}/pl_{name}", state], check=True, capture_output=True)
        for rep in range(args.reps):
            gen(path, 10_000, 1, rows)
            rows += 10_000
            s, mb, out = measured(tm(wh, f"COPY INCREMENTAL main.bench.{name} INTO main.bench.{tgt} WATERMARK created_at"))
            assert ",10000,0," in out, out
            record(f"increment of 10,000 rows ({name})", "tidemark", s, mb)
            whole, decoded = last_copy_files(f"{wh}/main/bench/{tgt}")
            n_files = sum(1 for f in os.listdir(path) if f.endswith(".parquet"))
            files_read[name] = (n_files, whole, decoded)
            s, mb, out = measured([py, f"{SH}/peer_polars.py", path, f"{W}/pl_{name}", state])
            record(f"increment of 10,000 rows ({name})", "polars peer", s, mb)
            s, mb, out = measured(tm(wh, f"COPY INCREMENTAL main.bench.{name} INTO main.bench.{tgt} WATERMARK created_at"))
            assert ",0,0," in out, out
            record(f"nothing new ({name})", "tidemark", s, mb)
            s, mb, out = measured([py, f"{SH}/peer_polars.py", path, f"{W}/pl_{name}", state])
            record(f"nothing new ({name})", "polars peer", s, mb)

    # 3. The job over 100 small tables: nothing new, then 10,000 new rows in each.
    jobs = f"{W}/jobs"
    os.makedirs(f"{jobs}/main/src")
    ctl = ["CREATE SCHEMA main.dst", "CREATE TABLE main.src.ctl (source_table STRING NOT NULL, target_table STRING NOT NULL, watermark_column STRING NOT NULL, last_watermark TIMESTAMP NOT NULL)"]
    values = []
    for i in range(100):
        gen(f"{jobs}/main/src/t{i}", 10_000, 2)
        values.append(f"('main.src.t{i}', 'main.dst.t{i}', 'created_at', '1970-01-01')")
    ctl.append("INSERT INTO main.src.ctl VALUES " + ", ".join(values))
    ctl_args = [TM, jobs, "--format", "csv"]
    for s_ in ctl:
        ctl_args += ["-c", s_]
    subprocess.run(ctl_args, check=True, capture_output=True)
    os.makedirs(f"{W}/pljob", exist_ok=True)
    JOB = "COPY INCREMENTAL USING CONTROL TABLE main.src.ctl CONCURRENCY 8"
    subprocess.run(tm(jobs, JOB), check=True, capture_output=True)
    for i in range(100):
        subprocess.run([py, f"{SH}/peer_polars.py", f"{jobs}/main/src/t{i}", f"{W}/pljob/t{i}", f"{W}/pljob/t{i}.state"], check=True, capture_output=True)


    def polars_job():
        t0 = time.perf_counter()
        peak = 0
        for i in range(100):
            _, mb, _ = measured([py, f"{SH}/peer_polars.py", f"{jobs}/main/src/t{i}", f"{W}/pljob/t{i}", f"{W}/pljob/t{i}.state"])
            peak = max(peak, mb)
        return time.perf_counter() - t0, peak


    job_rows = 10_000
    for rep in range(min(args.reps, 2)):
        s, mb, _ = measured(tm(jobs, JOB))
        record("job over 100 tables, nothing new", "tidemark (one statement, CONCURRENCY 8)", s, mb)
        s, mb = polars_job()
        record("job over 100 tables, nothing new", "100 runs of the polars peer", s, mb)
        for i in range(100):
            gen(f"{jobs}/main/src/t{i}", 10_000, 1, job_rows)
        job_rows += 10_000
        s, mb, out = measured(tm(jobs, JOB))
        assert out.count(",succeeded,") == 100 and out.count(",10000,") == 100, out
        record("job over 100 tables, 10,000 new rows each", "tidemark (one statement, CONCURRENCY 8)", s, mb)
        s, mb = polars_job()
        record("job over 100 tables, 10,000 new rows each", "100 runs of the polars peer", s, mb)

    # 4. Staying fast as runs accumulate: the control table after N watermark advances.
    acc = f"{W}/acc"
    os.makedirs(f"{acc}/main/src")
    gen(f"{acc}/main/src/s", 10_000, 1)
    setup = [TM, acc, "--format", "csv",
             "-c", "CREATE TABLE main.src.ctl (source_table STRING NOT NULL, target_table STRING NOT NULL, watermark_column STRING NOT NULL, last_watermark TIMESTAMP NOT NULL, n BIGINT)",
             "-c", "INSERT INTO main.src.ctl VALUES ('main.src.s', 'main.src.t', 'created_at', '1970-01-01', 0)",
             "-c", "COPY INCREMENTAL USING CONTROL TABLE main.src.ctl"]
    subprocess.run(setup, check=True, capture_output=True)
    done = 1
    acc_rows = 10_000
    ADVANCES = int(os.environ.get("TIDEMARK_BENCH_ADVANCES", "10000"))
    for n in [10, ADVANCES]:
        todo = n - done
        if todo > 0:
            # Each iteration is one commit of the control table, like one watermark advance.
            loop = f"FOR SELECT * FROM range({todo}) DO UPDATE main.src.ctl SET n = n + 1, last_watermark = last_watermark; END FOR"
            t0 = time.perf_counter()
            subprocess.run([TM, acc, "-q", "-c", loop], check=True, capture_output=True)
            print(f"{todo} advances took {time.perf_counter() - t0:.1f}s", flush=True)
            done = n
        for rep in range(args.reps):
            s_, mb, _ = measured(tm(acc, "SELECT * FROM main.src.ctl"))
            record(f"read the control table after {n:,} advances", "tidemark", s_, mb)
            s_, mb, _ = measured(tm(acc, "COPY INCREMENTAL USING CONTROL TABLE main.src.ctl"))
            record(f"job (nothing new) after {n:,} advances", "tidemark", s_, mb)
            # The same job with 10 new rows: a copy commit and a control-table advance.
            gen(f"{acc}/main/src/s", 10, 1, acc_rows)
            acc_rows += 10
            s_, mb, out = measured(tm(acc, "COPY INCREMENTAL USING CONTROL TABLE main.src.ctl"))
            assert ",succeeded," in out, out
            record(f"job (10 new rows) after {n:,} advances", "tidemark", s_, mb)
    log_files = len(os.listdir(f"{acc}/main/src/ctl/_delta_log"))

    # 5. Start-up does not scan the warehouse: SELECT 1 with no tables and with 1,000.
    empty = f"{W}/empty"
    many = f"{W}/many"
    script = "".join(f"CREATE TABLE t{i} (id BIGINT);\n" for i in range(1000))
    subprocess.run([TM, many, "-q"], input=script.encode(), check=True, capture_output=True)
    for rep in range(args.reps):
        s_, mb, _ = measured(tm(empty, "SELECT 1"))
        record("start-up: SELECT 1", "tidemark, empty warehouse", s_, mb)
        s_, mb, _ = measured(tm(many, "SELECT 1"))
        record("start-up: SELECT 1", "tidemark, 1,000 tables", s_, mb)

# Report.
cpu = "unknown"
try:
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
except OSError:
    pass
mem_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
lines = [
    "# Benchmarks",
    "",
    f"Written by `bench/run.sh` on {dt.date.today().isoformat()}: {os.cpu_count()} cores ({cpu}), {mem_gb:.0f} GiB RAM, {platform.system()} {platform.release()}.",
    f"Workload from `../shared/bench/` ({BIG_NAME} = {BIG:,} rows in 100 commits, src100k = 100,000 rows in 10 commits, increments of 10,000 rows in 1 commit).",
    f"Every figure is a whole process (start-up included), median of {args.reps} runs; memory is peak RSS. tidemark is a release build.",
    "",
    "| scenario | tool | median time (s) | peak RSS (MB) | time vs tidemark |",
    "| --- | --- | ---: | ---: | ---: |",
]
for scenario, tools in results.items():
    tm_key = next((k for k in tools if k.startswith("tidemark")), None)
    base = statistics.median(t for t, _ in tools[tm_key]) if tm_key else None
    for tool, runs in tools.items():
        t = statistics.median(x for x, _ in runs)
        m = statistics.median(x for _, x in runs)
        ratio = f"{t / base:.1f}x" if base else ""
        lines.append(f"| {scenario} | {tool} | {t:.3f} | {m:.0f} | {ratio} |")
lines += [""] + [
    f"Increment of {name}: of the source's {n} Parquet files, {w} copied whole (not decoded) and {d} decoded; the others were skipped on their statistics."
    for name, (n, w, d) in files_read.items()
]
if not args.print_only:
    lines += ["", f"Source size on disk: {BIG_NAME} {parquet_size(src_big) / 2**20:.0f} MB of Parquet.",
          f"The control table's `_delta_log` held {log_files} files after {ADVANCES:,} advances (tidemark checkpoints it every 10 commits, with the removed-file tombstones, kept for the 7-day `delta.deletedFileRetentionDuration`, in row groups readers skip; log files stay for the table's 30-day `delta.logRetentionDuration`, and opening the table finds the few after the checkpoint by name instead of reading the directory).", ""]
report = "\n".join(lines)
print(report)
os.makedirs(os.path.dirname(args.out), exist_ok=True)
with open(args.out, "w") as f:
    f.write(report)
