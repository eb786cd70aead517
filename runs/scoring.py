"""Closing lanes and runs, and the figures computed once when a run completes.

``check_lane_and_run(lane_id)`` moves a lane whose counter says nothing is pending to
``scoring`` and, when the run's ``items_open`` counter reaches 0, the run to ``scoring``
and finalises it (``finalize_run``): per-lane ``aggregate_lane`` (Wilson and bootstrap
intervals, seeds per interfaces.md §5 with the run id), the ranking (``rank_lanes``) and
run health (``run_health``), stored in ``Run.stats`` / ``RunLane.stats``; then lanes and run
are ``completed`` and the result pages' summary is requested (``result_summary_request``).
The guarded status UPDATE makes exactly one caller finalise.
"""

from __future__ import annotations

import math
from array import array
from collections import Counter
from collections.abc import Iterator
from typing import Any

from django.db import transaction

from grading.engine.aggregate import (
    OUTCOME_CLASSES,
    STATUSES,
    VALIDITIES,
    GroupFigures,
    LaneAggregate,
    LatencyHistogram,
    worst_validity,
)
from grading.engine.compare import LaneStanding, rank_standings
from grading.engine.critique import (
    CLAIMS_KEY,
    DEFAULT_JUDGE_AGREEMENT_MIN,
    DEFAULT_UNAVAILABLE_SHARE_MAX,
    FINDING_ORDER,
    _critique_setting,
    _judge_thresholds,
    _name,
    _pct,
    _top_reasons,
    assertion_labels,
    eval_feedback,
    overall_line,
)
from grading.engine.stats import (
    bootstrap_interval,
    mean,
    paired_bootstrap_interval,
    seed_for,
    wilson_interval,
)
from grading.engine.types import EvalFeedback, Suggestion
from runs.models import LaneStatus, Run, RunItem, RunLane, RunStatus
from runs.packdata import version_data
from runs.states import transition_lane, transition_run

OPEN_RUN = (RunStatus.QUEUED, RunStatus.RUNNING)
OPEN_LANE = (LaneStatus.QUEUED, LaneStatus.RUNNING)


def check_lane_and_run(lane_id: int) -> None:
    lane = RunLane.objects.get(pk=lane_id)
    if lane.status in OPEN_LANE and lane.pending <= 0:
        transition_lane(lane, LaneStatus.SCORING, reason="no item pending")
    check_run(lane.run_id)


def check_run(run_id: Any) -> bool:
    """Finalise the run when its counter says no item is pending or claimed. True when
    this call finalised it. A cancelled run gets its stats over what was graded once its
    last in-flight item is written."""
    run = Run.objects.defer("case_findings").get(pk=run_id)
    if run.status == RunStatus.CANCELLED and run.items_open <= 0:
        Run.objects.filter(pk=run.pk).update(stats=compute_stats(run))
        return False
    if run.status not in OPEN_RUN or run.items_open > 0:
        return False
    for lane in RunLane.objects.filter(run_id=run.pk, status__in=OPEN_LANE):
        transition_lane(lane, LaneStatus.SCORING, reason="no item pending")
    if not transition_run(run, RunStatus.SCORING, reason="every item finished"):
        return False
    finalize_run(run)
    return True


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


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value)
    return None


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return int(value)
    return None


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


class _Cases:
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


class _LaneStream:
    """Every §10.3 figure of one lane, from a stream of item rows (no record kept)."""

    def __init__(self, cases: _Cases) -> None:
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

    def add(self, index: int, challenge: str, row: _Row) -> None:
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


class _Row:
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
        self.score = _num(score)
        self.validity = validity
        self.input_tokens = _int(tin)
        self.output_tokens = _int(tout)
        self.cost_usd = _num(cost)
        self.latency_ms = _num(latency)
        self.compliance = _num(compliance)
        self.dimensions = {}
        self.reliability = None
        for dim in dims or ():
            if not isinstance(dim, dict) or "key" not in dim:
                continue
            value = _num(dim.get("score")) if dim.get("status", "PASSED") in ("PASSED", "FAILED") else None
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
                value = _num(details.get("agreement"))
                if value is not None:
                    self.judge_agreement[key] = value
        usage = usage or {}
        self.judge_calls = _int(usage.get("calls")) or 0
        self.judge_input_tokens = _int(usage.get("input_tokens")) or 0
        self.judge_output_tokens = _int(usage.get("output_tokens")) or 0
        self.judge_cost_usd = _num(usage.get("cost_usd")) if "cost_usd" in usage else 0.0


