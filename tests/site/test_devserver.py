"""``make run``'s process runner (scripts/devserver.py) refuses to start when an address it
needs is taken, saying which, instead of starting everything and dying with a traceback."""

from __future__ import annotations

import importlib.util
import os
import select
import socket
import subprocess
import sys
from pathlib import Path

import pytest

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


def test_make_run_checks_the_addresses_before_it_migrates_and_sets_up_the_demo():
    """A second ``make run`` ran ``demo setup``, which printed "AgentClash is ready at
    http://127.0.0.1:8001/", and only then said that nothing would start."""
    environ = {k: v for k, v in os.environ.items() if k not in ("BIND", "PUBLIC_BASE_URL")}
    done = subprocess.run(
        ["make", "-n", "run"], cwd=ROOT, env=environ, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    check = next(i for i, line in enumerate(lines) if "scripts/devserver.py --check" in line)
    migrate = next(i for i, line in enumerate(lines) if "manage.py migrate" in line)
    assert check < migrate


def test_the_check_names_a_taken_address_and_starts_nothing():
    with _listening() as taken:
        port = taken.getsockname()[1]
        busy = subprocess.run(
            [sys.executable, "scripts/devserver.py", "--check"],
            cwd=ROOT, env={**os.environ, "BIND": f"127.0.0.1:{port}"}, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert busy.returncode == 1
    assert f"web cannot listen on 127.0.0.1:{port}" in busy.stderr
    assert "starting" not in busy.stdout


def test_the_hint_offers_bind_only_for_the_web_server(monkeypatch, capsys):
    """A second ``make run`` with its own BIND still finds the example agent's and judge's
    fixed ports taken: the hint said to choose another BIND, which cannot help there."""
    devserver = _devserver()
    monkeypatch.setattr(
        devserver, "busy_addresses", lambda procs: ["agent cannot listen on 127.0.0.1:8766: x"]
    )
    assert devserver.main(["--check"]) == 1
    err = capsys.readouterr().err
    assert "BIND" not in err
    assert "the agent listens on a fixed port: one make run per machine" in err
    assert devserver.busy_hint(["web", "agent", "judge"]).endswith(
        "with BIND=127.0.0.1:8001; the agent and judge listen on fixed ports: one make run per machine"
    )


def test_the_check_starts_nothing_when_every_address_is_free(monkeypatch):
    devserver = _devserver()
    monkeypatch.setattr(devserver, "busy_addresses", lambda procs: [])
    monkeypatch.setattr(devserver.subprocess, "Popen", lambda *a, **k: pytest.fail("started a process"))
    assert devserver.main(["--check"]) == 0


# A stand-in for the Celery worker: a leader that stops its own child on SIGTERM. The child
# records a SIGTERM it receives directly: the runner used to signal the whole process group,
# so the worker's pool processes died under it and every Ctrl-C of make run logged
# "ERROR/MainProcess Process 'ForkPoolWorker-2' ... exited with 'signal 15 (SIGTERM)'".
LEADER = """
import signal, subprocess, sys
def stop(*_):
    child.communicate("stop\\n")  # the child's own way to stop
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
child = subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]], stdin=subprocess.PIPE, text=True)
signal.pause()
"""
CHILD = """
import pathlib, signal, sys
marker = pathlib.Path(sys.argv[1])
def term(*_):
    marker.write_text("SIGTERM")
    sys.exit(1)
signal.signal(signal.SIGTERM, term)
print("ready", flush=True)
sys.stdin.readline()
"""
ORPHANING = """
import subprocess, sys
orphan = subprocess.Popen([sys.executable, "-c", "import signal; signal.signal(signal.SIGTERM, signal.SIG_IGN); signal.pause()"])
print("ready", orphan.pid, flush=True)
import signal; signal.pause()
"""


def _start(code: str, *args: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", code, *args], start_new_session=True, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().split()
    assert line[:1] == ["ready"]
    proc.ready_args = line[1:]  # type: ignore[attr-defined]
    return proc


def _exited(pidfd: int) -> bool:
    """Whether the process behind ``pidfd`` ended: the descriptor turns readable when it does
    (a SIGKILL is delivered, not finished, when kill returns; the 30 s bound only keeps a
    broken runner from hanging the suite)."""
    return select.select([pidfd], [], [], 30)[0] == [pidfd]


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def test_stopping_signals_each_leader_which_stops_its_own_children(tmp_path):
    devserver = _devserver()
    marker = tmp_path / "child-got-sigterm"
    leader = _start(LEADER, CHILD, str(marker))
    devserver.stop_children([("worker", leader)], grace=30)
    assert leader.returncode == 0
    assert not marker.exists()
    assert not _group_alive(leader.pid)


def test_stopping_kills_what_a_leader_leaves_behind_in_its_group():
    devserver = _devserver()
    leader = _start(ORPHANING)
    pidfd = os.pidfd_open(int(leader.ready_args[0]))
    try:
        assert select.select([pidfd], [], [], 0)[0] == []  # the orphan-to-be runs
        devserver.stop_children([("agent", leader)], grace=30)
        assert leader.returncode == -15
        assert _exited(pidfd)
    finally:
        os.close(pidfd)


def _make_run_lines(**env: str) -> list[str]:
    environ = {k: v for k, v in os.environ.items() if k not in ("BIND", "PUBLIC_BASE_URL")}
    done = subprocess.run(
        ["make", "-n", "run"], cwd=ROOT, env={**environ, **env}, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return [
        line
        for line in done.stdout.splitlines()
        if "demo setup" in line or ("devserver.py" in line and "--check" not in line)
    ]


def test_bind_moves_the_public_base_url_with_the_web_server():
    """``BIND=127.0.0.1:8001 make run`` printed "ready at http://127.0.0.1:8000/" and gave
    runs and the agents' signed asset links that address: another server's, or nobody's."""
    lines = _make_run_lines(BIND="127.0.0.1:8001")
    assert len(lines) == 2
    assert all("PUBLIC_BASE_URL=http://127.0.0.1:8001 " in line for line in lines)
    default = _make_run_lines()
    assert all("PUBLIC_BASE_URL=http://127.0.0.1:8000 " in line for line in default)
    chosen = _make_run_lines(BIND="127.0.0.1:8001", PUBLIC_BASE_URL="https://evals.example.com")
    assert all("PUBLIC_BASE_URL=https://evals.example.com " in line for line in chosen)
