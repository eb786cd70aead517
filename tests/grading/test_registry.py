"""Publish-time rules of the evaluation spec: one test per rule and message (pack-format §7-§9)."""

from __future__ import annotations

import copy

import pytest

from grading.engine import registry
from grading.engine.modelcheck import format_path
from grading.engine.registry import VALIDATOR_TYPES, check_evaluation_spec, validate_evaluation_spec


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


def errors(data):
    _, issues = validate_evaluation_spec(data, lint=False)
    return {(format_path(i.path), i.message) for i in issues if i.severity == "error"}


def issue_at(data, field):
    _, issues = validate_evaluation_spec(data, lint=False)
    [found] = [i for i in issues if format_path(i.path) == field]
    return found


def with_validator(**validator):
    return spec(validators=[validator])


CAPTURE = [{"key": "out", "type": "file_capture", "path": "out.txt"}]
LISTING = [{"key": "tree", "type": "directory_listing", "path": "."}]


def test_the_base_spec_is_valid():
    assert errors(BASE) == set()


# --- validators: keys, targets, expected_from (§7.1) ---------------------------


def test_it_rejects_a_duplicate_validator_key():
    assert errors(spec(validators=[EXACT, dict(EXACT)])) == {("validators[1].key", "must be unique")}


def test_it_rejects_an_unsupported_target_reference():
    assert errors(with_validator(**{**EXACT, "target": "output"})) == {
        ("validators[0].target", "must be a supported evidence reference")
    }


def test_it_rejects_tool_calls_as_the_target_of_a_text_validator():
    assert errors(with_validator(**{**EXACT, "target": "tool_calls"})) == {
        ("validators[0].target", "must be a supported evidence reference")
    }


def test_it_rejects_tool_calls_as_expected_from():
    assert errors(with_validator(**{**EXACT, "expected_from": "tool_calls"})) == {
        ("validators[0].expected_from", "must be a supported evidence reference")
    }


@pytest.mark.parametrize("vtype", ["tool_call_assertion", "tool_trajectory", "skills_trajectory"])
def test_it_requires_tool_calls_as_the_target_of_trajectory_types(vtype):
    config = {"tool_call_assertion": {"tool_name": "a"}, "tool_trajectory": {"expected": []}}.get(
        vtype, {"skills": ["a"]}
    )
    assert (
        "validators[0].target",
        f'must be "tool_calls" for {vtype} validators',
    ) in errors(with_validator(key="t", type=vtype, target="final_output", config=config))


@pytest.mark.parametrize(
    "vtype",
    ["file_exists", "file_content_match", "file_json_schema", "directory_structure", "code_execution"],
)
def test_it_requires_the_file_prefix_for_file_validators(vtype):
    validator = {"key": "f", "type": vtype, "target": "final_output", "expected_from": "literal:x"}
    if vtype == "code_execution":
        validator["config"] = {"test_command": "pytest"}
    assert ("validators[0].target", "must use file: prefix for file validators") in errors(
        with_validator(**validator)
    )


def test_it_requires_the_file_prefix_for_postcondition():
    data = with_validator(
        key="p", type="postcondition", target="final_output", config={"condition": "exists"}
    )
    assert errors(data) == {("validators[0].target", "must use file: prefix for file validators")}


def test_it_rejects_a_blank_file_reference():
    data = with_validator(key="f", type="file_exists", target="file:  ")
    assert errors(data) == {("validators[0].target", "must be a supported evidence reference")}


def test_it_rejects_a_file_reference_to_an_unknown_check_when_checks_exist():
    data = spec(
        validators=[{"key": "f", "type": "contains", "target": "file:report", "expected_from": "literal:x"}],
        post_execution_checks=CAPTURE,
    )
    assert errors(data) == {("validators[0].target", 'references unknown post_execution_check key "report"')}


def test_it_leaves_a_file_reference_to_lint_when_no_check_exists():
    data = with_validator(key="f", type="contains", target="file:report", expected_from="literal:x")
    assert errors(data) == set()


@pytest.mark.parametrize(
    ("vtype", "config"),
    [("code_execution", {"test_command": "pytest"}), ("postcondition", {"condition": "exists"})],
)
def test_it_always_checks_the_file_reference_of_ground_truth_types(vtype, config):
    data = with_validator(key="g", type=vtype, target="file:report", config=config)
    assert errors(data) == {("validators[0].target", 'references unknown post_execution_check key "report"')}


def test_code_execution_must_reference_a_file_capture():
    data = spec(
        validators=[
            {
                "key": "g",
                "type": "code_execution",
                "target": "file:tree",
                "config": {"test_command": "pytest"},
            }
        ],
        post_execution_checks=LISTING,
    )
    assert errors(data) == {("validators[0].target", "must reference a file_capture post_execution_check")}


def test_it_requires_expected_from_at_the_validator_mapping_when_missing():
    data = with_validator(key="ok", type="exact_match", target="final_output")
    issue = issue_at(data, "validators[0].expected_from")
    assert (issue.message, issue.anchor) == ("is required", "parent")


def test_a_blank_expected_from_is_absent_and_required_at_the_validator_mapping():
    # pack-format §2.1: a required string empty after trimming is absent (§3: parent mapping).
    issue = issue_at(with_validator(**{**EXACT, "expected_from": "  "}), "validators[0].expected_from")
    assert (issue.message, issue.anchor) == ("is required", "parent")


def test_it_rejects_an_unsupported_expected_from():
    assert errors(with_validator(**{**EXACT, "expected_from": "expectations.x"})) == {
        ("validators[0].expected_from", "must be a supported evidence reference")
    }


