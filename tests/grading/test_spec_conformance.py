"""Conformance: the example packs of pack-format §14, the examples 8-11 of §15, the JSON Schema
(§11, never stricter than the validator) and random mutations that must never break the checks."""

from __future__ import annotations

import copy
import math

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from grading.engine import registry
from grading.engine.modelcheck import check_model, format_path
from grading.engine.registry import check_evaluation_spec, lint_evaluation_spec, validate_evaluation_spec
from grading.engine.spec import EvaluationSpec


@pytest.fixture(autouse=True)
def _surface_internal_errors(monkeypatch):
    monkeypatch.setattr(registry, "RAISE_INTERNAL_ERRORS", True)


# The evaluation_spec blocks of pack-format §14, verbatim.
EXAMPLE_A = r"""
name: mental-math-v1
version_number: 1
judge_mode: deterministic
validators:   # case.expectations.result resolves against each graded case
  - {key: answer, type: numeric_match, target: final_output, expected_from: case.expectations.result,
     config: {extract_number: true, absolute_tolerance: 0.001}}
metrics:
  - {key: completed, type: boolean, collector: run_completed_successfully}
  - {key: failures, type: numeric, collector: run_failure_count}
scorecard:
  pass_threshold: 1
  dimensions:
    - {key: correctness, source: validators, validators: [answer], weight: 0.9}
    - {key: reliability, source: reliability, weight: 0.1}
"""

EXAMPLE_B = r"""
name: invoice-totals-v1
version_number: 1
judge_mode: deterministic
post_execution_checks:
  - {key: report, type: file_capture, path: report.json}
validators:
  - key: query-then-write
    type: tool_call_assertion
    target: tool_calls
    config: {ordered_tools: [query_json, write_file], order_mode: subsequence}
  - key: total-correct
    type: postcondition
    target: file:report
    config: {condition: json_path_match, json_path: $.total, value: 1280.5}
  - {key: names-customer, type: contains, target: final_output, expected_from: case.expectations.customer}
metrics:
  - {key: calls, type: numeric, collector: run_tool_call_count}
scorecard:
  strategy: hybrid
  pass_threshold: 0.8
  dimensions:
    - {key: trajectory, source: validators, validators: [query-then-write], gate: true, pass_threshold: 1}
    - {key: output, source: validators, validators: [total-correct, names-customer], weight: 0.8}
    - {key: efficiency, source: metric, metric: calls, better_direction: lower,
       normalization: {target: 2, max: 12}, weight: 0.2}
"""

EXAMPLE_C = r"""
name: release-notes-v2
version_number: 2
judge_mode: hybrid
validators:
  - {key: has-heading, type: regex_match, target: final_output, expected_from: 'literal:(?m)^##\s+\S'}
  - {key: names-version, type: contains, target: final_output, expected_from: case.payload.version}
llm_judges:
  - key: faithful
    mode: reference
    model: claude-haiku-4-5
    samples: 3
    reference_from: case.expectations.reference_notes
    context_from: [final_output, case.payload.changes]
    score_scale: {min: 1, max: 5}
    rubric: |
      5: every change in the reference is present and nothing is invented.
      1: most changes are missing, wrong or invented.
scorecard:
  strategy: hybrid
  pass_threshold: 0.7
  dimensions:
    - {key: format, source: validators, validators: [has-heading, names-version], gate: true, pass_threshold: 1}
    - {key: faithfulness, source: llm_judge, judge_key: faithful}
"""

EXAMPLES = {"A": EXAMPLE_A, "B": EXAMPLE_B, "C": EXAMPLE_C}

# §15: "placed in an otherwise valid pack whose scorecard is {pass_threshold: 1, dimensions: [correctness]}".
CONFORMANCE_BASE = """
name: conformance
version_number: 1
judge_mode: deterministic
scorecard: {pass_threshold: 1, dimensions: [correctness]}
"""

