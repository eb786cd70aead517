"""``make run``'s process runner (scripts/devserver.py) refuses to start when an address it
needs is taken, saying which, instead of starting everything and dying with a traceback."""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _devserver():
    spec = importlib.util.spec_from_file_location("devserver", ROOT / "scripts" / "devserver.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _listening() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return sock


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_busy_addresses_names_each_process_whose_port_is_taken():
    devserver = _devserver()
    with _listening() as web, _listening() as judge:
        web_port, judge_port = web.getsockname()[1], judge.getsockname()[1]
        procs = [
            ("web", ["py", "manage.py", "runserver", f"127.0.0.1:{web_port}", "--noreload"]),
            ("worker", ["py", "-m", "celery", "worker"]),
            ("agent", ["py", "examples/agents/hosted_agent.py", "--port", str(_free_port())]),
            ("judge", ["py", "examples/judges/heuristic_judge.py", "--port", str(judge_port)]),
        ]
        lines = devserver.busy_addresses(procs)
    assert [line.split(":")[0].split()[0] for line in lines] == ["web", "judge"]
    assert lines[0].startswith(f"web cannot listen on 127.0.0.1:{web_port}: ")
    assert devserver.busy_addresses(procs) == []  # the sockets are closed


def test_make_runs_runner_starts_nothing_when_the_web_address_is_taken():
    with _listening() as taken:
        port = taken.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "scripts/devserver.py"],
            cwd=ROOT,
            env={**os.environ, "BIND": f"127.0.0.1:{port}"},
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 1
    assert f"web cannot listen on 127.0.0.1:{port}" in result.stderr
    assert "nothing started" in result.stderr
    assert "starting" not in result.stdout
