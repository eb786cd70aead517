#!/usr/bin/env python
"""How long a write waits for SQLite's write lock behind another process's write bursts.

One process writes bursts of about 0.48 s (a lane writer's batch of 512 results on SQLite),
split into transactions of ``chunk`` seconds with ``gap`` seconds between them, then pauses
0.1 s (the dispatcher grading); this process opens an empty ``BEGIN IMMEDIATE`` every 37 ms
(the web server's autosave, say) and prints the wait's p50 / p95 / max for each setting.
SQLite queues no waiting writer: its busy handler sleeps and retries (1, 2, 5, ... up to
100 ms), so it misses gaps shorter than its sleeps. A throwaway file under /tmp.

    .venv/bin/python bench/sqlite_lock_wait.py
"""

from __future__ import annotations

import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BURST = 0.48
SETTINGS = [(0.48, 0.0), (0.06, 0.0), (0.06, 0.001), (0.06, 0.01), (0.06, 0.02), (0.06, 0.05)]


def writer(path: str, chunk: float, gap: float, seconds: float) -> None:
    conn = sqlite3.connect(path, isolation_level=None, timeout=30)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for _ in range(round(BURST / chunk)):
            conn.execute("BEGIN IMMEDIATE")
            t0 = time.perf_counter()
            while time.perf_counter() - t0 < chunk:
                conn.execute("INSERT INTO t VALUES (1)")
            conn.execute("COMMIT")
            if gap:
                time.sleep(gap)
        time.sleep(0.1)


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="sqlite-lock-wait-", dir="/tmp") as tmp:
        path = str(Path(tmp) / "db.sqlite3")
        setup = sqlite3.connect(path, isolation_level=None)
        setup.execute("PRAGMA journal_mode=WAL")
        setup.execute("CREATE TABLE t (x)")
        setup.close()
        for chunk, gap in SETTINGS:
            proc = subprocess.Popen([sys.executable, __file__, "--writer", path, str(chunk), str(gap), "3"])
            try:
                conn = sqlite3.connect(path, isolation_level=None, timeout=30)
                time.sleep(0.3)  # let the writer start its bursts (a benchmark's pacing, not a wait)
                waits = []
                for _ in range(60):
                    time.sleep(0.037)
                    t0 = time.perf_counter()
                    conn.execute("BEGIN IMMEDIATE")
                    conn.execute("ROLLBACK")
                    waits.append(time.perf_counter() - t0)
                conn.close()
            finally:
                proc.wait(timeout=30)
            waits.sort()
            print(
                f"transactions of {chunk * 1000:.0f} ms, {gap * 1000:g} ms apart: wait p50"
                f" {statistics.median(waits) * 1000:.0f} ms, p95 {waits[int(0.95 * len(waits))] * 1000:.0f} ms,"
                f" max {waits[-1] * 1000:.0f} ms"
            )


if __name__ == "__main__":
    if sys.argv[1:2] == ["--writer"]:
        writer(sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]))
    else:
        main()