class _KeyHealth:
    """Run-health tallies of one expectation key (grading.md §9b), over every lane."""

    __slots__ = (
        "agreement_n",
        "agreement_sum",
        "below",
        "case_seen",
        "cases",
        "graded",
        "lanes",
        "low",
        "missing",
        "missing_reasons",
        "pack",
        "pack_reasons",
        "repeats",
        "spent",
        "statuses",
        "total",
    )

    def __init__(self) -> None:
        self.total = 0
        self.graded = 0
        self.statuses: set[str] = set()
        self.lanes: set[str] = set()
        self.case_seen = bytearray()
        self.cases = 0
        self.missing = 0
        self.missing_reasons: Counter[str] = Counter()
        self.pack = 0
        self.pack_reasons: Counter[str] = Counter()
        self.agreement_sum = 0.0
        self.agreement_n = 0
        self.below = 0
        self.low = 0
        self.spent = 0
        # lane -> (PASSED count, FAILED count) per global case index, capped at 255
        self.repeats: dict[str, tuple[bytearray, bytearray]] = {}


def _bump(buf: bytearray, index: int) -> int:
    if index >= len(buf):
        buf.extend(bytes(index + 1 - len(buf)))
    before = buf[index]
    if before < 255:
        buf[index] = before + 1
    return before


