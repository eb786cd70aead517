"""RE2 for every user regex: catastrophic-backtracking patterns finish on a 100 kB input.

Each pattern goes through the engine's regex paths (a ``regex_match`` validator on
``final_output``, a negated ``pattern_match`` job rule over executed commands) and through
pack validation (which compiles every pattern and lints ``regex_matches_empty``). With a
backtracking engine these inputs take longer than the age of the universe; with RE2 they
are linear. The 10 s join is a guard against a hang, not a timing assertion.
"""

from __future__ import annotations

import threading

import pytest
import yaml

from grading.engine import evidence_from_response, grade_case
from grading.engine.spec import EvaluationSpec
from grading.engine.types import CaseDef, GradeContext
from packs.bundle import validate_bundle

GUARD_SECONDS = 10
SIZE = 100_000
EVIL = [
    r"(a+)+$",
    r"(a|a)*b",
    r"(a|aa)+$",
    r"(a*)*b",
    r"(.*a){20}$",
    r"^(\w+\s?)*$",
    r"(x+x+)+y",
    r"^(([a-z])+.)+[A-Z]([a-z])+$",
]
# A near-miss for every pattern above: long runs of the repeated atom, then a mismatch.
INPUTS = {
    "a-run": "a" * SIZE + "!",
    "x-run": "x" * SIZE,
    "words": ("abc " * (SIZE // 4)) + "!",
}


def guarded(fn):  # type: ignore[no-untyped-def]
    box: dict = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # re-raised in the test thread
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(GUARD_SECONDS)
    assert not thread.is_alive(), f"still running after {GUARD_SECONDS} s: not linear-time matching"
    if "error" in box:
        raise box["error"]
    return box["value"]


def spec_for(pattern: str) -> EvaluationSpec:
    return EvaluationSpec.model_validate(
        {
            "name": "re2",
            "version_number": 1,
            "judge_mode": "deterministic",
            "validators": [
                {
                    "key": "shape",
                    "type": "regex_match",
                    "target": "final_output",
                    "expected_from": f"literal:{pattern}",
                }
            ],
            "rules": {
                "job": [
                    {
                        "label": "no evil",
                        "validator": "pattern_match",
                        "where": "executed_commands",
                        "pattern": pattern,
                        "negate": True,
                    }
                ]
            },
            "scorecard": {"dimensions": ["correctness"], "pass_threshold": 1},
        }
    )


@pytest.mark.parametrize("pattern", EVIL)
@pytest.mark.parametrize("text", list(INPUTS.values()), ids=list(INPUTS))
def test_grading_with_an_evil_pattern_completes_on_100_kb(pattern, text):
    spec = spec_for(pattern)
    evidence = evidence_from_response(
        {"final_output": text, "tool_calls": [{"name": "Bash", "args": {"command": text}}]}
    )
    grade = guarded(
        lambda: grade_case(evidence, CaseDef("re2", "c1"), spec, context=GradeContext(case_findings=[]))
    )
    doc = grade.to_dict()
    statuses = {e["key"]: e["status"] for e in doc["expectations"]}
    assert statuses["shape"] in {"PASSED", "FAILED"}  # evaluated, not an error
    assert doc["status"] in {"PASSED", "FAILED"}


@pytest.mark.parametrize("pattern", EVIL)
def test_pack_validation_compiles_evil_patterns_quickly(pattern):
    pack = {
        "pack": {"slug": "re2-pack", "name": "RE2", "family": "fuzz"},
        "version": {
            "number": 1,
            "execution_mode": "prompt_eval",
            "evaluation_spec": {
                "name": "re2",
                "version_number": 1,
                "judge_mode": "deterministic",
                "validators": [
                    {
                        "key": "shape",
                        "type": "regex_match",
                        "target": "final_output",
                        "expected_from": "case.expectations.pattern",
                    }
                ],
                "scorecard": {"dimensions": ["correctness"], "pass_threshold": 1},
            },
        },
        "challenges": [
            {
                "key": "c",
                "title": "C",
                "category": "fuzz",
                "difficulty": "easy",
                "instructions": "{{question}}",
            }
        ],
        "input_sets": [
            {
                "key": "all",
                "name": "All",
                "cases": [
                    {
                        "challenge_key": "c",
                        "case_key": "k1",
                        "payload": {"question": "a" * SIZE},
                        "expectations": [{"key": "pattern", "kind": "text", "value": pattern}],
                    }
                ],
            }
        ],
    }
    data = yaml.safe_dump(pack, width=10**7).encode()
    report = guarded(lambda: validate_bundle(data, filename="pack.yaml"))
    assert report.valid, report.to_body()["errors"]


def test_a_pattern_re2_cannot_run_is_an_error_with_a_field_not_a_crash():
    data = yaml.safe_dump(
        {
            "pack": {"slug": "re2-pack", "name": "RE2", "family": "fuzz"},
            "version": {
                "number": 1,
                "execution_mode": "prompt_eval",
                "evaluation_spec": {
                    "name": "re2",
                    "version_number": 1,
                    "judge_mode": "deterministic",
                    "validators": [
                        {
                            "key": "backref",
                            "type": "regex_match",
                            "target": "final_output",
                            "expected_from": r"literal:(a+)\1",
                        }
                    ],
                    "scorecard": {"dimensions": ["correctness"], "pass_threshold": 1},
                },
            },
            "challenges": [
                {"key": "c", "title": "C", "category": "fuzz", "difficulty": "easy", "instructions": "go"}
            ],
            "input_sets": [
                {"key": "all", "name": "All", "cases": [{"challenge_key": "c", "case_key": "k1"}]}
            ],
        }
    ).encode()
    body = validate_bundle(data, filename="pack.yaml").to_body()
    assert not body["valid"]
    assert any("validators[0]" in e["field"] and e["message"] for e in body["errors"]), body["errors"]
