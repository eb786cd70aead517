"""The figures computed once when a run completes, streamed (``runs.scoring.compute_stats``).

One pass per lane over the item columns and the few grade fields the figures need, into
fixed accumulators: tallies per lane and challenge, per-case sums in ``array`` columns indexed
by a small per-run case number, per-expectation run-health counters. The results equal
``aggregate_lane`` / ``rank_lanes`` / ``run_health`` over the records, without keeping them.
"""

from __future__ import annotations

import json
import math
from array import array
from collections.abc import Iterable, Iterator
from typing import Any

from django.db import connection

from grading.engine.aggregate import (
    OUTCOME_CLASSES,
    STATUSES,
    VALIDITIES,
    GroupFigures,
    LaneAggregate,
    LatencyHistogram,
    finite_float,
    finite_int,
    worst_validity,
)
from grading.engine.compare import LaneStanding, contains_zero, rank_standings
from grading.engine.stats import (
    bootstrap_interval,
    mean,
    paired_bootstrap_interval,
    seed_for,
    wilson_interval,
)
from runs.models import RunItem, RunLane
from runs.scoring.health import RunHealth

# ---------------------------------------------------------------------------
# Streaming figures (constant memory per item)
# ---------------------------------------------------------------------------

STREAM_CHUNK = 2000
_COLUMNS = (
    "challenge_key",
    "case_key",
    "repetition",
    "status",
    "outcome_class",
    "reason_code",
    "score",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "latency_ms",
    "grade__validity",
    "grade__scorecard__dimensions",
    "grade__gates__compliance_score",
    "grade__expectations",
    "grade__judge_usage",
    "grade__case__lane_id",
)


# The same rows as ``values_list(*_COLUMNS)`` on PostgreSQL, with each grade decompressed
# once: the ORM's six ``grade -> member`` expressions decompressed the (pglz, ~3.5 kB) grade
# six times per row, 72 ms of PostgreSQL time for 2,000 items against 17 ms this way.
# Of each expectation only what ``Row.fill`` reads is sent (key, kind, status, outcome
# class, reason code, a judge's agreement), not its evidence text and details.
_PG_STREAM_SQL = """
SELECT i.challenge_key, i.case_key, i.repetition, i.status, i.outcome_class, i.reason_code,
       i.score, i.input_tokens, i.output_tokens, i.cost_usd, i.latency_ms,
       (g.g -> 'validity')::text, (g.g #> '{scorecard,dimensions}')::text,
       (g.g #> '{gates,compliance_score}')::text,
       (SELECT jsonb_agg(jsonb_build_object(
            'key', e -> 'key', 'kind', e -> 'kind', 'status', e -> 'status',
            'outcome_class', e -> 'outcome_class', 'reason_code', e -> 'reason_code',
            'details', CASE WHEN e ->> 'kind' = 'judge'
                THEN jsonb_build_object('agreement', e #> '{details,agreement}') END
        ) ORDER BY t.n)
        FROM jsonb_array_elements(CASE WHEN jsonb_typeof(g.g -> 'expectations') = 'array'
            THEN g.g -> 'expectations' ELSE '[]'::jsonb END) WITH ORDINALITY AS t(e, n))::text,
       (g.g -> 'judge_usage')::text, (g.g #> '{case,lane_id}')::text
FROM runs_runitem i
CROSS JOIN LATERAL (SELECT i.grade || '{}'::jsonb AS g OFFSET 0) g
WHERE i.lane_id = %s AND i.status <> '' AND i.grade IS NOT NULL AND i.grade <> '{}'::jsonb
ORDER BY i.id
"""
_PG_JSON_SLOTS = range(11, 17)  # the grade members, as JSON text


def _pg_rows(lane_id: int) -> Iterator[tuple[Any, ...]]:
    with connection.chunked_cursor() as cursor:  # server side: STREAM_CHUNK rows at a time
        cursor.execute(_PG_STREAM_SQL, [lane_id])
        while chunk := cursor.fetchmany(STREAM_CHUNK):
            for raw in chunk:
                values = list(raw)
                for i in _PG_JSON_SLOTS:
                    if values[i] is not None:
                        values[i] = json.loads(values[i])
                yield tuple(values)


