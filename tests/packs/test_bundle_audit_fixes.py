"""Regression tests of a QA audit of the pack validator (pack-format §2-§7, §15).

Each test starts from the audit's base pack ``B`` (prompt_eval, one validator reading
``case.expectations.answer``, one case) and changes what its defect needs.
"""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
import yaml

from packs.bundle.schema import pack_json_schema
from tests.packs.bundle_helpers import check, dump, errors, pos_of, warnings

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

SCHEMA = jsonschema.Draft202012Validator(pack_json_schema())


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


@pytest.mark.parametrize(
    "parameters",
    [
        {"type": 5},
        {"type": "object", "properties": {"path": {"type": "text"}}},
        {"type": "object", "required": "path"},
    ],
)
def test_tool_parameters_must_be_a_valid_json_schema(parameters):
    # §4.6: parameters is a JSON Schema; upstream refuses one that does not resolve. Before,
    # it published and the model provider refused the tool at run time.
    doc = native()
    tool = {
        "name": "lookup",
        "parameters": parameters,
        "implementation": {"primitive": "read_file", "args": {}},
    }
    doc["tools"] = {"custom": [tool]}
    report = check(doc)
    assert errors(report) == [("tools.custom[0].parameters", "must be a valid JSON Schema")]
    assert report.errors[0].detail  # the engine's text says what is wrong


@pytest.mark.parametrize("kind", [" mock ", "Mock", "MOCK"])
def test_a_mock_tool_needs_nothing_else(kind):
    # Upstream compares the type ignoring case (§1: what upstream accepts publishes here).
    doc = native()
    doc["tools"] = {"custom": [{"name": "lookup", "implementation": {"type": kind}}]}
    assert check(doc).valid


@pytest.mark.parametrize(
    ("arena", "comparison"),
    [
        ({"enabled": False, "comparison": "elo"}, "elo"),  # not checked while the arena is off
        ({"enabled": True, "comparison": "  "}, "pairwise"),  # blank is the default
        ({"enabled": True}, "pairwise"),
    ],
)
def test_the_arena_comparison_is_checked_as_upstream_checks_it(arena, comparison):
    # Upstream checks the comparison only of an enabled arena, a blank one being pairwise
    # (§1: every pack upstream accepts publishes here; §4.5 default pairwise).
    doc = native()
    doc["version"]["execution_mode"] = "multi_turn"
    doc["input_sets"][0]["cases"][0]["user_simulator"] = {
        "schema_version": 1,
        "kind": "hybrid",
        "phases": [{"id": "p", "actor": "scripted", "turns": [{"message": "hi"}]}],
        "post_run": {"arena": arena},
    }
    report = check(doc)
    assert report.valid, report.to_body()
    case = report.manifest["input_sets"][0]["cases"][0]
    assert case["user_simulator"]["post_run"]["arena"]["comparison"] == comparison


@pytest.mark.parametrize(
    ("output", "valid"),
    [
        ({"pattern": "", "substring": "canary"}, True),  # a blank one is not set (§2.1)
        ({"pattern": "(?i)token", "substring": "  "}, True),
        ({"pattern": " ", "substring": ""}, False),
        ({"pattern": "a", "substring": "b"}, False),
    ],
)
def test_a_blank_forbidden_output_pattern_or_substring_is_not_set(output, valid):
    # Upstream trims both before "exactly one of" (§1: what it accepts publishes here).
    doc = native()
    doc["security"] = {"forbidden_outputs": [{"description": "leak", **output}]}
    expected = (
        []
        if valid
        else [("security.forbidden_outputs[0]", "exactly one of pattern or substring must be set")]
    )
    assert errors(check(doc)) == expected


# --- 2. no cascades from a case whose payload or inputs failed (§3) ----------------------


def _with_test_command(doc: dict[str, Any]) -> dict[str, Any]:
    spec = doc["version"]["evaluation_spec"]
    spec["post_execution_checks"] = [{"key": "c", "type": "file_capture", "path": "a.py"}]
    spec["validators"].append(
        {
            "key": "t",
            "type": "code_execution",
            "target": "file:c",
            "config": {"test_command": "pytest -k {{a}}"},
        }
    )
    return doc


def test_a_failed_payload_does_not_cascade_into_placeholders():
    doc = _with_test_command(native())
    doc["input_sets"][0]["cases"][0]["payload"] = [1]
    report = check(doc)
    assert errors(report) == [("input_sets[0].cases[0].payload", "must be an object")]
    assert warnings(report) == []


def test_failed_inputs_do_not_cascade_into_placeholders():
    doc = _with_test_command(native())
    doc["challenges"][0]["instructions"] = "Add {{q}}"
    doc["input_sets"][0]["cases"][0]["inputs"] = 5
    report = check(doc)
    assert errors(report) == [("input_sets[0].cases[0].inputs", "must be a list")]
    assert warnings(report) == []


