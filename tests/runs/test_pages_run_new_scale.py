"""The new-run form at scale: it types the pack (with suggestions) and lists only that pack's
newest versions and the first deployments, so its size and its queries do not grow with the
workspace; ids posted by a script still start a run, and every typed name is checked on
submit with an error naming the field and the fix."""

from __future__ import annotations

import html
import re

import pytest

import agentclash_site.lib.suggest
import runs.forms
from packs.models import PackVersion
from runs.models import Run
from tests.clients import logged_in
from tests.paging import HTMX, count_queries
from tests.workspace_rows import bulk_deployments, bulk_packs

pytestmark = pytest.mark.django_db


@pytest.fixture
def short_lists(monkeypatch):
    monkeypatch.setattr(runs.forms, "VERSIONS_LISTED", 3)
    monkeypatch.setattr(runs.forms, "DEPLOYMENTS_LISTED", 3)
    monkeypatch.setattr(agentclash_site.lib.suggest, "SUGGESTIONS", 4)


def version(slug: str, number: int) -> PackVersion:
    return PackVersion.objects.get(pack__slug=slug, number=number)


def select_options(body: str, name: str) -> list[str]:
    found = re.search(rf'<select name="{name}".*?</select>', body, re.S)
    return re.findall(r'<option value="([^"]*)"[^>]*>([^<]*)<', found.group(0)) if found else []


def ticked_boxes(body: str) -> list[str]:
    return re.findall(r'<input type="checkbox" name="deployments" value="(\d+)"', body)


def suggested(body: str) -> list[str]:
    return re.findall(r'data-suggest-value="([^"]*)"', body)


def test_the_form_lists_one_packs_newest_versions_and_the_first_deployments_at_any_size(
    personas, short_lists
):
    owner = logged_in(personas.owner)
    bulk_packs(personas.workspace, ["alpha", "beta"], versions=2)
    bulk_deployments(personas.workspace, ["d-1", "d-2"])
    small = owner.get("/runs/new/").content.decode()
    small_queries = count_queries(owner, "/runs/new/")
    assert [label for _, label in select_options(small, "pack_version")] == ["v2", "v1"]
    assert 'id="id_deployment_names"' not in small  # every deployment is a checkbox

    bulk_packs(personas.workspace, ["aardvark"] + [f"p{i:03d}" for i in range(60)], versions=8)
    bulk_deployments(personas.workspace, [f"x{i:03d}" for i in range(60)])
    large = owner.get("/runs/new/").content.decode()
    assert count_queries(owner, "/runs/new/") == small_queries
    # aardvark, the first pack by slug: its 3 newest of 8 versions; 3 of 62 deployments
    assert 'name="pack" value="aardvark"' in large
    assert [label for _, label in select_options(large, "pack_version")] == ["v8", "v7", "v6"]
    assert len(ticked_boxes(large)) == 3 and large.count("<option") == 3 + 1  # + the one input set
    assert "p059" not in large and "x059" not in large
    assert 'id="id_deployment_names"' in large
    assert len(large) < len(small) + 2_000  # the deployment names field and its help


def test_the_fragments_cost_the_same_queries_at_any_size(personas, short_lists):
    owner = logged_in(personas.owner)
    bulk_packs(personas.workspace, ["alpha", "beta"], versions=2)
    bulk_deployments(personas.workspace, ["d-1", "d-2"])
    urls = [
        "/runs/new/?partial=versions&pack=beta",
        f"/runs/new/?partial=input_set&pack_version={version('beta', 1).id}",
        "/runs/new/?partial=pack_suggestions&pack=p",
        "/runs/new/?partial=deployment_suggestions&deployment_names=d-1,+x",
    ]
    owner.get("/runs/new/")  # the first request stores the workspace in the session
    few = [count_queries(owner, url, **HTMX) for url in urls]
    bulk_packs(personas.workspace, [f"p{i:03d}" for i in range(60)], versions=8)
    bulk_deployments(personas.workspace, [f"x{i:03d}" for i in range(60)])
    assert [count_queries(owner, url, **HTMX) for url in urls] == few
    versions = owner.get(urls[0], **HTMX).content.decode()
    assert "<form" not in versions and 'id="version-fields"' not in versions  # its inside
    assert [label for _, label in select_options(versions, "pack_version")] == ["v2", "v1"]
    assert suggested(owner.get(urls[2], **HTMX).content.decode()) == ["p000", "p001", "p002", "p003"]
    deployments = owner.get(urls[3], **HTMX).content.decode()
    assert suggested(deployments) == ["x000", "x001", "x002", "x003"]  # the name after the comma
    assert "The first 4 deployments matching 'x'" in html.unescape(deployments)


