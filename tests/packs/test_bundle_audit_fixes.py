"""Regression tests of a QA audit of the pack validator (pack-format §2-§7, §15).

Each test starts from the audit's base pack ``B`` (prompt_eval, one validator reading
``case.expectations.answer``, one case) and changes what its defect needs.
"""

from __future__ import annotations

from typing import Any

import yaml

from tests.packs.bundle_helpers import check, dump, errors, pos_of

B_TEXT = """\
pack: {slug: demo, name: Demo, family: reasoning}
version:
  number: 1
  execution_mode: prompt_eval
  evaluation_spec:
    name: demo
    version_number: 1
    judge_mode: deterministic
    validators:
      - {key: ok, type: exact_match, target: final_output, expected_from: case.expectations.answer}
    scorecard: {pass_threshold: 1, dimensions: [correctness]}
challenges:
  - {key: sum, title: Sum, category: math, difficulty: easy, instructions: "Add {{a}}"}
input_sets:
  - key: s
    name: S
    cases:
      - {challenge_key: sum, case_key: a, payload: {a: 1}, expectations: [{key: answer, kind: text, value: "x"}]}
"""


def base() -> dict[str, Any]:
    return yaml.safe_load(B_TEXT)


def native() -> dict[str, Any]:
    doc = base()
    doc["version"]["execution_mode"] = "native"
    return doc


def test_the_base_pack_is_valid_without_warnings():
    report = check(B_TEXT)
    assert report.valid, report.to_body()
    assert report.warnings == []


# --- 1. a custom tool needs an implementation (§4.6) -------------------------------------


def test_a_custom_tool_without_implementation_needs_its_primitive_and_args():
    doc = native()
    doc["tools"] = {"custom": [{"name": "lookup", "description": "d"}]}
    text = dump(doc)
    report = check(text)
    assert errors(report) == [
        ("tools.custom[0].implementation.args", "is required"),
        ("tools.custom[0].implementation.primitive", "is required"),
    ]
    # A missing key is placed at its parent mapping; with no implementation, the tool's.
    tool = pos_of(text, "name: lookup")
    assert {(e.line, e.column) for e in report.errors} == {tool}


def test_a_null_implementation_is_absent():
    doc = native()
    doc["tools"] = {"custom": [{"name": "lookup", "description": "d", "implementation": None}]}
    text = dump(doc)
    report = check(text)
    assert errors(report) == [
        ("tools.custom[0].implementation.args", "is required"),
        ("tools.custom[0].implementation.primitive", "is required"),
    ]
    assert {(e.line, e.column) for e in report.errors} == {pos_of(text, "name: lookup")}


def test_an_empty_implementation_is_placed_at_its_own_mapping():
    text = B_TEXT.replace("execution_mode: prompt_eval", "execution_mode: native") + (
        "tools:\n  custom:\n    - name: lookup\n      implementation: {}\n"
    )
    report = check(text)
    assert errors(report) == [
        ("tools.custom[0].implementation.args", "is required"),
        ("tools.custom[0].implementation.primitive", "is required"),
    ]
    assert {(e.line, e.column) for e in report.errors} == {pos_of(text, "{}")}


def test_a_mock_tool_needs_nothing_else():
    doc = native()
    doc["tools"] = {"custom": [{"name": "lookup", "implementation": {"type": " mock "}}]}
    assert check(doc).valid
