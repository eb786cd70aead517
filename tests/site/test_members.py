"""The Members page of a workspace: every member sees it, owners manage it, anyone may leave,
outsiders get 404 everywhere, and the workspace keeps an owner."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from agentclash_site.workspaces.models import Membership, Role
from agentclash_site.workspaces.services import membership_set_role
from tests.clients import logged_in

pytestmark = pytest.mark.django_db

PAGE = "/workspaces/acme/members/"
ROLE = PAGE + "role/"
REMOVE = PAGE + "remove/"
LEAVE = PAGE + "leave/"
FIX = "make another member an owner first"


def roles(personas) -> dict[str, str]:
    return dict(Membership.objects.filter(workspace=personas.workspace).values_list("user__username", "role"))


@pytest.fixture
def newcomer(personas):
    return get_user_model().objects.create_user("nina", email="Nina@example.com", password="pw-nina-123")


class TestTheList:
    @pytest.mark.parametrize("who", ["owner", "editor", "viewer"])
    def test_every_member_sees_who_is_in_with_role_and_since(self, personas, who):
        response = logged_in(getattr(personas, who)).get(PAGE)
        assert response.status_code == 200
        page = response.content.decode()
        for name, label in (("olive", "Owner"), ("eddie", "Editor"), ("vera", "Viewer")):
            assert re.search(
                rf'<tr data-member="{name}">\s*<th scope="row"><bdi>{name}</bdi>.*?<td>{label}</td>',
                page,
                re.S,
            )
        assert [m.user.username for m in response.context["members"]] == ["olive", "eddie", "vera"]
        since = Membership.objects.get(workspace=personas.workspace, user=personas.viewer).created_at
        assert f"{since:%Y-%m-%d}</time>" in page
        assert "oscar" not in page

    def test_only_owners_get_the_forms_that_change_members(self, personas):
        owner_page = logged_in(personas.owner).get(PAGE).content.decode()
        viewer_page = logged_in(personas.viewer).get(PAGE).content.decode()
        for form in (f'action="{ROLE}"', f'action="{REMOVE}"', 'aria-label="Add a member"'):
            assert form in owner_page and form not in viewer_page
        assert f'action="{LEAVE}"' in viewer_page

    def test_the_navigation_links_the_current_workspaces_members(self, personas):
        page = logged_in(personas.editor).get("/deployments/").content.decode()
        assert f'<a href="{PAGE}" >Members</a>' in page
        assert (
            f'<a href="{PAGE}" aria-current="page">Members</a>'
            in logged_in(personas.editor).get(PAGE).content.decode()
        )

    def test_the_page_costs_the_same_queries_for_any_number_of_members(self, personas):
        client = logged_in(personas.owner)
        client.get(PAGE)  # session and workspace settled

        def count() -> int:
            with CaptureQueriesContext(connection) as queries:
                assert client.get(PAGE).status_code == 200
            return len(queries)

        few = count()
        User = get_user_model()
        for i in range(8):
            membership_set_role(
                workspace=personas.workspace, user=User.objects.create_user(f"u{i}"), role=Role.VIEWER
            )
        assert count() == few

    def test_it_asks_an_anonymous_visitor_to_log_in(self, personas):
        response = Client().get(PAGE)
        assert response.status_code == 302 and response["Location"].startswith("/login/")


ALL_URLS = [PAGE, ROLE, REMOVE, LEAVE]


@pytest.mark.parametrize("url", ALL_URLS)
@pytest.mark.parametrize("method", ["get", "post"])
def test_an_outsider_gets_404_on_every_members_url(personas, url, method):
    response = getattr(logged_in(personas.outsider), method)(url, {"member": "vera", "role": "owner"})
    assert response.status_code == 404
    assert roles(personas) == {"olive": "owner", "eddie": "editor", "vera": "viewer"}


@pytest.mark.parametrize("url", [ROLE, REMOVE, LEAVE])
def test_a_get_on_a_write_url_is_405_for_a_member(personas, url):
    assert logged_in(personas.viewer).get(url).status_code == 405


@pytest.mark.parametrize("who", ["editor", "viewer"])
@pytest.mark.parametrize(
    ("url", "data"),
    [
        (PAGE, {"member": "oscar", "role": "owner"}),
        (ROLE, {"member": "vera", "role": "owner"}),
        (REMOVE, {"member": "olive"}),
    ],
)
def test_editors_and_viewers_cannot_change_members(personas, who, url, data):
    response = logged_in(getattr(personas, who)).post(url, data)
    assert response.status_code == 403
    assert roles(personas) == {"olive": "owner", "eddie": "editor", "vera": "viewer"}


def test_a_post_without_the_csrf_token_is_refused(personas):
    client = Client(enforce_csrf_checks=True)
    client.force_login(personas.owner)
    assert client.post(PAGE, {"member": "oscar", "role": "viewer"}).status_code == 403
    assert "oscar" not in roles(personas)


class TestAdding:
    def test_an_owner_adds_a_user_by_username_and_lands_back_on_the_list(self, personas, newcomer):
        client = logged_in(personas.owner)
        response = client.post(PAGE, {"member": "nina", "role": "editor"})
        assert (response.status_code, response["Location"]) == (302, PAGE)
        assert roles(personas)["nina"] == "editor"
        assert "nina added as editor." in client.get(PAGE).content.decode()

    def test_or_by_email_in_any_case(self, personas, newcomer):
        logged_in(personas.owner).post(PAGE, {"member": "nina@EXAMPLE.com", "role": "viewer"})
        assert roles(personas)["nina"] == "viewer"

    def test_an_unknown_name_is_named_with_the_fix_and_the_input_kept(self, personas):
        response = logged_in(personas.owner).post(PAGE, {"member": "nobody", "role": "editor"})
        assert response.status_code == 400
        form = response.context["add_form"]
        assert "No user has the username or email &#x27;nobody&#x27;" in response.content.decode()
        assert "needs an account here" in form.errors["member"][0]
        assert 'value="nobody"' in response.content.decode()
        assert form["role"].value() == "editor"

    def test_an_email_two_users_share_asks_for_the_username(self, personas, newcomer):
        get_user_model().objects.create_user("nina2", email="nina@example.com")
        response = logged_in(personas.owner).post(PAGE, {"member": "nina@example.com", "role": "editor"})
        assert response.status_code == 400
        assert "give the username" in response.context["add_form"].errors["member"][0]
        assert "nina" not in roles(personas)

    def test_someone_already_a_member_is_named_with_their_role(self, personas):
        response = logged_in(personas.owner).post(PAGE, {"member": "vera", "role": "owner"})
        assert response.status_code == 400
        assert "already a member (viewer)" in response.context["add_form"].errors["member"][0]
        assert roles(personas)["vera"] == "viewer"

    def test_a_bad_role_lists_the_roles(self, personas, newcomer):
        response = logged_in(personas.owner).post(PAGE, {"member": "nina", "role": "admin"})
        assert response.status_code == 400
        assert "Choose a role: owner, editor or viewer" in response.context["add_form"].errors["role"][0]
        assert 'value="nina"' in response.content.decode()
        assert "nina" not in roles(personas)


class TestChangingRoles:
    def test_an_owner_changes_a_members_role(self, personas):
        response = logged_in(personas.owner).post(ROLE, {"member": "vera", "role": "editor"})
        assert (response.status_code, response["Location"]) == (302, PAGE)
        assert roles(personas)["vera"] == "editor"

    def test_the_last_owner_cannot_be_demoted_and_is_told_the_fix(self, personas):
        response = logged_in(personas.owner).post(ROLE, {"member": "olive", "role": "editor"})
        assert response.status_code == 400
        assert FIX in response.context["error"] and FIX in response.content.decode()
        assert roles(personas)["olive"] == "owner"

    def test_with_a_second_owner_an_owner_may_step_down(self, personas):
        client = logged_in(personas.owner)
        client.post(ROLE, {"member": "eddie", "role": "owner"})
        response = client.post(ROLE, {"member": "olive", "role": "viewer"})
        assert response.status_code == 302
        assert roles(personas) == {"olive": "viewer", "eddie": "owner", "vera": "viewer"}
        assert client.post(ROLE, {"member": "vera", "role": "owner"}).status_code == 403

    @pytest.mark.parametrize(
        ("data", "says"),
        [
            ({"member": "oscar", "role": "editor"}, "not a member"),
            ({"member": "vera", "role": "boss"}, "Choose a role"),
        ],
    )
    def test_an_unknown_member_or_role_is_a_400_saying_so(self, personas, data, says):
        response = logged_in(personas.owner).post(ROLE, data)
        assert response.status_code == 400 and says in response.context["error"]
        assert roles(personas) == {"olive": "owner", "eddie": "editor", "vera": "viewer"}


class TestRemovingAndLeaving:
    def test_an_owner_removes_a_member(self, personas):
        response = logged_in(personas.owner).post(REMOVE, {"member": "eddie"})
        assert (response.status_code, response["Location"]) == (302, PAGE)
        assert roles(personas) == {"olive": "owner", "vera": "viewer"}
        assert logged_in(personas.editor).get(PAGE).status_code == 404

    def test_the_last_owner_cannot_remove_themself(self, personas):
        response = logged_in(personas.owner).post(REMOVE, {"member": "olive"})
        assert response.status_code == 400 and FIX in response.context["error"]
        assert roles(personas)["olive"] == "owner"

    def test_an_owner_removing_themself_beside_another_owner_goes_home(self, personas):
        membership_set_role(workspace=personas.workspace, user=personas.editor, role=Role.OWNER)
        response = logged_in(personas.owner).post(REMOVE, {"member": "olive"})
        assert (response.status_code, response["Location"]) == (302, "/")
        assert "olive" not in roles(personas)

    @pytest.mark.parametrize("who", ["editor", "viewer"])
    def test_a_member_leaves_and_loses_access(self, personas, who):
        client = logged_in(getattr(personas, who))
        response = client.post(LEAVE)
        assert (response.status_code, response["Location"]) == (302, "/")
        assert getattr(personas, who).username not in roles(personas)
        assert "You left Acme." in client.get("/").content.decode()
        assert client.get(PAGE).status_code == 404

    def test_the_last_owner_cannot_leave(self, personas):
        page = logged_in(personas.owner).get(PAGE).content.decode()
        assert "You are its only owner: to leave, make another member an owner first." in page
        response = logged_in(personas.owner).post(LEAVE)
        assert response.status_code == 400
        assert response.context["error"].startswith("You are the last owner of Acme, so you cannot leave it")
        assert FIX in response.context["error"]
        assert roles(personas)["olive"] == "owner"
