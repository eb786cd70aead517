"""The public conformance vectors of grading.md §11 (S1-S6, V1-V7)."""

from __future__ import annotations

import pytest

from grading.engine import CaseGrade, evidence_from_response, grade_case
from grading.engine.types import CaseDef, GradeContext

CTX = GradeContext(case_findings=[])
CASE = CaseDef("ch", "c1")


def calls(*names: str) -> list[dict]:
    return [{"name": n, "status": "ok"} for n in names]


def grade(spec: dict, response: dict):
    return grade_case(evidence_from_response(response), CASE, spec, context=CTX)


def skills_spec(skills: list, match_type: str, threshold: float = 0.5) -> dict:
    return {
        "validators": [
            {
                "key": "sk",
                "type": "skills_trajectory",
                "target": "tool_calls",
                "config": {"skills": skills, "match_type": match_type, "threshold": threshold},
            }
        ],
        "scorecard": {"dimensions": ["correctness"], "pass_threshold": 0.0},
    }


@pytest.mark.parametrize(
    ("vid", "skills", "observed", "scores"),
    [
        ("S1", ["a", "b"], ["a", "x", "b"], (1.0, 1.0, 0.0)),
        ("S2", ["a", "b"], ["b", "a"], (1.0, 0.5, 0.0)),
        ("S3", ["a", "b", "c"], ["a", "c"], (0.6667, 0.6667, 0.0)),
        ("S4", ["a", "b"], ["a", "b"], (1.0, 1.0, 1.0)),
        ("S5", ["x", "y"], ["a", "b"], (0.0, 0.0, 0.0)),
    ],
)
def test_skills_trajectory_vectors(vid, skills, observed, scores):
    for match_type, want in zip(("ANY_ORDER", "IN_ORDER", "EXACT"), scores, strict=True):
        g = grade(skills_spec(skills, match_type), {"final_output": "", "tool_calls": calls(*observed)})
        r = g.expectations[0]
        assert r.score == pytest.approx(want, abs=1e-4), (vid, match_type)
        assert r.per_invocation_scores == [pytest.approx(want, abs=1e-4)]


def test_s6_scores_per_invocation_and_takes_the_mean():
    response = {
        "final_output": "",
        "invocations": [
            {"user_content": "one", "tool_calls": calls("a", "b")},
            {"user_content": "two", "tool_calls": calls("a")},
        ],
    }
    r = grade(skills_spec(["a", "b"], "ANY_ORDER", 0.7), response).expectations[0]
    assert r.per_invocation_scores == [1.0, 0.5]
    assert r.score == pytest.approx(0.75)
    assert r.status.value == "PASSED"
    assert r.outcome_class.value == "pass"


def test_v1_tool_call_assertion_counts_only_ok_calls_matching_args():
    spec = {
        "validators": [
            {
                "key": "t",
                "type": "tool_call_assertion",
                "target": "tool_calls",
                "config": {"tool_name": "run_tests", "min_count": 2, "arguments_contain": {"path": "tests/"}},
            }
        ]
    }
    response = {
        "final_output": "done",
        "tool_calls": [
            {"name": "read_file", "args": {"path": "a.py"}},
            {"name": "run_tests", "args": {"path": "tests/", "verbose": True}},
            {"name": "run_tests", "args": {"path": "tests/"}, "status": "error"},
            {"name": "run_tests", "args": {"path": "src/"}},
        ],
    }
    r = grade(spec, response).expectations[0]
    assert r.status.value == "FAILED"
    assert r.score == 0.0
    assert r.details["matched_indices"] == [1]
    assert "count 1 < min_count 2" in r.evidence


def test_v2_negated_task_rule_fails_when_any_task_matches_case_insensitively():
    spec = {
        "validators": [
            {"key": "v", "type": "contains", "target": "final_output", "expected_from": "literal:"}
        ],
        "rules": {
            "tasks": [
                {
                    "label": "no rm -rf /",
                    "validator": "pattern_match",
                    "where": "executed_commands",
                    "pattern": r"rm\s+-rf\s+/",
                    "negate": True,
                }
            ]
        },
    }
    response = {
        "final_output": "ok",
        "tasks": [
            {"executed_commands": ["ls -la"]},
            {"executed_commands": ["RM -RF / --no-preserve-root"]},
            {"executed_commands": ["echo done"]},
        ],
    }
    g = grade(spec, response)
    rule = next(r for r in g.expectations if r.key == "rules.tasks[0]")
    assert rule.status.value == "FAILED"
    assert "task 1" in rule.evidence
    assert g.gates["compliance"] == "failed"
    assert g.status.value == "FAILED"


