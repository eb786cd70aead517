"""``eval start --follow`` when no worker takes the run: a hint line on stderr (how to start
one), at 30 s and once more at 10 min, never on stdout; the document and exit code as before.

A fake clock stands in for the time source: each wait between polls moves it on, nothing
sleeps, and a wait can cancel the run to end the follow."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from runs.management.commands import eval as eval_command
from runs.models import Run, RunItem
from runs.services.deployments import deployment_create
from runs.services.operations import run_cancel
from tests.runs.runfactory import create_run, hosted, publish

pytestmark = pytest.mark.django_db

STEP = 5.0  # fake seconds per wait between polls


class FakeTime:
    """``clock`` and ``sleep`` for ``Command``: a wait moves the clock on by STEP; once it
    reaches ``finish_at`` the newest run is cancelled (a finished status ends the follow)."""

    def __init__(self, finish_at: float) -> None:
        self.now = 1000.0
        self.finish_at = self.now + finish_at
        self.waits = 0

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.waits += 1
        assert self.waits < 10_000, "the follow never ended"
        self.now += STEP
        if self.now >= self.finish_at:
            run = Run.objects.order_by("-created_at").first()
            if not run.is_finished:
                run_cancel(run=run, reason="test: the follow ends")


@pytest.fixture
def fake_time(monkeypatch):
    def install(finish_at: float) -> FakeTime:
        fake = FakeTime(finish_at)
        monkeypatch.setattr(eval_command.Command, "clock", staticmethod(fake.clock))
        monkeypatch.setattr(eval_command.Command, "sleep", staticmethod(fake.sleep))
        # poll (the fake sleep) rather than wait for a NOTIFY on PostgreSQL
        monkeypatch.setattr(eval_command, "_listen", lambda: False)
        return fake

    return install


def _follow_cli(*extra: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = 0
    try:
        call_command(
            "eval",
            "start",
            "--workspace",
            "acme",
            "--pack",
            "echo",
            "--deployment",
            "agent",
            "--follow",
            *extra,
            stdout=out,
            stderr=err,
        )
    except SystemExit as exc:
        code = exc.code
    return code, out.getvalue(), err.getvalue()


def _hints(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("no worker has picked up run")]


@pytest.mark.parametrize("as_json", [True, False])
def test_a_run_no_worker_takes_gets_a_hint_at_30_s_and_at_10_min_on_stderr(personas, fake_time, as_json):
    publish(personas.workspace, cases=2)
    hosted(personas.workspace, "http://127.0.0.1:9/")  # never called: no worker runs here
    fake_time(finish_at=15 * 60)
    code, out, err = _follow_cli(*(["--json"] if as_json else []))
    run = Run.objects.get()
    hints = _hints(err)
    assert len(hints) == 2, err
    assert hints[0].startswith(
        f"no worker has picked up run {run.pk} after 30 s: is a Celery worker running?"
    )
    assert hints[1].startswith(f"no worker has picked up run {run.pk} after 10 min:")
    for hint in hints:
        assert "`celery -A agentclash_site worker`" in hint and "`make run`" in hint
        assert hint.endswith("still waiting")
    assert err.splitlines() == hints  # nothing else on stderr (not a terminal: no progress bar)
    assert "no worker" not in out
    if as_json:
        document = json.loads(out)  # stdout is still the one document
        assert document["run"]["id"] == str(run.pk) and document["run"]["status"] == "cancelled"
    else:
        assert out.startswith(f"Run {run.pk}: cancelled")
    assert code == 1  # a cancelled run with nothing graded: no pass rate (interfaces.md §6)


def test_no_hint_before_30_s(personas, fake_time):
    publish(personas.workspace, cases=1)
    hosted(personas.workspace, "http://127.0.0.1:9/")
    fake_time(finish_at=25)
    code, out, err = _follow_cli("--json")
    assert _hints(err) == [] and json.loads(out)["run"]["status"] == "cancelled"


def _follow(run: Run) -> str:
    err = io.StringIO()
    eval_command.Command(stdout=io.StringIO(), stderr=err).follow(run)
    return err.getvalue()


def test_no_hint_for_a_run_that_waits_for_uploads_not_a_worker(personas, fake_time):
    version = publish(personas.workspace, cases=1)
    dep = deployment_create(workspace=personas.workspace, name="ci", kind="trace_import").deployment
    run = create_run(personas.workspace, version, [dep])
    fake_time(finish_at=15 * 60)
    assert _hints(_follow(run)) == []


def test_no_hint_once_a_worker_claimed_an_item(personas, fake_time):
    """A worker that claimed an item (the run not marked running yet, or the item returned
    to pending since) has picked the run up."""
    version = publish(personas.workspace, cases=2)
    run = create_run(personas.workspace, version, [hosted(personas.workspace, "http://127.0.0.1:9/")])
    RunItem.objects.filter(pk=RunItem.objects.filter(run=run).first().pk).update(claims=1)
    fake_time(finish_at=15 * 60)
    assert Run.objects.get(pk=run.pk).status == "queued"
    assert _hints(_follow(run)) == []


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_the_hint_starts_a_line_of_its_own_after_the_progress_bar(personas, fake_time):
    version = publish(personas.workspace, cases=1)
    run = create_run(personas.workspace, version, [hosted(personas.workspace, "http://127.0.0.1:9/")])
    fake_time(finish_at=60)
    err = _Terminal()
    eval_command.Command(stdout=io.StringIO(), stderr=err).follow(run)
    lines = err.getvalue().split("\n")
    hint = next(i for i, line in enumerate(lines) if line.startswith("no worker has picked up run"))
    assert lines[hint - 1].startswith("\r[") and lines[hint - 1].endswith("queued  ")  # the bar's line, ended
