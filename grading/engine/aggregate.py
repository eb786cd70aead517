"""Lane, challenge and run aggregation (spec/grading.md §10.3).

Works over light :class:`CaseRecord` rows (one per case execution, i.e. per repetition), so
the runs app can aggregate straight from database values without rebuilding grades.

- :func:`aggregate_lane` computes every figure of one lane at once (pass rate with its
  Wilson interval, mean score with its bootstrap interval, micro and macro figures, the
  challenge breakdown, validity, spend).
- :class:`LaneCounters` is the incremental form kept in the database while grades land:
  add (or remove, for a re-grade) one record at a time, merge, serialise. Overview pages read
  it and never scan items.
- :class:`LatencyHistogram` is a fixed log-bucket histogram with p50 / p95 estimates.

With repetitions a case contributes the mean of its repetitions' pass indicators and scores;
cases with no verdict are counted apart, never as failures.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .stats import (
    bootstrap_interval,
    mean,
    round4,
    round_interval,
    seed_for,
    wilson_interval,
)

STATUSES = ("PASSED", "FAILED", "NOT_EVALUATED", "UNAVAILABLE", "ERROR")
OUTCOME_CLASSES = ("pass", "fail", "unavailable", "infra_error", "pack_error", "evaluator_error")
VALIDITIES = ("valid", "degraded", "invalid")
_VALIDITY_RANK = {v: i for i, v in enumerate(VALIDITIES)}


# ---------------------------------------------------------------------------
# Records
# ---------------------------------------------------------------------------


@dataclass(slots=True)
class CaseRecord:
    """What aggregation, comparison and run health need of one graded case execution."""

    deployment: str
    challenge_key: str
    case_key: str
    status: str
    lane_id: str = ""
    repetition: int = 1
    outcome_class: str | None = None
    reason_code: str | None = None
    score: float | None = None
    validity: str | None = None
    dimensions: dict[str, float | None] = field(default_factory=dict)
    reliability: float | None = None
    compliance_score: float | None = None
    # expectation key -> (status, outcome_class, reason_code), in grade order
    expectations: dict[str, tuple[str, str | None, str | None]] = field(default_factory=dict)
    judge_agreement: dict[str, float] = field(default_factory=dict)
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    latency_ms: float | None = None
    judge_calls: int = 0
    judge_input_tokens: int = 0
    judge_output_tokens: int = 0
    judge_cost_usd: float | None = 0.0
    # what the judge calls counted against judge_limits (JudgeUsage.charged_*): a resumed
    # lane's budget is rebuilt from these, never shown as cost
    judge_charged_tokens: int = 0
    judge_charged_usd: float = 0.0
    content_hash: str | None = None
    pack_version: int | None = None
    run_id: str | None = None

    @property
    def case_id(self) -> tuple[str, str]:
        return (self.challenge_key, self.case_key)

    @property
    def has_verdict(self) -> bool:
        return self.status in ("PASSED", "FAILED")

    def to_dict(self) -> dict[str, Any]:
        out = {name: getattr(self, name) for name in self.__slots__}  # type: ignore[attr-defined]
        out["expectations"] = {k: list(v) for k, v in self.expectations.items()}
        out["dimensions"] = dict(self.dimensions)
        out["judge_agreement"] = dict(self.judge_agreement)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CaseRecord:
        known = set(cls.__slots__)  # type: ignore[attr-defined]
        kwargs = {k: v for k, v in data.items() if k in known}
        kwargs["expectations"] = {
            str(k): _expectation_tuple(v) for k, v in (data.get("expectations") or {}).items()
        }
        kwargs["dimensions"] = dict(data.get("dimensions") or {})
        kwargs["judge_agreement"] = dict(data.get("judge_agreement") or {})
        return cls(**kwargs)


def _expectation_tuple(value: Any) -> tuple[str, str | None, str | None]:
    items = list(value) + [None, None, None]
    return (str(items[0]), items[1], items[2])


def finite_float(value: Any) -> float | None:
    """A finite number as float; None for anything else (booleans included)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value)
    return None


