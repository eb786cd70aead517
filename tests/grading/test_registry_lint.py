"""Lint warnings of the evaluation spec (pack-format §10) and the helpers the pack parser reuses."""

from __future__ import annotations

import copy

import pytest

from grading.engine import registry
from grading.engine.modelcheck import format_path
from grading.engine.refsyntax import RefKind
from grading.engine.registry import (
    check_json_path_expectation,
    evidence_references,
    lint_evaluation_spec,
    placeholders,
    re2_error,
    re2_matches_empty,
    static_patterns,
    validate_evaluation_spec,
)


@pytest.fixture(autouse=True)
def _surface_internal_errors(monkeypatch):
    monkeypatch.setattr(registry, "RAISE_INTERNAL_ERRORS", True)


EXACT = {"key": "v", "type": "exact_match", "target": "final_output", "expected_from": "literal:x"}
BASE = {
    "name": "demo",
    "version_number": 1,
    "judge_mode": "deterministic",
    "validators": [EXACT],
    "scorecard": {"pass_threshold": 1, "dimensions": ["correctness"]},
}


def spec(**changes):
    data = copy.deepcopy(BASE)
    data.update(copy.deepcopy(changes))
    return data


def warnings(data):
    _, issues = validate_evaluation_spec(data)
    return {(format_path(i.path), i.message, i.rule) for i in issues if i.severity == "warning"}


def test_a_clean_spec_has_no_warnings():
    assert warnings(BASE) == set()


# --- L3 regex_matches_empty -----------------------------------------------------


def test_it_warns_about_a_literal_pattern_that_matches_the_empty_string():
    data = spec(validators=[{**EXACT, "type": "regex_match", "expected_from": "literal:a*"}])
    assert warnings(data) == {
        (
            "validators[0].expected_from",
            "matches the empty string, so it accepts any output",
            "regex_matches_empty",
        )
    }


def test_it_warns_about_an_empty_matching_postcondition_regex_and_rule_pattern():
    data = spec(
        validators=[
            EXACT,
            {
                "key": "p",
                "type": "postcondition",
                "target": "file:o",
                "config": {"condition": "regex_match", "value": ".*"},
            },
        ],
        post_execution_checks=[{"key": "o", "type": "file_capture", "path": "o"}],
        rules={"job": [{"label": "l", "validator": "pattern_match", "where": "job_plan", "pattern": "(x)?"}]},
    )
    assert {(field, rule) for field, _, rule in warnings(data)} == {
        ("validators[1].config.value", "regex_matches_empty"),
        ("rules.job[0].pattern", "regex_matches_empty"),
    }


def test_it_does_not_warn_about_a_negated_rule_or_a_resolution_status():
    rules = {
        "job": [
            {
                "label": "l",
                "validator": "pattern_match",
                "where": "job_plan",
                "pattern": "x*",
                "negate": True,
            },
            {"label": "s", "validator": "job_resolution_status", "pattern": "(success)?"},
        ]
    }
    assert warnings(spec(rules=rules)) == set()


def test_it_does_not_warn_about_a_pattern_that_needs_a_character():
    assert (
        warnings(spec(validators=[{**EXACT, "type": "regex_match", "expected_from": "literal:^a+$"}]))
        == set()
    )


# --- L4 unused_grader --------------------------------------------------------------


def test_it_warns_about_a_validator_no_dimension_covers():
    data = spec(
        validators=[EXACT, {**EXACT, "key": "w"}],
        scorecard={
            "pass_threshold": 1,
            "dimensions": [{"key": "c", "source": "validators", "validators": ["v"]}],
        },
    )
    assert warnings(data) == {("validators[1]", "is not used by any scorecard dimension", "unused_grader")}


def test_an_empty_validator_list_covers_every_validator():
    data = spec(
        validators=[EXACT, {**EXACT, "key": "w"}],
        scorecard={"pass_threshold": 1, "dimensions": [{"key": "c", "source": "validators"}]},
    )
    assert warnings(data) == set()


def test_it_warns_about_a_judge_without_a_dimension():
    data = spec(
        judge_mode="hybrid",
        llm_judges=[{"key": "j", "mode": "rubric", "model": "gpt-4o", "rubric": "r"}],
    )
    assert warnings(data) == {("llm_judges[0]", "is not used by any scorecard dimension", "unused_grader")}


def test_ground_truth_checks_feed_the_resolution_gate_when_rules_exist():
    data = spec(
        validators=[
            EXACT,
            {"key": "p", "type": "postcondition", "target": "file:o", "config": {"condition": "exists"}},
        ],
        post_execution_checks=[{"key": "o", "type": "file_capture", "path": "o"}],
        scorecard={
            "pass_threshold": 1,
            "dimensions": [{"key": "c", "source": "validators", "validators": ["v"]}],
        },
    )
    assert warnings(data) == {("validators[1]", "is not used by any scorecard dimension", "unused_grader")}
    data["rules"] = {"job": [{"label": "t", "validator": "task_count", "min": 1}]}
    assert warnings(data) == set()


# --- L6 implicit_threshold -----------------------------------------------------------


def test_it_warns_about_an_implicit_threshold():
    assert warnings(spec(scorecard={"dimensions": ["correctness"]})) == {
        (
            "scorecard",
            "has no gate and no pass_threshold, so a case passes only with an overall score of 1.0",
            "implicit_threshold",
        )
    }


