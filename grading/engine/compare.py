"""Lane ranking and run-versus-run comparison (spec/grading.md §10.4).

Ranking sorts lanes by mean overall score (descending), pass rate, mean reliability, total
agent cost (ascending), then deployment name; lanes with no graded case come last. Ranks
are competition ranks (1, 2, 2, 4), shared only when every sort figure is equal (the name
only orders the display; figures within ``DELTA_NOISE``, float noise, are equal). A lane is
``within_noise`` of the leader when the paired bootstrap interval of its per-case score
difference contains 0 (bounds within ``DELTA_NOISE`` of 0 count as 0).

Comparison matches cases by ``(challenge_key, case_key)`` between a baseline and a
candidate set of records and classifies each, then gives paired-bootstrap deltas of pass
rate and mean score with the verdict regressed / improved / within_noise / not_comparable.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cmp_to_key
from typing import Any

from .aggregate import CaseFigures, CaseRecord, LaneAggregate, aggregate_lane, case_figures
from .stats import mean, paired_bootstrap_interval, round4, round_interval, seed_for

CLASSES = (
    "regression",
    "improvement",
    "unchanged_pass",
    "unchanged_fail",
    "not_comparable",
    "added",
    "removed",
)

# A delta this close to 0 is floating-point noise, not a change: a case's mean score over
# repetitions is a running sum divided by the count, so ten repetitions scoring 0.865625
# average to 0.8656249999999999, and the same agent against its own one-repetition run
# read as "regressed" on an interval of (-1.1e-16, -2.8e-17). The ranking ties figures and
# reads intervals with the same tolerance: two lanes that scored 0.1, 0.2 and 0.3 on a case,
# summed in two orders, differ by 1e-16 and must not be ranked apart.
DELTA_NOISE = 1e-9


def same_within_noise(a: float | None, b: float | None) -> bool:
    """Equal, or two numbers within ``DELTA_NOISE`` of each other."""
    return a == b or (a is not None and b is not None and abs(a - b) <= DELTA_NOISE)


def contains_zero(interval: tuple[float, float]) -> bool:
    """Whether the interval contains 0, bounds within ``DELTA_NOISE`` of 0 counting as 0."""
    return interval[0] <= DELTA_NOISE and interval[1] >= -DELTA_NOISE


# ---------------------------------------------------------------------------
# Ranking
# ---------------------------------------------------------------------------


@dataclass(slots=True)
class LaneStanding:
    """The sort figures of one lane, plus its place once ranked."""

    deployment: str
    mean_score: float | None
    pass_rate: float | None
    mean_reliability: float | None
    agent_cost_usd: float | None
    graded_cases: int
    rank: int = 0
    within_noise: bool | None = None
    score_difference: float | None = None  # mean of (this lane - leader) over paired cases
    score_difference_interval: tuple[float, float] | None = None

    def sort_key(self) -> tuple[Any, ...]:
        return (
            0 if self.graded_cases > 0 else 1,
            _desc(self.mean_score),
            _desc(self.pass_rate),
            _desc(self.mean_reliability),
            _asc(self.agent_cost_usd),
            self.deployment,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "deployment": self.deployment,
            "rank": self.rank,
            "within_noise": self.within_noise,
            "mean_score": round4(self.mean_score),
            "pass_rate": round4(self.pass_rate),
            "mean_reliability": round4(self.mean_reliability),
            "agent_cost_usd": self.agent_cost_usd,
            "graded_cases": self.graded_cases,
            "score_difference": round4(self.score_difference),
            "score_difference_interval": round_interval(self.score_difference_interval),
        }

    @classmethod
    def from_aggregate(cls, lane: LaneAggregate) -> LaneStanding:
        return cls(
            deployment=lane.deployment,
            mean_score=lane.mean_score,
            pass_rate=lane.pass_rate,
            mean_reliability=lane.mean_reliability,
            agent_cost_usd=lane.agent_cost_usd,
            graded_cases=lane.graded_cases,
        )


def _desc(value: float | None) -> tuple[int, float]:
    return (1, 0.0) if value is None else (0, -value)


def _asc(value: float | None) -> tuple[int, float]:
    return (1, 0.0) if value is None else (0, value)


def _by_figures(a: LaneStanding, b: LaneStanding) -> int:
    """-1 when ``a`` ranks before ``b``, 1 after, 0 when every sort figure is equal, numbers
    within ``DELTA_NOISE`` counting as equal (``sort_key``'s order, without the name)."""
    for x, y in zip(a.sort_key()[:-1], b.sort_key()[:-1], strict=True):
        if x == y or (isinstance(x, tuple) and x[0] == y[0] and same_within_noise(x[1], y[1])):
            continue
        return -1 if x < y else 1
    return 0


def _by_rank(a: LaneStanding, b: LaneStanding) -> int:
    return _by_figures(a, b) or (a.deployment > b.deployment) - (a.deployment < b.deployment)


def rank_standings(standings: Iterable[LaneStanding]) -> list[LaneStanding]:
    """Sort and assign competition ranks in place; returns the sorted list. Lanes whose
    figures differ by float noise only tie, in name order."""
    ordered = sorted(standings, key=cmp_to_key(_by_rank))
    for i, lane in enumerate(ordered):
        if i > 0 and _by_figures(lane, ordered[i - 1]) == 0:
            lane.rank = ordered[i - 1].rank
        else:
            lane.rank = i + 1
    return ordered


def rank_lanes(
    records_by_lane: Mapping[str, Sequence[CaseRecord]],
    *,
    run_id: str = "offline",
    aggregates: Mapping[str, LaneAggregate] | None = None,
) -> list[LaneStanding]:
    """Ranked lanes with ``within_noise`` of the leader.

    The paired bootstrap (seed figure ``"score_difference"`` of the compared lane) runs over
    the cases graded (with a score) on both the lane and the leader; with no such case
    ``within_noise`` is None.
    """
    aggregates = dict(aggregates or {})
    for dep, rows in records_by_lane.items():
        if dep not in aggregates:
            aggregates[dep] = aggregate_lane(rows, run_id=run_id, deployment=dep, intervals=False)
    ordered = rank_standings(LaneStanding.from_aggregate(aggregates[dep]) for dep in records_by_lane)
    if not ordered or ordered[0].graded_cases == 0:
        return ordered
    leader = ordered[0]
    leader_cases = case_figures(records_by_lane[leader.deployment])
    leader.within_noise = False
    for lane in ordered[1:]:
        if lane.graded_cases == 0:
            continue
        base, cand = _paired_scores(leader_cases, case_figures(records_by_lane[lane.deployment]))
        if not base:
            continue
        interval = paired_bootstrap_interval(
            base, cand, seed_for(run_id, lane.deployment, "score_difference")
        )
        lane.score_difference = mean([c - b for b, c in zip(base, cand, strict=True)])
        lane.score_difference_interval = interval
        lane.within_noise = interval is not None and contains_zero(interval)
    return ordered


def _paired_scores(
    a: Mapping[tuple[str, str], CaseFigures], b: Mapping[tuple[str, str], CaseFigures]
) -> tuple[list[float], list[float]]:
    xs: list[float] = []
    ys: list[float] = []
    for key, fa in a.items():
        fb = b.get(key)
        if fb is None or fa.graded == 0 or fb.graded == 0:
            continue
        sa, sb = fa.mean_score, fb.mean_score
        if sa is not None and sb is not None:
            xs.append(sa)
            ys.append(sb)
    return xs, ys


# ---------------------------------------------------------------------------
# Comparison
# ---------------------------------------------------------------------------


@dataclass(slots=True)
class CaseComparison:
    challenge_key: str
    case_key: str
    change: str  # one of CLASSES
    baseline_status: str | None = None
    candidate_status: str | None = None
    baseline_pass_rate: float | None = None
    candidate_pass_rate: float | None = None
    baseline_score: float | None = None
    candidate_score: float | None = None
    score_delta: float | None = None
    noisy: bool = False
    case_changed: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "challenge_key": self.challenge_key,
            "case_key": self.case_key,
            "class": self.change,
            "baseline_status": self.baseline_status,
            "candidate_status": self.candidate_status,
            "baseline_pass_rate": round4(self.baseline_pass_rate),
            "candidate_pass_rate": round4(self.candidate_pass_rate),
            "baseline_score": round4(self.baseline_score),
            "candidate_score": round4(self.candidate_score),
            "score_delta": round4(self.score_delta),
            "noisy": self.noisy,
            "case_changed": self.case_changed,
        }


