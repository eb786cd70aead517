"""The judge provider's admin saves through judge_provider_save (as the workspace's judge
settings page does) and picks the workspace of a new provider with a search box."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from agentclash_site.workspaces.models import Workspace
from grading.models import JudgeProviderConfig
from tests.clients import logged_in

pytestmark = pytest.mark.django_db


@pytest.fixture
def root(personas):
    return get_user_model().objects.create_superuser("root", password="pw-root-123")


def test_a_change_in_the_admin_stamps_updated_at_and_keeps_the_key(personas, root):
    # The admin saved the row itself: updated_at kept the creation time, so the list said
    # a provider changed today was last changed when it was made.
    config = JudgeProviderConfig.objects.create(
        workspace=personas.workspace, kind="openai", updated_at=timezone.now() - dt.timedelta(days=30)
    )
    config.set_api_key("sk-kept")
    config.save()
    before = timezone.now()
    url = f"/admin/grading/judgeproviderconfig/{config.pk}/change/"
    response = logged_in(root).post(
        url, {"kind": "openai", "base_url": "", "model": "  judge-2  ", "api_key": ""}
    )
    assert response.status_code == 302
    config.refresh_from_db()
    assert config.updated_at >= before and config.updated_by == root
    assert (config.model, config.api_key()) == ("judge-2", "sk-kept")


def test_a_new_key_replaces_the_stored_one_and_clear_removes_it(personas, root):
    config = JudgeProviderConfig.objects.create(workspace=personas.workspace, kind="openai")
    client = logged_in(root)
    url = f"/admin/grading/judgeproviderconfig/{config.pk}/change/"
    form = {"kind": "openai", "base_url": "", "model": "m"}
    assert client.post(url, {**form, "api_key": "sk-new"}).status_code == 302
    config.refresh_from_db()
    assert config.api_key() == "sk-new"
    assert client.post(url, {**form, "clear_api_key": "on"}).status_code == 302
    config.refresh_from_db()
    assert not config.has_api_key


def test_adding_a_provider_saves_it_for_the_workspace_picked(personas, root):
    response = logged_in(root).post(
        "/admin/grading/judgeproviderconfig/add/",
        {
            "workspace": personas.workspace.pk,
            "kind": "openai",
            "base_url": "",
            "model": "m",
            "api_key": "sk-1",
        },
    )
    assert response.status_code == 302
    config = JudgeProviderConfig.objects.get(workspace=personas.workspace)
    assert (config.model, config.api_key(), config.updated_by) == ("m", "sk-1", root)


def test_the_add_page_does_not_list_every_workspace(personas, root):
    Workspace.objects.bulk_create(Workspace(slug=f"team-{n}", name=f"Team {n}") for n in range(30))
    body = logged_in(root).get("/admin/grading/judgeproviderconfig/add/").content.decode()
    assert 'name="workspace"' in body and "admin-autocomplete" in body
    assert "team-7" not in body and "Team 7" not in body