class _Known:
    """A running ``_sum_known``: None when nothing was reported, an int sum when every
    reported value is an int, else the exact float sum (values kept in a compact array)."""

    __slots__ = ("all_int", "count", "ints", "values")

    def __init__(self) -> None:
        self.count = 0
        self.ints = 0
        self.all_int = True
        self.values = array("d")

    def add(self, value: Any) -> None:
        if value is None:
            return
        self.count += 1
        if isinstance(value, int):
            self.ints += value
        else:
            self.all_int = False
        self.values.append(float(value))

    def total(self) -> Any:
        if not self.count:
            return None
        return self.ints if self.all_int else math.fsum(self.values)


class _Group:
    """Execution tallies of one lane or one challenge of a lane."""

    __slots__ = ("counts", "dim_keys", "executions", "outcome_counts", "validity_counts")

    def __init__(self) -> None:
        self.counts = dict.fromkeys(STATUSES, 0)
        self.outcome_counts = dict.fromkeys(OUTCOME_CLASSES, 0)
        self.validity_counts = dict.fromkeys(VALIDITIES, 0)
        self.executions = 0
        self.dim_keys: dict[str, None] = {}


class _PerCase:
    """One float sum and one count per case (global case index), grown on demand."""

    __slots__ = ("n", "sums")

    def __init__(self) -> None:
        self.sums = array("d")
        self.n = array("l")

    def add(self, index: int, value: float) -> None:
        if index >= len(self.n):
            grow = index + 1 - len(self.n)
            self.sums.extend(array("d", bytes(self.sums.itemsize * grow)))
            self.n.extend(array("l", bytes(self.n.itemsize * grow)))
        self.sums[index] += value
        self.n[index] += 1

    def mean(self, index: int) -> float | None:
        if index < len(self.n) and self.n[index]:
            return self.sums[index] / self.n[index]
        return None


class Cases:
    """The run's cases: ``(challenge_key, case_key)`` -> a small int, shared by every lane."""

    def __init__(self) -> None:
        self.index: dict[tuple[str, str], int] = {}
        self.keys: list[tuple[str, str]] = []
        self.challenges: dict[str, int] = {}
        self.challenge_of = array("l")

    def get(self, challenge: str, case: str) -> int:
        key = (challenge, case)
        found = self.index.get(key)
        if found is None:
            found = self.index[key] = len(self.keys)
            self.keys.append(key)
            self.challenge_of.append(self.challenges.setdefault(challenge, len(self.challenges)))
        return found


