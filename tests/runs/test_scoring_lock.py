"""The scoring lock: a lease on the run's row, claimed by a compare-and-set UPDATE, on every
backend. Before, ``scoring_lock`` always succeeded on SQLite, so two workers (the sweeper's
finalize beside a long n_wise pass or critique) scored the same run at once; on PostgreSQL it
was a session advisory lock, which a dropped connection released while its worker went on."""

from __future__ import annotations

import subprocess
import sys
import threading
from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone

from runs import scoring
from runs.models import Run
from runs.scoring import SCORING_LEASE_SECONDS, renew_lease, scoring_lock
from tests.processes import ROOT, sqlite_env, wait_until
from tests.runs.runfactory import create_run, hosted, publish

DEADLINE_S = 10


@pytest.fixture
def run(personas):
    version = publish(personas.workspace, cases=1)
    return create_run(personas.workspace, version, [hosted(personas.workspace, "http://127.0.0.1:9/")])


def _held_elsewhere(run_id, *, release: threading.Event) -> tuple[threading.Thread, dict]:
    """A second claimant: a thread (its own connection) that claims the lease and holds it
    until ``release``."""
    from django.db import connection

    seen: dict = {}
    claimed = threading.Event()

    def hold() -> None:
        try:
            with scoring_lock(run_id) as mine:
                seen["mine"] = mine
                claimed.set()
                assert release.wait(DEADLINE_S)
        finally:
            claimed.set()
            connection.close()

    thread = threading.Thread(target=hold)
    thread.start()
    assert claimed.wait(DEADLINE_S)
    return thread, seen


@pytest.mark.django_db(transaction=True)
def test_only_one_of_two_claimants_holds_the_lease(run):
    release = threading.Event()
    other, seen = _held_elsewhere(run.pk, release=release)
    assert seen["mine"] is True
    with scoring_lock(run.pk) as mine:
        assert mine is False
    release.set()
    other.join(DEADLINE_S)
    assert Run.objects.values_list("scoring_owner", "scoring_until").get(pk=run.pk) == ("", None)
    with scoring_lock(run.pk) as mine:
        assert mine is True


@pytest.mark.django_db(transaction=True)
def test_the_lease_is_re_entrant_in_its_thread_and_kept_until_the_outer_exit(run):
    """A rescore finalises the run under its own lock: the inner claim is the same lease, and
    leaving it does not give the lease up."""
    with scoring_lock(run.pk) as outer:
        with scoring_lock(run.pk) as inner:
            assert (outer, inner) == (True, True)
        assert Run.objects.get(pk=run.pk).scoring_owner != ""
        release = threading.Event()
        release.set()
        other, seen = _held_elsewhere(run.pk, release=release)
        other.join(DEADLINE_S)
        assert seen["mine"] is False
    assert Run.objects.get(pk=run.pk).scoring_owner == ""


@pytest.mark.django_db(transaction=True)
def test_a_lapsed_lease_is_taken_over_and_its_owner_cannot_renew_or_release_it(run):
    """A worker that died while scoring: its lease lapses and the sweeper's finalize claims
    the run; the first owner, were it only slow, no longer touches the new lease."""
    later = timezone.now() + timedelta(seconds=SCORING_LEASE_SECONDS + 1)
    with scoring_lock(run.pk) as first:
        old_owner = Run.objects.get(pk=run.pk).scoring_owner
        with time_machine.travel(later, tick=False):
            release = threading.Event()
            other, seen = _held_elsewhere(run.pk, release=release)
            assert seen["mine"] is True
            new_owner = Run.objects.get(pk=run.pk).scoring_owner
            assert not renew_lease(run.pk, old_owner)
        assert first is True
    assert Run.objects.get(pk=run.pk).scoring_owner == new_owner  # the first exit left it alone
    release.set()
    other.join(DEADLINE_S)


@pytest.mark.django_db(transaction=True)
def test_a_held_lease_is_renewed_by_its_keeper(run, monkeypatch):
    """The keeper thread moves the lease on while the scoring thread is busy."""
    monkeypatch.setattr(scoring, "SCORING_LEASE_SECONDS", 0.3)
    with scoring_lock(run.pk) as mine:
        assert mine
        first = Run.objects.get(pk=run.pk).scoring_until
        wait_until(
            lambda: Run.objects.get(pk=run.pk).scoring_until > first, timeout=DEADLINE_S, message="a renewal"
        )


SETUP = """
import json
from agentclash_site.workspaces.models import Workspace
from tests.runs.runfactory import create_run, hosted, publish
ws = Workspace.objects.create(slug="lite", name="Lite")
run = create_run(ws, publish(ws, cases=1), [hosted(ws, "http://127.0.0.1:9/")])
print(json.dumps(str(run.pk)))
"""

HOLD = """
import pathlib, sys, time
from runs.scoring import scoring_lock
with scoring_lock({run!r}) as mine:
    print("held" if mine else "refused", flush=True)
    deadline = time.monotonic() + 60
    while not pathlib.Path({release!r}).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
"""

TRY = """
import json
from runs.scoring import scoring_lock
with scoring_lock({run!r}) as mine:
    print(json.dumps(mine))
"""


@pytest.mark.slow
def test_two_workers_on_sqlite_do_not_both_score_a_run(tmp_path):
    """Two processes on the embedded default's SQLite file: while one scores the run, the
    other's ``scoring_lock`` is refused; once the first is done, it is granted."""
    from tests.processes import run_on_sqlite

    run_id = run_on_sqlite(tmp_path, SETUP)
    env = sqlite_env(tmp_path)
    release = tmp_path / "release"
    shell = [sys.executable, "manage.py", "shell", "-v", "0", "-c"]
    holder = subprocess.Popen(
        [*shell, HOLD.format(run=run_id, release=str(release))],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"

        def attempt() -> bool:
            done = subprocess.run(
                [*shell, TRY.format(run=run_id)],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert done.returncode == 0, done.stderr[-2000:]
            return done.stdout.strip().splitlines()[-1] == "true"

        assert attempt() is False
        release.touch()
        assert holder.wait(timeout=60) == 0, holder.stderr.read()[-2000:]
        assert attempt() is True
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(timeout=10)


@pytest.mark.django_db(transaction=True)
def test_a_worker_whose_lease_was_taken_over_stops_scoring(run):
    """A worker slow past its lease (its keeper could not renew it: the database locked, the
    process paused) went on scoring beside the one that took the run over: both paid the n_wise
    judge calls and the critique and wrote their grades. Its checks between calls
    (``still_scoring``) now see the lease is no longer its own, as they see a cancel."""
    from runs.judging import still_scoring

    Run.objects.filter(pk=run.pk).update(status="scoring")
    later = timezone.now() + timedelta(seconds=SCORING_LEASE_SECONDS + 1)
    with scoring_lock(run.pk) as first:
        assert first is True and still_scoring(run.pk)
        with time_machine.travel(later, tick=False):
            release = threading.Event()
            other, seen = _held_elsewhere(run.pk, release=release)
            try:
                assert seen["mine"] is True
                assert not still_scoring(run.pk)
            finally:
                release.set()
                other.join(DEADLINE_S)
    assert still_scoring(run.pk)  # no lease held here: the run's status alone
