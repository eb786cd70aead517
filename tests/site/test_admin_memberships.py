"""The admin console keeps the last-owner rule: a workspace that has an owner keeps one, whether
an operator edits a membership, the workspace's member rows, or deletes a user."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agentclash_site.workspaces.models import Membership, Role
from agentclash_site.workspaces.services import membership_set_role
from tests.clients import logged_in

pytestmark = pytest.mark.django_db

FIX = "make another member an owner first"


@pytest.fixture
def root(personas):
    return logged_in(get_user_model().objects.create_superuser("root", password="pw-root-123"))


def role_of(personas, user) -> str | None:
    return (
        Membership.objects.filter(workspace=personas.workspace, user=user)
        .values_list("role", flat=True)
        .first()
    )


def membership(personas, user) -> Membership:
    return Membership.objects.get(workspace=personas.workspace, user=user)


class TestTheMembershipPages:
    def test_the_last_owner_cannot_be_demoted(self, personas, root):
        m = membership(personas, personas.owner)
        response = root.post(
            f"/admin/workspaces/membership/{m.pk}/change/",
            {"role": "editor", "created_at_0": "2024-01-01", "created_at_1": "00:00:00"},
        )
        assert response.status_code == 200
        assert FIX in response.content.decode()
        assert role_of(personas, personas.owner) == "owner"

    def test_another_owner_makes_the_demotion_possible(self, personas, root):
        membership_set_role(workspace=personas.workspace, user=personas.editor, role=Role.OWNER)
        m = membership(personas, personas.owner)
        response = root.post(
            f"/admin/workspaces/membership/{m.pk}/change/",
            {"role": "viewer", "created_at_0": "2024-01-01", "created_at_1": "00:00:00"},
        )
        assert response.status_code == 302
        assert role_of(personas, personas.owner) == "viewer"

    def demote_olive(self, root, personas):
        m = membership(personas, personas.owner)
        return root.post(
            f"/admin/workspaces/membership/{m.pk}/change/",
            {"role": "viewer", "created_at_0": "2024-01-01", "created_at_1": "00:00:00"},
            follow=True,
        )

    def test_the_forms_check_counts_the_owners_under_the_workspaces_lock(self, personas, root):
        """The form counted the owners unlocked: eddie could be demoted by another operator
        before the save, whose own (locked) check then refused with a 500. The lock is taken
        before the count and held until the page's transaction ends."""
        membership_set_role(workspace=personas.workspace, user=personas.editor, role=Role.OWNER)
        with CaptureQueriesContext(connection) as captured:
            assert self.demote_olive(root, personas).redirect_chain[0][1] == 302
        sql = [q["sql"] for q in captured.captured_queries]
        lock = next(i for i, q in enumerate(sql) if q.endswith("FOR UPDATE") and "workspaces_workspace" in q)
        count = next(i for i, q in enumerate(sql) if "\"role\" = 'owner'" in q)
        assert lock < count, sql[: count + 1]

    def test_an_owner_demoted_after_the_forms_check_shows_the_form_again(self, personas, root, monkeypatch):
        """Should the save's check still find olive the last owner (eddie demoted after the
        form's check, here in the same transaction: the lock keeps other operators out), the
        page is shown again with the role typed and the reason on it (it redirected to the
        stored values, losing the edit, with a "Not saved" message), and saves nothing."""
        from django.contrib.admin.models import LogEntry

        from agentclash_site.workspaces.admin import MembershipAdminForm

        membership_set_role(workspace=personas.workspace, user=personas.editor, role=Role.OWNER)
        clean_role = MembershipAdminForm.clean_role
        raced = []

        def check_then_eddie_demoted(form):
            role = clean_role(form)
            if not raced:  # once: the other operator's demotion
                raced.append(Membership.objects.filter(user=personas.editor).update(role=Role.EDITOR))
            return role

        monkeypatch.setattr(MembershipAdminForm, "clean_role", check_then_eddie_demoted)
        response = self.demote_olive(root, personas)
        assert response.status_code == 200 and response.redirect_chain == []
        form = response.context["adminform"].form
        assert form.errors == {
            "role": [
                f"olive is the last owner of workspace acme: a workspace keeps at least one owner; {FIX}."
            ]
        }
        assert '<option value="viewer" selected>' in response.content.decode()
        assert (role_of(personas, personas.owner), role_of(personas, personas.editor)) == ("owner", "owner")
        assert not LogEntry.objects.exists()

    def test_a_membership_cannot_be_moved_to_another_workspace_or_user(self, personas, root):
        m = membership(personas, personas.owner)
        root.post(
            f"/admin/workspaces/membership/{m.pk}/change/",
            {
                "workspace": personas.other_workspace.pk,
                "user": personas.viewer.pk,
                "role": "owner",
                "created_at_0": "2024-01-01",
                "created_at_1": "00:00:00",
            },
        )
        m.refresh_from_db()
        assert (m.workspace_id, m.user_id) == (personas.workspace.pk, personas.owner.pk)

    def test_the_last_owner_cannot_be_deleted(self, personas, root):
        m = membership(personas, personas.owner)
        page = root.get(f"/admin/workspaces/membership/{m.pk}/delete/").content.decode()
        assert FIX in page
        root.post(f"/admin/workspaces/membership/{m.pk}/delete/", {"post": "yes"})
        assert role_of(personas, personas.owner) == "owner"

    def test_the_bulk_delete_refuses_a_selection_holding_the_last_owner(self, personas, root):
        ids = [membership(personas, u).pk for u in (personas.owner, personas.viewer)]
        response = root.post(
            "/admin/workspaces/membership/",
            {"action": "delete_selected", "_selected_action": ids, "post": "yes"},
        )
        assert FIX in response.content.decode()
        assert role_of(personas, personas.owner) == "owner" and role_of(personas, personas.viewer) == "viewer"

    def test_the_bulk_delete_of_other_members_goes_ahead(self, personas, root):
        ids = [membership(personas, u).pk for u in (personas.editor, personas.viewer)]
        response = root.post(
            "/admin/workspaces/membership/",
            {"action": "delete_selected", "_selected_action": ids, "post": "yes"},
        )
        assert response.status_code == 302
        assert list(
            Membership.objects.filter(workspace=personas.workspace).values_list("role", flat=True)
        ) == ["owner"]


