"""Whole numbers in the query string and forms of the HTML pages: a value that is not one, or
that no database column holds, is a 400 naming the parameter (it was a 500 OverflowError on
SQLite, the ``make run`` default); a well-formed number naming nothing keeps its 404 or its
field error. One helper parses them all (``agentclash_site.lib.params``)."""

from __future__ import annotations

import re

import pytest
from django.http import QueryDict
from django.test import Client

from agentclash_site.lib.params import (
    MAX_DB_INTEGER,
    BadParameter,
    choice_param,
    int_param,
    whole_number,
)
from packs import services
from runs.models import Run, RunLane
from runs.seeding import seed_run
from tests.packs.publish_fixtures import mental_math
from tests.processes import run_on_sqlite

BIG = "99999999999999999999"


def login(user) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return client


# --- the shared helper ---------------------------------------------------------------------------


@pytest.mark.parametrize("raw", ["1", " 42 ", str(MAX_DB_INTEGER)])
def test_whole_number_reads_a_number_a_column_can_hold(raw):
    assert whole_number(raw) == int(raw)


@pytest.mark.parametrize(
    "raw", ["", "abc", "²", "١٢", "1.5", "1e3", "0", "-1", BIG, str(MAX_DB_INTEGER + 1), "9" * 5000]
)
def test_whole_number_refuses_anything_else(raw):
    with pytest.raises(ValueError, match="must be a whole number from 1 to"):
        whole_number(raw)


def test_int_param_names_the_parameter_and_reads_empty_as_absent():
    assert int_param(QueryDict("to="), "to") is None
    assert int_param(QueryDict(""), "to") is None
    assert int_param(QueryDict("to=3"), "to") == 3
    with pytest.raises(BadParameter) as caught:
        int_param(QueryDict(f"to={BIG}"), "to")
    assert caught.value.name == "to"
    assert caught.value.message == f"to must be a whole number from 1 to {MAX_DB_INTEGER}, not '{BIG}'."


def test_choice_param_matches_any_case_and_lists_the_accepted_values():
    choices = {"failed": "failed", "not_evaluated": "unavailable"}
    assert choice_param(QueryDict("status=FAILED"), "status", choices) == "failed"
    assert choice_param(QueryDict("status=Not_Evaluated"), "status", choices) == "unavailable"
    assert choice_param(QueryDict("status="), "status", choices) == ""
    with pytest.raises(BadParameter) as caught:
        choice_param(QueryDict("status=bogus"), "status", choices, listed=["FAILED", "NOT_EVALUATED"])
    assert caught.value.message == "status must be one of FAILED, NOT_EVALUATED, not 'bogus'."


# --- the pages, on PostgreSQL ---------------------------------------------------------------------


@pytest.fixture
def run(personas):
    return seed_run(workspace=personas.workspace, items=8, lanes=2, name="nightly")


@pytest.fixture
def pack(personas):
    services.pack_version_publish(
        workspace=personas.workspace, data=mental_math().encode(), user=personas.owner
    )
    published = services.pack_version_publish(
        workspace=personas.workspace,
        data=mental_math(number=2, extra_case=True).encode(),
        user=personas.owner,
    )
    return published.pack


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("query", "name"),
    [
        (f"to={BIG}", "to"),
        (f"from={BIG}", "from"),
        (f"to=-{BIG}", "to"),
        ("to=abc", "to"),
        ("from=²", "from"),
    ],
)
def test_a_version_number_that_is_not_one_is_a_400_naming_it(personas, pack, query, name):
    response = login(personas.viewer).get(f"/packs/{pack.public_id}/diff/?{query}")
    assert response.status_code == 400
    body = response.content.decode()
    assert f"{name} must be a whole number from 1 to {MAX_DB_INTEGER}" in body
    assert f'name="{name}" aria-invalid="true"' in body
    assert 'value="2"' in body  # the version picker is still there


@pytest.mark.django_db
def test_a_version_the_pack_does_not_have_is_still_a_404(personas, pack):
    assert login(personas.viewer).get(f"/packs/{pack.public_id}/diff/?to=7").status_code == 404
    assert login(personas.viewer).get(f"/packs/{pack.public_id}/diff/?from=1&to=2").status_code == 200
    assert login(personas.outsider).get(f"/packs/{pack.public_id}/diff/?to={BIG}").status_code == 404


