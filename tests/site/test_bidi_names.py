"""User-supplied names shown inline (headings, breadcrumbs, the top bar) are bidi-isolated:
an RTL name does not reorder the punctuation around it."""

from __future__ import annotations

import pytest

from packs import services as pack_services
from runs.seeding import seed_run
from runs.services.deployments import deployment_create
from tests.clients import logged_in

pytestmark = pytest.mark.django_db

RTL = "צוות אלפא"  # "team alpha"


@pytest.fixture
def rtl(personas):
    personas.workspace.name = RTL
    personas.workspace.save(update_fields=["name"])
    return personas


def test_the_workspace_name_is_isolated_in_the_top_bar_and_headings(rtl):
    client = logged_in(rtl.owner)
    members = client.get("/workspaces/acme/members/").content.decode()
    assert f'<span class="ws-name" title="Workspace" dir="auto">{RTL}</span>' in members
    assert f'<h1>Members <span class="muted">of <bdi>{RTL}</bdi></span></h1>' in members
    assert f"in <bdi>{RTL}</bdi></span></h1>" in client.get("/deployments/").content.decode()
    assert f"in <bdi>{RTL}</bdi></span></h1>" in client.get("/runs/").content.decode()


def test_a_run_deployment_and_draft_name_are_isolated(rtl):
    client = logged_in(rtl.owner)
    run = seed_run(workspace=rtl.workspace, items=1, lanes=1, name=RTL)
    overview = client.get(f"/runs/{run.id}/").content.decode()
    assert f"Runs</a> / <span><bdi>{RTL}</bdi></span>" in overview
    assert f"<h1><bdi>{RTL}</bdi> " in overview
    cancel = client.get(f"/runs/{run.id}/cancel/").content.decode()
    assert f"<h1>Cancel <bdi>{RTL}</bdi>?</h1>" in cancel

    deployment = deployment_create(workspace=rtl.workspace, name=RTL, kind="trace_import").deployment
    detail = client.get(f"/deployments/{deployment.public_id}/").content.decode()
    assert f"Deployments</a> / <bdi>{RTL}</bdi></nav>" in detail

    draft = pack_services.draft_create(workspace=rtl.workspace, user=rtl.owner, name=RTL, bundle_text="")
    editor = client.get(f"/packs/drafts/{draft.public_id}/").content.decode()
    assert f'<h1 id="draft-heading"><bdi>{RTL}</bdi> ' in editor
    assert f"<title>{RTL} · editor · AgentClash</title>" in editor  # a title holds no tags
