"""Facts the engine keeps in one place: the config models, the reference grammar."""

from __future__ import annotations

import pytest
from validator_helpers import run, status

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


def test_json_paths_use_the_publish_grammar_at_grading_time():
    doc = {"a'b": 1, "a": {"b c": 2}}
    # An escaped quote names the key a'b (the grading-side parser used to keep the backslash).
    r = run("json_path_match", doc, {"path": "$['a\\'b']", "value": 1})
    assert status(r) == "PASSED"
    assert status(run("json_path_match", doc, {"path": "$.a['b c']", "value": 2})) == "PASSED"
    bad = run("json_path_match", doc, {"path": "$.a b", "value": 2})
    assert status(bad) == "NOT_EVALUATED" and bad.reason_code == "invalid_path"
    assert "'$.a b'" in bad.evidence


def test_references_use_the_publish_grammar_at_grading_time():
    from grading.engine.refs import ReferenceSyntaxError, parse_reference
    from grading.engine.refsyntax import is_supported_reference

    for text in ("case.payload.", "case.payload. .a", "artifact.", "transcript.last_n:0"):
        assert not is_supported_reference(text)
        with pytest.raises(ReferenceSyntaxError):
            parse_reference(text)
    ref = parse_reference(" artifact.data.v1.content ")
    assert (ref.kind, ref.name, ref.field) == ("artifact", "data.v1", "content")