@pytest.mark.parametrize(
    ("vtype", "config", "target"),
    [
        ("postcondition", {"condition": "exists"}, "file:out"),
        ("tool_call_assertion", {"tool_name": "a"}, "tool_calls"),
        ("skills_trajectory", {"skills": ["a"]}, "tool_calls"),
    ],
)
def test_it_requires_expected_from_to_be_omitted(vtype, config, target):
    data = spec(
        validators=[
            {"key": "x", "type": vtype, "target": target, "expected_from": "literal:a", "config": config}
        ],
        post_execution_checks=CAPTURE,
    )
    assert errors(data) == {("validators[0].expected_from", f"must be omitted for {vtype} validators")}


@pytest.mark.parametrize(
    "vtype", ["file_exists", "file_json_schema", "directory_structure", "code_execution"]
)
def test_it_ignores_expected_from_where_upstream_ignores_it(vtype):
    validator = {"key": "f", "type": vtype, "target": "file:out", "expected_from": "anything"}
    if vtype == "code_execution":
        validator["config"] = {"test_command": "pytest"}
    assert errors(spec(validators=[validator], post_execution_checks=CAPTURE)) == set()


@pytest.mark.parametrize(
    ("vtype", "target"),
    [
        ("postcondition", "file:out"),
        ("tool_call_assertion", "tool_calls"),
        ("skills_trajectory", "tool_calls"),
    ],
)
def test_it_requires_a_config_for_types_that_need_one(vtype, target):
    data = spec(validators=[{"key": "x", "type": vtype, "target": target}], post_execution_checks=CAPTURE)
    issue = issue_at(data, "validators[0].config")
    assert (issue.message, issue.anchor) == ("is required", "parent")


# --- tool_call_assertion (§7.1, grading.md §3.6) -------------------------------


def tca(config):
    return with_validator(key="t", type="tool_call_assertion", target="tool_calls", config=config)


def test_it_accepts_the_v1_tool_call_assertion():
    assert (
        errors(tca({"tool_name": "run_tests", "min_count": 2, "arguments_contain": {"path": "tests/"}}))
        == set()
    )


def test_it_rejects_count_with_min_count():
    assert errors(tca({"tool_name": "a", "count": 1, "min_count": 1})) == {
        ("validators[0].config.count", "cannot be combined with min_count or max_count")
    }


def test_it_rejects_count_with_max_count():
    assert errors(tca({"tool_name": "a", "count": 1, "max_count": 3})) == {
        ("validators[0].config.count", "cannot be combined with min_count or max_count")
    }


def test_it_rejects_min_count_above_max_count():
    assert errors(tca({"tool_name": "a", "min_count": 3, "max_count": 1})) == {
        ("validators[0].config.min_count", "must be less than or equal to max_count")
    }


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"must_call": True, "count": 0}, "cannot be true when count is 0"),
        ({"must_call": True, "max_count": 0}, "cannot be true when max_count is 0"),
        ({"must_call": False, "count": 2}, "cannot be false when count is greater than 0"),
        ({"must_call": False, "min_count": 1}, "cannot be false when min_count is greater than 0"),
    ],
)
def test_it_rejects_must_call_disagreeing_with_the_counts(config, message):
    assert errors(tca({"tool_name": "a", **config})) == {("validators[0].config.must_call", message)}


def test_it_rejects_empty_names_in_ordered_tools():
    assert errors(tca({"ordered_tools": ["a", " "]})) == {
        ("validators[0].config.ordered_tools[1]", "must not be empty")
    }


def test_it_rejects_order_mode_without_ordered_tools():
    assert errors(tca({"tool_name": "a", "order_mode": "exact"})) == {
        ("validators[0].config.ordered_tools", "is required when order_mode is set")
    }


def test_it_rejects_a_tool_call_assertion_without_assertions():
    assert errors(tca({"include_failed": True})) == {
        ("validators[0].config", "must declare at least one tool call assertion")
    }
    assert errors(tca({})) == {("validators[0].config", "must declare at least one tool call assertion")}


def test_it_does_not_cascade_a_bad_count_into_combination_rules():
    assert errors(tca({"tool_name": "a", "count": "2", "min_count": 1})) == {
        ("validators[0].config.count", "must be an integer")
    }


# --- postcondition (§7.1, grading.md §3.5) ---------------------------------------


def post(config):
    return spec(
        validators=[{"key": "p", "type": "postcondition", "target": "file:out", "config": config}],
        post_execution_checks=CAPTURE,
    )


@pytest.mark.parametrize(
    "config",
    [
        {"condition": "exists"},
        {"condition": "not_exists"},
        {"condition": "contains", "value": "x"},
        {"condition": "regex_match", "value": "^a+$"},
        {"condition": "equals", "value": {"a": 1}},
        {"condition": "equals", "value": None},
        {"condition": "json_path_match", "json_path": "$.total", "value": 1280.5},
    ],
)
def test_it_accepts_well_formed_postconditions(config):
    assert errors(post(config)) == set()


def test_it_rejects_a_value_for_exists():
    assert errors(post({"condition": "exists", "value": "x"})) == {
        ("validators[0].config.value", "must be omitted for exists")
    }


def test_it_rejects_json_path_outside_json_path_match():
    assert errors(post({"condition": "equals", "value": 1, "json_path": "$.a"})) == {
        ("validators[0].config.json_path", "must be omitted for equals")
    }


