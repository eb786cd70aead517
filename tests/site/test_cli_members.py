"""``workspace member add|remove|list``: the Members page's operations for operators, with
the conventions of ``workspace create`` (one JSON document, exit 0, or 2 with an error
naming the field)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agentclash_site.workspaces.models import Membership
from tests.commands import json_command as run

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]


def _roles(workspace) -> dict[str, str]:
    return dict(Membership.objects.filter(workspace=workspace).values_list("user__username", "role"))


def test_member_list_prints_owners_editors_viewers(personas):
    code, doc = run("workspace", "member", "list", "acme", "--json")
    assert code == 0
    assert doc["workspace"] == "acme"
    assert [(m["username"], m["role"]) for m in doc["members"]] == [
        ("olive", "owner"),
        ("eddie", "editor"),
        ("vera", "viewer"),
    ]
    assert all(m["since"].endswith("Z") for m in doc["members"])


def test_member_add_adds_as_editor_by_default_and_a_rerun_changes_only_a_given_role(personas):
    code, doc = run("workspace", "member", "add", "acme", "oscar", "--json")
    assert code == 0
    assert doc["created"] is True
    assert (doc["workspace"], doc["member"]["username"], doc["member"]["role"]) == ("acme", "oscar", "editor")
    assert _roles(personas.workspace)["oscar"] == "editor"

    code, doc = run("workspace", "member", "add", "acme", "oscar", "--json")
    assert (code, doc["created"], doc["member"]["role"]) == (0, False, "editor")

    code, doc = run("workspace", "member", "add", "acme", "oscar", "--role", "viewer", "--json")
    assert (code, doc["created"], doc["member"]["role"]) == (0, False, "viewer")
    assert _roles(personas.workspace)["oscar"] == "viewer"


def test_member_add_with_a_role(personas):
    code, doc = run("workspace", "member", "add", "globex", "olive", "--role", "owner", "--json")
    assert code == 0
    assert _roles(personas.other_workspace) == {"oscar": "owner", "olive": "owner"}


@pytest.mark.parametrize(
    ("args", "code_", "field"),
    [
        (("add", "nope", "oscar"), "unknown_workspace", "workspace"),
        (("add", "acme", "nobody"), "unknown_user", "username"),
        (("add", "acme", "oscar", "--role", "admin"), "invalid_role", "role"),
        (("add", "acme", "eddie", "--role", "Owner"), "invalid_role", "role"),
        (("remove", "acme", "oscar"), "not_a_member", "username"),
        (("remove", "acme", "olive"), "last_owner", "username"),
        (("add", "acme", "olive", "--role", "viewer"), "last_owner", "username"),
        (("list", "nope"), "unknown_workspace", "workspace"),
    ],
)
def test_member_errors_exit_2_naming_the_field_and_change_nothing(personas, args, code_, field):
    before = {ws.slug: _roles(ws) for ws in (personas.workspace, personas.other_workspace)}
    code, doc = run("workspace", "member", *args, "--json")
    assert code == 2
    assert (doc["error"]["code"], doc["error"]["field"]) == (code_, field)
    assert {ws.slug: _roles(ws) for ws in (personas.workspace, personas.other_workspace)} == before


def test_a_role_the_workspace_does_not_have_lists_the_roles(personas):
    # The message named them; a script reads "choices" (interfaces.md §2), as for --kind.
    code, doc = run("workspace", "member", "add", "acme", "oscar", "--role", "admin", "--json")
    assert code == 2
    assert doc["error"]["choices"] == ["owner", "editor", "viewer"]


def test_member_remove_prints_who_left(personas):
    code, doc = run("workspace", "member", "remove", "acme", "vera", "--json")
    assert code == 0
    assert doc["workspace"] == "acme"
    assert (doc["removed"]["username"], doc["removed"]["role"]) == ("vera", "viewer")
    assert "vera" not in _roles(personas.workspace)


def test_the_last_owner_can_leave_once_another_member_is_an_owner(personas):
    assert run("workspace", "member", "add", "acme", "eddie", "--role", "owner", "--json")[0] == 0
    code, _ = run("workspace", "member", "remove", "acme", "olive", "--json")
    assert code == 0
    assert _roles(personas.workspace) == {"eddie": "owner", "vera": "viewer"}


@pytest.mark.parametrize("args", [("member",), ("member", "add", "acme"), ("member", "remove")])
def test_a_missing_action_or_argument_is_a_json_usage_error(args):
    done = subprocess.run(
        [sys.executable, "manage.py", "workspace", *args, "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert json.loads(done.stdout)["error"]["code"] == "usage"
