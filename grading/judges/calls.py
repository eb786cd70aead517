"""One judged sample: reserve budget, call the provider, settle, parse, retry an invalid
answer once (grading.md §6.2, §6.4, §6.5). Every HTTP call is logged as a :class:`CallRecord`
(model, tokens, cost, latency, retries, outcome) for ``judge_usage`` and the run's ledger.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from agentclash_site.lib.outbound import OutboundClient
from grading.engine.types import JudgeUsage

from .budget import JudgeBudget, estimate_tokens, reserved
from .protocol import TOOL_SCHEMA, Parsed, parse_response
from .providers import DEFAULT_MAX_OUTPUT_TOKENS, ProviderConfig, ProviderError, Sleep, complete

SKIPPED = "skipped"  # not sent: budget
OK = "ok"
INVALID = "invalid"
UNABLE = "unable"
FAILED = "error"  # provider error


@dataclass(slots=True)
class CallRecord:
    purpose: str  # judge | claims | critique
    key: str
    model: str
    outcome: str  # ok | invalid | error | skipped
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0
    latency_ms: float = 0.0
    retries: int = 0
    error: str | None = None
    served_by: str | None = None  # the model name the provider answered with, when different
    # What the call counted against the budget (grading.md §6.4): the reported usage, or its
    # reservation when the provider reported none (its tokens and cost above stay as reported).
    charged_tokens: int = 0
    charged_usd: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["latency_ms"] = round(self.latency_ms, 1)
        if self.charged_tokens == self.input_tokens + self.output_tokens and self.charged_usd == (
            self.cost_usd or 0.0
        ):
            del d["charged_tokens"], d["charged_usd"]  # charged as reported
        return d


@dataclass(slots=True)
class Sample:
    model: str
    index: int
    status: str  # ok | invalid | unable | error | skipped
    parsed: Parsed | None = None
    error: str | None = None
    outcome_class: str | None = None  # for provider errors
    reason_code: str | None = None
    calls: list[CallRecord] = field(default_factory=list)
    order: list[str] | None = None  # n_wise: the label order shown

    @property
    def data(self) -> dict[str, Any]:
        return (self.parsed.data if self.parsed else None) or {}


class Breaker:
    """Fail fast when the provider is down: after ``threshold`` calls in a row failed with
    an infra error (retries exhausted), further calls are not sent until one succeeds...
    which none will, for the rest of this judge's life. Keeps a run whose provider is down
    from waiting out every call's retries. Thread-safe enough: plain int and str updates."""

    def __init__(self, threshold: int = 3) -> None:
        self.threshold = threshold
        self.failures = 0
        self.last_error = ""

    @property
    def open(self) -> bool:
        return self.failures >= self.threshold

    def record(self, ok: bool, error: str = "") -> None:
        if ok:
            self.failures = 0
        else:
            self.failures += 1
            self.last_error = error


@dataclass(slots=True)
class CallSpec:
    purpose: str
    key: str
    mode: str  # the answer schema
    system: str
    user: str
    timeout: float = 60.0
    max_retries: int = 3
    max_output_tokens: int = DEFAULT_MAX_OUTPUT_TOKENS
    output_schema: Any = None
    # Extra validation of a schema-valid answer (e.g. an n_wise ranking is a permutation):
    # returns why the answer is invalid, or None.
    check: Callable[[dict[str, Any]], str | None] | None = None


async def run_sample(
    client: OutboundClient,
    provider: ProviderConfig,
    budget: JudgeBudget,
    spec: CallSpec,
    model: str,
    index: int,
    *,
    rng: random.Random,
    sleep: Sleep,
    breaker: Breaker | None = None,
) -> Sample:
    sample = Sample(model=model, index=index, status=SKIPPED)
    if breaker is not None and breaker.open:
        message = (
            f"judge provider unavailable: {breaker.failures} calls in a row failed, not sent "
            f"(last: {breaker.last_error[:200]})"
        )
        sample.calls.append(CallRecord(spec.purpose, spec.key, model, SKIPPED, cost_usd=0.0, error=message))
        sample.status, sample.error = FAILED, message
        sample.outcome_class, sample.reason_code = "infra_error", "judge_provider_error"
        return sample
    prompt_tokens = estimate_tokens(spec.system, spec.user)
    for try_number in (1, 2):  # an invalid answer is retried once, within the budget
        reservation = budget.reserve(model, prompt_tokens, spec.max_output_tokens)
        if isinstance(reservation, str):
            sample.calls.append(
                CallRecord(spec.purpose, spec.key, model, SKIPPED, cost_usd=None, error=reservation)
            )
            if try_number == 1:
                sample.status, sample.error = SKIPPED, reservation
            # else: keep the invalid status of the first answer
            return sample
        try:
            result = await complete(
                client,
                provider,
                model=model,
                system=spec.system,
                user=spec.user,
                max_tokens=spec.max_output_tokens,
                schema=TOOL_SCHEMA,
                timeout=spec.timeout,
                max_retries=spec.max_retries,
                rng=rng,
                sleep=sleep,
            )
        except ProviderError as exc:
            budget.release(reservation)
            if breaker is not None and exc.outcome_class == "infra_error":
                breaker.record(False, exc.message)
            sample.calls.append(
                CallRecord(
                    spec.purpose,
                    spec.key,
                    model,
                    FAILED,
                    cost_usd=0.0,
                    latency_ms=exc.latency_ms,
                    retries=exc.retries,
                    error=exc.message[:300],
                )
            )
            sample.status, sample.error = FAILED, exc.message
            sample.outcome_class, sample.reason_code = exc.outcome_class, exc.reason_code
            return sample
        if breaker is not None:
            breaker.record(True)
        cost = budget.settle(
            reservation, model, result.input_tokens, result.output_tokens, reported=result.usage_reported
        )
        if result.usage_reported:
            charged = (result.input_tokens + result.output_tokens, cost or 0.0)
        else:
            charged = reserved(reservation)
        record = CallRecord(
            spec.purpose,
            spec.key,
            model,
            OK,
            input_tokens=result.input_tokens,
            output_tokens=result.output_tokens,
            cost_usd=cost,
            latency_ms=result.latency_ms,
            retries=result.retries,
            served_by=result.model if result.model and result.model != model else None,
            charged_tokens=charged[0],
            charged_usd=charged[1],
        )
        sample.calls.append(record)
        if result.problem is not None:
            parsed = Parsed(error=result.problem)
        else:
            parsed = parse_response(result.text, spec.mode, spec.output_schema)
        if parsed.error is None and not parsed.unable and spec.check is not None and parsed.data is not None:
            parsed.error = spec.check(parsed.data)
        sample.parsed = parsed
        if parsed.error is None:
            sample.status, sample.error = (UNABLE if parsed.unable else OK), None
            return sample
        record.outcome = INVALID
        record.error = parsed.error[:300]
        sample.status, sample.error = INVALID, parsed.error
    return sample


def add_usage(usage: JudgeUsage, calls: list[CallRecord]) -> None:
    """Sum calls into a ``JudgeUsage`` (cost None as soon as one sent call has no price; the
    charged amounts always add up)."""
    for c in calls:
        if c.outcome == SKIPPED:
            continue
        if c.outcome == FAILED:
            usage.calls += 1
            continue
        usage.add(
            JudgeUsage(
                calls=1,
                input_tokens=c.input_tokens,
                output_tokens=c.output_tokens,
                cost_usd=c.cost_usd,
                charged_tokens=c.charged_tokens,
                charged_usd=c.charged_usd,
            )
        )