@pytest.mark.parametrize(
    "condition", ["contains", "not_contains", "regex_match", "equals", "json_path_match"]
)
def test_it_requires_a_value_for_conditions_that_compare(condition):
    config = {"condition": condition}
    if condition == "json_path_match":
        config["json_path"] = "$.a"
    issue = issue_at(post(config), "validators[0].config.value")
    assert (issue.message, issue.anchor) == ("is required", "parent")


def test_it_requires_a_string_value_for_contains():
    assert errors(post({"condition": "contains", "value": 3})) == {
        ("validators[0].config.value", "must be a string")
    }


def test_it_requires_a_string_regex_for_regex_match():
    assert errors(post({"condition": "regex_match", "value": 3})) == {
        ("validators[0].config.value", "must be a string regex pattern")
    }


def test_it_compiles_a_postcondition_regex_with_re2():
    issue = issue_at(post({"condition": "regex_match", "value": "(?<=a)b"}), "validators[0].config.value")
    assert issue.message == "must be a valid RE2 pattern"
    assert issue.detail


def test_it_requires_json_path_for_json_path_match():
    assert errors(post({"condition": "json_path_match", "value": 1})) == {
        ("validators[0].config.json_path", "is required")
    }


def test_it_rejects_a_wildcard_postcondition_json_path():
    issue = issue_at(
        post({"condition": "json_path_match", "json_path": "$.items[*].id", "value": 1}),
        "validators[0].config.json_path",
    )
    assert issue.message == "must be a supported JSON path ($, .name, ['name'], [N])"
    assert "wildcard" in issue.detail


# --- numeric_match, normalized_match ------------------------------------------------


def typed(vtype, config, expected_from="literal:1"):
    return with_validator(
        key="n", type=vtype, target="final_output", expected_from=expected_from, config=config
    )


def test_it_rejects_mixing_legacy_and_current_tolerances():
    assert errors(typed("numeric_match", {"tolerance": 0.1, "absolute_tolerance": 0.2})) == {
        ("validators[0].config.tolerance", "cannot be combined with absolute_tolerance or relative_tolerance")
    }
    assert errors(typed("numeric_match", {"tolerance_mode": "absolute", "relative_tolerance": 0.2})) == {
        (
            "validators[0].config.tolerance_mode",
            "cannot be combined with absolute_tolerance or relative_tolerance",
        )
    }


def test_it_accepts_the_legacy_tolerance_pair_alone():
    assert errors(typed("numeric_match", {"tolerance": 0.1, "tolerance_mode": "absolute"})) == set()


def test_it_rejects_pipeline_combined_with_normalizations():
    assert errors(typed("normalized_match", {"pipeline": ["trim"], "normalizations": ["lowercase"]})) == {
        ("validators[0].config.normalizations", "cannot be combined with pipeline")
    }


def test_it_rejects_an_unsupported_normalization_step():
    assert errors(typed("normalized_match", {"pipeline": ["trim", "stem"]})) == {
        ("validators[0].config.pipeline[1]", '"stem" is not a supported normalization step')
    }
    assert errors(typed("normalized_match", {"normalizations": ["upper"]})) == {
        ("validators[0].config.normalizations[0]", '"upper" is not a supported normalization step')
    }


# --- json_path_match literal expectations (grading.md §3.2) -------------------------


@pytest.mark.parametrize(
    "literal",
    [
        "$.total",
        "$",
        '{"path": "$.items[1].id", "value": 9.0}',
        '{"path": "$[\'a b\']", "comparator": "contains", "value": "x"}',
    ],
)
def test_it_accepts_supported_json_path_expectations(literal):
    assert errors(typed("json_path_match", None, "literal:" + literal)) == set()


@pytest.mark.parametrize(
    ("literal", "message"),
    [
        ("$.items[*]", "must be a supported JSON path ($, .name, ['name'], [N])"),
        ("$..id", "must be a supported JSON path ($, .name, ['name'], [N])"),
        ("$.items[0:2]", "must be a supported JSON path ($, .name, ['name'], [N])"),
        ("$.items[?(@.id > 1)]", "must be a supported JSON path ($, .name, ['name'], [N])"),
        ('{"path": "$.a[*]"}', "must be a supported JSON path ($, .name, ['name'], [N])"),
        (
            '{"path": "$.a", "comparator": "matches"}',
            "comparator must be one of exists, equals, contains, greater_than, less_than",
        ),
        ("total", "must be a JSON path ($...) or a {path, comparator, value} object"),
        ('{"comparator": "equals"}', "must be a JSON path ($...) or a {path, comparator, value} object"),
    ],
)
def test_it_rejects_unsupported_json_path_expectations(literal, message):
    assert errors(typed("json_path_match", None, "literal:" + literal)) == {
        ("validators[0].expected_from", message)
    }


def test_it_leaves_a_case_json_path_expectation_to_the_per_case_check():
    assert errors(typed("json_path_match", None, "case.expectations.path")) == set()


# --- static RE2 (§9) -----------------------------------------------------------------


def test_it_reports_a_backreference_as_an_invalid_re2_pattern():
    issue = issue_at(typed("regex_match", None, r"literal:(\w+) \1"), "validators[0].expected_from")
    assert issue.message == "must be a valid RE2 pattern"
    assert "\\1" in issue.detail
    assert "RE2 has no backreferences" in issue.detail  # the hint, not only RE2's text


def test_it_compiles_regex_match_literals_with_their_flags():
    assert errors(typed("regex_match", {"flags": "im"}, r"literal:^total:\s+\d+$")) == set()


