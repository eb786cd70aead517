"""Run a test command over returned files inside bubblewrap (grading.md §3.7).

``run_sandboxed`` never raises for the command's behaviour: a sandbox that cannot start
is ``SandboxResult.started == False`` (the caller reports ERROR / infra_error,
``sandbox_unavailable``).
"""

from __future__ import annotations

import contextlib
import math
import os
import resource
import selectors
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from . import jsontext

KEEP_BYTES = 64 * 1024
FILE_SIZE_LIMIT = 16 * 1024 * 1024
MAX_PROCESSES = 64
BWRAP_ENV = "AGENTCLASH_BWRAP"
_RO_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/etc", "/opt")
_MEMORY_MARKERS = (
    "MemoryError",
    "Cannot allocate memory",
    "std::bad_alloc",
    "out of memory",
    "Out of memory",
)


@dataclass(slots=True)
class SandboxResult:
    started: bool
    exit_code: int | None = None
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    memory_exceeded: bool = False
    duration_seconds: float = 0.0
    error: str = ""
    notes: list[str] = field(default_factory=list)


def bwrap_path(explicit: str | None = None) -> str | None:
    candidate = explicit or os.environ.get(BWRAP_ENV) or shutil.which("bwrap") or "/usr/bin/bwrap"
    if os.path.isabs(candidate):
        return candidate if os.access(candidate, os.X_OK) else None
    return shutil.which(candidate)


def _safe_join(root: str, rel: str) -> str | None:
    rel = rel.replace("\\", "/").lstrip("/")
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if not parts or any(p == ".." for p in parts):
        return None
    return os.path.join(root, *parts)


def _limits(timeout_s: float, memory_mb: int):  # type: ignore[no-untyped-def]
    cpu = int(math.ceil(timeout_s)) + 1
    mem = int(memory_mb) * 1024 * 1024

    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
        resource.setrlimit(resource.RLIMIT_NPROC, (MAX_PROCESSES, MAX_PROCESSES))
        resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT, FILE_SIZE_LIMIT))

    return apply


def _tail(buf: bytearray) -> str:
    return bytes(buf[-KEEP_BYTES:]).decode("utf-8", "replace")


def run_sandboxed(
    files: Mapping[str, bytes],
    command: str,
    *,
    timeout_ms: int = 30000,
    memory_mb: int = 512,
    workdir_inside: str = "/workspace",
    bwrap: str | None = None,
) -> SandboxResult:
    """Run ``sh -c command`` in a fresh directory holding ``files``; remove it afterwards."""
    exe = bwrap_path(bwrap)
    if exe is None:
        return SandboxResult(started=False, error="bubblewrap (bwrap) is not installed or not executable")
    inside = (
        workdir_inside
        if workdir_inside.startswith("/") and workdir_inside not in ("/", "/proc", "/dev")
        else "/workspace"
    )
    root = tempfile.mkdtemp(prefix="agentclash-sbx-")
    try:
        notes = []
        for rel, data in files.items():
            target = _safe_join(root, rel)
            if target is None:
                notes.append(f"skipped unsafe path {rel!r}")
                continue
            try:
                os.makedirs(os.path.dirname(target), exist_ok=True)
                with open(target, "wb") as fh:
                    fh.write(data)
            except OSError as exc:  # ``a`` and ``a/b`` both returned: one of them cannot exist
                notes.append(f"skipped path {rel!r}: {exc.strerror or exc}")
        os.chmod(root, 0o777)  # noqa: S103 - the sandbox user must write its own work dir
        return _run(exe, root, inside, command, timeout_ms / 1000.0, memory_mb, notes)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _argv(exe: str, root: str, inside: str, command: str, status_fd: int) -> list[str]:
    argv = [exe, "--unshare-all", "--die-with-parent", "--new-session", "--uid", "65534", "--gid", "65534"]
    for d in _RO_DIRS:
        argv += ["--ro-bind-try", d, d]
    argv += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--bind", root, inside, "--chdir", inside]  # noqa: S108 - a private tmpfs inside the sandbox
    argv += ["--json-status-fd", str(status_fd), "/bin/sh", "-c", command]
    return argv


def _run(
    exe: str, root: str, inside: str, command: str, timeout_s: float, memory_mb: int, notes: list[str]
) -> SandboxResult:
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": inside, "LANG": "C.UTF-8", "TMPDIR": "/tmp"}  # noqa: S108 - the sandbox's own private tmpfs
    status_r, status_w = os.pipe()
    started_at = time.monotonic()
    try:
        proc = subprocess.Popen(
            _argv(exe, root, inside, command, status_w),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            pass_fds=(status_w,),
            start_new_session=True,
            preexec_fn=_limits(timeout_s, memory_mb),  # rlimits must be set before exec
        )
    except OSError as exc:
        os.close(status_r)
        os.close(status_w)
        return SandboxResult(started=False, error=f"cannot start bubblewrap: {exc}")
    os.close(status_w)
    out, err, status = bytearray(), bytearray(), bytearray()
    sel = selectors.DefaultSelector()
    assert proc.stdout is not None and proc.stderr is not None
    sel.register(proc.stdout, selectors.EVENT_READ, out)
    sel.register(proc.stderr, selectors.EVENT_READ, err)
    sel.register(status_r, selectors.EVENT_READ, status)
    deadline = started_at + timeout_s
    timed_out = False
    open_streams = 3
    while open_streams:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            timed_out = True
            break
        for key, _ in sel.select(timeout=min(remaining, 0.5)):
            fd = key.fd if isinstance(key.fileobj, int) else key.fileobj.fileno()  # type: ignore[union-attr]
            chunk = os.read(fd, 65536)
            if not chunk:
                sel.unregister(key.fileobj)
                open_streams -= 1
                continue
            buf: bytearray = key.data
            buf += chunk
            if len(buf) > 2 * KEEP_BYTES:
                del buf[: len(buf) - KEEP_BYTES]
    if timed_out:
        _kill(proc)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        _kill(proc)
        proc.wait()
    sel.close()
    os.close(status_r)
    proc.stdout.close()
    proc.stderr.close()
    duration = time.monotonic() - started_at
    child_started, exit_code = _status(bytes(status))
    stderr_text = _tail(err)
    if not child_started and not timed_out:
        return SandboxResult(
            started=False,
            error=f"bubblewrap could not create the sandbox: {stderr_text.strip()[:300] or f'exit {proc.returncode}'}",
            duration_seconds=duration,
        )
    code = exit_code if exit_code is not None else proc.returncode
    cpu_killed = code is not None and (
        code in (128 + signal.SIGXCPU, -signal.SIGXCPU, 128 + signal.SIGKILL, -signal.SIGKILL)
    )
    memory = any(m in stderr_text for m in _MEMORY_MARKERS) or (
        code is not None
        and code in (128 + signal.SIGSEGV, -signal.SIGSEGV)
        and "Segmentation" not in stderr_text
    )
    return SandboxResult(
        started=True,
        exit_code=code,
        stdout=_tail(out),
        stderr=stderr_text,
        timed_out=timed_out or cpu_killed,
        memory_exceeded=memory and not timed_out,
        duration_seconds=duration,
        notes=notes,
    )


def _kill(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _status(data: bytes) -> tuple[bool, int | None]:
    started, code = False, None
    for line in data.decode("utf-8", "replace").splitlines():
        try:
            obj = jsontext.loads(line)
        except ValueError:
            continue
        if "child-pid" in obj:
            started = True
        if "exit-code" in obj:
            code = obj["exit-code"]
    return started, code
