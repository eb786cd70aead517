"""Scorecard dimensions, strategies and the case verdict (grading.md §10.1-§10.2)."""

from __future__ import annotations

import pytest

from grading.engine import evidence_from_response, grade_case
from grading.engine.scorecard import normalise
from grading.engine.types import CaseDef, GradeContext

PASS = {"type": "contains", "target": "final_output", "expected_from": "literal:ok"}
FAIL = {"type": "contains", "target": "final_output", "expected_from": "literal:missing"}
MISSING = {"type": "contains", "target": "final_output", "expected_from": "case.expectations.nope"}
UNAVAIL = {"type": "tool_call_assertion", "target": "tool_calls", "config": {"tool_name": "x"}}


def grade(validators: dict, scorecard: dict, response: dict | None = None, *, black_box: bool = False, **kw):
    spec = {
        "validators": [{"key": k, **v} for k, v in validators.items()],
        "scorecard": scorecard,
        "metrics": [
            {"key": "tok", "type": "numeric", "collector": "run_total_tokens"},
            {"key": "vpr", "type": "numeric", "collector": "validator_pass_rate"},
        ],
        **kw,
    }
    level = "black_box" if black_box else "structured"
    ev = evidence_from_response({"final_output": "ok", **(response or {})}, evidence_level=level)
    return grade_case(ev, CaseDef("c", "k"), spec, context=GradeContext(case_findings=[]))


def dims(g):
    return {d["key"]: d for d in g.scorecard["dimensions"]}


@pytest.mark.parametrize(
    ("value", "target", "mx", "direction", "want"),
    [
        (100, 200, 1000, "lower", 1.0),
        (1000, 200, 1000, "lower", 0.0),
        (600, 200, 1000, "lower", 0.5),
        (0.9, 0.8, 0.4, "higher", 1.0),
        (0.6, 0.8, 0.4, "higher", 0.5),
    ],
)
def test_linear_normalisation(value, target, mx, direction, want):
    assert normalise(value, target, mx, direction) == pytest.approx(want)


def test_validators_dimension_leaves_out_not_evaluated_members():
    g = grade({"a": PASS, "b": MISSING}, {"dimensions": ["correctness"]})
    assert dims(g)["correctness"]["score"] == 1.0
    assert g.status.value == "PASSED" and g.validity.value == "degraded"


def test_validators_dimension_all_left_out_is_not_evaluated():
    g = grade({"b": MISSING}, {"dimensions": ["correctness"]})
    assert dims(g)["correctness"]["status"] == "NOT_EVALUATED"
    assert g.status.value == "NOT_EVALUATED" and g.outcome_class.value == "pack_error"


def test_unavailable_member_makes_the_dimension_and_case_unavailable():
    g = grade({"a": PASS, "t": UNAVAIL}, {"dimensions": ["correctness"]}, black_box=True)
    assert dims(g)["correctness"]["status"] == "UNAVAILABLE"
    assert g.status.value == "UNAVAILABLE" and g.outcome_class.value == "unavailable"


def test_listed_validators_only():
    g = grade(
        {"a": PASS, "b": FAIL}, {"dimensions": [{"key": "d", "source": "validators", "validators": ["a"]}]}
    )
    assert dims(g)["d"]["score"] == 1.0 and g.status.value == "PASSED"


def test_reliability_needs_no_metric():
    assert dims(grade({"a": PASS}, {"dimensions": ["reliability"]}))["reliability"]["score"] == 1.0
    g = grade({"a": PASS}, {"dimensions": ["reliability"]}, {"limit_hit": True})
    assert dims(g)["reliability"]["score"] == 0.0 and g.status.value == "FAILED"


def test_latency_cost_and_metric_dimensions():
    sc = {
        "dimensions": [
            "correctness",
            {
                "key": "lat",
                "source": "latency",
                "better_direction": "lower",
                "normalization": {"target": 1000, "max": 3000},
            },
            {
                "key": "cost",
                "source": "cost",
                "better_direction": "lower",
                "normalization": {"target": 0.01, "max": 0.03},
            },
            {
                "key": "tok",
                "source": "metric",
                "metric": "tok",
                "better_direction": "lower",
                "normalization": {"target": 100, "max": 300},
            },
            {
                "key": "vpr",
                "source": "metric",
                "metric": "vpr",
                "better_direction": "higher",
                "normalization": {"target": 1, "max": 0},
            },
        ],
        "pass_threshold": 0.5,
    }
    resp = {"metrics": {"latency_ms": 2000, "cost_usd": 0.02, "input_tokens": 150, "output_tokens": 50}}
    d = dims(grade({"a": PASS, "b": FAIL}, sc, resp))
    assert d["lat"]["score"] == pytest.approx(0.5)
    assert d["cost"]["score"] == pytest.approx(0.5)
    assert d["tok"]["score"] == pytest.approx(0.5)
    assert d["vpr"]["score"] == pytest.approx(0.5)