class TestTheMembershipAddPage:
    URL = "/admin/workspaces/membership/add/"

    def add_oscar(self, root, personas, role="viewer"):
        return root.post(
            self.URL,
            {
                "workspace": personas.workspace.pk,
                "user": personas.outsider.pk,
                "role": role,
                "created_at_0": "2024-01-01",
                "created_at_1": "00:00:00",
            },
        )

    def test_adds_the_member(self, personas, root):
        assert self.add_oscar(root, personas).status_code == 302
        assert role_of(personas, personas.outsider) == "viewer"

    def test_a_member_already_is_named(self, personas, root):
        membership_set_role(workspace=personas.workspace, user=personas.outsider, role=Role.EDITOR)
        response = self.add_oscar(root, personas)
        assert response.status_code == 200
        name = personas.outsider.get_username()
        assert response.context["adminform"].form.errors == {"user": [f"{name} is already a member of acme."]}
        assert role_of(personas, personas.outsider) == "editor"

    def test_the_same_member_added_meanwhile_shows_the_form_again(self, personas, root, monkeypatch):
        """Two operators add the same member at once: the other's row comes after this form's
        check, and the insert hit the unique constraint (a 500). The page is shown again with
        what was typed and the reason; nothing of this add is kept (the row inserted here, in
        the page's transaction, goes with it, as does the log entry)."""
        from django.contrib.admin.models import LogEntry

        from agentclash_site.workspaces.admin import MembershipAdmin

        save_form = MembershipAdmin.save_form  # called once the form is valid, before the save
        raced = []

        def validated_then_added_meanwhile(admin, request, form, change):
            if not raced:
                raced.append(
                    membership_set_role(
                        workspace=personas.workspace, user=personas.outsider, role=Role.EDITOR
                    )
                )
            return save_form(admin, request, form, change)

        monkeypatch.setattr(MembershipAdmin, "save_form", validated_then_added_meanwhile)
        response = self.add_oscar(root, personas, role="owner")
        assert response.status_code == 200
        name = personas.outsider.get_username()
        assert response.context["adminform"].form.errors == {"user": [f"{name} is already a member of acme."]}
        page = response.content.decode()
        assert '<option value="owner" selected>' in page and 'value="2024-01-01"' in page
        assert role_of(personas, personas.outsider) is None
        assert not LogEntry.objects.exists()


