"""Model prices for judge (and fallback agent) cost accounting (grading.md §6.5).

Judge cost always comes from a price table: the admin's ``ModelPrice`` rows in the web
app, and in the offline ``grade`` command the built-in :data:`DEFAULT_PRICES` the admin
table is seeded from. An unknown model has cost ``None`` (never a guessed number).
Prices are USD per 1M tokens. No Django import: the offline command uses this module.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Price:
    input_per_million: float
    output_per_million: float

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.input_per_million + output_tokens * self.output_per_million) / 1_000_000


# Public list prices (USD per 1M tokens) at the time of writing; the admin table overrides them.
DEFAULT_PRICES: dict[str, Price] = {
    "gpt-4o": Price(2.50, 10.00),
    "gpt-4o-mini": Price(0.15, 0.60),
    "gpt-4.1": Price(2.00, 8.00),
    "gpt-4.1-mini": Price(0.40, 1.60),
    "gpt-4.1-nano": Price(0.10, 0.40),
    "o3-mini": Price(1.10, 4.40),
    "o4-mini": Price(1.10, 4.40),
    "claude-haiku-4-5": Price(1.00, 5.00),
    "claude-sonnet-4-5": Price(3.00, 15.00),
    "claude-opus-4-1": Price(15.00, 75.00),
    "claude-3-5-haiku-latest": Price(0.80, 4.00),
}


class PriceTable:
    """Lookup by exact model name, then by the longest known prefix (``gpt-4o-2024-08-06``
    is priced as ``gpt-4o``). Immutable after construction, so safe across threads."""

    def __init__(self, prices: Mapping[str, Price] | None = None) -> None:
        self._prices = dict(DEFAULT_PRICES if prices is None else prices)
        self._by_length = sorted(self._prices, key=len, reverse=True)

    def price(self, model: str) -> Price | None:
        name = (model or "").strip()
        if name in self._prices:
            return self._prices[name]
        lowered = name.lower()
        for known in self._by_length:
            if lowered.startswith(known.lower()):
                return self._prices[known]
        return None

    def cost(self, model: str, input_tokens: int, output_tokens: int) -> float | None:
        price = self.price(model)
        return None if price is None else price.cost(input_tokens, output_tokens)

    def __contains__(self, model: str) -> bool:
        return self.price(model) is not None


def default_table() -> PriceTable:
    return PriceTable(DEFAULT_PRICES)
