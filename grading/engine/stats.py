"""Interval statistics of spec/grading.md §10.3 and §10.4.

- Wilson score interval for pass rates (z = 1.96).
- Percentile bootstrap of a mean (2,000 resamples, 2.5th / 97.5th percentiles) and the
  paired bootstrap of mean differences used by ranking and run comparison.
- The seed rule ``int.from_bytes(sha256(f"{run_id}:{deployment}:{figure}").digest()[:8], "big")``
  feeding ``random.Random(seed)``, so every interval reproduces.

Pure Python (no numpy). A bootstrap over 100k cases is kept fast by resampling *counts of
distinct values* (a multinomial drawn as a chain of binomials) whenever the values have few
distinct levels, which is the usual case for pass indicators and binary-validator scores;
otherwise each resample is one ``rng.choices`` call and a ``sum``. Both are exact bootstrap
resamples; which one runs depends only on the data, so results stay deterministic.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Sequence
from hashlib import sha256

Z_95 = 1.96
RESAMPLES = 2000
LOW_PERCENTILE = 2.5
HIGH_PERCENTILE = 97.5

Interval = tuple[float, float]


def seed_for(run_id: str, deployment: str, figure: str) -> int:
    """The bootstrap seed of grading.md §10.3 / interfaces.md §5."""
    digest = sha256(f"{run_id}:{deployment}:{figure}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def wilson_interval(successes: float, n: int, *, z: float = Z_95) -> Interval | None:
    """Wilson score interval over ``n`` graded cases; ``successes`` may be fractional (the
    sum of per-case repetition pass rates). ``None`` when ``n`` is 0."""
    if n <= 0:
        return None
    p = min(max(successes / n, 0.0), 1.0)
    q = 1.0 - p
    z2 = z * z
    shift = z2 / (2 * n)
    spread = z * math.sqrt(p * q / n + z2 / (4 * n * n))
    # The textbook form (centre - half, centre + half) cancels catastrophically at p = 0 or
    # p = 1 and can put the lower bound a few ulps above p (e.g. 2.8e-17 for 0 of 11).
    # Since (p + shift)**2 - spread**2 == p**2 * (1 + z2/n), the lower bound is exactly
    # p**2 / (p + shift + spread), and symmetrically for 1 - upper: no subtraction of
    # nearly equal terms, and both bounds are 0 / 1 exactly at the extremes.
    low = p * p / (p + shift + spread)
    high = 1.0 - q * q / (q + shift + spread)
    return (min(low, p), max(high, p))


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolation percentile (numpy's default) of already sorted values; q in [0, 100]."""
    if not sorted_values:
        raise ValueError("percentile of an empty sequence")
    pos = (len(sorted_values) - 1) * (q / 100.0)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    frac = pos - lo
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * frac


def bootstrap_means(values: Sequence[float], rng: random.Random, resamples: int = RESAMPLES) -> list[float]:
    """``resamples`` means of size-n resamples (with replacement) of ``values``."""
    n = len(values)
    if n == 0:
        return []
    counts = Counter(values)
    levels = sorted(counts)
    if len(levels) == 1:
        return [float(levels[0])] * resamples
    # A chain of binomials costs a few microseconds per level; rng.choices costs ~0.1-0.4 us
    # per value. Pick the cheaper exact method.
    if len(levels) * 16 <= n:
        probs = [counts[v] / n for v in levels]
        return [_multinomial_sum(levels, probs, n, rng) / n for _ in range(resamples)]
    data = list(values)
    return [math.fsum(rng.choices(data, k=n)) / n for _ in range(resamples)]


def _multinomial_sum(levels: list[float], probs: list[float], n: int, rng: random.Random) -> float:
    remaining = n
    mass = 1.0
    total = 0.0
    last = len(levels) - 1
    for i, value in enumerate(levels):
        if remaining == 0:
            break
        if i == last:
            k = remaining
        else:
            p = probs[i] / mass if mass > 0 else 1.0
            k = binomial(remaining, min(p, 1.0), rng)
            mass -= probs[i]
        total += k * value
        remaining -= k
    return total


