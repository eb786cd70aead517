"""Issue 6 "Must survive", through the runs pipeline and the model passes (the judge-level
cases are in test_judge_modes.py: malformed JSON, "incorrect" in reasoning, unknown
citation, provider down, reference_missing for one case; test_judge_budget_nwise.py: budget
hit half-way). Here: a whole run with the provider down, a run whose lane budget runs out
half-way, the claims and critique passes on malformed JSON, and reasoning words that
contradict the JSON verdict in both directions."""

from __future__ import annotations

from grading.judges.model_pass import merge_claims, model_claims, model_critique
from runs.models import Run, RunItem, RunLane
from tests.fakes.agent_server import FakeAgent, ok
from tests.fakes.judge_provider import by_mode, content, verdict
from tests.grading.judges.helpers import CTX, assertion, case, evidence, grade, judge_result, make_judge, spec
from tests.grading.judges.test_judge_runs import setup_provider
from tests.runs.runfactory import create_run, drive, echo_answer, hosted, pack_yaml

JUDGE = {"key": "j", "mode": "assertion", "assertion": "says the word", "model": "gpt-4o-mini", "samples": 1}


def publish_with_judges(workspace, judges, limits=None, cases=2):
    import yaml

    from packs.services import pack_version_publish

    doc = yaml.safe_load(pack_yaml(slug="judged", cases=cases))
    spec_doc = doc["version"]["evaluation_spec"]
    spec_doc["judge_mode"] = "hybrid"
    spec_doc["llm_judges"] = judges
    if limits:
        spec_doc["scorecard"]["judge_limits"] = limits
    return pack_version_publish(workspace=workspace, data=yaml.safe_dump(doc).encode()).version


def run_with(ws, version, agent):
    agent.route("/a", ok(echo_answer))
    return drive(create_run(ws, version, [hosted(ws, agent.url_for("/a"), name="a")]))


def judged(run):
    out = []
    for item in RunItem.objects.filter(run=run).order_by("case_key"):
        out.append((item, next(e for e in item.grade["expectations"] if e["key"] == "j")))
    return out


def test_provider_down_for_a_whole_run(personas, fake, monkeypatch):
    import dataclasses

    from grading.models import JudgeProviderConfig

    real = JudgeProviderConfig.provider_config
    # the claims and critique calls retry with backoff (1 s base): shortened, not skipped
    monkeypatch.setattr(
        JudgeProviderConfig,
        "provider_config",
        lambda self: dataclasses.replace(real(self), backoff_base_seconds=0.001),
    )
    ws = personas.workspace
    setup_provider(ws, fake)
    version = publish_with_judges(ws, [{**JUDGE, "max_retries": 0}])
    fake.stop()  # down before the first call, for the whole run
    with FakeAgent() as agent:
        run = run_with(ws, version, agent)
    assert run.status == "completed"
    rows = judged(run)
    assert len(rows) == 2
    for item, exp in rows:
        assert (exp["status"], exp["outcome_class"], exp["passed"]) == ("ERROR", "infra_error", None)
        assert item.status != "FAILED"  # never counted against the agent
        assert next(e for e in item.grade["expectations"] if e["key"] == "answer")["status"] == "PASSED"
        assert not [c for c in item.grade["claims"] if c["source"] == "llm"]  # the claims pass survived
    assert fake.calls == 0


def test_run_budget_hit_half_way(personas, fake):
    ws = personas.workspace
    setup_provider(ws, fake)
    limit = 3000
    version = publish_with_judges(ws, [JUDGE], limits={"max_tokens": limit}, cases=6)
    fake.default = by_mode(
        assertion=verdict({"pass": True, "reasoning": "ok"}),
        claims=content('{"claims": []}'),
        critique=content('{"suggestions": [], "overall": "fine"}'),
    )
    with FakeAgent() as agent:
        run = run_with(ws, version, agent)
    assert run.status == "completed"
    rows = judged(run)
    statuses = [exp["status"] for _item, exp in rows]
    graded = statuses.count("PASSED")
    assert 0 < graded < 6, statuses
    skipped = [exp for _item, exp in rows if exp["status"] != "PASSED"]
    assert {(e["status"], e["outcome_class"], e["reason_code"]) for e in skipped} == {
        ("NOT_EVALUATED", "unavailable", "judge_budget_exhausted")
    }
    assert all(item.status != "FAILED" for item, _exp in rows)
    lane = RunLane.objects.get(run=run)
    assert lane.judge_input_tokens + lane.judge_output_tokens <= limit
    stats = Run.objects.get(pk=run.pk).stats or {}
    findings = {s["finding"] for s in stats.get("eval_feedback", {}).get("suggestions", [])}
    assert "budget_exhausted" in findings


def test_claims_and_critique_passes_survive_malformed_json(fake):
    fake.default = by_mode(
        assertion=verdict({"pass": True}), claims=content('{"claims": [tru'), critique=content("nope")
    )
    with make_judge(fake) as judge:
        ev = evidence("The capital is Paris.")
        sp = spec(assertion(samples=1))
        g = grade(judge, sp, ev=ev)
        merge_claims(g, model_claims(judge, ev, case(), CTX, sp, usage=g.judge_usage))
        assert [c for c in g.claims if c["source"] == "llm"] == []
        assert g.judge_usage.calls == 3  # 1 judge sample + the claims call retried once
        assert g.status.value == "PASSED"
        records = [{"challenge_key": "ch", "expectations": {"j": ["PASSED"]}}]
        assert model_critique(judge, sp, records, {"ch": [case()]}) == []


def test_reasoning_words_never_override_the_json_verdict(fake):
    fake.queue(
        verdict({"pass": True, "reasoning": "The answer is incorrect and wrong; FAIL."}),
        verdict({"pass": False, "reasoning": "The answer is correct. PASS."}),
    )
    with make_judge(fake) as judge:
        passed = judge_result(grade(judge, spec(assertion(samples=1))))
        failed = judge_result(grade(judge, spec(assertion(samples=1))))
    assert passed.status.value == "PASSED" and passed.score == 1.0
    assert failed.status.value == "FAILED" and failed.score == 0.0