@pytest.mark.django_db
@pytest.mark.parametrize("value", [BIG, "²", "0", "-1", "12abc"])
def test_a_deployment_filter_that_is_no_lane_of_the_run_is_a_400_naming_it(personas, run, value):
    response = login(personas.viewer).get(f"/runs/{run.id}/cases/", {"deployment": value})
    assert response.status_code == 400
    body = response.content.decode()
    assert "deployment must be a deployment of this run (careful, sloppy)." in body
    assert 'name="deployment" aria-invalid="true"' in body
    assert 'id="item-' not in body  # nothing listed as if filtered


@pytest.mark.django_db
def test_the_deployment_filter_takes_the_lane_id_or_the_deployment_name(personas, run):
    careful = RunLane.objects.get(run=run, deployment_name="careful")
    client = login(personas.viewer)
    by_id = client.get(f"/runs/{run.id}/cases/", {"deployment": careful.id}).content.decode()
    by_name = client.get(f"/runs/{run.id}/cases/", {"deployment": "careful"}).content.decode()
    shown = re.findall(r'id="item-(\d+)"', by_name)
    assert shown == re.findall(r'id="item-(\d+)"', by_id) and len(shown) == 4
    assert {int(i) for i in shown} == set(careful.items.values_list("id", flat=True))
    assert f'<option value="{careful.id}" selected>careful</option>' in by_name


@pytest.mark.django_db
@pytest.mark.parametrize("value", [BIG, "²"])
def test_a_compare_lane_that_is_not_a_lane_id_is_a_400_naming_it(personas, run, value):
    url = f"/runs/compare/?baseline={run.id}&candidate={run.id}&baseline_lane={value}"
    response = login(personas.viewer).get(url)
    assert response.status_code == 400
    assert "baseline_lane must be a lane id of the run" in response.content.decode()


@pytest.mark.django_db
def test_the_new_run_form_names_an_id_no_row_can_have(personas, run):
    response = login(personas.owner).post(
        "/runs/new/", {"pack_version": BIG, "deployments": [BIG], "repetitions": "1"}
    )
    assert response.status_code == 400
    body = response.content.decode()
    assert "Select a valid choice" in body and f"“{BIG}” is not a valid value." in body
    assert Run.objects.count() == 1


# --- the same pages on SQLite, where a too-big number raised OverflowError ------------------------

SQLITE_SCRIPT = """
import json
from django.contrib.auth import get_user_model
from django.test import Client
from agentclash_site.workspaces.models import Role, Workspace
from agentclash_site.workspaces.services import membership_set_role
from packs import services
from runs.models import RunLane
from runs.seeding import seed_run
from tests.packs.publish_fixtures import mental_math

BIG = "99999999999999999999"
ws = Workspace.objects.create(slug="lite", name="Lite")
user = get_user_model().objects.create_user("lite", password="pw-lite-123")
membership_set_role(workspace=ws, user=user, role=Role.OWNER)
pack = services.pack_version_publish(workspace=ws, data=mental_math().encode(), user=user).pack
run = seed_run(workspace=ws, items=4, lanes=2, name="nightly")
lane = RunLane.objects.filter(run=run).first()
client = Client(raise_request_exception=False, HTTP_HOST="localhost")
client.force_login(user)
statuses = {
    "diff to": client.get(f"/packs/{pack.public_id}/diff/?to={BIG}").status_code,
    "diff from": client.get(f"/packs/{pack.public_id}/diff/?from=-{BIG}").status_code,
    "diff unknown": client.get(f"/packs/{pack.public_id}/diff/?to=9").status_code,
    "cases deployment": client.get(f"/runs/{run.id}/cases/?deployment={BIG}").status_code,
    "cases lane": client.get(f"/runs/{run.id}/cases/?deployment={lane.id}").status_code,
    "case": client.get(f"/runs/{run.id}/cases/{BIG}/").status_code,
    "compare lane": client.get(
        f"/runs/compare/?baseline={run.id}&candidate={run.id}&candidate_lane={BIG}"
    ).status_code,
    "new run": client.post(
        "/runs/new/", {"pack_version": BIG, "deployments": [BIG], "repetitions": "1"}
    ).status_code,
}
print(json.dumps(statuses))
"""


def test_a_too_big_number_is_a_4xx_on_sqlite_too(tmp_path):
    assert run_on_sqlite(tmp_path, SQLITE_SCRIPT) == {
        "diff to": 400,
        "diff from": 400,
        "diff unknown": 404,
        "cases deployment": 400,
        "cases lane": 200,
        "case": 404,
        "compare lane": 400,
        "new run": 400,
    }
