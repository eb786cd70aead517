"""The evaluation-spec models: keys, defaults and single-field value rules (pack-format §5.4, §7)."""

from __future__ import annotations

import copy

import pytest

from grading.engine.configs import (
    CONFIG_MODELS,
    LENIENT_TYPES,
    CodeExecutionConfig,
    NormalizedMatchConfig,
    NumericMatchConfig,
    ToolCallAssertionConfig,
    config_model_for,
)
from grading.engine.modelcheck import check_model, format_path
from grading.engine.spec import EvaluationSpec, judge_provider_for

BASE = {
    "name": "demo",
    "version_number": 1,
    "judge_mode": "deterministic",
    "validators": [
        {"key": "v", "type": "exact_match", "target": "final_output", "expected_from": "literal:x"}
    ],
    "scorecard": {"dimensions": ["correctness"]},
}


def spec_with(**changes):
    data = copy.deepcopy(BASE)
    data.update(changes)
    return data


def issues_of(data):
    return {(format_path(issue.path), issue.message) for issue in check_model(EvaluationSpec, data).issues}


def validator(config, vtype="exact_match", **extra):
    return spec_with(
        validators=[{"key": "v", "type": vtype, "target": "final_output", "config": config, **extra}]
    )


def test_it_validates_a_minimal_spec():
    result = check_model(EvaluationSpec, BASE)
    assert result.issues == []
    assert isinstance(result.instance, EvaluationSpec)


def test_it_requires_name_version_number_judge_mode_and_scorecard():
    assert issues_of({"validators": BASE["validators"]}) == {
        ("name", "is required"),
        ("version_number", "is required"),
        ("judge_mode", "is required"),
        ("scorecard", "is required"),
    }


def test_it_rejects_a_version_number_of_zero():
    assert issues_of(spec_with(version_number=0)) == {("version_number", "must be greater than 0")}


def test_it_rejects_an_unknown_judge_mode():
    assert issues_of(spec_with(judge_mode="mixed")) == {
        ("judge_mode", "must be one of deterministic, llm_judge, hybrid")
    }


def test_it_requires_at_least_one_validator_even_when_the_key_is_missing():
    data = spec_with()
    del data["validators"]
    assert issues_of(data) == {("validators", "must contain at least one validator")}
    assert issues_of(spec_with(validators=[])) == {("validators", "must contain at least one validator")}


def test_it_rejects_an_unsupported_validator_type():
    data = spec_with(validators=[{"key": "v", "type": "semantic_match", "target": "final_output"}])
    assert issues_of(data) == {("validators[0].type", "is not a supported validator type")}


def test_it_rejects_unknown_keys_anywhere_in_the_spec_as_errors():
    data = spec_with(rules={"job": [], "allowedTools": []})
    result = check_model(EvaluationSpec, data)
    [issue] = result.issues
    assert issue.path == ("rules", "allowedTools")
    assert issue.severity == "error"
    assert issue.message == 'is not an allowed key; did you mean "allowed_tools"?'


def test_it_rejects_an_unknown_config_key_of_a_strict_type():
    [issue] = check_model(
        EvaluationSpec, validator({"case_sensitive": True}, "contains", expected_from="literal:a")
    ).issues
    assert (format_path(issue.path), issue.severity) == ("validators[0].config.case_sensitive", "error")


def test_it_warns_about_an_unknown_config_key_of_a_file_validator():
    data = spec_with(
        validators=[
            {
                "key": "src",
                "type": "file_content_match",
                "target": "file:solution",
                "expected_from": "literal:def f",
                "config": {"mode": "contains"},
            }
        ]
    )
    result = check_model(EvaluationSpec, data)
    [issue] = result.issues
    assert format_path(issue.path) == "validators[0].config.mode"
    assert issue.message == 'is not an allowed key; did you mean "match_mode"?'
    assert (issue.severity, issue.rule, issue.anchor) == ("warning", "unknown_key", "key")
    assert result.instance.validators[0].config == {}


