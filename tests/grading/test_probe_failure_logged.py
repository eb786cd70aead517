"""A crash of the baseline probes does not sink the grade, and it is logged, not hidden."""

from __future__ import annotations

import logging

from grading.engine import grade as grade_mod
from grading.engine import grade_case
from grading.engine.evidence import evidence_from_response
from grading.engine.types import CaseDef, GradeContext


def test_a_crashing_probe_is_logged_and_the_case_still_graded(monkeypatch, caplog):
    def broken_probe(spec, case, context):
        raise RuntimeError("probe exploded")

    monkeypatch.setitem(grade_mod._LAZY, "critique.probe_case", broken_probe)
    case = CaseDef(challenge_key="ch", case_key="c1")
    evidence = evidence_from_response({"final_output": "hello"})
    with caplog.at_level(logging.ERROR, logger="grading.engine.grade"):
        grade = grade_case(evidence, case, None, context=GradeContext())
    assert grade.to_dict()["case"]["case_key"] == "c1"
    assert any("baseline probes of case ch/c1 failed" in r.getMessage() for r in caplog.records)
    assert any("probe exploded" in (r.exc_text or "") for r in caplog.records)