def finite_int(value: Any) -> int | None:
    """A finite number as int; None for anything else (booleans included)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return int(value)
    return None


def record_from_grade(
    grade: Mapping[str, Any],
    *,
    metrics: Any = None,
    content_hash: str | None = None,
) -> CaseRecord:
    """A :class:`CaseRecord` from a grading.json document (``CaseGrade.to_dict()``).

    grading.json carries no agent metrics (§7), so ``metrics`` (an ``Evidence.metrics``
    object or a dict) may be given; a ``metrics`` key in the document is read otherwise.
    """
    case = grade.get("case") or {}
    scorecard = grade.get("scorecard") or {}
    gates = grade.get("gates") or {}
    dimensions: dict[str, float | None] = {}
    reliability: float | None = None
    for dim in scorecard.get("dimensions") or []:
        if not isinstance(dim, Mapping) or "key" not in dim:
            continue
        score = (
            finite_float(dim.get("score")) if dim.get("status", "PASSED") in ("PASSED", "FAILED") else None
        )
        dimensions[str(dim["key"])] = score
        if dim.get("source") == "reliability" and score is not None and reliability is None:
            reliability = score
    expectations: dict[str, tuple[str, str | None, str | None]] = {}
    agreement: dict[str, float] = {}
    for exp in grade.get("expectations") or []:
        if not isinstance(exp, Mapping) or "key" not in exp:
            continue
        key = str(exp["key"])
        expectations[key] = (str(exp.get("status")), exp.get("outcome_class"), exp.get("reason_code"))
        details = exp.get("details") or {}
        if exp.get("kind") == "judge" and isinstance(details, Mapping):
            value = finite_float(details.get("agreement"))
            if value is not None:
                agreement[key] = value
    usage = grade.get("judge_usage") or {}
    m = metrics if metrics is not None else grade.get("metrics")
    if m is not None and not isinstance(m, Mapping):
        m = {k: getattr(m, k, None) for k in ("input_tokens", "output_tokens", "cost_usd", "latency_ms")}
    m = m or {}
    deployment = str(case.get("deployment") or "default")
    judge_in = finite_int(usage.get("input_tokens")) or 0
    judge_out = finite_int(usage.get("output_tokens")) or 0
    judge_cost = finite_float(usage.get("cost_usd")) if "cost_usd" in usage else 0.0
    # absent (charged as reported, or a grade from before they were kept): the reported usage
    charged_tokens = finite_int(usage.get("charged_tokens"))
    charged_usd = finite_float(usage.get("charged_usd"))
    return CaseRecord(
        deployment=deployment,
        lane_id=str(case.get("lane_id") or deployment),
        challenge_key=str(case.get("challenge_key") or ""),
        case_key=str(case.get("case_key") or ""),
        repetition=finite_int(case.get("repetition")) or 1,
        status=str(grade.get("status") or "NOT_EVALUATED"),
        outcome_class=grade.get("outcome_class"),
        reason_code=grade.get("reason_code"),
        score=finite_float(scorecard.get("overall_score")),
        validity=grade.get("validity"),
        dimensions=dimensions,
        reliability=reliability,
        compliance_score=finite_float(gates.get("compliance_score")),
        expectations=expectations,
        judge_agreement=agreement,
        input_tokens=finite_int(m.get("input_tokens")),
        output_tokens=finite_int(m.get("output_tokens")),
        cost_usd=finite_float(m.get("cost_usd")),
        latency_ms=finite_float(m.get("latency_ms")),
        judge_calls=finite_int(usage.get("calls")) or 0,
        judge_input_tokens=judge_in,
        judge_output_tokens=judge_out,
        judge_cost_usd=judge_cost,
        judge_charged_tokens=charged_tokens if charged_tokens is not None else judge_in + judge_out,
        judge_charged_usd=charged_usd if charged_usd is not None else (judge_cost or 0.0),
        content_hash=content_hash if content_hash is not None else case.get("content_hash"),
        pack_version=finite_int(case.get("pack_version")),
        run_id=case.get("run_id"),
    )


# ---------------------------------------------------------------------------
# Case-level reduction over repetitions
# ---------------------------------------------------------------------------


@dataclass(slots=True)
class CaseFigures:
    """One case of one lane, its repetitions reduced (§10.3)."""

    challenge_key: str
    case_key: str
    executions: int = 0
    passed: int = 0
    graded: int = 0
    score_sum: float = 0.0
    scored: int = 0
    content_hash: str | None = None
    pack_version: int | None = None

    @property
    def pass_rate(self) -> float | None:
        """Mean of the repetitions' pass indicators; None without any verdict."""
        return self.passed / self.graded if self.graded else None

    @property
    def mean_score(self) -> float | None:
        return self.score_sum / self.scored if self.scored else None


