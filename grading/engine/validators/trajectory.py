"""Trajectory matchers (grading.md §4): tool_trajectory and skills_trajectory."""

from __future__ import annotations

import posixpath
from collections import Counter
from typing import Any

from ..refs import Resolved
from ..types import Evidence, ToolCall, as_text, canonical_json
from .common import (
    Env,
    VResult,
    cfg,
    deep_equal,
    graded,
    not_applicable,
    pack_error,
    unavailable,
    value_as_json,
)
from .tool_calls import bipartite_match

MATCH_TYPES = ("EXACT", "IN_ORDER", "ANY_ORDER")
DEFAULT_SKILL_TOOLS = ("Skill", "activate_skill", "load_skill")
DEFAULT_READ_TOOLS = ("Read", "read_file", "view", "cat")
_READ_ARG_KEYS = ("file_path", "path", "file", "filename")


def _invocation_calls(evidence: Evidence, include_failed: bool) -> list[tuple[str, list[ToolCall]]]:
    calls = evidence.tool_calls
    out = []
    for inv in evidence.invocations:
        picked = [calls[i] for i in inv.tool_call_indexes if i < len(calls)]
        if not include_failed:
            picked = [c for c in picked if c.status == "ok"]
        out.append((inv.id, picked))
    return out


def _mean(scores: list[float]) -> float:
    return sum(scores) / len(scores) if scores else 0.0


def args_subset(actual: Any, expected: Any) -> bool:
    """Every expected key present with a deeply equal value (numbers numerically)."""
    return (
        isinstance(actual, dict)
        and isinstance(expected, dict)
        and all(k in actual and deep_equal(actual[k], v) for k, v in expected.items())
    )


# ---------------------------------------------------------------------------
# tool_trajectory
# ---------------------------------------------------------------------------


def _expected_invocations(raw: Any) -> list[list[dict[str, Any]]] | None:
    if isinstance(raw, dict) and isinstance(raw.get("invocations"), list):
        raw = raw["invocations"]
    if not isinstance(raw, list):
        return None
    if all(isinstance(x, dict) for x in raw):
        invs = [raw]
    elif all(isinstance(x, list) for x in raw):
        invs = raw
    else:
        return None
    for inv in invs:
        for call in inv:
            if not isinstance(call, dict) or not isinstance(call.get("name"), str):
                return None
            if "args" in call and call["args"] is not None and not isinstance(call["args"], dict):
                return None
    return invs


def _match_calls(exp_calls: list[dict[str, Any]], calls: list[ToolCall], matches: Any) -> list[int]:
    return bipartite_match(len(exp_calls), len(calls), lambda x, y: bool(matches(exp_calls[x], calls[y])))


