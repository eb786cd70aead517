"""Evidence references (grading.md §1.3, §1.4), evidence ids (§1.2) and ``{{placeholders}}``.

Resolution never raises on data: an unresolved case reference is a ``Resolved`` with
``state == "reference_missing"`` (NOT_EVALUATED / pack_error), an unavailable channel is
``channel_unavailable``, and a capture whose file was not returned is ``absent`` (agent
evidence, judged by the file validators).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from . import jsontext
from .evidence import metric_value, normalize_path
from .refsyntax import RefKind, RefSyntaxError
from .refsyntax import parse_reference as parse_syntax
from .types import MISSING, AssetRef, CaseDef, Evidence, GradeContext, as_text, canonical_json

MAX_CHAIN_DEPTH = 8
DEFAULT_CAPTURE_BYTES = 1024 * 1024
ARTIFACT_FIELDS = ("key", "kind", "path", "media_type", "content")

# Resolution states.
OK = "ok"
REFERENCE_MISSING = "reference_missing"
CHANNEL_UNAVAILABLE = "channel_unavailable"
ABSENT = "absent"
INVALID_CHAIN = "invalid_reference_chain"
NOT_APPLICABLE = "not_applicable"


def text_of(v: Any) -> str:
    """``types.as_text`` with fast paths for scalars (grading.md §1.4 rule 7)."""
    t = type(v)
    if t is str:
        return v
    if t is bool:
        return "true" if v else "false"
    if t is int:
        return str(v)
    if v is None:
        return "null"
    if t is float and math.isfinite(v):
        return str(int(v)) if v.is_integer() else repr(v)
    return canonical_json(v)


# The syntax lives in ``refsyntax`` (shared with the publish checks); this module resolves.
ReferenceSyntaxError = RefSyntaxError


@dataclass(slots=True, frozen=True)
class Ref:
    """A parsed reference. ``kind`` is one of final_output, challenge_input, payload, input,
    expectation, artifact, file, literal, tool_calls, transcript_full, transcript_last_n,
    transcript_from_mismatch, turn_expectations."""

    kind: str
    text: str
    name: str = ""
    path: tuple[str, ...] = ()
    field: str | None = None
    n: int = 0

    @property
    def is_case_data(self) -> bool:
        return self.kind in ("challenge_input", "payload", "input", "expectation", "artifact")


@dataclass(slots=True)
class Resolved:
    value: Any = None
    state: str = OK
    message: str = ""
    truncated: bool = False
    path: str | None = None  # the file path of a capture or listing
    listing: bool = False
    _text: str | None = None

    @property
    def ok(self) -> bool:
        return self.state == OK

    @property
    def text(self) -> str:
        if self._text is None:
            v = self.value
            self._text = "" if v is None else text_of(v)
        return self._text


_PARSE_CACHE: dict[str, Ref] = {}


def parse_reference(text: str) -> Ref:
    """Parse a reference string (trimmed first). Raises ``ReferenceSyntaxError``."""
    cached = _PARSE_CACHE.get(text)
    if cached is not None:
        return cached
    ref = _parse(text)
    if len(_PARSE_CACHE) < 4096:
        _PARSE_CACHE[text] = ref
    return ref


_KINDS = {
    RefKind.FINAL_OUTPUT: "final_output",
    RefKind.CHALLENGE_INPUT: "challenge_input",
    RefKind.TOOL_CALLS: "tool_calls",
}
_TRANSCRIPTS = {
    "full": "transcript_full",
    "from_mismatch": "transcript_from_mismatch",
    "turn.expectations": "turn_expectations",
    "last_n": "transcript_last_n",
}


def _parse(raw: str) -> Ref:
    """``refsyntax.parse_reference`` (pack-format §8: trimmed, then classified) turned into
    the resolution view: an artifact's trailing field split off, transcripts by slice."""
    if not isinstance(raw, str):
        raise ReferenceSyntaxError("a reference must be a string")
    r = parse_syntax(raw)
    t, kind = r.text, r.kind
    if kind is RefKind.LITERAL:
        return Ref("literal", t, name=r.literal or "")
    if kind is RefKind.FILE:
        return Ref("file", t, name=r.name or "")
    if kind is RefKind.CASE_PAYLOAD:
        return Ref("payload", t, path=r.path)
    if kind is RefKind.CASE_INPUT or kind is RefKind.CASE_EXPECTATION:
        return Ref(
            "input" if kind is RefKind.CASE_INPUT else "expectation", t, name=r.name or "", path=r.path
        )
    if kind is RefKind.ARTIFACT:
        segs = (r.name or "", *r.path)
        if len(segs) > 1 and segs[-1] in ARTIFACT_FIELDS:  # an asset key may itself contain dots
            return Ref("artifact", t, name=".".join(segs[:-1]), field=segs[-1])
        return Ref("artifact", t, name=".".join(segs))
    if kind is RefKind.TRANSCRIPT:
        return Ref(_TRANSCRIPTS[r.name or ""], t, n=r.last_n or 0)
    return Ref(_KINDS[kind], t)