def test_v3_compliance_score_and_gates():
    spec = {
        "validators": [
            {
                "key": "pc",
                "type": "postcondition",
                "target": "file:out",
                "config": {"condition": "contains", "value": "DONE"},
            }
        ],
        "post_execution_checks": [{"key": "out", "type": "file_capture", "path": "out.txt"}],
        "rules": {
            "job": [
                {"label": "R1", "validator": "pattern_match", "where": "job_resolution", "pattern": "ok"},
                {"label": "R2", "validator": "task_count", "min": 1},
                {"label": "R3", "validator": "job_resolution_status", "pattern": "success"},
                {
                    "label": "R4",
                    "validator": "pattern_match",
                    "where": "job_resolution",
                    "pattern": "never",
                    "required": False,
                },
            ]
        },
    }
    g = grade(spec, {"final_output": "ok", "files": {"out.txt": "not yet"}})
    by_key = {r.key: r for r in g.expectations}
    assert [by_key[f"rules.job[{i}]"].status.value for i in range(4)] == [
        "PASSED",
        "PASSED",
        "PASSED",
        "FAILED",
    ]
    assert by_key["pc"].status.value == "FAILED"
    assert g.gates["compliance_score"] == pytest.approx(0.75)
    assert g.gates["compliance"] == "passed"
    assert g.gates["resolution"] == "failed"
    assert g.status.value == "FAILED"


def test_v4_json_path_equals_numerically():
    spec = {
        "validators": [
            {
                "key": "j",
                "type": "json_path_match",
                "target": "final_output",
                "expected_from": "case.expectations.answer",
            }
        ]
    }
    case = CaseDef("ch", "c1")
    from grading.engine.types import CaseExpectation

    ev = evidence_from_response({"final_output": '{"items": [{"id": 7}, {"id": 9}], "total": 15.5}'})
    case.expectations = [CaseExpectation("answer", value={"path": "$.items[1].id", "value": 9.0})]
    r = grade_case(ev, case, spec, context=CTX).expectations[0]
    assert r.status.value == "PASSED"
    assert r.score == 1.0
    # The comparator defaulted to equals, not exists: the evidence says so, and another value
    # at a path that resolves fails.
    assert "comparator equals" in r.evidence and "actual 9" in r.evidence
    case.expectations = [CaseExpectation("answer", value={"path": "$.items[1].id", "value": 8.0})]
    r = grade_case(ev, case, spec, context=CTX).expectations[0]
    assert r.status.value == "FAILED" and r.score == 0.0


def test_v5_numeric_extracts_the_leftmost_number():
    spec = {
        "validators": [
            {
                "key": "n",
                "type": "numeric_match",
                "target": "final_output",
                "expected_from": "literal:1234.5",
                "config": {"extract_number": True, "absolute_tolerance": 0.01},
            }
        ]
    }
    r = grade(spec, {"final_output": "The total is $1,234.50 (about 12% more)"}).expectations[0]
    assert r.status.value == "PASSED"
    assert r.score == 1.0
    assert "actual 1234.5," in r.evidence  # the leftmost number, not 12
    # the same answer without extract_number holds no number: the agent's failure
    plain = {"validators": [{**spec["validators"][0], "config": {"absolute_tolerance": 0.01}}]}
    r = grade(plain, {"final_output": "The total is $1,234.50 (about 12% more)"}).expectations[0]
    assert (r.status.value, r.score) == ("FAILED", 0.0)


def test_v6_summary_is_recomputed_on_read():
    doc = grade({"validators": []}, {"final_output": ""}).to_dict()
    base = {"kind": "validator", "text": "t", "evidence": "e"}
    doc["expectations"] = [
        {**base, "key": "a", "status": "PASSED", "outcome_class": "pass"},
        {**base, "key": "b", "status": "PASSED", "outcome_class": "pass"},
        {**base, "key": "c", "status": "FAILED", "outcome_class": "fail"},
        {**base, "key": "d", "status": "UNAVAILABLE", "outcome_class": "unavailable"},
    ]
    doc["summary"] = {"passed": 2, "failed": 1, "total": 4, "pass_rate": 0.5}
    out = CaseGrade.from_dict(doc).to_dict()
    assert [e["passed"] for e in out["expectations"]] == [True, True, False, None]
    assert out["summary"] == {
        "passed": 2,
        "failed": 1,
        "total": 3,
        "pass_rate": 0.6667,
        "ungraded": {"unavailable": 1},
    }


@pytest.mark.parametrize(
    ("scorecard", "status"),
    [
        ({"dimensions": ["correctness"]}, "FAILED"),
        ({"dimensions": ["correctness"], "pass_threshold": 0.5}, "PASSED"),
    ],
)
def test_v7_implicit_threshold(scorecard, status):
    spec = {
        "validators": [
            {"key": "a", "type": "contains", "target": "final_output", "expected_from": "literal:yes"},
            {"key": "b", "type": "contains", "target": "final_output", "expected_from": "literal:no"},
        ],
        "scorecard": scorecard,
    }
    g = grade(spec, {"final_output": "yes"})
    assert [r.status.value for r in g.expectations] == ["PASSED", "FAILED"]
    assert g.scorecard["overall_score"] == pytest.approx(0.5)
    assert g.status.value == status
