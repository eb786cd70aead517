"""A run records the deployment's call settings when it is created (``RunLane.settings``) and
every call of the run uses them: an edit of the deployment mid-run (model, system prompt,
temperature, URL, timeout, max_attempts) changes nothing of the run's calls, while its
secret stays read live (a rotation mid-run keeps working). Against the fake provider on
127.0.0.1, over a real socket."""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import json
import sys
import threading
import time
import types
from datetime import timedelta
from typing import Any

import pytest
from django.apps import apps
from django.db import connection
from django.utils import timezone

from runs import dispatch
from runs.compare_tasks import comparison_request, compute_comparison
from runs.dispatch import claim_items, dispatch_lane, lane_context_for
from runs.lane_settings import CallSettings
from runs.models import Deployment, Run, RunItem, RunLane
from runs.services.deployments import deployment_create, deployment_update
from runs.services.operations import run_retry_failed
from runs.sweeper import sweep
from tests.clients import logged_in
from tests.fakes.agent_server import FakeAgent, ok, server_error
from tests.runs.runfactory import create_run, drive, echo_answer, hosted, publish

pytestmark = pytest.mark.django_db(transaction=True)

PROMPT = "You are the original prompt."
SECRET = "sk-original-secret-1234"
HEADER_VALUE = "hdr-value-secret-5678"


def chat_answer(recorded: Any) -> dict[str, Any]:
    """A chat completion whose content is the last word of the prompt (the right answer)."""
    word = recorded.json["messages"][-1]["content"].split()[-1]
    return {
        "model": recorded.json["model"],
        "choices": [{"index": 0, "message": {"role": "assistant", "content": word}, "finish_reason": "stop"}],
    }


def chat(workspace: Any, url: str, **fields: Any) -> Any:
    workspace.allow_private_endpoints = True
    workspace.save(update_fields=["allow_private_endpoints"])
    fields.setdefault("timeout_seconds", 5)
    fields.setdefault("model", "model-original")
    fields.setdefault(
        "config",
        {"system_prompt": PROMPT, "temperature": 0.25, "extra_headers": {"x-api-key": HEADER_VALUE}},
    )
    return deployment_create(
        workspace=workspace, name="gpt", kind="openai_chat", url=url, secret=SECRET, **fields
    ).deployment


def edit_everything(dep: Any, url: str | None = None) -> None:
    deployment_update(
        deployment=dep,
        model="model-edited",
        url=url or dep.url,
        secret="sk-rotated-secret-9999",
        timeout_seconds=60,
        max_attempts=5,
        config={
            "system_prompt": "EDITED prompt",
            "temperature": 1.5,
            "extra_headers": {"x-api-key": "hdr-new"},
        },
    )


def assert_original(requests: list[Any]) -> None:
    assert requests
    for r in requests:
        assert r.json["model"] == "model-original"
        assert r.json["messages"][0] == {"role": "system", "content": PROMPT}
        assert r.json["temperature"] == 0.25


def gated(gate: threading.Event, then: Any) -> Any:
    """Answer once ``gate`` is set (a bounded wait: 30 s at most)."""

    async def behaviour(request: Any, recorded: Any, agent: Any) -> Any:
        await asyncio.get_running_loop().run_in_executor(None, gate.wait, 30)
        return await then(request, recorded, agent)

    return behaviour


