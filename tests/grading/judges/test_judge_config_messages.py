"""Judge configuration mistakes a user makes (grading.md §6.5, interfaces.md §5): no provider,
a wrong API key (401), a mistyped model name (404). The message in the grade, on the case
page and in the API names the setting to change and where it lives."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from grading.engine.judging import no_judge_result
from runs.models import RunItem
from tests.fakes.agent_server import FakeAgent
from tests.fakes.judge_provider import status
from tests.grading.judges.helpers import assertion, grade, judge_result, make_judge, spec
from tests.grading.judges.test_judge_grade_command import run_grade, small_pack
from tests.grading.judges.test_judge_runs import publish_with_judges, setup_provider
from tests.runs.runfactory import create_run, drive, hosted

MODEL_404 = json.dumps(
    {"error": {"message": "The model `gpt-4o-mni` does not exist", "code": "model_not_found"}}
).encode()


def test_a_wrong_key_names_the_api_key_setting(fake):
    fake.default = status(401)
    r = judge_result(grade(make_judge(fake, settings_where="SETTINGS"), spec(assertion())))
    assert (r.status.value, r.outcome_class.value, r.reason_code) == (
        "ERROR",
        "infra_error",
        "judge_provider_auth",
    )
    assert "fix the API key in SETTINGS" in r.evidence
    assert fake.calls == 3  # one per sample: never retried


def test_a_mistyped_model_names_the_model_and_where_to_fix_it(fake):
    fake.default = status(404, MODEL_404)
    r = judge_result(grade(make_judge(fake, settings_where="SETTINGS"), spec(assertion(model="gpt-4o-mni"))))
    assert (r.status.value, r.outcome_class.value, r.reason_code) == (
        "ERROR",
        "evaluator_error",
        "judge_model_not_found",
    )
    assert "no model 'gpt-4o-mni'" in r.evidence and "fix the model name" in r.evidence
    assert "default model in SETTINGS" in r.evidence and "does not exist" in r.evidence
    assert fake.calls == 3


def test_no_provider_says_where_to_configure_one():
    r = no_judge_result("q", "quality", "rubric")
    assert r.reason_code == "no_judge_provider"
    assert "Judge provider settings page" in r.evidence and "--judge-provider" in r.evidence


def test_offline_grade_names_the_flags(fake, tmp_path):
    fake.default = status(401)
    judge = {"key": "ok", "mode": "assertion", "assertion": "names Paris", "model": "gpt-4o-mini"}
    args = small_pack(tmp_path, judge, [{"case_key": "c0", "final_output": "Paris"}])
    code, doc = run_grade(*args, "--judge-provider", "openai", "--judge-base-url", fake.base_url)
    exp = next(e for e in doc["cases"][0]["grading"]["expectations"] if e["key"] == "ok")
    assert exp["reason_code"] == "judge_provider_auth"
    assert "--judge-api-key" in exp["evidence"] and "AGENTCLASH_JUDGE_API_KEY" in exp["evidence"]


@pytest.mark.parametrize(
    ("reply", "says"),
    [
        (status(401), "fix the API key in the workspace's Judge provider settings (/workspaces/acme/judge/)"),
        (status(404, MODEL_404), "fix the model name"),
    ],
)
def test_a_run_shows_the_fix_on_the_case_page_and_in_the_api(personas, fake, reply, says):
    ws = personas.workspace
    setup_provider(ws, fake)
    fake.default = reply
    version = publish_with_judges(
        ws, [{"key": "j", "mode": "assertion", "assertion": "x", "model": "gpt-4o-mni", "samples": 1}]
    )
    with FakeAgent() as agent:
        run = drive(create_run(ws, version, [hosted(ws, agent.url)]))
    item = RunItem.objects.filter(run=run).order_by("pk").first()
    exp = next(e for e in item.grade["expectations"] if e["key"] == "j")
    assert exp["status"] == "ERROR" and says in exp["evidence"]
    client = Client()
    client.force_login(personas.viewer)
    page = client.get(f"/runs/{run.id}/cases/{item.id}/").content.decode()
    assert says.replace("'", "&#x27;") in page
    api = personas.api(personas.viewer).get(f"/api/v1/workspaces/acme/runs/{run.pk}/cases/{item.pk}")
    assert api.status_code == 200 and says in json.dumps(api.json())


def test_a_judge_without_a_model_says_where_to_name_one(fake):
    judge = make_judge(fake, settings_where="SETTINGS")
    r = judge_result(grade(judge, spec(assertion(model=None))))
    assert (r.status.value, r.reason_code) == ("NOT_EVALUATED", "judge_model_missing")
    assert "set the judge's model (or models) in the pack, or a default model in SETTINGS" in r.evidence
    assert fake.calls == 0


def test_an_unpriced_model_under_a_usd_limit_says_how_to_price_it(fake):
    from grading.judges import JudgeBudget

    judge = make_judge(fake, budget=JudgeBudget(max_usd=1.0))
    r = judge_result(grade(judge, spec(assertion(model="acme/new-model"))))
    assert r.reason_code == "judge_budget_exhausted"
    assert "add 'acme/new-model' to the model price table" in r.evidence and "max_tokens" in r.evidence
    assert fake.calls == 0


def test_the_fix_survives_once_the_breaker_stops_calling(fake):
    # after 3 failed calls in a row the judge stops calling and quotes the last error, cut:
    # the fix must come before the provider's (long) error body
    fake.default = status(401, json.dumps({"error": {"message": "x" * 400}}).encode())
    judge = make_judge(fake, settings_where="SETTINGS")
    results = [judge_result(grade(judge, spec(assertion(samples=1)))) for _ in range(4)]
    assert fake.calls == 3 and "not sent" in results[-1].evidence
    assert all("fix the API key in SETTINGS" in r.evidence for r in results)


def test_a_model_of_the_other_provider_kind_says_so(fake):
    fake.default = status(404, MODEL_404)
    r = judge_result(
        grade(
            make_judge(fake, settings_where="SETTINGS"), spec(assertion(samples=1, model="claude-haiku-4-5"))
        )
    )
    assert r.reason_code == "judge_model_not_found"
    assert "'claude-haiku-4-5' is an Anthropic model" in r.evidence and "kind anthropic" in r.evidence
