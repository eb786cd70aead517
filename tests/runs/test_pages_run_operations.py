"""Cancel, retry failed items and re-score from the run page: the buttons are offered to
members who may write and only in the states the services accept; each works as a plain
POST (redirect back with a message) and with htmx (``HX-Location``); a refused operation
is a message, not a 500; viewers get 403 and outsiders 404."""

from __future__ import annotations

import pytest

from runs.models import Run, RunItem
from runs.seeding import seed_run
from tests.clients import logged_in as login

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}


def ops(run: Run) -> dict[str, str]:
    return {
        "cancel": f"/runs/{run.id}/cancel/",
        "retry": f"/runs/{run.id}/retry-failed/",
        "rescore": f"/runs/{run.id}/rescore/",
    }


def operations_offered(client, run: Run) -> set[str]:
    body = client.get(f"/runs/{run.id}/").content.decode()
    return {name for name, url in ops(run).items() if f'"{url}"' in body}


@pytest.fixture
def running(personas):
    return seed_run(workspace=personas.workspace, items=8, lanes=2, status="running", done_fraction=0.5)


@pytest.fixture
def completed(personas):
    return seed_run(workspace=personas.workspace, items=40, lanes=2, infra_error_rate=0.3)


def test_an_editor_is_offered_cancel_on_a_running_run_and_retry_and_rescore_on_a_finished_one(
    personas, running, completed
):
    editor = login(personas.editor)
    assert operations_offered(editor, running) == {"cancel"}
    assert operations_offered(editor, completed) == {"retry", "rescore"}
    clean = seed_run(workspace=personas.workspace, items=4, lanes=1, infra_error_rate=0)
    assert operations_offered(editor, clean) == {"rescore"}  # nothing to retry
    Run.objects.filter(pk=clean.pk).update(status="cancelled")
    assert operations_offered(editor, clean) == set()


def test_a_viewer_sees_no_operation_and_gets_403_on_each(personas, running, completed):
    viewer = login(personas.viewer)
    assert operations_offered(viewer, running) == set()
    assert operations_offered(viewer, completed) == set()
    for run in (running, completed):
        for url in ops(run).values():
            assert viewer.post(url).status_code == 403, url
    assert viewer.get(ops(running)["cancel"]).status_code == 403
    assert Run.objects.get(pk=running.pk).status == "running"


def test_an_outsider_gets_404_on_each(personas, running):
    outsider = login(personas.outsider)
    for url in ops(running).values():
        assert outsider.post(url).status_code == 404, url
        assert outsider.post(url, **HTMX).status_code == 404, url


def test_cancel_without_javascript_confirms_then_cancels_and_says_so(personas, running):
    owner = login(personas.owner)
    confirm = owner.get(ops(running)["cancel"])
    assert confirm.status_code == 200
    assert b'<form method="post"' in confirm.content and b"csrfmiddlewaretoken" in confirm.content
    response = owner.post(ops(running)["cancel"], follow=True)
    assert response.redirect_chain == [(f"/runs/{running.id}/", 302)]
    assert "Run cancelled" in response.content.decode()
    assert Run.objects.get(pk=running.pk).status == "cancelled"
    assert not RunItem.objects.filter(run=running, state="pending").exists()


def test_cancel_with_htmx_asks_first_and_navigates_back_with_hx_location(personas, running):
    owner = login(personas.owner)
    body = owner.get(f"/runs/{running.id}/").content.decode()
    assert f'hx-post="{ops(running)["cancel"]}"' in body and "hx-confirm=" in body
    response = owner.post(ops(running)["cancel"], **HTMX)
    assert response.status_code == 200
    assert f"/runs/{running.id}/" in response["HX-Location"]
    assert "Run cancelled" in owner.get(f"/runs/{running.id}/").content.decode()


def test_a_refused_operation_is_a_message_not_an_error_page(personas, completed):
    editor = login(personas.editor)
    response = editor.post(ops(completed)["cancel"], follow=True)
    assert response.status_code == 200
    assert "Not cancelled: the run is already completed." in response.content.decode()
    Run.objects.filter(pk=completed.pk).update(status="cancelled")
    body = editor.post(ops(completed)["retry"], follow=True).content.decode()
    assert "Nothing retried: a cancelled run cannot retry items; start a new run." in body
    body = editor.post(ops(completed)["rescore"], follow=True).content.decode()
    assert (
        "Not re-scored: only a completed or failed run can be re-scored (this one is cancelled); "
        "a cancelled run stays as it was cancelled; start a new run." in body
    )


def test_retry_with_nothing_to_retry_says_so(personas):
    clean = seed_run(workspace=personas.workspace, items=4, lanes=1, infra_error_rate=0)
    body = login(personas.editor).post(ops(clean)["retry"], follow=True).content.decode()
    assert "Nothing retried: the run has no infra_error or config_error items." in body


def test_retry_failed_items_sends_the_infra_errors_again(personas, completed):
    failed = RunItem.objects.filter(run=completed, last_category="infra_error", status="").count()
    assert failed
    response = login(personas.editor).post(ops(completed)["retry"], follow=True)
    assert f"{failed} failed items sent again." in response.content.decode()
    assert RunItem.objects.filter(run=completed, state="pending").count() == failed
    assert Run.objects.get(pk=completed.pk).status == "running"


def test_rescore_opens_a_new_revision_with_htmx_too(personas, completed):
    owner = login(personas.owner)
    response = owner.post(ops(completed)["rescore"], **HTMX)
    assert response.status_code == 200 and "HX-Location" in response
    run = Run.objects.get(pk=completed.pk)
    assert (run.status, run.scoring_revision) == ("scoring", 2)
    assert "Re-scoring the recorded evidence (revision 2)" in owner.get(f"/runs/{run.id}/").content.decode()


def test_operations_are_post_only(personas, completed):
    owner = login(personas.owner)
    assert owner.get(ops(completed)["retry"]).status_code == 405
    assert owner.get(ops(completed)["rescore"]).status_code == 405
