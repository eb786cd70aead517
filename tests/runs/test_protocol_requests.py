"""What a dispatched run sends an agent (spec/agent-protocol.md "hosted_http request"), as the
agent receives it over a real socket: the item's UUID, the attempt number across "retry
failed items", the case's own timeout, and the assets a case may see."""

from __future__ import annotations

import uuid

import pytest
import yaml
from django.test import Client

from packs.services import artifact_store, pack_version_publish
from runs.models import Attempt, RunItem
from runs.services.operations import run_retry_failed
from tests.fakes.agent_server import FakeAgent, ok, redirect, server_error, slow
from tests.runs.runfactory import create_run, drive, echo_answer, hosted, pack_yaml, publish

pytestmark = pytest.mark.django_db(transaction=True)


def _publish(personas, doc) -> object:
    return pack_version_publish(workspace=personas.workspace, data=yaml.safe_dump(doc).encode()).version


def test_the_item_id_is_a_uuid_stable_across_attempts_and_distinct_per_item(personas):
    # It was the item's integer row id.
    version = publish(personas.workspace, cases=2)
    with FakeAgent() as agent:
        agent.default = ok(echo_answer)
        agent.queue(server_error(503), case="c0")
        run = drive(create_run(personas.workspace, version, [hosted(personas.workspace, agent.url)]))
        ids = {key: [r.json["item_id"] for r in agent.requests_for(key)] for key in ("c0", "c1")}
    assert run.status == "completed"
    assert len(ids["c0"]) == 2 and ids["c0"][0] == ids["c0"][1]
    assert ids["c0"][0] != ids["c1"][0]
    for value in (ids["c0"][0], ids["c1"][0]):
        assert str(uuid.UUID(value)) == value
    # The case page shows it, so an agent's logs can be matched with the case.
    item = RunItem.objects.get(run=run, case_key="c0")
    assert item.protocol_id == ids["c0"][0]
    client = Client()
    client.force_login(personas.viewer)
    page = client.get(f"/runs/{run.id}/cases/{item.id}/").content.decode()
    assert f'<code data-testid="protocol-id">{ids["c0"][0]}</code>' in page


def test_retry_failed_items_continue_the_attempt_numbering_the_agent_sees(personas):
    version = publish(personas.workspace, cases=1)
    with FakeAgent() as agent:
        agent.default = server_error(503)
        dep = hosted(personas.workspace, agent.url, max_attempts=2)
        run = drive(create_run(personas.workspace, version, [dep]))
        assert [r.json["attempt"] for r in agent.requests] == [1, 2]
        agent.default = ok(echo_answer)
        run_retry_failed(run=run, enqueue=False)
        run = drive(run)
        # The agent saw attempt 1 again (the stored attempt was number 3).
        assert [r.json["attempt"] for r in agent.requests] == [1, 2, 3]
    item = RunItem.objects.get(run=run)
    assert item.status == "PASSED"
    assert list(Attempt.objects.filter(item=item).values_list("number", flat=True)) == [1, 2, 3]


def test_a_retried_round_gets_max_attempts_of_its_own(personas):
    version = publish(personas.workspace, cases=1)
    with FakeAgent() as agent:
        agent.default = server_error(503)
        dep = hosted(personas.workspace, agent.url, max_attempts=2)
        run = drive(create_run(personas.workspace, version, [dep]))
        run_retry_failed(run=run, enqueue=False)
        run = drive(run)
        assert [r.json["attempt"] for r in agent.requests] == [1, 2, 3, 4]
    assert RunItem.objects.get(run=run).last_category == "infra_error"


def _with_case_timeout(timeout: int) -> dict:
    doc = yaml.safe_load(pack_yaml(cases=2))
    doc["input_sets"][0]["cases"][0]["case_timeout_seconds"] = timeout
    return doc


def test_case_timeout_seconds_shortens_the_attempts_of_its_case(personas):
    # It was ignored: the case's 1 s was the deployment's 10 s.
    version = _publish(personas, _with_case_timeout(1))
    with FakeAgent() as agent:
        agent.default = slow(2.5, ok(echo_answer))
        dep = hosted(personas.workspace, agent.url, timeout_seconds=10, max_attempts=1)
        run = drive(create_run(personas.workspace, version, [dep]))
    c0, c1 = RunItem.objects.filter(run=run).order_by("case_key")
    assert (c0.last_category, c0.status) == ("infra_error", "")
    assert Attempt.objects.get(item=c0).error_code == "timeout"
    assert c1.status == "PASSED"


def test_case_timeout_seconds_lengthens_the_attempts_and_the_claim_of_its_case(personas):
    version = _publish(personas, _with_case_timeout(4))
    with FakeAgent() as agent:
        agent.default = slow(1.5, ok(echo_answer))
        dep = hosted(personas.workspace, agent.url, timeout_seconds=1, max_attempts=1)
        run = drive(create_run(personas.workspace, version, [dep]))
        deadline = agent.requests_for("c0")[0].json["deadline_at"]
        other = agent.requests_for("c1")[0].json["deadline_at"]
    c0, c1 = RunItem.objects.filter(run=run).order_by("case_key")
    assert c0.status == "PASSED"  # 1.5 s under its own 4 s
    assert c1.last_category == "infra_error"  # 1.5 s over the deployment's 1 s
    assert deadline > other  # the item's deadline (and its claim) grew with its timeout


def test_a_case_receives_the_assets_of_its_challenge_and_inputs(personas):
    # The challenge's artifact_refs and an input's artifact_key never reached the agent, and
    # a version asset named by artifacts was sent with its key as its path and no media type.
    ws = personas.workspace
    doc = yaml.safe_load(pack_yaml(cases=1))
    doc["version"]["assets"] = [
        {
            "key": key,
            "path": f"data/{key}.json",
            "media_type": "application/json",
            "artifact_id": str(
                artifact_store(workspace=ws, data=key.encode(), filename="f.json").artifact.public_id
            ),
        }
        for key in ("brief", "sheet", "named", "gold")
    ]
    doc["challenges"][0]["artifact_refs"] = [{"key": "brief"}]
    case = doc["input_sets"][0]["cases"][0]
    case["inputs"] = [{"key": "data", "kind": "file", "artifact_key": "sheet"}]
    case["artifacts"] = [{"key": "named"}]
    case["expectations"].append({"key": "gold", "kind": "text", "source": "artifact:gold"})
    version = _publish(personas, doc)
    with FakeAgent() as agent:
        agent.default = ok(echo_answer)
        drive(create_run(ws, version, [hosted(ws, agent.url)]))
        [request] = agent.requests
    assets = {a["key"]: a for a in request.json["case"]["assets"]}
    assert sorted(assets) == ["brief", "named", "sheet"]  # never the expectation's "gold"
    for key, asset in assets.items():
        assert (asset["path"], asset["media_type"]) == (f"data/{key}.json", "application/json")
        assert "/assets/signed/" in asset["url"]


def test_an_agent_that_redirects_its_post_away_is_a_config_error_not_a_graded_answer(personas):
    version = publish(personas.workspace, cases=1)
    with FakeAgent() as agent:
        agent.route("/moved", ok(echo_answer))
        agent.default = redirect(agent.url_for("/moved"), status=302)
        run = drive(create_run(personas.workspace, version, [hosted(personas.workspace, agent.url)]))
        assert [r.path for r in agent.requests] == ["/agent"]  # never a body-less GET of /moved
    item = RunItem.objects.get(run=run)
    assert (item.status, item.last_category) == ("", "config_error")
    assert Attempt.objects.get(item=item).error_code == "redirect_changes_method"
