#!/usr/bin/env python
"""The newcomer's default stack under a realistic load: ``make run`` on SQLite and Celery's
filesystem broker, one run of N cases while people and scripts use the site.

Real processes, as ``make run`` starts them (``scripts/devserver.py``: ``runserver
--noreload`` and ``celery worker -B --concurrency 1``), on a fresh SQLite file and broker
folders under a temporary directory (``tests.settings_filesystem_broker``: the settings of
``make run`` with the broker folders moved), with the demo loaded (``demo setup``, its
example agent and judge on free ports). Then:

- the P1 pack (``bench/p1/workload.py``, N cases, 4 checks each) is published and an
  ``openai_chat`` deployment (``--max-in-flight``, 16) points at ``bench/p1/stub.py``;
- a run is created through the API, and while it runs:
  - two browser tabs (session login) load the run overview once and then poll its live
    progress partial (``?partial=live``) every ``--poll`` seconds, as htmx does;
  - a CI script polls ``GET /api/v1/workspaces/demo/runs/{id}`` (token) every ``--poll`` s;
  - another user autosaves a draft in the pack editor every 2 s (the editor's htmx POST, then
    its report) and publishes a new version of a small pack every 5 s (the API);
- until the run is completed (or ``--deadline`` seconds).

Prints cases/s (run created -> completed), per request kind the count, errors (non-2xx or
no answer), p50 / p95 / max latency, the longest stretch without progress seen by the CI
poller, and the count of ``database is locked`` and tracebacks in each process's log.
Loopback only; every process started here is stopped at the end.

    .venv/bin/python bench/sqlite_stack.py --cases 2000
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.p1.workload import write_pack  # noqa: E402
from scripts.devserver import stop_children  # noqa: E402
from tests.processes import free_port, wait_until  # noqa: E402

WS = "demo"
USER, PASSWORD = "demo", "demo-password"
SMALL_PACK = """\
pack: {{slug: side-pack, name: Side pack, family: benchmark}}
version:
  number: {number}
  execution_mode: prompt_eval
  evaluation_spec:
    name: side
    version_number: 1
    judge_mode: deterministic
    validators:
      - {{key: exact, type: exact_match, target: final_output, expected_from: case.expectations.answer}}
    scorecard:
      pass_threshold: 1
      dimensions: [{{key: correctness, source: validators, validators: [exact]}}]
challenges:
  - {{key: echo, title: Echo, category: misc, difficulty: easy, instructions: "{{{{question}}}}"}}