def test_it_lists_the_four_lenient_file_validators():
    assert {"file_exists", "file_content_match", "file_json_schema", "directory_structure"} == LENIENT_TYPES


def test_it_registers_the_21_upstream_types_and_both_trajectory_matchers():
    assert len(CONFIG_MODELS) == 23
    assert {"tool_trajectory", "skills_trajectory"} <= set(CONFIG_MODELS)
    assert config_model_for("bogus") is None
    assert config_model_for(3) is None


# --- config value rules ----------------------------------------------------


@pytest.mark.parametrize(
    ("vtype", "config", "field", "message"),
    [
        ("fuzzy_match", {"threshold": 1.2}, "threshold", "must be between 0 and 1"),
        (
            "numeric_match",
            {"absolute_tolerance": -0.1},
            "absolute_tolerance",
            "must be greater than or equal to 0",
        ),
        (
            "numeric_match",
            {"relative_tolerance": -1},
            "relative_tolerance",
            "must be greater than or equal to 0",
        ),
        ("numeric_match", {"significant_digits": 0}, "significant_digits", "must be greater than 0"),
        (
            "numeric_match",
            {"tolerance_mode": "percent"},
            "tolerance_mode",
            "must be one of absolute, relative",
        ),
        ("math_equivalence", {"tolerance": -1}, "tolerance", "must be greater than or equal to 0"),
        (
            "math_equivalence",
            {"comparison_mode": "exact"},
            "comparison_mode",
            "must be one of symbolic, numeric",
        ),
        ("bleu_score", {"max_ngram": 0}, "max_ngram", "must be greater than 0"),
        ("bleu_score", {"smoothing": "method2"}, "smoothing", "must be one of none, method1"),
        ("rouge_score", {"variant": "rouge-3"}, "variant", "must be one of rouge-l, rouge-1, rouge-2"),
        ("rouge_score", {"beta": 0}, "beta", "must be greater than 0"),
        ("chrf_score", {"char_order": 0}, "char_order", "must be greater than 0"),
        ("chrf_score", {"beta": -2}, "beta", "must be greater than 0"),
        ("regex_match", {"flags": "ix"}, "flags", "must contain only the flags i, m and s"),
        (
            "file_content_match",
            {"match_mode": "glob"},
            "match_mode",
            "must be one of contains, exact, regex, not_contains, json_equal",
        ),
        ("tool_call_assertion", {"count": -1}, "count", "must be greater than or equal to 0"),
        ("tool_call_assertion", {"min_count": -1}, "min_count", "must be greater than or equal to 0"),
        ("tool_call_assertion", {"order_mode": "any"}, "order_mode", "must be one of subsequence, exact"),
        ("tool_trajectory", {"args_match": "fuzzy"}, "args_match", "must be one of subset, exact"),
        ("skills_trajectory", {"skills": ["a"], "threshold": 2}, "threshold", "must be between 0 and 1"),
    ],
)
def test_it_names_the_offending_config_key_in_range_errors(vtype, config, field, message):
    data = validator(config, vtype, expected_from="literal:1")
    if vtype in LENIENT_TYPES:
        data["validators"][0]["target"] = "file:x"
    assert (f"validators[0].config.{field}", message) in issues_of(data)


def test_it_rejects_pass_at_k_scoring_with_its_own_message():
    data = validator({"test_command": "pytest", "scoring": "pass_at_k"}, "code_execution")
    assert (
        "validators[0].config.scoring",
        "pass_at_k requires multi-sample execution and is not supported yet",
    ) in (issues_of(data))


def test_it_lists_the_scoring_values_for_an_unknown_scoring():
    data = validator({"test_command": "pytest", "scoring": "best"}, "code_execution")
    assert (
        "validators[0].config.scoring",
        "must be one of fraction_passed, all_or_nothing, pass_at_k",
    ) in issues_of(data)


