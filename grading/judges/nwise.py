"""n_wise judges: the second pass that ranks every lane's answer to one case (grading.md §6.1).

``grade_case`` leaves an n_wise judge NOT_EVALUATED, reason ``pending_rank``. Once every lane
has a final attempt for a case, the run's scoring stage (or the offline ``grade`` command)
calls :func:`rank_case` with one :class:`LaneAnswer` per lane, then :func:`apply_rank` per
lane to write the lane's new grade version (the other judges' results are replayed, not
re-run; the scorecard and verdict are recomputed with the ranked score).

Lanes get opaque labels A..Z in a fixed order (sorted lane ids), never deployment names;
each sample shows them in a different order (``shuffle``: a permutation seeded by run id,
case key, judge key and sample index; ``cyclic``: rotation by sample index; ``none``).
Evidence ids in the prompt are prefixed with the label (``B/final_output``). A ranking
that omits, repeats or invents a label is an invalid sample (retried once). Score: Borda,
rank r (0-based) of n lanes scores (n - 1 - r) / (n - 1); per model the median over
samples, across models the declared consensus.
"""

from __future__ import annotations

import math
import random
import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from grading.engine.refs import CHANNEL_UNAVAILABLE, resolve_evidence_id, resolve_reference
from grading.engine.types import (
    CaseDef,
    Evidence,
    ExpectationResult,
    GradeContext,
    JudgeUsage,
    OutcomeClass,
    Status,
    meets,
)

from . import calls as C
from .budget import JudgeBudget
from .consensus import agreement_threshold, borda, combine
from .judge import (
    LLMJudge,
    _result,
    get,
    models_of,
    no_model_message,
    sample_detail,
    samples_of,
    screen,
    seed_int,
    valid_by_model,
)
from .protocol import system_prompt, user_prompt

LABELS = string.ascii_uppercase
REFERENCE_MISSING_STATES = ("reference_missing", "invalid_chain")


@dataclass(slots=True)
class LaneAnswer:
    lane: str  # the lane id (or the deployment name offline)
    evidence: Evidence
    case: CaseDef
    context: GradeContext


@dataclass(slots=True)
class RankOutcome:
    results: dict[str, ExpectationResult]  # lane -> the judge's expectation for that lane
    usage: JudgeUsage  # the whole ranking's spend (split it as the caller books it)
    calls: list[C.CallRecord]


def label_orders(
    labels: Sequence[str], samples: int, debias: str, seed_parts: Sequence[Any]
) -> list[list[str]]:
    orders: list[list[str]] = []
    # "each sample orders them differently" (grading.md §6.1): a shuffle that repeats an
    # order already shown is drawn again (same seeded generator) while unused orders remain,
    # else two samples of a two-lane ranking showed the same order half the time.
    distinct = math.factorial(min(len(labels), 8))  # 8! already exceeds the samples cap
    for i in range(samples):
        order = list(labels)
        if debias == "cyclic" and order:
            k = i % len(order)
            order = order[k:] + order[:k]
        elif debias != "none":
            rng = random.Random(seed_int(*seed_parts, i))
            rng.shuffle(order)
            while order in orders and len(orders) < distinct:
                rng.shuffle(order)
        orders.append(order)
    return orders


def _check_ranking(labels: Sequence[str]) -> Callable[[dict[str, Any]], str | None]:
    wanted = set(labels)

    def check(data: dict[str, Any]) -> str | None:
        ranking = data.get("ranking")
        if not isinstance(ranking, list) or len(ranking) != len(labels) or set(ranking) != wanted:
            return f"ranking {ranking!r} is not an ordering of exactly the labels {', '.join(labels)}"
        return None

    return check


def _all(
    answers: Sequence[LaneAnswer],
    status: Status,
    klass: OutcomeClass,
    reason: str,
    evidence: str,
    key: str,
    text: str,
    details: dict[str, Any] | None = None,
) -> dict[str, ExpectationResult]:
    return {
        a.lane: _result(key, status, klass, reason, evidence, text=text, details=dict(details or {}))
        for a in answers
    }