def test_suggestions_list_names_starting_with_the_text_first(personas):
    bulk_packs(personas.workspace, ["mental-math", "math", "algebra", "math-2"])
    response = logged_in(personas.owner).get("/runs/new/?partial=pack_suggestions&pack=MATH", **HTMX)
    body = html.unescape(response.content.decode())
    assert suggested(body) == ["math", "math-2", "mental-math"]
    assert "3 packs matching 'MATH': press Down to choose one." in body


def test_ids_posted_by_a_script_start_a_run_with_any_version_and_deployment(personas, short_lists):
    # Neither the version (v1 of 8) nor the deployment (the last by name) is listed on the page.
    bulk_packs(personas.workspace, ["alpha"], versions=8)
    far = bulk_deployments(personas.workspace, [f"d{i}" for i in range(9)])[-1]
    response = logged_in(personas.owner).post(
        "/runs/new/",
        {"pack_version": version("alpha", 1).id, "deployments": [far.id], "repetitions": "1", "name": "s"},
    )
    assert response.status_code == 302
    run = Run.objects.get(name="s")
    assert run.pack_version.number == 1 and [lane.deployment_id for lane in run.lanes.all()] == [far.id]


def test_deployments_typed_by_name_join_the_ticked_ones(personas, short_lists):
    bulk_packs(personas.workspace, ["alpha"])
    deps = bulk_deployments(personas.workspace, [f"d{i}" for i in range(9)])
    response = logged_in(personas.owner).post(
        "/runs/new/",
        {
            "pack": "alpha",
            "pack_version": version("alpha", 1).id,
            "deployments": [deps[0].id],
            "deployment_names": "d8, d7,d8",
            "repetitions": "1",
            "name": "named",
        },
    )
    assert response.status_code == 302
    lanes = Run.objects.get(name="named").lanes.order_by("position")
    assert [lane.deployment_name for lane in lanes] == ["d0", "d8", "d7"]


def test_an_unknown_deployment_name_is_named_in_its_fields_error(personas, short_lists):
    bulk_packs(personas.workspace, ["alpha"])
    bulk_deployments(personas.workspace, [f"d{i}" for i in range(9)])
    response = logged_in(personas.owner).post(
        "/runs/new/",
        {"pack_version": version("alpha", 1).id, "deployment_names": "d8, nope", "repetitions": "1"},
    )
    body = response.content.decode()
    assert response.status_code == 400 and not Run.objects.exists()
    error = re.search(r'<div class="error" id="id_deployment_names_error">(.*?)</div>', body, re.S).group(1)
    assert "No deployment named &#x27;nope&#x27; in this workspace" in error and "d8" not in error
    assert 'aria-describedby="id_deployment_names_helptext id_deployment_names_error"' in body
    assert 'value="d8, nope"' in body  # what was typed is kept


def test_no_deployment_at_all_says_how_to_choose_one(personas):
    bulk_packs(personas.workspace, ["alpha"])
    bulk_deployments(personas.workspace, ["d0"])
    body = (
        logged_in(personas.owner)
        .post("/runs/new/", {"pack_version": version("alpha", 1).id, "repetitions": "1"})
        .content.decode()
    )
    assert "This field is required. Tick a deployment." in body


