"""A workspace's slug is chosen once: every API URL, bookmark and CLI call names it, so no
admin form, API call or save renames it (the name is what changes)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from agentclash_site.workspaces.models import Workspace
from tests.clients import logged_in
from tests.site.test_admin_memberships import inline_data

pytestmark = pytest.mark.django_db


@pytest.fixture
def root(personas):
    return logged_in(get_user_model().objects.create_superuser("root", password="pw-root-123"))


def test_the_admin_change_form_shows_the_slug_without_an_input(personas, root):
    page = root.get(f"/admin/workspaces/workspace/{personas.workspace.pk}/change/").content.decode()
    assert 'name="slug"' not in page
    assert "acme" in page  # still shown, read-only
    assert 'name="name"' in page


def test_an_admin_save_posting_another_slug_keeps_the_slug_and_changes_the_name(personas, root):
    data = {**inline_data(personas), "slug": "renamed", "name": "Acme Labs"}
    response = root.post(f"/admin/workspaces/workspace/{personas.workspace.pk}/change/", data)
    assert response.status_code == 302
    personas.workspace.refresh_from_db()
    assert (personas.workspace.slug, personas.workspace.name) == ("acme", "Acme Labs")
    assert personas.api(personas.owner).get("/api/v1/workspaces/acme").status_code == 200


def test_the_admin_add_form_still_takes_a_slug(personas, root):
    assert 'name="slug"' in root.get("/admin/workspaces/workspace/add/").content.decode()
    data = {
        "slug": "initech",
        "name": "Initech",
        "memberships-TOTAL_FORMS": "0",
        "memberships-INITIAL_FORMS": "0",
        "memberships-MIN_NUM_FORMS": "0",
        "memberships-MAX_NUM_FORMS": "1000",
    }
    assert root.post("/admin/workspaces/workspace/add/", data).status_code == 302
    assert Workspace.objects.filter(slug="initech", name="Initech").exists()


def test_saving_a_workspace_with_another_slug_is_refused(personas):
    workspace = Workspace.objects.get(slug="acme")
    workspace.slug = "renamed"
    with pytest.raises(ValueError, match="slug never changes"):
        workspace.save()
    assert Workspace.objects.filter(slug="acme").exists()
    assert not Workspace.objects.filter(slug="renamed").exists()


def test_a_workspace_created_in_this_process_cannot_be_renamed_either(db):
    workspace = Workspace.objects.create(slug="fresh", name="Fresh")
    workspace.name = "Fresh and new"
    workspace.save()
    workspace.slug = "stale"
    with pytest.raises(ValueError, match="slug never changes"):
        workspace.save()
    assert Workspace.objects.get(pk=workspace.pk).slug == "fresh"


def test_the_api_refuses_a_slug_in_a_workspace_update_by_name(personas):
    response = personas.api(personas.owner).patch(
        "/api/v1/workspaces/acme", {"name": "Acme Labs", "slug": "renamed"}, format="json"
    )
    assert response.status_code == 400
    assert response.json()["error"]["field"] == "slug"
    personas.workspace.refresh_from_db()
    assert (personas.workspace.slug, personas.workspace.name) == ("acme", "Acme")
