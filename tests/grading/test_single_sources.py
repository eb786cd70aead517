"""Facts the engine keeps in one place: the config models, the reference grammar."""

from __future__ import annotations

from grading.engine import configs
from grading.engine.validators import DEFAULTS, GRADERS, threshold_of
from grading.engine.validators.text import NORMALIZATION_STEPS


def test_every_validator_type_has_a_config_model_and_a_grade_function():
    assert set(GRADERS) == set(configs.CONFIG_MODELS)


def test_normalization_step_functions_are_the_declared_steps():
    assert tuple(NORMALIZATION_STEPS) == configs.NORMALIZATION_STEPS


def test_defaults_are_read_from_the_config_models():
    assert DEFAULTS["fuzzy_match"]["threshold"] == configs.FuzzyMatchConfig.model_fields["threshold"].default
    assert DEFAULTS["skills_trajectory"]["read_tool_names"] == ["Read", "read_file", "view", "cat"]
    assert DEFAULTS["normalized_match"]["pipeline"] == list(configs.DEFAULT_PIPELINE)
    assert threshold_of("code_execution", {}) == 1.0 and threshold_of("bleu_score", {"threshold": 0.7}) == 0.7
    assert threshold_of("exact_match", {}) is None