def test_an_unknown_pack_is_named_in_the_pack_fields_error(personas):
    bulk_packs(personas.workspace, ["alpha"])
    dep = bulk_deployments(personas.workspace, ["d0"])[0]
    response = logged_in(personas.owner).post(
        "/runs/new/", {"pack": "alpah", "deployments": [dep.id], "repetitions": "1"}
    )
    body = response.content.decode()
    assert response.status_code == 400
    assert re.search(
        r'id="id_pack_error"><p>No pack named &#x27;alpah&#x27; in this workspace: type part', body
    )
    fragment = logged_in(personas.owner).get("/runs/new/?partial=versions&pack=alpah", **HTMX)
    assert "No pack named “alpah” in this workspace" in fragment.content.decode()


def test_a_pack_changed_without_javascript_asks_for_one_of_its_versions(personas):
    # The version list still showed alpha's versions when beta was typed and the form sent.
    bulk_packs(personas.workspace, ["alpha", "beta"], versions=2)
    dep = bulk_deployments(personas.workspace, ["d0"])[0]
    owner = logged_in(personas.owner)
    fields = {"pack": "beta", "deployments": [dep.id], "repetitions": "1"}
    changed = owner.post("/runs/new/", {**fields, "pack_version": version("alpha", 2).id})
    body = changed.content.decode()
    assert changed.status_code == 400 and not Run.objects.exists()
    assert "v2 is a version of alpha, not beta: choose one of beta&#x27;s versions (listed now)." in body
    beta = [str(version("beta", n).id) for n in (2, 1)]
    assert [value for value, _ in select_options(body, "pack_version")] == beta
    empty = owner.post("/runs/new/", fields).content.decode()
    assert "Choose a version of beta: its versions are listed now." in empty
    assert owner.post("/runs/new/", {**fields, "pack_version": beta[1]}).status_code == 302


def test_a_link_to_an_older_version_keeps_it_chosen(personas, short_lists):
    bulk_packs(personas.workspace, ["alpha"], versions=8)
    old = version("alpha", 2)
    body = logged_in(personas.owner).get(f"/runs/new/?pack_version={old.id}").content.decode()
    assert select_options(body, "pack_version")[-1] == (str(old.id), "v2")
    assert f'<option value="{old.id}" selected>' in body and 'name="pack" value="alpha"' in body


def test_an_outsider_sees_none_of_the_workspaces_names_and_cannot_use_its_ids(personas):
    bulk_packs(personas.workspace, ["acme-pack"])
    dep = bulk_deployments(personas.workspace, ["acme-agent"])[0]
    bulk_packs(personas.other_workspace, ["globex-pack"])
    outsider = logged_in(personas.outsider)
    packs = outsider.get("/runs/new/?partial=pack_suggestions&pack=pack", **HTMX).content.decode()
    assert suggested(packs) == ["globex-pack"]
    deployments = outsider.get("/runs/new/?partial=deployment_suggestions&deployment_names=a", **HTMX)
    assert suggested(deployments.content.decode()) == []
    body = outsider.get("/runs/new/?partial=versions&pack=acme-pack", **HTMX).content.decode()
    assert "No pack named “acme-pack”" in body
    response = outsider.post(
        "/runs/new/",
        {"pack_version": version("acme-pack", 1).id, "deployments": [dep.id], "repetitions": "1"},
    )
    assert response.status_code == 400 and not Run.objects.exists()
    named = outsider.post(
        "/runs/new/", {"pack": "acme-pack", "deployment_names": "acme-agent", "repetitions": "1"}
    ).content.decode()
    assert "No pack named &#x27;acme-pack&#x27;" in named
    assert "No deployment named &#x27;acme-agent&#x27; in this workspace" in named


def test_a_viewer_gets_no_suggestions(personas):
    bulk_packs(personas.workspace, ["alpha"])
    response = logged_in(personas.viewer).get("/runs/new/?partial=pack_suggestions&pack=a", **HTMX)
    assert response.status_code == 403