class LaneStream:
    """Every §10.3 figure of one lane, from a stream of item rows (no record kept)."""

    def __init__(self, cases: Cases) -> None:
        self.cases = cases
        self.lane_id: str | None = None
        self.order = array("l")  # global case indices in first-appearance order
        self.executions = array("l")  # per global case index
        self.passed = array("l")
        self.graded = array("l")
        self.scores = _PerCase()
        self.dimensions: dict[str, _PerCase] = {}
        self.compliance = _PerCase()
        self.reliability = _PerCase()
        self.lane = _Group()
        self.challenges: dict[str, _Group] = {}
        self.tokens_in = _Known()
        self.tokens_out = _Known()
        self.cost = _Known()
        self.judge_cost = _Known()
        self.judge_calls = 0
        self.judge_in = 0
        self.judge_out = 0
        self.latency = LatencyHistogram()
        self.records = 0

    def _case(self, index: int) -> None:
        if index >= len(self.executions):
            grow = index + 1 - len(self.executions)
            zeros = array("l", bytes(self.executions.itemsize * grow))
            self.executions.extend(zeros)
            self.passed.extend(zeros)
            self.graded.extend(zeros)
        if self.executions[index] == 0:
            self.order.append(index)
        self.executions[index] += 1

    def add(self, index: int, challenge: str, row: Row) -> None:
        self.records += 1
        self._case(index)
        status = row.status
        if status == "PASSED":
            self.passed[index] += 1
            self.graded[index] += 1
        elif status == "FAILED":
            self.graded[index] += 1
        if row.score is not None:
            self.scores.add(index, row.score)
        group = self.challenges.get(challenge)
        if group is None:
            group = self.challenges[challenge] = _Group()
        for g in (self.lane, group):
            g.executions += 1
            g.counts[status] = g.counts.get(status, 0) + 1
            if row.outcome_class:
                g.outcome_counts[row.outcome_class] = g.outcome_counts.get(row.outcome_class, 0) + 1
            if row.validity:
                g.validity_counts[row.validity] = g.validity_counts.get(row.validity, 0) + 1
            for key in row.dimensions:
                g.dim_keys.setdefault(key, None)
        for key, value in row.dimensions.items():
            per = self.dimensions.get(key)
            if per is None:
                per = self.dimensions[key] = _PerCase()
            if value is not None:
                per.add(index, value)
        if row.compliance is not None:
            self.compliance.add(index, row.compliance)
        if row.reliability is not None:
            self.reliability.add(index, row.reliability)
        self.tokens_in.add(row.input_tokens)
        self.tokens_out.add(row.output_tokens)
        self.cost.add(row.cost_usd)
        self.judge_cost.add(row.judge_cost_usd)
        self.judge_calls += row.judge_calls
        self.judge_in += row.judge_input_tokens
        self.judge_out += row.judge_output_tokens
        if row.latency_ms is not None:
            self.latency.add(row.latency_ms)

    # -- figures -------------------------------------------------------------

    def rate(self, index: int) -> float | None:
        return self.passed[index] / self.graded[index] if self.graded[index] else None

    def _group(
        self,
        group: _Group,
        indices: list[int] | array,
        *,
        run_id: str,
        deployment: str,
        prefix: str,
        intervals: bool,
    ) -> GroupFigures:
        rates = [r for r in (self.rate(i) for i in indices) if r is not None]
        scores = array("d", (s for s in (self.scores.mean(i) for i in indices) if s is not None))
        graded_execs = group.counts.get("PASSED", 0) + group.counts.get("FAILED", 0)
        score_interval = None
        if intervals and len(scores) >= 2:
            score_interval = bootstrap_interval(scores, seed_for(run_id, deployment, f"{prefix}mean_score"))

        def case_mean(per: _PerCase) -> float | None:
            return mean([m for m in (per.mean(i) for i in indices) if m is not None])

        dims = {}
        for key in group.dim_keys:
            per = self.dimensions.get(key)
            dims[key] = case_mean(per) if per is not None else None
        return GroupFigures(
            counts=dict(group.counts),
            outcome_counts=dict(group.outcome_counts),
            executions=group.executions,
            cases=len(indices),
            graded_cases=len(rates),
            pass_rate=mean(rates),
            pass_rate_interval=wilson_interval(math.fsum(rates), len(rates)) if rates else None,
            coverage=graded_execs / group.executions if group.executions else None,
            mean_score=mean(scores),
            mean_score_interval=score_interval,
            scored_cases=len(scores),
            dimension_means=dims,
            compliance_mean=case_mean(self.compliance),
            mean_reliability=case_mean(self.reliability),
            validity=worst_validity(group.validity_counts),
            validity_counts=dict(group.validity_counts),
        )

    def aggregate(self, *, run_id: str, deployment: str) -> LaneAggregate:
        micro = self._group(
            self.lane, self.order, run_id=run_id, deployment=deployment, prefix="", intervals=True
        )
        by_challenge: dict[str, list[int]] = {name: [] for name in self.challenges}
        names = {i: name for name, i in self.cases.challenges.items()}
        for index in self.order:
            by_challenge[names[self.cases.challenge_of[index]]].append(index)
        challenges = {
            key: self._group(
                self.challenges[key],
                by_challenge[key],
                run_id=run_id,
                deployment=deployment,
                prefix=f"{key}:",
                intervals=False,
            )
            for key in self.challenges
        }
        macro = {
            "pass_rate": mean([c.pass_rate for c in challenges.values() if c.pass_rate is not None]),
            "mean_score": mean([c.mean_score for c in challenges.values() if c.mean_score is not None]),
            "coverage": mean([c.coverage for c in challenges.values() if c.coverage is not None]),
        }
        return LaneAggregate(
            deployment=deployment,
            lane_id=self.lane_id or deployment,
            micro=micro,
            macro=macro,
            challenges=challenges,
            agent_input_tokens=self.tokens_in.total(),
            agent_output_tokens=self.tokens_out.total(),
            agent_cost_usd=self.cost.total(),
            latency_p50_ms=self.latency.quantile(0.5),
            latency_p95_ms=self.latency.quantile(0.95),
            judge_calls=self.judge_calls,
            judge_input_tokens=self.judge_in,
            judge_output_tokens=self.judge_out,
            judge_cost_usd=self.judge_cost.total(),
        )


