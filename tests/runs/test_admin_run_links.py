"""The admin's run and item lists link the workspace-scoped run pages only for members of
the run's workspace: a superuser outside it would get a 404 there."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from agentclash_site.workspaces.models import Role
from agentclash_site.workspaces.services import membership_set_role
from runs.seeding import seed_run
from tests.clients import logged_in

pytestmark = pytest.mark.django_db


@pytest.fixture
def root(personas):
    return get_user_model().objects.create_superuser("root", password="pw-root-123")


def test_a_non_member_operator_gets_the_admin_view_instead_of_a_run_page_that_404s(personas, root):
    run = seed_run(workspace=personas.workspace, items=4, lanes=2)
    client = logged_in(root)
    assert client.get(f"/runs/{run.id}/").status_code == 404  # pages are workspace-scoped
    runs = client.get("/admin/runs/run/").content.decode()
    assert f'href="/runs/{run.id}/"' not in runs
    assert f'<a href="/admin/runs/run/{run.id}/change/">admin view <small>(not a member)</small></a>' in runs
    item = run.items.first()
    items = client.get("/admin/runs/runitem/").content.decode()
    assert f'href="/runs/{run.id}/cases/' not in items and f"/runs/{run.id}/" not in items
    assert (
        f'<a href="/admin/runs/runitem/{item.id}/change/">admin view <small>(not a member)</small></a>'
        in items
    )


def test_a_member_operator_gets_the_link_to_the_run_page(personas, root):
    run = seed_run(workspace=personas.workspace, items=4, lanes=2)
    seed_run(workspace=personas.other_workspace, items=2, lanes=1, name="elsewhere")
    membership_set_role(workspace=personas.workspace, user=root, role=Role.VIEWER)
    client = logged_in(root)
    runs = client.get("/admin/runs/run/").content.decode()
    assert f'<a href="/runs/{run.id}/">open</a>' in runs and client.get(f"/runs/{run.id}/").status_code == 200
    assert (
        runs.count(">open</a>") == 1 and runs.count(">admin view <small>(not a member)</small></a>") == 1
    )  # the other run
    item = run.items.first()
    items = client.get(f"/admin/runs/runitem/?q={run.id}").content.decode()
    assert f'href="/runs/{run.id}/cases/{item.id}/">open</a>' in items