@dataclass(slots=True)
class Comparison:
    verdict: str  # regressed | improved | within_noise | not_comparable
    cases: list[CaseComparison]
    counts: dict[str, int]
    matched_graded: int
    pass_rate_delta: float | None
    pass_rate_delta_interval: tuple[float, float] | None
    mean_score_delta: float | None
    mean_score_delta_interval: tuple[float, float] | None
    scored_pairs: int
    baseline_pack_versions: list[int] = field(default_factory=list)
    candidate_pack_versions: list[int] = field(default_factory=list)

    @property
    def pack_version_changed(self) -> bool:
        return bool(self.baseline_pack_versions and self.candidate_pack_versions) and (
            self.baseline_pack_versions != self.candidate_pack_versions
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "counts": dict(self.counts),
            "matched_graded": self.matched_graded,
            "pass_rate_delta": round4(self.pass_rate_delta),
            "pass_rate_delta_interval": round_interval(self.pass_rate_delta_interval),
            "mean_score_delta": round4(self.mean_score_delta),
            "mean_score_delta_interval": round_interval(self.mean_score_delta_interval),
            "scored_pairs": self.scored_pairs,
            "baseline_pack_versions": list(self.baseline_pack_versions),
            "candidate_pack_versions": list(self.candidate_pack_versions),
            "pack_version_changed": self.pack_version_changed,
            "cases": [c.to_dict() for c in self.cases],
        }


