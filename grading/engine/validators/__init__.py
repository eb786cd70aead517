"""Deterministic validators: ``GRADERS`` maps a validator type to its grade function.

A grade function is ``(actual: Resolved, expected: Resolved | None, config, env: Env) -> VResult``;
``grade.py`` resolves both sides, applies the status rules of grading.md §1.4 and §2 and
turns the ``VResult`` into an ``ExpectationResult``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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
GROUND_TRUTH_TYPES = frozenset({"code_execution", "postcondition"})

# Config defaults of grading.md §3-§4 (used for expectation texts and as fallbacks).
DEFAULTS: dict[str, dict[str, Any]] = {
    "contains": {"case_insensitive": False},
    "regex_match": {"flags": ""},
    "json_schema": {"extract_markdown_fence": False},
    "fuzzy_match": {"threshold": 0.8, "case_insensitive": False, "normalize": False},
    "token_f1": {"threshold": 0.5, "normalize": False, "remove_punctuation": False, "remove_articles": False},
    "bleu_score": {
        "threshold": 0.3,
        "max_ngram": 4,
        "smoothing": "none",
        "case_insensitive": False,
        "normalize": False,
    },
    "rouge_score": {
        "threshold": 0.3,
        "variant": "rouge-l",
        "beta": 1.0,
        "case_insensitive": False,
        "normalize": False,
    },
    "chrf_score": {
        "threshold": 0.3,
        "char_order": 6,
        "beta": 2.0,
        "case_insensitive": False,
        "normalize": False,
    },
    "numeric_match": {"extract_number": False},
    "normalized_match": {"pipeline": ["trim", "lowercase", "collapse_whitespace"]},
    "math_equivalence": {"comparison_mode": "symbolic", "tolerance": 1e-6, "extract_answer": False},
    "file_exists": {"must_exist": True},
    "file_content_match": {"match_mode": "contains", "ignore_whitespace": False},
    "code_execution": {
        "timeout_ms": 30000,
        "memory_mb": 512,
        "scoring": "fraction_passed",
        "pass_threshold": 1.0,
    },
    "tool_call_assertion": {"include_failed": False, "order_mode": "subsequence"},
    "tool_trajectory": {
        "match_type": "EXACT",
        "args_match": "subset",
        "ignore_args": False,
        "include_failed": False,
        "threshold": 0.5,
    },
    "skills_trajectory": {
        "match_type": "ANY_ORDER",
        "skill_tool_names": ["Skill", "activate_skill", "load_skill"],
        "read_tool_names": ["Read", "read_file", "view", "cat"],
        "count_tool_names": True,
        "strip_plugin_prefix": False,
        "include_failed": False,
        "threshold": 0.5,
    },
}


def threshold_of(vtype: str, config: Any) -> float | None:
    if vtype not in GRADED_TYPES:
        return None
    key = "pass_threshold" if vtype == "code_execution" else "threshold"
    value = config.get(key) if isinstance(config, dict) else getattr(config, key, None)
    return float(value) if value is not None else float(DEFAULTS[vtype].get(key, 0.5))


__all__ = ["GRADERS", "DEFAULTS", "Env", "VResult", "threshold_of"]
