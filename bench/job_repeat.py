"""The job run again and again on one warehouse, as a schedule runs it: a copy of the set-up
`job_scale.py` wrote for N tables (WORK_DIR/srcN), its first run, then RUNS times one new row
appended to every source (by tidemark, one INSERT per table, not timed) followed by
`COPY INCREMENTAL USING CONTROL TABLE main.src.ctl CONCURRENCY 8` (timed, a whole process).
Prints a Markdown table of each run's wall and CPU time (user + system) with the number of
JSON commits after the last checkpoint in one source's and its target's log when the run
starts: what each copy replays to open them, the cost a fresh warehouse does not show. Then
the mean and the slowest of the RUNS runs, and with 19 or more the mean of runs 10 to 19 (a
whole cycle of checkpoints, one every 10 commits, past the first ones).

With 40 runs or more it also prints the mean of the last 20 runs and the data files of the
first target at the end: a target gains a file a run, and tidemark compacts it once 50 can be
merged (Databricks' auto compaction). `--no-auto-compact` sets
`delta.autoOptimize.autoCompact = 'false'` on every target after the first run (not timed), for
the same runs without compaction.

usage: job_repeat.py TIDEMARK WORK_DIR N RUNS [RUN_DIR] [--no-auto-compact]
       (RUN_DIR, default WORK_DIR/repeatN: where the warehouse is copied; it must not exist)
"""
import csv
import io
import json
import os
import resource
import subprocess
import sys
import time

args = [a for a in sys.argv[1:] if a != "--no-auto-compact"]
no_compaction = len(args) < len(sys.argv) - 1
tidemark, work, n, runs = args[0], args[1], int(args[2]), int(args[3])
wh = args[4] if len(args) > 4 else os.path.join(work, f"repeat{n}")
JOB = "COPY INCREMENTAL USING CONTROL TABLE main.src.ctl CONCURRENCY 8"


def timed(*args):
    """One whole tidemark process: (wall seconds, CPU seconds, stdout)."""
    r0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    out = subprocess.run([tidemark, wh, *args], check=True, capture_output=True, text=True).stdout
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    spent = r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime
    return time.perf_counter() - t0, spent, out


def copied(out):
    """Rows copied by each table of a job's result (its CSV), all of them succeeded."""
    rows = list(csv.DictReader(io.StringIO(out)))
    assert len(rows) == n and all(r["status"] == "succeeded" for r in rows), out[-2000:]
    return {int(r["rows_affected"]) for r in rows}


def after_checkpoint(table):
    """JSON commits after the table's last checkpoint (all of them without one)."""
    log = os.path.join(wh, "main", table, "_delta_log")
    versions = [int(f[:20]) for f in os.listdir(log) if f.endswith(".json")]
    try:
        with open(os.path.join(log, "_last_checkpoint")) as f:
            since = json.load(f)["version"]
    except FileNotFoundError:
        since = -1
    return sum(1 for v in versions if v > since)


if os.path.exists(wh):
    sys.exit(f"{wh} exists: remove it first")
subprocess.run(["cp", "-a", os.path.join(work, f"src{n}"), wh], check=True)
print("| run | new rows | JSON commits to replay (source, target) | wall | CPU |")
print("| ---: | ---: | ---: | ---: | ---: |")
replay = after_checkpoint("src/t0")  # the target is made by the first run
wall, spent, out = timed("--format", "csv", "-c", JOB)
assert copied(out) == {100}
print(f"| first | 100 each | {replay}, none | {wall:.2f} s | {spent:.2f} s |", flush=True)
script = os.path.join(wh, "..", os.path.basename(wh) + f"-append{n}.sql")
if no_compaction:
    with open(script, "w") as f:
        for i in range(n):
            f.write(f"ALTER TABLE main.dst.t{i} SET TBLPROPERTIES "
                    "('delta.autoOptimize.autoCompact' = 'false');\n")
    subprocess.run([tidemark, wh, "-q", "-f", script], check=True, capture_output=True)
walls = []
for r in range(1, runs + 1):
    with open(script, "w") as f:
        for i in range(n):
            f.write(f"INSERT INTO main.src.t{i} VALUES ({1000 + r}, "
                    f"TIMESTAMP '2030-01-01 00:00:00Z' + INTERVAL '{r}' SECOND, 'r{r}');\n")
    subprocess.run([tidemark, wh, "-q", "-f", script], check=True, capture_output=True)
    replay = (after_checkpoint("src/t0"), after_checkpoint("dst/t0"))
    wall, spent, out = timed("--format", "csv", "-c", JOB)
    assert copied(out) == {1}
    walls.append(wall)
    print(f"| {r} | 1 each | {replay[0]}, {replay[1]} | {wall:.2f} s | {spent:.2f} s |", flush=True)
if walls:
    slowest = max(range(len(walls)), key=walls.__getitem__)
    print(f"\nRuns 1-{runs}: mean {sum(walls) / len(walls):.2f} s, slowest {walls[slowest]:.2f} s "
          f"(run {slowest + 1}).")
    if runs >= 19:
        # A whole cycle of checkpoints (one every 10 commits), past the first ones.
        print(f"Runs 10-19: mean {sum(walls[9:19]) / 10:.2f} s.")
    if runs >= 40:
        print(f"Runs {runs - 19}-{runs}: mean {sum(walls[-20:]) / 20:.2f} s.")
        files = subprocess.run(
            [tidemark, wh, "--format", "csv", "-q", "-c", "DESCRIBE DETAIL main.dst.t0"],
            check=True, capture_output=True, text=True).stdout
        detail = next(csv.DictReader(io.StringIO(files)))
        print(f"Target t0 at the end: {detail['numFiles']} data files.")
