"""The admin's run actions with the task broker down. Each operation commits before its task
is sent, so the first selected run's send raised out of the action: a 500 error page for a
cancel or retry that had happened, and the other selected runs left untouched. Each run is
operated on, and the message says which were done and that the broker is down."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from kombu.exceptions import OperationalError as BrokerError

from runs import tasks
from runs.models import Run, RunItem, RunStatus
from runs.seeding import seed_run

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def staff(personas):
    user = get_user_model().objects.create_superuser("root", password="pw-root-123")
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def broker_down(monkeypatch):
    def refuse(*args, **kwargs):
        raise BrokerError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    for task in (tasks.dispatch_lane, tasks.check_run, tasks.probe_run, tasks.rescore_run):
        monkeypatch.setattr(task, "delay", refuse)


@pytest.mark.parametrize(
    ("action", "status", "after", "done"),
    [
        ("cancel_runs", "running", RunStatus.CANCELLED, "Cancelled 2 run(s)."),
        ("retry_failed_items", "completed", RunStatus.RUNNING, "Re-queued {failed} failed item(s)."),
        ("rescore_runs", "completed", RunStatus.SCORING, "Re-scoring 2 run(s)"),
    ],
)
def test_each_selected_run_is_operated_on_and_the_broker_is_said_down(
    personas, staff, broker_down, action, status, after, done
):
    runs = [
        seed_run(
            workspace=personas.workspace,
            items=10,
            lanes=2,
            status=status,
            done_fraction=0.5,
            infra_error_rate=0.5,
            seed=seed,
        )  # fmt: skip
        for seed in (1, 2)
    ]
    ids = [str(run.id) for run in runs]
    failed = RunItem.objects.filter(
        run__in=runs, state="done", status="", last_category__in=["infra_error", "config_error"]
    ).count()
    response = staff.post("/admin/runs/run/", {"action": action, "_selected_action": ids}, follow=True)
    assert response.status_code == 200
    body = response.content.decode()
    assert done.format(failed=failed) in body and "CELERY_BROKER_URL" in body
    assert all(f"Run {run.id} is" in body for run in runs)  # what was done to each
    assert [Run.objects.get(pk=run.pk).status for run in runs] == [after, after]
