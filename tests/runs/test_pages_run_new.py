"""The new-run form: the input set is picked from the selected version's sets (refreshed
with htmx when the version changes), and every ``aria-describedby`` names an element of
the page, with and without errors."""

from __future__ import annotations

import re

import pytest

from runs.models import Run
from tests.clients import logged_in as login
from tests.runs.runfactory import hosted, publish

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def versions(personas):
    one = publish(personas.workspace, slug="alpha", sets=1)
    many = publish(personas.workspace, slug="beta", sets=3)
    return one, many


def options(body: str, name: str) -> list[str]:
    select = re.search(rf'<select name="{name}".*?</select>', body, re.S).group(0)
    return re.findall(r'<option value="([^"]*)"', select)


def test_the_input_set_is_a_choice_of_the_selected_versions_sets(personas, versions):
    one, many = versions
    owner = login(personas.owner)
    # alpha is listed first: its one set
    assert options(owner.get("/runs/new/").content.decode(), "input_set") == ["set0"]
    body = owner.get(f"/runs/new/?pack_version={many.id}").content.decode()
    assert options(body, "input_set") == ["set0", "set1", "set2"]
    assert "Set 1 (set1)" in body


def test_changing_the_version_refreshes_the_sets_with_htmx(personas, versions):
    one, many = versions
    owner = login(personas.owner)
    page = owner.get("/runs/new/").content.decode()
    assert 'hx-get="/runs/new/?partial=input_set"' in page and 'hx-target="#input-set-field"' in page
    fragment = owner.get(f"/runs/new/?partial=input_set&pack_version={many.id}", **HTMX).content.decode()
    assert fragment.strip().startswith('<div id="input-set-field">') and "<form" not in fragment
    assert options(fragment, "input_set") == ["set0", "set1", "set2"]


def test_a_picked_set_of_a_version_with_several_runs_that_set(personas, versions):
    one, many = versions
    dep = hosted(personas.workspace, "http://127.0.0.1:9/a")
    response = login(personas.owner).post(
        "/runs/new/",
        {
            "pack_version": many.id,
            "input_set": "set2",
            "deployments": [dep.id],
            "repetitions": "1",
            "name": "two",
        },
    )
    assert response.status_code == 302
    assert Run.objects.get(name="two").input_set.key == "set2"


def test_a_set_of_another_version_is_refused_and_the_new_versions_sets_are_listed(personas, versions):
    # Without JavaScript the list is not refreshed when the version changes.
    one, many = versions
    dep = hosted(personas.workspace, "http://127.0.0.1:9/a")
    response = login(personas.owner).post(
        "/runs/new/",
        {"pack_version": one.id, "input_set": "set2", "deployments": [dep.id], "repetitions": "1"},
    )
    body = response.content.decode()
    assert (
        response.status_code == 400
        and "Input set set2 is not in alpha v1: choose one of its input sets" in body
    )
    assert options(body, "input_set") == ["set0"]


def described_ids_are_present(body: str) -> list[str]:
    form = body.split('<form method="post" class="stack panel narrow-form"', 1)[1]
    wanted = [i for ids in re.findall(r'aria-describedby="([^"]+)"', form) for i in ids.split()]
    assert wanted
    return [i for i in wanted if f'id="{i}"' not in body]


def test_every_aria_describedby_of_the_form_names_an_element_of_the_page(personas, versions):
    owner = login(personas.owner)
    assert described_ids_are_present(owner.get("/runs/new/").content.decode()) == []
    invalid = owner.post(
        "/runs/new/", {"pack_version": versions[1].id, "repetitions": "99", "input_set": "x"}
    )
    body = invalid.content.decode()
    assert invalid.status_code == 400 and 'aria-describedby="id_repetitions_error"' in body
    assert described_ids_are_present(body) == []


def test_a_workspace_without_versions_or_deployments_is_told_where_to_get_them(personas):
    # The form showed an empty version list and an empty deployments box, and a submit
    # answered "This field is required." without saying where either comes from.
    owner = login(personas.owner)
    body = owner.get("/runs/new/").content.decode()
    assert re.search(r'No pack version is published yet: <a href="/packs/">publish one</a>', body)
    assert re.search(r'No deployments yet: <a href="/deployments/new/">add one</a>', body)
    refused = owner.post("/runs/new/", {"repetitions": "1"})
    assert refused.status_code == 400 and "No pack version is published yet" in refused.content.decode()


def test_the_form_says_nothing_of_the_kind_once_both_exist(personas, versions):
    hosted(personas.workspace, "http://127.0.0.1:9/a")
    body = login(personas.owner).get("/runs/new/").content.decode()
    assert "is published yet" not in body and "No deployments yet" not in body