def rank_case(
    judge: LLMJudge,
    decl: Any,
    answers: Sequence[LaneAnswer],
    *,
    text: str | None = None,
    checks: dict[str, Any] | None = None,
    budget: JudgeBudget | None = None,
) -> RankOutcome:
    """Rank the lanes' answers to one case with one n_wise judge declaration."""
    key = str(get(decl, "key", ""))
    label_text = text or str(
        get(decl, "label", "") or f"n_wise judge on {', '.join(get(decl, 'context_from', ['final_output']))}"
    )
    usage = JudgeUsage()
    answers = sorted(answers, key=lambda a: a.lane)
    if len(answers) < 2:
        return RankOutcome(
            _all(
                answers,
                Status.NOT_EVALUATED,
                OutcomeClass.UNAVAILABLE,
                "single_lane",
                "NOT_EVALUATED: n_wise needs at least 2 lanes; this case has one",
                key,
                label_text,
            ),
            usage,
            [],
        )
    if len(answers) > len(LABELS):
        return RankOutcome(
            _all(
                answers,
                Status.NOT_EVALUATED,
                OutcomeClass.PACK_ERROR,
                "too_many_lanes",
                f"NOT_EVALUATED: n_wise ranks at most {len(LABELS)} lanes, this run has {len(answers)}",
                key,
                label_text,
            ),
            usage,
            [],
        )
    models = models_of(decl, judge.provider)
    if not models:
        return RankOutcome(
            _all(
                answers,
                Status.NOT_EVALUATED,
                OutcomeClass.PACK_ERROR,
                "judge_model_missing",
                no_model_message(judge.provider),
                key,
                label_text,
            ),
            usage,
            [],
        )
    labels = list(LABELS[: len(answers)])
    by_label = dict(zip(labels, answers, strict=True))
    context_from = [str(c) for c in get(decl, "context_from", ["final_output"]) or ["final_output"]]
    lane_blocks: dict[str, list[tuple[str, str]]] = {}
    for label, a in by_label.items():
        blocks = []
        for ref in context_from:
            res = resolve_reference(ref, a.evidence, a.case, a.context, checks=checks or {})
            if res.state in REFERENCE_MISSING_STATES:
                return RankOutcome(
                    _all(
                        answers,
                        Status.NOT_EVALUATED,
                        OutcomeClass.PACK_ERROR,
                        "reference_missing",
                        f"NOT_EVALUATED: context_from {res.message}",
                        key,
                        label_text,
                    ),
                    usage,
                    [],
                )
            if res.state == CHANNEL_UNAVAILABLE:
                # §1.4 rule 4: never rank a lane on the text "no such channel" (it would come
                # last: the missing channel scored as the agent's failure); no fair ranking exists.
                return RankOutcome(
                    _all(
                        answers,
                        Status.UNAVAILABLE,
                        OutcomeClass.UNAVAILABLE,
                        CHANNEL_UNAVAILABLE,
                        f"UNAVAILABLE: context_from {ref}: {res.message} (lane {label})",
                        key,
                        label_text,
                    ),
                    usage,
                    [],
                )
            blocks.append((f"{label}/{ref}", res.text if res.ok else res.message))
        lane_blocks[label] = blocks
    budget = budget or judge.budget
    n = samples_of(decl, budget)
    first = answers[0]
    seed_parts = (first.context.run_id, first.case.challenge_key, first.case.case_key, key)
    debias = get(decl, "position_debiasing", "shuffle")
    if isinstance(debias, bool):  # upstream's form in a raw declaration: true shuffle, false none
        debias = "shuffle" if debias else "none"
    orders = label_orders(labels, n, str(debias), seed_parts)
    system = system_prompt(
        "n_wise", [str(c) for c in get(decl, "anti_gaming_clauses", []) or []], get(decl, "output_schema")
    )
    task = [
        f"Rank the {len(labels)} answers labelled {', '.join(labels)} from best to worst for this task.",
        str(get(decl, "prompt", "") or get(decl, "rubric", "") or get(decl, "label", "") or ""),
        "The order in which the answers appear is arbitrary and says nothing about their quality.",
    ]
    jobs = []
    for model in models:
        for i, order in enumerate(orders):
            spec = C.CallSpec(
                purpose="judge",
                key=key,
                mode="n_wise",
                system=system,
                user=user_prompt(task, [b for label in order for b in lane_blocks[label]]),
                timeout=float(get(decl, "timeout_ms", 60000)) / 1000.0,
                max_retries=int(get(decl, "max_retries", 3)),
                max_output_tokens=judge.max_output_tokens,
                output_schema=get(decl, "output_schema")
                if isinstance(get(decl, "output_schema"), dict)
                else None,
                check=_check_ranking(labels),
            )
            jobs.append((spec, model, i))
    samples = judge.run_jobs(jobs, seed_int(*seed_parts), budget)
    for s in samples:
        s.order = orders[s.index]
    calls = [c for s in samples for c in s.calls]
    C.add_usage(usage, calls)
    shown = {bid: t for blocks in lane_blocks.values() for bid, t in blocks}

    def resolve(eid: str) -> str | None:
        label, sep, rest = eid.partition("/")
        if not sep or label not in by_label:
            return None
        a = by_label[label]
        found = resolve_evidence_id(rest, a.evidence, a.case, a.context, checks=checks or {})
        return found if found is not None else shown.get(eid)

    threshold = float(get(decl, "threshold", 0.5))
    details: dict[str, Any] = {
        "mode": "n_wise",
        "labels": {label: a.lane for label, a in by_label.items()},
        "models": models,
        "samples_per_model": n,
        "samples": [sample_detail(s) for s in samples],
    }
    ungraded = screen(samples, resolve, details)
    if ungraded is not None:
        status, klass, reason, evidence = ungraded
        return RankOutcome(
            _all(answers, status, klass, reason, evidence, key, label_text, details), usage, calls
        )
    kept, dropped = valid_by_model(models, n, samples)
    if dropped:
        details["dropped_models"] = dropped
    if len(dropped) == len(models) or not kept:
        reason, status, klass = (
            ("unparseable_output", Status.ERROR, OutcomeClass.EVALUATOR_ERROR)
            if len(dropped) == len(models)
            else ("unable_to_judge", Status.UNAVAILABLE, OutcomeClass.UNAVAILABLE)
        )
        first_error = next((s.error for s in samples if s.error), "no usable ranking")
        return RankOutcome(
            _all(answers, status, klass, reason, f"{status.value}: {first_error}", key, label_text, details),
            usage,
            calls,
        )
    consensus = get(decl, "consensus")
    minimum = agreement_threshold(decl)
    results: dict[str, ExpectationResult] = {}
    refs = sorted(
        {c["id"] for oks in kept.values() for s in oks for c in (s.parsed.citations if s.parsed else [])}
    )
    for label, a in by_label.items():
        values = {m: [borda(s.data["ranking"])[label] for s in oks] for m, oks in kept.items()}
        out = combine(
            values,
            binary=False,
            aggregation=get(consensus, "aggregation"),
            threshold=threshold,
            flag_on_disagreement=bool(get(consensus, "flag_on_disagreement", False)),
        )
        lane_details = dict(
            details,
            label=label,
            agreement=out.agreement,
            variance=out.variance,
            model_scores=out.model_values,
            needs_review=out.needs_review,
        )
        ranks = [s.data["ranking"].index(label) + 1 for oks in kept.values() for s in oks]
        summary = (
            f"n_wise: label {label} ranked {', '.join(map(str, ranks))} of {len(labels)} "
            f"(Borda score {out.score:.4f}); cites {', '.join(refs)}"
        )
        if minimum is not None and not meets(out.agreement, minimum):
            results[a.lane] = _result(
                key,
                Status.ERROR,
                OutcomeClass.EVALUATOR_ERROR,
                "low_agreement",
                f"ERROR: judge agreement {out.agreement:.4f} below {minimum:g}; {summary}",
                text=label_text,
                threshold=threshold,
                refs=refs,
                details=lane_details,
            )
            continue
        status = Status.PASSED if out.passed else Status.FAILED
        results[a.lane] = _result(
            key,
            status,
            OutcomeClass.PASS if out.passed else OutcomeClass.FAIL,
            None,
            summary,
            text=label_text,
            score=out.score,
            threshold=threshold,
            refs=refs,
            details=lane_details,
        )
    return RankOutcome(results, usage, calls)


