"""Deterministic validators: ``GRADERS`` maps a validator type to its grade function.

A grade function is ``(actual: Resolved, expected: Resolved | None, config, env: Env) -> VResult``;
``grade.py`` resolves both sides, applies the status rules of grading.md §1.4 and §2 and
turns the ``VResult`` into an ``ExpectationResult``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..configs import CONFIG_MODELS, DEFAULT_PIPELINE, ConfigModel
from ..spec import GROUND_TRUTH_TYPES as _SPEC_GROUND_TRUTH_TYPES
from .code_execution import code_execution
from .common import Env, VResult
from .files import directory_structure, file_content_match, file_exists, file_json_schema, postcondition
from .mathexpr import math_equivalence
from .numeric import numeric_match
from .similarity import bleu_score, chrf_score, fuzzy_match, rouge_score, token_f1
from .text import (
    boolean_assert,
    contains,
    exact_match,
    json_path_match,
    json_schema,
    normalized_match,
    regex_match,
)
from .tool_calls import tool_call_assertion
from .trajectory import skills_trajectory, tool_trajectory

Grader = Callable[[Any, Any, Any, Env], VResult]

GRADERS: dict[str, Grader] = {
    "exact_match": exact_match,
    "contains": contains,
    "regex_match": regex_match,
    "boolean_assert": boolean_assert,
    "json_schema": json_schema,
    "json_path_match": json_path_match,
    "fuzzy_match": fuzzy_match,
    "token_f1": token_f1,
    "bleu_score": bleu_score,
    "rouge_score": rouge_score,
    "chrf_score": chrf_score,
    "numeric_match": numeric_match,
    "normalized_match": normalized_match,
    "math_equivalence": math_equivalence,
    "file_exists": file_exists,
    "file_content_match": file_content_match,
    "file_json_schema": file_json_schema,
    "directory_structure": directory_structure,
    "postcondition": postcondition,
    "tool_call_assertion": tool_call_assertion,
    "code_execution": code_execution,
    "tool_trajectory": tool_trajectory,
    "skills_trajectory": skills_trajectory,
}

# Types whose grader reads the evidence itself (target ``tool_calls``).
EVIDENCE_TYPES = frozenset({"tool_call_assertion", "tool_trajectory", "skills_trajectory"})
TRAJECTORY_TYPES = frozenset({"tool_trajectory", "skills_trajectory"})
# Types that judge an absent capture themselves (grading.md §1.4 rule 5).
ABSENCE_TYPES = frozenset({"file_exists", "postcondition"})
# Graded (not binary) types: their threshold is reported.
GRADED_TYPES = frozenset(
    {
        "fuzzy_match",
        "token_f1",
        "bleu_score",
        "rouge_score",
        "chrf_score",
        "code_execution",
        "tool_trajectory",
        "skills_trajectory",
    }
)
GROUND_TRUTH_TYPES = frozenset(_SPEC_GROUND_TRUTH_TYPES)  # grading.md §5.4, declared with the spec models


def _field_defaults(model: type[ConfigModel]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, f in model.model_fields.items():
        if f.is_required():
            continue
        value = f.get_default(call_default_factory=True)
        if value is not None:
            out[f.alias or name] = value
    return out


# Defaults a config model applies in code rather than as a field default.
_APPLIED_DEFAULTS: dict[str, dict[str, Any]] = {
    "normalized_match": {"pipeline": list(DEFAULT_PIPELINE)},
    "tool_call_assertion": {"order_mode": "subsequence"},
}

# Config defaults of grading.md §3-§4 (expectation texts leave them out; fallbacks), read
# from the config models, the one source of keys and defaults.
DEFAULTS: dict[str, dict[str, Any]] = {
    vtype: {**_field_defaults(model), **_APPLIED_DEFAULTS.get(vtype, {})}
    for vtype, model in CONFIG_MODELS.items()
}


def threshold_of(vtype: str, config: Any) -> float | None:
    if vtype not in GRADED_TYPES:
        return None
    key = "pass_threshold" if vtype == "code_execution" else "threshold"
    value = config.get(key) if isinstance(config, dict) else getattr(config, key, None)
    return float(value) if value is not None else float(DEFAULTS[vtype][key])


__all__ = ["GRADERS", "DEFAULTS", "Env", "VResult", "threshold_of"]
