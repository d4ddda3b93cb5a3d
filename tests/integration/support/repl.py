"""Drives the tidemark REPL through a pseudo-terminal, as a user at a keyboard would:
multi-line input, Tab completion, Ctrl-C during a statement, Ctrl-D to leave.
usage: repl.py BINARY WAREHOUSE HOME"""
import os, pty, select, sys, time

binary, warehouse, home = sys.argv[1:4]
pid, fd = pty.fork()
if pid == 0:
    os.environ["HOME"] = home
    os.environ["TERM"] = "xterm"
    os.execv(binary, [binary, warehouse])

seen = b""


def until(marker, timeout=60):
    global seen
    end = time.time() + timeout
    if marker.encode() in seen:
        return
    while time.time() < end:
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            try:
                data = os.read(fd, 65536)
            except OSError:
                break
            seen += data
            if marker.encode() in seen:
                return
    sys.exit(f"timed out waiting for {marker!r}; the terminal showed:\n{seen.decode(errors='replace')}")


def send(keys, pause=0.3):
    os.write(fd, keys)
    time.sleep(pause)


until("main.default> ")
send(b"SELECT 40 +\r")
send(b"  2 AS answer;\r")
until("1 row")
send(b"CREATE TABLE zebra_stats (id INT);\r")
until("OK")
send(b"INSERT INTO zebra_stats VALUES (7);\r")
until("num_inserted_rows")
send(b"SELECT id FROM zeb\t", 1.0)
send(b";\r")
until("|  7 |")
# Column names of the tables the line names complete too.
send(b"SELECT * FROM zebra_stats WHERE i\t", 1.0)
until("zebra_stats WHERE id")
send(b" = 7;\r")
until("1 row")
# A foreign catalog's tables and columns complete too, as its database has them at each Tab.
import sqlite3
lite = os.path.join(home, "lite.db")
db = sqlite3.connect(lite)
db.execute("CREATE TABLE walrus_sightings (species TEXT, seen INTEGER)")
db.execute("INSERT INTO walrus_sightings VALUES ('pacific', 3)")
db.commit()
send(f"CREATE CONNECTION lite TYPE sqlite OPTIONS (path '{lite}');\r".encode())
send(b"CREATE FOREIGN CATALOG lite USING CONNECTION lite;\r")
send(b"SELECT 'yes' AS lite_ready;\r")
until("lite_ready |")
send(b"SELECT count(*) AS walruses FROM lite.main.wal\t", 2.0)
send(b";\r")
until("walruses |")
send(b"SELECT * FROM lite.main.walrus_sightings WHERE spe\t", 2.0)
until("walrus_sightings WHERE species")
send(b" = 'pacific';\r")
until("pacific |")
# A table created in the database after the catalog was listed.
db.execute("CREATE TABLE yak_counts (herd INTEGER)")
db.commit()
db.close()
send(b"SELECT count(*) AS yaks FROM lite.main.yak\t", 2.0)
send(b";\r")
until("yaks |")
# Typed-ahead lines all run, in order; an unfinished statement shows the continuation prompt.
send(b"SELECT 101 AS ahead_one;\rSELECT 102 AS ahead_two;\rSELECT\r  103 AS ahead_three;\r", 0.1)
until("ahead_three")
until("|         103 |")
# A complete statement runs at once; the unfinished one after it waits for its end.
send(b"SELECT 104 AS done_first; SELECT\r", 0.5)
until("|        104 |")
send(b"  105 AS then_second;\r")
until("|         105 |")
send(b"SELECT sum(value) FROM generate_series(1, 300000000000);\r", 1.5)
send(b"\x03")
until("cancelled")
send(b"SELECT 'still here' AS shell;\r")
until("still here |")


def step(keys, marker, pause=0.3, timeout=120):
    """Send keys, wait for marker in what the terminal shows from now on; return that."""
    global seen, transcript
    transcript += seen
    seen = b""
    send(keys, pause)
    until(marker, timeout)
    return seen.decode(errors="replace")


# Ctrl-C during a FOR EACH job: the running iterations stop, nothing is committed, the
# prompt comes back, and the job run again copies every table once.
transcript = b""
step(b"CREATE TABLE src_a AS SELECT value AS id FROM generate_series(1, 1000) AS t(value);\r", "1 row")
step(b"CREATE TABLE src_b AS SELECT value AS id FROM generate_series(1, 2000) AS t(value);\r", "1 row")
step(b"CREATE TABLE ctl (source_table STRING, target_table STRING, watermark_column STRING, last_watermark BIGINT);\r", "OK")
step(b"INSERT INTO ctl VALUES ('src_a', 'dst_a', 'id', 0), ('src_b', 'dst_b', 'id', 0);\r", "num_inserted_rows")
transcript += seen
seen = b""
send(b"FOR EACH r IN (SELECT * FROM ctl) CONCURRENCY 2 DO SELECT sum(value) FROM generate_series(1, 300000000000); COPY INCREMENTAL IDENTIFIER(r.source_table) INTO IDENTIFIER(r.target_table) WATERMARK id CONTROL TABLE ctl; END FOR;\r", 2.0)
send(b"\x03")
until("cancelled")
after_cancel = step(b"SHOW TABLES;\r", "rows")
step(b"COPY INCREMENTAL USING CONTROL TABLE ctl;\r", "rows")
job_again = step(b"SELECT (SELECT count(*) FROM dst_a) AS a, (SELECT count(DISTINCT id) FROM dst_b) AS b, (SELECT count(*) FROM dst_b) AS b_all, (SELECT sum(last_watermark) FROM ctl) AS marks;\r", "1 row")
transcript += seen
seen = transcript
sys.stdout.write("AFTER CANCEL:" + after_cancel + "\nJOB AGAIN:" + job_again + "\n")
send(b"\x04")
_, status = os.waitpid(pid, 0)
sys.stdout.write(seen.decode(errors="replace"))
print(f"\nEXIT {os.waitstatus_to_exitcode(status)}")
