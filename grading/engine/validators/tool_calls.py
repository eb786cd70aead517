"""tool_call_assertion (grading.md §3.6) and the matching helpers the trajectory matchers share."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..types import Evidence, Status, ToolCall
from .common import Env, PreparedGrader, VResult, cfg, is_number, pack_error, prepared, unavailable

_PASSED, _FAILED = Status.PASSED, Status.FAILED


def bipartite_match(n_left: int, n_right: int, edge: Callable[[int, int], bool]) -> list[int]:
    """Maximum matching by augmenting paths (Kuhn). Returns right partner per left (-1)."""
    adj = [[j for j in range(n_right) if edge(i, j)] for i in range(n_left)]
    right_of: list[int] = [-1] * n_right
    left_to: list[int] = [-1] * n_left

    def augment(i: int, seen: list[bool]) -> bool:
        for j in adj[i]:
            if seen[j]:
                continue
            seen[j] = True
            if right_of[j] < 0 or augment(right_of[j], seen):
                right_of[j] = i
                left_to[i] = j
                return True
        return False

    for i in range(n_left):
        if adj[i]:
            augment(i, [False] * n_right)
    return left_to


def contains_matcher(expected: Any) -> Callable[[Any], bool]:
    """A predicate ``actual -> bool`` for "actual contains expected", built once: objects by
    keys recursively, each expected array element by a distinct actual element, scalars by
    equality (numbers numerically, booleans only equal booleans)."""
    if isinstance(expected, dict):
        items = [(k, contains_matcher(v)) for k, v in expected.items()]
        if len(items) == 1:  # the usual arguments_contain: one key
            ((key, match_one),) = items

            def one(actual: Any) -> bool:
                return isinstance(actual, dict) and key in actual and match_one(actual[key])

            return one

        def obj(actual: Any) -> bool:
            return isinstance(actual, dict) and all(k in actual and match(actual[k]) for k, match in items)

        return obj
    if isinstance(expected, list):
        elements = [contains_matcher(v) for v in expected]
        n = len(elements)

        def array(actual: Any) -> bool:
            if not isinstance(actual, list) or n > len(actual):
                return False
            if not n:
                return True
            match = bipartite_match(n, len(actual), lambda i, j: elements[i](actual[j]))
            return all(m >= 0 for m in match)

        return array
    if is_number(expected):

        def number(actual: Any) -> bool:
            return is_number(actual) and actual == expected

        return number
    kind = type(expected)

    def scalar(actual: Any) -> bool:  # strings, booleans, null: same type and equal
        return type(actual) is kind and actual == expected

    return scalar


def contains_value(actual: Any, expected: Any) -> bool:
    """Whether ``actual`` contains ``expected`` (see ``contains_matcher``)."""
    return contains_matcher(expected)(actual)


def observed_calls(evidence: Evidence, include_failed: bool) -> list[ToolCall]:
    if include_failed:
        return evidence.tool_calls
    return [c for c in evidence.tool_calls if c.status == "ok"]


def _is_subsequence(needle: list[str], hay: list[str]) -> bool:
    it = iter(hay)
    return all(any(x == y for y in it) for x in needle)


def _prepare(config: Any) -> tuple[Any, ...]:
    name = cfg(config, "tool_name")
    args = cfg(config, "arguments_contain")
    count, lo, hi = cfg(config, "count"), cfg(config, "min_count"), cfg(config, "max_count")
    ordered = cfg(config, "ordered_tools")
    must_call = cfg(config, "must_call")
    problem = None
    if args is not None and not isinstance(args, dict):
        problem = "arguments_contain must be an object"
    if (
        must_call is None
        and (name is not None or args is not None)
        and count is None
        and lo is None
        and hi is None
    ):
        must_call = True
    if (
        name is None
        and args is None
        and must_call is None
        and count is None
        and lo is None
        and hi is None
        and not ordered
    ):
        problem = "must declare at least one tool call assertion"
    mode = cfg(config, "order_mode", "subsequence")
    include_failed = bool(cfg(config, "include_failed", False))
    return (
        name,
        args,
        count,
        lo,
        hi,
        list(ordered) if ordered else None,
        mode,
        must_call,
        include_failed,
        problem,
    )


@prepared("tool_call_assertion")
def tool_call_assertion(config: Any) -> PreparedGrader:
    name, args, count, lo, hi, ordered, mode, must_call, include_failed, problem = _prepare(config)
    args_match = contains_matcher(args) if args is not None else None

    def grade(actual: Any, expected: Any, env: Env) -> VResult:
        evidence = env.evidence
        if not evidence.channels.tool_calls:
            return unavailable("UNAVAILABLE: lane reports no tool calls (black_box or no tool_calls channel)")
        if problem is not None:
            return pack_error(problem, "invalid_config")
        names: list[str] = []  # the observed calls (failed ones only with include_failed)
        matched: list[int] = []
        for c in evidence.tool_calls:
            if not include_failed and c.status != "ok":
                continue
            names.append(c.name)
            if (name is None or c.name == name) and (args_match is None or args_match(c.args)):
                matched.append(c.index)
        n = len(matched)
        reasons: list[str] = []
        if must_call is True and n == 0:
            reasons.append("no matching call (must_call true)")
        if must_call is False and n > 0:
            reasons.append(f"{n} matching calls (must_call false)")
        if count is not None and n != count:
            reasons.append(f"count {n} != count {count}")
        if lo is not None and n < lo:
            reasons.append(f"count {n} < min_count {lo}")
        if hi is not None and n > hi:
            reasons.append(f"count {n} > max_count {hi}")
        if ordered:
            ok = names == ordered if mode == "exact" else _is_subsequence(ordered, names)
            if not ok:
                what = "equal" if mode == "exact" else "contain the subsequence"
                reasons.append(f"observed names do not {what} {ordered}")
        return VResult(
            _FAILED if reasons else _PASSED,
            0.0 if reasons else 1.0,
            (_assertion_text, matched, names, reasons),
            None,
            None,
            {"matched_indices": matched, "observed_names": names, "reasons": reasons},
        )

    return grade


def _assertion_text(matched: list[int], names: list[str], reasons: list[str]) -> str:
    shown = ", ".join(names[:50]) + (f", ... ({len(names)} calls)" if len(names) > 50 else "")
    text = f"matched indexes {matched[:50]}; observed: [{shown}]"
    return text + (("; reasons: " + "; ".join(reasons)) if reasons else "; all assertions hold")
