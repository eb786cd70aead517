"""Thresholds are inclusive (grading.md §2, §10.2), up to floating-point rounding, at every
site that compares a computed score or agreement with one: validators, judge consensus,
judge agreement and run health. One definition: ``grading.engine.types.meets``."""

from __future__ import annotations

from grading.engine.types import Status, meets
from grading.engine.validators.common import graded
from grading.judges.consensus import combine

# (0.3 + 0.6) / 2 is 0.45 computed as 0.44999999999999996
AT = (0.3 + 0.6) / 2


def test_meets_is_inclusive_up_to_rounding_and_no_further():
    assert AT < 0.45 and meets(AT, 0.45) and meets(0.45, 0.45) and meets(1.0, 0.45)
    assert not meets(0.4499, 0.45) and not meets(0.45 - 1e-6, 0.45)


def test_a_graded_validator_at_its_threshold_up_to_float_rounding_passes():
    assert graded(AT, 0.45, "ev").status is Status.PASSED
    assert graded(0.4499, 0.45, "ev").status is Status.FAILED


def test_consensus_mean_and_median_at_the_threshold_pass():
    for agg in ("mean", "median"):
        out = combine({"a": [0.3], "b": [0.6]}, binary=False, aggregation=agg, threshold=0.45)
        assert round(out.score, 4) == 0.45 and out.passed, agg
        below = combine({"a": [0.3], "b": [0.5998]}, binary=False, aggregation=agg, threshold=0.45)
        assert not below.passed, agg


def test_consensus_numeric_majority_vote_counts_a_model_at_the_threshold():
    # model "a"'s median of 0.3 and 0.6 is 0.45 (computed 0.44999999999999996): it votes yes
    values = {"a": [0.3, 0.6], "b": [0.9], "c": [0.1]}
    out = combine(values, binary=False, aggregation="majority_vote", threshold=0.45)
    assert out.passed and not out.needs_review
    values["a"] = [0.3, 0.5998]
    assert not combine(values, binary=False, aggregation="majority_vote", threshold=0.45).passed