def test_it_compiles_file_content_match_literals_in_regex_mode_only():
    validator = {
        "key": "f",
        "type": "file_content_match",
        "target": "file:out",
        "expected_from": "literal:(?=x)",
    }
    data = spec(validators=[{**validator, "config": {"match_mode": "regex"}}], post_execution_checks=CAPTURE)
    assert errors(data) == {("validators[0].expected_from", "must be a valid RE2 pattern")}
    data = spec(validators=[validator], post_execution_checks=CAPTURE)
    assert errors(data) == set()


# --- trajectory matchers (grading.md §4) --------------------------------------------


def skills(config):
    return with_validator(key="s", type="skills_trajectory", target="tool_calls", config=config)


def test_it_accepts_every_skill_requirement_shape():
    config = {"skills": ["a", 3, {"skill": "b"}, {"tool": "Read"}, {"tool": "Bash", "args": {"cmd": "ls"}}]}
    assert errors(skills({**config, "match_type": "in_order"})) == set()


def test_it_rejects_an_empty_skills_list():
    assert errors(skills({"skills": []})) == {
        ("validators[0].config.skills", "must contain at least one skill")
    }


@pytest.mark.parametrize("entry", [{"skill": "a", "tool": "b"}, {"name": "a"}, {"skill": ""}, [], None, " "])
def test_it_rejects_an_invalid_skill_entry(entry):
    assert errors(skills({"skills": ["ok", entry]})) == {
        ("validators[0].config.skills[1]", "must be a skill name, {skill: name} or {tool: name, args: {...}}")
    }


def test_it_rejects_an_unsupported_skills_match_type():
    assert errors(skills({"skills": ["a"], "match_type": "SUBSET"})) == {
        ("validators[0].config.match_type", "must be one of ANY_ORDER, IN_ORDER, EXACT")
    }


def trajectory(config=None, **extra):
    return with_validator(key="t", type="tool_trajectory", target="tool_calls", config=config, **extra)


def test_it_accepts_tool_trajectory_expectations_in_both_shapes():
    assert errors(trajectory({"expected": [{"name": "a"}, {"name": "b", "args": {"x": 1}}]})) == set()
    assert errors(trajectory({"expected": [[{"name": "a"}], []], "match_type": "any_order"})) == set()
    assert errors(trajectory(expected_from="case.expectations.calls")) == set()


def test_it_requires_expected_or_expected_from_for_tool_trajectory():
    issue = issue_at(trajectory(), "validators[0].expected_from")
    assert (issue.message, issue.anchor) == ("is required unless config.expected is set", "parent")


def test_it_rejects_expected_from_together_with_config_expected():
    assert errors(trajectory({"expected": []}, expected_from="literal:[]")) == {
        ("validators[0].expected_from", "must be omitted when config.expected is set")
    }


def test_it_rejects_malformed_expected_tool_calls():
    assert errors(trajectory({"expected": [{"name": "a"}, {"tool": "b"}]})) == {
        ("validators[0].config.expected[1]", "must be a tool call {name, args}")
    }
    assert errors(trajectory({"expected": [[{"name": ""}]]})) == {
        ("validators[0].config.expected[0][0]", "must be a tool call {name, args}")
    }
    assert errors(trajectory({"expected": [{"name": "a"}, [{"name": "b"}]]})) == {
        (
            "validators[0].config.expected",
            "must be a list of tool calls or a list of invocations (lists of tool calls)",
        )
    }


def test_it_rejects_an_unsupported_trajectory_match_type():
    assert errors(trajectory({"expected": [], "match_type": "FUZZY"})) == {
        ("validators[0].config.match_type", "must be one of ANY_ORDER, IN_ORDER, EXACT")
    }


# --- checks, metrics, behavioral, pricing (§7.2) --------------------------------------


def test_it_rejects_duplicate_check_keys():
    data = spec(post_execution_checks=CAPTURE + [{"key": "out", "type": "file_capture", "path": "b"}])
    assert errors(data) == {("post_execution_checks[1].key", "must be unique")}


def test_it_rejects_duplicate_metric_keys():
    metric = {"key": "m", "type": "numeric", "collector": "run_ttft_ms"}
    assert errors(spec(metrics=[metric, metric])) == {("metrics[1].key", "must be unique")}


def test_it_rejects_the_confidence_calibration_collector():
    data = spec(
        metrics=[{"key": "m", "type": "numeric", "collector": "behavioral_confidence_calibration_score"}]
    )
    assert errors(data) == {("metrics[0].collector", "is not supported until confidence reporting lands")}


def test_it_accepts_an_unknown_collector_at_publish():
    assert errors(spec(metrics=[{"key": "m", "type": "numeric", "collector": "my_metric"}])) == set()


def test_it_rejects_duplicate_signal_keys():
    signal = {"key": "error_cascade", "weight": 1}
    assert errors(spec(behavioral={"signals": [signal, signal]})) == {
        ("behavioral.signals[1].key", "must be unique")
    }


def test_it_requires_a_pass_threshold_on_a_gated_signal():
    issue = issue_at(
        spec(behavioral={"signals": [{"key": "scope_adherence", "weight": 1, "gate": True}]}),
        "behavioral.signals[0].pass_threshold",
    )
    assert (issue.message, issue.anchor) == ("is required when the signal is gated", "parent")


def test_it_rejects_duplicate_pricing_models():
    model = {"provider_key": "openai", "provider_model_id": "gpt-4o"}
    assert errors(spec(pricing={"models": [model, model]})) == {
        ("pricing.models[1]", "must be unique by provider_key and provider_model_id")
    }


# --- judges (§7.3) --------------------------------------------------------------------