def inline_data(personas, **changes) -> dict[str, str]:
    """The workspace change form with its member rows; ``changes`` maps a username to a
    role, or to ``None`` to tick the row's delete box."""
    ws = personas.workspace
    rows = list(Membership.objects.filter(workspace=ws).select_related("user").order_by("pk"))
    data = {
        "slug": ws.slug,
        "name": ws.name,
        "memberships-TOTAL_FORMS": str(len(rows)),
        "memberships-INITIAL_FORMS": str(len(rows)),
        "memberships-MIN_NUM_FORMS": "0",
        "memberships-MAX_NUM_FORMS": "1000",
    }
    for i, row in enumerate(rows):
        name = row.user.get_username()
        role = changes.get(name, row.role)
        data.update(
            {
                f"memberships-{i}-id": str(row.pk),
                f"memberships-{i}-workspace": str(ws.pk),
                f"memberships-{i}-user": str(row.user_id),
                f"memberships-{i}-role": role or row.role,
                f"memberships-{i}-created_at_0": "2024-01-01",
                f"memberships-{i}-created_at_1": "00:00:00",
                # What the page sends for a field with a callable default (has_changed).
                f"initial-memberships-{i}-created_at_0": "2024-01-01",
                f"initial-memberships-{i}-created_at_1": "00:00:00",
            }
        )
        if name in changes and role is None:
            data[f"memberships-{i}-DELETE"] = "on"
    return data


