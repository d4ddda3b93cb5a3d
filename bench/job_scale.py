"""The job's cost per table as the control table grows: N source tables of 100 rows (Python
`deltalake` writes them), one control table, and `COPY INCREMENTAL USING CONTROL TABLE ...
CONCURRENCY 8` timed as whole processes: the first run, three runs with nothing new, and a
run with 10 new rows in every source. Prints a Markdown table (for docs/benchmarks.md) with
the wall time and the CPU time (user + system) of each run.

usage: job_scale.py TIDEMARK WORK_DIR ROUNDS N [N ...] [--small-reps K] [--large-reps K] [--mean]
       (ROUNDS 0: the set-up only; --small-reps K: within each round the smallest of several
       N runs K times on fresh copies and counts as the median of those (K odd; the mean with
       --mean), since its short runs spread most and dominate the per-round ratios;
       --large-reps K: the same for every other N (and for a lone N), whose runs spread too:
       the same 10,000-table first run took 13.7 to 32.7 s within six minutes here, cause not
       found; --mean: each round's figure per size is the mean of its repetitions, not their
       median, see below)

With --mean and as many runs of the small size as take as long as one run of the large
(--small-reps 10 for 1,000 against 10,000 tables), both sizes spend about the same time on
the machine in each round, each size's runs centred on the round, so that a steady drift of
the machine's speed over a round affects both sizes alike on average (a slow spell shorter
than one large run still falls on one size only). The reasoning (a hypothesis, neither shown
nor ruled out so far: docs/benchmarks.md) is that on a machine whose speed changes for
minutes at a time, most short runs may fall between its slow spells while every long run
meets some, so that the median's ratio would overstate the larger size's cost and the mean's
would not.

With two sizes it also prints the ratio of the larger size's mean to the smaller's over all
rounds, with a 95% interval from resampling the rounds. For every size of 11 tables or more
it prints the pace of its first runs and increments: milliseconds per table in each tenth of
a run, from the times the targets' commits were written, from the first commit to the last
(a cost per table that grows with the control table or with the run's progress shows there,
apart from start-up).

The sources are written once per N (WORK_DIR/srcN) with their 10 new rows written beside
them (WORK_DIR/moreN), so a round costs only tidemark's runs. Each round copies the set-up
into a new directory and deletes nothing until every round is done: a warehouse of 10,000
tables deleted just before a run makes ext4 search past the freed inodes for every file the
run creates (see docs/benchmarks.md). Within a round each size's repetitions are spread
evenly over its order of runs (the k-th of K at (k - 0.5) / K: with 10 and 1, five
1,000-table runs, the 10,000-table run, five more; with equal K the sizes take turns), so a
slow spell of the machine tends to fall on all of them. A warehouse directory left by an
interrupted run stops the script (remove it, then wait a few minutes before timing
anything).
"""
import csv
import datetime as dt
import io
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import time

import deltalake
import pyarrow as pa

args = sys.argv[1:]


def option(name):
    if name not in args:
        return 1
    i = args.index(name)
    value = int(args[i + 1])
    del args[i:i + 2]
    return value


small_reps, large_reps = option("--small-reps"), option("--large-reps")
by_mean = "--mean" in args
args = [a for a in args if a != "--mean"]
tidemark, work = args[0], args[1]
rounds, sizes = int(args[2]), [int(n) for n in args[3:]]
JOB = "COPY INCREMENTAL USING CONTROL TABLE main.src.ctl CONCURRENCY 8"
base = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)


def batch(start, n):
    ids = list(range(start, start + n))
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "created_at": pa.array([base + dt.timedelta(seconds=i) for i in ids], pa.timestamp("us", tz="UTC")),
        "v": pa.array([f"v{i}" for i in ids]),
    })


def cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def tm(wh, *sql):
    """One whole tidemark process: (wall seconds, CPU seconds, stdout)."""
    args = [tidemark, wh, "--format", "csv"]
    for s in sql:
        args += ["-c", s]
    c0, t0 = cpu(), time.perf_counter()
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    return time.perf_counter() - t0, cpu() - c0, out


