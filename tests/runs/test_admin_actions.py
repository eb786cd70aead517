"""The run admin's re-score action calls run_rescore (the service the run page, the API and
the CLI call) for each selected run, and says which runs it refused and why."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from runs.models import Run, RunStatus
from runs.seeding import seed_run
from tests.clients import logged_in

pytestmark = pytest.mark.django_db


@pytest.fixture
def root_client(personas):
    return logged_in(get_user_model().objects.create_superuser("root", password="pw-root-123"))


def test_the_run_list_offers_re_score(root_client):
    body = root_client.get("/admin/runs/run/").content.decode()
    assert 'value="rescore_runs"' in body


def test_re_score_opens_a_new_revision_of_each_finished_run_and_names_the_refused(personas, root_client):
    completed = seed_run(workspace=personas.workspace, items=4, lanes=2, seed=1)
    failed = seed_run(workspace=personas.workspace, items=4, lanes=2, status=RunStatus.FAILED, seed=2)
    running = seed_run(
        workspace=personas.workspace, items=4, lanes=2, status="running", done_fraction=0.5, seed=3
    )
    revisions = {run.pk: run.scoring_revision for run in (completed, failed)}
    response = root_client.post(
        "/admin/runs/run/",
        {"action": "rescore_runs", "_selected_action": [str(r.id) for r in (completed, failed, running)]},
        follow=True,
    )
    assert response.status_code == 200
    body = response.content.decode()
    assert "Re-scoring 2 run(s)" in body
    assert f"Not re-scored: {running}: only a completed or failed run can be re-scored" in body
    for run in (completed, failed):
        run.refresh_from_db()
        assert run.status == RunStatus.SCORING
        assert run.scoring_revision > revisions[run.pk]
    assert Run.objects.get(pk=running.pk).status == RunStatus.RUNNING


def test_a_view_only_staff_user_is_not_offered_re_score(personas):
    from django.contrib.auth.models import Permission

    viewer = get_user_model().objects.create_user("viewer", password="pw-viewer-123", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_run"))
    body = logged_in(viewer).get("/admin/runs/run/").content.decode()
    assert "rescore_runs" not in body


def test_re_score_with_every_selected_run_refused_says_only_why(personas, root_client):
    cancelled = seed_run(workspace=personas.workspace, items=4, lanes=2, status=RunStatus.CANCELLED, seed=4)
    response = root_client.post(
        "/admin/runs/run/", {"action": "rescore_runs", "_selected_action": [str(cancelled.id)]}, follow=True
    )
    messages = [str(m) for m in response.context["messages"]]
    assert len(messages) == 1 and messages[0].startswith(f"Not re-scored: {cancelled}: ")
    assert "a cancelled run stays as it was cancelled; start a new run" in messages[0]