def test_it_requires_test_command_when_a_code_execution_config_is_present():
    assert ("validators[0].config.test_command", "is required") in issues_of(validator({}, "code_execution"))


def test_it_requires_a_postcondition_condition():
    data = validator({"value": "x"}, "postcondition")
    assert ("validators[0].config.condition", "is required") in issues_of(data)


def test_it_requires_skills_for_skills_trajectory():
    assert ("validators[0].config.skills", "is required") in issues_of(validator({}, "skills_trajectory"))


# --- config defaults (grading.md §3-§4, pack-format §5.4) ---------------------


def test_code_execution_defaults_to_fraction_passed_and_30_seconds():
    config = CodeExecutionConfig.model_validate({"test_command": "pytest"})
    assert (config.scoring, config.timeout_ms, config.memory_mb, config.pass_threshold) == (
        "fraction_passed",
        30000,
        512,
        1.0,
    )


def test_tool_call_assertion_defaults_order_mode_to_subsequence_only_with_ordered_tools():
    assert ToolCallAssertionConfig.model_validate({"ordered_tools": ["a"]}).order_mode == "subsequence"
    assert ToolCallAssertionConfig.model_validate({"tool_name": "a"}).order_mode is None
    assert (
        ToolCallAssertionConfig.model_validate({"ordered_tools": ["a"], "order_mode": "exact"}).order_mode
        == "exact"
    )


def test_tool_call_assertion_must_call_defaults_to_true_without_count_bounds():
    assert ToolCallAssertionConfig.model_validate({"tool_name": "a"}).effective_must_call is True
    assert (
        ToolCallAssertionConfig.model_validate({"tool_name": "a", "min_count": 2}).effective_must_call is None
    )
    assert ToolCallAssertionConfig.model_validate({"must_call": False}).effective_must_call is False


def test_numeric_match_legacy_tolerance_rules():
    assert NumericMatchConfig.model_validate({}).tolerances() == (None, None)
    assert NumericMatchConfig.model_validate({"tolerance": 0.1}).tolerances() == (None, 0.1)
    assert NumericMatchConfig.model_validate({"tolerance_mode": "absolute"}).tolerances() == (0.001, None)
    assert NumericMatchConfig.model_validate({"absolute_tolerance": 0.5}).tolerances() == (0.5, None)


def test_normalized_match_steps_default_and_alias():
    assert NormalizedMatchConfig.model_validate({}).steps == ["trim", "lowercase", "collapse_whitespace"]
    assert NormalizedMatchConfig.model_validate({"normalizations": ["trim"]}).steps == ["trim"]


@pytest.mark.parametrize(
    ("vtype", "expected"),
    [
        ("fuzzy_match", {"threshold": 0.8, "case_insensitive": False, "normalize": False}),
        ("token_f1", {"threshold": 0.5}),
        ("bleu_score", {"threshold": 0.3, "max_ngram": 4, "smoothing": "none"}),
        ("rouge_score", {"threshold": 0.3, "variant": "rouge-l", "beta": 1.0}),
        ("chrf_score", {"threshold": 0.3, "char_order": 6, "beta": 2.0}),
        ("math_equivalence", {"comparison_mode": "symbolic", "tolerance": 1e-6}),
        ("file_exists", {"must_exist": True}),
        ("file_content_match", {"match_mode": "contains", "ignore_whitespace": False}),
        ("contains", {"case_insensitive": False}),
        ("regex_match", {"flags": ""}),
        ("json_schema", {"extract_markdown_fence": False}),
        ("tool_trajectory", {"match_type": "EXACT", "args_match": "subset", "threshold": 0.5}),
    ],
)
def test_config_defaults_follow_grading_md(vtype, expected):
    config = CONFIG_MODELS[vtype].model_validate({})
    for key, value in expected.items():
        assert getattr(config, key) == value


