"""Helpers for tests that drive real processes: workers, private redis-servers.

Everything polls with a bounded deadline; nothing sleeps for a fixed time and hopes.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from django.db import connection

ROOT = Path(__file__).resolve().parents[1]


def wait_until(
    predicate: Callable[[], Any], *, timeout: float, interval: float = 0.1, message: str = ""
) -> Any:
    """Poll ``predicate`` until it returns a truthy value or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message or predicate}")
        time.sleep(interval)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_database_url() -> str:
    """A DATABASE_URL pointing child processes at the test database of this session."""
    s = connection.settings_dict
    if s["ENGINE"] != "django.db.backends.postgresql":
        raise RuntimeError("process tests need PostgreSQL")
    user = s.get("USER") or "postgres"
    host = s.get("HOST") or "127.0.0.1"
    port = s.get("PORT") or "5432"
    return f"postgres://{user}@{host}:{port}/{s['NAME']}"


def child_env(**overrides: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"DATABASE_URL": test_database_url(), "PYTHONUNBUFFERED": "1"})
    env.update(overrides)
    return env


def sqlite_env(tmp_path: Path) -> dict[str, str]:
    """The environment of a child process on the SQLite file ``tmp_path/lite.sqlite3``."""
    return {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'lite.sqlite3'}",
        "DJANGO_SETTINGS_MODULE": "agentclash_site.settings",
        "PYTHONUNBUFFERED": "1",
    }


def manage_on_sqlite(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``manage.py *args`` in a child process on the SQLite file of ``sqlite_env`` as it is
    (an empty file is a database that was never migrated)."""
    argv = [sys.executable, "manage.py", *args]
    return subprocess.run(
        argv, cwd=ROOT, env=sqlite_env(tmp_path), capture_output=True, text=True, timeout=300
    )


def run_on_sqlite(tmp_path: Path, script: str) -> Any:
    """Run ``script`` with ``manage.py shell -c`` in a child process on a fresh, migrated
    SQLite file (the embedded default of ``make run``); the JSON of its last line of stdout."""
    import json

    env = sqlite_env(tmp_path)
    manage = [sys.executable, "manage.py"]
    for argv in ([*manage, "migrate", "--noinput", "-v", "0"], [*manage, "shell", "-c", script]):
        done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@contextmanager
def redis_server(
    port: int | None = None, *, appendonly: bool = False, dir: Path | None = None
) -> Iterator[int]:
    """A private redis-server on a free loopback port; stopped on exit."""
    if shutil.which("redis-server") is None:
        raise RuntimeError("redis-server is not installed (make test installs it)")
    port = port or free_port()
    args = ["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--save", ""]
    args += ["--appendonly", "yes" if appendonly else "no"]
    if dir is not None:
        args += ["--dir", str(dir)]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: _redis_ping(port), timeout=10, message=f"redis on {port}")
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def _redis_ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


class Worker:
    """A real ``celery worker`` process (on its own queue when ``queues`` is given; with beat
    and its own schedule file when ``beat``), in its own process group."""

    def __init__(
        self,
        *,
        broker_url: str,
        queues: str | None,
        concurrency: int = 1,
        beat: bool = False,
        schedule_path: Path | None = None,
        env: dict[str, str] | None = None,
        log_path: Path | None = None,
    ) -> None:
        argv = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "agentclash_site",
            "worker",
            "--loglevel",
            "INFO",
            "--concurrency",
            str(concurrency),
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "-n",
            f"test-{os.getpid()}-{time.monotonic_ns()}@%h",
        ]
        if queues:
            argv += ["-Q", queues]
        if beat:
            argv.append("-B")
            if schedule_path is not None:
                argv += ["-s", str(schedule_path)]
        self.log_path = log_path
        self._log = open(log_path, "wb") if log_path else subprocess.DEVNULL  # noqa: SIM115
        self.proc = subprocess.Popen(
            argv,
            cwd=ROOT,
            env=child_env(CELERY_BROKER_URL=broker_url, **(env or {})),
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def kill(self) -> None:
        """SIGKILL the whole process group, as a crashed host would."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()
        if self._log is not subprocess.DEVNULL:
            self._log.close()

    def log(self) -> str:
        """The end of the worker's log (for failure messages)."""
        return self.log_path.read_text(errors="replace")[-4000:] if self.log_path else ""


def waiting_on_a_lock() -> bool:
    """Whether some session of this PostgreSQL test database waits on a lock (a second
    thread queued behind the first's row lock, in the lock-order tests)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()"
        )
        return cursor.fetchone()[0] > 0
