"""The run page offers only the operations the services accept: while a re-score's items
wait for their re-grade a cancel is refused ("wait for the rescore to finish"), yet the
page offered Cancel, a button shown only to be refused."""

from __future__ import annotations

import pytest

from runs.models import Run
from runs.seeding import seed_run
from runs.services.operations import run_rescore
from tests.clients import logged_in as login

pytestmark = pytest.mark.django_db


def _offers_cancel(client, run: Run) -> bool:
    return f'"/runs/{run.id}/cancel/"' in client.get(f"/runs/{run.id}/").content.decode()


def test_cancel_is_not_offered_while_a_rescore_is_under_way(personas):
    run = seed_run(workspace=personas.workspace, items=4, lanes=1, infra_error_rate=0)
    editor = login(personas.editor)
    run_rescore(run=run, enqueue=False)
    assert Run.objects.get(pk=run.pk).status == "scoring"
    assert not _offers_cancel(editor, run)
    body = editor.post(f"/runs/{run.id}/cancel/", follow=True).content.decode()
    assert "Not cancelled: the run is being re-scored" in body  # what the button would have met
    # a run scored after its items finished (no re-score) may be cancelled, and is offered it
    Run.objects.filter(pk=run.pk).update(scoring_revision=1)
    assert _offers_cancel(editor, run)
