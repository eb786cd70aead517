"""Agent text a JSON reply can carry but few checks expect: lone UTF-16 surrogates, NaN and
Infinity tokens (grading.md §1.4 rule 7, §2, §3.2, §5.3). A check reads such text to a verdict;
it never crashes into ERROR on it, and never passes it as JSON."""

from __future__ import annotations

import re2
from validator_helpers import run, status

from grading.engine import evidence_from_response, grade_case
from grading.engine.types import CaseDef, GradeContext
from grading.engine.validators.common import compile_re2, search_span

CTX = GradeContext(case_findings=[])


def _grade(response: dict, spec: dict):
    return grade_case(evidence_from_response(response), CaseDef("ch", "c"), spec, context=CTX)


def test_search_span_reads_a_lone_surrogate_as_one_replacement_character():
    # json reads "\ud800" into a str UTF-8 cannot encode; RE2 needs UTF-8. Offsets still count
    # the text's code points.
    text = "ok \ud800 done"
    assert search_span(compile_re2("done"), text) == (text.index("done"), len(text))
    assert search_span(compile_re2("ok . done"), text) == (0, len(text))
    assert search_span(compile_re2("nothing"), text) is None
    assert re2.compile("done").search(text.replace("\ud800", "\ufffd")).span() == (5, 9)


def test_regex_match_on_output_with_a_lone_surrogate_is_a_verdict():
    r = run("regex_match", "answer \udc00: 42", r"\d+$")
    assert status(r) == "PASSED" and "match at 10-12" in r.evidence
    assert status(run("regex_match", "answer \udc00", r"\d+")) == "FAILED"


def test_a_rule_on_output_with_a_lone_surrogate_is_a_verdict():
    rules = {
        "job": [{"label": "L", "validator": "pattern_match", "where": "job_resolution", "pattern": "done"}]
    }
    g = _grade({"final_output": "ok \ud800 done"}, {"validators": [], "rules": rules})
    rule = next(e for e in g.expectations if e.key == "rules.job[0]")
    assert rule.status.value == "PASSED", rule.evidence


def test_nan_and_infinity_are_not_json_for_json_schema():
    # json (which reads agent replies) accepts these tokens; JSON does not (RFC 8259).
    for text, offset in (("NaN", 0), ("-Infinity", 0), ('{"n": Infinity}', 6), ('[1, "NaN", NaN]', 11)):
        r = run("json_schema", text, '{"type": ["number", "object", "array"]}')
        assert status(r) == "FAILED", (text, r.evidence)
        assert f"not JSON at offset {offset}" in r.evidence


def test_nan_in_json_path_actual_is_not_json():
    r = run("json_path_match", '{"total": NaN}', '{"path": "$.total", "comparator": "less_than", "value": 5}')
    assert status(r) == "FAILED" and "not JSON at offset 10" in r.evidence
    r = run(
        "json_path_match",
        '{"total": Infinity}',
        '{"path": "$.total", "comparator": "greater_than", "value": 5}',
    )
    assert status(r) == "FAILED" and "not JSON" in r.evidence


def test_nan_on_the_expected_side_is_a_pack_error():
    r = run("json_path_match", '{"a": 1}', '{"path": "$.a", "value": NaN}')
    assert status(r) == "NOT_EVALUATED" and r.klass().value == "pack_error"


def test_nan_in_a_returned_json_file_is_not_json():
    r = run("file_content_match", "[NaN]", "[null]", {"match_mode": "json_equal"})
    assert status(r) == "FAILED" and "not JSON at offset 1" in r.evidence
    r = run("file_json_schema", '{"x": NaN}', None, {"schema": {"type": "object"}})
    assert status(r) == "FAILED" and "not JSON at offset 6" in r.evidence


def test_a_string_holding_nan_is_still_json():
    assert status(run("json_schema", '{"n": "NaN"}', '{"type": "object"}')) == "PASSED"
