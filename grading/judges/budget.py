"""Judge budgets (grading.md §6.4): ``judge_limits`` enforced at run time.

``max_samples_per_judge`` caps every judge's ``samples`` (0 / absent: unset).
``max_tokens`` and ``max_calls_usd`` apply per run and are split equally between the lanes
at run start (:func:`lane_share`), so running out never favours the lanes graded first.
Before each call the judge reserves prompt tokens plus the maximum output tokens at the
model's price (:meth:`JudgeBudget.reserve`); a call whose reservation exceeds what is left
is skipped; the provider's reported usage settles the reservation (:meth:`settle`).

A :class:`JudgeBudget` is thread-safe: several grading threads of one lane may share it.
Spend is judge spend only; it never enters the agent's metrics.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Any

from grading.pricing import PriceTable, default_table


def estimate_tokens(*texts: str) -> int:
    """A conservative prompt-token estimate: 1 token per 3 characters, plus framing."""
    return sum(math.ceil(len(t) / 3) for t in texts) + 16


def _limit(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if number > 0 else None  # 0 means unset (as upstream)


def _get(obj: Any, name: str) -> Any:
    if obj is None:
        return None
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


def judge_limits_of(spec: Any) -> Any:
    return _get(_get(spec, "scorecard"), "judge_limits")


def max_samples_of(limits: Any) -> int | None:
    value = _limit(_get(limits, "max_samples_per_judge"))
    return None if value is None else int(value)


@dataclass(slots=True)
class Reservation:
    tokens: int
    usd: float


class JudgeBudget:
    """What one lane may still spend on judge calls (None: unlimited)."""

    def __init__(
        self,
        *,
        max_tokens: float | None = None,
        max_usd: float | None = None,
        max_samples: int | None = None,
        prices: PriceTable | None = None,
    ) -> None:
        self.max_tokens = max_tokens
        self.max_usd = max_usd
        self.max_samples = max_samples
        self.prices = prices or default_table()
        self._lock = threading.Lock()
        self._reserved_tokens = 0
        self._reserved_usd = 0.0
        self.spent_tokens = 0
        self.spent_usd = 0.0
        self.skipped_calls = 0

    @classmethod
    def unlimited(cls, prices: PriceTable | None = None) -> JudgeBudget:
        return cls(prices=prices)

    @property
    def limited(self) -> bool:
        return self.max_tokens is not None or self.max_usd is not None

    def cap_samples(self, samples: int) -> int:
        return min(samples, self.max_samples) if self.max_samples else samples

    def reserve(self, model: str, prompt_tokens: int, max_output_tokens: int) -> Reservation | str:
        """A reservation, or the reason the call may not be made."""
        tokens = prompt_tokens + max_output_tokens
        price = self.prices.price(model)
        usd = price.cost(prompt_tokens, max_output_tokens) if price is not None else 0.0
        with self._lock:
            if (
                self.max_tokens is not None
                and self.spent_tokens + self._reserved_tokens + tokens > self.max_tokens
            ):
                self.skipped_calls += 1
                left = self.max_tokens - self.spent_tokens - self._reserved_tokens
                return f"judge token budget exhausted: a call needs up to {tokens} tokens, {max(0, int(left))} left"
            if self.max_usd is not None:
                if price is None:
                    self.skipped_calls += 1
                    return (
                        f"no price known for model {model!r}, so max_calls_usd cannot be enforced; "
                        f"add {model!r} to the model price table (admin), or limit judge spend "
                        "with judge_limits.max_tokens instead"
                    )
                if self.spent_usd + self._reserved_usd + usd > self.max_usd:
                    self.skipped_calls += 1
                    left = self.max_usd - self.spent_usd - self._reserved_usd
                    return (
                        f"judge USD budget exhausted: a call may cost ${usd:.4f}, ${max(0.0, left):.4f} left"
                    )
            self._reserved_tokens += tokens
            self._reserved_usd += usd
        return Reservation(tokens, usd)

    def settle(
        self,
        reservation: Reservation,
        model: str,
        input_tokens: int,
        output_tokens: int,
        *,
        reported: bool = True,
    ) -> float | None:
        """Replace the reservation by the reported usage; the call's cost (None: unknown
        price). A call whose usage was not ``reported`` is charged what was reserved for it
        (at most the prompt estimate plus the output cap): settled at zero, a server that
        reports no usage would never reach a limit. Its cost is unknown (None)."""
        cost = self.prices.cost(model, input_tokens, output_tokens) if reported else None
        with self._lock:
            self._reserved_tokens -= reservation.tokens
            self._reserved_usd -= reservation.usd
            if reported:
                self.spent_tokens += input_tokens + output_tokens
                self.spent_usd += cost or 0.0
            else:
                self.spent_tokens += reservation.tokens
                self.spent_usd += reservation.usd
        return cost

    def release(self, reservation: Reservation) -> None:
        """A call that never reached the provider costs nothing."""
        with self._lock:
            self._reserved_tokens -= reservation.tokens
            self._reserved_usd -= reservation.usd

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {
                "max_tokens": self.max_tokens,
                "max_usd": self.max_usd,
                "spent_tokens": self.spent_tokens,
                "spent_usd": round(self.spent_usd, 6),
                "skipped_calls": self.skipped_calls,
            }


def lane_share(
    limits: Any,
    lane_count: int,
    *,
    spent_tokens: int = 0,
    spent_usd: float = 0.0,
    prices: PriceTable | None = None,
) -> JudgeBudget:
    """One lane's equal share of a run's ``judge_limits``, minus what the lane already spent
    (``spent_*``: e.g. the lane's judge counters when grading resumes)."""
    lanes = max(1, int(lane_count))
    max_tokens = _limit(_get(limits, "max_tokens"))
    max_usd = _limit(_get(limits, "max_calls_usd"))
    return _remaining(
        JudgeBudget(
            max_tokens=None if max_tokens is None else max_tokens / lanes,
            max_usd=None if max_usd is None else max_usd / lanes,
            max_samples=max_samples_of(limits),
            prices=prices,
        ),
        spent_tokens,
        spent_usd,
    )


def _remaining(budget: JudgeBudget, spent_tokens: int, spent_usd: float) -> JudgeBudget:
    budget.spent_tokens = int(spent_tokens)
    budget.spent_usd = float(spent_usd)
    return budget


class LaneBudgets:
    """Equal shares of one run's ``judge_limits`` per lane, created on first use (thread-safe).
    ``lane_count`` is fixed at run start, so a lane graded late gets the same share."""

    def __init__(self, limits: Any, lane_count: int, prices: PriceTable | None = None) -> None:
        self.limits = limits
        self.lane_count = max(1, int(lane_count))
        self.prices = prices
        self._lock = threading.Lock()
        self._by_lane: dict[str, JudgeBudget] = {}

    def for_lane(self, lane: str) -> JudgeBudget:
        with self._lock:
            budget = self._by_lane.get(lane)
            if budget is None:
                budget = self._by_lane[lane] = lane_share(self.limits, self.lane_count, prices=self.prices)
            return budget


def reserved(reservation: Any) -> tuple[int, float]:
    """The tokens and USD a reservation (of a :class:`JudgeBudget` or a :class:`SharedBudget`)
    holds: what a call whose usage is not reported is charged."""
    if isinstance(reservation, Reservation):
        return reservation.tokens, reservation.usd
    return sum(r.tokens for _, r in reservation), sum(r.usd for _, r in reservation)


def _parts(total: int, n: int) -> list[int]:
    """``total`` in ``n`` near-equal whole parts that sum to it (remainders to the first)."""
    q, r = divmod(total, max(1, n))
    return [q + (1 if i < r else 0) for i in range(max(1, n))]


class SharedBudget:
    """A budget view over several lanes' shares, for calls that serve every lane (n_wise
    rankings): each reservation is split equally between the lanes and fails if any lane
    cannot afford its part. The reported usage is split the same way, the integer remainders
    going to the first lanes, so the lanes are charged every token the provider reported."""

    def __init__(self, budgets: list[JudgeBudget]) -> None:
        self.budgets = budgets or [JudgeBudget()]
        self.max_samples = self.budgets[0].max_samples
        self.prices = self.budgets[0].prices

    def cap_samples(self, samples: int) -> int:
        return self.budgets[0].cap_samples(samples)

    def reserve(self, model: str, prompt_tokens: int, max_output_tokens: int) -> Any:
        n = len(self.budgets)
        parts: list[tuple[JudgeBudget, Reservation]] = []
        for b in self.budgets:
            r = b.reserve(model, -(-prompt_tokens // n), -(-max_output_tokens // n))
            if isinstance(r, str):
                for done_budget, done in parts:
                    done_budget.release(done)
                return r
            parts.append((b, r))
        return parts

    def settle(
        self,
        reservation: Any,
        model: str,
        input_tokens: int,
        output_tokens: int,
        *,
        reported: bool = True,
    ) -> float | None:
        ins, outs = _parts(input_tokens, len(reservation)), _parts(output_tokens, len(reservation))
        costs = [
            b.settle(r, model, ins[i], outs[i], reported=reported) for i, (b, r) in enumerate(reservation)
        ]
        total = self.prices.cost(model, input_tokens, output_tokens) if reported else None
        return None if total is None or any(c is None for c in costs) else total

    def release(self, reservation: Any) -> None:
        for b, r in reservation:
            b.release(r)
