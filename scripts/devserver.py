#!/usr/bin/env python
"""Run the web server, a Celery worker with beat, and the example servers together.

Used by ``make run``. Ctrl-C (or any process exiting) stops them all. On the embedded
default (SQLite) the worker runs with concurrency 1 so writers never contend.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable


def commands() -> list[tuple[str, list[str]]]:
    sqlite = not os.environ.get("DATABASE_URL", "").startswith(("postgres://", "postgresql://"))
    concurrency = "1" if sqlite else os.environ.get("WORKER_CONCURRENCY", "2")
    procs = [
        ("web", [PY, "manage.py", "runserver", os.environ.get("BIND", "127.0.0.1:8000"), "--noreload"]),
        (
            "worker",
            [
                PY,
                "-m",
                "celery",
                "-A",
                "agentclash_site",
                "worker",
                "-B",
                "--concurrency",
                concurrency,
                "--loglevel",
                "INFO",
                "--without-gossip",
                "--without-mingle",
            ],
        ),
    ]
    extra = ROOT / "scripts" / "devserver_extra.py"
    if extra.exists():
        namespace: dict[str, object] = {}
        exec(compile(extra.read_text(), str(extra), "exec"), namespace)  # noqa: S102 - our own file
        procs.extend(namespace["EXTRA"])  # type: ignore[arg-type]
    return procs


def listen_address(name: str, argv: list[str]) -> tuple[str, int] | None:
    """The loopback address a process will listen on: the web server's ``host:port``
    argument, an example server's ``--port``."""
    if name == "web":
        host, _, port = argv[3].rpartition(":")
        return (host or "127.0.0.1").strip("[]"), int(port)
    if "--port" in argv:
        return "127.0.0.1", int(argv[argv.index("--port") + 1])
    return None


def busy_addresses(procs: list[tuple[str, list[str]]]) -> list[str]:
    """One line per process whose address something else listens on already (a second
    ``make run``, another program): each used to start and die with a traceback, taking
    the others down with it."""
    lines = []
    for name, argv in procs:
        address = listen_address(name, argv)
        if address is None:
            continue
        with socket.socket(socket.AF_INET6 if ":" in address[0] else socket.AF_INET) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(address)
            except OSError as exc:
                lines.append(f"{name} cannot listen on {address[0]}:{address[1]}: {exc.strerror}")
    return lines


def busy_hint(names: list[str]) -> str:
    """What to do about the taken addresses of ``names``: BIND moves only the web server; the
    example agent and judge listen on fixed ports (the demo deployments call them there), so
    a second ``make run`` on the machine cannot start them whatever its BIND."""
    hint = "nothing started: stop what listens there (another make run?)"
    if "web" in names:
        hint += ", or for the web server choose another address with BIND=127.0.0.1:8001"
    fixed = [name for name in names if name != "web"]
    if fixed:
        ports = "listens on a fixed port" if len(fixed) == 1 else "listen on fixed ports"
        hint += f"; the {' and '.join(fixed)} {ports}: one make run per machine"
    return hint


def main(argv: list[str] | None = None) -> int:
    """Start everything; with ``--check`` only say whether every address is free (exit 0)
    or name each taken one (exit 1). ``make run`` checks first, so that a second ``make run``
    stops before ``demo setup`` prints "AgentClash is ready at ..." for a server that will
    not start."""
    os.chdir(ROOT)
    check_only = "--check" in (sys.argv[1:] if argv is None else argv)
    procs = commands()
    busy = busy_addresses(procs)
    if busy:
        for line in busy:
            print(f"[devserver] {line}", file=sys.stderr)
        print(f"[devserver] {busy_hint([line.split()[0] for line in busy])}", file=sys.stderr)
        return 1
    if check_only:
        return 0
    children: list[tuple[str, subprocess.Popen[bytes]]] = []
    for name, argv in procs:
        print(f"[devserver] starting {name}: {' '.join(argv[1:])}", flush=True)
        children.append((name, subprocess.Popen(argv, start_new_session=True)))

    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    exit_code = 0
    while not stopping:
        for name, proc in children:
            if proc.poll() is not None:
                print(f"[devserver] {name} exited with {proc.returncode}; stopping the rest", flush=True)
                exit_code = proc.returncode or 1
                stopping = True
                break
        time.sleep(0.3)
    stop_children(children)
    print("[devserver] stopped", flush=True)
    return exit_code


def stop_children(children: list[tuple[str, subprocess.Popen]], grace: float = 10.0) -> None:
    """SIGTERM each child (the leader of its own session), wait up to ``grace`` seconds, then
    SIGKILL whatever is left in its process group: a leader that did not stop, or a process
    it left behind. Only the leader gets the SIGTERM: signalled as a group, a Celery worker's
    pool processes died under it and each Ctrl-C logged them as an ERROR."""
    for _, proc in children:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace
    for _, proc in children:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        with contextlib.suppress(ProcessLookupError, PermissionError):  # the group is empty
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


if __name__ == "__main__":
    sys.exit(main())
