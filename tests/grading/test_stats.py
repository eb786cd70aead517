"""Interval statistics: Wilson, percentile bootstrap, paired bootstrap, the seed rule."""

from __future__ import annotations

import random
from hashlib import sha256

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from grading.engine import stats


def test_the_seed_rule_is_the_first_eight_bytes_of_sha256_big_endian():
    expected = int.from_bytes(sha256(b"run-1:squarer:mean_score").digest()[:8], "big")
    assert stats.seed_for("run-1", "squarer", "mean_score") == expected


def test_wilson_of_three_out_of_four_matches_the_interfaces_example():
    low, high = stats.wilson_interval(3, 4)
    assert (round(low, 4), round(high, 4)) == (0.3006, 0.9544)


def test_wilson_of_two_out_of_three_matches_the_offline_example():
    assert stats.round_interval(stats.wilson_interval(2, 3)) == [0.2077, 0.9385]


def test_wilson_matches_the_formula_by_hand_for_zero_and_all_successes():
    # p = 0, n = 10: centre = (z²/2n)/(1+z²/n), half = z*sqrt(z²/4n²)/(1+z²/n)
    z2 = 1.96**2
    denom = 1 + z2 / 10
    centre = (z2 / 20) / denom
    half = 1.96 * (z2 / 400) ** 0.5 / denom
    low, high = stats.wilson_interval(0, 10)
    assert low == pytest.approx(max(0.0, centre - half), abs=1e-12)
    assert high == pytest.approx(centre + half, abs=1e-12)
    low, high = stats.wilson_interval(10, 10)
    assert high == pytest.approx(1.0) and low == pytest.approx(1 - (centre + half), abs=1e-12)


def test_wilson_is_null_without_graded_cases():
    assert stats.wilson_interval(0, 0) is None


def test_wilson_accepts_fractional_successes_from_repetitions():
    low, high = stats.wilson_interval(1.5, 3)
    assert 0 < low < 0.5 < high < 1


def test_bootstrap_is_null_below_two_values():
    assert stats.bootstrap_interval([], 1) is None
    assert stats.bootstrap_interval([0.5], 1) is None


def test_bootstrap_of_identical_values_is_a_point():
    assert stats.bootstrap_interval([0.25, 0.25, 0.25], 7) == (0.25, 0.25)


def test_bootstrap_is_deterministic_for_a_seed_and_changes_with_it():
    values = [0.0, 0.1, 0.5, 0.7, 1.0, 0.3]
    seed = stats.seed_for("offline", "default", "mean_score")
    first = stats.bootstrap_interval(values, seed)
    assert first == stats.bootstrap_interval(values, seed)
    assert first != stats.bootstrap_interval(values, seed + 1)


def test_bootstrap_uses_2000_resamples_and_numpy_style_percentiles():
    values = [0.0, 0.2, 0.4, 0.9, 1.0]
    seed = 42
    rng = random.Random(seed)
    means = sorted(sum(rng.choices(values, k=len(values))) / len(values) for _ in range(2000))
    # numpy.percentile(means, 2.5): position 0.025 * 1999 = 49.975
    expected_low = means[49] + (means[50] - means[49]) * 0.975
    expected_high = means[1949] + (means[1950] - means[1949]) * 0.025
    low, high = stats.bootstrap_interval(values, seed)
    assert low == pytest.approx(expected_low)
    assert high == pytest.approx(expected_high)


def test_paired_bootstrap_resamples_differences_by_case():
    base = [1.0, 1.0, 1.0, 1.0]
    cand = [0.0, 0.0, 0.0, 0.0]
    assert stats.paired_bootstrap_interval(base, cand, 3) == (-1.0, -1.0)
    assert stats.paired_bootstrap_interval([], [], 3) is None
    assert stats.paired_bootstrap_interval([0.2], [0.7], 3) == pytest.approx((0.5, 0.5))
    with pytest.raises(ValueError):
        stats.paired_bootstrap_interval([1.0], [], 3)


def test_binomial_sampler_has_the_right_mean():
    rng = random.Random(11)
    draws = [stats.binomial(1000, 0.3, rng) for _ in range(3000)]
    assert sum(draws) / len(draws) == pytest.approx(300, rel=0.01)
    assert stats.binomial(10, 0.0, rng) == 0 and stats.binomial(10, 1.0, rng) == 10


def test_bootstrap_over_100k_pass_indicators_resamples_counts_not_values(monkeypatch):
    # Few distinct levels: the multinomial (chain of binomials) path, never per-value choices.
    class NoChoices(random.Random):
        def choices(self, *args, **kwargs):
            raise AssertionError("per-value resampling used for two-level data")

    monkeypatch.setattr(stats.random, "Random", NoChoices)
    rng = random.Random(1)
    values = [1.0 if rng.random() < 0.8 else 0.0 for _ in range(100_000)]
    low, high = stats.bootstrap_interval(values, stats.seed_for("r", "d", "pass_rate"))
    assert low < sum(values) / len(values) < high
    assert high - low < 0.01


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(min_value=0, max_value=1), min_size=2, max_size=40), st.integers(0, 2**64 - 1))
def test_bootstrap_is_deterministic_and_within_the_range_of_the_data(values, seed):
    first = stats.bootstrap_interval(values, seed, resamples=200)
    assert first == stats.bootstrap_interval(values, seed, resamples=200)
    low, high = first
    assert min(values) - 1e-12 <= low <= high <= max(values) + 1e-12


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 500), st.integers(1, 500))
@example(0, 11)  # the textbook form gave a lower bound of 2.8e-17 > 0 here
@example(0, 1)
@example(500, 1)
def test_wilson_stays_within_zero_and_one(successes, extra):
    n = successes + extra
    low, high = stats.wilson_interval(successes, n)
    assert 0.0 <= low <= successes / n <= high <= 1.0


@pytest.mark.parametrize("n", [1, 11, 22, 1000, 10**9])
def test_wilson_bounds_are_exact_at_the_extremes(n):
    low, high = stats.wilson_interval(0, n)
    assert low == 0.0 and 0.0 < high < 1.0
    low, high = stats.wilson_interval(n, n)
    assert 0.0 < low < 1.0 and high == 1.0


def test_wilson_matches_the_textbook_values():
    # 3 of 10 at z = 1.96: centre 0.3555..., the usual (0.1078, 0.6032).
    low, high = stats.wilson_interval(3, 10)
    assert low == pytest.approx(0.1077893, abs=1e-7) and high == pytest.approx(0.6032268, abs=1e-7)


def test_a_difference_that_rounds_to_zero_is_never_negative_zero():
    noise = 0.1 - (0.1 + 0.2 - 0.2)  # -2.8e-17: a mean of repetitions against the same score
    assert noise < 0
    assert str(stats.round4(noise)) == "0.0"
    assert [str(x) for x in stats.round_interval((noise, -0.0))] == ["0.0", "0.0"]
    assert stats.round4(-0.00004) == 0.0 and str(stats.round4(-0.00004)) == "0.0"
    assert stats.round4(-0.00005) == -0.0001 and stats.round4(None) is None
