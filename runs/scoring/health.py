"""Run health (grading.md §9b) over a stream of item rows: the engine's one accumulator
(``grading.engine.health.RunHealthAccumulator``, the same that ``run_health`` feeds with
records) plus the outcome table the model critique reads."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from grading.engine.health import RunHealthAccumulator

if TYPE_CHECKING:
    from runs.scoring.stream import Row


class RunHealth(RunHealthAccumulator):
    """Run health of the streamed rows (``finish()`` gives the findings) and, per challenge,
    the expectation status counts of the model critique."""

    __slots__ = ("table",)

    def __init__(self, spec: Any) -> None:
        super().__init__(spec)
        self.table: dict[str, dict[str, Counter[str]]] = {}  # challenge -> key -> statuses

    def add_row(self, deployment: str, case_id: tuple[str, str], row: Row) -> None:
        per_challenge = self.table.setdefault(case_id[0], {})
        for key, outcome in row.expectations.items():
            per_challenge.setdefault(key, Counter())[outcome[0]] += 1
        self.add(
            deployment,
            case_id,
            row.expectations,
            row.judge_agreement,
            outcome_class=row.outcome_class,
            reason_code=row.reason_code,
        )

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
