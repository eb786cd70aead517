"""Hypothesis properties of grade_case: scores in [0,1] or null, a consistent summary,
determinism (timing aside) and no exception escaping on arbitrary evidence."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grading.engine import ProtocolError, evidence_from_response, grade_case
from grading.engine.grade import summarize
from grading.engine.types import GRADED_STATUSES, CaseDef, CaseExpectation, GradeContext

CTX = GradeContext(case_findings=[])
CASE = CaseDef(
    "ch",
    "c",
    payload={"q": "x"},
    expectations=[CaseExpectation("gold", value="42"), CaseExpectation("path", value="$.a")],
)
T = "final_output"
SPEC = {
    "validators": [
        {"key": "exact", "type": "exact_match", "target": T, "expected_from": "case.expectations.gold"},
        {
            "key": "contains",
            "type": "contains",
            "target": T,
            "expected_from": "literal:4",
            "config": {"case_insensitive": True},
        },
        {
            "key": "regex",
            "type": "regex_match",
            "target": T,
            "expected_from": r"literal:^\d+$",
            "config": {"flags": "m"},
        },
        {"key": "bool", "type": "boolean_assert", "target": T, "expected_from": "literal:true"},
        {"key": "schema", "type": "json_schema", "target": T, "expected_from": 'literal:{"type": "object"}'},
        {"key": "jp", "type": "json_path_match", "target": T, "expected_from": "case.expectations.path"},
        {"key": "fuzzy", "type": "fuzzy_match", "target": T, "expected_from": "case.expectations.gold"},
        {"key": "f1", "type": "token_f1", "target": T, "expected_from": "literal:forty two"},
        {
            "key": "bleu",
            "type": "bleu_score",
            "target": T,
            "expected_from": 'literal:["forty two", "42"]',
            "config": {"smoothing": "method1"},
        },
        {
            "key": "rouge",
            "type": "rouge_score",
            "target": T,
            "expected_from": "literal:forty two",
            "config": {"variant": "rouge-2"},
        },
        {"key": "chrf", "type": "chrf_score", "target": T, "expected_from": "literal:forty two"},
        {
            "key": "num",
            "type": "numeric_match",
            "target": T,
            "expected_from": "literal:42",
            "config": {"extract_number": True, "relative_tolerance": 0.1},
        },
        {
            "key": "norm",
            "type": "normalized_match",
            "target": T,
            "expected_from": "literal:42",
            "config": {"pipeline": ["trim", "strip_punctuation", "sort_words"]},
        },
        {
            "key": "math",
            "type": "math_equivalence",
            "target": T,
            "expected_from": "literal:x^2",
            "config": {"extract_answer": True},
        },
        {"key": "exists", "type": "file_exists", "target": "file:out"},
        {
            "key": "fcm",
            "type": "file_content_match",
            "target": "file:out",
            "expected_from": "literal:{}",
            "config": {"match_mode": "json_equal"},
        },
        {
            "key": "post",
            "type": "postcondition",
            "target": "file:out",
            "config": {"condition": "json_path_match", "json_path": "$.a", "value": 1},
        },
        {
            "key": "dir",
            "type": "directory_structure",
            "target": "file:root",
            "config": {"required_files": ["out.json"]},
        },
        {
            "key": "tca",
            "type": "tool_call_assertion",
            "target": "tool_calls",
            "config": {"tool_name": "a", "arguments_contain": {"x": [1]}, "ordered_tools": ["a", "b"]},
        },
        {
            "key": "traj",
            "type": "tool_trajectory",
            "target": "tool_calls",
            "config": {
                "expected": [{"name": "a"}, {"name": "b", "args": {"x": 1}}],
                "match_type": "ANY_ORDER",
            },
        },
        {
            "key": "skills",
            "type": "skills_trajectory",
            "target": "tool_calls",
            "config": {
                "skills": ["a", {"skill": "b"}, {"tool": "c", "args": {"x": 1}}],
                "match_type": "IN_ORDER",
            },
        },
    ],
    "post_execution_checks": [
        {"key": "out", "type": "file_capture", "path": "out.json"},
        {"key": "root", "type": "directory_listing", "path": ""},
    ],
    "rules": {
        "allowed_tools": ["a", "b*"],
        "allowed_hosts": ["*.example.com"],
        "job": [
            {"label": "status", "validator": "job_resolution_status", "pattern": "success"},
            {"label": "count", "validator": "task_count", "min": 1, "max": 3},
            {
                "label": "plan",
                "validator": "pattern_match",
                "where": "job_plan",
                "pattern": "step",
                "required": False,
            },
        ],
        "tasks": [
            {
                "label": "no rm",
                "validator": "pattern_match",
                "where": "executed_commands",
                "pattern": "rm -rf",
                "negate": True,
            }
        ],
    },
    "llm_judges": [{"key": "judge", "mode": "rubric", "rubric": "r", "model": "gpt-4o"}],
    "scorecard": {
        "dimensions": [
            "correctness",
            "reliability",
            {
                "key": "lat",
                "source": "latency",
                "better_direction": "lower",
                "normalization": {"target": 10, "max": 100},
            },
            {"key": "comp", "source": "compliance", "gate": True, "pass_threshold": 0.5},
        ],
        "pass_threshold": 0.3,
    },
    "claims": {"fail_on_contradicted": True},
}

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**6), 10**6)
    | st.floats()  # NaN and infinities too: Python's json reads them from replies
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=10,
)
texts = st.one_of(
    st.text(max_size=60),
    st.sampled_from(["42", "true", '{"a": 1}', "#### 2x", "x^2", "", "4 2", "forty two"]),
)
calls = st.lists(
    st.fixed_dictionaries(
        {
            "name": st.sampled_from(["a", "b", "c", "Bash", "fetch", "Skill", "Read"]),
            "args": st.one_of(
                json_values,
                st.dictionaries(
                    st.sampled_from(["x", "command", "url", "skill", "path"]), json_values, max_size=3
                ),
            ),
        },
        optional={
            "status": st.sampled_from(["ok", "error", "weird"]),
            "attributes": st.fixed_dictionaries({}, optional={"gen_ai.skill.name": st.text(max_size=5)}),
        },
    ),
    max_size=5,
)
responses = st.fixed_dictionaries(
    {"final_output": st.one_of(texts, json_values)},
    optional={
        "tool_calls": calls,
        "files": st.dictionaries(
            st.sampled_from(["out.json", "./out.json", "/workspace/a/b.txt", "c\\d.py"]), texts, max_size=3
        ),
        "tasks": st.lists(
            st.fixed_dictionaries(
                {},
                optional={"summary": texts, "executed_commands": st.lists(texts, max_size=3), "plan": texts},
            ),
            max_size=3,
        ),
        "resolution": st.fixed_dictionaries(
            {}, optional={"status": st.sampled_from(["success", "partial", "weird"]), "summary": texts}
        ),
        "limit_hit": st.booleans(),
        "execution_error": st.one_of(st.none(), st.text(max_size=10)),
        "user_notes": texts,
        "messages": st.lists(
            st.fixed_dictionaries(
                {"role": st.sampled_from(["user", "assistant", "tool"]), "content": texts},
                optional={"origin": st.sampled_from(["agent", "gateway"])},
            ),
            max_size=3,
        ),
    },
)
levels = st.sampled_from(["structured", "black_box"])
kinds = st.sampled_from(["hosted_http", "openai_chat", "trace_import"])
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _grade(response, level, kind):
    try:
        ev = evidence_from_response(response, evidence_level=level, deployment_kind=kind)
    except ProtocolError:
        return None
    return grade_case(ev, CASE, SPEC, context=CTX)


@SETTINGS
@given(responses, levels, kinds)
def test_no_exception_escapes_and_scores_are_in_range(response, level, kind):
    g = _grade(response, level, kind)
    if g is None:
        return
    doc = g.to_dict()
    for e in doc["expectations"]:
        assert e["score"] is None or 0.0 <= e["score"] <= 1.0, e
        assert (e["score"] is None) == (e["status"] not in ("PASSED", "FAILED")), e
        assert e["evidence"] and len(e["evidence"]) <= 1000
        for s in e["per_invocation_scores"] or []:
            assert s is None or 0.0 <= s <= 1.0
    for d in doc["scorecard"]["dimensions"]:
        assert d["score"] is None or 0.0 <= d["score"] <= 1.0
    overall = doc["scorecard"]["overall_score"]
    assert overall is None or 0.0 <= overall <= 1.0
    assert doc["status"] in ("PASSED", "FAILED", "NOT_EVALUATED", "UNAVAILABLE", "ERROR")
    # a crash caught by a net is ERROR too, and must not pass for "no exception escapes"
    assert g.message is None, g.message
    assert not [e for e in doc["expectations"] if e["reason_code"] == "exception"], doc["expectations"]


@SETTINGS
@given(responses, levels)
def test_summary_is_consistent_with_the_expectations(response, level):
    g = _grade(response, level, "hosted_http")
    if g is None:
        return
    doc = g.to_dict()
    s = doc["summary"]
    passed = sum(1 for e in doc["expectations"] if e["passed"] is True)
    failed = sum(1 for e in doc["expectations"] if e["passed"] is False)
    assert (s["passed"], s["failed"], s["total"]) == (passed, failed, passed + failed)
    assert s["pass_rate"] == (round(passed / (passed + failed), 4) if passed + failed else None)
    assert sum(s["ungraded"].values()) == len(doc["expectations"]) - passed - failed
    assert s == summarize(g.expectations)
    assert all((e.status in GRADED_STATUSES) == (e.passed is not None) for e in g.expectations)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(responses, levels)
def test_grade_case_is_deterministic(response, level):
    a = _grade(response, level, "hosted_http")
    if a is None:
        return
    b = _grade(response, level, "hosted_http")
    da, db = a.to_dict(), b.to_dict()
    da.pop("timing"), db.pop("timing")
    assert da == db


@settings(max_examples=40, deadline=None)
@given(st.one_of(json_values, st.dictionaries(st.text(max_size=10), json_values, max_size=5)))
def test_evidence_from_response_raises_only_protocol_errors(raw):
    with contextlib.suppress(ProtocolError):
        evidence_from_response(raw)  # type: ignore[arg-type]


def _nested(depth: int) -> object:
    value: object = []
    for _ in range(depth - 1):
        value = [value]
    return value


@pytest.mark.parametrize("depth", [300, 900, 5000])
def test_deeply_nested_answers_are_graded_not_raised(depth):
    """JSON text nested deeper than the interpreter can parse (json raises RecursionError,
    not ValueError) is JSON all the same: a check that must parse it is input over limits
    (ERROR / evaluator_error ``input_too_large``, grading.md §2), never a crash and never
    "not JSON"; a structure as deep as a reply can parse is graded like any other."""
    brackets = "[" * depth + "]" * depth
    response = {
        "final_output": brackets,
        "tool_calls": [{"name": "a", "args": brackets}, {"name": "b", "args": {"x": brackets}}],
        "files": {"out.json": brackets},
        "messages": [{"role": "assistant", "content": brackets}],
    }
    # The case's status alone cannot tell: ERROR is a status any case may end in, so a crash
    # inside one check (ERROR / evaluator_error) or of the whole case passed this test.
    for level, status in (("structured", "FAILED"), ("black_box", "UNAVAILABLE")):
        grade = _grade(response, level, "hosted_http")
        assert grade is not None and grade.message is None, grade.message
        if depth < 1000:
            assert _crashed(grade) == []
            assert grade.status.value == status
        else:  # the checks that parse the text as JSON cannot
            over = [e for e in grade.expectations if e.status.value == "ERROR"]
            assert {"schema", "jp"} <= {e.key for e in over}, _crashed(grade)
            for e in over:
                assert e.reason_code == "input_too_large", e.evidence
                assert "input over limits" in e.evidence and "nested" in e.evidence, e.evidence
    if depth < 900:
        grade = _grade({"final_output": _nested(depth)}, "structured", "hosted_http")
        assert grade is not None and grade.message is None, grade.message
        assert grade.to_dict()["expectations"] and _crashed(grade) == []
        assert grade.status.value == "FAILED"


def _crashed(grade) -> list[tuple[str, str]]:
    return [(e.key, e.evidence) for e in grade.expectations if e.status.value == "ERROR"]


def test_jsontext_loads_reports_too_deep_as_value_error():
    from grading.engine import jsontext

    with pytest.raises(jsontext.JSONTooDeep):
        jsontext.loads("[" * 100_000 + "]" * 100_000)
    assert issubclass(jsontext.JSONTooDeep, ValueError)
    assert jsontext.loads('{"a": [1]}') == {"a": [1]}


def test_nan_and_infinities_in_a_reply_read_as_null():
    """Python's json reads NaN, Infinity and 1e400 from a reply; canonical JSON refused them
    (allow_nan=False) and the ValueError escaped evidence building (an upload answered 500)."""
    from grading.engine.types import canonical_json

    assert canonical_json([float("nan"), float("inf"), -float("inf"), 1.5, 2.0]) == "[null,null,null,1.5,2]"
    ev = evidence_from_response({"final_output": {"x": float("nan"), "y": [1e400]}})
    assert ev.final_output == '{"x":null,"y":[null]}'
