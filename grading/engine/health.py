"""Run health (spec/grading.md §9b): one streaming accumulator over the case outcomes of all
lanes of a run.

:class:`RunHealthAccumulator` takes one case outcome at a time (:meth:`~RunHealthAccumulator.add`
with the fields, or :meth:`~RunHealthAccumulator.add_record` with a :class:`CaseRecord` or a
grading document) and keeps per-expectation counters only: memory grows with the number of
expectation keys, lanes and cases (per-case repetition counts in ``bytearray`` columns), never
with the number of results. :meth:`~RunHealthAccumulator.finish` returns the findings
(no_discrimination, mostly_unavailable, pack_error, judge_disagreement,
unstable_across_repeats, budget_exhausted) in ``FINDING_ORDER``, then assertion order.
``critique.run_health`` over records and the run's streamed scoring both use it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from .aggregate import CaseRecord, record_from_grade
from .critique import (
    CLAIMS_KEY,
    DEFAULT_JUDGE_AGREEMENT_MIN,
    DEFAULT_UNAVAILABLE_SHARE_MAX,
    FINDING_ORDER,
    _critique_setting,
    _get,
    _list,
    _name,
    assertion_labels,
    eval_feedback,
)
from .types import EvalFeedback, Suggestion, meets

CaseId = tuple[str, str]
Outcome = tuple[str, str | None, str | None]  # (status, outcome_class, reason_code)
_SATURATED = 255


def judge_thresholds(spec: Any) -> dict[str, float]:
    """Judge key -> its ``min_agreement_threshold`` (on the judge or its consensus block)."""
    out: dict[str, float] = {}
    for j in _list(spec, "llm_judges"):
        value = _get(j, "min_agreement_threshold")
        if value is None:
            value = _get(_get(j, "consensus"), "min_agreement_threshold")
        if value is not None:
            out[str(_get(j, "key"))] = float(value)
    return out


def _n(count: int, noun: str) -> str:
    """``1 lane``, ``3 lanes``."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _pct(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:.0f}%" if whole else "0%"


def _top_reasons(reasons: Counter[str]) -> str:
    return ", ".join(f"{r} \u00d7{n}" for r, n in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))[:3])


class _CaseCounts:
    """An exact count per case index: one byte per case, the rare count past 254 in a dict."""

    __slots__ = ("big", "small")

    def __init__(self) -> None:
        self.small = bytearray()
        self.big: dict[int, int] = {}

    def bump(self, index: int) -> int:
        """Add one at ``index``; the count before."""
        small = self.small
        if index >= len(small):
            small.extend(bytes(index + 1 - len(small)))
        before = small[index]
        if before < _SATURATED:
            small[index] = before + 1
            return before
        before = self.big.get(index, _SATURATED)
        self.big[index] = before + 1
        return before

    def get(self, index: int) -> int:
        n = self.small[index] if index < len(self.small) else 0
        return self.big.get(index, _SATURATED) if n == _SATURATED else n


class _KeyHealth:
    """Run-health tallies of one expectation key, over every lane."""

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
        self.case_seen = bytearray()  # 1 where the key has a graded result on that case
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
        # lane -> (PASSED counts, FAILED counts) per case index
        self.repeats: dict[str, tuple[_CaseCounts, _CaseCounts]] = {}