def tool_trajectory(actual: Any, expected: Resolved | None, config: Any, env: Env) -> VResult:
    evidence = env.evidence
    n_inv = len(evidence.invocations)
    raw = cfg(config, "expected")
    if raw is None and expected is not None:
        raw, bad = value_as_json(expected.value, expected.text)
        if bad is not None:
            raw = None
    invs = _expected_invocations(raw)
    match_type = str(cfg(config, "match_type", "EXACT")).upper()
    args_match = str(cfg(config, "args_match", "subset")).lower()
    nulls: list[float | None] = [None] * n_inv
    if invs is None:
        return pack_error(
            "expected must be a list of calls {name, args?} or a list of such lists",
            "invalid_config_expected",
            per_invocation_scores=nulls,
        )
    if match_type not in MATCH_TYPES:
        return pack_error(
            f"match_type {match_type!r} is not EXACT, IN_ORDER or ANY_ORDER",
            "invalid_config_match_type",
            per_invocation_scores=nulls,
        )
    if args_match not in ("subset", "exact"):
        return pack_error(
            f"args_match {args_match!r} is not subset or exact", "invalid_config", per_invocation_scores=nulls
        )
    if n_inv == 0:
        return not_applicable(
            "zero invocations: nothing to compare", "no_invocations", per_invocation_scores=[]
        )
    if not evidence.channels.tool_calls:
        return unavailable("UNAVAILABLE: lane reports no tool calls (black_box or no tool_calls channel)")
    ignore_args = bool(cfg(config, "ignore_args", False))
    threshold = float(cfg(config, "threshold", 0.5))

    def call_matches(exp: dict[str, Any], act: ToolCall) -> bool:
        if exp["name"] != act.name:
            return False
        if ignore_args or exp.get("args") is None:
            return True
        return (
            args_subset(act.args, exp["args"])
            if args_match == "subset"
            else deep_equal(act.args, exp["args"])
        )

    actual_invs = _invocation_calls(evidence, bool(cfg(config, "include_failed", False)))
    scores: list[float | None] = []
    comparisons: list[dict[str, Any]] = []
    for i, exp_calls in enumerate(invs):
        if i >= len(actual_invs):
            scores.append(0.0)
            comparisons.append({"invocation_id": None, "expected": exp_calls, "actual": [], "matched": False})
            continue
        inv_id, calls = actual_invs[i]
        if match_type == "EXACT":
            ok = len(exp_calls) == len(calls) and all(
                call_matches(e, a) for e, a in zip(exp_calls, calls, strict=True)
            )
        elif match_type == "IN_ORDER":
            k = 0
            for a in calls:
                if k < len(exp_calls) and call_matches(exp_calls[k], a):
                    k += 1
            ok = k == len(exp_calls)
        else:
            pairs = _match_calls(exp_calls, calls, call_matches)
            ok = all(p >= 0 for p in pairs)
        scores.append(1.0 if ok else 0.0)
        comparisons.append(
            {
                "invocation_id": inv_id,
                "expected": exp_calls,
                "actual": [{"index": c.index, "name": c.name, "args": c.args} for c in calls],
                "matched": ok,
            }
        )
    score = _mean([s for s in scores if s is not None]) if scores else 1.0
    extra = [inv_id for inv_id, _ in actual_invs[len(invs) :]]
    lines = [
        f"invocation {c['invocation_id'] if c['invocation_id'] is not None else '(none)'}: "
        f"{'matched' if c['matched'] else 'not matched'} ({len(c['expected'])} expected, {len(c['actual'])} actual)"
        for c in comparisons[:20]
    ]
    text = (
        f"{match_type}, args {('ignored' if ignore_args else args_match)}; score {score:.4f} (threshold {threshold:g}); "
        + "; ".join(lines)
    )
    if extra:
        text += f"; extra actual invocations ignored: {', '.join(extra[:20])}"
    return graded(score, threshold, text, per_invocation_scores=scores, details={"comparisons": comparisons})


# ---------------------------------------------------------------------------
# skills_trajectory
# ---------------------------------------------------------------------------


def _requirement(entry: Any) -> tuple[str, Any] | None:
    """("name", s) | ("skill", s) | ("tool", (T, args)) or None for an invalid entry."""
    if isinstance(entry, (str, int, float, bool)):
        return ("name", as_text(entry))
    if isinstance(entry, dict):
        if set(entry) == {"skill"} and isinstance(entry["skill"], str) and entry["skill"]:
            return ("skill", entry["skill"])
        if (
            "tool" in entry
            and set(entry) <= {"tool", "args"}
            and isinstance(entry["tool"], str)
            and entry["tool"]
        ):
            args = entry.get("args")
            if args is not None and not isinstance(args, dict):
                return None
            return ("tool", (entry["tool"], args or {}))
    return None


class _Use:
    __slots__ = ("call", "skills", "tools")

    def __init__(self, call: ToolCall | None, skills: set[str], tools: set[str]) -> None:
        self.call, self.skills, self.tools = call, skills, tools


def _strip(name: str, strip_prefix: bool) -> str:
    return name.split(":", 1)[1] if strip_prefix and ":" in name else name