def test_an_edit_while_the_run_calls_changes_none_of_its_calls(personas, monkeypatch):
    """The deployment is edited while the first item's call is in flight; that slice then
    ends (its clock jumps past the slice's end) and the next slice calls the other items:
    they go out with the run's model, prompt and temperature, and with the rotated secret
    and credential header (read live by every slice)."""
    version = publish(personas.workspace, cases=3)
    gate = threading.Event()
    errors: list[BaseException] = []
    offset = [0.0]
    clock = types.SimpleNamespace(
        monotonic=lambda: time.monotonic() + offset[0], perf_counter=time.perf_counter, sleep=time.sleep
    )
    monkeypatch.setattr(dispatch, "time", clock)
    with FakeAgent(path="/v1/chat/completions") as agent:
        agent.default = ok(chat_answer)
        agent.queue(gated(gate, ok(chat_answer)))  # the first call waits for the edit
        dep = chat(personas.workspace, agent.base_url + "/v1", max_in_flight=1)
        run = create_run(personas.workspace, version, [dep])
        lane = RunLane.objects.get(run=run)
        outcome: list[Any] = []

        def work() -> None:
            try:
                outcome.append(dispatch_lane(lane.pk, time_slice=600))
            except BaseException as exc:  # handed to the test thread
                errors.append(exc)
            finally:
                connection.close()

        thread = threading.Thread(target=work)
        thread.start()
        try:
            agent.wait_for_calls(1, timeout=20)
            edit_everything(dep)  # one call in flight, two items not yet claimed
            offset[0] = 3600.0  # the slice's time is over: it claims nothing more
        finally:
            gate.set()
            thread.join(timeout=60)
        assert not errors and not thread.is_alive()
        assert (outcome[0].recorded, outcome[0].reason) == (1, "time slice ended")
        run = drive(run)  # the next slice, after the edit
    lane.refresh_from_db()
    assert run.status == "completed" and lane.passed == 3
    assert len(agent.requests) == 3
    assert_original(agent.requests)
    later = agent.requests[1:]
    assert {r.headers["Authorization"] for r in later} == {"Bearer sk-rotated-secret-9999"}
    assert {r.headers["x-api-key"] for r in later} == {"hdr-new"}
    # The evidence grading read is the recorded system prompt too.
    for item in RunItem.objects.filter(run=run):
        assert item.grade["status"] == "PASSED"
        assert item.evidence["response"]["messages"][0]["content"] == PROMPT


def test_the_snapshot_never_holds_a_secret_a_signing_key_or_a_header_value(personas):
    version = publish(personas.workspace, cases=1)
    dep = chat(personas.workspace, "http://127.0.0.1:9/v1", config={
        "system_prompt": PROMPT, "extra_headers": {"x-api-key": HEADER_VALUE}, "secret_header": "api-key",
    })  # fmt: skip
    signing_key = dep.get_signing_key()
    run = create_run(personas.workspace, version, [dep])
    (stored,) = RunLane.objects.filter(run=run).values_list("settings", flat=True)
    text = json.dumps(stored)
    for value in (SECRET, HEADER_VALUE, signing_key, dep.secret_encrypted, dep.signing_key_encrypted):
        assert value and value not in text
    assert stored == {
        "kind": "openai_chat",
        "evidence_level": "structured",
        "url": "http://127.0.0.1:9/v1",
        "model": "model-original",
        "timeout_seconds": 5.0,
        "max_attempts": 3,
        "config": {"system_prompt": PROMPT},
        "auth": {
            "secret": True,
            "signing_key": True,
            "secret_header": "api-key",
            "extra_headers": ["x-api-key"],
        },
    }


def test_a_secret_is_never_sent_to_the_runs_endpoint_once_the_deployment_names_another(personas):
    """The run keeps its endpoint; the secret and credential headers are the deployment's,
    read live. Re-pointed at another provider with that provider's key (and retry-failed,
    or the rest of a running run, then called), the old endpoint was sent the new key: a
    credential handed to a host the deployment no longer names, as the redirect guard
    (``sensitive_headers``) never allows. Those calls are now not made: each item ends
    config_error saying why, and neither endpoint receives anything."""
    version = publish(personas.workspace, cases=2)
    with FakeAgent(path="/v1/chat/completions") as old, FakeAgent(path="/v1/chat/completions") as new:
        old.default = new.default = ok(chat_answer)
        dep = chat(personas.workspace, old.base_url + "/v1")
        run = create_run(personas.workspace, version, [dep])
        deployment_update(
            deployment=dep,
            url=new.base_url + "/v1",
            secret="sk-the-new-providers-key",
            config={"system_prompt": PROMPT, "extra_headers": {"x-api-key": "new-providers-header"}},
        )
        run = drive(run)
    assert (len(old.requests), len(new.requests)) == (0, 0)
    items = list(RunItem.objects.filter(run=run).order_by("id"))
    assert [i.last_category for i in items] == ["config_error", "config_error"]
    attempt = items[0].attempts.get()
    assert attempt.error_code == "endpoint_moved"
    assert f"127.0.0.1:{old.port}" in attempt.error and "start a new run" in attempt.error


