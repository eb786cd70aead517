"""The embedded default of ``make run`` (SQLite and Celery's filesystem broker, no servers)
with real processes: a run started with ``eval start --follow`` completes, a cancel from
another process ends it (and nothing is written into it afterwards), and a worker SIGKILLed
mid-run loses no case and grades none twice: on SQLite no row locks and no claim keeper,
the claims of the dead worker expire and the beat sweeper gives them out again.

Each test has its own SQLite file and broker folders (``tests.settings_filesystem_broker``);
polls use bounded deadlines.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.agent_server import FakeAgent, hang, ok, slow
from tests.processes import ROOT, Worker, run_on_sqlite, wait_until
from tests.runs.test_faults import FAST_RECOVERY

pytestmark = pytest.mark.slow

CASES = 24
SETUP = """
import json
from agentclash_site.workspaces.models import Workspace
from tests.runs.runfactory import hosted, publish

ws = Workspace.objects.create(slug="lite", name="Lite")
publish(ws, cases=%d)
hosted(ws, %r, max_in_flight=4, timeout_seconds=%d, max_attempts=2)
print(json.dumps({"ok": True}))
"""


class Lite:
    """The SQLite file and broker folders of one test, and its child processes' environment."""

    def __init__(self, tmp: Path, agent_url: str, *, timeout: int = 2) -> None:
        self.db = tmp / "lite.sqlite3"
        assert run_on_sqlite(tmp, SETUP % (CASES, agent_url, timeout)) == {"ok": True}  # migrate, set up
        self.tmp = tmp
        self.env = {
            "DATABASE_URL": f"sqlite:///{self.db}",
            "DJANGO_SETTINGS_MODULE": "tests.settings_filesystem_broker",
            "TEST_BROKER_DIR": str(tmp / "broker"),
            **FAST_RECOVERY,
        }

    def worker(self, name: str) -> Worker:
        # make run's worker: one process (SQLite serialises writers), with beat
        return Worker(
            broker_url="filesystem://",
            queues=None,
            concurrency=1,
            beat=True,
            schedule_path=self.tmp / f"{name}-beat",
            env=self.env,
            log_path=self.tmp / f"{name}.log",
        )

    def manage(self, *args: str) -> subprocess.Popen[str]:
        from tests.processes import child_env

        return subprocess.Popen(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=child_env(CELERY_BROKER_URL="filesystem://", **self.env),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def follow(self) -> subprocess.Popen[str]:
        return self.manage(
            "eval",
            "start",
            "--workspace",
            "lite",
            "--pack",
            "echo",
            "--deployment",
            "agent",
            "--follow",
            "--json",
        )

    def query(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        with closing(sqlite3.connect(self.db, timeout=30)) as conn:
            return conn.execute(sql, params).fetchall()

    def one(self, sql: str, *params: Any) -> Any:
        return self.query(sql, *params)[0][0]

    def graded(self) -> int:
        return self.one("SELECT count(*) FROM runs_runitem WHERE status <> ''")


def _finish(proc: subprocess.Popen[str], worker: Worker) -> tuple[int, dict[str, Any]]:
    try:
        out, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"eval start --follow did not end\n{err[-2000:]}\n{worker.log()}") from None
    assert out.strip(), f"{err[-2000:]}\n{worker.log()}"
    return proc.returncode, json.loads(out)


def _end(proc: subprocess.Popen[str] | None) -> None:
    if proc is not None and proc.poll() is None:
        proc.kill()
        proc.communicate()


def _answer(recorded: Any) -> dict[str, Any]:
    return {"final_output": recorded.json["challenge"]["instructions"].split()[-1]}


def _statuses(doc: dict[str, Any]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for case in doc["cases"]:
        counts[case["status"]] = counts.get(case["status"], 0) + 1
    return counts


def _no_duplicate_attempt(agent: FakeAgent) -> None:
    sent = [(r.json["item_id"], r.json["attempt"]) for r in agent.requests]
    assert len(set(sent)) == len(sent), "an agent saw the same attempt of an item twice"


def test_a_run_completes_and_a_cancel_ends_the_next_one(tmp_path):
    with FakeAgent() as agent:
        agent.default = slow(0.3, ok(_answer))
        lite = Lite(tmp_path, agent.url, timeout=60)
        worker = lite.worker("worker")
        follow = None
        try:
            code, doc = _finish(lite.follow(), worker)
            assert (code, doc["run"]["status"], _statuses(doc)) == (0, "completed", {"PASSED": CASES})

            # the next run: four answers, then calls that hang until the cancel
            agent.default = hang()
            agent.queue(*[ok(_answer)] * 4)
            follow = lite.follow()
            wait_until(lambda: lite.graded() >= CASES + 4, timeout=60, message=f"4 graded\n{worker.log()}")
            wait_until(
                lambda: lite.one("SELECT count(*) FROM runs_runitem WHERE state = 'claimed'") == 4,
                timeout=30,
                message="four calls in flight",
            )
            second = lite.one("SELECT id FROM runs_run ORDER BY created_at DESC LIMIT 1")
            script = f"from runs.models import Run; from runs.services.operations import run_cancel; run_cancel(run=Run.objects.get(pk='{second}'))"
            cancel = lite.manage("shell", "-c", script)
            assert cancel.wait(timeout=120) == 0, cancel.stderr.read()
            code, doc = _finish(follow, worker)
            # the dispatcher leaves its slice within CANCEL_CHECK_SECONDS and lets go of its lease
            wait_until(
                lambda: lite.one("SELECT count(*) FROM runs_runlane WHERE dispatch_until IS NOT NULL") == 0,
                timeout=60,
                message="the dispatcher to leave",
            )
        finally:
            worker.stop()
            _end(follow)
        _no_duplicate_attempt(agent)
    # interfaces.md §6, first match wins: no infra / config error and not failed, and the 4
    # graded cases all passed (pass rate 1.0, not below --fail-under): 0
    assert (code, doc["run"]["status"]) == (0, "cancelled")
    assert _statuses(doc) == {"PASSED": 4, "cancelled": CASES - 4}
    assert doc["lanes"][0]["counts"]["PASSED"] == 4 and doc["lanes"][0]["counts"]["cancelled"] == CASES - 4
    # nothing was written into the cancelled run after the cancel
    rows = lite.query("SELECT state, status FROM runs_runitem WHERE run_id = ?", second.replace("-", ""))
    assert sorted(r[1] or "cancelled" for r in rows) == sorted(c["status"] for c in doc["cases"])
    assert lite.one("SELECT items_open FROM runs_run WHERE id = ?", second.replace("-", "")) == 0


def test_a_worker_killed_mid_run_loses_no_case_and_grades_none_twice(tmp_path):
    with FakeAgent() as agent:
        agent.default = slow(0.4, ok(_answer))
        lite = Lite(tmp_path, agent.url)
        first = lite.worker("first")
        follow = lite.follow()
        try:
            wait_until(lambda: lite.graded() >= 4, timeout=60, message=f"4 graded\n{first.log()}")
            wait_until(
                lambda: lite.one("SELECT count(*) FROM runs_runitem WHERE state = 'claimed'"),
                timeout=10,
                message="a claim",
            )
            first.kill()
        except BaseException:
            _end(follow)
            raise
        finally:
            first.stop()
        assert lite.one("SELECT count(*) FROM runs_runitem WHERE state = 'claimed'") > 0
        assert lite.graded() < CASES
        second = lite.worker("second")
        try:
            code, doc = _finish(follow, second)
        finally:
            second.stop()
            _end(follow)
        _no_duplicate_attempt(agent)
        assert agent.calls > CASES  # the lost claims were sent again
    assert (code, doc["run"]["status"], _statuses(doc)) == (0, "completed", {"PASSED": CASES})
    assert doc["lanes"][0]["counts"]["PASSED"] == CASES
    attempts = dict(lite.query("SELECT category || ':' || error_code, count(*) FROM runs_attempt GROUP BY 1"))
    assert attempts.pop("ok:") == CASES  # one ok attempt per case: none graded twice
    assert set(attempts) <= {"infra_error:claim_expired"}
    assert (
        lite.one("SELECT counters FROM runs_runlane")
        and json.loads(lite.one("SELECT counters FROM runs_runlane"))["tally"]["executions"] == CASES
    )
