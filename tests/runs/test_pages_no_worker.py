"""A run that no worker picks up says so on its overview: past ``NO_WORKER_AFTER`` queued with
nothing claimed, the live progress (the part htmx refreshes) asks whether a Celery worker
runs, and links staff to the operations page. The clock is patched, never waited for."""

from __future__ import annotations

from datetime import timedelta
from unittest.mock import patch

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agentclash_site.workspaces.models import Role
from agentclash_site.workspaces.services import membership_set_role
from runs.models import RunStatus
from runs.services.deployments import deployment_create
from runs.states import transition_run
from tests.clients import logged_in as login
from tests.runs.runfactory import create_run, hosted, publish

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}
NOTICE = "No worker has picked up this run for"
OPS_LINK = 'data-testid="no-worker-ops"'


@pytest.fixture
def queued(personas):
    """A run of a hosted deployment, queued and never dispatched (no worker)."""
    version = publish(personas.workspace)
    run = create_run(personas.workspace, version, [hosted(personas.workspace, "http://127.0.0.1:9/")])
    assert run.status == RunStatus.QUEUED and run.queued_at and run.started_at is None
    return run


def at(run, seconds):
    """The clock ``seconds`` after the run was queued."""
    return patch("django.utils.timezone.now", return_value=run.queued_at + timedelta(seconds=seconds))


def pages(client, run):
    """The overview and its live progress poll."""
    return [
        client.get(f"/runs/{run.id}/").content.decode(),
        client.get(f"/runs/{run.id}/?partial=live&was=running", **HTMX).content.decode(),
    ]


def test_no_notice_while_queued_briefly(queued, personas):
    owner = login(personas.owner)
    with at(queued, 10):
        assert all(NOTICE not in body for body in pages(owner, queued))


def test_the_notice_after_two_minutes_in_the_page_and_its_poll(queued, personas):
    owner = login(personas.owner)
    with at(queued, 125):
        for body in pages(owner, queued):
            assert "No worker has picked up this run for 2 minutes." in body
            assert "Is a Celery worker running against this broker?" in body
            assert "<code>celery -A agentclash_site worker</code>" in body
            # said once by the page's announcer (static/js/app.js), not a live region of the poll
            assert 'data-announce="No worker has picked up this run."' in body
            assert 'role="status"' not in body.split('<section id="live"')[1]
            assert OPS_LINK not in body  # the owner is not staff


def test_one_minute_is_singular(queued, personas):
    with at(queued, 61):
        body = login(personas.owner).get(f"/runs/{queued.id}/").content.decode()
    assert "for 1 minute." in body


def test_no_notice_once_the_run_started(queued, personas):
    transition_run(queued, RunStatus.RUNNING, reason="first claim")
    owner = login(personas.owner)
    with at(queued, 600):
        assert all(NOTICE not in body for body in pages(owner, queued))


def test_no_notice_once_the_run_finished(queued, personas):
    transition_run(queued, RunStatus.CANCELLED, reason="cancelled")
    with at(queued, 600):
        assert NOTICE not in login(personas.owner).get(f"/runs/{queued.id}/").content.decode()


def test_no_notice_for_a_trace_import_run(personas):
    """A trace_import run waits for its results to be uploaded, not for a worker."""
    version = publish(personas.workspace)
    dep = deployment_create(workspace=personas.workspace, name="ci", kind="trace_import").deployment
    run = create_run(personas.workspace, version, [dep])
    assert run.status == RunStatus.QUEUED
    owner = login(personas.owner)
    with at(run, 600):
        assert all(NOTICE not in body for body in pages(owner, run))


def test_the_operations_link_only_for_staff_who_may_open_it(queued, personas):
    staff = get_user_model().objects.create_user("stan", password="pw-stan-123", is_staff=True)
    membership_set_role(workspace=personas.workspace, user=staff, role=Role.VIEWER)
    with at(queued, 125):
        # staff without the run view permission would get 403 there: no link
        body = login(staff).get(f"/runs/{queued.id}/").content.decode()
        assert NOTICE in body and OPS_LINK not in body
        staff.user_permissions.add(
            Permission.objects.get(codename="view_run", content_type__app_label="runs")
        )
        for body in pages(login(staff), queued):
            assert f'<a href="/runs/operations/" {OPS_LINK}>Operations page</a>' in body
        assert OPS_LINK not in login(personas.viewer).get(f"/runs/{queued.id}/").content.decode()


def test_the_notice_costs_no_query(queued, personas):
    """The run's timestamps and its lanes' kinds, already loaded, tell it: the overview and
    its poll make the same queries with the notice as without."""
    owner = login(personas.owner)
    owner.get(f"/runs/{queued.id}/")  # session warm-up
    counts = {}
    for seconds in (10, 125):
        with at(queued, seconds):
            for url, extra in ((f"/runs/{queued.id}/", {}), (f"/runs/{queued.id}/?partial=live", HTMX)):
                with CaptureQueriesContext(connection) as ctx:
                    body = owner.get(url, **extra).content.decode()
                assert (NOTICE in body) == (seconds == 125)
                counts[(seconds, url)] = len(ctx.captured_queries)
    assert counts[(10, f"/runs/{queued.id}/")] == counts[(125, f"/runs/{queued.id}/")]
    assert (
        counts[(10, f"/runs/{queued.id}/?partial=live")] == counts[(125, f"/runs/{queued.id}/?partial=live")]
    )
