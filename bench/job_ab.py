"""A/B of two builds: the job's first run over 1,000 and 10,000 tables (the set-ups of
job_scale.py in /tmp/js), the binaries taking turns, warehouses in /dev/shm.
usage: job_ab.py A B ROUNDS SMALLREPS"""
import shutil, statistics, subprocess, sys, time
a, b, rounds, small = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
JOB = "COPY INCREMENTAL USING CONTROL TABLE main.src.ctl CONCURRENCY 8"
res = {(x, n): [] for x in "AB" for n in (1000, 10000)}
k = 0
def run(tag, binary, n):
    global k
    k += 1
    wh = f"/dev/shm/ab-{k}"
    subprocess.run(["cp", "-a", f"/tmp/js/src{n}", wh], check=True)
    t0 = time.perf_counter()
    out = subprocess.run([binary, wh, "--format", "csv", "-c", JOB], capture_output=True, text=True)
    t = time.perf_counter() - t0
    assert out.returncode == 0 and out.stdout.count(",succeeded,") == n, out.stderr[-500:]
    res[(tag, n)].append(t)
    shutil.rmtree(wh)
    return t
for r in range(rounds):
    order = [("A", a), ("B", b)] if r % 2 == 0 else [("B", b), ("A", a)]
    for tag, binary in order:
        for _ in range(small):
            run(tag, binary, 1000)
        run(tag, binary, 10000)
    line = []
    for tag in "AB":
        s, l = statistics.mean(res[(tag, 1000)]), statistics.mean(res[(tag, 10000)])
        line.append(f"{tag}: 1k mean {s:.3f} s, 10k mean {l:.2f} s, ratio {l/s:.2f}x")
    print(f"after round {r+1}: " + "; ".join(line), flush=True)
for key, v in res.items():
    print(key, " ".join(f"{x:.2f}" for x in v))