def _side_status(fig: CaseFigures, records: list[CaseRecord]) -> str:
    """The case verdict of one side. With repetitions: PASSED when more than half of the
    graded repetitions passed, else FAILED (a tie is FAILED, as a judge tie is, §6.3);
    without any verdict, the first repetition's status."""
    rate = fig.pass_rate
    if rate is None:
        return records[0].status if records else "NOT_EVALUATED"
    return "PASSED" if rate > 0.5 else "FAILED"


def _by_case(records: Iterable[CaseRecord]) -> dict[tuple[str, str], list[CaseRecord]]:
    out: dict[tuple[str, str], list[CaseRecord]] = {}
    for r in records:
        out.setdefault(r.case_id, []).append(r)
    return out


def compare_records(
    baseline: Iterable[CaseRecord],
    candidate: Iterable[CaseRecord],
    *,
    run_id: str = "compare",
    deployment: str = "candidate",
) -> Comparison:
    """Case-keyed comparison of a baseline lane with a candidate lane (same or other run).

    Seeds: ``seed_for(run_id, deployment, "pass_rate_delta")`` and ``"mean_score_delta"``;
    callers pass the candidate's run id and lane name.
    """
    base_rows, cand_rows = list(baseline), list(candidate)
    base_groups, cand_groups = _by_case(base_rows), _by_case(cand_rows)
    base_figs, cand_figs = case_figures(base_rows), case_figures(cand_rows)
    cases: list[CaseComparison] = []
    pass_pairs: tuple[list[float], list[float]] = ([], [])
    score_pairs: tuple[list[float], list[float]] = ([], [])
    for key, bf in base_figs.items():
        cf = cand_figs.get(key)
        b_status = _side_status(bf, base_groups[key])
        if cf is None:
            cases.append(
                CaseComparison(
                    key[0],
                    key[1],
                    "removed",
                    baseline_status=b_status,
                    baseline_pass_rate=bf.pass_rate,
                    baseline_score=bf.mean_score,
                )
            )
            continue
        c_status = _side_status(cf, cand_groups[key])
        item = CaseComparison(
            key[0],
            key[1],
            "not_comparable",
            baseline_status=b_status,
            candidate_status=c_status,
            baseline_pass_rate=bf.pass_rate,
            candidate_pass_rate=cf.pass_rate,
            baseline_score=bf.mean_score,
            candidate_score=cf.mean_score,
            case_changed=bool(bf.content_hash and cf.content_hash and bf.content_hash != cf.content_hash),
        )
        if bf.mean_score is not None and cf.mean_score is not None:
            item.score_delta = cf.mean_score - bf.mean_score
        if bf.pass_rate is not None and cf.pass_rate is not None:
            item.change = {
                ("PASSED", "FAILED"): "regression",
                ("FAILED", "PASSED"): "improvement",
                ("PASSED", "PASSED"): "unchanged_pass",
                ("FAILED", "FAILED"): "unchanged_fail",
            }[(b_status, c_status)]
            if item.change in ("regression", "improvement"):
                item.noisy = any(0.0 < r < 1.0 for r in (bf.pass_rate, cf.pass_rate))
            pass_pairs[0].append(bf.pass_rate)
            pass_pairs[1].append(cf.pass_rate)
            if item.score_delta is not None:
                score_pairs[0].append(bf.mean_score)  # type: ignore[arg-type]
                score_pairs[1].append(cf.mean_score)  # type: ignore[arg-type]
        cases.append(item)
    for key, cf in cand_figs.items():
        if key not in base_figs:
            cases.append(
                CaseComparison(
                    key[0],
                    key[1],
                    "added",
                    candidate_status=_side_status(cf, cand_groups[key]),
                    candidate_pass_rate=cf.pass_rate,
                    candidate_score=cf.mean_score,
                )
            )
    counts = dict.fromkeys(CLASSES, 0)
    for c in cases:
        counts[c.change] += 1
    pass_interval = paired_bootstrap_interval(*pass_pairs, seed_for(run_id, deployment, "pass_rate_delta"))
    score_interval = paired_bootstrap_interval(*score_pairs, seed_for(run_id, deployment, "mean_score_delta"))
    return Comparison(
        verdict=comparison_verdict(len(pass_pairs[0]), pass_interval, score_interval),
        cases=cases,
        counts=counts,
        matched_graded=len(pass_pairs[0]),
        pass_rate_delta=_mean_diff(*pass_pairs),
        pass_rate_delta_interval=pass_interval,
        mean_score_delta=_mean_diff(*score_pairs),
        mean_score_delta_interval=score_interval,
        scored_pairs=len(score_pairs[0]),
        baseline_pack_versions=sorted({r.pack_version for r in base_rows if r.pack_version is not None}),
        candidate_pack_versions=sorted({r.pack_version for r in cand_rows if r.pack_version is not None}),
    )


def _mean_diff(base: list[float], cand: list[float]) -> float | None:
    return mean([c - b for b, c in zip(base, cand, strict=True)])


def comparison_verdict(
    matched_graded: int,
    pass_interval: tuple[float, float] | None,
    score_interval: tuple[float, float] | None,
) -> str:
    """§10.4: regressed if either interval lies wholly below 0; else improved if either lies
    wholly above 0; else within_noise; not_comparable with no matched graded case. Bounds
    within ``DELTA_NOISE`` of 0 count as 0."""
    if matched_graded == 0:
        return "not_comparable"
    intervals = [i for i in (pass_interval, score_interval) if i is not None]
    if any(hi < -DELTA_NOISE for _, hi in intervals):
        return "regressed"
    if any(lo > DELTA_NOISE for lo, _ in intervals):
        return "improved"
    return "within_noise"