def case_figures(records: Iterable[CaseRecord]) -> dict[tuple[str, str], CaseFigures]:
    """Records grouped by (challenge_key, case_key), in order of first appearance."""
    out: dict[tuple[str, str], CaseFigures] = {}
    for r in records:
        key = (r.challenge_key, r.case_key)
        fig = out.get(key)
        if fig is None:
            fig = out[key] = CaseFigures(r.challenge_key, r.case_key)
        fig.executions += 1
        if r.status == "PASSED":
            fig.passed += 1
            fig.graded += 1
        elif r.status == "FAILED":
            fig.graded += 1
        if r.score is not None:
            fig.score_sum += r.score
            fig.scored += 1
        if r.content_hash is not None:
            fig.content_hash = r.content_hash
        if r.pack_version is not None:
            fig.pack_version = r.pack_version
    return out


# ---------------------------------------------------------------------------
# One-shot lane aggregation
# ---------------------------------------------------------------------------


@dataclass(slots=True)
class GroupFigures:
    """The figures of §10.3 for one challenge or a whole lane (micro)."""

    counts: dict[str, int]
    outcome_counts: dict[str, int]
    executions: int
    cases: int
    graded_cases: int
    pass_rate: float | None
    pass_rate_interval: tuple[float, float] | None
    coverage: float | None
    mean_score: float | None
    mean_score_interval: tuple[float, float] | None
    scored_cases: int
    dimension_means: dict[str, float | None]
    compliance_mean: float | None
    mean_reliability: float | None
    validity: str | None
    validity_counts: dict[str, int]

    def to_dict(self) -> dict[str, Any]:
        return {
            "counts": dict(self.counts),
            "outcome_counts": dict(self.outcome_counts),
            "executions": self.executions,
            "cases": self.cases,
            "graded_cases": self.graded_cases,
            "ungraded_cases": self.cases - self.graded_cases,
            "pass_rate": round4(self.pass_rate),
            "pass_rate_interval": round_interval(self.pass_rate_interval),
            "coverage": round4(self.coverage),
            "mean_score": round4(self.mean_score),
            "mean_score_interval": round_interval(self.mean_score_interval),
            "scored_cases": self.scored_cases,
            "dimension_means": {k: round4(v) for k, v in self.dimension_means.items()},
            "compliance_mean": round4(self.compliance_mean),
            "mean_reliability": round4(self.mean_reliability),
            "validity": self.validity,
            "validity_counts": dict(self.validity_counts),
        }


@dataclass(slots=True)
class LaneAggregate:
    deployment: str
    lane_id: str
    micro: GroupFigures
    macro: dict[str, float | None]
    challenges: dict[str, GroupFigures]
    agent_input_tokens: int | None
    agent_output_tokens: int | None
    agent_cost_usd: float | None
    latency_p50_ms: float | None
    latency_p95_ms: float | None
    judge_calls: int
    judge_input_tokens: int
    judge_output_tokens: int
    judge_cost_usd: float | None

    # Shortcuts used by ranking.
    @property
    def pass_rate(self) -> float | None:
        return self.micro.pass_rate

    @property
    def mean_score(self) -> float | None:
        return self.micro.mean_score

    @property
    def mean_reliability(self) -> float | None:
        return self.micro.mean_reliability

    @property
    def graded_cases(self) -> int:
        return self.micro.graded_cases

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"deployment": self.deployment, "lane_id": self.lane_id}
        out.update(self.micro.to_dict())
        out["macro"] = {k: round4(v) for k, v in self.macro.items()}
        out["challenges"] = {k: v.to_dict() for k, v in self.challenges.items()}
        out["agent"] = {
            "input_tokens": self.agent_input_tokens,
            "output_tokens": self.agent_output_tokens,
            "cost_usd": self.agent_cost_usd,
            "latency_p50_ms": round4(self.latency_p50_ms),
            "latency_p95_ms": round4(self.latency_p95_ms),
        }
        out["judge_usage"] = {
            "calls": self.judge_calls,
            "input_tokens": self.judge_input_tokens,
            "output_tokens": self.judge_output_tokens,
            "cost_usd": self.judge_cost_usd,
        }
        return out