input_sets:
  - key: all
    name: All
    cases:
{cases}
"""


def small_pack(number: int, cases: int = 50) -> str:
    lines = [
        f"      - {{challenge_key: echo, case_key: k{n}, payload: {{question: 'say {n} v{number}'}},"
        f" expectations: [{{key: answer, kind: text, value: '{n}'}}]}}"
        for n in range(cases)
    ]
    return SMALL_PACK.format(number=number, cases="\n".join(lines))


class Stack:
    """The processes of ``make run`` on a fresh SQLite file, with their logs in ``tmp``."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.children: list[tuple[str, subprocess.Popen[bytes]]] = []
        self.logs: dict[str, Path] = {}
        agent_port, judge_port = free_port(), free_port()
        self.env = {
            **os.environ,
            "DATABASE_URL": f"sqlite:///{tmp / 'db.sqlite3'}",
            "DJANGO_SETTINGS_MODULE": "tests.settings_filesystem_broker",
            "TEST_BROKER_DIR": str(tmp / "broker"),
            "PUBLIC_BASE_URL": self.base,
            "BIND": f"127.0.0.1:{self.port}",
            "AGENTCLASH_DEMO_AGENT_URL": f"http://127.0.0.1:{agent_port}",
            "AGENTCLASH_DEMO_JUDGE_URL": f"http://127.0.0.1:{judge_port}/v1",
            "PYTHONUNBUFFERED": "1",
        }
        self.examples = [
            (
                "agent",
                [sys.executable, "examples/agents/hosted_agent.py", "--port", str(agent_port), "--quiet"],
            ),
            (
                "judge",
                [sys.executable, "examples/judges/heuristic_judge.py", "--port", str(judge_port), "--quiet"],
            ),
        ]

    def manage(self, *args: str) -> str:
        done = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"manage.py {' '.join(args[:2])} exited {done.returncode}: {done.stderr[-2000:]}"
            )
        return done.stdout

    def spawn(self, name: str, argv: list[str]) -> subprocess.Popen[bytes]:
        self.logs[name] = self.tmp / f"{name}.log"
        with open(self.logs[name], "wb") as log:
            proc = subprocess.Popen(
                argv, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.children.append((name, proc))
        return proc

    def start(self) -> None:
        from scripts import devserver

        for name, argv in self.examples:
            self.spawn(name, argv)
        self.manage("migrate", "--noinput")
        self.manage("demo", "setup")
        saved = dict(os.environ)
        os.environ.update(self.env)  # devserver.commands() reads BIND and DATABASE_URL
        try:
            procs = [p for p in devserver.commands() if p[0] in ("web", "worker")]
        finally:
            os.environ.clear()
            os.environ.update(saved)
        for name, argv in procs:
            self.spawn(name, argv)
        wait_until(lambda: _answers(self.base + "/api/v1/health"), timeout=60, message="the web server")

    def stop(self) -> None:
        stop_children(self.children)
        self.children = []

    def log_counts(self) -> dict[str, dict[str, int]]:
        out = {}
        for name, path in self.logs.items():
            text = path.read_text(errors="replace") if path.exists() else ""
            out[name] = {
                "database is locked": text.count("database is locked"),
                "Traceback": text.count("Traceback"),
                "ERROR": len(re.findall(r"\bERROR\b", text)),
            }
        return out


def _answers(url: str) -> bool:
    try:
        return requests.get(url, timeout=2).status_code < 500
    except requests.RequestException:
        return False


class Stats:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        # kind -> (monotonic start, seconds) of each answered request
        self.seconds: dict[str, list[tuple[float, float]]] = defaultdict(list)
        self.errors: dict[str, list[str]] = defaultdict(list)

    def add(self, kind: str, start: float, took: float) -> None:
        with self.lock:
            self.seconds[kind].append((start, took))

    def timed(self, kind: str, method, url: str, **kwargs):  # type: ignore[no-untyped-def]
        """``method(url, **kwargs)`` timed; an answer of 400 or more, or none, is an error."""
        start, t0 = time.monotonic(), time.perf_counter()
        try:
            response = method(url, timeout=60, **kwargs)
        except requests.RequestException as exc:
            with self.lock:
                self.errors[kind].append(type(exc).__name__)
            return None
        took = time.perf_counter() - t0
        with self.lock:
            self.seconds[kind].append((start, took))
            if response.status_code >= 400:
                self.errors[kind].append(f"{response.status_code} {response.text[:200]!r}")
        return response

    def table(self, since: float = 0.0, until: float = float("inf")) -> list[str]:
        """Latencies of the requests started in [since, until]; errors are of the whole session."""
        rows = [f"{'request':<22}{'n':>6}{'errors':>8}{'p50 ms':>9}{'p95 ms':>9}{'max ms':>9}"]
        for kind in sorted(set(self.seconds) | set(self.errors)):
            s = sorted(took for start, took in self.seconds[kind] if since <= start <= until)
            if not s:
                continue
            p95 = s[min(len(s) - 1, int(0.95 * len(s)))]
            rows.append(
                f"{kind:<22}{len(s):>6}{len(self.errors[kind]):>8}"
                f"{statistics.median(s) * 1000:>9.0f}{p95 * 1000:>9.0f}{s[-1] * 1000:>9.0f}"
            )
        return rows


def browser(base: str) -> requests.Session:
    s = requests.Session()
    s.get(base + "/login/", timeout=30)
    r = s.post(
        base + "/login/",
        data={"username": USER, "password": PASSWORD, "csrfmiddlewaretoken": s.cookies["csrftoken"]},
        headers={"Referer": base + "/login/"},
        timeout=30,
    )
    r.raise_for_status()
    assert "sessionid" in s.cookies, "login failed"
    s.headers.update({"X-CSRFToken": s.cookies["csrftoken"], "Referer": base + "/"})
    return s


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=int, default=2000)
    ap.add_argument("--max-in-flight", type=int, default=16)
    ap.add_argument(
        "--poll", type=float, default=1.0, help="seconds between polls of each tab and the CI script"
    )
    ap.add_argument("--deadline", type=float, default=900, help="give up on the run after this many seconds")
    ap.add_argument("--side-cases", type=int, default=200, help="cases of the pack the other user publishes")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory (logs, database)")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="agentclash-sqlite-stack-", dir="/tmp"))
    stub = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "p1" / "stub.py"), "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    stack = Stack(tmp)
    try:
        line = stub.stdout.readline() if stub.stdout else ""
        if not line.startswith("ready "):
            raise RuntimeError(f"the stub did not start: {line!r}")
        stub_url = f"http://127.0.0.1:{int(line.split()[1])}/v1"
        stack.start()
        pack = write_pack(tmp / "p1.yaml", args.cases)
        stack.manage("pack", "publish", str(pack), "--workspace", WS, "--json")
        stack.manage(
            "deployment", "create", "--workspace", WS, "--name", "stub", "--kind", "openai_chat",
            "--endpoint", stub_url, "--model", "stub", "--max-in-flight", str(args.max_in_flight),
            "--timeout", "30", "--json",
        )  # fmt: skip
        token = json.loads(stack.manage("token", "create", USER, "--workspace", WS, "--json"))["token"]
        return measure(stack, token, args)
    finally:
        stack.stop()
        stub.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            stub.wait(timeout=10)
        if stub.poll() is None:
            stub.kill()
            stub.wait()
        print(f"logs and database: {tmp}" if args.keep else "", end="\n" if args.keep else "")
        if not args.keep:
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)


