"""The Members page in Debian chromium: an owner reaches it from the navigation, adds a user
by email and changes their role with the keyboard-usable forms; nothing logs an error (the
page runs under the strict CSP like the rest)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from agentclash_site.workspaces.models import Membership

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_an_owner_adds_a_member_and_changes_their_role(personas, login, page):
    get_user_model().objects.create_user("nina", email="nina@example.com")
    login(personas.owner)
    page.goto("/")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Members").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("Members")

    page.get_by_label("Username or email").fill("nobody")
    page.get_by_role("button", name="Add member").click()
    expect(page.get_by_label("Username or email")).to_have_value("nobody")
    expect(page.get_by_text("No user has the username or email")).to_be_visible()

    page.get_by_label("Username or email").fill("nina@example.com")
    page.locator("#id_role").select_option("editor")
    page.get_by_role("button", name="Add member").click()
    expect(page.get_by_role("status")).to_contain_text("nina added as editor.")

    page.get_by_label("Role of nina").select_option("viewer")
    page.locator('tr[data-member="nina"]').get_by_role("button", name="Change role").click()
    expect(page.get_by_role("status")).to_contain_text("nina is now viewer.")
    assert Membership.objects.get(user__username="nina").role == "viewer"
    assert page.js_errors == []
