"""The run, lane and item state machines: legal moves pass and are recorded, illegal ones raise."""

from __future__ import annotations

import pytest

from runs.states import (
    ITEM_TRANSITIONS,
    LANE_TRANSITIONS,
    RUN_TRANSITIONS,
    IllegalTransition,
    check_item,
    check_lane,
    check_run,
)

RUN_STATES = ["draft", "queued", "running", "scoring", "completed", "failed", "cancelled"]
LANE_STATES = RUN_STATES[1:]
ITEM_STATES = ["pending", "claimed", "done", "cancelled"]


def _pairs(states, table, legal):
    return [(a, b) for a in states for b in states if (b in table.get(a, ())) == legal]


@pytest.mark.parametrize(("a", "b"), _pairs(RUN_STATES, RUN_TRANSITIONS, False))
def test_illegal_run_transitions_raise(a, b):
    with pytest.raises(IllegalTransition, match=f"a run cannot go from {a} to {b}"):
        check_run(a, b)


@pytest.mark.parametrize(("a", "b"), _pairs(LANE_STATES, LANE_TRANSITIONS, False))
def test_illegal_lane_transitions_raise(a, b):
    with pytest.raises(IllegalTransition):
        check_lane(a, b)


@pytest.mark.parametrize(("a", "b"), _pairs(ITEM_STATES, ITEM_TRANSITIONS, False))
def test_illegal_item_transitions_raise(a, b):
    with pytest.raises(IllegalTransition):
        check_item(a, b)


def test_the_happy_path_and_the_terminal_states():
    for a, b in [
        ("draft", "queued"),
        ("queued", "running"),
        ("running", "scoring"),
        ("scoring", "completed"),
    ]:
        check_run(a, b)
    for a, b in [("pending", "claimed"), ("claimed", "done"), ("claimed", "pending"), ("done", "pending")]:
        check_item(a, b)
    assert RUN_TRANSITIONS["cancelled"] == frozenset()
    assert ITEM_TRANSITIONS["cancelled"] == frozenset()
    with pytest.raises(IllegalTransition):
        check_run("completed", "queued")


@pytest.mark.django_db
def test_transitions_are_recorded_and_guarded(personas):
    from runs.models import Run, Transition
    from runs.states import transition_run
    from tests.runs.runfactory import create_run, hosted, publish

    version = publish(personas.workspace, cases=1)
    dep = hosted(personas.workspace, "http://127.0.0.1:9/agent")
    run = create_run(personas.workspace, version, [dep])
    assert [(t.from_state, t.to_state) for t in Transition.objects.filter(run=run, entity="run")] == [
        ("draft", "queued")
    ]
    stale = Run.objects.get(pk=run.pk)
    assert transition_run(run, "running", reason="test")
    assert run.started_at is not None
    # another holder of the old status loses the race instead of overwriting
    assert transition_run(stale, "cancelled") is False
    assert Run.objects.get(pk=run.pk).status == "running"
    last = Transition.objects.filter(run=run).order_by("-id").first()
    assert (last.from_state, last.to_state, last.reason) == ("queued", "running", "test")
    assert last.at is not None