def _group_figures(
    records: list[CaseRecord], *, run_id: str, deployment: str, figure_prefix: str, intervals: bool
) -> GroupFigures:
    counts = dict.fromkeys(STATUSES, 0)
    outcome_counts = dict.fromkeys(OUTCOME_CLASSES, 0)
    validity_counts = dict.fromkeys(VALIDITIES, 0)
    for r in records:
        counts[r.status] = counts.get(r.status, 0) + 1
        if r.outcome_class:
            outcome_counts[r.outcome_class] = outcome_counts.get(r.outcome_class, 0) + 1
        if r.validity:
            validity_counts[r.validity] = validity_counts.get(r.validity, 0) + 1
    figures = case_figures(records)
    rates = [f.pass_rate for f in figures.values() if f.pass_rate is not None]
    scores = [f.mean_score for f in figures.values() if f.mean_score is not None]
    graded_execs = counts.get("PASSED", 0) + counts.get("FAILED", 0)
    pass_rate = mean(rates)
    pass_interval = wilson_interval(math.fsum(rates), len(rates)) if rates else None
    score_interval = None
    if intervals and len(scores) >= 2:
        seed = seed_for(run_id, deployment, f"{figure_prefix}mean_score")
        score_interval = bootstrap_interval(scores, seed)
    return GroupFigures(
        counts=counts,
        outcome_counts=outcome_counts,
        executions=len(records),
        cases=len(figures),
        graded_cases=len(rates),
        pass_rate=pass_rate,
        pass_rate_interval=pass_interval,
        coverage=graded_execs / len(records) if records else None,
        mean_score=mean(scores),
        mean_score_interval=score_interval,
        scored_cases=len(scores),
        dimension_means=_case_weighted_means(records, lambda r: r.dimensions),
        compliance_mean=_case_weighted_mean(records, lambda r: r.compliance_score),
        mean_reliability=_case_weighted_mean(records, lambda r: r.reliability),
        validity=worst_validity(validity_counts),
        validity_counts=validity_counts,
    )


def worst_validity(validity_counts: Mapping[str, int]) -> str | None:
    worst = None
    for v, n in validity_counts.items():
        if n > 0 and v in _VALIDITY_RANK and (worst is None or _VALIDITY_RANK[v] > _VALIDITY_RANK[worst]):
            worst = v
    return worst


def _case_weighted_mean(records: list[CaseRecord], get: Any) -> float | None:
    per_case: dict[tuple[str, str], list[float]] = {}
    for r in records:
        value = get(r)
        if value is not None:
            per_case.setdefault((r.challenge_key, r.case_key), []).append(value)
    return mean([math.fsum(v) / len(v) for v in per_case.values()])


def _case_weighted_means(records: list[CaseRecord], get: Any) -> dict[str, float | None]:
    per_key: dict[str, dict[tuple[str, str], list[float]]] = {}
    for r in records:
        for key, value in get(r).items():
            bucket = per_key.setdefault(key, {})
            if value is not None:
                bucket.setdefault((r.challenge_key, r.case_key), []).append(value)
    return {key: mean([math.fsum(v) / len(v) for v in cases.values()]) for key, cases in per_key.items()}


def aggregate_lane(
    records: Iterable[CaseRecord],
    *,
    run_id: str = "offline",
    deployment: str | None = None,
    intervals: bool = True,
    challenge_intervals: bool = False,
) -> LaneAggregate:
    """Every §10.3 figure of one lane. ``records`` are that lane's case executions.

    ``intervals`` computes the lane's mean-score bootstrap (seed figure ``"mean_score"``);
    ``challenge_intervals`` also bootstraps each challenge (``"<challenge_key>:mean_score"``),
    which doubles the cost, so it is off by default. Wilson intervals are always given.
    """
    rows = list(records)
    dep = deployment if deployment is not None else (rows[0].deployment if rows else "default")
    lane_id = rows[0].lane_id if rows and rows[0].lane_id else dep
    micro = _group_figures(rows, run_id=run_id, deployment=dep, figure_prefix="", intervals=intervals)
    by_challenge: dict[str, list[CaseRecord]] = {}
    for r in rows:
        by_challenge.setdefault(r.challenge_key, []).append(r)
    challenges = {
        key: _group_figures(
            group, run_id=run_id, deployment=dep, figure_prefix=f"{key}:", intervals=challenge_intervals
        )
        for key, group in by_challenge.items()
    }
    macro = {
        "pass_rate": mean([c.pass_rate for c in challenges.values() if c.pass_rate is not None]),
        "mean_score": mean([c.mean_score for c in challenges.values() if c.mean_score is not None]),
        "coverage": mean([c.coverage for c in challenges.values() if c.coverage is not None]),
    }
    hist = LatencyHistogram()
    for r in rows:
        if r.latency_ms is not None:
            hist.add(r.latency_ms)
    return LaneAggregate(
        deployment=dep,
        lane_id=lane_id,
        micro=micro,
        macro=macro,
        challenges=challenges,
        agent_input_tokens=_sum_known(r.input_tokens for r in rows),
        agent_output_tokens=_sum_known(r.output_tokens for r in rows),
        agent_cost_usd=_sum_known(r.cost_usd for r in rows),
        latency_p50_ms=hist.quantile(0.5),
        latency_p95_ms=hist.quantile(0.95),
        judge_calls=sum(r.judge_calls for r in rows),
        judge_input_tokens=sum(r.judge_input_tokens for r in rows),
        judge_output_tokens=sum(r.judge_output_tokens for r in rows),
        judge_cost_usd=_sum_known(r.judge_cost_usd for r in rows),
    )


