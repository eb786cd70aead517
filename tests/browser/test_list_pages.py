"""The paged lists of the workspace in Debian chromium: each "More ..." row loads the next rows
in place, and the keyboard focus goes on from the first of them (the link that had it is
gone), as "Older runs" does; nothing logs an error under the strict CSP."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from playwright.sync_api import expect

import packs.views
import runs.views.deployments
from agentclash_site.workspaces import views as workspace_views
from agentclash_site.workspaces.models import ApiToken, Membership, Role
from packs.models import Draft, Pack
from runs.models import Deployment

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def load_more(page, name: str):  # type: ignore[no-untyped-def]
    # A person does not press the next key within the frame that showed the last rows: wait
    # for two frames, so that the browser has handled the rows swapped in before (their
    # autofocus) before the focus moves on.
    page.evaluate("() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")
    more = page.get_by_role("link", name=name)
    more.focus()
    page.keyboard.press("Enter")
    expect(more).to_have_count(0)


def test_more_rows_on_every_workspace_list_move_the_focus_to_the_first_loaded_row(
    personas, login, page, monkeypatch
):
    for module, size in (
        (packs.views, "PACK_PAGE"),
        (packs.views, "DRAFT_PAGE"),
        (runs.views.deployments, "DEPLOYMENT_PAGE"),
        (workspace_views, "TOKEN_PAGE"),
        (workspace_views, "MEMBER_PAGE"),
    ):
        monkeypatch.setattr(module, size, 2)
    ws = personas.workspace
    for slug in ("p-a", "p-b", "p-c"):
        Pack.objects.create(workspace=ws, slug=slug, name=f"Pack {slug}", family="x")
    now = timezone.now()
    for i in range(3):
        Draft.objects.create(workspace=ws, name=f"draft-{i}", updated_at=now - dt.timedelta(minutes=i))
    for name in ("d-a", "d-b", "d-c"):
        Deployment.objects.create(workspace=ws, name=name, kind="trace_import")
    for i in range(3):
        ApiToken.objects.create(
            user=personas.owner,
            name=f"tok-{i}",
            digest=f"d{i}",
            hint=f"acl_{i}",
            created_at=now - dt.timedelta(minutes=i),
        )
    # olive (owner), eddie (editor), vera (viewer): a third member goes to the second page
    login(personas.owner)

    page.goto("/packs/")
    load_more(page, "More packs")
    expect(page.get_by_role("link", name="Pack p-c")).to_be_focused()
    load_more(page, "More drafts")
    expect(page.get_by_role("link", name="draft-2")).to_be_focused()
    expect(page.get_by_role("link", name="Pack p-a")).to_be_visible()  # the packs stay

    page.goto("/deployments/")
    load_more(page, "More deployments")
    expect(page.get_by_role("link", name="d-c")).to_be_focused()

    page.goto("/account/tokens/")
    load_more(page, "More tokens")
    expect(page.locator("#token-rows code[autofocus]")).to_be_focused()
    expect(page.locator("#token-rows code[autofocus]")).to_have_text("acl_2…")

    page.goto("/workspaces/acme/members/")
    load_more(page, "More members")
    expect(page.locator('tr[data-member="vera"] th')).to_be_focused()
    # a loaded row's form works like the others
    page.get_by_label("Role of vera").select_option("editor")
    page.locator('tr[data-member="vera"]').get_by_role("button", name="Change role").click()
    expect(page.get_by_role("status")).to_contain_text("vera is now editor.")
    assert Membership.objects.get(workspace=ws, user=personas.viewer).role == Role.EDITOR
    assert get_user_model().objects.filter(username="vera").exists()
    assert page.js_errors == []