def pace(wh, n, version):
    """Milliseconds per table in each tenth of a run, from the times its targets' commits at
    `version` were written (the run's tables in the order they finished)."""
    if n <= 10:
        return None
    log = f"_delta_log/{version:020}.json"
    times = sorted(os.stat(os.path.join(wh, "main", "dst", f"t{i}", log)).st_mtime_ns for i in range(n))
    # The n - 1 intervals between the first commit and the last, cut into ten.
    cut = [round(k * (n - 1) / 10) for k in range(11)]
    return [(times[cut[k + 1]] - times[cut[k]]) / 1e6 / (cut[k + 1] - cut[k]) for k in range(10)]


def copied(out, n):
    """Rows copied by each table of a job's result (its CSV), all n of them succeeded."""
    rows = list(csv.DictReader(io.StringIO(out)))
    assert len(rows) == n and all(r["status"] == "succeeded" for r in rows), out[-2000:]
    return {int(r["rows_affected"]) for r in rows}


def files(root):
    return {os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs}


def set_up(n):
    """WORK/srcN: the warehouse before the first run; WORK/moreN: the sources' files after
    10 rows are appended to each (only the files the append adds are used)."""
    src, more = os.path.join(work, f"src{n}"), os.path.join(work, f"more{n}")
    if os.path.exists(os.path.join(more, "done")):
        return src, more
    shutil.rmtree(src, ignore_errors=True)
    shutil.rmtree(more, ignore_errors=True)
    for i in range(n):
        deltalake.write_deltalake(f"{src}/main/src/t{i}", batch(0, 100))
    values = ", ".join(f"('main.src.t{i}', 'main.dst.t{i}', 'created_at', TIMESTAMP '1970-01-01 00:00:00Z')" for i in range(n))
    setup = os.path.join(work, f"setup{n}.sql")
    with open(setup, "w") as f:
        f.write("CREATE SCHEMA main.dst;\n"
                "CREATE TABLE main.src.ctl (source_table STRING NOT NULL, target_table STRING NOT NULL, watermark_column STRING NOT NULL, last_watermark TIMESTAMP NOT NULL);\n"
                f"INSERT INTO main.src.ctl VALUES {values};\n")
    subprocess.run([tidemark, src, "-q", "-f", setup], check=True, capture_output=True)
    for i in range(n):
        shutil.copytree(f"{src}/main/src/t{i}", f"{more}/main/src/t{i}")
        deltalake.write_deltalake(f"{more}/main/src/t{i}", batch(100, 10), mode="append")
    open(os.path.join(more, "done"), "w").close()
    return src, more


def one_round(n, r, src, more, rep=1):
    wh = os.path.join(work, f"wh{n}-{r}-{rep}")
    if os.path.exists(wh):
        sys.exit(f"{wh} is left from an earlier run: remove it (cp -a would copy into it)")
    subprocess.run(["cp", "-a", os.path.realpath(src), wh], check=True)
    full, full_cpu, out = tm(wh, JOB)
    assert copied(out, n) == {100}, out[-2000:]
    full_pace = pace(wh, n, 1)  # a new target: its create, then its rows
    noops = [tm(wh, JOB)[:2] for _ in range(3)]
    new = sorted(files(more) - files(src) - {"done"})
    assert len(new) == 2 * n, len(new)
    for rel in new:
        shutil.copyfile(os.path.join(more, rel), os.path.join(wh, rel))
    inc, inc_cpu, out = tm(wh, JOB)
    assert copied(out, n) == {10}, out[-2000:]
    paces[n].append((full_pace, pace(wh, n, 2)))
    noop, noop_cpu = min(noops)
    print(f"round {r}, {n} tables: first {full:.2f} s ({full_cpu:.2f} s CPU), nothing new "
          f"{noop:.2f} s ({noop_cpu:.2f}), 10 new rows each {inc:.2f} s ({inc_cpu:.2f})", file=sys.stderr)
    return (full, full_cpu), (noop, noop_cpu), (inc, inc_cpu)


made = {n: set_up(n) for n in sizes}
if rounds == 0:
    sys.exit(0)