RUBRIC = {"key": "j", "mode": "rubric", "model": "claude-haiku-4-5", "rubric": "Score 1-5."}


def judged(*judges, **changes):
    dims = changes.pop(
        "dimensions",
        ["correctness"]
        + [
            {"key": f"d{i}", "source": "llm_judge", "judge_key": j["key"]}
            for i, j in enumerate(judges)
            if "key" in j
        ],
    )
    return spec(
        judge_mode="hybrid",
        llm_judges=list(judges),
        scorecard={"pass_threshold": 0.5, "dimensions": dims},
        **changes,
    )


def test_a_valid_judge_passes():
    assert errors(judged(RUBRIC)) == set()


def test_it_rejects_duplicate_judge_keys():
    assert errors(judged(RUBRIC, RUBRIC)) == {("llm_judges[1].key", "must be unique")}


def test_it_rejects_a_judge_key_equal_to_a_validator_key():
    assert ("llm_judges[0].key", 'collides with validator key "v"') in errors(judged({**RUBRIC, "key": "v"}))


def test_it_rejects_a_judge_key_equal_to_a_metric_key():
    data = judged(
        {**RUBRIC, "key": "m"}, metrics=[{"key": "m", "type": "numeric", "collector": "run_ttft_ms"}]
    )
    assert ("llm_judges[0].key", 'collides with metric key "m"') in errors(data)


@pytest.mark.parametrize(
    ("judge", "field", "message"),
    [
        ({"mode": "rubric"}, "rubric", "is required for rubric mode"),
        (
            {"mode": "reference", "reference_from": "case.expectations.r"},
            "rubric",
            "is required for reference mode",
        ),
        ({"mode": "reference", "rubric": "r"}, "reference_from", "is required for reference mode"),
        ({"mode": "assertion"}, "assertion", "is required for assertion mode"),
        ({"mode": "n_wise"}, "prompt", "is required for n_wise mode"),
    ],
)
def test_it_requires_the_text_of_each_judge_mode(judge, field, message):
    data = judged({"key": "j", "model": "gpt-4o", **judge})
    assert errors(data) == {(f"llm_judges[0].{field}", message)}


def test_it_requires_a_model_or_models():
    issue = issue_at(judged({**RUBRIC, "model": None}), "llm_judges[0].model")
    assert (issue.message, issue.anchor) == ("must set exactly one of model or models", "parent")


def test_it_rejects_model_together_with_models():
    assert errors(judged({**RUBRIC, "models": ["gpt-4o"]})) == {
        ("llm_judges[0].models", "must set exactly one of model or models, not both")
    }


def test_it_rejects_a_model_without_a_known_provider():
    message = "must be inferable to a known judge provider (claude-*, gpt-*, gemini-*, grok-*, mistral-*, openrouter/* slugs)"
    assert errors(judged({**RUBRIC, "model": "llama-3"})) == {("llm_judges[0].model", message)}
    data = judged(
        {**RUBRIC, "model": None, "models": ["gpt-4o", "llama-3"], "consensus": {"aggregation": "median"}}
    )
    assert errors(data) == {("llm_judges[0].models[1]", message)}


def test_it_rejects_a_blank_model_in_models():
    data = judged({**RUBRIC, "model": None, "models": ["gpt-4o", " "], "consensus": {"aggregation": "mean"}})
    assert errors(data) == {("llm_judges[0].models[1]", "must be a non-empty model identifier")}


def test_it_requires_consensus_with_several_models():
    issue = issue_at(
        judged({**RUBRIC, "model": None, "models": ["gpt-4o", "claude-x"]}), "llm_judges[0].consensus"
    )
    assert (issue.message, issue.anchor) == ("is required when multiple models are declared", "parent")


def test_it_rejects_consensus_with_a_single_model():
    assert errors(judged({**RUBRIC, "consensus": {"aggregation": "median"}})) == {
        ("llm_judges[0].consensus", "is only valid when multiple models are declared")
    }


def test_it_rejects_a_numeric_aggregation_for_assertions():
    judge = {"key": "a", "mode": "assertion", "assertion": "polite", "models": ["gpt-4o", "claude-x"]}
    assert errors(judged({**judge, "consensus": {"aggregation": "median"}})) == {
        (
            "llm_judges[0].consensus.aggregation",
            '"median" aggregation is only valid for numeric modes (rubric, reference, n_wise)',
        )
    }
    assert errors(judged({**judge, "consensus": {"aggregation": "majority_vote"}})) == set()
    assert errors(judged({**judge, "consensus": {"aggregation": "unanimous"}})) == set()


def test_it_rejects_majority_vote_for_numeric_modes():
    data = judged(
        {
            **RUBRIC,
            "model": None,
            "models": ["gpt-4o", "claude-x"],
            "consensus": {"aggregation": "majority_vote"},
        }
    )
    assert errors(data) == {
        ("llm_judges[0].consensus.aggregation", "majority_vote aggregation is only valid for assertion mode")
    }


def test_it_rejects_unsupported_judge_references():
    data = judged({**RUBRIC, "context_from": ["final_output", "transcript"], "reference_from": "gold"})
    assert errors(data) == {
        ("llm_judges[0].context_from[1]", "must be a supported evidence reference"),
        ("llm_judges[0].reference_from", "must be a supported evidence reference"),
    }


def test_it_rejects_an_invalid_output_schema():
    issue = issue_at(judged({**RUBRIC, "output_schema": {"type": "thing"}}), "llm_judges[0].output_schema")
    assert issue.message == "must be a valid JSON Schema"
    assert issue.detail