CONFORMANCE = {
    8: (
        "validators: [{key: ok, type: exact_match, target: output}]",
        [
            ("version.evaluation_spec.validators[0].expected_from", "is required", "error", "parent"),
            (
                "version.evaluation_spec.validators[0].target",
                "must be a supported evidence reference",
                "error",
                "value",
            ),
        ],
    ),
    9: (
        """
validators: [{key: src, type: file_content_match, target: "file:solution", expected_from: "literal:def f",
              config: {mode: contains}}]
post_execution_checks: [{key: solution, type: file_capture, path: solution.py}]
""",
        [
            (
                "version.evaluation_spec.validators[0].config.mode",
                'is not an allowed key; did you mean "match_mode"?',
                "warning",
                "key",
            )
        ],
    ),
    10: (
        r"validators: [{key: echo, type: regex_match, target: final_output, expected_from: 'literal:(\w+) \1'}]",
        [
            (
                "version.evaluation_spec.validators[0].expected_from",
                "must be a valid RE2 pattern",
                "error",
                "value",
            )
        ],
    ),
    11: (
        """
validators: [{key: v, type: exact_match, target: final_output, expected_from: "literal:x"}]
judge_mode: hybrid
llm_judges: [{key: tone, mode: rubric, model: claude-haiku-4-5, rubric: "Polite and warm."}]
scorecard:
  strategy: hybrid
  dimensions:
    - {key: q, source: llm_judge, judge_key: tonee}
    - {key: speed, source: latency, normalization: {target: 1000, max: 5000}}
""",
        [
            (
                "version.evaluation_spec.scorecard.strategy",
                "hybrid strategy requires at least one gated dimension",
                "error",
                "value",
            ),
            (
                "version.evaluation_spec.scorecard.dimensions[0].judge_key",
                'references unknown judge key "tonee"',
                "error",
                "value",
            ),
            (
                "version.evaluation_spec.scorecard.dimensions[1].better_direction",
                "must be higher or lower",
                "error",
                "parent",
            ),
        ],
    ),
}


def load(text: str) -> dict:
    return yaml.safe_load(text)


def conformance_spec(number: int) -> dict:
    data = load(CONFORMANCE_BASE)
    data.update(load(CONFORMANCE[number][0]))
    return data


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_the_example_packs_validate_with_no_errors_and_no_warnings(name):
    spec, issues = validate_evaluation_spec(load(EXAMPLES[name]))
    assert issues == []
    assert isinstance(spec, EvaluationSpec)


def test_example_b_carries_its_defaults_into_the_model():
    spec, _ = validate_evaluation_spec(load(EXAMPLE_B))
    assertion = spec.validator_config(spec.validator("query-then-write"))
    assert (assertion.order_mode, assertion.include_failed) == ("subsequence", False)
    postcondition = spec.validator_config(spec.validator("total-correct"))
    assert (postcondition.condition, postcondition.json_path, postcondition.value) == (
        "json_path_match",
        "$.total",
        1280.5,
    )
    assert [d.better_direction for d in spec.dimensions] == ["higher", "higher", "lower"]


def test_example_c_judge_defaults():
    spec, _ = validate_evaluation_spec(load(EXAMPLE_C))
    judge = spec.judge("faithful")
    assert (judge.samples, judge.threshold, judge.position_debiasing, judge.timeout_ms) == (
        3,
        0.5,
        "shuffle",
        60000,
    )


@pytest.mark.parametrize("number", sorted(CONFORMANCE))
def test_the_conformance_examples_produce_exactly_their_issues(number):
    _, issues = validate_evaluation_spec(conformance_spec(number))
    found = sorted(
        (i.field("version.evaluation_spec"), i.message, i.severity, i.anchor)
        for i in issues
        if i.rule != "unused_grader" and i.rule != "implicit_threshold"
    )
    assert found == sorted(CONFORMANCE[number][1])


def test_conformance_example_9_stays_valid_and_drops_the_key():
    spec, issues = validate_evaluation_spec(conformance_spec(9))
    assert spec is not None
    assert issues[0].rule == "unknown_key"
    assert spec.validators[0].config == {}


def test_conformance_example_10_puts_the_engine_text_in_detail():
    _, issues = validate_evaluation_spec(conformance_spec(10))
    [issue] = [i for i in issues if i.severity == "error"]
    assert "invalid escape sequence" in issue.detail


# --- JSON Schema (§11) -------------------------------------------------------------


@pytest.fixture(scope="module")
def schema_validator():
    schema = EvaluationSpec.model_json_schema()
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def test_the_json_schema_is_valid_draft_2020_12(schema_validator):
    assert schema_validator.schema["additionalProperties"] is False
    assert set(schema_validator.schema["required"]) == {"name", "version_number", "judge_mode", "scorecard"}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_the_json_schema_accepts_the_example_specs(schema_validator, name):
    assert list(schema_validator.iter_errors(load(EXAMPLES[name]))) == []


def test_the_json_schema_accepts_the_lenient_config_of_example_9(schema_validator):
    assert list(schema_validator.iter_errors(conformance_spec(9))) == []


def test_the_json_schema_is_never_stricter_for_yaml_scalars(schema_validator):
    data = load(EXAMPLE_A)
    data["name"] = 2024  # a string field keeps the scalar's text
    data["validators"][0]["config"]["extract_number"] = "yes"  # YAML 1.1 boolean spelling
    data["validators"][0]["label"] = True
    assert validate_evaluation_spec(data)[1] == []
    assert list(schema_validator.iter_errors(data)) == []


def _non_null(prop):
    """The property's schema without the null branch optional properties get."""
    branches = [b for b in prop.get("anyOf", [prop]) if b.get("type") != "null"]
    return branches[0]