def test_retry_failed_and_the_sweeper_re_claim_use_the_runs_settings(personas):
    """Edited between a lost claim and its re-claim, and again before retry-failed: every
    request (in-place retries included) carries the run's model and prompt and the retries
    stop at the run's max_attempts (2), not the edited 5; the secret and the credential
    header are the deployment's, read live: the rotated ones."""
    version = publish(personas.workspace, cases=2)
    with FakeAgent(path="/v1/chat/completions") as agent:
        agent.default = ok(chat_answer)
        agent.queue(server_error(503), server_error(503))
        dep = chat(personas.workspace, agent.base_url + "/v1", max_attempts=2, max_in_flight=1)
        run = create_run(personas.workspace, version, [dep])
        lane = RunLane.objects.get(run=run)
        # A worker claims an item and dies; the deployment is edited; the sweeper returns it.
        (lost,) = claim_items(lane=lane, run=run, deployment=dep, owner="dead-worker", wanted=1)
        edit_everything(dep)
        RunItem.objects.filter(pk=lost["id"]).update(claim_deadline=timezone.now() - timedelta(seconds=1))
        assert sweep()["returned_claims"] == 1
        run = drive(run)  # the first item's two attempts answer 503: it ends infra_error
        lane.refresh_from_db()
        assert (lane.passed, lane.infra_error) == (1, 1)
        assert len(agent.requests) == 3
        deployment_update(deployment=dep, model="model-edited-again")
        agent.queue(server_error(503), server_error(503))
        assert run_retry_failed(run=run, enqueue=False) == 1
        run = drive(run)
    lane.refresh_from_db()
    assert (lane.passed, lane.infra_error) == (1, 1)  # two more attempts, both 503: no third
    assert len(agent.requests) == 5
    assert_original(agent.requests)
    assert {r.headers["Authorization"] for r in agent.requests} == {"Bearer sk-rotated-secret-9999"}
    assert {r.headers["x-api-key"] for r in agent.requests} == {"hdr-new"}


def test_a_hosted_lane_keeps_calling_the_url_it_was_created_with(personas):
    version = publish(personas.workspace, cases=2)
    with FakeAgent() as agent, FakeAgent() as moved:
        agent.default = ok(echo_answer)
        dep = hosted(personas.workspace, agent.url)
        run = create_run(personas.workspace, version, [dep])
        deployment_update(deployment=dep, url=moved.url, evidence_level="black_box")
        run = drive(run)
    assert run.status == "completed"
    assert (agent.calls, moved.calls) == (2, 0)
    assert {i.grade["status"] for i in RunItem.objects.filter(run=run)} == {"PASSED"}
    assert RunLane.objects.get(run=run).settings["evidence_level"] == "structured"


def test_the_migration_backfills_lanes_from_their_deployment_as_it_is_now(personas):
    backfill = importlib.import_module("runs.migrations.0010_lane_settings").backfill
    version = publish(personas.workspace, cases=1)
    dep = chat(personas.workspace, "http://127.0.0.1:9/v1")
    other = hosted(personas.workspace, "http://127.0.0.1:9/agent", name="moved")
    kept = create_run(personas.workspace, version, [dep])
    old = create_run(personas.workspace, version, [dep, other])
    RunLane.objects.filter(run=old).update(settings={})
    # A finished run whose deployment changed kind since: only its kind is known.
    old.status = "completed"
    old.save(update_fields=["status"])
    deployment_update(deployment=other, kind="trace_import", url="")
    recorded_before = RunLane.objects.get(run=kept).settings
    deployment_update(deployment=dep, model="model-now")

    backfill(apps, None)

    lanes = {lane.deployment_name: lane.settings for lane in RunLane.objects.filter(run=old)}
    assert lanes["gpt"]["model"] == "model-now" and lanes["gpt"]["backfilled"] is True
    assert lanes["gpt"]["auth"] == {
        "secret": True, "signing_key": True, "secret_header": None, "extra_headers": ["x-api-key"],
    }  # fmt: skip
    assert lanes["moved"] == {"kind": "hosted_http", "backfilled": True, "unknown": True}
    assert RunLane.objects.get(run=kept).settings == recorded_before  # recorded ones stay
    assert SECRET not in json.dumps(lanes)