def test_it_rejects_an_output_schema_of_an_unsupported_draft():
    schema = {"$schema": "http://json-schema.org/draft-04/schema#", "type": "object"}
    assert errors(judged({**RUBRIC, "output_schema": schema})) == {
        ("llm_judges[0].output_schema", "must be a valid JSON Schema")
    }


def test_an_output_schema_pattern_must_be_re2():
    # §3.1: the engine runs an output_schema's patterns on every judge answer, with RE2
    schema = {"type": "object", "properties": {"why": {"type": "string", "pattern": "(?<=a)b"}}}
    issue = issue_at(judged({**RUBRIC, "output_schema": schema}), "llm_judges[0].output_schema")
    assert issue.message == "must be a valid JSON Schema"
    assert "properties/why/pattern" in issue.detail and "not a valid RE2 pattern" in issue.detail
    schema["properties"]["why"]["pattern"] = "^\\p{L}+$"  # RE2 (and ECMA) syntax Python's re lacks
    assert errors(judged({**RUBRIC, "output_schema": schema})) == set()


def test_it_accepts_draft_07_and_2020_12_output_schemas():
    for draft in ("http://json-schema.org/draft-07/schema#", "https://json-schema.org/draft/2020-12/schema"):
        assert errors(judged({**RUBRIC, "output_schema": {"$schema": draft, "type": "object"}})) == set()


@pytest.mark.parametrize("field", ["rubric", "assertion", "prompt"])
def test_it_rejects_secrets_in_judge_prompt_text(field):
    judge = {
        "key": "j",
        "mode": "rubric",
        "model": "gpt-4o",
        "rubric": "r",
        field: "Use ${ secrets.API_KEY } here",
    }
    assert (
        f"llm_judges[0].{field}",
        "must not contain ${secrets.*} references; secrets are not allowed in judge prompt text",
    ) in errors(judged(judge))


def test_it_rejects_judges_when_judge_mode_is_deterministic():
    assert ("llm_judges", "must be empty when judge_mode is deterministic") in errors(
        {**judged(RUBRIC), "judge_mode": "deterministic"}
    )


@pytest.mark.parametrize("mode", ["llm_judge", "hybrid"])
def test_it_requires_a_judge_when_judge_mode_uses_judges(mode):
    issue = issue_at(spec(judge_mode=mode), "llm_judges")
    assert (issue.message, issue.anchor) == (
        f"must contain at least one judge when judge_mode is {mode}",
        "parent",
    )


# --- scorecard (§7.4) -----------------------------------------------------------------


def scored(*dims, **scorecard):
    return spec(scorecard={"pass_threshold": 1, "dimensions": list(dims), **scorecard})


VDIM = {"key": "c", "source": "validators"}


def test_it_rejects_duplicate_dimension_keys():
    assert errors(scored(VDIM, VDIM)) == {("scorecard.dimensions[1].key", "must be unique")}
    assert errors(scored("correctness", "correctness")) == {("scorecard.dimensions[1]", "must be unique")}


def test_it_requires_a_source_unless_the_key_is_a_legacy_name():
    assert errors(scored({"key": "quality"})) == {("scorecard.dimensions[0].source", "is required")}
    assert errors(scored({"key": "correctness", "weight": 2})) == set()


def test_it_rejects_an_unknown_validator_in_a_dimension():
    assert errors(scored({**VDIM, "validators": ["v", "w"]})) == {
        ("scorecard.dimensions[0].validators[1]", 'references unknown validator key "w"')
    }


def test_it_requires_a_metric_and_normalization_for_metric_dimensions():
    issues = errors(scored({"key": "m", "source": "metric", "better_direction": "lower"}))
    assert issues == {
        ("scorecard.dimensions[0].metric", "is required when source is metric"),
        ("scorecard.dimensions[0].normalization", "is required when source is metric"),
    }


def test_it_rejects_an_unknown_metric_in_a_dimension():
    data = scored(
        {
            "key": "m",
            "source": "metric",
            "metric": "calls",
            "better_direction": "lower",
            "normalization": {"target": 1, "max": 5},
        }
    )
    assert errors(data) == {("scorecard.dimensions[0].metric", 'references unknown metric key "calls"')}


@pytest.mark.parametrize("source", ["latency", "cost"])
def test_it_requires_normalization_for_latency_and_cost(source):
    assert errors(scored({"key": "x", "source": source, "better_direction": "lower"})) == {
        ("scorecard.dimensions[0].normalization", f"is required when source is {source}")
    }


def test_it_requires_the_behavioral_block_for_a_behavioral_dimension():
    issue = issue_at(scored({"key": "b", "source": "behavioral"}), "behavioral")
    assert (issue.message, issue.anchor) == (
        "is required when a scorecard dimension uses source behavioral",
        "parent",
    )
    assert ("behavioral", "is required when a scorecard dimension uses source behavioral") in errors(
        scored("behavioral")
    )


def test_it_requires_a_judge_key_for_llm_judge_dimensions():
    assert ("scorecard.dimensions[1].judge_key", "is required when source is llm_judge") in errors(
        judged(RUBRIC, dimensions=["correctness", {"key": "q", "source": "llm_judge"}])
    )


def test_it_rejects_an_unknown_judge_key():
    data = judged(RUBRIC, dimensions=[{"key": "q", "source": "llm_judge", "judge_key": "jj"}])
    assert errors(data) == {("scorecard.dimensions[0].judge_key", 'references unknown judge key "jj"')}


def test_it_rejects_a_judge_key_on_another_source():
    assert errors(scored({**VDIM, "judge_key": "j"})) == {
        ("scorecard.dimensions[0].judge_key", "must be empty unless source is llm_judge")
    }