def _sum_known(values: Iterable[Any]) -> Any:
    """Sum of the reported values; None when nothing was reported."""
    known = [v for v in values if v is not None]
    if not known:
        return None
    if all(isinstance(v, int) for v in known):
        return sum(known)
    return math.fsum(known)


def group_by_lane(records: Iterable[CaseRecord]) -> dict[str, list[CaseRecord]]:
    """Records by deployment, in order of first appearance."""
    out: dict[str, list[CaseRecord]] = {}
    for r in records:
        out.setdefault(r.deployment, []).append(r)
    return out


# ---------------------------------------------------------------------------
# Latency histogram
# ---------------------------------------------------------------------------


class LatencyHistogram:
    """Fixed log-bucket histogram of latencies in milliseconds.

    Bucket ``i >= 0`` holds ``[2**(i/4), 2**((i+1)/4))`` ms (about 19% wide), up to bucket
    99 (~2.6 h and above); bucket ``-1`` holds everything below 1 ms. Buckets are fixed, so
    histograms of different lanes, workers or runs merge by adding counts.
    """

    STEPS_PER_DOUBLING = 4
    BUCKETS = 100

    __slots__ = ("counts", "total")

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}
        self.total = 0

    @classmethod
    def bucket(cls, ms: float) -> int:
        if not (ms >= 1.0):  # also catches NaN
            return -1
        return min(int(math.floor(math.log2(ms) * cls.STEPS_PER_DOUBLING)), cls.BUCKETS - 1)

    @classmethod
    def bounds(cls, index: int) -> tuple[float, float]:
        if index < 0:
            return (0.0, 1.0)
        step = cls.STEPS_PER_DOUBLING
        return (2.0 ** (index / step), 2.0 ** ((index + 1) / step))

    def add(self, ms: float, count: int = 1) -> None:
        index = self.bucket(ms)
        value = self.counts.get(index, 0) + count
        if value:
            self.counts[index] = value
        else:
            self.counts.pop(index, None)
        self.total += count

    def remove(self, ms: float) -> None:
        self.add(ms, -1)

    def merge(self, other: LatencyHistogram) -> None:
        for index, count in other.counts.items():
            value = self.counts.get(index, 0) + count
            if value:
                self.counts[index] = value
            else:
                self.counts.pop(index, None)
        self.total += other.total

    def quantile(self, q: float) -> float | None:
        """Estimated q-quantile (0 < q <= 1): the nearest-rank bucket, interpolated
        geometrically inside it. None when empty."""
        if self.total <= 0:
            return None
        rank = max(1, math.ceil(q * self.total))
        seen = 0
        for index in sorted(self.counts):
            count = self.counts[index]
            if count <= 0:
                continue
            if seen + count >= rank:
                lo, hi = self.bounds(index)
                frac = (rank - seen - 0.5) / count
                if index < 0:
                    return lo + (hi - lo) * frac
                return lo * (hi / lo) ** frac
            seen += count
        lo, hi = self.bounds(max(self.counts))
        return hi

    def to_dict(self) -> dict[str, Any]:
        return {"counts": {str(k): v for k, v in sorted(self.counts.items())}, "total": self.total}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> LatencyHistogram:
        hist = cls()
        for k, v in ((data or {}).get("counts") or {}).items():
            if int(v):
                hist.counts[int(k)] = int(v)
        hist.total = int((data or {}).get("total") or sum(hist.counts.values()))
        return hist


# ---------------------------------------------------------------------------
# Incremental counters
# ---------------------------------------------------------------------------


def _tally() -> dict[str, Any]:
    return {
        "counts": dict.fromkeys(STATUSES, 0),
        "passed": 0,
        "graded": 0,
        "score_sum": 0.0,
        "scored": 0,
        "executions": 0,
    }