def test_the_json_schema_states_enums_ranges_and_closed_objects(schema_validator):
    defs = schema_validator.schema["$defs"]
    assert _non_null(defs["JudgeSpec"]["properties"]["samples"])["maximum"] == 10
    assert _non_null(defs["JudgeSpec"]["properties"]["threshold"])["maximum"] == 1
    assert _non_null(defs["ScorecardSpec"]["properties"]["strategy"])["enum"] == [
        "weighted",
        "binary",
        "hybrid",
    ]
    assert defs["ValidatorSpec"]["additionalProperties"] is False
    assert "pattern" in defs["ValidatorSpec"]["properties"]["target"]


def test_the_json_schema_accepts_null_for_optional_keys_as_the_validator_does(schema_validator):
    data = load(EXAMPLE_C)
    data["metrics"] = None
    data["llm_judges"][0]["label"] = None
    data["llm_judges"][0]["samples"] = None
    data["validators"][0]["config"] = {"flags": None}
    assert validate_evaluation_spec(data)[1] == []
    assert list(schema_validator.iter_errors(data)) == []


def test_the_json_schema_describes_the_config_of_each_type(schema_validator):
    bad = load(EXAMPLE_A)
    bad["validators"][0]["config"]["absolute_tolerance"] = -1
    assert list(schema_validator.iter_errors(bad))
    bad = load(EXAMPLE_A)
    bad["validators"][0]["config"]["unknown"] = 1
    assert list(schema_validator.iter_errors(bad))


def test_the_json_schema_rejects_what_the_validator_rejects_for_types_and_references(schema_validator):
    data = load(EXAMPLE_A)
    data["validators"][0]["target"] = "output"
    assert list(schema_validator.iter_errors(data))
    data = load(EXAMPLE_A)
    data["judge_mode"] = "sometimes"
    assert list(schema_validator.iter_errors(data))


# --- random mutations never break the checks ------------------------------------------

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**40), max_value=2**40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(
        [
            "",
            " ",
            "yes",
            "literal:(",
            "literal:a*",
            "file:",
            "file:report",
            "tool_calls",
            "case.payload.",
            "$.a[*]",
            "${secrets.X}",
            "correctness",
            "latency",
            "hybrid",
            "binary",
            "exact_match",
            "tool_call_assertion",
            "postcondition",
            "regex",
            "json_path_match",
            "majority_vote",
            "pass_at_k",
        ]
    ),
    st.text(max_size=12),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(["key", "type", "x", "gate", "config"]), inner, max_size=3),
    ),
    max_leaves=8,
)


def _paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, prefix + (key,))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _paths(value, prefix + (index,))


def _parent(doc, path):
    node = doc
    for step in path[:-1]:
        node = node[step]
    return node


@st.composite
def mutated_specs(draw):
    doc = copy.deepcopy(load(EXAMPLES[draw(st.sampled_from(sorted(EXAMPLES)))]))
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        paths = [p for p in _paths(doc) if p]
        path = draw(st.sampled_from(paths))
        parent = _parent(doc, path)
        action = draw(st.sampled_from(["replace", "delete", "add_key", "duplicate"]))
        if action == "replace":
            parent[path[-1]] = draw(VALUES)
        elif action == "delete":
            del parent[path[-1]]
        elif action == "add_key" and isinstance(parent, dict):
            parent[draw(st.sampled_from(["bogus", "Key", "modes", "gate"]))] = draw(VALUES)
        elif action == "duplicate" and isinstance(parent, list):
            parent.append(copy.deepcopy(parent[path[-1]]))
    return doc


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_specs())
def test_random_mutations_never_make_the_checks_raise(doc):
    result = check_model(EvaluationSpec, doc)
    semantic = check_evaluation_spec(result.cleaned, bad_paths=result.error_paths)
    lint = lint_evaluation_spec(result.cleaned, bad_paths=result.error_paths)
    unguarded = [*check_evaluation_spec(doc), *lint_evaluation_spec(doc)]  # raw data, no bad_paths
    for issue in [*result.issues, *semantic, *lint, *unguarded]:
        assert issue.path, issue
        assert issue.message, issue
        assert format_path(issue.path)
    if result.instance is not None and not any(issue.severity == "error" for issue in semantic):
        assert not result.errors
        result.instance.dimensions  # noqa: B018 - expanding must not raise either
        for validator in result.instance.validators:
            result.instance.validator_config(validator)


@settings(max_examples=100, deadline=None)
@given(st.floats(allow_nan=True, allow_infinity=True))
def test_non_finite_numbers_are_reported_not_raised(value):
    doc = load(EXAMPLE_A)
    doc["scorecard"]["pass_threshold"] = value
    _, issues = validate_evaluation_spec(doc)
    if not math.isfinite(value):
        assert [(format_path(i.path), i.message) for i in issues] == [
            ("scorecard.pass_threshold", "must be a finite number")
        ]