class TestTheWorkspaceMemberRows:
    def url(self, personas) -> str:
        return f"/admin/workspaces/workspace/{personas.workspace.pk}/change/"

    @pytest.mark.parametrize("change", ["viewer", None], ids=["demoted", "deleted"])
    def test_the_last_owner_row_cannot_go(self, personas, root, change):
        response = root.post(self.url(personas), inline_data(personas, olive=change))
        assert response.status_code == 200
        assert FIX in response.content.decode()
        assert role_of(personas, personas.owner) == "owner"

    def test_handing_ownership_over_in_one_save_is_fine(self, personas, root):
        response = root.post(self.url(personas), inline_data(personas, olive="editor", eddie="owner"))
        assert response.status_code == 302
        assert (role_of(personas, personas.owner), role_of(personas, personas.editor)) == ("editor", "owner")

    def test_the_refusal_names_the_last_owner_as_the_membership_pages_do(self, personas, root):
        page = root.post(self.url(personas), inline_data(personas, olive="viewer")).content.decode()
        assert (
            f"olive is the last owner of workspace acme: a workspace keeps at least one owner; {FIX}." in page
        )

    def test_an_owner_row_deleted_while_the_page_saves_is_counted_as_gone(self, personas, root, monkeypatch):
        """Another operator removes olive (eddie is an owner then) after this save checked
        its rows, which keep olive as owner and demote eddie: the owners are counted as
        stored once the workspace's lock is held, not as the page loaded them."""
        from agentclash_site.workspaces.admin import MembershipInlineFormSet
        from agentclash_site.workspaces.services import memberships_delete

        membership_set_role(workspace=personas.workspace, user=personas.editor, role=Role.OWNER)
        Membership.objects.update(created_at=dt.datetime(2024, 1, 1, tzinfo=dt.UTC))  # as posted
        data = inline_data(personas, eddie="editor")
        clean = MembershipInlineFormSet.clean

        def olive_removed_meanwhile(formset):
            memberships_delete(memberships=Membership.objects.filter(user=personas.owner))
            clean(formset)

        monkeypatch.setattr(MembershipInlineFormSet, "clean", olive_removed_meanwhile)
        page = root.post(self.url(personas), data).content.decode()
        assert (
            f"eddie is the last owner of workspace acme: a workspace keeps at least one owner; {FIX}." in page
        )
        assert role_of(personas, personas.editor) == "owner"

    def test_the_user_of_a_stored_row_cannot_be_changed(self, personas, root):
        # The membership's own page forbids it: the owner's row handed to someone else
        # took the ownership away from them unseen.
        data = inline_data(personas)
        olive = membership(personas, personas.owner)
        index = next(k.split("-")[1] for k, v in data.items() if k.endswith("-id") and v == str(olive.pk))
        data[f"memberships-{index}-user"] = str(personas.outsider.pk)
        assert root.post(self.url(personas), data).status_code == 302
        olive.refresh_from_db()
        assert olive.user_id == personas.owner.pk
        assert not Membership.objects.filter(workspace=personas.workspace, user=personas.outsider).exists()

    def test_a_row_added_on_the_page_still_picks_its_user(self, personas, root):
        page = root.get(self.url(personas)).content.decode()
        assert '<select name="memberships-__prefix__-user"' in page and "admin/js/autocomplete.js" in page
        data = inline_data(personas)
        n = int(data["memberships-TOTAL_FORMS"])
        data.update(
            {
                "memberships-TOTAL_FORMS": str(n + 1),
                f"memberships-{n}-workspace": str(personas.workspace.pk),
                f"memberships-{n}-user": str(personas.outsider.pk),
                f"memberships-{n}-role": "viewer",
                f"memberships-{n}-created_at_0": "2024-01-01",
                f"memberships-{n}-created_at_1": "00:00:00",
            }
        )
        assert root.post(self.url(personas), data).status_code == 302
        assert role_of(personas, personas.outsider) == "viewer"

    def test_the_page_costs_the_same_queries_for_any_number_of_members(self, personas, root):
        def queries() -> int:
            with CaptureQueriesContext(connection) as captured:
                assert root.get(self.url(personas)).status_code == 200
            return len(captured.captured_queries)

        queries()  # the session and the like settle first
        three = queries()
        for n in range(5):
            user = get_user_model().objects.create_user(f"member-{n}")
            membership_set_role(workspace=personas.workspace, user=user, role=Role.VIEWER)
        assert queries() == three


class TestDeletingAUser:
    def test_the_last_owner_of_a_workspace_cannot_be_deleted(self, personas, root):
        url = f"/admin/auth/user/{personas.owner.pk}/delete/"
        page = root.get(url).content.decode()
        assert "last owner of workspace acme" in page and FIX in page
        root.post(url, {"post": "yes"})
        assert get_user_model().objects.filter(pk=personas.owner.pk).exists()

    def test_nor_with_the_bulk_delete(self, personas, root):
        response = root.post(
            "/admin/auth/user/",
            {
                "action": "delete_selected",
                "_selected_action": [personas.owner.pk, personas.viewer.pk],
                "post": "yes",
            },
        )
        assert FIX in response.content.decode()
        assert get_user_model().objects.filter(pk__in=[personas.owner.pk, personas.viewer.pk]).count() == 2

    def test_a_user_who_is_no_last_owner_can_be_deleted(self, personas, root):
        membership_set_role(workspace=personas.workspace, user=personas.editor, role=Role.OWNER)
        response = root.post(f"/admin/auth/user/{personas.owner.pk}/delete/", {"post": "yes"})
        assert response.status_code == 302
        assert not get_user_model().objects.filter(pk=personas.owner.pk).exists()
        assert role_of(personas, personas.editor) == "owner"