runs = {n: [] for n in sizes}
paces = {n: [] for n in sizes}  # per run: (first run's, increment's) ms per table by tenths
reps = {n: small_reps if len(sizes) > 1 and n == min(sizes) else large_reps for n in sizes}
for r in range(1, rounds + 1):
    taken = {n: [] for n in sizes}
    # Each size's k-th of K repetitions at (k - 0.5) / K of the round's order of runs, the
    # size given first at a tie.
    order = sorted(((k - 0.5) / reps[n], i, n, k)
                   for i, n in enumerate(sizes) for k in range(1, reps[n] + 1))
    for _, _, n, k in order:
        taken[n].append(one_round(n, r, *made[n], rep=k))
    for n, samples in taken.items():
        if by_mean:
            # Per measure, the mean of the repetitions' wall and of their CPU times.
            runs[n].append(tuple(
                tuple(statistics.mean(s[m][i] for s in samples) for i in range(2))
                for m in range(3)))
        else:
            # Per measure, the median of the repetitions (wall and CPU of the same run).
            runs[n].append(tuple(
                sorted((s[m] for s in samples), key=lambda x: x[0])[(len(samples) - 1) // 2]
                for m in range(3)))
for n in sizes:
    for r in range(1, rounds + 1):
        for k in range(1, reps[n] + 1):
            shutil.rmtree(os.path.join(work, f"wh{n}-{r}-{k}"), ignore_errors=True)


def cell(samples):
    wall = statistics.median(s[0] for s in samples)
    spent = statistics.median(s[1] for s in samples)
    return f"{wall:.2f} s ({spent:.2f} s)"


per_round = "mean" if by_mean else "median"
extra = "".join(
    f"; {n:,} tables: {per_round} of {reps[n]} runs per round" for n in sizes if reps[n] > 1)
print(f"Median of {rounds} rounds{extra}, wall time (CPU time, user + system):\n")
print("| tables | first run (100 rows each) | nothing new (fastest of 3) | 10 new rows each |")
print("| ---: | ---: | ---: | ---: |")
for n in sizes:
    cols = [cell([run[k] for run in runs[n]]) for k in range(3)]
    print(f"| {n:,} | {cols[0]} | {cols[1]} | {cols[2]} |")
if len(sizes) == 2:
    a, b = sizes
    print(f"\nFrom {a:,} to {b:,} tables, round by round (wall, CPU):\n")
    for r in range(rounds):
        ratios = []
        for k, name in enumerate(["first run", "nothing new", "10 new rows each"]):
            x, y = runs[a][r][k], runs[b][r][k]
            ratios.append(f"{name} {y[0] / x[0]:.1f}x, {y[1] / x[1]:.1f}x")
        print(f"- round {r + 1}: " + "; ".join(ratios))
    # All rounds together: the ratio of the larger size's mean to the smaller's, with a 95%
    # interval from resampling the rounds (10,000 draws, a fixed seed).
    print(f"\nAll {rounds} rounds together, the ratio of the means (wall; 95% interval over rounds):\n")
    draw = random.Random(17)
    for k, name in enumerate(["first run", "nothing new", "10 new rows each"]):
        def ratio(picked):
            return (statistics.mean(runs[b][r][k][0] for r in picked)
                    / statistics.mean(runs[a][r][k][0] for r in picked))
        spread = sorted(ratio([draw.randrange(rounds) for _ in range(rounds)]) for _ in range(10_000))
        print(f"- {name}: {ratio(range(rounds)):.2f}x ({spread[249]:.2f}x to {spread[9749]:.2f}x)")

# The pace of each run: milliseconds per table in each tenth of the run, from the times its
# targets' commits were written (the start-up before the first commit and the end after the
# last are left out), the median over all runs of a size.
print("\nMilliseconds per table by tenths of the run (median over all runs; first commit to last):\n")
print("| tables | run | " + " | ".join(f"{k}" for k in range(1, 11)) + " | all |")
print("| ---: | --- |" + " ---: |" * 11)
for n in (n for n in sizes if n > 10):
    for j, name in enumerate(["first run", "10 new rows each"]):
        tenths = [statistics.median(p[j][k] for p in paces[n]) for k in range(10)]
        whole = statistics.median(statistics.mean(p[j]) for p in paces[n])
        print(f"| {n:,} | {name} | " + " | ".join(f"{t:.2f}" for t in tenths) + f" | {whole:.2f} |")