# ---------------------------------------------------------------------------
# Case data
# ---------------------------------------------------------------------------

_CHALLENGE_INPUT_KEYS = ("value", "content", "text", "answer")


def _first_string(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        for k in _CHALLENGE_INPUT_KEYS:
            if k in value:
                found = _first_string(value[k])
                if found is not None:
                    return found
        return None
    if isinstance(value, list) and len(value) == 1:
        return _first_string(value[0])
    return None


def challenge_input_text(payload: Any) -> str:
    """The payload as text (grading.md §1.3 ``challenge_input``)."""
    if isinstance(payload, dict):
        found = _first_string(payload)
        if found is not None:
            return found
    return canonical_json(payload if payload else {})


def walk(value: Any, path: tuple[str, ...]) -> Any:
    """Objects by key, lists by decimal index; MISSING when a step does not resolve."""
    for seg in path:
        if isinstance(value, dict):
            if seg not in value:
                return MISSING
            value = value[seg]
        elif isinstance(value, list) and seg.isdigit() and seg.isascii():
            i = int(seg)
            if i >= len(value):
                return MISSING
            value = value[i]
        else:
            return MISSING
    return value


def visible_assets(case: CaseDef, context: GradeContext) -> dict[str, AssetRef]:
    """The case's own assets and the version assets the case names (pack-format §8)."""
    named = set(case.artifact_keys)
    for i in case.inputs:
        if i.artifact_key:
            named.add(i.artifact_key)
    for e in case.expectations:
        if e.artifact_key:
            named.add(e.artifact_key)
        if e.source and e.source.startswith("artifact:"):
            named.add(e.source[len("artifact:") :].strip())
    out = {k: a for k, a in context.version_assets.items() if k in named}
    for a in case.assets:
        out[a.key] = a
    return out


def _load_text(asset: AssetRef | None, context: GradeContext, what: str) -> Resolved:
    if asset is None:
        return Resolved(state=REFERENCE_MISSING, message=f"{what}: no such asset")
    data = context.asset_loader(asset) if context.asset_loader is not None else None
    if data is None:
        return Resolved(state=REFERENCE_MISSING, message=f"{what}: asset {asset.key!r} has no stored file")
    try:
        return Resolved(value=data.decode("utf-8"))
    except UnicodeDecodeError:
        return Resolved(state=REFERENCE_MISSING, message=f"{what}: asset {asset.key!r} is not UTF-8 text")


def _walk_resolved(res: Resolved, path: tuple[str, ...], text: str) -> Resolved:
    if not res.ok or not path:
        return res
    value = res.value
    if isinstance(value, str):  # asset content: walk into its JSON
        try:
            value = jsontext.loads(value)
        except ValueError:
            return Resolved(
                state=REFERENCE_MISSING, message=f"{text}: content is not JSON, cannot walk a path"
            )
    found = walk(value, path)
    if found is MISSING:
        return Resolved(state=REFERENCE_MISSING, message=f"{text} does not resolve for this case")
    return Resolved(value=found)


def _keyed(items: list[Any], key: str) -> Any:
    """The first item with this key (case inputs and expectations), or None."""
    for item in items:
        if item.key == key:
            return item
    return None


def _no_such(text: str, case: CaseDef, what: str, key: str) -> Resolved:
    return Resolved(state=REFERENCE_MISSING, message=f"{text}: case {case.case_key!r} has no {what} {key!r}")


def _resolve_input(key: str, case: CaseDef, context: GradeContext, depth: int, text: str) -> Resolved:
    if depth > MAX_CHAIN_DEPTH:
        return Resolved(state=INVALID_CHAIN, message=f"{text}: source chain deeper than {MAX_CHAIN_DEPTH}")
    inp = _keyed(case.inputs, key)
    if inp is None:
        return _no_such(text, case, "input", key)
    if inp.value is not MISSING:
        return Resolved(value=inp.value)
    if inp.artifact_key:
        return _load_text(visible_assets(case, context).get(inp.artifact_key), context, text)
    if inp.path:
        asset = next((a for a in case.assets if a.path == inp.path), None)
        return _load_text(asset, context, text)
    return Resolved(
        state=REFERENCE_MISSING, message=f"{text}: input {key!r} has no value, artifact_key or path"
    )


def _resolve_expectation(key: str, case: CaseDef, context: GradeContext, text: str) -> Resolved:
    exp = _keyed(case.expectations, key)
    if exp is None:
        return _no_such(text, case, "expectation", key)
    if exp.value is not MISSING:
        return Resolved(value=exp.value)
    if exp.source:
        src = exp.source.strip()
        if src.startswith("input:"):
            return _resolve_input(src[len("input:") :].strip(), case, context, 2, text)
        if src.startswith("artifact:"):
            a = src[len("artifact:") :].strip()
            return _load_text(context.version_assets.get(a), context, text)
        return Resolved(state=REFERENCE_MISSING, message=f"{text}: unsupported source {src!r}")
    if exp.artifact_key:
        return _load_text(visible_assets(case, context).get(exp.artifact_key), context, text)
    return Resolved(
        state=REFERENCE_MISSING, message=f"{text}: expectation {key!r} has no value, source or artifact_key"
    )


def _resolve_artifact(ref: Ref, case: CaseDef, context: GradeContext) -> Resolved:
    asset = visible_assets(case, context).get(ref.name)
    if asset is None:
        return Resolved(
            state=REFERENCE_MISSING, message=f"{ref.text}: asset {ref.name!r} is not visible to this case"
        )
    if ref.field == "content":
        return _load_text(asset, context, ref.text)
    if ref.field is None:
        return Resolved(value=asset.path)
    return Resolved(value=getattr(asset, ref.field) or "")


# ---------------------------------------------------------------------------
# Agent evidence
# ---------------------------------------------------------------------------


def _get(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def listing_entries(evidence: Evidence, root: str) -> list[dict[str, Any]]:
    prefix = root + "/" if root else ""
    entries: dict[str, bool] = {}
    for p in evidence.files:
        if prefix and not p.startswith(prefix):
            continue
        rel = p[len(prefix) :]
        if not rel:
            continue
        parts = rel.split("/")
        for k in range(1, len(parts)):
            entries.setdefault("/".join(parts[:k]), True)
        entries["/".join(parts)] = False
    return [{"path": p, "is_dir": d} for p, d in sorted(entries.items())]


def resolve_file(check: Any, evidence: Evidence, working_directory: str) -> Resolved:
    path = normalize_path(str(_get(check, "path", "") or ""), working_directory)
    if not evidence.channels.files:
        return Resolved(
            state=CHANNEL_UNAVAILABLE, message="no files channel: lane reports no files", path=path
        )
    if (_get(check, "type") or "file_capture") == "directory_listing":
        return Resolved(
            value={"path": path, "entries": listing_entries(evidence, path)}, path=path, listing=True
        )
    entry = evidence.files.get(path)
    if entry is None:
        return Resolved(state=ABSENT, message=f"file not returned: {path}", path=path)
    limit = _get(check, "max_size_bytes") or DEFAULT_CAPTURE_BYTES
    text = entry.content
    if text is None:
        text = (entry.content_bytes or b"").decode("utf-8", "replace")
    truncated = entry.truncated
    if len(text) > limit // 4 and len(text.encode("utf-8")) > limit:
        text = text.encode("utf-8")[:limit].decode("utf-8", "ignore")
        truncated = True
    return Resolved(value=text, truncated=truncated, path=path)


def observed_calls_json(evidence: Evidence) -> list[dict[str, Any]]:
    return [
        {"name": c.name, "args": c.args, "result": c.result, "status": c.status} for c in evidence.tool_calls
    ]


def transcript_lines(evidence: Evidence, last_n: int | None = None) -> str:
    msgs = evidence.messages if last_n is None else evidence.messages[-last_n:]
    return "\n".join(f"{m.role}: {m.content}" for m in msgs)


def resolve_reference(
    ref: Ref | str,
    evidence: Evidence,
    case: CaseDef,
    context: GradeContext,
    *,
    checks: Mapping[str, Any] | None = None,
) -> Resolved:
    """Resolve one reference for this case execution. Never raises on data."""
    if isinstance(ref, str):
        try:
            ref = parse_reference(ref)
        except ReferenceSyntaxError as exc:
            return Resolved(state=REFERENCE_MISSING, message=str(exc))
    kind = ref.kind
    if kind == "final_output":
        v = evidence.final_output_value
        return Resolved(value=v if v is not None else "", _text=evidence.final_output)
    if kind == "literal":
        return Resolved(value=ref.name)
    if kind == "challenge_input":
        return Resolved(value=challenge_input_text(case.payload))
    if kind == "payload":
        found = walk(case.payload, ref.path)
        if found is MISSING or case.empty_case:
            return Resolved(
                state=REFERENCE_MISSING, message=f"{ref.text} does not resolve for case {case.case_key!r}"
            )
        return Resolved(value=found)
    if kind == "input":
        return _walk_resolved(_resolve_input(ref.name, case, context, 1, ref.text), ref.path, ref.text)
    if kind == "expectation":
        return _walk_resolved(_resolve_expectation(ref.name, case, context, ref.text), ref.path, ref.text)
    if kind == "artifact":
        return _resolve_artifact(ref, case, context)
    if kind == "file":
        check = (checks or {}).get(ref.name)
        if check is None:
            return Resolved(
                state=REFERENCE_MISSING, message=f"{ref.text}: no post_execution_check {ref.name!r}"
            )
        return resolve_file(check, evidence, context.working_directory)
    if kind == "tool_calls":
        if not evidence.channels.tool_calls:
            return Resolved(
                state=CHANNEL_UNAVAILABLE, message="no tool_calls channel: lane reports no tool calls"
            )
        return Resolved(value=observed_calls_json(evidence))
    if kind == "transcript_full":
        return Resolved(value=transcript_lines(evidence))
    if kind == "transcript_last_n":
        return Resolved(value=transcript_lines(evidence, ref.n))
    return Resolved(state=NOT_APPLICABLE, message=f"{ref.text} is multi-turn only; this run is single-turn")


# ---------------------------------------------------------------------------
# Evidence ids (grading.md §1.2)
# ---------------------------------------------------------------------------

_RANGE = re.compile(r"#(\d+)-(\d+)$")


def resolve_evidence_id(
    evidence_id: str,
    evidence: Evidence,
    case: CaseDef,
    context: GradeContext,
    extra_records: Mapping[str, str] | None = None,
    *,
    checks: Mapping[str, Any] | None = None,
    tasks: list[Any] | None = None,
) -> str | None:
    """The text an evidence id points at, or None when it does not resolve."""
    if not isinstance(evidence_id, str):
        return None
    eid = evidence_id.strip()
    span: tuple[int, int] | None = None
    m = _RANGE.search(eid)
    if m and not eid.startswith("literal:"):
        span = (int(m.group(1)), int(m.group(2)))
        eid = eid[: m.start()]
    text = _resolve_id_text(eid, evidence, case, context, extra_records or {}, checks, tasks)
    if text is None or span is None:
        return text
    start, end = span
    if start > end or end > len(text):
        return None
    return text[start:end]


def _index(s: str) -> int | None:
    return int(s) if s.isdigit() and s.isascii() else None


def _resolve_id_text(
    eid: str,
    evidence: Evidence,
    case: CaseDef,
    context: GradeContext,
    extra: Mapping[str, str],
    checks: Mapping[str, Any] | None,
    tasks: list[Any] | None,
) -> str | None:
    head, _, rest = eid.partition(":")
    if head == "message" and rest:
        i = _index(rest)
        return evidence.messages[i].content if i is not None and i < len(evidence.messages) else None
    if head == "tool_call" and rest:
        idx, _, part = rest.partition(".")
        i = _index(idx)
        if i is None or i >= len(evidence.tool_calls) or not evidence.channels.tool_calls:
            return None
        c = evidence.tool_calls[i]
        if part == "args":
            return canonical_json(c.args)
        if part == "result":
            return as_text(c.result) if c.result is not None else ""
        if part:
            return None
        return canonical_json(
            {"id": c.id, "name": c.name, "args": c.args, "result": c.result, "status": c.status}
        )
    if head == "path" and rest:
        entry = evidence.files.get(normalize_path(rest, context.working_directory))
        if entry is None:
            return None
        return (
            entry.content
            if entry.content is not None
            else (entry.content_bytes or b"").decode("utf-8", "replace")
        )
    if head == "task" and rest:
        idx, _, fld = rest.partition(".")
        i = _index(idx)
        if tasks is None:
            from .rules import derive_tasks  # local import: rules imports refs

            tasks = derive_tasks(evidence, context)
        if tasks is None or i is None or i >= len(tasks):
            return None
        t = tasks[i]
        if fld == "executed_commands":
            return "\n".join(t.executed_commands)
        if fld in ("description", "plan", "summary"):
            return getattr(t, fld)
        return None
    if head == "code" and rest:
        return extra.get(eid, extra.get(rest))
    if head == "note" and rest:
        i = _index(rest)
        lines = evidence.user_notes.splitlines()
        return lines[i - 1] if i is not None and 1 <= i <= len(lines) else None
    if head == "metric" and rest:
        v = metric_value(evidence, rest)
        return None if v is None else as_text(v)
    if eid in extra:
        return extra[eid]
    res = resolve_reference(eid, evidence, case, context, checks=checks)
    return res.text if res.ok else None


# ---------------------------------------------------------------------------
# Placeholders (pack-format §4.1, §8)
# ---------------------------------------------------------------------------

_PLACEHOLDER = re.compile(r"\{\{\s*([^{}\s]+)\s*\}\}")


def template_values(case: CaseDef) -> dict[str, Any]:
    values = dict(case.payload) if isinstance(case.payload, dict) else {}
    for i in case.inputs:
        if i.value is not MISSING:
            values[i.key] = i.value
    return values


def render_template(text: str, case: CaseDef, values: dict[str, Any] | None = None) -> str:
    """Render ``{{name}}`` / ``{{a.b}}`` from payload merged with input values (inputs win)."""
    if "{{" not in text:
        return text
    scope = template_values(case) if values is None else values

    def sub(m: re.Match[str]) -> str:
        name = m.group(1)
        found = scope.get(name, MISSING) if name in scope else walk(scope, tuple(name.split(".")))
        if found is MISSING:
            return m.group(0)
        return as_text(found)

    return _PLACEHOLDER.sub(sub, text)


ResolveFn = Callable[[str], Resolved]
