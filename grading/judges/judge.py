"""``LLMJudge``: the engine's ``Judge`` protocol over a provider (grading.md §6).

``evaluate(request)`` is synchronous (``grade_case`` is) and safe to call from any thread,
also while another asyncio loop runs in the process: the judge owns a
:class:`~grading.judges.loop.LoopThread` and runs its HTTP calls there. Close it with
:meth:`LLMJudge.close` (or ``with LLMJudge(...) as judge``).

Result rules, in order (each keeps every sample in ``details``):

1. a call skipped for lack of budget: NOT_EVALUATED / unavailable ``judge_budget_exhausted``;
2. a provider failure: ERROR / infra_error (401/403, exhausted retries) or evaluator_error
   (other 4xx), reason from the provider error;
3. any accepted sample with no citations, an unresolvable id or a quote not found: ERROR /
   evaluator_error ``unverifiable_verdict`` ("unverifiable verdict: <id>");
4. models with fewer than half of their samples valid are dropped; none left: ERROR
   ``unparseable_output``; every valid sample ``unable_to_judge``: UNAVAILABLE ``unable_to_judge``;
5. consensus (:mod:`grading.judges.consensus`); agreement below ``min_agreement_threshold``:
   ERROR ``low_agreement``; else PASSED iff score >= ``threshold``.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import threading
from collections.abc import Callable, Sequence
from typing import Any

from grading.engine.judging import JudgeRequest
from grading.engine.types import ExpectationResult, OutcomeClass, ResultKind, Status, meets
from grading.pricing import PriceTable

from . import calls as C
from .budget import JudgeBudget, LaneBudgets
from .consensus import agreement_threshold, combine, normalise
from .loop import LoopThread
from .protocol import check_citations, system_prompt, user_prompt
from .providers import DEFAULT_MAX_OUTPUT_TOKENS, ProviderConfig, Sleep

EVIDENCE_MAX = 1000
MAX_SAMPLES = 10


def get(obj: Any, name: str, default: Any = None) -> Any:
    if obj is None:
        return default
    value = obj.get(name, default) if isinstance(obj, dict) else getattr(obj, name, default)
    return default if value is None else value


def clip(text: str, limit: int = EVIDENCE_MAX) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def models_of(decl: Any, provider: ProviderConfig) -> list[str]:
    model = get(decl, "model")
    if model:
        return [str(model)]
    models = [str(m) for m in get(decl, "models", []) or [] if m]
    if models:
        return models
    return [provider.model] if provider.model else []


def no_model_message(provider: ProviderConfig) -> str:
    return (
        "NOT_EVALUATED: the judge declares no model and the judge provider has no default model; "
        "set the judge's model (or models) in the pack, or a default model in "
        f"{provider.settings_where}"
    )


def samples_of(decl: Any, budget: JudgeBudget) -> int:
    n = int(get(decl, "samples", 3) or 3)
    return max(1, min(budget.cap_samples(n), MAX_SAMPLES))


def seed_int(*parts: Any) -> int:
    return int.from_bytes(hashlib.sha256(":".join(str(p) for p in parts).encode()).digest()[:8], "big")


class LLMJudge:
    """A judge over one provider account. ``budget`` is the lane's share (unlimited when
    None); ``prices`` prices the calls (default table when None)."""

    def __init__(
        self,
        provider: ProviderConfig,
        *,
        budget: JudgeBudget | None = None,
        lane_budgets: LaneBudgets | None = None,
        prices: PriceTable | None = None,
        max_output_tokens: int = DEFAULT_MAX_OUTPUT_TOKENS,
        sleep: Sleep | None = None,
        loop: LoopThread | None = None,
    ) -> None:
        self.provider = provider
        self.budget = budget or JudgeBudget(prices=prices)
        self.lane_budgets = lane_budgets  # offline grading: one share per deployment
        self.max_output_tokens = max_output_tokens
        self._sleep = sleep or asyncio.sleep
        self._loop = loop
        self._own_loop = loop is None
        self._lock = threading.Lock()
        self.call_log: list[C.CallRecord] = []
        self.breaker = C.Breaker()
        # n_wise second pass: judge key -> result, used when a case is re-graded (grade.py asks).
        self._ranked: dict[str, ExpectationResult] = {}

    # -- lifecycle ---------------------------------------------------------------------------

    def _loop_thread(self) -> LoopThread:
        with self._lock:
            if self._loop is None or (self._own_loop and self._loop.closed):
                self._loop = LoopThread()
                self._own_loop = True
            return self._loop

    def close(self) -> None:
        with self._lock:
            loop, self._loop = self._loop, None
        if loop is not None and self._own_loop:
            loop.close()

    def __enter__(self) -> LLMJudge:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- calls -------------------------------------------------------------------------------

    def run_jobs(
        self, jobs: Sequence[tuple[C.CallSpec, str, int]], seed: int, budget: JudgeBudget | None = None
    ) -> list[C.Sample]:
        """Run (call spec, model, sample index) jobs concurrently on the loop thread."""
        provider, sleep, breaker = self.provider, self._sleep, self.breaker
        budget = budget or self.budget

        async def go(client: Any) -> list[C.Sample]:
            return list(
                await asyncio.gather(
                    *(
                        C.run_sample(
                            client,
                            provider,
                            budget,
                            spec,
                            model,
                            index,
                            rng=random.Random(seed + index),
                            sleep=sleep,
                            breaker=breaker,
                        )
                        for spec, model, index in jobs
                    )
                )
            )

        samples = self._loop_thread().run(go)
        with self._lock:
            for s in samples:
                self.call_log.extend(s.calls)
        return samples

    def run_calls(
        self, spec: C.CallSpec, jobs: Sequence[tuple[str, int]], seed: int, budget: JudgeBudget | None = None
    ) -> list[C.Sample]:
        return self.run_jobs([(spec, m, i) for m, i in jobs], seed, budget)

    def run_one(
        self, spec: C.CallSpec, model: str, seed: int = 0, budget: JudgeBudget | None = None
    ) -> C.Sample:
        return self.run_calls(spec, [(model, 0)], seed, budget)[0]

    def budget_for(self, lane: str) -> JudgeBudget:
        budgets = self.lane_budgets
        return budgets.for_lane(lane) if budgets is not None else self.budget

    # -- the Judge protocol ------------------------------------------------------------------

    def ranked_result(self, key: str) -> ExpectationResult | None:
        return self._ranked.get(key)

    def evaluate(self, request: JudgeRequest) -> ExpectationResult:
        decl = request.declaration
        mode = str(get(decl, "mode", ""))
        if mode not in ("assertion", "rubric", "reference"):
            return _result(
                request,
                Status.NOT_EVALUATED,
                OutcomeClass.PACK_ERROR,
                "judge_mode_unsupported",
                f"NOT_EVALUATED: judge mode {mode!r} is not run per case",
            )
        models = models_of(decl, self.provider)
        if not models:
            return _result(
                request,
                Status.NOT_EVALUATED,
                OutcomeClass.PACK_ERROR,
                "judge_model_missing",
                no_model_message(self.provider),
            )
        blocks = list(request.context_blocks)
        ref_id = str(get(decl, "reference_from", "reference"))
        if mode == "reference" and request.reference is not None:
            blocks.append((ref_id, request.reference))
        spec = C.CallSpec(
            purpose="judge",
            key=request.key,
            mode=mode,
            system=system_prompt(
                mode,
                [str(c) for c in get(decl, "anti_gaming_clauses", []) or []],
                get(decl, "output_schema"),
            ),
            user=user_prompt(task_lines(decl, mode, ref_id), blocks),
            timeout=float(get(decl, "timeout_ms", 60000)) / 1000.0,
            max_retries=int(get(decl, "max_retries", 3)),
            max_output_tokens=self.max_output_tokens,
            output_schema=get(decl, "output_schema")
            if isinstance(get(decl, "output_schema"), dict)
            else None,
        )
        budget = self.budget_for(request.context.deployment)
        n = samples_of(decl, budget)
        seed = seed_int(
            request.context.run_id,
            request.case.challenge_key,
            request.case.case_key,
            request.key,
            request.context.deployment,
            request.context.repetition,
        )
        samples = self.run_calls(spec, [(m, i) for m in models for i in range(n)], seed, budget)
        C.add_usage(request.usage, [c for s in samples for c in s.calls])
        block_map = dict(blocks)

        def resolve(eid: str) -> str | None:
            text = request.resolve_id(eid)
            return text if text is not None else block_map.get(eid)

        return decide(request.key, request.text, decl, mode, models, n, samples, resolve)


def task_lines(decl: Any, mode: str, ref_id: str) -> list[str]:
    lines: list[str] = []
    if mode == "assertion":
        lines.append("Decide whether this assertion holds for the agent's work (answer pass true or false):")
        lines.append(str(get(decl, "assertion", "") or get(decl, "label", "")))
    else:
        scale = get(decl, "score_scale")
        low, high = float(get(scale, "min", 1)), float(get(scale, "max", 5))
        lines.append(
            f"Score the agent's work on the scale {low:g} (worst) to {high:g} (best) with this rubric:"
        )
        lines.append(str(get(decl, "rubric", "") or get(decl, "label", "")))
        if mode == "reference":
            lines.append(
                f"Compare the agent's work with the reference answer in the evidence block {ref_id!r}."
            )
    if get(decl, "prompt"):
        lines.append(str(get(decl, "prompt")))
    return lines


def _result(
    request_or_key: Any,
    status: Status,
    klass: OutcomeClass,
    reason: str | None,
    evidence: str,
    *,
    text: str | None = None,
    score: float | None = None,
    threshold: float | None = None,
    refs: list[str] | None = None,
    details: dict[str, Any] | None = None,
) -> ExpectationResult:
    key = request_or_key if isinstance(request_or_key, str) else request_or_key.key
    label = text if text is not None else getattr(request_or_key, "text", key)
    return ExpectationResult(
        key=key,
        kind=ResultKind.JUDGE,
        text=label,
        status=status,
        outcome_class=klass,
        evidence=clip(evidence),
        score=score,
        threshold=threshold,
        reason_code=reason,
        evidence_refs=refs or [],
        details=details or {},
    )


def sample_detail(s: C.Sample) -> dict[str, Any]:
    d: dict[str, Any] = {"model": s.model, "sample": s.index, "status": s.status}
    data = s.data
    for k in ("pass", "score", "ranking", "confidence"):
        if k in data:
            d[k] = data[k]
    if "reasoning" in data:
        d["reasoning"] = clip(str(data["reasoning"]), 500)
    if s.parsed is not None and s.parsed.citations:
        d["citations"] = s.parsed.citations
    if s.parsed is not None and s.parsed.unable:
        d["unable_reason"] = s.parsed.unable_reason
    if s.order is not None:
        d["order"] = s.order
    if s.error:
        d["error"] = clip(s.error, 300)
    d["calls"] = [c.to_dict() for c in s.calls]
    return d


def screen(
    samples: Sequence[C.Sample], resolve: Callable[[str], str | None] | None, details: dict[str, Any]
) -> tuple[Status, OutcomeClass, str, str] | None:
    """Rules 1-3 of the module docstring: the ungraded outcome, or None to go on."""
    skipped = [s for s in samples if s.status == C.SKIPPED]
    if skipped:
        return (
            Status.NOT_EVALUATED,
            OutcomeClass.UNAVAILABLE,
            "judge_budget_exhausted",
            f"NOT_EVALUATED: judge budget exhausted ({skipped[0].error}); "
            f"{len(samples) - len(skipped)} of {len(samples)} samples ran and are kept in details, unused",
        )
    failed = [s for s in samples if s.status == C.FAILED]
    if failed:
        f = failed[0]
        klass = OutcomeClass.INFRA_ERROR if f.outcome_class == "infra_error" else OutcomeClass.EVALUATOR_ERROR
        return (Status.ERROR, klass, f.reason_code or "judge_provider_error", f"ERROR: {f.error}")
    if resolve is not None:
        for s in samples:
            if s.status != C.OK or s.parsed is None:
                continue
            bad, _ids = check_citations(s.parsed.citations, resolve)
            if bad is not None:
                details["unverifiable"] = {"model": s.model, "sample": s.index, "citation": bad}
                return (
                    Status.ERROR,
                    OutcomeClass.EVALUATOR_ERROR,
                    "unverifiable_verdict",
                    f"ERROR: unverifiable verdict: {bad}",
                )
    return None


def valid_by_model(
    models: Sequence[str], n: int, samples: Sequence[C.Sample]
) -> tuple[dict[str, list[C.Sample]], list[str]]:
    """Per kept model, its OK samples; and the dropped models (fewer than half valid)."""
    kept: dict[str, list[C.Sample]] = {}
    dropped: list[str] = []
    for m in models:
        mine = [s for s in samples if s.model == m]
        valid = [s for s in mine if s.status in (C.OK, C.UNABLE)]
        if 2 * len(valid) < len(mine) or not valid:
            dropped.append(m)
            continue
        oks = [s for s in valid if s.status == C.OK]
        if oks:
            kept[m] = oks
    return kept, dropped


def decide(
    key: str,
    text: str,
    decl: Any,
    mode: str,
    models: Sequence[str],
    n: int,
    samples: Sequence[C.Sample],
    resolve: Callable[[str], str | None],
) -> ExpectationResult:
    threshold = float(get(decl, "threshold", 0.5))
    details: dict[str, Any] = {
        "mode": mode,
        "models": list(models),
        "samples_per_model": n,
        "samples": [sample_detail(s) for s in samples],
    }
    ungraded = screen(samples, resolve, details)
    if ungraded is not None:
        status, klass, reason, evidence = ungraded
        return _result(key, status, klass, reason, evidence, text=text, threshold=threshold, details=details)
    kept, dropped = valid_by_model(models, n, samples)
    if dropped:
        details["dropped_models"] = dropped
    if len(dropped) == len(models):
        first = next((s.error for s in samples if s.error), "no valid answer")
        return _result(
            key,
            Status.ERROR,
            OutcomeClass.EVALUATOR_ERROR,
            "unparseable_output",
            f"ERROR: judge output unusable from every model: {first}",
            text=text,
            threshold=threshold,
            details=details,
        )
    if not kept:
        reason = next((s.parsed.unable_reason for s in samples if s.parsed and s.parsed.unable), "")
        return _result(
            key,
            Status.UNAVAILABLE,
            OutcomeClass.UNAVAILABLE,
            "unable_to_judge",
            f"UNAVAILABLE: the judge was unable to judge: {reason}",
            text=text,
            threshold=threshold,
            details=details,
        )
    binary = mode == "assertion"
    expect = bool(get(decl, "expect", True))
    scale = get(decl, "score_scale")
    low, high = float(get(scale, "min", 1)), float(get(scale, "max", 5))
    values: dict[str, list[float]] = {}
    for m, oks in kept.items():
        if binary:
            values[m] = [1.0 if bool(s.data["pass"]) == expect else 0.0 for s in oks]
        else:
            values[m] = [normalise(float(s.data["score"]), low, high) for s in oks]
    consensus = get(decl, "consensus")
    out = combine(
        values,
        binary=binary,
        aggregation=get(consensus, "aggregation"),
        threshold=threshold,
        flag_on_disagreement=bool(get(consensus, "flag_on_disagreement", False)),
    )
    refs: list[str] = []
    for oks in kept.values():
        for s in oks:
            for c in s.parsed.citations if s.parsed else []:
                if c["id"] not in refs:
                    refs.append(c["id"])
    details.update(
        {
            "agreement": out.agreement,
            "variance": out.variance,
            "model_scores": out.model_values,
            "needs_review": out.needs_review,
        }
    )
    if out.notes:
        details["notes"] = out.notes
    minimum = agreement_threshold(decl)
    summary = _summary(mode, out.score, values, kept, low, high, expect, refs, out.passed)
    if minimum is not None and not meets(out.agreement, minimum):
        return _result(
            key,
            Status.ERROR,
            OutcomeClass.EVALUATOR_ERROR,
            "low_agreement",
            f"ERROR: judge agreement {out.agreement:.4f} below min_agreement_threshold {minimum:g}; {summary}",
            text=text,
            threshold=threshold,
            refs=refs,
            details=details,
        )
    status = Status.PASSED if out.passed else Status.FAILED
    klass = OutcomeClass.PASS if out.passed else OutcomeClass.FAIL
    return _result(
        key,
        status,
        klass,
        None,
        summary,
        text=text,
        score=out.score,
        threshold=threshold,
        refs=refs,
        details=details,
    )


def _summary(
    mode: str,
    score: float,
    values: dict[str, list[float]],
    kept: dict[str, list[C.Sample]],
    low: float,
    high: float,
    expect: bool,
    refs: list[str],
    passed: bool | None = None,
) -> str:
    parts = []
    for m, oks in kept.items():
        served = next((c.served_by for s in oks for c in s.calls if c.served_by), None)
        name = f"{m} (served by {served})" if served else m
        if mode == "assertion":
            votes = ", ".join("pass" if s.data["pass"] else "fail" for s in oks)
            parts.append(f"{name}: {votes}")
        else:
            parts.append(f"{name}: " + ", ".join(f"{float(s.data['score']):g}" for s in oks))
    head = (
        f"assertion judged {'true' if expect else 'false'}-expected; score {score:.4f}"
        if mode == "assertion"
        else f"{mode} score {score:.4f} on {low:g}..{high:g}"
    )
    reasoning = str(
        _representative(kept, values, mode == "assertion", passed, score).data.get("reasoning") or ""
    )
    line = f"{head} ({'; '.join(parts)}); cites {', '.join(refs)}"
    if reasoning:
        line += f"; reasoning: {reasoning}"
    return line


def _representative(
    kept: dict[str, list[C.Sample]],
    values: dict[str, list[float]],
    binary: bool,
    passed: bool | None,
    score: float,
) -> C.Sample:
    """The sample whose reasoning the evidence quotes: the first one agreeing with the
    verdict (assertion), else the one nearest the final score; never a dissenting sample's
    reasoning beside the verdict it argued against."""
    pairs = [(s, v) for m, oks in kept.items() for s, v in zip(oks, values[m], strict=True)]
    if binary and passed is not None:
        agreeing = [s for s, v in pairs if (v >= 0.5) == passed]
        if agreeing:
            return agreeing[0]
    return min(pairs, key=lambda pair: abs(pair[1] - score))[0]
