"""Admin console for runs: list pages, actions (cancel, retry failed, requeue stuck) and
the operations page (staff only, linked from the admin index)."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from runs.models import ItemState, Run, RunItem, RunStatus, SweeperStatus
from runs.seeding import seed_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff(personas):
    user = get_user_model().objects.create_superuser("root", password="pw-root-123")
    client = Client()
    client.force_login(user)
    return client


def test_the_admin_lists_runs_items_and_attempts(personas, staff):
    run = seed_run(workspace=personas.workspace, items=20, lanes=2, infra_error_rate=0.2)
    body = staff.get("/admin/runs/run/").content.decode()
    assert str(run) in body and "invoice-totals v1" in body
    assert f"/admin/runs/run/{run.id}/change/" in body  # not a member: no link to the (404) run page
    assert staff.get("/admin/runs/runitem/?claim=stuck").status_code == 200
    assert staff.get("/admin/runs/runitem/?state__exact=done").status_code == 200
    assert staff.get("/admin/runs/attempt/?category__exact=infra_error").status_code == 200
    assert staff.get(f"/admin/runs/run/{run.id}/change/").status_code == 200


def test_the_admin_index_links_the_operations_page(staff):
    assert "/runs/operations/" in staff.get("/admin/").content.decode()


def test_the_operations_page_is_staff_only_and_counts_stuck_claims(personas, staff):
    run = seed_run(workspace=personas.workspace, items=10, lanes=2, status="running", done_fraction=0.5)
    pending = RunItem.objects.filter(run=run, state=ItemState.PENDING)
    stuck_ids = list(pending.values_list("id", flat=True)[:3])
    RunItem.objects.filter(id__in=stuck_ids).update(
        state=ItemState.CLAIMED,
        claim_owner="w1",
        claimed_at=timezone.now(),
        claim_deadline=timezone.now() - dt.timedelta(minutes=1),
    )
    SweeperStatus.objects.create(name="runs", last_run_at=timezone.now(), last_result={"returned": 0})
    member = Client()
    member.force_login(personas.owner)
    assert member.get("/runs/operations/").status_code == 302  # to the admin login
    body = staff.get("/runs/operations/").content.decode()
    assert 'data-testid="stuck-count">3<' in body
    assert "careful" in body  # in flight per deployment
    assert '<th scope="row">Returned</th><td class="num">0</td>' in body  # the last sweep, labelled
    assert str(run) in body  # active runs


def test_admin_actions_cancel_runs_and_requeue_stuck_items(personas, staff):
    run = seed_run(workspace=personas.workspace, items=10, lanes=2, status="running", done_fraction=0.5)
    done = seed_run(workspace=personas.workspace, items=4, lanes=2)
    response = staff.post(
        "/admin/runs/run/",
        {"action": "cancel_runs", "_selected_action": [str(run.id), str(done.id)]},
        follow=True,
    )
    body = response.content.decode()
    assert "Cancelled 1 run(s)." in body and "Already finished, left alone" in body
    assert Run.objects.get(id=run.id).status == RunStatus.CANCELLED
    assert Run.objects.get(id=done.id).status == RunStatus.COMPLETED
    response = staff.post(
        "/admin/runs/run/", {"action": "requeue_stuck_items", "_selected_action": [str(done.id)]}, follow=True
    )
    assert "Sweeper ran on the selected runs:" in response.content.decode()


def stuck_claims(run: Run, n: int) -> list[int]:
    ids = list(RunItem.objects.filter(run=run, state=ItemState.PENDING).values_list("id", flat=True)[:n])
    RunItem.objects.filter(id__in=ids).update(
        state=ItemState.CLAIMED,
        claim_owner="w1",
        claimed_at=timezone.now() - dt.timedelta(minutes=5),
        claim_deadline=timezone.now() - dt.timedelta(minutes=1),
    )
    return ids


def test_requeue_stuck_items_returns_the_claims_of_the_selected_runs_only(personas, staff):
    """It ran the whole sweeper whatever was selected: every run's expired claims went back,
    and the sweep was stored as the periodic sweeper's last (the operations page reads that
    to tell whether beat runs)."""
    chosen = seed_run(workspace=personas.workspace, items=10, lanes=2, status="running", done_fraction=0.5)
    other = seed_run(workspace=personas.workspace, items=10, lanes=2, status="running", done_fraction=0.5)
    mine, theirs = stuck_claims(chosen, 2), stuck_claims(other, 3)
    response = staff.post(
        "/admin/runs/run/",
        {"action": "requeue_stuck_items", "_selected_action": [str(chosen.id)]},
        follow=True,
    )
    assert "&#x27;returned_claims&#x27;: 2" in response.content.decode()
    assert set(RunItem.objects.filter(id__in=mine).values_list("state", flat=True)) == {ItemState.PENDING}
    assert set(RunItem.objects.filter(id__in=theirs).values_list("state", flat=True)) == {ItemState.CLAIMED}
    assert not SweeperStatus.objects.exists()


def test_the_pack_version_list_counts_runs_and_links_them(personas, staff):
    run = seed_run(workspace=personas.workspace, items=4, lanes=2)
    seed_run(workspace=personas.workspace, items=4, lanes=2)
    body = staff.get("/admin/packs/packversion/").content.decode()
    link = f"/admin/runs/run/?pack_version__id__exact={run.pack_version_id}"
    assert f'<a href="{link}">2</a>' in body
    listed = staff.get(link)
    assert listed.status_code == 200 and str(run) in listed.content.decode()


def test_a_view_only_staff_user_cannot_run_the_run_and_token_actions(personas):
    """Actions that declare no permission are offered to anyone who may view the list: an
    operator given only "view" could cancel any workspace's runs or revoke its tokens."""
    from django.contrib.auth.models import Permission

    from agentclash_site.workspaces.models import ApiToken
    from agentclash_site.workspaces.services import token_create

    viewer = get_user_model().objects.create_user("watcher", password="pw-watch-123", is_staff=True)
    viewer.user_permissions.add(
        Permission.objects.get(codename="view_run"), Permission.objects.get(codename="view_apitoken")
    )
    client = Client()
    client.force_login(viewer)
    run = seed_run(workspace=personas.workspace, items=4, lanes=1, status="running", done_fraction=0.5)
    issued = token_create(user=personas.owner, workspace=personas.workspace, name="ci")
    assert client.get("/admin/runs/run/").status_code == 200
    client.post("/admin/runs/run/", {"action": "cancel_runs", "_selected_action": [str(run.id)]})
    client.post(
        "/admin/workspaces/apitoken/", {"action": "revoke", "_selected_action": [str(issued.token.pk)]}
    )
    assert Run.objects.get(id=run.id).status == RunStatus.RUNNING
    assert ApiToken.objects.get(pk=issued.token.pk).revoked_at is None
    page = client.get("/admin/runs/run/").content.decode()
    assert "cancel_runs" not in page and "retry_failed_items" not in page


def test_the_operations_page_needs_the_run_view_permission(personas):
    # It lists every workspace's active and stuck runs; any staff account could read it.
    from django.contrib.auth.models import Permission

    staff_only = get_user_model().objects.create_user("desk", password="pw-desk-123", is_staff=True)
    client = Client()
    client.force_login(staff_only)
    assert client.get("/runs/operations/").status_code == 403
    assert "/runs/operations/" not in client.get("/admin/").content.decode()
    assert client.get("/admin/runs/run/").status_code == 403  # the admin's own rule, for comparison
    staff_only.user_permissions.add(Permission.objects.get(codename="view_run"))
    client.force_login(get_user_model().objects.get(pk=staff_only.pk))  # permissions cached per user
    assert client.get("/runs/operations/").status_code == 200
    assert "/runs/operations/" in client.get("/admin/").content.decode()
