"""Names are the user's: one long word (a run, a workspace, a draft, a deployment name at its
length limit) wraps inside the page instead of widening it past the window."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from agentclash_site.workspaces.models import Role
from agentclash_site.workspaces.services import membership_set_role
from packs import services
from runs.models import Deployment
from runs.seeding import seed_run
from tests.packs.publish_fixtures import mental_math

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def overflow(page) -> int:  # type: ignore[no-untyped-def]
    """How far the page is wider than the window (0: no horizontal scrolling)."""
    return page.evaluate("() => document.documentElement.scrollWidth - document.documentElement.clientWidth")


PAST_THE_WINDOW = """() => [...document.querySelectorAll("body *")]
    .filter((e) => e.getBoundingClientRect().right > document.documentElement.clientWidth)
    .slice(0, 5).map((e) => `${e.tagName}#${e.id}.${e.className}`)"""


def test_a_long_unbroken_name_never_widens_the_page(personas, login, page):
    workspace = personas.workspace
    workspace.name = "W" * 200
    workspace.save()
    # Two workspaces: the switcher (a select holding the long name) is in the top bar.
    membership_set_role(workspace=personas.other_workspace, user=personas.owner, role=Role.EDITOR)
    run = seed_run(workspace=workspace, items=2, lanes=1, name="R" * 200)
    Deployment.objects.filter(workspace=workspace).update(name="D" * 100)
    draft = services.draft_create(
        workspace=workspace, user=personas.owner, name="N" * 300, bundle_text=mental_math()
    )
    login(personas.owner)
    pages = {
        f"/runs/{run.id}/": "R" * 200,
        "/runs/": "W" * 200,
        f"/packs/drafts/{draft.public_id}/": "N" * 300,
        f"/deployments/{Deployment.objects.get(workspace=workspace).public_id}/": "D" * 100,
        "/deployments/": "W" * 200,
    }
    for url, name in pages.items():
        page.goto(url)
        expect(page.locator("h1")).to_contain_text(name[:50])
        # The message names the first elements reaching past the window.
        assert overflow(page) == 0, (url, page.evaluate(PAST_THE_WINDOW))


def test_long_names_on_the_workspace_lists_never_widen_the_page(personas, login, page):
    # The packs, tokens and members lists, at each name's length limit.
    from django.contrib.auth import get_user_model

    from agentclash_site.workspaces.models import ApiToken
    from packs.models import Draft, Pack

    workspace = personas.workspace
    Pack.objects.create(workspace=workspace, slug="s" * 200, name="P" * 300, family="F" * 200)
    Draft.objects.create(workspace=workspace, name="N" * 300)
    ApiToken.objects.create(
        user=personas.owner, workspace=workspace, name="T" * 100, digest="d", hint="acl_x"
    )
    member = get_user_model().objects.create_user("U" * 150)
    membership_set_role(workspace=workspace, user=member, role=Role.VIEWER)
    login(personas.owner)
    for url, name in {
        "/packs/": "P" * 300,
        "/account/tokens/": "T" * 100,
        f"/workspaces/{workspace.slug}/members/": "U" * 150,
    }.items():
        page.goto(url)
        expect(page.locator("main")).to_contain_text(name)
        assert overflow(page) == 0, (url, page.evaluate(PAST_THE_WINDOW))
