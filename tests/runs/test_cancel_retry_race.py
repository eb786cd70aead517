"""A cancel and a "retry failed items" sent at the same moment (two requests, two database
connections): whichever takes the run first, the other either follows it or is refused;
neither half-happens, and the lane's counters agree with its items and with the case list
afterwards."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from runs.documents import lane_counts
from runs.models import Run, RunItem, RunLane
from runs.seeding import seed_run
from runs.services import operations
from runs.services.operations import run_cancel, run_retry_failed
from runs.services.runs import RunError
from tests.processes import wait_until, waiting_on_a_lock

pytestmark = pytest.mark.django_db(transaction=True)


def counts_of_items(lane: RunLane) -> dict[str, int]:
    """What the lane's counters should say, counted from its items (the case list's statuses)."""
    counts = dict.fromkeys(lane_counts(lane), 0)
    for status, state, category in RunItem.objects.filter(lane=lane).values_list(
        "status", "state", "last_category"
    ):
        if status:
            counts[status] += 1
        elif state in ("pending", "claimed"):
            counts["pending"] += 1
        else:
            counts[category] += 1
    return counts


@pytest.mark.parametrize("first", ["cancel", "retry"])
def test_a_cancel_and_a_retry_at_once_leave_counts_that_agree(personas, monkeypatch, first):
    run = seed_run(workspace=personas.workspace, items=40, lanes=2, status="running", done_fraction=0.5,
                   infra_error_rate=0.3)  # fmt: skip
    assert RunItem.objects.filter(run=run, last_category="infra_error", status="").exists()
    real = operations.record_item_transitions
    outcomes: dict[str, object] = {}
    held, go = threading.Event(), threading.Event()

    def hold(*args, **kwargs):
        # ``first`` holds the run's locks until the other request waits behind them
        if threading.current_thread().name == first:
            held.set()
            assert go.wait(30)
        return real(*args, **kwargs)

    monkeypatch.setattr(operations, "record_item_transitions", hold)

    def act(name, operation):
        try:
            outcomes[name] = operation(run=Run.objects.get(pk=run.pk))
        except RunError as exc:
            outcomes[name] = exc.code
        finally:
            connection.close()

    operations_of = {"cancel": run_cancel, "retry": lambda run: run_retry_failed(run=run, enqueue=False)}
    second = "retry" if first == "cancel" else "cancel"
    threads = [threading.Thread(target=act, name=first, args=(first, operations_of[first]))]
    threads[0].start()
    assert held.wait(30)
    threads.append(threading.Thread(target=act, name=second, args=(second, operations_of[second])))
    threads[1].start()
    # polled outside any transaction: pg_stat_activity is read once per transaction
    wait_until(lambda: not threads[1].is_alive() or waiting_on_a_lock(), timeout=30, interval=0.01)
    go.set()
    for thread in threads:
        thread.join(timeout=60)
        assert not thread.is_alive()

    run.refresh_from_db()
    assert run.status == "cancelled"
    if first == "retry":  # sent again, then cancelled with the rest
        assert isinstance(outcomes["retry"], int) and outcomes["retry"] > 0
    else:
        assert outcomes["retry"] == "run_not_retryable"
    assert not RunItem.objects.filter(run=run, state__in=["pending", "claimed"]).exists()
    for lane in RunLane.objects.filter(run=run):
        assert lane.status == "cancelled"
        assert lane_counts(lane) == counts_of_items(lane), lane.deployment_name
        assert lane.pending == 0
    assert run.items_open == 0
