"""`workspace create` and `token create` refuse bad option values with the JSON error of
spec/interfaces.md §2 naming the option, exit 2, and store nothing."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from agentclash_site.workspaces.models import ApiToken, Workspace
from tests.commands import json_command as run

pytestmark = pytest.mark.django_db


def test_workspace_create_refuses_a_name_over_200_characters(personas):
    code, doc = run("workspace", "create", "new-ws", "--name", "n" * 500, "--json")
    assert code == 2
    error = doc["error"]
    assert (error["code"], error["field"]) == ("invalid", "name")
    assert error["message"].startswith("--name: ") and "200 characters" in error["message"]
    assert not Workspace.objects.filter(slug="new-ws").exists()


def test_workspace_create_refuses_a_bad_name_on_a_rerun_and_keeps_the_old_one(personas):
    for name in ("n" * 201, "", "   "):
        code, doc = run("workspace", "create", "acme", "--name", name, "--json")
        assert code == 2
        assert doc["error"]["field"] == "name"
    assert Workspace.objects.get(slug="acme").name == "Acme"


def test_workspace_create_takes_a_name_of_exactly_200_characters(personas):
    code, doc = run("workspace", "create", "new-ws", "--name", "n" * 200, "--json")
    assert code == 0
    assert doc["workspace"]["name"] == "n" * 200


def test_workspace_create_without_json_prints_the_field_error_as_text(personas):
    err = StringIO()
    with pytest.raises(SystemExit) as info:
        call_command("workspace", "create", "new-ws", "--name", "n" * 500, stdout=StringIO(), stderr=err)
    assert info.value.code == 2
    assert err.getvalue().startswith("error: name: --name: Ensure this value has at most 200 characters")


def test_token_create_refuses_a_name_over_100_characters(personas):
    code, doc = run("token", "create", "olive", "--name", "n" * 500, "--json")
    assert code == 2
    error = doc["error"]
    assert (error["code"], error["field"]) == ("invalid", "name")
    assert error["message"].startswith("--name: ") and "100 characters" in error["message"]
    assert not ApiToken.objects.exists()


def test_token_create_takes_a_name_of_exactly_100_characters(personas):
    code, doc = run("token", "create", "olive", "--name", "n" * 100, "--json")
    assert code == 0
    assert ApiToken.objects.get().name == "n" * 100


def test_token_create_refuses_a_workspace_the_user_is_not_a_member_of(personas):
    # oscar owns globex only: a token limited to acme would reach nothing.
    code, doc = run("token", "create", "oscar", "--workspace", "acme", "--json")
    assert code == 2
    error = doc["error"]
    assert (error["code"], error["field"]) == ("not_a_member", "workspace")
    assert "not a member" in error["message"]
    assert "workspace member add acme oscar" in error["message"]
    assert "Members page" in error["message"]
    assert not ApiToken.objects.exists()


def test_token_create_for_a_member_of_the_workspace_still_works(personas):
    code, doc = run("token", "create", "vera", "--workspace", "acme", "--json")  # a viewer
    assert code == 0
    assert doc["workspace"] == "acme"


def test_token_create_refuses_an_empty_workspace_instead_of_reaching_every_workspace(personas):
    # `token create olive --workspace "$WS"` with WS unset issued a token for all of olive's
    # workspaces, where one limited to a workspace was asked for.
    code, doc = run("token", "create", "olive", "--workspace", "", "--json")
    assert code == 2
    error = doc["error"]
    assert (error["code"], error["field"]) == ("invalid", "workspace")
    assert "leave --workspace out" in error["message"]
    assert not ApiToken.objects.exists()


def test_workspace_create_refuses_an_empty_owner(personas):
    code, doc = run("workspace", "create", "new-ws", "--owner", "", "--json")
    assert code == 2
    assert (doc["error"]["code"], doc["error"]["field"]) == ("invalid", "owner")
    assert not Workspace.objects.filter(slug="new-ws").exists()