def observed_uses(
    calls: list[ToolCall],
    messages: list[Any],
    config: Any,
    tool_reqs: set[str],
    anchors: dict[int, int] | None = None,
) -> list[_Use]:
    """The invocation's uses in transcript order: its calls in order, and each message carrying
    ``gen_ai.skill.name`` before the first call whose transcript position (``anchors``: call index
    -> message index, see :func:`call_anchors`) lies after it."""
    skill_tools = set(cfg(config, "skill_tool_names", DEFAULT_SKILL_TOOLS))
    read_tools = set(cfg(config, "read_tool_names", DEFAULT_READ_TOOLS))
    count_tools = bool(cfg(config, "count_tool_names", True))
    strip_prefix = bool(cfg(config, "strip_plugin_prefix", False))
    uses: list[_Use] = []
    pending = [
        (m.index, _strip(a, strip_prefix))
        for m in messages
        if isinstance(a := (m.attributes or {}).get("gen_ai.skill.name"), str) and a
    ]
    anchors = anchors or {}
    for c in calls:
        at = anchors.get(c.index, -1)
        while pending and pending[0][0] < at:
            uses.append(_Use(None, {pending.pop(0)[1]}, set()))
        skills: set[str] = set()
        if c.name in skill_tools:
            for k in ("skill", "name"):
                v = c.args.get(k)
                if isinstance(v, str) and v:
                    skills.add(_strip(v, strip_prefix))
                    break
        if c.name in read_tools:
            for k in _READ_ARG_KEYS:
                v = c.args.get(k)
                if isinstance(v, str) and v:
                    # Normalised (§4.2): `skills/pdf/./SKILL.md` and `skills//pdf/SKILL.md` name pdf.
                    p = posixpath.normpath("/" + v.replace("\\", "/"))
                    parts = p.split("/")
                    if len(parts) >= 3 and parts[-1] == "SKILL.md" and parts[-2]:
                        skills.add(_strip(parts[-2], strip_prefix))
                    break
        attr = c.attributes.get("gen_ai.skill.name")
        if isinstance(attr, str) and attr:
            skills.add(_strip(attr, strip_prefix))
        tools = {c.name} if count_tools else set()
        if skills or tools or c.name in tool_reqs:
            uses.append(_Use(c, skills, tools))
    uses.extend(_Use(None, {name}, set()) for _, name in pending)
    return uses


_CALL_ID_KEYS = ("tool_call_id", "gen_ai.tool.call.id")


def call_anchors(evidence: Evidence) -> dict[int, int]:
    """Where each tool call sits in the transcript: call index -> index of the message holding its
    result. A message naming the call's id (``tool_call_id`` or ``gen_ai.tool.call.id`` attribute)
    anchors it; the remaining ``tool`` messages pair in order with the remaining calls. A call left
    without one sits right after the call before it (or before every message when none precedes it),
    so with no tool messages at all the skill messages follow the calls."""
    by_id: dict[str, int] = {}
    linked: set[int] = set()
    for m in evidence.messages:
        for k in _CALL_ID_KEYS:
            v = (m.attributes or {}).get(k)
            if isinstance(v, (str, int)) and str(v) not in by_id:
                by_id[str(v)] = m.index
                linked.add(m.index)
                break
    anchors: dict[int, int] = {}
    for c in evidence.tool_calls:
        if c.id is not None and c.id in by_id:
            anchors[c.index] = by_id[c.id]
    free = iter(m.index for m in evidence.messages if m.role == "tool" and m.index not in linked)
    last = -1
    for c in evidence.tool_calls:
        if c.index not in anchors:
            nxt = next(free, None)
            anchors[c.index] = nxt if nxt is not None else last
        last = max(last, anchors[c.index])
    return anchors


def _skill_messages(evidence: Evidence, anchors: dict[int, int]) -> list[list[Any]]:
    """The messages carrying ``gen_ai.skill.name``, per invocation. One invocation takes them all;
    else, when the transcript has one user message per invocation, the k-th user turn's messages
    go to invocation k; else a message goes with the nearest call before it (or after it)."""
    invs = evidence.invocations
    tagged = [m for m in evidence.messages if (m.attributes or {}).get("gen_ai.skill.name")]
    out: list[list[Any]] = [[] for _ in invs]
    if not invs or not tagged:
        return out
    if len(invs) == 1:
        out[0] = tagged
        return out
    users = [m.index for m in evidence.messages if m.role == "user" and m.origin == "agent"]
    if len(users) == len(invs):
        for m in tagged:
            turn = sum(1 for u in users if u <= m.index) - 1
            out[max(turn, 0)].append(m)
        return out
    placed = sorted(
        (anchors[i], k) for k, inv in enumerate(invs) for i in inv.tool_call_indexes if i in anchors
    )
    for m in tagged:
        before = [k for at, k in placed if at < m.index]
        after = [k for at, k in placed if at >= m.index]
        if before or after:
            out[before[-1] if before else after[0]].append(m)
    return out


