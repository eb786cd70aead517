"""Membership writes: add, change a role, remove, and the rule that a workspace keeps an owner."""

from __future__ import annotations

import threading
import time

import pytest
from django.contrib.auth import get_user_model
from django.db import connection

from agentclash_site.workspaces import services
from agentclash_site.workspaces.models import Membership, Role
from agentclash_site.workspaces.services import (
    MembershipError,
    last_owner_memberships,
    membership_add,
    membership_remove,
    membership_set_role,
)
from tests.processes import waiting_on_a_lock


def roles(workspace) -> dict[str, str]:
    return dict(Membership.objects.filter(workspace=workspace).values_list("user__username", "role"))


@pytest.mark.django_db
class TestTheLastOwnerRule:
    def test_the_last_owner_cannot_be_demoted(self, personas):
        with pytest.raises(MembershipError) as caught:
            membership_set_role(workspace=personas.workspace, user=personas.owner, role=Role.EDITOR)
        assert caught.value.code == "last_owner"
        assert "make another member an owner first" in caught.value.message
        assert roles(personas.workspace)["olive"] == "owner"

    def test_the_last_owner_cannot_be_removed(self, personas):
        with pytest.raises(MembershipError) as caught:
            membership_remove(workspace=personas.workspace, user=personas.owner)
        assert caught.value.code == "last_owner"
        assert "olive" in roles(personas.workspace)

    def test_an_owner_can_go_once_another_owner_remains(self, personas):
        membership_set_role(workspace=personas.workspace, user=personas.editor, role=Role.OWNER)
        membership_set_role(workspace=personas.workspace, user=personas.owner, role=Role.VIEWER)
        membership_remove(workspace=personas.workspace, user=personas.owner)
        assert roles(personas.workspace) == {"eddie": "owner", "vera": "viewer"}

    def test_other_members_come_and_go_freely(self, personas):
        membership_set_role(workspace=personas.workspace, user=personas.viewer, role=Role.EDITOR)
        membership_remove(workspace=personas.workspace, user=personas.editor)
        assert roles(personas.workspace) == {"olive": "owner", "vera": "editor"}

    def test_a_workspace_without_owners_still_takes_members(self, personas):
        # Workspaces made in the admin may have none yet; the rule keeps owners, it does not invent them.
        User = get_user_model()
        personas.other_workspace.memberships.all().delete()
        membership_set_role(workspace=personas.other_workspace, user=personas.viewer, role=Role.VIEWER)
        membership_set_role(workspace=personas.other_workspace, user=personas.viewer, role=Role.EDITOR)
        membership_add(
            workspace=personas.other_workspace, user=User.objects.create_user("newcomer"), role=Role.VIEWER
        )
        assert roles(personas.other_workspace) == {"vera": "editor", "newcomer": "viewer"}


@pytest.mark.django_db
def test_adding_someone_twice_is_refused_naming_their_role(personas):
    with pytest.raises(MembershipError) as caught:
        membership_add(workspace=personas.workspace, user=personas.viewer, role=Role.OWNER)
    assert (caught.value.code, caught.value.field) == ("already_member", "member")
    assert "already a member (viewer)" in caught.value.message
    assert roles(personas.workspace)["vera"] == "viewer"


@pytest.mark.django_db
def test_an_unknown_role_is_refused_listing_the_roles(personas):
    with pytest.raises(MembershipError) as caught:
        membership_add(workspace=personas.workspace, user=personas.outsider, role="admin")
    assert (caught.value.code, caught.value.field) == ("invalid_role", "role")
    assert "owner, editor, viewer" in caught.value.message
    assert "oscar" not in roles(personas.workspace)


@pytest.mark.django_db
def test_last_owner_memberships_names_only_workspaces_left_without_an_owner(personas):
    membership_set_role(workspace=personas.other_workspace, user=personas.owner, role=Role.OWNER)
    # olive owns acme alone and globex with oscar
    found = last_owner_memberships(Membership.objects.filter(user=personas.owner))
    assert [m.workspace.slug for m in found] == ["acme"]
    both = Membership.objects.filter(user__in=[personas.owner, personas.outsider])
    assert sorted(m.workspace.slug for m in last_owner_memberships(both)) == ["acme", "globex", "globex"]
    assert last_owner_memberships(Membership.objects.filter(user=personas.editor)) == []


LOCK_DEADLINE_S = 10


@pytest.mark.django_db(transaction=True)
def test_two_owners_demoting_each_other_at_once_leave_one_owner(personas, monkeypatch):
    """The first demotion has checked that another owner remains and not yet committed when
    the second starts: without the workspace lock the second also sees two owners."""
    if connection.vendor != "postgresql":
        pytest.skip("needs concurrent connections")
    membership_set_role(workspace=personas.workspace, user=personas.editor, role=Role.OWNER)
    checked, go = threading.Event(), threading.Event()
    original = services.is_last_owner

    def check_then_hold(membership):  # type: ignore[no-untyped-def]
        found = original(membership)
        if threading.current_thread().name == "first":
            checked.set()
            assert go.wait(LOCK_DEADLINE_S)
        return found

    monkeypatch.setattr(services, "is_last_owner", check_then_hold)
    outcomes: dict[str, object] = {}

    def demote(user) -> None:  # type: ignore[no-untyped-def]
        try:
            outcomes[threading.current_thread().name] = membership_set_role(
                workspace=personas.workspace, user=user, role=Role.EDITOR
            )
        except Exception as exc:  # the outcome is what the test inspects
            outcomes[threading.current_thread().name] = exc
        finally:
            connection.close()

    first = threading.Thread(target=demote, args=(personas.owner,), name="first")
    second = threading.Thread(target=demote, args=(personas.editor,), name="second")
    first.start()
    assert checked.wait(LOCK_DEADLINE_S)
    second.start()
    deadline = time.monotonic() + LOCK_DEADLINE_S
    while second.is_alive() and not waiting_on_a_lock():  # done unlocked, or queued behind first
        assert time.monotonic() < deadline, "the second demotion neither finished nor waited"
        time.sleep(0.01)
    go.set()
    first.join(LOCK_DEADLINE_S)
    second.join(LOCK_DEADLINE_S)
    assert isinstance(outcomes["first"], Membership), outcomes
    assert isinstance(outcomes["second"], MembershipError), outcomes
    assert outcomes["second"].code == "last_owner"
    assert sorted(roles(personas.workspace).items()) == [
        ("eddie", "owner"),
        ("olive", "editor"),
        ("vera", "viewer"),
    ]