def test_missing_metric_value_is_unavailable_and_lowers_validity_only():
    sc = {
        "dimensions": [
            "correctness",
            {
                "key": "cost",
                "source": "cost",
                "better_direction": "lower",
                "normalization": {"target": 0, "max": 1},
            },
        ]
    }
    g = grade({"a": PASS}, sc)
    assert dims(g)["cost"]["status"] == "UNAVAILABLE"
    assert g.status.value == "PASSED" and g.validity.value == "degraded"


def test_behavioral_and_human_preference_are_unavailable():
    g = grade(
        {"a": PASS}, {"dimensions": ["correctness", "behavioral", {"key": "h", "source": "human_preference"}]}
    )
    assert dims(g)["behavioral"]["status"] == "UNAVAILABLE" and dims(g)["h"]["status"] == "UNAVAILABLE"


def test_weighted_gates_and_threshold():
    sc = {
        "dimensions": [
            {"key": "c", "source": "validators", "validators": ["a"], "gate": True, "pass_threshold": 1.0},
            {"key": "r", "source": "validators", "validators": ["b"], "weight": 3},
        ]
    }
    g = grade({"a": PASS, "b": FAIL}, sc)
    assert g.scorecard["overall_score"] == pytest.approx(0.25)
    assert g.status.value == "PASSED"  # a gate and no pass_threshold: no implicit threshold
    g = grade({"a": PASS, "b": FAIL}, {**sc, "pass_threshold": 0.3})
    assert g.status.value == "FAILED"


def test_zero_weight_sum_gives_a_null_overall():
    g = grade({"a": PASS}, {"dimensions": [{"key": "c", "source": "validators", "weight": 0}]})
    assert g.scorecard["overall_score"] is None
    assert g.status.value == "NOT_EVALUATED"


def test_binary_strategy():
    sc = {
        "strategy": "binary",
        "dimensions": [
            {"key": "c", "source": "validators", "pass_threshold": 0.5},
            {"key": "r", "source": "reliability", "pass_threshold": 1},
        ],
    }
    g = grade({"a": PASS, "b": FAIL}, sc)
    assert g.scorecard["overall_score"] == 1.0 and g.status.value == "PASSED"
    g = grade({"a": FAIL}, sc)
    assert g.scorecard["overall_score"] == 0.0 and g.status.value == "FAILED"


def test_hybrid_strategy():
    sc = {
        "strategy": "hybrid",
        "dimensions": [
            {"key": "gate", "source": "validators", "validators": ["a"], "gate": True, "pass_threshold": 1.0},
            {"key": "q", "source": "validators", "validators": ["b"]},
        ],
        "pass_threshold": 0.5,
    }
    g = grade({"a": PASS, "b": FAIL}, sc)
    assert g.scorecard["overall_score"] == 0.0 and g.status.value == "FAILED"
    g = grade({"a": FAIL, "b": PASS}, sc)
    assert g.scorecard["overall_score"] == 0.0 and g.status.value == "FAILED"
    g = grade({"a": PASS, "b": PASS}, sc)
    assert g.scorecard["overall_score"] == 1.0 and g.status.value == "PASSED"
    only_gates = {**sc, "dimensions": sc["dimensions"][:1]}
    assert grade({"a": PASS}, only_gates).scorecard["overall_score"] == 1.0


def test_a_hybrid_case_whose_other_dimensions_are_ungraded_passes_on_its_gate_and_says_so():
    """The scorecard's passed agrees with the case status: a gate passed and the non-gate
    dimensions all NOT_EVALUATED (an llm_judge without a provider) is a PASSED case with no
    overall score; its scorecard said passed: null."""
    sc = {
        "strategy": "hybrid",
        "dimensions": [
            {
                "key": "format",
                "source": "validators",
                "validators": ["a"],
                "gate": True,
                "pass_threshold": 1.0,
            },
            {"key": "quality", "source": "llm_judge", "judge_key": "j"},
        ],
        "pass_threshold": 0.7,
    }
    judges = [{"key": "j", "mode": "assertion", "assertion": "faithful", "model": "gpt-4o"}]
    g = grade({"a": PASS}, sc, llm_judges=judges)
    assert dims(g)["quality"]["status"] == "NOT_EVALUATED"
    assert (g.status.value, g.scorecard["passed"], g.scorecard["overall_score"]) == ("PASSED", True, None)
    assert g.validity.value == "degraded"
    failed = grade({"a": FAIL}, sc, llm_judges=judges)
    assert (failed.status.value, failed.scorecard["passed"]) == ("FAILED", False)


