"""This project's leg of P1 (and the P5 worker): a real stack on loopback.

- PostgreSQL: its own database (``agentclash_bench`` by default), dropped, created and
  migrated by ``Stack``;
- Redis: a private ``redis-server`` on a free loopback port;
- a real ``celery -A agentclash_site worker`` subprocess;
- a workspace with ``--allow-private-endpoints`` and an ``openai_chat`` deployment pointed at
  the stub (``--max-in-flight 16``), the pack published with ``pack publish``;
- one timed ``python manage.py eval start ... --follow --json`` per round, from process start
  to the completed run document.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from bench.database import recreate_database
from bench.p1.tools import NotMeasured

ROOT = Path(__file__).resolve().parents[2]
PG = os.environ.get("BENCH_PG", "postgres://postgres@127.0.0.1:5432")
WORKSPACE = "p1bench"
DEPLOYMENT = "stub"


def _fernet_key() -> str:
    from cryptography.fernet import Fernet

    return Fernet.generate_key().decode()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait(predicate, timeout: float, what: str):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.1)


def _redis_ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def eval_command_ready() -> tuple[bool, str]:
    """Whether this checkout has the ``eval start`` command (built by the runs work)."""
    if not (ROOT / "runs" / "management" / "commands" / "eval.py").exists():
        return False, "runs/management/commands/eval.py does not exist yet (eval start is not implemented)"
    return True, ""


class Stack:
    def __init__(
        self, *, database: str = "agentclash_bench", workdir: Path, worker_concurrency: int | None = None
    ):
        self.database = database
        self.workdir = workdir
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.worker_concurrency = worker_concurrency
        self.redis: subprocess.Popen | None = None
        self.worker: subprocess.Popen | None = None
        self.env: dict[str, str] = {}

    # -- plumbing ------------------------------------------------------------------------

    def manage(self, *args: str, timeout: float = 1800, check: bool = True) -> subprocess.CompletedProcess:
        done = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and done.returncode != 0:
            raise RuntimeError(
                f"manage.py {' '.join(args[:3])} exited {done.returncode}: {done.stderr[-1500:] or done.stdout[-1500:]}"
            )
        return done

    def start(self) -> None:
        ready, why = eval_command_ready()
        if not ready:
            raise NotMeasured(why)
        if shutil.which("redis-server") is None:
            raise NotMeasured("redis-server is not installed")
        recreate_database(self.database)
        self.redis_port = free_port()
        self.redis = subprocess.Popen(
            [
                "redis-server",
                "--bind",
                "127.0.0.1",
                "--port",
                str(self.redis_port),
                "--save",
                "",
                "--appendonly",
                "no",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        _wait(lambda: _redis_ping(self.redis_port), 10, "redis-server")
        self.env = dict(
            os.environ,
            DATABASE_URL=f"{PG}/{self.database}",
            CELERY_BROKER_URL=f"redis://127.0.0.1:{self.redis_port}/0",
            # Production-like (README "Configuration"): no DEBUG query log; throwaway keys.
            DEBUG="false",
            SECRET_KEY="bench-p1-" + secrets.token_hex(24),
            FIELD_ENCRYPTION_KEY=_fernet_key(),
            PYTHONUNBUFFERED="1",
        )
        self.manage("migrate", "--noinput")
        self.manage(
            "shell",
            "-c",
            "from django.contrib.auth import get_user_model; "
            "get_user_model().objects.get_or_create(username='bench', defaults={'email': 'bench@example.com'})",
        )
        self.manage(
            "workspace", "create", WORKSPACE, "--owner", "bench", "--allow-private-endpoints", "--json"
        )
        self.start_worker()

    def create_deployment(self, endpoint: str, max_in_flight: int = 16) -> dict:
        done = self.manage(
            "deployment", "create", "--workspace", WORKSPACE, "--name", DEPLOYMENT, "--kind", "openai_chat",
            "--endpoint", endpoint, "--model", "stub", "--max-in-flight", str(max_in_flight),
            "--timeout", "30", "--json",
        )  # fmt: skip
        return json.loads(done.stdout)

    def publish(self, path: Path) -> dict:
        done = self.manage("pack", "publish", str(path), "--workspace", WORKSPACE, "--json")
        return json.loads(done.stdout)

    def start_worker(self) -> None:
        argv = [
            sys.executable, "-m", "celery", "-A", "agentclash_site", "worker", "--loglevel", "WARNING",
            "--without-gossip", "--without-mingle", "--without-heartbeat", "-n", f"bench-{os.getpid()}@%h",
        ]  # fmt: skip
        if self.worker_concurrency:
            argv += ["--concurrency", str(self.worker_concurrency)]
        queues = os.environ.get("BENCH_CELERY_QUEUES")
        if queues:
            argv += ["-Q", queues]
        self.worker_log = open(self.workdir / "worker.log", "ab")  # noqa: SIM115
        self.worker = subprocess.Popen(
            argv,
            cwd=ROOT,
            env=self.env,
            stdout=self.worker_log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def eval_start(
        self, pack: str, *, timeout: float = 3600, repetitions: int = 1
    ) -> tuple[float, dict, int]:
        """Run ``eval start --follow --json``: (elapsed seconds, the document, exit code)."""
        start = time.perf_counter()
        done = self.manage(
            "eval", "start", "--workspace", WORKSPACE, "--pack", pack, "--deployment", DEPLOYMENT,
            "--follow", "--json", "--fail-under", "0", "--repetitions", str(repetitions),
            timeout=timeout, check=False,
        )  # fmt: skip
        elapsed = time.perf_counter() - start
        try:
            doc = json.loads(done.stdout)
        except ValueError:
            raise RuntimeError(
                f"eval start exited {done.returncode} without a JSON document: {done.stderr[-1500:]}"
            ) from None
        return elapsed, doc, done.returncode

    def worker_rss_kib(self) -> int:
        """Resident set size of the worker and all its child processes, in KiB (Linux /proc)."""
        if self.worker is None:
            return 0
        return sum(_rss_kib(pid) for pid in _process_tree(self.worker.pid))

    def stop(self) -> None:
        if self.worker is not None and self.worker.poll() is None:
            os.killpg(self.worker.pid, signal.SIGTERM)
            try:
                self.worker.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.worker.pid, signal.SIGKILL)
                self.worker.wait(timeout=10)
        if self.redis is not None and self.redis.poll() is None:
            self.redis.terminate()
            self.redis.wait(timeout=10)


def _process_tree(pid: int) -> list[int]:
    pids, todo = [], [pid]
    while todo:
        current = todo.pop()
        pids.append(current)
        for task in Path(f"/proc/{current}/task").glob("*/children"):
            with contextlib.suppress(OSError):
                todo.extend(int(c) for c in task.read_text().split())
    return pids


def _rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


class Ours:
    """The P1 leg for this project, as a tool the harness alternates with the peers."""

    name = "AgentClash (ours)"
    key = "ours"

    def __init__(self, cases: int) -> None:
        self.cases = cases
        self.stack: Stack | None = None

    def setup(self, base_url: str, workdir: Path) -> None:
        from bench.p1 import workload

        self.stack = Stack(workdir=workdir / "ours")
        try:
            self.stack.start()
            self.stack.create_deployment(base_url)
            pack = workload.write_pack(workdir / "ours" / "pack.yaml", self.cases)
            self.stack.manage("pack", "validate", str(pack), "--json")
            self.stack.publish(pack)
        except Exception:
            self.stack.stop()
            raise
        self.version = "this checkout"

    def run(self) -> tuple[float, int]:
        assert self.stack is not None
        elapsed, doc, code = self.stack.eval_start(workload_slug())
        status = (doc.get("run") or {}).get("status")
        lanes = doc.get("lanes") or []
        if status != "completed" or len(lanes) != 1:
            raise RuntimeError(
                f"eval start exited {code}: run status {status!r}, {len(lanes)} lanes: {json.dumps(doc)[:600]}"
            )
        counts = lanes[0].get("counts") or {}
        graded = sum(counts.get(k, 0) for k in ("PASSED", "FAILED", "NOT_EVALUATED", "UNAVAILABLE", "ERROR"))
        if graded != self.cases:
            raise RuntimeError(f"eval start graded {graded} cases of {self.cases}: {counts}")
        return elapsed, int(counts.get("PASSED", 0))

    def teardown(self) -> None:
        if self.stack is not None:
            self.stack.stop()


def workload_slug() -> str:
    from bench.p1 import workload

    return workload.PACK_SLUG