class Row:
    """The figures of one item row (reused: one object for the whole stream)."""

    __slots__ = (
        "compliance",
        "cost_usd",
        "dimensions",
        "expectations",
        "input_tokens",
        "judge_agreement",
        "judge_calls",
        "judge_cost_usd",
        "judge_input_tokens",
        "judge_output_tokens",
        "latency_ms",
        "outcome_class",
        "output_tokens",
        "reason_code",
        "reliability",
        "score",
        "status",
        "validity",
    )

    def fill(self, row: tuple[Any, ...]) -> None:
        (_c, _k, _r, status, outcome, reason, score, tin, tout, cost, latency, validity, dims, compliance,
         exps, usage, _lane) = row  # fmt: skip
        self.status = status or "NOT_EVALUATED"
        self.outcome_class = outcome or None
        self.reason_code = reason or None
        self.score = finite_float(score)
        self.validity = validity
        self.input_tokens = finite_int(tin)
        self.output_tokens = finite_int(tout)
        self.cost_usd = finite_float(cost)
        self.latency_ms = finite_float(latency)
        self.compliance = finite_float(compliance)
        self.dimensions = {}
        self.reliability = None
        for dim in dims or ():
            if not isinstance(dim, dict) or "key" not in dim:
                continue
            value = (
                finite_float(dim.get("score"))
                if dim.get("status", "PASSED") in ("PASSED", "FAILED")
                else None
            )
            self.dimensions[str(dim["key"])] = value
            if dim.get("source") == "reliability" and value is not None and self.reliability is None:
                self.reliability = value
        self.expectations = {}
        self.judge_agreement = {}
        for exp in exps or ():
            if not isinstance(exp, dict) or "key" not in exp:
                continue
            key = str(exp["key"])
            self.expectations[key] = (
                str(exp.get("status")),
                exp.get("outcome_class"),
                exp.get("reason_code"),
            )
            details = exp.get("details") or {}
            if exp.get("kind") == "judge" and isinstance(details, dict):
                value = finite_float(details.get("agreement"))
                if value is not None:
                    self.judge_agreement[key] = value
        usage = usage or {}
        self.judge_calls = finite_int(usage.get("calls")) or 0
        self.judge_input_tokens = finite_int(usage.get("input_tokens")) or 0
        self.judge_output_tokens = finite_int(usage.get("output_tokens")) or 0
        self.judge_cost_usd = finite_float(usage.get("cost_usd")) if "cost_usd" in usage else 0.0


def rank(lanes: list[tuple[str, LaneStream, LaneAggregate]], *, run_id: str) -> list[LaneStanding]:
    """``rank_lanes`` over the streamed lanes (the paired bootstrap over per-case scores)."""
    streams = {dep: stream for dep, stream, _agg in lanes}
    ordered = rank_standings(LaneStanding.from_aggregate(agg) for _dep, _s, agg in lanes)
    if not ordered or ordered[0].graded_cases == 0:
        return ordered
    leader = ordered[0]
    lead = streams[leader.deployment]
    leader.within_noise = False
    for standing in ordered[1:]:
        if standing.graded_cases == 0:
            continue
        other = streams[standing.deployment]
        base, cand = array("d"), array("d")
        for index in lead.order:
            if index >= len(other.executions) or not other.executions[index]:
                continue
            if not lead.graded[index] or not other.graded[index]:
                continue
            sa, sb = lead.scores.mean(index), other.scores.mean(index)
            if sa is not None and sb is not None:
                base.append(sa)
                cand.append(sb)
        if not base:
            continue
        interval = paired_bootstrap_interval(
            base, cand, seed_for(run_id, standing.deployment, "score_difference")
        )
        standing.score_difference = mean([c - b for b, c in zip(base, cand, strict=True)])
        standing.score_difference_interval = interval
        standing.within_noise = interval is not None and contains_zero(interval)
    return ordered


def stream_lane(lane: RunLane, cases: Cases, health: RunHealth | None = None) -> LaneStream:
    """One pass over the lane's graded items (in id order, ``STREAM_CHUNK`` rows at a time)."""
    stream = LaneStream(cases)
    row = Row()
    if connection.vendor == "postgresql":
        rows: Iterable[tuple[Any, ...]] = _pg_rows(lane.pk)
    else:
        rows = (
            RunItem.objects.filter(lane_id=lane.pk)
            .exclude(status="")
            .exclude(grade__isnull=True)
            .exclude(grade={})
            .order_by("id")
            .values_list(*_COLUMNS)
            .iterator(chunk_size=STREAM_CHUNK)
        )
    for values in rows:
        challenge, case_key = values[0], values[1]
        index = cases.get(challenge, case_key)
        row.fill(values)
        if stream.lane_id is None:
            stream.lane_id = str(values[-1] or lane.deployment_name)
        stream.add(index, challenge, row)
        if health is not None:
            health.add_row(lane.deployment_name, cases.keys[index], row)
    return stream
