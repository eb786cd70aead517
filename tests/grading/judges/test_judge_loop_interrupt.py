"""An interrupt during judge calls shuts the judge loop down cleanly (grading.judges.loop):
the calls in flight are cancelled and finish their cancellation, the client's sessions are
closed, and the interrupt goes on: ``grade --json`` prints its interrupted object, exit 2,
with nothing on stderr about destroyed tasks or unclosed sessions. A Celery task's soft time
limit (SoftTimeLimitExceeded raised from a signal handler while the task waits on a judge
call) stops its call the same way."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from celery.exceptions import SoftTimeLimitExceeded

from grading.judges.loop import LoopThread
from tests.fakes.judge_provider import hang
from tests.processes import wait_until

ROOT = Path(__file__).resolve().parents[3]
DEMO = ROOT / "examples" / "packs" / "demo"
INTERRUPTED = {"error": {"code": "interrupted", "message": "interrupted before the command finished"}}


def test_sigint_to_grade_json_during_a_judge_call_shuts_the_loop_down_cleanly(fake, tmp_path):
    fake.default = hang(600)  # accepts the request and never answers (until the fixture stops)
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path}/unused.sqlite3",
        "CELERY_BROKER_URL": "memory://",
        "PYTHONUNBUFFERED": "1",
    }
    argv = [sys.executable, "manage.py", "grade", str(DEMO / "pack.yaml"), "--input-set", "replies"]
    argv += ["--results", str(DEMO / "results" / "replies.jsonl"), "--json"]
    argv += ["--judge-provider", "openai", "--judge-base-url", fake.base_url, "--judge-api-key", "k"]
    child = subprocess.Popen(
        argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        wait_until(lambda: fake.calls or child.poll() is not None, timeout=60, message="a judge request")
        assert child.poll() is None, child.communicate()
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    assert child.returncode == 2, err
    assert json.loads(out) == INTERRUPTED
    assert err == "interrupted\n"  # no "Task was destroyed", "Unclosed client session", traceback


def _main_thread_waiting() -> bool:
    """Whether the main thread is blocked waiting (``Condition.wait``) on a call's future."""
    frame = sys._current_frames().get(threading.main_thread().ident)
    names = []
    while frame is not None:
        names.append(frame.f_code.co_name)
        frame = frame.f_back
    return bool(names) and names[0] == "wait" and "result" in names


def test_a_soft_time_limit_while_waiting_cancels_the_call_before_it_goes_on():
    """As in a prefork Celery worker: SIGUSR1 to the task's (main) thread raises
    SoftTimeLimitExceeded while it waits in ``run``. The call is cancelled, its cleanup has
    run when the exception reaches the caller, and the loop keeps no task."""
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals are delivered to the main thread")
    started, unwound = threading.Event(), threading.Event()

    async def forever(client):
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            unwound.set()

    def raise_soft_limit(signum, frame):
        raise SoftTimeLimitExceeded()

    def fire():
        started.wait(30)
        wait_until(_main_thread_waiting, timeout=30, interval=0.01, message="run() waiting")
        signal.pthread_kill(threading.main_thread().ident, signal.SIGUSR1)

    previous = signal.signal(signal.SIGUSR1, raise_soft_limit)
    loop = LoopThread(name="test-judge-loop")
    firing = threading.Thread(target=fire, daemon=True)
    try:
        firing.start()
        with pytest.raises(SoftTimeLimitExceeded):
            loop.run(forever)
        assert unwound.is_set()  # cancelled and finished before the exception went on
        tasks = asyncio.run_coroutine_threadsafe(_other_tasks(), loop._loop).result(10)
        assert tasks == set()
    finally:
        signal.signal(signal.SIGUSR1, previous)
        firing.join(30)
        loop.close()
    assert loop._loop.is_closed()


async def _other_tasks() -> set[asyncio.Task]:
    return asyncio.all_tasks() - {asyncio.current_task()}


def test_close_cancels_the_calls_in_flight_and_their_callers_get_cancelled():
    """``close`` with another thread's call in flight: the call is cancelled and unwinds, its
    caller is woken (not left waiting on a loop that is gone), the client is closed."""
    started, unwound = threading.Event(), threading.Event()
    outcome: list[BaseException | str] = []

    async def forever(client):
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            unwound.set()

    loop = LoopThread(name="test-judge-loop")

    def caller():
        try:
            loop.run(forever)
            outcome.append("returned")
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=caller, daemon=True)
    thread.start()
    assert started.wait(30)
    client = loop._client
    loop.close()
    thread.join(30)
    assert not thread.is_alive(), "the caller still waits on a closed loop"
    assert unwound.is_set()
    assert len(outcome) == 1 and isinstance(outcome[0], concurrent.futures.CancelledError)
    assert client is not None and client.closed
    assert loop._loop.is_closed()
