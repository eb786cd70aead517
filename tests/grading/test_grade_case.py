"""grade_case end to end: order, the grading.json document (§7), judges seam, claims gate,
no_result, crash isolation."""

from __future__ import annotations

import json

import pytest

from grading.engine import CaseGrade, JudgeRequest, evidence_from_response, grade_case
from grading.engine.notes import user_notes_summary
from grading.engine.types import (
    CaseDef,
    CaseExpectation,
    ExpectationResult,
    GradeContext,
    OutcomeClass,
    ResultKind,
    Status,
    Suggestion,
)
from grading.engine.validators import GRADERS

CTX = GradeContext(run_id="r1", lane_id="l1", deployment="dep", pack_version=3, case_findings=[])
CASE = CaseDef("ch", "c1", payload={"q": "2+2"}, expectations=[CaseExpectation("answer", value="4")])

SPEC = {
    "validators": [
        {
            "key": "exact",
            "type": "exact_match",
            "target": "final_output",
            "expected_from": "case.expectations.answer",
        },
        {
            "key": "fuzzy",
            "type": "fuzzy_match",
            "target": "final_output",
            "expected_from": "literal:4",
            "config": {"threshold": 0.5},
        },
        {
            "key": "calls",
            "type": "tool_call_assertion",
            "target": "tool_calls",
            "label": "calls the calculator",
            "config": {"tool_name": "calc"},
        },
    ],
    "rules": {
        "allowed_tools": ["calc"],
        "job": [
            {"label": "answers", "validator": "pattern_match", "where": "job_resolution", "pattern": "\\d"}
        ],
    },
    "llm_judges": [
        {"key": "polite", "mode": "assertion", "assertion": "The answer is polite", "model": "gpt-4o"}
    ],
    "scorecard": {"dimensions": ["correctness"]},
}
RESPONSE = {
    "final_output": "4",
    "tool_calls": [{"name": "calc", "args": {"expr": "2+2"}, "result": 4}],
    "messages": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}],
    "user_notes": "# Uncertainties\n- rounding?\n# Workarounds\n- used calc\nnote before? no\n",
}


def grade(spec=SPEC, response=RESPONSE, case=CASE, ctx=CTX, **kw):
    return grade_case(
        evidence_from_response(response, timing={"executor_duration_seconds": 2.0}),
        case,
        spec,
        context=ctx,
        **kw,
    )