def test_skills_trajectory_defaults_follow_grading_md():
    config = CONFIG_MODELS["skills_trajectory"].model_validate({"skills": ["a"]})
    assert config.match_type == "ANY_ORDER"
    assert config.skill_tool_names == ["Skill", "activate_skill", "load_skill"]
    assert config.read_tool_names == ["Read", "read_file", "view", "cat"]
    assert (config.count_tool_names, config.strip_plugin_prefix, config.threshold) == (True, False, 0.5)


def test_validator_config_is_parsed_once_with_defaults():
    data = validator({"threshold": 0.9}, "fuzzy_match", expected_from="literal:x")
    spec = EvaluationSpec.model_validate(check_model(EvaluationSpec, data).cleaned)
    config = spec.validator_config(spec.validators[0])
    assert (config.threshold, config.case_insensitive) == (0.9, False)
    assert spec.validator_config(spec.validators[0]) is config


def test_validator_config_of_a_missing_config_has_every_default():
    spec = EvaluationSpec.model_validate(BASE)
    assert spec.validator_config(spec.validators[0]) == CONFIG_MODELS["exact_match"]()


def test_validator_config_ignores_unknown_keys_of_lenient_types():
    data = spec_with(
        validators=[
            {"key": "f", "type": "file_exists", "target": "file:x", "config": {"must_exist": False, "x": 1}}
        ]
    )
    spec = EvaluationSpec.model_validate(data)
    assert spec.validator_config(spec.validators[0]).must_exist is False


def test_file_json_schema_reads_the_schema_key():
    data = spec_with(
        validators=[
            {
                "key": "f",
                "type": "file_json_schema",
                "target": "file:x",
                "config": {"schema": {"type": "object"}},
            }
        ]
    )
    result = check_model(EvaluationSpec, data)
    assert result.issues == []
    assert result.instance.validator_config(result.instance.validators[0]).schema_ == {"type": "object"}


# --- trimming (pack-format §5.1) -------------------------------------------


def test_it_trims_keys_targets_references_and_collectors():
    data = spec_with(
        validators=[
            {"key": " v ", "type": "exact_match", "target": " final_output ", "expected_from": "literal:a  "}
        ],
        metrics=[{"key": " m", "type": "numeric", "collector": " run_ttft_ms "}],
    )
    result = check_model(EvaluationSpec, data)
    assert result.issues == []
    validator_ = result.instance.validators[0]
    assert (validator_.key, validator_.target, validator_.expected_from) == ("v", "final_output", "literal:a")
    assert result.instance.metrics[0].collector == "run_ttft_ms"
    assert result.cleaned["validators"][0]["key"] == "v"


def test_it_does_not_trim_judge_texts():
    data = spec_with(
        judge_mode="llm_judge",
        llm_judges=[{"key": "j", "mode": "rubric", "model": "gpt-4o", "rubric": " be kind "}],
    )
    assert check_model(EvaluationSpec, data).instance.llm_judges[0].rubric == " be kind "


# --- judges (pack-format §7.3, grading.md §6.1) ------------------------------


def judge_spec(**judge):
    base = {"key": "j", "mode": "rubric", "model": "claude-haiku-4-5", "rubric": "r"}
    base.update(judge)
    return spec_with(judge_mode="llm_judge", llm_judges=[base])


def test_judge_defaults_follow_grading_md():
    judge = check_model(EvaluationSpec, judge_spec()).instance.llm_judges[0]
    assert judge.samples == 3
    assert judge.context_from == ["final_output"]
    assert (judge.score_scale.min, judge.score_scale.max) == (1, 5)
    assert (judge.threshold, judge.max_retries, judge.timeout_ms) == (0.5, 3, 60000)
    assert (judge.expect, judge.position_debiasing) == (True, "shuffle")


def test_judge_samples_zero_means_three():
    assert check_model(EvaluationSpec, judge_spec(samples=0)).instance.llm_judges[0].samples == 3


def test_judge_samples_are_at_most_ten():
    assert issues_of(judge_spec(samples=11)) == {("llm_judges[0].samples", "must be at most 10")}
    assert issues_of(judge_spec(samples=-1)) == {
        ("llm_judges[0].samples", "must be greater than or equal to 0")
    }