@pytest.mark.parametrize("source", ["validators", "reliability"])
def test_it_requires_higher_for_quality_sources(source):
    assert errors(scored({"key": "c", "source": source, "better_direction": "lower"})) == {
        ("scorecard.dimensions[0].better_direction", f'must be "higher" for {source} source (got "lower")')
    }


def test_it_requires_a_direction_for_normalized_sources():
    issue = issue_at(
        scored({"key": "s", "source": "latency", "normalization": {"target": 1000, "max": 5000}}),
        "scorecard.dimensions[0].better_direction",
    )
    assert (issue.message, issue.anchor) == ("must be higher or lower", "parent")
    assert errors(
        scored(
            {
                "key": "s",
                "source": "cost",
                "better_direction": "down",
                "normalization": {"target": 1, "max": 2},
            }
        )
    ) == {("scorecard.dimensions[0].better_direction", "must be higher or lower")}


def test_it_requires_max_above_target_when_lower_is_better():
    data = scored(
        {
            "key": "s",
            "source": "latency",
            "better_direction": "lower",
            "normalization": {"target": 5000, "max": 1000},
        }
    )
    assert errors(data) == {
        (
            "scorecard.dimensions[0].normalization.max",
            "must be greater than target when better_direction is lower",
        )
    }


def test_it_requires_max_below_target_when_higher_is_better():
    data = scored(
        {"key": "s", "source": "cost", "better_direction": "higher", "normalization": {"target": 1, "max": 2}}
    )
    assert errors(data) == {
        (
            "scorecard.dimensions[0].normalization.max",
            "must be less than target when better_direction is higher",
        )
    }


def test_it_requires_normalization_target_and_max():
    data = scored({"key": "s", "source": "latency", "better_direction": "lower", "normalization": {}})
    assert errors(data) == {
        ("scorecard.dimensions[0].normalization.target", "is required"),
        ("scorecard.dimensions[0].normalization.max", "is required"),
    }


def test_it_requires_a_pass_threshold_on_a_gated_dimension():
    issue = issue_at(scored({**VDIM, "gate": True}), "scorecard.dimensions[0].pass_threshold")
    assert (issue.message, issue.anchor) == (
        "is required when the dimension is gated or strategy is binary",
        "parent",
    )


def test_it_requires_a_pass_threshold_on_every_binary_dimension():
    data = spec(
        scorecard={
            "strategy": "binary",
            "dimensions": [VDIM, "reliability", {"key": "r", "source": "reliability", "pass_threshold": 1}],
        }
    )
    assert errors(data) == {
        (
            "scorecard.dimensions[0].pass_threshold",
            "is required when the dimension is gated or strategy is binary",
        ),
        (
            "scorecard.dimensions[1].pass_threshold",
            "is required when the dimension is gated or strategy is binary",
        ),
    }


def test_it_rejects_a_scorecard_pass_threshold_under_binary():
    data = spec(
        scorecard={"strategy": "binary", "pass_threshold": 0.5, "dimensions": [{**VDIM, "pass_threshold": 1}]}
    )
    assert errors(data) == {
        (
            "scorecard.pass_threshold",
            "must not be set for binary strategy; use per-dimension pass_threshold instead",
        )
    }


def test_it_requires_a_gate_under_hybrid():
    assert errors(spec(scorecard={"strategy": "hybrid", "dimensions": [VDIM]})) == {
        ("scorecard.strategy", "hybrid strategy requires at least one gated dimension")
    }
    gated = {**VDIM, "gate": True, "pass_threshold": 1}
    assert errors(spec(scorecard={"strategy": "hybrid", "dimensions": [gated]})) == set()


def test_legacy_latency_needs_the_scorecard_normalization_block():
    issue = issue_at(scored("latency"), "scorecard.normalization.latency")
    assert (issue.message, issue.anchor) == ("is required when the latency dimension is enabled", "parent")


def test_legacy_latency_needs_target_ms_and_a_max():
    assert errors(scored("latency", normalization={"latency": {}})) == {
        ("scorecard.normalization.latency.target_ms", "is required"),
        (
            "scorecard.normalization.latency.max_ms",
            "is required when runtime_limits.max_duration_ms is not set",
        ),
    }


def test_legacy_latency_takes_its_max_from_the_runtime_limit():
    data = scored("latency", normalization={"latency": {"target_ms": 100}})
    data["runtime_limits"] = {"max_duration_ms": 5000}
    assert errors(data) == set()


def test_legacy_cost_max_must_exceed_its_target():
    assert errors(scored("cost", normalization={"cost": {"target_usd": 1, "max_usd": 0.5}})) == {
        ("scorecard.normalization.cost.max_usd", "must be greater than target_usd")
    }


# --- rules (grading.md §5.1, §5.2) ---------------------------------------------------------


def ruled(job=(), tasks=()):
    return spec(rules={"job": list(job), "tasks": list(tasks)})


def test_it_accepts_the_v2_and_v3_rules():
    rule = {
        "label": "no rm -rf /",
        "validator": "pattern_match",
        "where": "executed_commands",
        "pattern": r"rm\s+-rf\s+/",
        "negate": True,
    }
    job = [
        {"label": "resolved", "validator": "job_resolution_status", "pattern": "success|partial"},
        {"label": "plans", "validator": "task_count", "min": 1, "max": 5},
        {
            "label": "summary",
            "validator": "pattern_match",
            "where": "job_resolution",
            "pattern": "done",
            "required": False,
        },
    ]
    assert errors(ruled(job=job, tasks=[rule])) == set()