def test_the_migration_is_frozen_and_records_what_call_settings_reads(personas, monkeypatch):
    """Migration 0010 runs with the historical models and without ``runs.lane_settings``
    (a migration replayed on a new database must not depend on what that module becomes),
    and what it records is what ``CallSettings`` reads today, for every kind."""
    from django.db.migrations.executor import MigrationExecutor

    backfill = importlib.import_module("runs.migrations.0010_lane_settings").backfill
    historical = MigrationExecutor(connection).loader.project_state(("runs", "0010_lane_settings")).apps
    version = publish(personas.workspace, cases=1)
    config = {
        "system_prompt": PROMPT, "temperature": 0.25, "extra_body": {"top_k": 3},
        "extra_headers": {"x-api-key": HEADER_VALUE}, "secret_header": "api-key",
    }  # fmt: skip
    deployments = [
        chat(personas.workspace, "http://127.0.0.1:9/v1", config=config),
        hosted(personas.workspace, "http://127.0.0.1:9/agent", name="plain", evidence_level="black_box"),
        deployment_create(workspace=personas.workspace, name="upload", kind="trace_import").deployment,
    ]
    run = create_run(personas.workspace, version, deployments)
    moved = create_run(personas.workspace, version, deployments[1:2])
    RunLane.objects.update(settings={})
    RunLane.objects.filter(run=moved).update(deployment_kind="openai_chat")  # changed kind since

    monkeypatch.setitem(sys.modules, "runs.lane_settings", None)  # any import of it fails
    backfill(historical, None)
    monkeypatch.undo()

    for dep in deployments:
        stored = RunLane.objects.get(run=run, deployment=dep).settings
        assert stored == CallSettings.of_deployment(dep, backfilled=True).to_json()
        assert CallSettings.from_json(stored) == CallSettings.of_deployment(dep, backfilled=True)
    assert RunLane.objects.get(run=moved).settings == CallSettings.kind_only("openai_chat").to_json()
    assert HEADER_VALUE not in json.dumps(list(RunLane.objects.values_list("settings", flat=True)))


