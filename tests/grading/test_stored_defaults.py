"""Grading reads the config defaults of pack-format §5.4 the same whether a spec spells them
out (as a published manifest does) or not."""

from __future__ import annotations

import copy

from grading.engine import evidence_from_response, grade_case
from grading.engine.grade import compile_plan
from grading.engine.spec import EvaluationSpec
from grading.engine.types import CaseDef, GradeContext

BARE = {
    "name": "s",
    "version_number": 1,
    "judge_mode": "deterministic",
    "post_execution_checks": [{"key": "c", "type": "file_capture", "path": "a.py"}],
    "validators": [
        {
            "key": "order",
            "type": "tool_call_assertion",
            "target": "tool_calls",
            "config": {"ordered_tools": ["a", "b"]},
        },
        {"key": "tests", "type": "code_execution", "target": "file:c", "config": {"test_command": "pytest"}},
    ],
    "scorecard": {"dimensions": ["correctness"]},
}


def _explicit() -> dict:
    spec = copy.deepcopy(BARE)
    spec["validators"][0]["config"]["order_mode"] = "subsequence"
    spec["validators"][1]["config"].update({"scoring": "fraction_passed", "timeout_ms": 30000})
    return spec


def test_the_spec_model_spells_out_the_defaults():
    bare = EvaluationSpec.model_validate(BARE)
    assert [v.config for v in bare.validators] == [v["config"] for v in _explicit()["validators"]]
    assert bare.model_dump(mode="json") == EvaluationSpec.model_validate(_explicit()).model_dump(mode="json")


def test_the_plan_is_the_same_with_and_without_explicit_defaults():
    def shape(spec: dict) -> list[tuple]:
        return [(v.key, v.text, v.threshold, v.time_limited) for v in compile_plan(spec).validators]

    assert shape(BARE) == shape(_explicit())


def test_a_case_grades_the_same_with_and_without_explicit_defaults():
    response = {"final_output": "done", "tool_calls": [{"name": "b", "args": {}}, {"name": "a", "args": {}}]}
    context = GradeContext(run_id="r", lane_id="l", deployment="d", pack_version=1, case_findings=[])
    only_order = {**BARE, "validators": BARE["validators"][:1]}
    explicit = {**_explicit(), "validators": _explicit()["validators"][:1]}
    docs = []
    for spec in (only_order, explicit, EvaluationSpec.model_validate(only_order)):
        doc = grade_case(
            evidence_from_response(response), CaseDef("ch", "c"), spec, context=context
        ).to_dict()
        doc.pop("timing")
        docs.append(doc)
    assert docs[0] == docs[1] == docs[2]
    assert docs[0]["expectations"][0]["status"] == "FAILED"  # a is called after b