def test_it_requires_where_and_pattern_for_pattern_match():
    data = ruled(job=[{"label": "x", "validator": "pattern_match"}])
    assert errors(data) == {
        ("rules.job[0].where", "is required for pattern_match rules"),
        ("rules.job[0].pattern", "is required for pattern_match rules"),
    }


def test_it_requires_a_task_level_field_in_tasks_rules():
    data = ruled(
        tasks=[{"label": "x", "validator": "pattern_match", "where": "job_resolution", "pattern": "a"}]
    )
    assert errors(data) == {
        (
            "rules.tasks[0].where",
            "must be a task-level field in tasks rules (executed_commands, task_summary, task_description, "
            "task_plan, agent_messages, operational_rules)",
        )
    }


@pytest.mark.parametrize("validator", ["job_resolution_status", "task_count"])
def test_it_allows_job_validators_only_in_job_rules(validator):
    rule = {"label": "x", "validator": validator, "pattern": "a", "min": 1}
    assert ("rules.tasks[0].validator", "is only valid in job rules") in errors(ruled(tasks=[rule]))


def test_it_compiles_rule_patterns_with_re2():
    data = ruled(job=[{"label": "x", "validator": "pattern_match", "where": "job_plan", "pattern": "(a)\\1"}])
    issue = issue_at(data, "rules.job[0].pattern")
    assert issue.message == "must be a valid RE2 pattern"


def test_it_requires_a_pattern_for_job_resolution_status():
    assert errors(ruled(job=[{"label": "x", "validator": "job_resolution_status"}])) == {
        ("rules.job[0].pattern", "is required for job_resolution_status rules")
    }


def test_it_requires_a_task_count_bound():
    assert errors(ruled(job=[{"label": "x", "validator": "task_count"}])) == {
        ("rules.job[0]", "must set min or max for task_count rules")
    }


def test_it_rejects_task_count_min_above_max():
    assert errors(ruled(job=[{"label": "x", "validator": "task_count", "min": 4, "max": 2}])) == {
        ("rules.job[0].min", "must be less than or equal to max")
    }


# --- robustness -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw", [None, [], "spec", 3, {"validators": "x", "scorecard": [], "llm_judges": {}, "rules": 1}]
)
def test_check_evaluation_spec_never_raises_on_garbage(raw):
    assert isinstance(check_evaluation_spec(raw), list)


def test_it_skips_rules_under_bad_paths():
    data = with_validator(key="ok", type="exact_match", target="output")
    assert check_evaluation_spec(data, bad_paths=frozenset({("validators", 0)})) == []
    issues = check_evaluation_spec(data, bad_paths=frozenset({("validators", 0, "target")}))
    assert [format_path(i.path) for i in issues] == ["validators[0].expected_from"]


def test_an_unknown_validator_type_skips_its_type_rules():
    data = with_validator(key="x", type="semantic", target="output")
    assert errors(data) == {("validators[0].type", "is not a supported validator type")}


# --- the registry -----------------------------------------------------------------------


def test_the_registry_describes_every_type():
    assert len(VALIDATOR_TYPES) == 23
    lenient = {name for name, vt in VALIDATOR_TYPES.items() if vt.lenient_config}
    assert lenient == {"file_exists", "file_content_match", "file_json_schema", "directory_structure"}
    assert VALIDATOR_TYPES["postcondition"].expected_from == "omitted"
    assert VALIDATOR_TYPES["tool_trajectory"].expected_from == "optional"
    assert VALIDATOR_TYPES["file_exists"].expected_from == "ignored"
    assert VALIDATOR_TYPES["exact_match"].expected_from == "required"
    assert VALIDATOR_TYPES["code_execution"].needs_file_capture
    assert {n for n, vt in VALIDATOR_TYPES.items() if vt.ground_truth} == {"code_execution", "postcondition"}
    assert {n for n, vt in VALIDATOR_TYPES.items() if vt.target == "tool_calls"} == {
        "tool_call_assertion",
        "tool_trajectory",
        "skills_trajectory",
    }


def test_a_type_check_runs_standalone():
    issues = VALIDATOR_TYPES["tool_call_assertion"].check(
        {
            "key": "t",
            "type": "tool_call_assertion",
            "target": "final_output",
            "config": {"count": 1, "min_count": 0},
        },
        ("validators", 3),
    )
    assert {(format_path(i.path), i.message) for i in issues} == {
        ("validators[3].target", 'must be "tool_calls" for tool_call_assertion validators'),
        ("validators[3].config.count", "cannot be combined with min_count or max_count"),
    }


def test_a_type_exposes_its_grade_function_when_one_is_registered():
    grade = VALIDATOR_TYPES["exact_match"].grade
    assert grade is None or callable(grade)


def test_it_compiles_config_fields_marked_as_regex():
    from grading.engine.configs.fields import RegexText
    from grading.engine.configs.models import ConfigModel
    from grading.engine.registry import ValidatorType

    class PatternConfig(ConfigModel):
        pattern: RegexText | None = None

    vtype = ValidatorType("pattern_probe", PatternConfig)
    validator = {"key": "p", "type": "pattern_probe", "target": "final_output", "expected_from": "literal:x"}
    issues = vtype.check({**validator, "config": {"pattern": "a(?=b)"}})
    assert [(format_path(i.path), i.message) for i in issues] == [
        ("config.pattern", "must be a valid RE2 pattern")
    ]
    assert vtype.check({**validator, "config": {"pattern": "a+b"}}) == []
