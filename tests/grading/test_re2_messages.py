"""RE2's refusals explained (grading.md §3.1, pack-format §9): a hint for the constructs other
engines have and RE2 does not, at publish and at grading time, and a grading-time pattern
error that names where the pattern came from."""

from __future__ import annotations

import pytest

from grading.engine import evidence_from_response, grade_case
from grading.engine.configs.checks import re2_error
from grading.engine.re2hint import re2_hint
from grading.engine.types import CaseDef, CaseExpectation, GradeContext

LOOKAHEAD = "RE2 has no lookahead"
LOOKBEHIND = "RE2 has no lookbehind"
BACKREF = "RE2 has no backreferences"
POSSESSIVE = "RE2 has no possessive quantifiers"
ATOMIC = "RE2 has no atomic groups"


@pytest.mark.parametrize(
    ("pattern", "hint"),
    [
        ("(?=a)b", LOOKAHEAD),
        ("a(?!b)", LOOKAHEAD),
        ("(?<=a)b", LOOKBEHIND),
        ("(?<!a)b", LOOKBEHIND),
        ("(?<=a", LOOKBEHIND),  # RE2 reports this one as a bad named group
        (r"(\w)\1", BACKREF),
        (r"(?<n>a)\k<n>", BACKREF),
        (r"(a)\g1", BACKREF),
        ("(?P<n>a)(?P=n)", BACKREF),
        ("a*+", POSSESSIVE),
        ("a++", POSSESSIVE),
        ("a?+", POSSESSIVE),
        ("a{2,}+", POSSESSIVE),
        ("(?>a+)b", ATOMIC),
    ],
)
def test_a_construct_re2_lacks_gets_its_hint_after_re2s_own_text(pattern, hint):
    detail = re2_error(pattern)  # the publish checks' detail
    assert detail is not None and hint in detail
    assert not detail.startswith("RE2 has")  # RE2's text first, the hint after it


@pytest.mark.parametrize("pattern", ["(a", "a)", "a**", r"\Z", "(?P>n)", r"\p{Nope}"])
def test_other_refusals_get_no_hint(pattern):
    detail = re2_error(pattern)
    assert detail is not None and "RE2 has no" not in detail
    assert re2_hint(pattern, detail) is None


CASE = CaseDef(
    "ch",
    "c",
    expectations=[CaseExpectation("total_re", value=r"(?<=total: )\d+")],
)


def _grade(spec: dict):
    ev = evidence_from_response({"final_output": "total: 5", "files": {"out.txt": "total: 5"}})
    return grade_case(ev, CASE, spec, context=GradeContext(case_findings=[]))


def test_a_grading_time_pattern_error_names_its_source_and_is_the_packs_problem():
    # A pattern from case data that RE2 refuses said only "invalid perl operator: (?<=": the
    # field was not named and nothing said RE2 has no lookbehind.
    spec = {
        "validators": [
            {
                "key": "total",
                "type": "regex_match",
                "target": "final_output",
                "expected_from": "case.expectations.total_re",
            },
            {
                "key": "echo",
                "type": "regex_match",
                "target": "final_output",
                "expected_from": r"literal:(\w)\1",
            },
            {
                "key": "file_total",
                "type": "file_content_match",
                "target": "file:out",
                "expected_from": "case.expectations.total_re",
                "config": {"match_mode": "regex"},
            },
            {
                "key": "post",
                "type": "postcondition",
                "target": "file:out",
                "config": {"condition": "regex_match", "value": "total: \\d++"},
            },
        ],
        "post_execution_checks": [{"key": "out", "type": "file_capture", "path": "out.txt"}],
    }
    g = _grade(spec)
    by_key = {e.key: e for e in g.expectations}
    for e in g.expectations:
        assert (e.status.value, e.outcome_class.value, e.reason_code) == (
            "NOT_EVALUATED",
            "pack_error",
            "invalid_pattern",
        ), e.evidence
    assert by_key["total"].evidence.startswith(
        "validator 'total', expected_from case.expectations.total_re: "
    )
    assert LOOKBEHIND in by_key["total"].evidence
    assert by_key["echo"].evidence.startswith("validator 'echo', expected_from (a literal): ")
    assert BACKREF in by_key["echo"].evidence
    assert by_key["file_total"].evidence.startswith(
        "validator 'file_total', expected_from case.expectations.total_re: "
    )
    assert by_key["post"].evidence.startswith("validator 'post', config.value: ")
    assert POSSESSIVE in by_key["post"].evidence
    assert by_key["post"].details["pattern_field"] == "config.value"
    # never against the agent: the case has no verdict and the reason is the pack's
    assert (g.status.value, g.outcome_class.value, g.reason_code) == (
        "NOT_EVALUATED",
        "pack_error",
        "invalid_pattern",
    )


def test_a_rule_pattern_error_names_the_rules_field():
    spec = {
        "validators": [],
        "rules": {
            "job": [
                {"label": "L", "validator": "pattern_match", "where": "job_resolution", "pattern": "(?=5)"}
            ]
        },
    }
    g = _grade(spec)
    rule = g.expectations[0]
    assert (rule.status.value, rule.outcome_class.value) == ("NOT_EVALUATED", "pack_error")
    assert rule.evidence.startswith("rules.job[0].pattern: ")
    assert LOOKAHEAD in rule.evidence
    assert (g.status.value, g.outcome_class.value, g.gates["compliance"]) == (
        "NOT_EVALUATED",
        "pack_error",
        "not_graded",
    )
