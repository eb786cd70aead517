"""Run tests drive dispatch themselves: Celery ``delay`` calls of the runs tasks are recorded
instead of being sent to a broker (the slow fault tests start real workers and brokers)."""

from __future__ import annotations

from typing import Any

import pytest


class Enqueued(list):
    def names(self) -> list[str]:
        return [name for name, _ in self]


@pytest.fixture(autouse=True)
def enqueued(request: Any, monkeypatch: pytest.MonkeyPatch) -> Enqueued:
    calls = Enqueued()
    if request.node.get_closest_marker("slow"):
        return calls
    from runs import tasks

    for task in (tasks.dispatch_lane, tasks.check_run, tasks.sweep, tasks.probe_run):
        monkeypatch.setattr(task, "delay", lambda *args, _name=task.name: calls.append((_name, args)))
    return calls