def measure(stack: Stack, token: str, args: argparse.Namespace) -> int:
    base = stack.base
    api = requests.Session()
    api.headers["Authorization"] = f"Bearer {token}"
    stats = Stats()
    stop = threading.Event()
    progress: list[tuple[float, int]] = []  # (monotonic, cases done) seen by the CI poller
    running: list[float] = []  # when the CI poller first saw the run running

    editor = browser(base)
    draft = api.post(
        f"{base}/api/v1/workspaces/{WS}/drafts", json={"name": "autosaved", "bundle": small_pack(1)}
    )
    draft.raise_for_status()
    draft_id = draft.json()["id"]

    t0 = time.monotonic()
    body = {"pack": "p1-squares", "deployments": ["stub"], "name": "sqlite stack"}
    created = stats.timed("run create", api.post, f"{base}/api/v1/workspaces/{WS}/runs", json=body)
    if created is None or created.status_code != 201:
        raise RuntimeError(
            f"the run was not created: {created.text[:500] if created is not None else 'no answer'}"
        )
    run_id = created.json()["run"]["id"]
    run_doc: dict = {}

    def tab(n: int) -> None:
        s = browser(base)
        stats.timed("overview page", s.get, f"{base}/runs/{run_id}/")
        headers = {"HX-Request": "true"}
        while not stop.wait(args.poll):
            stats.timed(
                "progress partial", s.get, f"{base}/runs/{run_id}/?partial=live&was=running", headers=headers
            )

    def ci() -> None:
        while not stop.is_set():
            r = stats.timed("api run document", api.get, f"{base}/api/v1/workspaces/{WS}/runs/{run_id}")
            if r is not None and r.status_code == 200:
                doc = r.json()
                counts = [lane["counts"] for lane in doc["lanes"]]
                done = sum(sum(v for k, v in c.items() if k != "pending") for c in counts)
                progress.append((time.monotonic(), done))
                if doc["run"]["status"] == "running" and not running:
                    running.append(time.monotonic())
                if doc["run"]["status"] in ("completed", "failed", "cancelled"):
                    run_doc.update(doc)
                    return
            stop.wait(args.poll)

    def autosave() -> None:
        n = 0
        headers = {"HX-Request": "true"}
        while not stop.wait(2.0):
            n += 1
            text = small_pack(1, cases=50 + n % 7)
            save = f"{base}/packs/drafts/{draft_id}/save/"
            r = stats.timed("draft autosave", editor.post, save, data={"bundle_text": text}, headers=headers)
            if r is not None and r.status_code == 200:
                stats.timed(
                    "draft report", editor.get, f"{base}/packs/drafts/{draft_id}/report/", headers=headers
                )

    def publisher() -> None:
        number = 1
        while not stop.wait(5.0):
            body = small_pack(number, cases=args.side_cases).encode()
            number += 1
            yaml = {"Content-Type": "application/yaml"}
            stats.timed(
                "pack publish", api.post, f"{base}/api/v1/workspaces/{WS}/packs", data=body, headers=yaml
            )

    def lock_probe() -> None:
        # How long a write (of the web server, say) waits for SQLite's one write lock: an
        # empty IMMEDIATE transaction every 0.1 s on a connection of its own.
        import sqlite3

        conn = sqlite3.connect(stack.tmp / "db.sqlite3", timeout=60, isolation_level=None)
        try:
            while not stop.wait(0.1):
                start, t = time.monotonic(), time.perf_counter()
                try:
                    conn.execute("BEGIN IMMEDIATE")
                    conn.execute("ROLLBACK")
                except sqlite3.OperationalError as exc:
                    with stats.lock:
                        stats.errors["write lock wait"].append(str(exc))
                    continue
                stats.add("write lock wait", start, time.perf_counter() - t)
        finally:
            conn.close()

    loads = (lambda: tab(1), lambda: tab(2), autosave, publisher, lock_probe)
    threads = [threading.Thread(target=f, daemon=True) for f in loads]
    ci_thread = threading.Thread(target=ci, daemon=True)
    for t in [*threads, ci_thread]:
        t.start()
    ci_thread.join(timeout=args.deadline)
    ended = time.monotonic()
    elapsed = ended - t0
    stop.set()
    for t in threads:
        t.join(timeout=70)

    # After the run: the pages a newcomer opens next.
    s = browser(base)
    for _ in range(5):
        stats.timed("overview (finished)", s.get, f"{base}/runs/{run_id}/")
        stats.timed("api document (fin.)", api.get, f"{base}/api/v1/workspaces/{WS}/runs/{run_id}")

    stall, last = 0.0, None
    for when, done in progress:
        if last is None or done > last[1]:
            last = (when, done)
        else:
            stall = max(stall, when - last[0])
    status = run_doc.get("run", {}).get("status", "not finished")
    done = progress[-1][1] if progress else 0
    print(f"run: {args.cases} cases, max_in_flight {args.max_in_flight}, status {status}, "
          f"{done} done in {elapsed:.1f} s: {done / elapsed:.0f} cases/s")  # fmt: skip
    print(f"longest stretch without progress seen by the CI poller: {stall:.1f} s")
    if running:
        print(f"while the run was running as the CI poller saw it ({ended - running[0]:.1f} s):")
        print("\n".join(stats.table(running[0] - args.poll, ended)))
    print("the whole session, from the run's creation to the pages after it:")
    print("\n".join(stats.table()))
    for kind, errors in sorted(stats.errors.items()):
        for e in errors[:3]:
            print(f"  {kind}: {e}")
    for name, counts in stack.log_counts().items():
        print(f"log {name}: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    return 0 if status == "completed" else 1


if __name__ == "__main__":
    sys.exit(main())