class RunHealthAccumulator:
    """The §9b findings of a run, fed one case outcome at a time (any order, any lane)."""

    __slots__ = (
        "_case_ids",
        "_case_index",
        "_keys",
        "_thresholds",
        "_unexplained",
        "_unexplained_reasons",
        "rows",
        "spec",
    )

    def __init__(self, spec: Any = None) -> None:
        self.spec = spec
        self.rows = 0
        self._thresholds = judge_thresholds(spec)
        self._keys: dict[str, _KeyHealth] = {}
        self._case_index: dict[CaseId, int] = {}
        self._case_ids: list[CaseId] = []
        self._unexplained = 0
        self._unexplained_reasons: Counter[str] = Counter()

    def _key(self, key: str) -> _KeyHealth:
        found = self._keys.get(key)
        if found is None:
            found = self._keys[key] = _KeyHealth()
        return found

    def add_record(self, record: CaseRecord | Mapping[str, Any]) -> None:
        """One case outcome as a :class:`CaseRecord` or a grading document (grading.json)."""
        r = record if isinstance(record, CaseRecord) else record_from_grade(record)
        self.add(
            r.deployment,
            r.case_id,
            r.expectations,
            r.judge_agreement,
            outcome_class=r.outcome_class,
            reason_code=r.reason_code,
        )

    def add(
        self,
        deployment: str,
        case_id: CaseId,
        expectations: Mapping[str, Outcome],
        judge_agreement: Mapping[str, float] | None = None,
        *,
        outcome_class: str | None = None,
        reason_code: str | None = None,
    ) -> None:
        """One case outcome: the lane (deployment), ``(challenge_key, case_key)``, expectation
        key -> (status, outcome_class, reason_code), judge key -> agreement, and the case's
        own outcome class and reason code."""
        self.rows += 1
        index = self._case_index.get(case_id)
        if index is None:
            index = self._case_index[case_id] = len(self._case_ids)
            self._case_ids.append(case_id)
        explained = False
        for key, (status, outcome, reason) in expectations.items():
            h = self._key(key)
            h.total += 1
            if status == "PASSED" or status == "FAILED":
                h.graded += 1
                h.statuses.add(status)
                h.lanes.add(deployment)
                seen = h.case_seen
                if index >= len(seen):
                    seen.extend(bytes(index + 1 - len(seen)))
                if not seen[index]:
                    seen[index] = 1
                    h.cases += 1
                pair = h.repeats.get(deployment)
                if pair is None:
                    pair = h.repeats[deployment] = (_CaseCounts(), _CaseCounts())
                pair[0 if status == "PASSED" else 1].bump(index)
            elif status == "UNAVAILABLE" or status == "NOT_EVALUATED":
                h.missing += 1
                h.missing_reasons[reason or outcome or "unknown"] += 1
            if outcome == "pack_error":
                explained = True
                h.pack += 1
                h.pack_reasons[reason or "pack_error"] += 1
            if reason == "low_agreement":
                h.low += 1
            elif reason == "judge_budget_exhausted":
                h.spent += 1
        if judge_agreement:
            for key, value in judge_agreement.items():
                h = self._key(key)
                h.agreement_sum += value
                h.agreement_n += 1
                threshold = self._thresholds.get(key)
                if threshold is not None and not meets(value, threshold):
                    h.below += 1
        if outcome_class == "pack_error" and not explained:
            # a case-level pack error no expectation explains (e.g. an unresolved case reference)
            self._unexplained += 1
            self._unexplained_reasons[reason_code or "pack_error"] += 1

    def finish(self) -> EvalFeedback:
        """The findings so far (the accumulator is left as it is and may be fed further)."""
        spec = self.spec
        labels = assertion_labels(spec)
        share_max = float(_critique_setting(spec, "unavailable_share_max", DEFAULT_UNAVAILABLE_SHARE_MAX))
        agreement_min = float(_critique_setting(spec, "judge_agreement_min", DEFAULT_JUDGE_AGREEMENT_MIN))
        known = {k: i for i, k in enumerate(labels)}
        found: dict[str, list[Suggestion]] = {f: [] for f in FINDING_ORDER}

        def add(finding: str, key: str | None, reason: str) -> None:
            found[finding].append(Suggestion(reason=reason, finding=finding, assertion=key))

        for key in sorted(self._keys, key=lambda k: (known.get(k, len(known)), k)):
            h = self._keys[key]
            name = _name(key, labels)
            total = h.total
            # no_discrimination (not for the engine's own claims gate: agents passing it
            # everywhere is the normal state, not a weakness of the pack's assertions)
            uniform = h.graded >= 3 and key != CLAIMS_KEY and len(h.statuses) == 1
            if uniform and (len(h.lanes) >= 2 or h.cases >= 3):
                status = next(iter(h.statuses))
                add(
                    "no_discrimination",
                    key,
                    f"{name} is {status} on all {h.graded} graded results ({_n(len(h.lanes), 'lane')}, "
                    f"{_n(h.cases, 'case')}): it does not tell agents or cases apart",
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
            threshold = self._thresholds.get(key)
            below = max(h.below, h.low)
            mean_agreement = h.agreement_sum / h.agreement_n if h.agreement_n else None
            low_mean = mean_agreement is not None and not meets(mean_agreement, agreement_min)
            if low_mean or below:
                parts = []
                if mean_agreement is not None:
                    parts.append(
                        f"mean agreement {mean_agreement:.2f} over {h.agreement_n} cases"
                        + (f" is below {agreement_min:.2f}" if low_mean else "")
                    )
                if below:
                    parts.append(
                        f"{below} case{'s' if below != 1 else ''} below the judge's min_agreement_threshold"
                        + (f" {threshold:.2f}" if threshold is not None else "")
                    )
                add("judge_disagreement", key, f"{name}: " + "; ".join(parts))
            flaky: list[tuple[str, CaseId, int, int]] = []
            for lane, (passed, failed) in h.repeats.items():
                for index in range(min(len(passed.small), len(failed.small))):
                    if passed.small[index] and failed.small[index]:
                        flaky.append((lane, self._case_ids[index], passed.get(index), failed.get(index)))
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
        if self._unexplained:
            add(
                "pack_error",
                None,
                f"{self._unexplained} of {self.rows} case grades are pack errors "
                f"({_top_reasons(self._unexplained_reasons)})",
            )
        return eval_feedback([s for f in FINDING_ORDER for s in found[f]])