class _RunHealth:
    """``grading.engine.critique.run_health`` over a stream of rows: per-key counters, no records."""

    def __init__(self, spec: Any) -> None:
        self.spec = spec
        self.thresholds = _judge_thresholds(spec)
        self.keys: dict[str, _KeyHealth] = {}
        self.rows = 0
        self.unexplained = 0
        self.unexplained_reasons: Counter[str] = Counter()
        self.table: dict[str, dict[str, Counter[str]]] = {}  # challenge -> key -> statuses (critique)

    def _key(self, key: str) -> _KeyHealth:
        found = self.keys.get(key)
        if found is None:
            found = self.keys[key] = _KeyHealth()
        return found

    def add(self, deployment: str, index: int, challenge: str, row: _Row) -> None:
        self.rows += 1
        per_challenge = self.table.setdefault(challenge, {})
        explained = False
        for key, (status, outcome, reason) in row.expectations.items():
            per_challenge.setdefault(key, Counter())[status] += 1
            h = self._key(key)
            h.total += 1
            if status in ("PASSED", "FAILED"):
                h.graded += 1
                h.statuses.add(status)
                h.lanes.add(deployment)
                if _bump(h.case_seen, index) == 0:
                    h.cases += 1
                pair = h.repeats.get(deployment)
                if pair is None:
                    pair = h.repeats[deployment] = (bytearray(), bytearray())
                _bump(pair[0] if status == "PASSED" else pair[1], index)
            elif status in ("UNAVAILABLE", "NOT_EVALUATED"):
                h.missing += 1
                h.missing_reasons[reason or outcome or "unknown"] += 1
            if outcome == "pack_error":
                explained = True
                h.pack += 1
                h.pack_reasons[reason or "pack_error"] += 1
            if reason == "low_agreement":
                h.low += 1
            if reason == "judge_budget_exhausted":
                h.spent += 1
        for key, value in row.judge_agreement.items():
            h = self._key(key)
            h.agreement_sum += value
            h.agreement_n += 1
            threshold = self.thresholds.get(key)
            if threshold is not None and value < threshold:
                h.below += 1
        if row.outcome_class == "pack_error" and not explained:
            self.unexplained += 1
            self.unexplained_reasons[row.reason_code or "pack_error"] += 1

    def feedback(self, cases: _Cases) -> EvalFeedback:
        """The same findings, wording and order as ``run_health`` over the records."""
        spec = self.spec
        labels = assertion_labels(spec)
        share_max = float(_critique_setting(spec, "unavailable_share_max", DEFAULT_UNAVAILABLE_SHARE_MAX))
        agreement_min = float(_critique_setting(spec, "judge_agreement_min", DEFAULT_JUDGE_AGREEMENT_MIN))
        known = {k: i for i, k in enumerate(labels)}
        found: dict[str, list[Suggestion]] = {f: [] for f in FINDING_ORDER}

        def add(finding: str, key: str | None, reason: str) -> None:
            found[finding].append(Suggestion(reason=reason, finding=finding, assertion=key))

        for key in sorted(self.keys, key=lambda k: (known.get(k, len(known)), k)):
            h = self.keys[key]
            name = _name(key, labels)
            total = h.total
            uniform = h.graded >= 3 and key != CLAIMS_KEY and len(h.statuses) == 1
            if uniform and (len(h.lanes) >= 2 or h.cases >= 3):
                status = next(iter(h.statuses))
                add(
                    "no_discrimination",
                    key,
                    f"{name} is {status} on all {h.graded} graded results ({len(h.lanes)} lanes, "
                    f"{h.cases} cases): it does not tell agents or cases apart",
                )
            if total and h.missing / total > share_max:
                add(
                    "mostly_unavailable",
                    key,
                    f"{name}: {h.missing} of {total} results ({_pct(h.missing, total)}) are UNAVAILABLE or "
                    f"NOT_EVALUATED, over the {share_max:.0%} limit ({_top_reasons(h.missing_reasons)})",
                )
            if h.pack:
                add(
                    "pack_error",
                    key,
                    f"{name}: {h.pack} of {total} results are pack errors ({_top_reasons(h.pack_reasons)}); "
                    "fix the pack, these never count against the agent",
                )
            threshold = self.thresholds.get(key)
            below = max(h.below, h.low)
            mean_agreement = h.agreement_sum / h.agreement_n if h.agreement_n else None
            if (mean_agreement is not None and mean_agreement < agreement_min) or below:
                parts = []
                if mean_agreement is not None:
                    parts.append(
                        f"mean agreement {mean_agreement:.2f} over {h.agreement_n} cases"
                        + (f" is below {agreement_min:.2f}" if mean_agreement < agreement_min else "")
                    )
                if below:
                    parts.append(
                        f"{below} case{'s' if below != 1 else ''} below the judge's min_agreement_threshold"
                        + (f" {threshold:.2f}" if threshold is not None else "")
                    )
                add("judge_disagreement", key, f"{name}: " + "; ".join(parts))
            flaky: list[tuple[str, tuple[str, str], int, int]] = []
            for lane, (passed, failed) in h.repeats.items():
                for index in range(min(len(passed), len(failed))):
                    if passed[index] and failed[index]:
                        flaky.append((lane, cases.keys[index], passed[index], failed[index]))
            if flaky:
                flaky.sort()
                shown = [
                    f"{lane}/{case_id[0]}/{case_id[1]} ({p} PASSED, {f} FAILED)"
                    for lane, case_id, p, f in flaky[:5]
                ]
                more = f" and {len(flaky) - 5} more" if len(flaky) > 5 else ""
                add(
                    "unstable_across_repeats",
                    key,
                    f"{name} got both PASSED and FAILED across repetitions on {len(flaky)} lane/case "
                    f"pair{'s' if len(flaky) != 1 else ''}: {', '.join(shown)}{more}",
                )
            if h.spent:
                add(
                    "budget_exhausted",
                    key,
                    f"{name}: {h.spent} of {total} results were not evaluated because the judge budget ran "
                    "out (judge_budget_exhausted); raise scorecard.judge_limits or reduce samples",
                )
        if self.unexplained:
            add(
                "pack_error",
                None,
                f"{self.unexplained} of {self.rows} case grades are pack errors "
                f"({_top_reasons(self.unexplained_reasons)})",
            )
        return eval_feedback([s for f in FINDING_ORDER for s in found[f]])

    def outcome_records(self) -> Iterator[Any]:
        """What the model critique's outcome table counts, one light row per counted status
        (the same table ``outcome_table`` builds from the records)."""
        for challenge, per in self.table.items():
            for key, statuses in per.items():
                for status, n in statuses.items():
                    row = _OutcomeRow(challenge, {key: (status, None, None)})
                    for _ in range(n):
                        yield row


class _OutcomeRow:
    __slots__ = ("challenge_key", "expectations")

    def __init__(self, challenge_key: str, expectations: dict[str, tuple[str, None, None]]) -> None:
        self.challenge_key = challenge_key
        self.expectations = expectations


def _rank(lanes: list[tuple[str, _LaneStream, LaneAggregate]], *, run_id: str) -> list[LaneStanding]:
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
        standing.within_noise = interval is not None and interval[0] <= 0.0 <= interval[1]
    return ordered


