"""tool_call_assertion (grading.md §3.6)."""

from __future__ import annotations

import pytest
from validator_helpers import run, status

from grading.engine.validators.tool_calls import bipartite_match, contains_value

CALLS = [
    {"name": "read_file", "args": {"path": "a.py"}},
    {"name": "run_tests", "args": {"path": "tests/", "opts": ["-x", "-q"]}},
    {"name": "run_tests", "args": {"path": "tests/"}, "status": "error"},
    {"name": "write_file", "args": {"path": "b.py", "meta": {"mode": 420, "tags": ["a", "a", "b"]}}},
]


def tca(config: dict, calls=CALLS, **kw):
    return run(
        "tool_call_assertion", "", None, config, response={"final_output": "", "tool_calls": calls, **kw}
    )


def test_contains_value_semantics():
    assert contains_value({"a": {"b": 1, "c": 2}}, {"a": {"b": 1.0}})
    assert not contains_value({"a": 1}, {"a": True})
    assert contains_value(["x", "y", "x"], ["x", "x"])
    assert not contains_value(["x", "y"], ["x", "x"])  # each element needs a distinct partner
    assert contains_value([{"k": 1, "z": 0}, {"k": 2}], [{"k": 2}, {"k": 1}])
    # first-fit would take {"k": 1, "j": 1} for {"k": 1} and miss {"j": 1}
    assert contains_value([{"k": 1, "j": 1}, {"k": 1}], [{"j": 1}, {"k": 1}])


def test_bipartite_matching_finds_augmenting_paths():
    edges = {(0, 0), (0, 1), (1, 0)}
    assert bipartite_match(2, 2, lambda i, j: (i, j) in edges) == [1, 0]


@pytest.mark.parametrize(
    ("config", "want"),
    [
        ({"tool_name": "run_tests"}, "PASSED"),
        ({"tool_name": "deploy"}, "FAILED"),
        ({"tool_name": "deploy", "must_call": False}, "PASSED"),
        ({"tool_name": "run_tests", "must_call": False}, "FAILED"),
        ({"tool_name": "run_tests", "count": 1}, "PASSED"),
        ({"tool_name": "run_tests", "count": 2}, "FAILED"),
        ({"tool_name": "run_tests", "count": 2, "include_failed": True}, "PASSED"),
        ({"tool_name": "run_tests", "max_count": 0}, "FAILED"),
        ({"arguments_contain": {"opts": ["-q"]}}, "PASSED"),
        ({"arguments_contain": {"meta": {"tags": ["a", "a"]}}}, "PASSED"),
        ({"arguments_contain": {"meta": {"tags": ["b", "b"]}}}, "FAILED"),
        ({"ordered_tools": ["read_file", "write_file"]}, "PASSED"),
        ({"ordered_tools": ["write_file", "read_file"]}, "FAILED"),
        ({"ordered_tools": ["read_file", "run_tests", "write_file"], "order_mode": "exact"}, "PASSED"),
        ({"ordered_tools": ["read_file", "write_file"], "order_mode": "exact"}, "FAILED"),
    ],
)
def test_assertions(config, want):
    assert status(tca(config)) == want


def test_a_timed_out_call_is_not_an_observed_call():
    calls = [{"name": "deploy", "args": {}, "status": "timeout"}, {"name": "ls", "status": "cancelled"}]
    assert status(tca({"tool_name": "deploy"}, calls)) == "FAILED"
    assert status(tca({"tool_name": "deploy", "include_failed": True}, calls)) == "PASSED"
    assert status(tca({"ordered_tools": ["deploy", "ls"], "order_mode": "exact"}, calls)) == "FAILED"


def test_details_and_evidence():
    r = tca({"tool_name": "run_tests", "min_count": 2, "arguments_contain": {"path": "tests/"}})
    assert status(r) == "FAILED"
    assert r.details["matched_indices"] == [1]
    assert r.details["observed_names"] == ["read_file", "run_tests", "write_file"]
    assert r.details["reasons"] == ["count 1 < min_count 2"]
    assert "matched indexes [1]" in r.evidence


def test_no_assertion_is_a_pack_error():
    r = tca({})
    assert status(r) == "NOT_EVALUATED" and r.klass().value == "pack_error"


def test_without_tool_calls_channel_it_is_unavailable():
    r = run("tool_call_assertion", "", None, {"tool_name": "x"}, response={"final_output": ""})
    assert status(r) == "FAILED"
    from grading.engine.evidence import evidence_from_response
    from grading.engine.refs import Resolved
    from grading.engine.types import CaseDef, GradeContext
    from grading.engine.validators.common import Env
    from grading.engine.validators.tool_calls import tool_call_assertion

    ev = evidence_from_response({"final_output": "", "tool_calls": CALLS}, evidence_level="black_box")
    r = tool_call_assertion(
        Resolved(value=""), None, {"tool_name": "x"}, Env(ev, CaseDef("c", "k"), GradeContext())
    )
    assert status(r) == "UNAVAILABLE" and r.reason_code == "channel_unavailable"


def test_zero_calls():
    assert status(tca({"tool_name": "x", "must_call": False}, calls=[])) == "PASSED"
    assert status(tca({"tool_name": "x"}, calls=[])) == "FAILED"