def bootstrap_interval(
    values: Sequence[float], seed: int, *, resamples: int = RESAMPLES, minimum: int = 2
) -> Interval | None:
    """Percentile bootstrap interval of the mean; ``None`` below ``minimum`` values."""
    if len(values) < max(minimum, 1):
        return None
    means = sorted(bootstrap_means(values, random.Random(seed), resamples))
    lo = percentile(means, LOW_PERCENTILE)
    hi = percentile(means, HIGH_PERCENTILE)
    return (lo, hi)


def paired_bootstrap_interval(
    baseline: Sequence[float], candidate: Sequence[float], seed: int, *, resamples: int = RESAMPLES
) -> Interval | None:
    """Paired bootstrap of the mean difference ``candidate - baseline`` (pairs resampled
    together, i.e. by case). ``None`` with no pair; one pair gives a degenerate interval."""
    if len(baseline) != len(candidate):
        raise ValueError("paired samples must have the same length")
    diffs = [c - b for b, c in zip(baseline, candidate, strict=True)]
    return bootstrap_interval(diffs, seed, resamples=resamples, minimum=1)


def mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def round4(value: float | None) -> float | None:
    """``value`` to 4 places; a difference that rounds to zero is 0.0, never -0.0 (floating
    noise such as 0.1 - 0.10000000000000002 read as "-0.0000", a regression that is not)."""
    return None if value is None else round(value, 4) + 0.0


def round_interval(interval: Interval | None) -> list[float] | None:
    return None if interval is None else [round4(interval[0]), round4(interval[1])]


# ---------------------------------------------------------------------------
# Binomial sampling. Python 3.11 has no random.binomialvariate; this is a port of the
# CPython 3.12 implementation (Devroye's geometric method for small n*p, Hörmann's BTRS
# transformed rejection otherwise), drawing only from the given Random instance.
# ---------------------------------------------------------------------------


def binomial(n: int, p: float, rng: random.Random) -> int:
    if n <= 0 or p <= 0.0:
        return 0
    if p >= 1.0:
        return n
    if n == 1:
        return 1 if rng.random() < p else 0
    if p > 0.5:
        return n - binomial(n, 1.0 - p, rng)
    if n * p < 10.0:
        x = y = 0
        c = math.log2(1.0 - p)
        if not c:
            return 0
        while True:
            # 1 - random() lies in (0, 1], so the logarithm is always defined.
            y += math.floor(math.log2(1.0 - rng.random()) / c) + 1
            if y > n:
                return x
            x += 1
    return _btrs(n, p, rng)


def _btrs(n: int, p: float, rng: random.Random) -> int:
    spq = math.sqrt(n * p * (1.0 - p))
    b = 1.15 + 2.53 * spq
    a = -0.0873 + 0.0248 * b + 0.01 * p
    c = n * p + 0.5
    vr = 0.92 - 4.2 / b
    setup = False
    alpha = lpq = h = 0.0
    m = 0
    while True:
        u = rng.random() - 0.5
        us = 0.5 - abs(u)
        if us <= 0.0:
            continue
        k = math.floor((2.0 * a / us + b) * u + c)
        if k < 0 or k > n:
            continue
        v = rng.random()
        if us >= 0.07 and v <= vr:
            return k
        if not setup:
            alpha = (2.83 + 5.1 / b) * spq
            lpq = math.log(p / (1.0 - p))
            m = math.floor((n + 1) * p)
            h = math.lgamma(m + 1) + math.lgamma(n - m + 1)
            setup = True
        v *= alpha / (a / (us * us) + b)
        if v > 0.0 and math.log(v) <= h - math.lgamma(k + 1) - math.lgamma(n - k + 1) + (k - m) * lpq:
            return k