def stream_lane(lane: RunLane, cases: _Cases, health: _RunHealth | None = None) -> _LaneStream:
    """One pass over the lane's graded items (in id order, ``STREAM_CHUNK`` rows at a time)."""
    stream = _LaneStream(cases)
    row = _Row()
    rows = (
        RunItem.objects.filter(lane_id=lane.pk)
        .exclude(status="")
        .exclude(grade__isnull=True)
        .exclude(grade={})
        .order_by("id")
        .values_list(*_COLUMNS)
    )
    for values in rows.iterator(chunk_size=STREAM_CHUNK):
        challenge, case_key = values[0], values[1]
        index = cases.get(challenge, case_key)
        row.fill(values)
        if stream.lane_id is None:
            stream.lane_id = str(values[-1] or lane.deployment_name)
        stream.add(index, challenge, row)
        if health is not None:
            health.add(lane.deployment_name, index, challenge, row)
    return stream


def compute_stats(run: Run, *, critique: bool = False) -> dict[str, Any]:
    """Every lane's aggregate, the ranking and run health (plus, with ``critique``, the
    judge model's critique suggestions); stores the lane stats too.

    One streamed pass per lane over the item columns and the few grade fields the figures
    need (``STREAM_CHUNK`` rows at a time): tallies, per-case sums in compact arrays and
    per-expectation counters; memory grows with the number of cases by a few dozen bytes,
    never with the grade documents."""
    lanes = list(RunLane.objects.filter(run_id=run.pk).order_by("position"))
    spec = version_data(run.pack_version, run.input_set.key if run.input_set_id else None).spec
    cases = _Cases()
    health = _RunHealth(spec)
    streamed: list[tuple[str, _LaneStream, LaneAggregate]] = []
    lane_docs = []
    for lane in lanes:
        stream = stream_lane(lane, cases, health)
        agg = stream.aggregate(run_id=str(run.pk), deployment=lane.deployment_name)
        streamed.append((lane.deployment_name, stream, agg))
        doc = agg.to_dict()
        RunLane.objects.filter(pk=lane.pk).update(stats=doc)
        lane.stats = doc
        lane_docs.append(doc)
    ranking = _rank(streamed, run_id=str(run.pk)) if streamed else []
    feedback = health.feedback(cases).to_dict()
    if critique:
        from runs.judging import run_model_critique

        extra = run_model_critique(run, health.outcome_records())
        if extra:
            feedback["suggestions"] = [*feedback.get("suggestions", []), *extra]
            feedback["overall"] = overall_line(Suggestion.from_dict(s) for s in feedback["suggestions"])
    return {
        "scoring_revision": run.scoring_revision,
        "lanes": lane_docs,
        "ranking": [standing.to_dict() for standing in ranking],
        "eval_feedback": feedback,
    }


def finalize_run(run: Run) -> None:
    """From ``scoring``: the n_wise judge pass, then the stats (with the model critique of
    the eval when a judge provider is set), then lanes and run complete."""
    from runs.judging import rank_run, record_run_judge_usage
    from runs.services.operations import rescore_pending, rescore_stalled

    if rescore_pending(run):
        # a rescore's task is still running or was lost (the sweeper calls this for runs
        # long in scoring): never complete a half re-graded run; when no batch was written
        # for a while, enqueue the re-grade again (it resumes where it stopped)
        if not rescore_stalled(run):
            return
        from runs import tasks

        run_id, revision = str(run.pk), run.scoring_revision
        transaction.on_commit(lambda: tasks.rescore_run.delay(run_id, revision))
        return
    try:
        rank_run(run)
        stats = compute_stats(run, critique=True)
        record_run_judge_usage(run)
    except Exception as exc:
        Run.objects.filter(pk=run.pk).update(stats={"error": str(exc)[:500]})
        for lane in RunLane.objects.filter(run_id=run.pk, status=LaneStatus.SCORING):
            transition_lane(lane, LaneStatus.FAILED, reason="scoring failed")
        transition_run(run, RunStatus.FAILED, reason=f"scoring failed: {exc}"[:500])
        raise
    Run.objects.filter(pk=run.pk).update(stats=stats)
    run.stats = stats
    for lane in RunLane.objects.filter(run_id=run.pk, status=LaneStatus.SCORING):
        transition_lane(lane, LaneStatus.COMPLETED, reason="scored")
    if transition_run(run, RunStatus.COMPLETED, reason="scored"):
        from runs.result_tasks import result_summary_request

        # the result pages' panels are computed now (on commit), not when a user opens the run
        result_summary_request(run=run)
