"""A re-score refused for the run's status says what to do: the message was "only a
completed or failed run can be re-scored (this one is scoring)", for a re-score sent while
another was under way too."""

from __future__ import annotations

import pytest

from runs.models import Run
from runs.seeding import seed_run

pytestmark = pytest.mark.django_db
BASE = "/api/v1/workspaces/acme/runs"


@pytest.mark.parametrize(
    ("status", "todo"),
    [
        ("scoring", "wait for its scoring to finish, then re-score it"),
        ("running", "wait for it to finish, then re-score it"),
        ("queued", "wait for it to finish, then re-score it"),
        ("cancelled", "a cancelled run stays as it was cancelled; start a new run"),
    ],
)
def test_a_refused_rescore_names_what_to_do(personas, status, todo):
    run = seed_run(workspace=personas.workspace, items=2, lanes=1, infra_error_rate=0)
    Run.objects.filter(pk=run.pk).update(status=status)
    response = personas.api(personas.editor).post(f"{BASE}/{run.pk}/rescore")
    assert response.status_code == 409
    assert response.json()["error"] == {
        "code": "run_not_rescorable",
        "message": f"only a completed or failed run can be re-scored (this one is {status}); {todo}",
    }


def test_a_second_rescore_while_the_first_runs_is_told_to_wait(personas):
    run = seed_run(workspace=personas.workspace, items=2, lanes=1, infra_error_rate=0)
    api = personas.api(personas.editor)
    assert api.post(f"{BASE}/{run.pk}/rescore").status_code == 202
    error = api.post(f"{BASE}/{run.pk}/rescore").json()["error"]
    assert error["message"].endswith(
        "(this one is scoring); wait for its scoring to finish, then re-score it"
    )
    assert Run.objects.get(pk=run.pk).scoring_revision == 2
