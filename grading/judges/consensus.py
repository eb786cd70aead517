"""Samples and consensus (grading.md §6.3) as pure functions over parsed samples.

Each model contributes one *model value*: assertion: the majority of its valid samples (a
tie is FAILED and flagged ``needs_review``); numeric: the median of its normalised scores.
Across models: ``median`` / ``mean`` of the model values, ``majority_vote`` over model
verdicts (tie FAILED, flagged), ``unanimous`` (assertion: every model passes; numeric: the
minimum). Agreement: assertion: the share of valid samples agreeing with the final verdict;
numeric: 1 - (max - min) of the normalised sample scores.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from grading.engine.types import meets


@dataclass(slots=True)
class Outcome:
    score: float
    passed: bool
    agreement: float
    variance: float
    model_values: dict[str, float]
    needs_review: bool = False
    notes: list[str] = field(default_factory=list)


def _median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def combine(
    values_by_model: dict[str, list[float]],
    *,
    binary: bool,
    aggregation: str | None,
    threshold: float,
    flag_on_disagreement: bool = False,
) -> Outcome:
    """``values_by_model``: per model, its valid samples' values (binary: 1.0 = the
    expectation holds, 0.0 = it does not; numeric: normalised scores in [0, 1])."""
    notes: list[str] = []
    needs_review = False
    model_values: dict[str, float] = {}
    for model, values in values_by_model.items():
        if binary:
            yes = sum(1 for v in values if v >= 0.5)
            no = len(values) - yes
            if yes == no:
                needs_review = True
                notes.append(f"{model}: tie {yes}-{no} across samples, counted as not holding")
            model_values[model] = 1.0 if yes > no else 0.0
        else:
            model_values[model] = _median(values)
    vals = list(model_values.values())
    agg = aggregation or ("majority_vote" if binary else "median")
    vote: bool | None = None
    if len(vals) == 1:
        score = vals[0]
    elif agg == "mean":
        score = float(statistics.fmean(vals))
    elif agg == "unanimous":
        score = min(vals)
    elif agg == "majority_vote":
        yes = sum(1 for v in vals if (v >= 0.5 if binary else meets(v, threshold)))
        no = len(vals) - yes
        if yes == no:
            needs_review = True
            notes.append(f"majority_vote tie {yes}-{no} across models, counted as FAILED")
        vote = yes > no
        score = (1.0 if vote else 0.0) if binary else _median(vals)
    else:  # median
        score = _median(vals)
    passed = vote if vote is not None else meets(score, threshold)
    if binary:
        verdict = 1.0 if passed else 0.0
        all_values = [v for values in values_by_model.values() for v in values]
        agreement = sum(1 for v in all_values if (v >= 0.5) == (verdict >= 0.5)) / len(all_values)
    else:
        all_values = [v for values in values_by_model.values() for v in values]
        agreement = 1.0 - (max(all_values) - min(all_values))
    variance = float(statistics.pvariance(all_values)) if len(all_values) > 1 else 0.0
    if len(vals) > 1 and len({meets(v, threshold) for v in vals}) > 1:
        notes.append("models disagree")
        if flag_on_disagreement:
            needs_review = True
    return Outcome(
        score=score,
        passed=passed,
        agreement=round(agreement, 6),
        variance=round(variance, 6),
        model_values=model_values,
        needs_review=needs_review,
        notes=notes,
    )


def normalise(score: float, low: float, high: float) -> float:
    clamped = min(max(score, low), high)
    return (clamped - low) / (high - low)


def borda(ranking: Sequence[str]) -> dict[str, float]:
    n = len(ranking)
    if n < 2:
        return {label: 1.0 for label in ranking}
    return {label: (n - 1 - r) / (n - 1) for r, label in enumerate(ranking)}


def agreement_threshold(decl: Any) -> float | None:
    consensus = _get(decl, "consensus")
    value = _get(consensus, "min_agreement_threshold")
    if value is None:
        value = _get(decl, "min_agreement_threshold")
    return None if value is None else float(value)


def _get(obj: Any, name: str, default: Any = None) -> Any:
    if obj is None:
        return default
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)