def _figures(r: CaseRecord) -> list[tuple[str, float]]:
    """The per-case figures of one record that the lane averages (dimensions, compliance,
    reliability), named as ``LaneCounters.case_figures`` keeps them."""
    out = [(f"d:{k}", v) for k, v in r.dimensions.items() if v is not None]
    if r.compliance_score is not None:
        out.append(("c", r.compliance_score))
    if r.reliability is not None:
        out.append(("r", r.reliability))
    return out


def _bump_tally(t: dict[str, Any], r: CaseRecord, sign: int) -> None:
    t["executions"] += sign
    t["counts"][r.status] = t["counts"].get(r.status, 0) + sign
    if r.status == "PASSED":
        t["passed"] += sign
    if r.has_verdict:
        t["graded"] += sign
    if r.score is not None:
        t["score_sum"] += sign * r.score
        t["scored"] += sign


def _merge_tally(a: dict[str, Any], b: Mapping[str, Any]) -> None:
    for k in ("passed", "graded", "score_sum", "scored", "executions"):
        a[k] += b.get(k, 0)
    for k, v in (b.get("counts") or {}).items():
        a["counts"][k] = a["counts"].get(k, 0) + v


class LaneCounters:
    """Incremental lane figures, updated as grades land and stored as JSON.

    With ``repetitions == 1`` each case has one execution, so execution-level tallies give
    the exact §10.3 pass rate and mean score and the stored document stays small whatever
    the run's size. With repetitions a per-case tally is kept (the case contributes the mean
    of its repetitions). Re-grading a case is ``remove(old)`` then ``add(new)``.
    Bootstrap intervals need per-case values and are computed once at completion
    (:func:`aggregate_lane`); the Wilson interval is available here.
    """

    __slots__ = (
        "agent",
        "case_figures",
        "cases",
        "challenges",
        "compliance",
        "dimensions",
        "judge",
        "latency",
        "outcome_counts",
        "reliability",
        "repetitions",
        "tally",
        "validity_counts",
    )

    def __init__(self, repetitions: int = 1) -> None:
        self.repetitions = max(1, int(repetitions))
        self.tally = _tally()
        self.outcome_counts = dict.fromkeys(OUTCOME_CLASSES, 0)
        self.validity_counts = dict.fromkeys(VALIDITIES, 0)
        self.challenges: dict[str, dict[str, Any]] = {}
        self.cases: dict[str, list[float]] = {}  # "challenge\x1fcase" -> [passed, graded, score_sum, scored]
        # with repetitions: "challenge\x1fcase" -> figure ("d:<dimension key>", "c" compliance,
        # "r" reliability: short, the document is written with every batch) -> [sum, n], so
        # each case weighs 1 in those means too (§10.3)
        self.case_figures: dict[str, dict[str, list[float]]] = {}
        self.dimensions: dict[str, list[float]] = {}  # key -> [sum, n]
        self.compliance = [0.0, 0]
        self.reliability = [0.0, 0]
        self.agent: dict[str, float] = {
            "input_tokens": 0,
            "output_tokens": 0,
            "cost_usd": 0.0,
            "cost_reported": 0,
        }
        self.judge: dict[str, float] = {
            "calls": 0,
            "input_tokens": 0,
            "output_tokens": 0,
            "cost_usd": 0.0,
            "cost_unknown": 0,
        }
        self.latency = LatencyHistogram()

    # -- updates -----------------------------------------------------------

    def add(self, record: CaseRecord) -> None:
        self._apply(record, 1)

    def remove(self, record: CaseRecord) -> None:
        self._apply(record, -1)

    def _apply(self, r: CaseRecord, sign: int) -> None:
        _bump_tally(self.tally, r, sign)
        _bump_tally(self.challenges.setdefault(r.challenge_key, _tally()), r, sign)
        if r.outcome_class:
            self.outcome_counts[r.outcome_class] = self.outcome_counts.get(r.outcome_class, 0) + sign
        if r.validity:
            self.validity_counts[r.validity] = self.validity_counts.get(r.validity, 0) + sign
        if self.repetitions > 1:
            key = f"{r.challenge_key}\x1f{r.case_key}"
            c = self.cases.setdefault(key, [0, 0, 0.0, 0])
            c[0] += sign if r.status == "PASSED" else 0
            c[1] += sign if r.has_verdict else 0
            if r.score is not None:
                c[2] += sign * r.score
                c[3] += sign
            if not any(c):
                del self.cases[key]
            for name, value in _figures(r):
                per_case = self.case_figures.setdefault(key, {})
                slot = per_case.setdefault(name, [0.0, 0])
                slot[0] += sign * value
                slot[1] += sign
                if not slot[1]:
                    del per_case[name]
                    if not per_case:
                        del self.case_figures[key]
        for key, value in r.dimensions.items():
            if value is not None:
                d = self.dimensions.setdefault(key, [0.0, 0])
                d[0] += sign * value
                d[1] += sign
        if r.compliance_score is not None:
            self.compliance[0] += sign * r.compliance_score
            self.compliance[1] += sign
        if r.reliability is not None:
            self.reliability[0] += sign * r.reliability
            self.reliability[1] += sign
        self.agent["input_tokens"] += sign * (r.input_tokens or 0)
        self.agent["output_tokens"] += sign * (r.output_tokens or 0)
        if r.cost_usd is not None:
            self.agent["cost_usd"] += sign * r.cost_usd
            self.agent["cost_reported"] += sign
        self.judge["calls"] += sign * r.judge_calls
        self.judge["input_tokens"] += sign * r.judge_input_tokens
        self.judge["output_tokens"] += sign * r.judge_output_tokens
        if r.judge_cost_usd is None:
            self.judge["cost_unknown"] += sign
        else:
            self.judge["cost_usd"] += sign * r.judge_cost_usd
        if r.latency_ms is not None:
            self.latency.add(r.latency_ms, sign)

    def merge(self, other: LaneCounters) -> None:
        _merge_tally(self.tally, other.tally)
        for key, t in other.challenges.items():
            _merge_tally(self.challenges.setdefault(key, _tally()), t)
        pairs: tuple[tuple[dict[str, Any], Mapping[str, Any]], ...] = (
            (self.outcome_counts, other.outcome_counts),
            (self.validity_counts, other.validity_counts),
            (self.agent, other.agent),
            (self.judge, other.judge),
        )
        for target, source in pairs:
            for k, v in source.items():
                target[k] = target.get(k, 0) + v
        for key, c in other.cases.items():
            mine = self.cases.setdefault(key, [0, 0, 0.0, 0])
            for i in range(4):
                mine[i] += c[i]
        for key, figures in other.case_figures.items():
            per_case = self.case_figures.setdefault(key, {})
            for name, (total, n) in figures.items():
                slot = per_case.setdefault(name, [0.0, 0])
                slot[0] += total
                slot[1] += n
        for key, d in other.dimensions.items():
            mine = self.dimensions.setdefault(key, [0.0, 0])
            mine[0] += d[0]
            mine[1] += d[1]
        for mine, theirs in ((self.compliance, other.compliance), (self.reliability, other.reliability)):
            mine[0] += theirs[0]
            mine[1] += theirs[1]
        self.repetitions = max(self.repetitions, other.repetitions)
        self.latency.merge(other.latency)

    # -- figures -------------------------------------------------------------

    def _rates(self, challenge: str | None = None) -> tuple[float, int]:
        """(sum of case pass rates, number of cases with a verdict)."""
        return self._per_case(challenge, 0, "passed", "graded")

    def _scores(self, challenge: str | None = None) -> tuple[float, int]:
        """(sum of case mean scores, number of cases with a score)."""
        return self._per_case(challenge, 2, "score_sum", "scored")

    def _per_case(self, challenge: str | None, at: int, sum_key: str, n_key: str) -> tuple[float, int]:
        """With repetitions, the sum over cases of each case's mean (``cases[key][at]`` over
        ``cases[key][at + 1]``) and the number of such cases; else the tallies ``sum_key`` and
        ``n_key`` (of one challenge, or all)."""
        if self.repetitions > 1:
            prefix = None if challenge is None else f"{challenge}\x1f"
            total, n = 0.0, 0
            for key, c in self.cases.items():
                if c[at + 1] > 0 and (prefix is None or key.startswith(prefix)):
                    total += c[at] / c[at + 1]
                    n += 1
            return total, n
        t = self.tally if challenge is None else self.challenges.get(challenge, _tally())
        return float(t[sum_key]), int(t[n_key])

    def pass_rate(self, challenge: str | None = None) -> float | None:
        total, n = self._rates(challenge)
        return total / n if n else None

    def pass_rate_interval(self, challenge: str | None = None) -> tuple[float, float] | None:
        total, n = self._rates(challenge)
        return wilson_interval(total, n)

    def mean_score(self, challenge: str | None = None) -> float | None:
        total, n = self._scores(challenge)
        return total / n if n else None

    def coverage(self, challenge: str | None = None) -> float | None:
        t = self.tally if challenge is None else self.challenges.get(challenge, _tally())
        return t["graded"] / t["executions"] if t["executions"] else None

    @property
    def counts(self) -> dict[str, int]:
        return dict(self.tally["counts"])

    @property
    def validity(self) -> str | None:
        return worst_validity(self.validity_counts)

    def _figure_mean(self, name: str, total: float, n: int) -> float | None:
        """The lane mean of one per-case figure: with repetitions, the mean over cases of each
        case's mean (as ``aggregate_lane``); else (or for counters stored before the per-case
        figures were kept) the mean over executions."""
        if self.repetitions > 1 and self.case_figures:
            means = [f[name][0] / f[name][1] for f in self.case_figures.values() if f.get(name, (0, 0))[1]]
            return math.fsum(means) / len(means) if means else None
        return total / n if n else None

    def summary(self) -> dict[str, Any]:
        """The overview figures, rounded as interfaces.md shows them."""
        dims = {k: self._figure_mean(f"d:{k}", d[0], d[1]) for k, d in self.dimensions.items()}
        return {
            "counts": self.counts,
            "outcome_counts": dict(self.outcome_counts),
            "executions": self.tally["executions"],
            "pass_rate": round4(self.pass_rate()),
            "pass_rate_interval": round_interval(self.pass_rate_interval()),
            "coverage": round4(self.coverage()),
            "mean_score": round4(self.mean_score()),
            "dimension_means": {k: round4(v) for k, v in dims.items()},
            "compliance_mean": round4(self._figure_mean("c", *self.compliance)),
            "mean_reliability": round4(self._figure_mean("r", *self.reliability)),
            "validity": self.validity,
            "validity_counts": dict(self.validity_counts),
            "challenges": {
                key: {
                    "counts": dict(t["counts"]),
                    "pass_rate": round4(self.pass_rate(key)),
                    "coverage": round4(self.coverage(key)),
                    "mean_score": round4(self.mean_score(key)),
                }
                for key, t in self.challenges.items()
            },
            "agent": {
                "input_tokens": self.agent["input_tokens"],
                "output_tokens": self.agent["output_tokens"],
                "cost_usd": self.agent["cost_usd"] if self.agent["cost_reported"] else None,
                "latency_p50_ms": round4(self.latency.quantile(0.5)),
                "latency_p95_ms": round4(self.latency.quantile(0.95)),
            },
            "judge_usage": {
                "calls": self.judge["calls"],
                "input_tokens": self.judge["input_tokens"],
                "output_tokens": self.judge["output_tokens"],
                "cost_usd": None if self.judge["cost_unknown"] else self.judge["cost_usd"],
            },
        }

    # -- storage -------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": 1,
            "repetitions": self.repetitions,
            "tally": self.tally,
            "outcome_counts": self.outcome_counts,
            "validity_counts": self.validity_counts,
            "challenges": self.challenges,
            "cases": self.cases,
            "case_figures": self.case_figures,
            "dimensions": self.dimensions,
            "compliance": self.compliance,
            "reliability": self.reliability,
            "agent": self.agent,
            "judge": self.judge,
            "latency": self.latency.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> LaneCounters:
        data = data or {}
        c = cls(repetitions=int(data.get("repetitions") or 1))
        if "tally" in data:
            c.tally = _tally()
            _merge_tally(c.tally, data["tally"])
        for key, t in (data.get("challenges") or {}).items():
            c.challenges[key] = _tally()
            _merge_tally(c.challenges[key], t)
        c.outcome_counts.update(data.get("outcome_counts") or {})
        c.validity_counts.update(data.get("validity_counts") or {})
        c.cases = {k: list(v) for k, v in (data.get("cases") or {}).items()}
        c.case_figures = {
            k: {name: list(slot) for name, slot in (v or {}).items()}
            for k, v in (data.get("case_figures") or {}).items()
        }
        c.dimensions = {k: list(v) for k, v in (data.get("dimensions") or {}).items()}
        c.compliance = list(data.get("compliance") or [0.0, 0])
        c.reliability = list(data.get("reliability") or [0.0, 0])
        c.agent.update(data.get("agent") or {})
        c.judge.update(data.get("judge") or {})
        c.latency = LatencyHistogram.from_dict(data.get("latency"))
        return c