def test_document_shape_and_order():
    doc = grade().to_dict()
    assert doc["schema_version"] == 1
    assert doc["case"] == {
        "run_id": "r1",
        "lane_id": "l1",
        "deployment": "dep",
        "challenge_key": "ch",
        "case_key": "c1",
        "repetition": 1,
        "attempt": 1,
        "pack_version": 3,
    }
    assert [e["key"] for e in doc["expectations"]] == [
        "rules.allowed_tools",
        "exact",
        "fuzzy",
        "calls",
        "rules.job[0]",
        "polite",
    ]
    assert [e["kind"] for e in doc["expectations"]] == [
        "guard",
        "validator",
        "validator",
        "validator",
        "rule",
        "judge",
    ]
    for e in doc["expectations"]:
        assert set(e) == {
            "text",
            "passed",
            "evidence",
            "key",
            "kind",
            "status",
            "outcome_class",
            "reason_code",
            "score",
            "threshold",
            "per_invocation_scores",
            "gating",
            "evidence_refs",
            "details",
        }
        assert e["evidence"] and len(e["evidence"]) <= 1000
    assert doc["status"] == "PASSED" and doc["validity"] == "valid"  # the judge is not used by the scorecard
    assert doc["summary"] == {
        "passed": 5,
        "failed": 0,
        "total": 5,
        "pass_rate": 1.0,
        "ungraded": {"unavailable": 1},
    }
    assert doc["execution_metrics"] == {
        "tool_calls": {"calc": 1},
        "total_tool_calls": 1,
        "total_steps": 1,
        "errors_encountered": 0,
        "output_chars": 1,
        "transcript_chars": 5,
    }
    assert doc["timing"]["executor_duration_seconds"] == 2.0
    assert doc["timing"]["total_duration_seconds"] == pytest.approx(
        2.0 + doc["timing"]["grader_duration_seconds"]
    )
    assert doc["user_notes_summary"] == {
        "uncertainties": ["rounding?"],
        "needs_review": [],
        "workarounds": ["used calc", "note before? no"],
    }
    assert doc["gates"] == {
        "compliance": "passed",
        "resolution": "passed",
        "guards": "passed",
        "compliance_score": 1.0,
    }
    assert doc["judge_usage"] == {"calls": 0, "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0}
    assert set(doc["eval_feedback"]) >= {"suggestions", "overall"}
    json.dumps(doc)  # serialisable as is


def test_expectation_texts():
    by_key = {e["key"]: e for e in grade().to_dict()["expectations"]}
    assert by_key["exact"]["text"] == "exact_match on final_output against case.expectations.answer"
    assert by_key["fuzzy"]["text"] == "fuzzy_match on final_output against literal:4 (threshold=0.5)"
    assert by_key["calls"]["text"] == "calls the calculator"
    assert by_key["fuzzy"]["threshold"] == 0.5 and by_key["exact"]["threshold"] is None
    assert by_key["calls"]["evidence_refs"] == ["tool_calls", "tool_call:0"]


def test_judges_without_provider_are_visible_not_evaluated():
    j = grade().expectations[-1]
    assert j.status is Status.NOT_EVALUATED and j.outcome_class is OutcomeClass.UNAVAILABLE
    assert j.reason_code == "no_judge_provider" and "no judge provider" in j.evidence
    assert j.text == "The answer is polite"


class FakeJudge:
    def __init__(self):
        self.requests: list[JudgeRequest] = []

    def evaluate(self, request: JudgeRequest) -> ExpectationResult:
        self.requests.append(request)
        request.usage.calls += 3
        request.usage.input_tokens += 300
        request.usage.cost_usd = 0.01
        quote = request.resolve_id("final_output")
        return ExpectationResult(
            request.key,
            ResultKind.JUDGE,
            request.text,
            Status.PASSED,
            OutcomeClass.PASS,
            f"cited {quote!r}",
            score=1.0,
        )


def test_judge_seam_gets_context_and_reports_usage():
    judge = FakeJudge()
    g = grade(judge=judge)
    req = judge.requests[0]
    assert req.context_blocks == [("final_output", "4")]
    assert req.resolve_id("tool_call:0.args") == '{"expr":"2+2"}'
    assert g.expectations[-1].status is Status.PASSED and g.expectations[-1].evidence == "cited '4'"
    assert g.to_dict()["judge_usage"] == {
        "calls": 3,
        "input_tokens": 300,
        "output_tokens": 0,
        "cost_usd": 0.01,
    }


def test_judge_reference_missing_is_a_pack_error_and_a_crash_is_an_evaluator_error():
    spec = {
        **SPEC,
        "llm_judges": [
            {
                "key": "ref",
                "mode": "reference",
                "rubric": "r",
                "model": "gpt-4o",
                "reference_from": "case.expectations.gold",
            }
        ],
    }
    j = grade(spec=spec, judge=FakeJudge()).expectations[-1]
    assert (
        j.status is Status.NOT_EVALUATED
        and j.reason_code == "reference_missing"
        and j.outcome_class is OutcomeClass.PACK_ERROR
    )

    class Boom:
        def evaluate(self, request):
            raise RuntimeError("provider exploded")

    j = grade(judge=Boom()).expectations[-1]
    assert j.status is Status.ERROR and j.outcome_class is OutcomeClass.EVALUATOR_ERROR


@pytest.mark.parametrize("judge", [None, FakeJudge()], ids=["no provider", "provider"])
def test_an_unresolved_judge_reference_is_a_pack_error_with_or_without_a_provider(judge):
    # grading.md §1.4 rule 3: the only status for an unresolved case reference, judges alike.
    # Without a provider (the offline grade command's default) the pack's error read as
    # "no_judge_provider", so a pack author never saw it before configuring a judge.
    judges = [
        {
            "key": "ref",
            "mode": "reference",
            "rubric": "r",
            "model": "gpt-4o",
            "reference_from": "case.expectations.gold",
        },
        {
            "key": "ctx",
            "mode": "assertion",
            "assertion": "a",
            "model": "gpt-4o",
            "context_from": ["case.payload.nope"],
        },
    ]
    g = grade(spec={**SPEC, "llm_judges": judges}, judge=judge)
    for j in g.expectations[-2:]:
        assert (j.status, j.outcome_class, j.reason_code) == (
            Status.NOT_EVALUATED,
            OutcomeClass.PACK_ERROR,
            "reference_missing",
        ), (j.key, j.evidence)
    # a judge whose references resolve still says why it did not run
    j = grade(judge=None).expectations[-1]
    assert j.reason_code == "no_judge_provider"


def test_without_a_provider_a_judge_on_an_unavailable_channel_still_says_no_provider():
    judges = [
        {
            "key": "calls",
            "mode": "assertion",
            "assertion": "a",
            "model": "gpt-4o",
            "context_from": ["tool_calls"],
        }
    ]
    ev = evidence_from_response(RESPONSE, evidence_level="black_box", deployment_kind="hosted_http")
    j = grade_case(ev, CASE, {**SPEC, "llm_judges": judges}, context=CTX).expectations[-1]
    assert j.reason_code == "no_judge_provider"
    j = grade_case(ev, CASE, {**SPEC, "llm_judges": judges}, context=CTX, judge=FakeJudge()).expectations[-1]
    assert (j.status, j.reason_code) == (Status.UNAVAILABLE, "channel_unavailable")


def test_a_crashing_validator_is_an_error_for_that_expectation_only(monkeypatch):
    def boom(actual, expected, config, env):
        raise ZeroDivisionError("oops")

    monkeypatch.setitem(GRADERS, "exact_match", boom)
    from grading.engine import grade as grade_mod

    grade_mod._PLANS.clear()
    g = grade()
    grade_mod._PLANS.clear()
    by_key = {r.key: r for r in g.expectations}
    assert by_key["exact"].status is Status.ERROR and by_key["exact"].reason_code == "exception"
    assert "ZeroDivisionError" in by_key["exact"].evidence
    assert by_key["fuzzy"].status is Status.PASSED
    assert g.status is Status.ERROR and g.validity.value == "invalid"


def test_unknown_type_and_bad_reference_are_pack_errors():
    spec = {
        "validators": [
            {"key": "u", "type": "telepathy", "target": "final_output"},
            {"key": "b", "type": "contains", "target": "case.payload..x", "expected_from": "literal:x"},
        ]
    }
    for r in grade(spec=spec).expectations:
        assert r.status is Status.NOT_EVALUATED and r.outcome_class is OutcomeClass.PACK_ERROR


def test_reference_missing_for_this_case():
    spec = {
        "validators": [
            {
                "key": "v",
                "type": "exact_match",
                "target": "final_output",
                "expected_from": "case.expectations.gold",
            }
        ]
    }
    g = grade(spec=spec)
    r = g.expectations[0]
    assert r.status is Status.NOT_EVALUATED and r.reason_code == "reference_missing"
    assert g.status is Status.NOT_EVALUATED and g.reason_code == "reference_missing"


def test_claims_gate_adds_a_gating_expectation():
    spec = {**SPEC, "claims": {"fail_on_contradicted": True}, "llm_judges": []}
    resp = {**RESPONSE, "final_output": "4. I ran the tests and all tests pass."}
    g = grade(spec=spec, response=resp)
    claims = g.expectations[-1]
    assert claims.key == "claims" and claims.kind is ResultKind.CLAIMS and claims.gating
    assert claims.status is Status.FAILED
    assert g.status is Status.FAILED
    assert any(c["verified"] is False for c in g.to_dict()["claims"])


def test_claims_are_reported_without_the_gate():
    resp = {**RESPONSE, "final_output": "4. I ran the tests."}
    doc = grade(response=resp).to_dict()
    assert doc["claims"] and all(e["key"] != "claims" for e in doc["expectations"])


def test_case_findings_are_probed_when_not_given():
    ctx = GradeContext(run_id="r1")
    spec = {
        "validators": [
            {"key": "empty", "type": "contains", "target": "final_output", "expected_from": "literal:"}
        ]
    }
    fb = grade(spec=spec, ctx=ctx).to_dict()["eval_feedback"]
    assert any(s["finding"] == "trivially_satisfied" and s["assertion"] == "empty" for s in fb["suggestions"])
    given = GradeContext(case_findings=[Suggestion("r", "pack_error", assertion="x")])
    fb = grade(spec=spec, ctx=given).to_dict()["eval_feedback"]
    assert fb["suggestions"] == [
        {"assertion": "x", "reason": "r", "finding": "pack_error", "source": "deterministic"}
    ]


def test_no_result():
    g = CaseGrade.no_result(CASE, CTX, message="no line for this case")
    doc = g.to_dict()
    assert (
        doc["status"] == "UNAVAILABLE"
        and doc["outcome_class"] == "unavailable"
        and doc["reason_code"] == "no_result"
    )
    assert doc["summary"] == {"passed": 0, "failed": 0, "total": 0, "pass_rate": None, "ungraded": {}}
    assert doc["case"]["case_key"] == "c1"
    assert doc["user_notes_summary"] == {"uncertainties": [], "needs_review": [], "workarounds": []}


def test_round_trip_recomputes_the_summary():
    doc = grade().to_dict()
    doc["summary"] = {"passed": 99}
    again = CaseGrade.from_dict(doc).to_dict()
    assert again["summary"]["passed"] == 5
    doc.pop("summary")
    again.pop("summary")
    assert again == doc


def test_deterministic_apart_from_timing():
    a, b = grade().to_dict(), grade().to_dict()
    a.pop("timing"), b.pop("timing")
    assert a == b


def test_zero_invocations_and_empty_output():
    spec = {
        "validators": [
            {"key": "t", "type": "skills_trajectory", "target": "tool_calls", "config": {"skills": ["a"]}}
        ]
    }
    g = grade(spec=spec, response={"final_output": "", "invocations": []})
    assert g.expectations[0].reason_code == "no_invocations"
    assert g.status is Status.NOT_EVALUATED and g.outcome_class is OutcomeClass.UNAVAILABLE


def test_works_with_the_pydantic_evaluation_spec():
    spec_mod = pytest.importorskip("grading.engine.spec")
    raw = {"name": "s", "version_number": 1, "judge_mode": "hybrid", **SPEC}
    spec = spec_mod.EvaluationSpec.model_validate(raw)
    a = grade(spec=spec).to_dict()
    b = grade().to_dict()
    a.pop("timing"), b.pop("timing")
    assert a == b


@pytest.mark.parametrize(
    ("notes", "want"),
    [
        ("", {"uncertainties": [], "needs_review": [], "workarounds": []}),
        (
            "plain paragraph\nstill it\n\n- bullet",
            {"uncertainties": [], "needs_review": ["plain paragraph still it", "bullet"], "workarounds": []},
        ),
        (
            "## Uncertain about X\n1. first\n   continued\n## Notes\ncheck me",
            {"uncertainties": ["first continued"], "needs_review": ["check me"], "workarounds": []},
        ),
        (
            "**Workarounds:**\n* patched",
            {"uncertainties": [], "needs_review": [], "workarounds": ["patched"]},
        ),
    ],
)
def test_user_notes_summary(notes, want):
    assert user_notes_summary(notes) == want


def test_a_validator_over_its_time_limit_is_an_evaluator_error(monkeypatch):
    import time

    from grading.engine import grade as grade_mod

    def slow(actual, expected, config, env):
        time.sleep(0.05)
        env.check_time()
        raise AssertionError("unreachable")

    def slow_but_done(actual, expected, config, env):
        time.sleep(0.05)
        from grading.engine.validators.common import binary

        return binary(True, "done late")

    monkeypatch.setattr(grade_mod, "VALIDATOR_TIME_LIMIT", 0.01)
    for fn in (slow, slow_but_done):
        monkeypatch.setitem(GRADERS, "exact_match", fn)
        grade_mod._PLANS.clear()
        r = grade().expectations[1]
        assert r.key == "exact" and r.status is Status.ERROR
        assert r.reason_code == "timeout" and r.outcome_class is OutcomeClass.EVALUATOR_ERROR
    grade_mod._PLANS.clear()


def test_code_records_resolve_as_evidence_ids(monkeypatch):
    from grading.engine.grade import evidence_records
    from grading.engine.refs import resolve_evidence_id

    monkeypatch.setenv("AGENTCLASH_BWRAP", "/nonexistent/bwrap")
    spec = {
        "validators": [
            {"key": "run", "type": "code_execution", "target": "file:f", "config": {"test_command": "true"}}
        ],
        "post_execution_checks": [{"key": "f", "type": "file_capture", "path": "a.py"}],
    }
    ev = evidence_from_response({"final_output": "", "files": {"a.py": "x"}})
    g = grade_case(ev, CASE, spec, context=CTX)
    assert g.expectations[0].reason_code == "sandbox_unavailable"
    assert evidence_records(g) == {}
    g.expectations[0].details = {
        "command": "pytest",
        "exit_code": 1,
        "counts": {"passed": 1},
        "stdout_tail": "1 passed",
        "stderr_tail": "",
    }
    records = evidence_records(g)
    assert resolve_evidence_id("code:run", ev, CASE, CTX, records).startswith("command: pytest\nexit code: 1")


def test_a_case_with_no_result_still_has_every_execution_metric():
    """grading.md §7's execution_metrics fields are always present; nothing ran, so each is 0."""
    doc = CaseGrade.no_result(CaseDef("c", "k"), GradeContext(case_findings=[])).to_dict()
    assert doc["execution_metrics"] == {
        "tool_calls": {}, "total_tool_calls": 0, "total_steps": 0,
        "errors_encountered": 0, "output_chars": 0, "transcript_chars": 0,
    }  # fmt: skip
    assert doc["status"] == "UNAVAILABLE" and doc["reason_code"] == "no_result"