def test_a_failed_legacy_item_payload_does_not_cascade():
    doc = _with_test_command(native())
    doc["version"]["evaluation_spec"]["validators"][0]["expected_from"] = "case.payload.a"
    doc["input_sets"][0] = {
        "key": "s",
        "name": "S",
        "items": [{"challenge_key": "sum", "item_key": "a", "payload": [1]}],
    }
    report = check(doc)
    assert errors(report) == [("input_sets[0].items[0].payload", "must be an object")]
    assert warnings(report) == []


def test_a_failed_payload_does_not_cascade_into_scripted_turns():
    doc = base()
    doc["version"]["execution_mode"] = "multi_turn"
    case = doc["input_sets"][0]["cases"][0]
    case["payload"] = [1]
    case["user_simulator"] = {
        "schema_version": 1,
        "kind": "hybrid",
        "phases": [{"id": "p", "actor": "scripted", "turns": [{"message": "hi {{a}}"}]}],
    }
    report = check(doc)
    assert errors(report) == [("input_sets[0].cases[0].payload", "must be an object")]
    assert warnings(report) == []


def test_failed_case_values_do_not_cascade_into_references_or_duplicates():
    doc = base()
    cases = doc["input_sets"][0]["cases"]
    cases[0]["expectations"] = [{"kind": "text", "value": "x"}]
    for key in ("b", "c"):  # the same failed payload twice: not a duplicate_case either
        cases.append(
            {"challenge_key": "sum", "case_key": key, "payload": [1], "expectations": [{"kind": "text"}]}
        )
    report = check(doc)
    assert sorted(errors(report)) == [
        ("input_sets[0].cases[0].expectations[0].key", "is required"),
        ("input_sets[0].cases[1].expectations[0].key", "is required"),
        ("input_sets[0].cases[1].payload", "must be an object"),
        ("input_sets[0].cases[2].expectations[0].key", "is required"),
        ("input_sets[0].cases[2].payload", "must be an object"),
    ]
    assert warnings(report) == []


def test_placeholders_still_resolve_against_a_valid_case():
    doc = _with_test_command(native())
    doc["input_sets"][0]["cases"].append({"challenge_key": "sum", "case_key": "b", "payload": {"z": 1}})
    report = check(doc)
    assert (
        "version.evaluation_spec.validators[1].config.test_command",
        "unresolved placeholder {{a}} for case template context",
    ) in errors(report)
    assert ("challenges[0].instructions", "does not resolve for input_sets[0].cases[1]") in warnings(report)


# --- 3. booleans: the YAML 1.1 spellings exactly, as upstream (§2.1) ---------------------

_SWITCHES = "  tool_policy: {allow_shell: %s}\n  sandbox: {network_access: %s}\n"


def _with_switches(shell: str, network: str) -> str:
    text = B_TEXT.replace("execution_mode: prompt_eval\n", "execution_mode: native\n")
    return text.replace("  evaluation_spec:\n", _SWITCHES % (shell, network) + "  evaluation_spec:\n", 1)


def test_boolean_fields_accept_the_yaml_1_1_spellings_exactly():
    for shell, network, expected in (("yes", "OFF", (True, False)), ("Y", "On", (True, True))):
        report = check(_with_switches(shell, network))
        assert report.valid, report.to_body()
        assert (
            report.manifest["tool_policy"]["allow_shell"],
            report.manifest["sandbox"]["network_access"],
        ) == (expected)


def test_a_mixed_case_spelling_is_not_a_boolean():
    # yaml.org/type/bool.html (and upstream's yaml.v3) know yes, Yes and YES, not yEs.
    report = check(_with_switches("yEs", "oN"))
    assert errors(report) == [
        ("version.tool_policy.allow_shell", "must be a boolean"),
        ("version.sandbox.network_access", "must be a boolean"),
    ]


def test_quoted_yaml_1_1_spellings_stay_accepted_as_upstream():
    # Upstream decodes with yaml.v3, whose bool fields take a quoted 'on' like a plain one
    # (a quoted scalar resolves to its text, and the text is one of the 1.1 spellings),
    # while a quoted 'true' is text that is none of them: "must be a boolean" in both.
    report = check(_with_switches("'yes'", "'on'"))
    assert report.valid, report.to_body()
    assert errors(check(_with_switches("'true'", "false"))) == [
        ("version.tool_policy.allow_shell", "must be a boolean")
    ]


# --- 4. evaluation-spec keys and sources are trimmed (§5.1) --------------------------------


def test_padded_signal_keys_sources_and_legacy_dimensions_are_trimmed():
    doc = base()
    spec = doc["version"]["evaluation_spec"]
    spec["behavioral"] = {"signals": [{"key": " recovery_behavior ", "weight": 1}]}
    spec["scorecard"]["dimensions"] = [" correctness ", {"key": "b", "source": " behavioral "}]
    report = check(doc)
    assert report.valid, report.to_body()
    assert report.warnings == []
    stored = report.manifest["evaluation_spec"]
    assert stored["behavioral"]["signals"][0]["key"] == "recovery_behavior"
    assert [(d["key"], d["source"]) for d in stored["scorecard"]["dimensions"]] == [
        ("correctness", "validators"),
        ("b", "behavioral"),
    ]
    assert [d.source for d in report.evaluation_spec.dimensions] == ["validators", "behavioral"]
    assert SCHEMA.is_valid(doc)  # never stricter than the validator (§11)


