"""The state machines of runs, lanes and items: legal transitions, and recording them.

Run:  draft -> queued -> running -> scoring -> completed, or failed / cancelled (from any
      state that is not finished); a retry or rescore moves a finished run back to
      running / scoring.
Lane: queued -> running -> scoring -> completed, or failed / cancelled; retry-failed and
      rescore reopen it like the run.
Item: pending -> claimed -> done; claimed -> pending (the sweeper returns an expired claim);
      pending / claimed -> cancelled; done -> pending (retry-failed); pending -> done (a
      trace import records a result without a claim).

``transition_run`` / ``transition_lane`` refuse an illegal move with
:class:`IllegalTransition`, save the new status and record a :class:`Transition` row.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import connection
from django.utils import timezone

from runs.models import ItemState, LaneStatus, Run, RunLane, RunStatus, Transition

R = RunStatus
L = LaneStatus
I = ItemState  # noqa: E741

RUN_TRANSITIONS: dict[str, frozenset[str]] = {
    R.DRAFT: frozenset({R.QUEUED, R.CANCELLED, R.FAILED}),
    R.QUEUED: frozenset({R.RUNNING, R.SCORING, R.CANCELLED, R.FAILED}),
    R.RUNNING: frozenset({R.SCORING, R.CANCELLED, R.FAILED}),
    R.SCORING: frozenset({R.COMPLETED, R.FAILED, R.CANCELLED, R.RUNNING}),
    R.COMPLETED: frozenset({R.RUNNING, R.SCORING}),  # retry-failed, rescore
    R.FAILED: frozenset({R.RUNNING, R.SCORING}),
    R.CANCELLED: frozenset(),
}

LANE_TRANSITIONS: dict[str, frozenset[str]] = {
    L.QUEUED: frozenset({L.RUNNING, L.SCORING, L.CANCELLED, L.FAILED}),
    L.RUNNING: frozenset({L.SCORING, L.CANCELLED, L.FAILED}),
    L.SCORING: frozenset({L.COMPLETED, L.FAILED, L.CANCELLED, L.RUNNING}),
    L.COMPLETED: frozenset({L.RUNNING, L.SCORING}),
    L.FAILED: frozenset({L.RUNNING, L.SCORING}),
    L.CANCELLED: frozenset(),
}

ITEM_TRANSITIONS: dict[str, frozenset[str]] = {
    I.PENDING: frozenset({I.CLAIMED, I.CANCELLED, I.DONE}),
    I.CLAIMED: frozenset({I.DONE, I.PENDING, I.CANCELLED}),
    I.DONE: frozenset({I.PENDING}),
    I.CANCELLED: frozenset(),
}

FINISHED_RUN = frozenset({R.COMPLETED, R.FAILED, R.CANCELLED})
_FINISHED_LANE = frozenset({L.COMPLETED, L.FAILED, L.CANCELLED})
# PostgreSQL NOTIFY channel of finished runs (payload: the run id): ``eval start --follow``
# listens instead of polling. Delivered when the transaction that finished the run commits.
RUN_FINISHED_CHANNEL = "agentclash_run_finished"


class IllegalTransition(Exception):
    """A state change the machine does not allow (a programming or concurrency error)."""

    def __init__(self, entity: str, from_state: str, to_state: str) -> None:
        self.entity = entity
        self.from_state = from_state
        self.to_state = to_state
        super().__init__(f"a {entity} cannot go from {from_state} to {to_state}")


def _check(table: dict[str, frozenset[str]], entity: str, from_state: str, to_state: str) -> None:
    if to_state not in table.get(from_state, frozenset()):
        raise IllegalTransition(entity, from_state, to_state)


def check_run(from_state: str, to_state: str) -> None:
    _check(RUN_TRANSITIONS, "run", from_state, to_state)


def check_lane(from_state: str, to_state: str) -> None:
    _check(LANE_TRANSITIONS, "lane", from_state, to_state)


def check_item(from_state: str, to_state: str) -> None:
    _check(ITEM_TRANSITIONS, "item", from_state, to_state)


def transition_run(run: Run, to_state: str, *, reason: str = "", guard: dict[str, Any] | None = None) -> bool:
    """Move ``run`` to ``to_state`` with a guarded UPDATE and record it.

    Returns False (and changes nothing) when another process already moved the run away
    from the status this object holds, or when the row no longer matches ``guard`` (more
    filters of the UPDATE: ``{"items_open__lte": 0}``, checked on the current row, not on
    what this object read); raises :class:`IllegalTransition` when the move is not allowed
    from the current status.
    """
    check_run(run.status, to_state)
    now = timezone.now()
    fields: dict[str, object] = {"status": to_state, "status_reason": reason[:500]}
    if to_state == R.QUEUED and run.queued_at is None:
        fields["queued_at"] = now
    if to_state == R.RUNNING and run.started_at is None:
        fields["started_at"] = now
    if to_state in FINISHED_RUN:
        if run.finished_at is None:
            fields["finished_at"] = now
    elif to_state == R.SCORING and run.status in FINISHED_RUN:
        pass  # a rescore: the run finished executing when it first did (its duration stays)
    elif run.finished_at is not None:
        fields["finished_at"] = None
    updated = Run.objects.filter(pk=run.pk, status=run.status, **(guard or {})).update(**fields)
    if not updated:
        return False
    Transition.objects.create(
        run_id=run.pk, entity=Transition.Entity.RUN, from_state=run.status, to_state=to_state,
        reason=reason[:500], at=now,
    )  # fmt: skip
    for name, value in fields.items():
        setattr(run, name, value)
    if to_state in FINISHED_RUN and connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, %s)", [RUN_FINISHED_CHANNEL, str(run.pk)])
    return True


def transition_lane(
    lane: RunLane, to_state: str, *, reason: str = "", guard: dict[str, Any] | None = None
) -> bool:
    """Like :func:`transition_run`, for a lane."""
    check_lane(lane.status, to_state)
    now = timezone.now()
    fields: dict[str, object] = {"status": to_state}
    if to_state == L.RUNNING and lane.started_at is None:
        fields["started_at"] = now
    if to_state in _FINISHED_LANE:
        if lane.finished_at is None:
            fields["finished_at"] = now
    elif to_state == L.SCORING and lane.status in _FINISHED_LANE:
        pass  # a rescore, as for the run
    elif lane.finished_at is not None:
        fields["finished_at"] = None
    updated = RunLane.objects.filter(pk=lane.pk, status=lane.status, **(guard or {})).update(**fields)
    if not updated:
        return False
    Transition.objects.create(
        run_id=lane.run_id, lane_id=lane.pk, entity=Transition.Entity.LANE, from_state=lane.status,
        to_state=to_state, reason=reason[:500], at=now,
    )  # fmt: skip
    for name, value in fields.items():
        setattr(lane, name, value)
    return True


def record_item_transitions(
    rows: Iterable[tuple[str, int | None, str, str, int]], *, reason: str = ""
) -> None:
    """Record bulk item moves: ``(run_id, lane_id, from_state, to_state, count)`` each.

    Each move is checked against the item machine; zero counts are skipped.
    """
    now = timezone.now()
    objs = []
    for run_id, lane_id, from_state, to_state, count in rows:
        if not count:
            continue
        check_item(from_state, to_state)
        objs.append(
            Transition(
                run_id=run_id, lane_id=lane_id, entity=Transition.Entity.ITEM, from_state=from_state,
                to_state=to_state, reason=reason[:500], count=count, at=now,
            )
        )  # fmt: skip
    if objs:
        Transition.objects.bulk_create(objs)