class _Replay:
    """Re-grade a case without re-running its judges: earlier results by key, the new rank."""

    def __init__(self, previous: dict[str, ExpectationResult], ranked: dict[str, ExpectationResult]) -> None:
        self.previous = previous
        self.ranked = ranked

    def ranked_result(self, key: str) -> ExpectationResult | None:
        return self.ranked.get(key) or self.previous.get(key)

    def evaluate(self, request: Any) -> ExpectationResult:
        found = self.previous.get(request.key)
        if found is None:
            return _result(
                request,
                Status.NOT_EVALUATED,
                OutcomeClass.UNAVAILABLE,
                "no_judge_provider",
                "NOT_EVALUATED: no earlier result of this judge to replay",
            )
        return found


def apply_rank(
    previous: Any,
    ranked: dict[str, ExpectationResult],
    *,
    evidence: Evidence,
    case: CaseDef,
    spec: Any,
    context: GradeContext,
    usage_share: JudgeUsage | None = None,
) -> Any:
    """The lane's new grade version: ``previous`` (a ``CaseGrade`` or its dict) re-graded with
    the n_wise results of this lane (judge key -> result) and the earlier judge results replayed.
    ``usage_share`` (the lane's part of the ranking's spend) is added to ``judge_usage``."""
    from grading.engine.grade import CaseGrade, grade_case

    prev = CaseGrade.from_dict(previous) if isinstance(previous, dict) else previous
    replay = _Replay({e.key: e for e in prev.expectations if e.kind.value == "judge"}, ranked)
    grade = grade_case(evidence, case, spec, context=context, judge=replay)
    total = JudgeUsage()
    total.add(prev.judge_usage)
    if usage_share is not None:
        total.add(usage_share)
    grade.judge_usage = total
    model_claims = [c for c in prev.claims if c.get("source") == "llm"]
    if model_claims:  # replayed, not re-run; they count toward the claims gate again
        from .model_pass import merge_claims

        merge_claims(grade, model_claims)
    elif not grade.claims and prev.claims:
        grade.claims = list(prev.claims)
    return grade


def split_usage(usage: JudgeUsage, lanes: int) -> list[JudgeUsage]:
    """Equal shares of a ranking's spend for ``lanes`` lanes that sum exactly to ``usage``
    (integer remainders go to the first lanes)."""
    n = max(1, lanes)

    def parts(total: int) -> list[int]:
        q, r = divmod(total, n)
        return [q + (1 if i < r else 0) for i in range(n)]

    calls, ins, outs = parts(usage.calls), parts(usage.input_tokens), parts(usage.output_tokens)
    charged_tokens, charged_usd = usage.charged()
    charged = parts(charged_tokens)
    cost = None if usage.cost_usd is None else usage.cost_usd / n
    return [JudgeUsage(calls[i], ins[i], outs[i], cost, charged[i], charged_usd / n) for i in range(n)]
