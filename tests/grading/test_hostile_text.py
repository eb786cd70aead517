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
