"""The compiled plan: what it decides once per spec gives the same grades as doing it per case."""

from __future__ import annotations

import copy
import random

from grading.engine import evidence_from_response, grade_case
from grading.engine import grade as grade_mod
from grading.engine.types import CaseDef, CaseExpectation, GradeContext

SPEC = {
    "validators": [
        {
            "key": "exact",
            "type": "exact_match",
            "target": "final_output",
            "expected_from": "case.expectations.a",
        },
        {
            "key": "fuzzy",
            "type": "fuzzy_match",
            "target": "final_output",
            "expected_from": "literal:forty two",
        },
        {
            "key": "num",
            "type": "numeric_match",
            "target": "case.payload.n",
            "expected_from": "case.expectations.n",
        },
        {
            "key": "tests",
            "type": "tool_call_assertion",
            "target": "tool_calls",
            "config": {"tool_name": "run_tests", "min_count": 1},
        },
        {
            "key": "gt",
            "type": "contains",
            "target": "final_output",
            "expected_from": "literal:42",
            "ground_truth": True,
        },
    ],
    "rules": {
        "job": [
            {
                "label": "no rm",
                "validator": "pattern_match",
                "where": "executed_commands",
                "pattern": "rm",
                "negate": True,
            }
        ],
        "tasks": [
            {
                "label": "plans",
                "validator": "pattern_match",
                "where": "task_summary",
                "pattern": "done",
                "required": False,
            }
        ],
    },
    "scorecard": {
        "strategy": "hybrid",
        "pass_threshold": 0.6,
        "dimensions": [
            {
                "key": "correct",
                "source": "validators",
                "validators": ["exact", "num", "gt"],
                "gate": True,
                "pass_threshold": 0.5,
            },
            {"key": "style", "source": "validators", "validators": ["fuzzy", "tests"], "weight": 2},
            {"key": "rules", "source": "compliance"},
        ],
    },
}


def cases(n: int) -> list:
    rng = random.Random(3)
    out = []
    for i in range(n):
        answer = rng.choice(["42", "forty two", "forty-two!", ""])
        calls = [{"name": rng.choice(["run_tests", "Bash"]), "args": {"command": rng.choice(["ls", "rm x"])}}]
        response = {"final_output": answer, "tool_calls": calls if rng.random() < 0.8 else []}
        if rng.random() < 0.15:
            response = {"final_output": answer}  # tool calls channel absent: UNAVAILABLE checks
        evidence = evidence_from_response(
            response, evidence_level=rng.choice(["structured", "structured", "black_box"])
        )
        payload = {"n": rng.choice(["42", "41.5", "n/a", 42])} if rng.random() < 0.9 else {}
        case = CaseDef(
            "ch",
            f"c{i}",
            payload=payload,
            expectations=[CaseExpectation("a", value="42"), CaseExpectation("n", value=42)],
        )
        out.append((case, evidence))
    return out


def test_memoised_verdicts_equal_the_verdicts_computed_per_case():
    with_memo, without = copy.deepcopy(SPEC), copy.deepcopy(SPEC)
    assert grade_mod.plan_for(with_memo).verdicts is not None
    grade_mod.plan_for(without).verdicts = None
    ctx = GradeContext(case_findings=[])
    seen = set()
    for case, evidence in cases(300):
        a = grade_case(evidence, case, with_memo, context=ctx).to_dict()
        b = grade_case(evidence, case, without, context=ctx).to_dict()
        a.pop("timing"), b.pop("timing")
        assert a == b
        seen.add((a["status"], a["validity"], a["scorecard"]["overall_score"]))
    assert len(seen) >= 5  # the cases reach several distinct verdicts
    assert 0 < len(grade_mod.plan_for(with_memo).verdicts) < 300


def test_plans_with_evidence_dimensions_or_guards_are_not_memoised():
    latency = copy.deepcopy(SPEC)
    latency["scorecard"]["dimensions"].append(
        {"key": "fast", "source": "latency", "normalization": {"target": 100, "max": 1000}}
    )
    guarded = copy.deepcopy(SPEC)
    guarded["rules"]["allowed_tools"] = ["run_tests"]
    assert grade_mod.plan_for(latency).verdicts is None
    assert grade_mod.plan_for(guarded).verdicts is None


def test_deferred_evidence_never_raises_when_read():
    from grading.engine.types import ExpectationResult, OutcomeClass, ResultKind, Status

    def broken() -> str:
        raise ValueError("no text")

    r = ExpectationResult("k", ResultKind.VALIDATOR, "t", Status.PASSED, OutcomeClass.PASS, broken)
    assert r.evidence == "PASSED: (evidence text failed to render: ValueError: no text)"
    long = ExpectationResult(
        "k", ResultKind.VALIDATOR, "t", Status.FAILED, OutcomeClass.FAIL, lambda: "x" * 5000
    )
    assert len(long.evidence) == 1000 and long.evidence.endswith("…")
    empty = ExpectationResult("k", ResultKind.VALIDATOR, "t", Status.FAILED, OutcomeClass.FAIL, lambda: "")
    assert empty.evidence == "FAILED: (no detail)"


def test_deferred_calls_render_like_functions_and_never_raise():
    # The hot graders defer their text as (function, *arguments): no closure cells per case.
    from grading.engine.types import ExpectationResult, OutcomeClass, ResultKind, Status
    from grading.engine.validators.common import VResult

    def text(a: str, n: int) -> str:
        return f"{a} x{n}"

    r = ExpectationResult("k", ResultKind.VALIDATOR, "t", Status.PASSED, OutcomeClass.PASS, (text, "ok", 3))
    assert r.evidence == "ok x3"
    assert VResult(Status.FAILED, 0.0, (text, "no", 1)).evidence == "no x1"
    broken = ExpectationResult("k", ResultKind.VALIDATOR, "t", Status.FAILED, OutcomeClass.FAIL, (text, "x"))
    assert broken.evidence.startswith("FAILED: (evidence text failed to render: TypeError:")
    long = ExpectationResult(
        "k", ResultKind.VALIDATOR, "t", Status.FAILED, OutcomeClass.FAIL, (str.__mul__, "x", 5000)
    )
    assert len(long.evidence) == 1000 and long.evidence.endswith("…")
    empty = ExpectationResult("k", ResultKind.VALIDATOR, "t", Status.FAILED, OutcomeClass.FAIL, (str, ""))
    assert empty.evidence == "FAILED: (no detail)"
