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
until("| 7  |")
send(b"SELECT sum(value) FROM generate_series(1, 300000000000);\r", 1.5)
send(b"\x03")
until("cancelled")
send(b"SELECT 'still here' AS shell;\r")
until("still here |")
send(b"\x04")
_, status = os.waitpid(pid, 0)
sys.stdout.write(seen.decode(errors="replace"))
print(f"\nEXIT {os.waitstatus_to_exitcode(status)}")
