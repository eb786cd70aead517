"""``POST .../runs/{id}/retry-failed`` refuses a run it cannot retry with a message that fits
the run's status: a cancelled run was told to "wait for it to finish", though it had."""

from __future__ import annotations

import pytest

from runs.models import Run, RunItem
from runs.services.operations import run_retry_failed
from runs.services.runs import RunError
from tests.runs.runfactory import create_run, hosted, publish

pytestmark = pytest.mark.django_db
BASE = "/api/v1/workspaces/acme/runs"


@pytest.fixture
def run(personas):
    version = publish(personas.workspace, cases=2)
    return create_run(personas.workspace, version, [hosted(personas.workspace, "http://127.0.0.1:9/a")])


def _with_infra_errors(run):
    RunItem.objects.filter(run=run).update(state="done", status="", last_category="infra_error")


@pytest.mark.parametrize(
    "status,message",
    [
        ("cancelled", "a cancelled run cannot retry items; start a new run"),
        ("scoring", "a scoring run cannot retry items; wait for scoring to finish, then retry"),
        ("queued", "a queued run has no finished items to retry yet; wait for it to finish"),
    ],
)
def test_the_refusal_says_what_to_do_for_the_runs_status(personas, run, status, message):
    _with_infra_errors(run)
    Run.objects.filter(pk=run.pk).update(status=status)
    response = personas.api(personas.editor).post(f"{BASE}/{run.pk}/retry-failed")
    assert response.status_code == 409
    assert response.json()["error"] == {"code": "run_not_retryable", "message": message}
    assert set(RunItem.objects.filter(run=run).values_list("state", flat=True)) == {"done"}


def test_cancelling_through_the_api_then_retrying_is_refused_with_start_a_new_run(personas, run):
    api = personas.api(personas.editor)
    assert api.post(f"{BASE}/{run.pk}/cancel").json()["run"]["status"] == "cancelled"
    error = api.post(f"{BASE}/{run.pk}/retry-failed").json()["error"]
    assert error["message"] == "a cancelled run cannot retry items; start a new run"


def test_a_cancel_that_came_in_before_the_lock_is_seen_under_it(run):
    """The status is checked again once the run row is locked: a run object read while the
    run was running, then cancelled by someone else, must not be sent back to running."""
    _with_infra_errors(run)
    Run.objects.filter(pk=run.pk).update(status="running")
    stale = Run.objects.get(pk=run.pk)
    Run.objects.filter(pk=run.pk).update(status="cancelled")
    with pytest.raises(RunError) as caught:
        run_retry_failed(run=stale, enqueue=False)
    assert (caught.value.code, caught.value.status_code) == ("run_not_retryable", 409)
    assert caught.value.message == "a cancelled run cannot retry items; start a new run"
    assert Run.objects.get(pk=run.pk).status == "cancelled"
    assert set(RunItem.objects.filter(run=run).values_list("state", flat=True)) == {"done"}


def test_outsiders_get_404(personas, run):
    assert personas.api(personas.outsider).post(f"{BASE}/{run.pk}/retry-failed").status_code == 404


def test_a_lane_whose_deployment_changed_kind_since_is_not_retried(personas):
    """Retrying the failures of a finished run after its deployment was changed to another
    kind called the new kind's executor for a lane created for the old one (a trace_import
    deployment "called": config_error, "please report it", once more). It is refused now
    (409 deployment_changed, naming the deployment and both kinds), nothing reopened."""
    from runs.models import RunItem, RunLane
    from runs.services.deployments import deployment_update
    from tests.fakes.agent_server import FakeAgent, raw
    from tests.runs.runfactory import create_run, drive, hosted, publish

    version = publish(personas.workspace, cases=2)
    with FakeAgent() as agent:
        agent.default = raw("{}", status=401)
        dep = hosted(personas.workspace, agent.url, name="flaky")
        run = drive(create_run(personas.workspace, version, [dep]))
    assert run.status == "completed" and RunLane.objects.get(run=run).config_error == 2
    deployment_update(deployment=dep, kind="trace_import")
    response = personas.api(personas.owner).post(f"/api/v1/workspaces/acme/runs/{run.pk}/retry-failed")
    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "deployment_changed"
    assert (
        "'flaky'" in error["message"]
        and "hosted_http" in error["message"]
        and "trace_import" in error["message"]
    )
    assert set(RunItem.objects.filter(run=run).values_list("state", flat=True)) == {"done"}