def test_judge_position_debiasing_accepts_upstream_booleans():
    assert check_model(EvaluationSpec, judge_spec(position_debiasing=True)).instance.llm_judges[
        0
    ].position_debiasing == ("shuffle")
    assert check_model(EvaluationSpec, judge_spec(position_debiasing=False)).instance.llm_judges[
        0
    ].position_debiasing == ("none")
    assert check_model(EvaluationSpec, judge_spec(position_debiasing="cyclic")).instance.llm_judges[
        0
    ].position_debiasing == ("cyclic")
    assert issues_of(judge_spec(position_debiasing="random")) == {
        ("llm_judges[0].position_debiasing", "must be one of shuffle, cyclic, none")
    }


def test_judge_score_scale_min_must_be_below_max():
    assert issues_of(judge_spec(score_scale={"min": 5, "max": 5})) == {
        ("llm_judges[0].score_scale", "min must be strictly less than max")
    }


def test_judge_ranges_name_their_key():
    assert issues_of(judge_spec(threshold=1.5, max_retries=11, timeout_ms=0, min_agreement_threshold=-1)) == {
        ("llm_judges[0].threshold", "must be between 0 and 1"),
        ("llm_judges[0].max_retries", "must be between 0 and 10"),
        ("llm_judges[0].timeout_ms", "must be greater than 0"),
        ("llm_judges[0].min_agreement_threshold", "must be between 0 and 1"),
    }


def test_judge_mode_must_be_supported():
    assert issues_of(judge_spec(mode="pairwise")) == {
        ("llm_judges[0].mode", "must be one of rubric, assertion, n_wise, reference")
    }


def test_consensus_aggregation_must_be_supported():
    assert issues_of(
        judge_spec(model=None, models=["gpt-4o", "claude-x"], consensus={"aggregation": "max"})
    ) == {("llm_judges[0].consensus.aggregation", "must be one of median, mean, majority_vote, unanimous")}


@pytest.mark.parametrize(
    ("model", "provider"),
    [
        ("claude-haiku-4-5", "anthropic"),
        ("Claude-3", "anthropic"),
        ("gpt-4o", "openai"),
        ("o1-mini", "openai"),
        ("o3", "openai"),
        ("o4-mini", "openai"),
        ("text-embedding-3-small", "openai"),
        ("gemini-2.5-pro", "gemini"),
        ("grok-4", "xai"),
        ("mistral-large", "mistral"),
        ("meta-llama/llama-3", "openrouter"),
        ("llama-3", None),
        ("", None),
    ],
)
def test_judge_provider_is_inferred_from_the_model_prefix(model, provider):
    assert judge_provider_for(model) == provider


# --- metrics, checks, behavioral, pricing, limits ---------------------------


def test_metric_type_must_be_supported():
    data = spec_with(metrics=[{"key": "m", "type": "float", "collector": "run_ttft_ms"}])
    assert issues_of(data) == {("metrics[0].type", "is not a supported metric type")}


def test_metric_collector_is_required():
    data = spec_with(metrics=[{"key": "m", "type": "numeric", "collector": " "}])
    assert issues_of(data) == {("metrics[0].collector", "is required")}


def test_check_type_must_be_file_capture_or_directory_listing():
    data = spec_with(post_execution_checks=[{"key": "c", "type": "file", "path": "a", "max_size_bytes": -1}])
    assert issues_of(data) == {
        ("post_execution_checks[0].type", "must be file_capture or directory_listing"),
        ("post_execution_checks[0].max_size_bytes", "must be greater than or equal to 0"),
    }


def test_check_max_size_zero_means_one_mebibyte():
    data = spec_with(post_execution_checks=[{"key": "c", "type": "file_capture", "path": "a"}])
    assert (
        check_model(EvaluationSpec, data).instance.post_execution_checks[0].effective_max_size_bytes
        == 1 << 20
    )


