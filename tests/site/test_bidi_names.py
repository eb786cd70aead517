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


OVERRIDE = "\u202eevil"  # RIGHT-TO-LEFT OVERRIDE: unisolated, it reverses the text after it


def test_compare_isolates_its_run_and_deployment_names(rtl):
    """The comparison showed the deployment of each row and case, the runs' names, the lanes
    compared and the deployments only one run had as bare text."""
    from runs.compare_tasks import comparison_request, compute_comparison
    from runs.models import RunLane

    baseline = seed_run(workspace=rtl.workspace, items=4, lanes=2, name=RTL, seed=1)
    candidate = seed_run(workspace=rtl.workspace, items=4, lanes=2, name=RTL, seed=2)
    RunLane.objects.filter(run__in=[baseline, candidate], position=0).update(deployment_name=OVERRIDE)
    RunLane.objects.filter(run=baseline, position=1).update(deployment_name=RTL)  # only in the baseline
    compute_comparison(comparison_request(baseline=baseline, candidate=candidate).id)
    client = logged_in(rtl.owner)
    page = client.get(f"/runs/compare/?baseline={baseline.id}&candidate={candidate.id}").content.decode()
    assert page.count(f"<bdi>{RTL}</bdi></a><br>") == 2  # the baseline and candidate runs
    assert f'<tr><th scope="row"><bdi>{OVERRIDE}</bdi>' in page
    assert page.count(f"<td><bdi>{OVERRIDE}</bdi></td>") == 2  # its two cases
    assert f"Only in the baseline: <bdi>{RTL}</bdi> · only in the candidate: <bdi>sloppy</bdi></p>" in page

    lane = RunLane.objects.get(run=baseline, position=0)
    compute_comparison(comparison_request(baseline=baseline, candidate=candidate, baseline_lane=lane).id)
    query = f"baseline={baseline.id}&candidate={candidate.id}&baseline_lane={lane.id}"
    page = client.get(f"/runs/compare/?{query}").content.decode()
    assert f"<br>lane <bdi>{OVERRIDE}</bdi></p>" in page


def test_the_overview_isolates_the_deployment_names_of_its_tables(rtl):
    """The leaderboard's row names and the column headers of the assertion health and the grid
    showed deployment names as bare text."""
    from runs.models import RunLane
    from runs.result_tasks import compute_result_summary

    run = seed_run(workspace=rtl.workspace, items=2, lanes=2, name="r")
    agent = "סוכן בטא"  # "agent beta"
    RunLane.objects.filter(run=run, position=0).update(deployment_name=agent)
    RunLane.objects.filter(run=run, position=1).update(deployment_name=OVERRIDE)
    compute_result_summary(str(run.id))
    overview = logged_in(rtl.owner).get(f"/runs/{run.id}/").content.decode()
    for name in (agent, OVERRIDE):
        assert f'<th scope="row"><bdi>{name}</bdi>\n' in overview  # the leaderboard
        assert f'<th scope="col" class="num"><bdi>{name}</bdi></th>' in overview  # assertion health
        assert f'<th scope="col"><bdi>{name}</bdi></th>' in overview  # the grid
        assert f">{name}<" not in overview.replace(f"<bdi>{name}</bdi>", "")