def test_a_gate_or_a_pass_threshold_silences_the_implicit_threshold_warning():
    gated = {"key": "c", "source": "validators", "gate": True, "pass_threshold": 1}
    assert warnings(spec(scorecard={"dimensions": [gated]})) == set()
    assert warnings(spec(scorecard={"dimensions": ["correctness"], "pass_threshold": 0.5})) == set()


def test_binary_scorecards_have_no_implicit_threshold():
    dim = {"key": "c", "source": "validators", "pass_threshold": 1}
    assert warnings(spec(scorecard={"strategy": "binary", "dimensions": [dim]})) == set()


# --- L7 unknown_collector ------------------------------------------------------------


def test_it_warns_about_an_unknown_collector():
    data = spec(metrics=[{"key": "m", "type": "numeric", "collector": "run_latency"}])
    assert warnings(data) == {
        ("metrics[0].collector", "is not a known collector and will fail at grading", "unknown_collector")
    }


# --- L8 incomplete_config -------------------------------------------------------------


@pytest.mark.parametrize("vtype", ["code_execution", "file_json_schema", "directory_structure"])
def test_it_warns_about_a_file_validator_without_config(vtype):
    data = spec(
        validators=[EXACT, {"key": "f", "type": vtype, "target": "file:o"}],
        post_execution_checks=[{"key": "o", "type": "file_capture", "path": "o"}],
    )
    assert warnings(data) == {("validators[1]", "will fail at grading", "incomplete_config")}


def test_it_warns_about_a_file_json_schema_config_without_schema():
    data = spec(
        validators=[EXACT, {"key": "f", "type": "file_json_schema", "target": "file:o", "config": {}}],
        post_execution_checks=[{"key": "o", "type": "file_capture", "path": "o"}],
    )
    assert warnings(data) == {("validators[1].config", "will fail at grading", "incomplete_config")}


def test_lint_never_raises_on_garbage():
    for raw in (None, [], {"validators": 3, "scorecard": "x", "metrics": [1], "rules": {"job": "x"}}):
        assert isinstance(lint_evaluation_spec(raw), list)


# --- helpers for the pack parser ----------------------------------------------------------


def test_static_patterns_lists_every_pattern_known_at_publish():
    data = spec(
        validators=[
            {
                **EXACT,
                "key": "r",
                "type": "regex_match",
                "expected_from": "literal:a+",
                "config": {"flags": "mi"},
            },
            {**EXACT, "key": "c", "type": "regex_match", "expected_from": "case.expectations.pattern"},
            {**EXACT, "key": "o", "type": "regex_match", "expected_from": "final_output"},
            {
                "key": "f",
                "type": "file_content_match",
                "target": "file:o",
                "expected_from": "literal:x",
                "config": {"match_mode": "regex"},
            },
            {"key": "g", "type": "file_content_match", "target": "file:o", "expected_from": "literal:x"},
            {
                "key": "p",
                "type": "postcondition",
                "target": "file:o",
                "config": {"condition": "regex_match", "value": "^ok"},
            },
        ],
        rules={
            "job": [{"label": "s", "validator": "job_resolution_status", "pattern": "success"}],
            "tasks": [{"label": "t", "validator": "pattern_match", "where": "task_plan", "pattern": "plan"}],
        },
    )
    assert [(format_path(p.path), p.ref) for p in static_patterns(data)] == [
        ("validators[0].expected_from", "literal:(?im)a+"),
        ("validators[1].expected_from", "case.expectations.pattern"),
        ("validators[3].expected_from", "literal:x"),
        ("validators[5].config.value", "literal:^ok"),
        ("rules.job[0].pattern", "literal:^(?:success)$"),
        ("rules.tasks[0].pattern", "literal:plan"),
    ]
    path, ref = static_patterns(data)[0]
    assert path == ("validators", 0, "expected_from")


def test_placeholders_lists_each_name_once_in_order():
    assert placeholders("pytest {{ test_path }} -k {{case.name}} {{test_path}} {{}}") == [
        "test_path",
        "case.name",
    ]
    assert placeholders("no placeholders") == []
    assert placeholders(None) == []


def test_evidence_references_lists_validator_and_judge_references():
    data = spec(
        llm_judges=[
            {"key": "j", "reference_from": "case.expectations.ref", "context_from": ["final_output", "bogus"]}
        ]
    )
    refs = [(format_path(path), ref.kind) for path, ref in evidence_references(data)]
    assert refs == [
        ("validators[0].target", RefKind.FINAL_OUTPUT),
        ("validators[0].expected_from", RefKind.LITERAL),
        ("llm_judges[0].reference_from", RefKind.CASE_EXPECTATION),
        ("llm_judges[0].context_from[0]", RefKind.FINAL_OUTPUT),
    ]


def test_check_json_path_expectation_reports_problems_with_details():
    assert check_json_path_expectation("$.a[0]") == []
    [(message, detail)] = check_json_path_expectation("$.a[*]")
    assert message == "must be a supported JSON path ($, .name, ['name'], [N])"
    assert "wildcard" in detail


def test_re2_helpers_report_errors_and_empty_matches():
    assert re2_error("(a") is not None
    assert re2_error("a(?i)b") is None
    assert re2_matches_empty("a?")
    assert not re2_matches_empty("a")
    assert not re2_matches_empty("(")
