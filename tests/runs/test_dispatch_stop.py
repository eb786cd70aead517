"""A dispatch slice whose worker is asked to stop (a warm shutdown: runs.dispatch.request_stop)
ends promptly: it claims nothing more, lets its calls in flight end within a grace, cancels
the rest, writes what it has and gives the unfinished items back at once, without counting
the cancelled attempt or the claim against them. In process, against a real-socket fake
agent; the real worker and its SIGTERM are in tests/runs/test_faults.py."""

from __future__ import annotations

import asyncio
import threading

import pytest
from aiohttp import web

from runs import dispatch
from runs.dispatch import dispatch_lane, request_stop
from runs.models import Attempt, RunItem, RunLane
from tests.fakes.agent_server import FakeAgent, hang, ok, server_error
from tests.processes import wait_until
from tests.runs.runfactory import create_run, drive, echo_answer, hosted, publish

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _not_stopping():
    dispatch.STOPPING.clear()
    yield
    dispatch.STOPPING.clear()


def _stop_when(condition, what: str) -> threading.Thread:
    """A thread that calls request_stop once ``condition()`` holds (polled, bounded)."""

    def run() -> None:
        wait_until(condition, timeout=30, interval=0.02, message=what)
        request_stop()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_a_stopping_slice_gives_its_unfinished_items_back_at_once(personas, monkeypatch):
    """Three calls in flight that never answer, one item after an infra error waiting on
    its retry: on stop the slice cancels them after the grace and gives all four back to
    pending at once (the sweeper would have taken their timeout times their attempts plus
    the margin). The attempts that ended are kept; the cancelled one is stored as
    cancelled/worker_stopped; the claim is not counted; the next attempt of each item is
    numbered after every one that went out, so re-sending it is safe."""
    monkeypatch.setattr(dispatch, "STOP_GRACE_SECONDS", 0.2)
    version = publish(personas.workspace, cases=6)
    with FakeAgent() as agent:
        agent.default = hang()
        agent.queue(server_error(503), case="c0")  # attempt 1 ends infra_error, attempt 2 hangs
        dep = hosted(personas.workspace, agent.url, max_in_flight=4, timeout_seconds=5, max_attempts=3)
        run = create_run(personas.workspace, version, [dep])
        lane = RunLane.objects.get(run=run)
        stopper = _stop_when(
            lambda: agent.calls_for("c0") >= 2 and agent.calls >= 5, "four calls in flight, c0 retried"
        )
        requeued: list[int] = []
        result = dispatch_lane(lane.pk, time_slice=30, requeue=requeued.append)
        stopper.join(timeout=5)
        assert result.reason.startswith("worker stopping")
        assert (result.claimed, result.recorded, result.released) == (4, 0, 4)
        assert requeued == [lane.pk]  # the lane goes on elsewhere at once
        items = {i.case_key: i for i in RunItem.objects.filter(run=run)}
        assert {i.state for i in items.values()} == {"pending"}
        assert all(i.claims == 0 and i.claim_owner == "" and i.claim_deadline is None for i in items.values())
        sent_first = {i.case_key for i in items.values() if i.attempt_count}
        assert sent_first == {"c0", "c1", "c2", "c3"}
        assert items["c0"].attempt_count == 2 and items["c1"].attempt_count == 1
        rows = list(
            Attempt.objects.filter(item__run=run).values_list(
                "item__case_key", "number", "category", "error_code"
            )
        )
        assert sorted(rows) == [
            ("c0", 1, "infra_error", "server_error"),
            ("c0", 2, "cancelled", "worker_stopped"),
            ("c1", 1, "cancelled", "worker_stopped"),
            ("c2", 1, "cancelled", "worker_stopped"),
            ("c3", 1, "cancelled", "worker_stopped"),
        ]
        lane.refresh_from_db()
        assert lane.dispatch_until is None and lane.pending == 6

        dispatch.STOPPING.clear()  # the next worker
        agent.default = ok(echo_answer)
        run = drive(run)
        sent = [(r.json["item_id"], r.json["attempt"]) for r in agent.requests]
        c0_attempts = [r.json["attempt"] for r in agent.requests_for("c0")]
    assert run.status == "completed"
    assert len(set(sent)) == len(sent), "an agent saw the same attempt of an item twice"
    assert c0_attempts == [1, 2, 3]  # a fresh round of retries after the give-back
    attempts = Attempt.objects.filter(item__run=run)
    assert attempts.filter(category="ok").count() == 6  # graded once each
    assert not attempts.filter(error_code__in=["claim_expired", "dispatcher_failed"]).exists()
    assert set(RunItem.objects.filter(run=run).values_list("claims", flat=True)) == {1}
    lane.refresh_from_db()
    assert (lane.passed, lane.infra_error, lane.counters["tally"]["executions"]) == (6, 0, 6)


def _gated(gate: threading.Event, then):
    """Answer (``then``) once ``gate`` is set (polled; bounded by the test's deadline)."""

    async def behaviour(request: web.Request, recorded, agent) -> web.StreamResponse:
        for _ in range(3000):
            if gate.is_set():
                break
            await asyncio.sleep(0.01)
        return await then(request, recorded, agent)

    return behaviour


def test_calls_that_end_within_the_grace_are_written_not_given_back(personas, monkeypatch):
    """Calls in flight at the stop that answer within the grace are graded and written; the
    slice claims nothing more, gives nothing back, and asks for the lane to go on."""
    monkeypatch.setattr(dispatch, "STOP_GRACE_SECONDS", 60.0)  # a bound: the calls end first
    version = publish(personas.workspace, cases=5)
    gate = threading.Event()
    with FakeAgent() as agent:
        agent.default = _gated(gate, ok(echo_answer))
        dep = hosted(personas.workspace, agent.url, max_in_flight=2, timeout_seconds=30, max_attempts=1)
        run = create_run(personas.workspace, version, [dep])
        lane = RunLane.objects.get(run=run)

        def stop_then_answer() -> None:
            wait_until(lambda: agent.calls >= 2, timeout=30, interval=0.02, message="two calls in flight")
            request_stop()
            gate.set()

        thread = threading.Thread(target=stop_then_answer, daemon=True)
        thread.start()
        requeued: list[int] = []
        result = dispatch_lane(lane.pk, time_slice=30, requeue=requeued.append)
        thread.join(timeout=5)
        assert (result.claimed, result.recorded, result.released) == (2, 2, 0)
        assert requeued == [lane.pk]
        assert agent.calls == 2  # nothing claimed after the stop
        states = sorted(RunItem.objects.filter(run=run).values_list("state", flat=True))
        assert states == ["done", "done", "pending", "pending", "pending"]
        assert not Attempt.objects.filter(item__run=run).exclude(category="ok").exists()


def test_a_slice_taken_by_a_stopping_worker_leaves_the_lane_to_the_next(personas):
    version = publish(personas.workspace, cases=2)
    with FakeAgent() as agent:
        agent.default = ok(echo_answer)
        dep = hosted(personas.workspace, agent.url)
        run = create_run(personas.workspace, version, [dep])
        lane = RunLane.objects.get(run=run)
        request_stop()
        requeued: list[int] = []
        result = dispatch_lane(lane.pk, requeue=requeued.append)
        assert (result.claimed, requeued, agent.calls) == (0, [lane.pk], 0)