def test_a_trimmed_value_keeps_its_own_message():
    doc = base()
    spec = doc["version"]["evaluation_spec"]
    spec["behavioral"] = {"signals": [{"key": " confidence_calibration ", "weight": 1}]}
    spec["scorecard"]["dimensions"] = [" speed ", {"key": "b", "source": " behaviour "}]
    assert errors(check(doc)) == [
        ("version.evaluation_spec.scorecard.dimensions[0]", "is not a supported scorecard dimension"),
        (
            "version.evaluation_spec.scorecard.dimensions[1].source",
            "must be one of validators, metric, reliability, latency, cost, behavioral, llm_judge, "
            "human_preference, compliance",
        ),
        (
            "version.evaluation_spec.behavioral.signals[0].key",
            "is not supported until confidence reporting lands",
        ),
    ]


# --- 5. the stored spec spells out the §5.4 config defaults --------------------------------


def _with_config_defaults(explicit: bool) -> dict[str, Any]:
    doc = _with_test_command(native())
    doc["input_sets"][0]["cases"][0]["payload"] = {"a": "x"}
    spec = doc["version"]["evaluation_spec"]
    spec["validators"].append(
        {
            "key": "order",
            "type": "tool_call_assertion",
            "target": "tool_calls",
            "config": {"ordered_tools": ["a", "b"]},
        }
    )
    spec["validators"].append(
        {"key": "calls", "type": "tool_call_assertion", "target": "tool_calls", "config": {"tool_name": "a"}}
    )
    if explicit:
        spec["validators"][1]["config"].update({"scoring": "fraction_passed", "timeout_ms": 30000})
        spec["validators"][2]["config"]["order_mode"] = "subsequence"
    return doc


def test_the_manifest_has_the_config_defaults():
    report = check(_with_config_defaults(explicit=False))
    assert report.valid, report.to_body()
    configs = [v.get("config") for v in report.manifest["evaluation_spec"]["validators"]]
    assert configs == [
        None,
        {"test_command": "pytest -k {{a}}", "scoring": "fraction_passed", "timeout_ms": 30000},
        {"ordered_tools": ["a", "b"], "order_mode": "subsequence"},
        {"tool_name": "a"},  # no ordered_tools: no order_mode
    ]
    scorecard = report.manifest["evaluation_spec"]["scorecard"]  # the other §5.4 defaults
    assert scorecard["strategy"] == "weighted"
    assert scorecard["dimensions"] == [
        {
            "key": "correctness",
            "source": "validators",
            "better_direction": "higher",
            "weight": 1.0,
            "gate": False,
        }
    ]
    explicit = check(_with_config_defaults(explicit=True))
    assert explicit.manifest["evaluation_spec"] == report.manifest["evaluation_spec"]


def test_an_explicit_config_value_is_kept_and_an_absent_config_stays_absent():
    doc = _with_config_defaults(explicit=False)
    validators = doc["version"]["evaluation_spec"]["validators"]
    validators[1]["config"].update({"scoring": "all_or_nothing", "timeout_ms": 5000})
    validators[2]["config"]["order_mode"] = "exact"
    validators.append({"key": "bare", "type": "code_execution", "target": "file:c"})
    report = check(doc)
    assert report.valid, report.to_body()
    stored = report.manifest["evaluation_spec"]["validators"]
    assert stored[1]["config"]["scoring"] == "all_or_nothing" and stored[1]["config"]["timeout_ms"] == 5000
    assert stored[2]["config"]["order_mode"] == "exact"
    assert "config" not in stored[4]  # still "will fail at grading" (L8), not a half config
    assert ("version.evaluation_spec.validators[4]", "will fail at grading") in warnings(report)


# --- 6. a blank required string is absent: placed at its parent mapping (§2.1, §3) --------


def _position(doc: dict[str, Any], field: str) -> tuple[int | None, int | None]:
    report = check(doc)
    [error] = [e for e in report.errors if e.field == field]
    assert error.message.startswith("is required"), error
    return error.line, error.column


def test_a_blank_required_string_is_placed_like_a_null_one():
    for field, change in (
        ("pack.name", lambda doc, value: doc["pack"].__setitem__("name", value)),
        ("challenges[0].title", lambda doc, value: doc["challenges"][0].__setitem__("title", value)),
        (
            "version.evaluation_spec.validators[0].expected_from",
            lambda doc, value: doc["version"]["evaluation_spec"]["validators"][0].__setitem__(
                "expected_from", value
            ),
        ),
    ):
        blank, null = base(), base()
        change(blank, "  ")
        change(null, None)
        assert _position(blank, field) == _position(null, field), field


def test_a_blank_required_string_is_at_the_mapping_not_the_value():
    text = B_TEXT.replace("name: Demo", "name: '  '")
    report = check(text)
    assert errors(report) == [("pack.name", "is required")]
    assert (report.errors[0].line, report.errors[0].column) == pos_of(text, "{slug: demo")
