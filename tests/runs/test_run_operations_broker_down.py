"""Run operations while the task broker cannot be reached. Each operation's write is
committed before its task is published (``transaction.on_commit``), so the publish's failure
comes after the run changed: the pages answered a 500 error page for a cancel, a retry or
a re-score that had happened, and the new-run page for a run that was created and queued.
They say what happened and that the broker is down; the API's 503 says what was done."""

from __future__ import annotations

import pytest
from kombu.exceptions import OperationalError as BrokerError

from runs import tasks
from runs.models import Run, RunItem
from runs.seeding import seed_run
from runs.sweeper import sweep
from tests.clients import logged_in as login
from tests.runs.runfactory import hosted, publish

pytestmark = pytest.mark.django_db(transaction=True)
BASE = "/api/v1/workspaces/acme/runs"
REFUSED = "Error 111 connecting to 127.0.0.1:6379. Connection refused."


@pytest.fixture
def broker_down(monkeypatch):
    def refuse(*args, **kwargs):
        raise BrokerError(REFUSED)

    for task in (tasks.dispatch_lane, tasks.check_run, tasks.probe_run, tasks.rescore_run):
        monkeypatch.setattr(task, "delay", refuse)


def _page_message(response) -> str:
    assert response.status_code == 200
    return response.content.decode()


def test_cancel_from_the_page_says_it_cancelled_and_that_the_broker_is_down(personas, broker_down):
    run = seed_run(workspace=personas.workspace, items=8, lanes=2, status="running", done_fraction=0.5)
    body = _page_message(login(personas.editor).post(f"/runs/{run.id}/cancel/", follow=True))
    assert Run.objects.get(pk=run.pk).status == "cancelled"
    assert f"Run {run.id} is cancelled" in body and "CELERY_BROKER_URL" in body


def test_retry_from_the_page_says_what_was_sent_again_and_that_the_broker_is_down(personas, broker_down):
    run = seed_run(workspace=personas.workspace, items=40, lanes=2, infra_error_rate=0.3)
    failed = RunItem.objects.filter(run=run, last_category="infra_error", status="").count()
    body = _page_message(login(personas.editor).post(f"/runs/{run.id}/retry-failed/", follow=True))
    assert Run.objects.get(pk=run.pk).status == "running"
    assert f"{failed} failed items sent again" in body and "CELERY_BROKER_URL" in body


def test_rescore_from_the_page_says_the_revision_and_that_the_broker_is_down(personas, broker_down):
    run = seed_run(workspace=personas.workspace, items=4, lanes=1, infra_error_rate=0)
    body = _page_message(login(personas.editor).post(f"/runs/{run.id}/rescore/", follow=True))
    assert Run.objects.get(pk=run.pk).status == "scoring"
    assert "revision 2" in body and "CELERY_BROKER_URL" in body


def test_cancel_through_the_api_says_the_run_is_cancelled(personas, broker_down):
    run = seed_run(workspace=personas.workspace, items=8, lanes=2, status="running", done_fraction=0.5)
    response = personas.api(personas.editor).post(f"{BASE}/{run.pk}/cancel")
    assert Run.objects.get(pk=run.pk).status == "cancelled"
    assert response.status_code == 503
    message = response.json()["error"]["message"]
    assert f"Run {run.pk} is cancelled" in message and "CELERY_BROKER_URL" in message


def test_retry_through_the_api_says_the_items_were_sent_again(personas, broker_down):
    run = seed_run(workspace=personas.workspace, items=40, lanes=2, infra_error_rate=0.3)
    response = personas.api(personas.editor).post(f"{BASE}/{run.pk}/retry-failed")
    assert Run.objects.get(pk=run.pk).status == "running"
    assert response.status_code == 503
    message = response.json()["error"]["message"]
    assert f"Run {run.pk} is running again" in message and "CELERY_BROKER_URL" in message


def test_a_run_created_on_the_new_run_page_is_opened_with_the_broker_down_said(personas, broker_down):
    version = publish(personas.workspace)
    dep = hosted(personas.workspace, "http://127.0.0.1:9/a")
    editor = login(personas.editor)
    form = {"pack_version": version.id, "input_set": "set0", "deployments": [dep.id], "repetitions": "1"}
    response = editor.post("/runs/new/", {**form, "name": "first"})
    run = Run.objects.get(name="first")
    assert response.status_code == 302 and response["Location"] == f"/runs/{run.id}/"
    body = _page_message(editor.get(response["Location"]))
    assert f"Run {run.id} is stored and queued" in body and "CELERY_BROKER_URL" in body


def test_the_sweeper_computes_the_figures_of_a_run_cancelled_while_the_broker_was_down(
    personas, broker_down, monkeypatch
):
    run = seed_run(workspace=personas.workspace, items=8, lanes=2, status="running", done_fraction=0.5)
    assert personas.api(personas.editor).post(f"{BASE}/{run.pk}/cancel").status_code == 503
    assert Run.objects.get(pk=run.pk).stats is None
    monkeypatch.setattr(tasks.dispatch_lane, "delay", lambda *args: None)  # the broker is back
    sweep()
    stats = Run.objects.get(pk=run.pk).stats
    assert stats["scoring_revision"] == 1 and len(stats["lanes"]) == 2  # over the graded cases