def test_error_gating_input_makes_the_case_error():
    sc = {"dimensions": ["correctness"]}
    g = grade(
        {"f": {"type": "fuzzy_match", "target": "final_output", "expected_from": "literal:" + "a" * 100_001}},
        sc,
    )
    assert (
        g.status.value == "ERROR"
        and g.outcome_class.value == "evaluator_error"
        and g.validity.value == "invalid"
    )
    assert g.reason_code == "input_too_large"


def test_llm_judge_dimension_without_provider_is_not_evaluated():
    spec_judges = [{"key": "j", "mode": "assertion", "assertion": "polite", "model": "gpt-4o"}]
    g = grade(
        {"a": PASS},
        {"dimensions": ["correctness", {"key": "jd", "source": "llm_judge", "judge_key": "j"}]},
        llm_judges=spec_judges,
    )
    assert dims(g)["jd"]["status"] == "NOT_EVALUATED"
    assert g.status.value == "PASSED" and g.validity.value == "degraded"


def test_compliance_dimension():
    rules = {
        "job": [{"label": "r", "validator": "pattern_match", "where": "job_resolution", "pattern": "ok"}]
    }
    g = grade(
        {"a": PASS}, {"dimensions": ["correctness", {"key": "comp", "source": "compliance"}]}, rules=rules
    )
    assert dims(g)["comp"]["score"] == 1.0


def test_unknown_collector_is_a_pack_error_and_missing_value_unavailable():
    sc = {
        "dimensions": [
            "correctness",
            {
                "key": "odd",
                "source": "metric",
                "metric": "odd",
                "better_direction": "higher",
                "normalization": {"target": 1, "max": 0},
            },
            {
                "key": "ttft",
                "source": "metric",
                "metric": "ttft",
                "better_direction": "lower",
                "normalization": {"target": 1, "max": 2},
            },
        ]
    }
    metrics = [
        {"key": "odd", "type": "numeric", "collector": "mystery"},
        {"key": "ttft", "type": "numeric", "collector": "run_ttft_ms"},
    ]
    spec = {"validators": [{"key": "a", **PASS}], "scorecard": sc, "metrics": metrics}
    g = grade_case(
        evidence_from_response({"final_output": "ok"}),
        CaseDef("c", "k"),
        spec,
        context=GradeContext(case_findings=[]),
    )
    assert dims(g)["odd"]["status"] == "NOT_EVALUATED"
    assert dims(g)["ttft"]["status"] == "UNAVAILABLE"
    assert g.status.value == "PASSED"


def test_an_overall_score_at_the_threshold_up_to_float_rounding_passes():
    """§2 / §10.2: thresholds are inclusive. Weights 0.3 and 0.1 over scores 1 and 0 give
    exactly 0.75, which floats compute as 0.7499999999999999: the document shows 0.75, so
    a pass_threshold of 0.75 must pass (it failed)."""
    sc = {
        "dimensions": [
            {"key": "a", "source": "validators", "validators": ["a"], "weight": 0.3},
            {"key": "b", "source": "validators", "validators": ["b"], "weight": 0.1},
        ],
        "pass_threshold": 0.75,
    }
    g = grade({"a": PASS, "b": FAIL}, sc)
    assert round(g.scorecard["overall_score"], 4) == 0.75
    assert (g.status.value, g.scorecard["passed"]) == ("PASSED", True)
    # just below stays below: 0.3 and 0.1001 give 0.7498...
    below = {**sc, "dimensions": [sc["dimensions"][0], {**sc["dimensions"][1], "weight": 0.1001}]}
    assert grade({"a": PASS, "b": FAIL}, below).status.value == "FAILED"


def test_a_gate_dimension_at_its_threshold_up_to_float_rounding_passes():
    """A cost of $0.02 against target 0 and max 0.10 normalises to exactly 0.8 (computed
    0.7999999999999999); the gate's pass_threshold 0.8 is met, under every strategy."""
    cost = {
        "key": "cost",
        "source": "cost",
        "better_direction": "lower",
        "normalization": {"target": 0.0, "max": 0.1},
        "gate": True,
        "pass_threshold": 0.8,
    }
    resp = {"metrics": {"cost_usd": 0.02}}
    for strategy in ("weighted", "hybrid", "binary"):
        dims_ = [cost, {"key": "c", "source": "validators", "pass_threshold": 1.0}]
        g = grade({"a": PASS}, {"strategy": strategy, "dimensions": dims_}, resp)
        assert round(dims(g)["cost"]["score"], 4) == 0.8
        assert dims(g)["cost"]["status"] == "PASSED", strategy
        assert g.status.value == "PASSED", strategy
    over = grade({"a": PASS}, {"dimensions": [cost]}, {"metrics": {"cost_usd": 0.0201}})
    assert dims(over)["cost"]["status"] == "FAILED" and over.status.value == "FAILED"