def _matches(req: tuple[str, Any], use: _Use) -> bool:
    kind, val = req
    if kind == "name":
        return val in use.skills or val in use.tools
    if kind == "skill":
        return val in use.skills
    name, args = val
    return use.call is not None and use.call.name == name and args_subset(use.call.args, args)


def _lcs(reqs: list[tuple[str, Any]], uses: list[_Use]) -> int:
    prev = [0] * (len(uses) + 1)
    for r in reqs:
        cur = [0] * (len(uses) + 1)
        for j, u in enumerate(uses, 1):
            cur[j] = prev[j - 1] + 1 if _matches(r, u) else max(prev[j], cur[j - 1])
        prev = cur
    return prev[-1]


def score_skills(reqs: list[tuple[str, Any]], uses: list[_Use], match_type: str) -> float:
    n = len(reqs)
    if match_type == "ANY_ORDER":
        groups = Counter(canonical_json([k, v]) for k, v in reqs)
        firsts = {canonical_json([k, v]): (k, v) for k, v in reqs}
        credit = 0
        for key, m in groups.items():
            c = sum(1 for u in uses if _matches(firsts[key], u))
            credit += min(m, c)
        return credit / n
    if match_type == "IN_ORDER":
        return _lcs(reqs, uses) / n
    return 1.0 if len(uses) == n and all(_matches(r, u) for r, u in zip(reqs, uses, strict=True)) else 0.0


def skills_trajectory(actual: Any, expected: Any, config: Any, env: Env) -> VResult:
    evidence = env.evidence
    n_inv = len(evidence.invocations)
    nulls: list[float | None] = [None] * n_inv
    skills = cfg(config, "skills")
    reqs = [_requirement(e) for e in skills] if isinstance(skills, list) else []
    if not isinstance(skills, list) or not skills or any(r is None for r in reqs):
        return pack_error(
            "skills must be a non-empty list of names, {skill} or {tool, args} entries",
            "invalid_config_skills",
            per_invocation_scores=nulls,
        )
    match_type = str(cfg(config, "match_type", "ANY_ORDER")).upper()
    if match_type not in MATCH_TYPES:
        return pack_error(
            f"match_type {match_type!r} is not ANY_ORDER, IN_ORDER or EXACT",
            "invalid_config_match_type",
            per_invocation_scores=nulls,
        )
    if n_inv == 0:
        return not_applicable(
            "zero invocations: no skills to check", "no_invocations", per_invocation_scores=[]
        )
    if not evidence.channels.tool_calls:
        return unavailable("UNAVAILABLE: lane reports no tool calls (black_box or no tool_calls channel)")
    threshold = float(cfg(config, "threshold", 0.5))
    clean: list[tuple[str, Any]] = [r for r in reqs if r is not None]
    tool_reqs = {v[0] for k, v in clean if k == "tool"}
    anchors = call_anchors(evidence)
    skill_messages = _skill_messages(evidence, anchors)
    scores: list[float | None] = []
    comparisons = []
    inv_calls = _invocation_calls(evidence, bool(cfg(config, "include_failed", False)))
    for (inv_id, calls), messages in zip(inv_calls, skill_messages, strict=True):
        uses = observed_uses(calls, messages, config, tool_reqs, anchors)
        s = score_skills(clean, uses, match_type)
        scores.append(s)
        comparisons.append(
            {
                "invocation_id": inv_id,
                "required": skills,
                "observed_uses": [
                    {"call_index": u.call.index if u.call else None, "names": sorted(u.skills | u.tools)}
                    for u in uses
                ],
                "score": s,
            }
        )
    score = _mean([s for s in scores if s is not None])
    per = ", ".join(f"{c['invocation_id']}: {c['score']:.4f}" for c in comparisons[:20])
    return graded(
        score,
        threshold,
        f"{match_type}; score {score:.4f} (threshold {threshold:g}); per invocation {per}",
        per_invocation_scores=scores,
        details={"comparisons": comparisons},
    )
