"""Run health (grading.md §9b) over a stream of item rows: ``run_health``'s findings, wording
and order from per-expectation counters instead of the records."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

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
)
from grading.engine.types import EvalFeedback, Suggestion

if TYPE_CHECKING:
    from runs.scoring.stream import Cases, Row


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


class RunHealth:
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

    def add(self, deployment: str, index: int, challenge: str, row: Row) -> None:
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

    def feedback(self, cases: Cases) -> EvalFeedback:
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