def test_behavioral_signals_are_required_and_checked():
    assert issues_of(spec_with(behavioral={})) == {("behavioral.signals", "must contain at least one signal")}
    data = spec_with(
        behavioral={
            "signals": [
                {"key": "confidence_calibration", "weight": 1},
                {"key": "speed", "weight": 0},
            ]
        }
    )
    assert issues_of(data) == {
        ("behavioral.signals[0].key", "is not supported until confidence reporting lands"),
        (
            "behavioral.signals[1].key",
            "must be one of recovery_behavior, exploration_efficiency, error_cascade, scope_adherence",
        ),
        ("behavioral.signals[1].weight", "must be greater than 0"),
    }


def test_pricing_costs_are_not_negative():
    data = spec_with(
        pricing={
            "models": [{"provider_key": "p", "provider_model_id": "m", "input_cost_per_million_tokens": -1}]
        }
    )
    assert issues_of(data) == {
        ("pricing.models[0].input_cost_per_million_tokens", "must be greater than or equal to 0")
    }


def test_runtime_limits_are_positive_and_iterations_bounded():
    data = spec_with(
        runtime_limits={"max_total_tokens": 0, "max_cost_usd": 0, "max_duration_ms": -5, "max_iterations": 0}
    )
    assert issues_of(data) == {
        ("runtime_limits.max_total_tokens", "must be greater than 0"),
        ("runtime_limits.max_cost_usd", "must be greater than 0"),
        ("runtime_limits.max_duration_ms", "must be greater than 0"),
        ("runtime_limits.max_iterations", "must be between 1 and 1000"),
    }


# --- scorecard (pack-format §7.4) -------------------------------------------


def test_scorecard_defaults_to_the_weighted_strategy():
    assert check_model(EvaluationSpec, BASE).instance.scorecard.strategy == "weighted"


def test_scorecard_strategy_must_be_supported():
    data = spec_with(scorecard={"dimensions": ["correctness"], "strategy": "average"})
    assert issues_of(data) == {("scorecard.strategy", "must be one of weighted, binary, hybrid")}


def test_scorecard_needs_a_dimension():
    assert issues_of(spec_with(scorecard={})) == {
        ("scorecard.dimensions", "must contain at least one dimension")
    }


def test_scorecard_ranges_name_their_key():
    data = spec_with(
        scorecard={
            "dimensions": [{"key": "c", "source": "validators", "weight": -1, "pass_threshold": 2}],
            "pass_threshold": 1.5,
            "judge_limits": {"max_samples_per_judge": 11, "max_calls_usd": -1, "max_tokens": -1},
        }
    )
    assert issues_of(data) == {
        ("scorecard.dimensions[0].weight", "must be greater than or equal to 0"),
        ("scorecard.dimensions[0].pass_threshold", "must be between 0 and 1"),
        ("scorecard.pass_threshold", "must be between 0 and 1"),
        ("scorecard.judge_limits.max_samples_per_judge", "must be between 0 and 10"),
        ("scorecard.judge_limits.max_calls_usd", "must be greater than or equal to 0"),
        ("scorecard.judge_limits.max_tokens", "must be greater than or equal to 0"),
    }


def test_dimension_source_must_be_supported():
    data = spec_with(scorecard={"dimensions": [{"key": "c", "source": "judge"}]})
    assert issues_of(data) == {
        (
            "scorecard.dimensions[0].source",
            "must be one of validators, metric, reliability, latency, cost, behavioral, llm_judge, "
            "human_preference, compliance",
        )
    }


def test_an_unknown_legacy_dimension_is_not_supported():
    data = spec_with(scorecard={"dimensions": ["accuracy"]})
    assert issues_of(data) == {("scorecard.dimensions[0]", "is not a supported scorecard dimension")}


