"""Scorecard dimensions, strategies, gates and the case verdict (grading.md §5.4, §10.1-§10.2)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .evidence import run_completed_successfully, run_failure_count
from .spec import KNOWN_COLLECTORS as SPEC_KNOWN_COLLECTORS
from .types import DimensionResult, Evidence, ExpectationResult, OutcomeClass, Status, Validity, meets
from .validators.common import cfg

GRADED = (Status.PASSED, Status.FAILED)


@dataclass(slots=True)
class DimPlan:
    key: str
    source: str | None
    validators: list[str] = field(default_factory=list)
    judge_key: str | None = None
    metric: str | None = None
    target: float | None = None
    max: float | None = None
    better_direction: str = "higher"
    weight: float = 1.0
    gate: bool = False
    pass_threshold: float | None = None


def as_float(v: Any) -> float | None:
    """A number as float; None for None and booleans."""
    return None if v is None or isinstance(v, bool) else float(v)


def plan_dimensions(scorecard: Any, runtime_limits: Any) -> list[DimPlan]:
    dims = cfg(scorecard, "dimensions") or ["correctness"]
    legacy_norm = cfg(scorecard, "normalization")
    out = []
    for d in dims:
        if isinstance(d, str):
            out.append(_legacy(d, legacy_norm, runtime_limits))
            continue
        norm = cfg(d, "normalization")
        source = cfg(d, "source")
        key = str(cfg(d, "key", source or ""))
        if source in ("latency", "cost") and norm is None:
            legacy = _legacy(source, legacy_norm, runtime_limits)
            t, m = legacy.target, legacy.max
        else:
            t, m = as_float(cfg(norm, "target")), as_float(cfg(norm, "max"))
        out.append(
            DimPlan(
                key=key,
                source=source,
                validators=list(cfg(d, "validators", []) or []),
                judge_key=cfg(d, "judge_key"),
                metric=cfg(d, "metric"),
                target=t,
                max=m,
                better_direction=str(
                    cfg(d, "better_direction", "lower" if source in ("latency", "cost") else "higher")
                ),
                weight=float(cfg(d, "weight", 1.0)),
                gate=bool(cfg(d, "gate", False)),
                pass_threshold=as_float(cfg(d, "pass_threshold")),
            )
        )
    return out


_LEGACY_UNITS = {
    "latency": ("target_ms", "max_ms", "max_duration_ms"),
    "cost": ("target_usd", "max_usd", "max_cost_usd"),
}


def _legacy(name: str, norm: Any, limits: Any) -> DimPlan:
    if name == "correctness":
        return DimPlan(name, "validators")
    if name in ("reliability", "behavioral"):
        return DimPlan(name, name)
    if name in _LEGACY_UNITS:  # latency / cost: lower is better, limits from runtime_limits
        target_key, max_key, limit_key = _LEGACY_UNITS[name]
        n = cfg(norm, name)
        mx = as_float(cfg(n, max_key))
        if mx is None:
            mx = as_float(cfg(limits, limit_key))
        return DimPlan(
            name, name, target=as_float(cfg(n, target_key)) or 0.0, max=mx, better_direction="lower"
        )
    return DimPlan(name, None)


def normalise(value: float, target: float, mx: float, direction: str) -> float:
    if direction == "lower":
        if value <= target:
            return 1.0
        if value >= mx:
            return 0.0
        return (mx - value) / (mx - target)
    if value >= target:
        return 1.0
    if value <= mx:
        return 0.0
    return (value - mx) / (target - mx)


# pack-format §7 (declared with the spec models); anything else is NOT_EVALUATED (lint L7).
KNOWN_COLLECTORS = frozenset(SPEC_KNOWN_COLLECTORS)


# Upstream run_* collectors read this case's metrics (grading.md §10.1).
def collect(
    collector: str, evidence: Evidence, validator_results: Sequence[ExpectationResult]
) -> float | None:
    m = evidence.metrics
    if collector == "run_total_latency_ms":
        return m.latency_ms
    if collector == "run_ttft_ms":
        return m.ttft_ms
    if collector == "run_input_tokens":
        return m.input_tokens
    if collector == "run_output_tokens":
        return m.output_tokens
    if collector in ("run_total_tokens", "run_agent_tokens"):
        return m.total_tokens
    if collector == "run_model_cost_usd":
        return m.cost_usd
    if collector == "run_completed_successfully":
        return float(run_completed_successfully(evidence))
    if collector == "run_failure_count":
        return float(run_failure_count(evidence))
    if collector == "run_tool_call_count":
        return float(len(evidence.tool_calls)) if evidence.channels.tool_calls else None
    if collector == "validator_pass_rate":
        graded = [r for r in validator_results if r.status in GRADED]
        return sum(1 for r in graded if r.status is Status.PASSED) / len(graded) if graded else None
    return None


@dataclass(slots=True)
class GatingInput:
    name: str
    status: Status
    outcome_class: OutcomeClass | None


def _worst(results: Sequence[Any]) -> tuple[Status, OutcomeClass | None] | None:
    """The first ERROR, else the first UNAVAILABLE member (status, outcome class)."""
    unavailable = None
    for x in results:
        st = x.status
        if st is Status.ERROR:
            return st, x.outcome_class
        if st is Status.UNAVAILABLE and unavailable is None:
            unavailable = (st, x.outcome_class)
    return unavailable


def _ungraded_class(results: Sequence[Any]) -> OutcomeClass:
    if any(r.outcome_class is OutcomeClass.PACK_ERROR for r in results):
        return OutcomeClass.PACK_ERROR
    return OutcomeClass.UNAVAILABLE


def _dim_result(
    d: DimPlan, score: float | None, status: Status | None = None, klass: OutcomeClass | None = None
) -> DimensionResult:
    if score is not None and status is None:
        status = (
            Status.FAILED
            if d.pass_threshold is not None and not meets(score, d.pass_threshold)
            else Status.PASSED
        )
        klass = OutcomeClass.PASS if status is Status.PASSED else OutcomeClass.FAIL
    return DimensionResult(
        d.key,
        d.source or "",
        score,
        status or Status.NOT_EVALUATED,
        d.gate,
        d.pass_threshold,
        d.weight,
        klass,
    )


def evaluate_dimension(
    d: DimPlan,
    evidence: Evidence,
    validators: Sequence[ExpectationResult],
    judges: Mapping[str, ExpectationResult],
    compliance_score: float | None,
    metric_collectors: Mapping[str, str],
) -> tuple[DimensionResult, list[ExpectationResult]]:
    """The dimension and the expectations it used (for validity). ``validators``: the
    validator results in spec order (by key, the last of a repeated key wins)."""
    src = d.source
    if src == "validators":
        if d.validators:
            by_key = {r.key: r for r in validators}
            members = [by_key[k] for k in d.validators if k in by_key]
        else:
            members = validators  # type: ignore[assignment]  # read only
        # One pass: the first ERROR wins, else the first UNAVAILABLE; else the mean score of
        # the graded members.
        unavailable = None
        total = 0.0
        n = 0
        for m in members:
            st = m.status
            if st is Status.PASSED or st is Status.FAILED:
                if m.score is not None:
                    total += m.score
                    n += 1
            elif st is Status.ERROR:
                return _dim_result(d, None, st, m.outcome_class), members
            elif st is Status.UNAVAILABLE and unavailable is None:
                unavailable = m
        if unavailable is not None:
            return _dim_result(d, None, Status.UNAVAILABLE, unavailable.outcome_class), members
        if not n:
            return _dim_result(
                d,
                None,
                Status.NOT_EVALUATED,
                _ungraded_class(members) if members else OutcomeClass.UNAVAILABLE,
            ), members
        return _dim_result(d, total / n), members
    if src == "reliability":
        ok = evidence.execution_error is None and not evidence.limit_hit
        return _dim_result(d, 1.0 if ok else 0.0), []
    if src == "llm_judge":
        j = judges.get(d.judge_key or "")
        if j is None:
            return _dim_result(d, None, Status.NOT_EVALUATED, OutcomeClass.PACK_ERROR), []
        if j.status in GRADED and j.score is not None:
            return _dim_result(d, j.score), [j]
        return _dim_result(d, None, j.status, j.outcome_class), [j]
    if src == "compliance":
        if compliance_score is None:
            return _dim_result(d, None, Status.NOT_EVALUATED, OutcomeClass.UNAVAILABLE), []
        return _dim_result(d, compliance_score), []
    if src in ("latency", "cost", "metric"):
        if src == "latency":
            value = evidence.metrics.latency_ms
        elif src == "cost":
            value = evidence.metrics.cost_usd
        else:
            collector = metric_collectors.get(d.metric or "")
            if collector is None or collector not in KNOWN_COLLECTORS:  # publish lint L7 warned
                return _dim_result(d, None, Status.NOT_EVALUATED, OutcomeClass.PACK_ERROR), []
            value = collect(
                collector,
                evidence,
                list(validators),
            )
        if d.target is None or d.max is None:
            return _dim_result(d, None, Status.NOT_EVALUATED, OutcomeClass.PACK_ERROR), []
        if value is None:
            return _dim_result(d, None, Status.UNAVAILABLE, OutcomeClass.UNAVAILABLE), []
        return _dim_result(d, normalise(float(value), d.target, d.max, d.better_direction)), []
    if src in ("behavioral", "human_preference"):
        return _dim_result(d, None, Status.UNAVAILABLE, OutcomeClass.UNAVAILABLE), []
    return _dim_result(d, None, Status.NOT_EVALUATED, OutcomeClass.PACK_ERROR), []


@dataclass(slots=True)
class ScorecardOutcome:
    strategy: str
    overall_score: float | None
    passed: bool | None
    dimensions: list[DimensionResult]
    inputs: list[GatingInput]
    threshold: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "strategy": self.strategy,
            "overall_score": self.overall_score,
            "passed": self.passed,
            "pass_threshold": self.threshold,
            "dimensions": [
                {
                    "key": d.key,
                    "source": d.source,
                    "score": d.score,
                    "status": d.status.value,
                    "gate": d.gate,
                    "pass_threshold": d.pass_threshold,
                    "weight": d.weight,
                }
                for d in self.dimensions
            ],
        }


def _weighted(dims: Sequence[DimensionResult]) -> float | None:
    total = acc = 0.0
    for d in dims:
        if d.score is not None and (d.status is Status.PASSED or d.status is Status.FAILED):
            total += d.weight
            acc += d.score * d.weight
    return acc / total if total > 0 else None


def _gate_input(d: DimensionResult) -> GatingInput:
    if d.score is not None and d.status in GRADED:
        ok = d.pass_threshold is None or meets(d.score, d.pass_threshold)
        return GatingInput(
            f"dimension {d.key}",
            Status.PASSED if ok else Status.FAILED,
            OutcomeClass.PASS if ok else OutcomeClass.FAIL,
        )
    return GatingInput(f"dimension {d.key}", d.status, d.outcome_class)


_OVERALL_PASSED = GatingInput("overall threshold", Status.PASSED, OutcomeClass.PASS)
_OVERALL_FAILED = GatingInput("overall threshold", Status.FAILED, OutcomeClass.FAIL)


def _overall_input(dims: Sequence[DimensionResult], overall: float | None, threshold: float) -> GatingInput:
    weighted_graded = False
    for d in dims:
        if d.weight > 0 and d.score is not None and (d.status is Status.PASSED or d.status is Status.FAILED):
            weighted_graded = True
            break
    if weighted_graded and overall is not None:
        return _OVERALL_PASSED if meets(overall, threshold) else _OVERALL_FAILED
    worst = _worst(dims)
    if worst is not None:
        return GatingInput("overall threshold", worst[0], worst[1])
    return GatingInput(
        "overall threshold", Status.NOT_EVALUATED, _ungraded_class(dims) if dims else OutcomeClass.UNAVAILABLE
    )


def run_scorecard(scorecard: Any, dims: list[DimensionResult]) -> ScorecardOutcome:
    if type(scorecard) is dict:  # the compiled plan's form: strategy and a float threshold
        strategy = scorecard["strategy"]
        explicit = scorecard["pass_threshold"]
    else:
        strategy = str(cfg(scorecard, "strategy", "weighted") or "weighted")
        explicit = as_float(cfg(scorecard, "pass_threshold"))
    gates = [d for d in dims if d.gate]
    inputs: list[GatingInput] = []
    threshold: float | None = None
    if strategy == "binary":
        inputs = [_gate_input(d) for d in dims]
        all_pass = all(i.status is Status.PASSED for i in inputs) if inputs else False
        graded_all = all(i.status in GRADED for i in inputs)
        decided = graded_all or any(i.status is Status.FAILED for i in inputs)
        binary_overall = (1.0 if all_pass else 0.0) if decided else None
        return ScorecardOutcome(strategy, binary_overall, all_pass if decided else None, dims, inputs, None)
    gate_inputs = [_gate_input(d) for d in gates]
    inputs.extend(gate_inputs)
    overall: float | None
    if strategy == "hybrid":
        if any(i.status is Status.FAILED for i in gate_inputs):
            overall = 0.0
        else:
            rest = [d for d in dims if not d.gate]
            overall = _weighted(rest) if rest else 1.0
        threshold = explicit
        if threshold is not None:
            inputs.append(_overall_input([d for d in dims if not d.gate] or dims, overall, threshold))
    else:
        overall = _weighted(dims)
        threshold = explicit if explicit is not None else (1.0 if not gates else None)
        if threshold is not None:
            inputs.append(_overall_input(dims, overall, threshold))
    # The verdict's rules (§10.2 case status): a failed input fails; an ERROR or UNAVAILABLE
    # one leaves no verdict; one that was not graded does not block the others (a hybrid gate
    # passed with its non-gate dimensions all ungraded used to be a PASSED case whose
    # scorecard said passed: null).
    passed: bool | None = None
    blocked = False
    for i in inputs:
        st = i.status
        if st is Status.FAILED:
            passed = False
            break
        if st is Status.ERROR or st is Status.UNAVAILABLE:
            blocked = True
        elif st is Status.PASSED and not blocked:
            passed = True
    if blocked and passed is not False:
        passed = None
    return ScorecardOutcome(strategy, overall, passed, dims, inputs, threshold)


def verdict(inputs: Sequence[GatingInput], guard_failed: bool) -> tuple[Status, OutcomeClass]:
    """The case status and outcome class, in the order of grading.md §10.2."""
    if guard_failed:
        return Status.FAILED, OutcomeClass.FAIL
    error = unavailable = None
    any_passed = any_pack_error = False
    for i in inputs:
        st = i.status
        if st is Status.FAILED:
            return Status.FAILED, OutcomeClass.FAIL
        if st is Status.PASSED:
            any_passed = True
        elif st is Status.ERROR:
            error = error or i
        elif st is Status.UNAVAILABLE:
            unavailable = unavailable or i
        elif i.outcome_class is OutcomeClass.PACK_ERROR:
            any_pack_error = True
    if error is not None:
        return Status.ERROR, error.outcome_class or OutcomeClass.EVALUATOR_ERROR
    if unavailable is not None:
        return Status.UNAVAILABLE, unavailable.outcome_class or OutcomeClass.UNAVAILABLE
    if not any_passed:
        return Status.NOT_EVALUATED, OutcomeClass.PACK_ERROR if any_pack_error else OutcomeClass.UNAVAILABLE
    return Status.PASSED, OutcomeClass.PASS


def validity(dims: Sequence[DimensionResult], used: Sequence[ExpectationResult]) -> Validity:
    """INVALID when a dimension or an expectation it used errored; DEGRADED when one is
    UNAVAILABLE or NOT_EVALUATED; else VALID."""
    degraded = False
    for group in (dims, used):
        for x in group:
            st = x.status
            if st is Status.PASSED or st is Status.FAILED:
                continue
            if st is Status.ERROR:
                return Validity.INVALID
            degraded = True  # UNAVAILABLE or NOT_EVALUATED
    return Validity.DEGRADED if degraded else Validity.VALID