def test_the_run_page_shows_what_each_lane_ran_with_and_marks_a_changed_deployment(personas):
    version = publish(personas.workspace, cases=1)
    dep = chat(personas.workspace, "http://127.0.0.1:9/v1")
    run = create_run(personas.workspace, version, [dep])
    page = logged_in(personas.viewer).get(f"/runs/{run.id}/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "model-original" in html and "127.0.0.1:9" in html and "0.25" in html
    assert 'data-testid="deployment-changed"' not in html
    assert HEADER_VALUE not in html and SECRET not in html

    deployment_update(deployment=dep, model="model-edited", config={"system_prompt": PROMPT})
    html = logged_in(personas.viewer).get(f"/runs/{run.id}/").content.decode()
    assert "model-original" in html and "model-edited" not in html
    assert 'data-testid="deployment-changed"' in html
    assert "now different: model, config.temperature" in html
    assert logged_in(personas.outsider).get(f"/runs/{run.id}/").status_code == 404


def test_the_run_page_and_compare_show_no_credential_of_a_url(personas):
    """A URL's user:password (refused by the deployments service, but stored by the admin
    form before it applied the service's checks) and its credential-like query values
    (Azure's ``?code=``, ``?api_key=``) are never shown: the run page names the host and
    port, compare shows the URL with them elided and its other query values (an
    ``api-version`` change is a setting of the run)."""
    version = publish(personas.workspace, cases=1)
    dep = chat(personas.workspace, "http://127.0.0.1:9/v1")
    url = "http://user:pw-SECRET@127.0.0.1:9/v1?api-version=2024-06-01&code=tok-ONE&sig=sig-ONE"
    Deployment.objects.filter(pk=dep.pk).update(url=url)
    run = create_run(personas.workspace, version, [Deployment.objects.get(pk=dep.pk)])
    assert RunLane.objects.get(run=run).settings["url"] == url  # the calls go where it says
    html = logged_in(personas.viewer).get(f"/runs/{run.id}/").content.decode()
    assert "<code>127.0.0.1:9</code>" in html
    for secret in ("pw-SECRET", "user:", "tok-ONE", "sig-ONE"):
        assert secret not in html

    recorded = CallSettings.of_lane(RunLane.objects.get(run=run))
    rotated = dataclasses.replace(recorded, url=url.replace("ONE", "TWO").replace("2024-06-01", "2025-01-01"))
    (change,) = recorded.differences(rotated)
    assert change == {
        "field": "url",
        "before": "http://127.0.0.1:9/v1?api-version=2024-06-01&code=…&sig=…",
        "after": "http://127.0.0.1:9/v1?api-version=2025-01-01&code=…&sig=…",
    }
    only_token = dataclasses.replace(recorded, url=url.replace("tok-ONE", "tok-TWO"))
    assert [c["field"] for c in recorded.differences(only_token)] == ["url"]  # compared as called


def test_compare_names_the_settings_that_differ_between_the_two_lanes(personas):
    version = publish(personas.workspace, cases=2)
    with FakeAgent(path="/v1/chat/completions") as agent:
        agent.default = ok(chat_answer)
        dep = chat(personas.workspace, agent.base_url + "/v1")
        baseline = drive(create_run(personas.workspace, version, [dep]))
        deployment_update(deployment=dep, model="model-edited")
        candidate = drive(create_run(personas.workspace, version, [dep]))
    assert [r.json["model"] for r in agent.requests] == ["model-original"] * 2 + ["model-edited"] * 2
    comparison = comparison_request(baseline=baseline, candidate=candidate)
    assert compute_comparison(comparison.id) == "ready"
    comparison.refresh_from_db()
    (lane,) = comparison.result["lanes"]
    assert lane["settings_changed"] == [
        {"field": "model", "before": "model-original", "after": "model-edited"}
    ]
    page = logged_in(personas.viewer).get(f"/runs/compare/?baseline={baseline.id}&candidate={candidate.id}")
    html = page.content.decode()
    assert 'data-testid="settings-changed"' in html
    assert "<code>model-original</code> → <code>model-edited</code>" in html
    assert (
        logged_in(personas.outsider)
        .get(f"/runs/compare/?baseline={baseline.id}&candidate={candidate.id}")
        .status_code
        == 404
    )


def test_the_call_settings_round_trip_and_a_lane_without_any_reads_its_deployment(personas):
    dep = chat(personas.workspace, "http://127.0.0.1:9/v1")
    recorded = CallSettings.of_deployment(dep)
    assert CallSettings.from_json(recorded.to_json()) == recorded
    assert recorded.system_prompt == PROMPT
    target = recorded.target(dep)
    assert (target.secret, target.extra_headers()) == (SECRET, {"x-api-key": HEADER_VALUE})
    assert CallSettings.of_lane(RunLane(deployment=dep, settings={})) == recorded


def test_grading_and_the_sweeper_read_the_lanes_settings_not_the_edited_deployment(personas):
    """Re-scoring, trace imports and n_wise ranking grade with ``lane_context_for``: the run's
    evidence level and system prompt. The sweeper gives a lost item up after the run's
    max_attempts claims (2 here), not the edited deployment's (1)."""
    version = publish(personas.workspace, cases=1)
    dep = chat(personas.workspace, "http://127.0.0.1:9/v1", max_attempts=2)
    run = create_run(personas.workspace, version, [dep])
    lane = RunLane.objects.get(run=run)
    deployment_update(
        deployment=dep, evidence_level="black_box", max_attempts=1, config={"system_prompt": "EDITED"}
    )
    ctx = lane_context_for(RunLane.objects.get(pk=lane.pk), Run.objects.light().get(pk=run.pk))
    assert (ctx.evidence_level, ctx.system_prompt) == ("structured", PROMPT)

    claim_items(lane=lane, run=run, deployment=dep, owner="dead-worker")
    RunItem.objects.filter(run=run).update(claim_deadline=timezone.now() - timedelta(seconds=1))
    assert sweep()["returned_claims"] == 1  # claimed once, the run allows 2
    item = RunItem.objects.get(run=run)
    assert (item.state, item.attempt_count) == ("pending", 2)  # the lost claim owned 2 numbers