def test_legacy_dimensions_expand_as_upstream():
    data = spec_with(
        scorecard={
            "dimensions": ["correctness", "reliability", "latency", "cost", "behavioral"],
            "normalization": {"latency": {"target_ms": 1000}, "cost": {"target_usd": 0.1, "max_usd": 1}},
        },
        runtime_limits={"max_duration_ms": 60000},
        behavioral={"signals": [{"key": "error_cascade", "weight": 1}]},
    )
    dims = check_model(EvaluationSpec, data).instance.dimensions
    assert [(d.key, d.source, d.better_direction) for d in dims] == [
        ("correctness", "validators", "higher"),
        ("reliability", "reliability", "higher"),
        ("latency", "latency", "lower"),
        ("cost", "cost", "lower"),
        ("behavioral", "behavioral", "higher"),
    ]
    assert (dims[2].normalization.target, dims[2].normalization.max) == (1000, 60000)
    assert (dims[3].normalization.target, dims[3].normalization.max) == (0.1, 1)
    assert dims[0].validators is None
    assert dims[0].weight == 1.0


def test_object_dimensions_default_better_direction_by_source():
    data = spec_with(
        judge_mode="hybrid",
        llm_judges=[{"key": "j", "mode": "rubric", "model": "gpt-4o", "rubric": "r"}],
        scorecard={
            "dimensions": [
                {"key": "q", "source": "llm_judge", "judge_key": "j"},
                {"key": "c", "source": "validators", "gate": True, "pass_threshold": 1},
                {"key": "m", "source": "latency", "normalization": {"target": 1, "max": 2}},
            ],
            "strategy": "hybrid",
        },
    )
    dims = check_model(EvaluationSpec, data).instance.dimensions
    assert [d.better_direction for d in dims] == ["higher", "higher", None]


# --- rules, claims, critique -------------------------------------------------


def test_rules_claims_and_critique_defaults():
    spec = check_model(
        EvaluationSpec, spec_with(rules={"job": [{"label": "ok", "validator": "task_count", "min": 1}]})
    )
    spec = spec.instance
    assert spec.rules.shell_tool_names == ["Bash", "bash", "shell", "exec", "run_command", "terminal"]
    assert spec.rules.allowed_tools is None
    assert (spec.rules.job[0].required, spec.rules.job[0].negate) == (True, False)
    assert spec.claims.fail_on_contradicted is False
    assert spec.claims.write_tool_names == ["Write", "write_file", "create_file", "Edit", "edit_file"]
    assert (
        spec.critique.probe_judges,
        spec.critique.unavailable_share_max,
        spec.critique.judge_agreement_min,
    ) == (
        False,
        0.5,
        0.75,
    )


def test_rule_fields_are_checked():
    data = spec_with(rules={"job": [{"label": " ", "validator": "regex", "where": "output", "min": -1}]})
    assert issues_of(data) == {
        ("rules.job[0].label", "is required"),
        ("rules.job[0].validator", "must be one of pattern_match, job_resolution_status, task_count"),
        (
            "rules.job[0].where",
            "must be one of executed_commands, task_summary, task_description, task_plan, agent_messages, "
            "operational_rules, job_resolution, job_plan, gateway_messages, gateway_summary",
        ),
        ("rules.job[0].min", "must be greater than or equal to 0"),
    }


def test_critique_shares_are_between_zero_and_one():
    assert issues_of(spec_with(critique={"unavailable_share_max": 2})) == {
        ("critique.unavailable_share_max", "must be between 0 and 1")
    }


def test_a_ranged_integer_beyond_a_float_is_checked_against_its_bounds_not_an_overflow():
    # math.isfinite(10**400) raised OverflowError out of the range check: a crash where a
    # caller (not the YAML loader, which refuses such numbers first) passed a huge int.
    from pydantic import TypeAdapter, ValidationError

    from grading.engine.configs.fields import Ranged

    bounded = TypeAdapter(Ranged(int, 0, 10))
    with pytest.raises(ValidationError, match="must be between 0 and 10"):
        bounded.validate_python(10**400)
    assert TypeAdapter(Ranged(int, 0)).validate_python(10**400) == 10**400
