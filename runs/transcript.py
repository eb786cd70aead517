"""Transcript display: an ``Evidence`` record as an ordered list of items with stable anchors.

Every item carries the evidence id of grading.md §1.2 (``message:3``, ``tool_call:1``,
``path:src/app.py``, ``note:2``, ``task:0``, ``final_output``) and an HTML anchor derived
from it by :func:`anchor_for`. Expectations, claims and judge citations cite evidence ids;
the case page links them with the same function, so a link always lands on its item.

Order: messages in their reported order. Tool calls have no position among messages, so
they are placed where the agent made them as far as the transcript tells: the i-th call
just before the i-th ``tool`` message (a tool result follows its call), and calls without
such a message before the last assistant message (the agent worked, then answered).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from grading.engine.types import Evidence, as_text

# A page shows at most this much of any one text; the rest stays in the export.
MAX_SHOWN_CHARS = 200_000


@dataclass(slots=True)
class TranscriptItem:
    kind: str  # message | tool_call | final_output | file | note | task | metrics
    evidence_id: str
    anchor: str
    title: str
    text: str = ""
    role: str = ""
    origin: str = ""
    status: str = ""
    args: str = ""  # pretty JSON
    result: str = ""
    truncated: bool = False  # cut here for display, or captured truncated
    cut: bool = False  # cut here for display: ``chars`` is the whole text's length
    chars: int = 0
    binary: bool = False
    meta: dict[str, Any] = field(default_factory=dict)


def _escape_id_part(text: str) -> str:
    out = []
    for ch in text:
        if ch.isascii() and (ch.isalnum() or ch in "-"):
            out.append(ch)
        else:
            out.append("_" + format(ord(ch), "x") + "_")
    return "".join(out)


def _without_range(eid: str) -> str:
    """``message:3#4-9`` -> ``message:3`` (a code-point range inside the item)."""
    base, sep, span = eid.rpartition("#")
    start, dash, end = span.partition("-")
    if sep and dash and start.isdigit() and end.isdigit():
        return base
    return eid


def anchor_for(evidence_id: str) -> str | None:
    """The HTML id of the transcript item an evidence id points into, or None when the id
    names something the transcript does not show (case data, ``code:`` records, literals)."""
    if not isinstance(evidence_id, str):
        return None
    eid = evidence_id.strip()
    if "/" in eid.split(":", 1)[0]:  # n_wise lane label: "B/final_output"
        eid = eid.split("/", 1)[1]
    if not eid.startswith("literal:"):
        eid = _without_range(eid)
    head, _, rest = eid.partition(":")
    if head in ("final_output", "run.final_output") and not rest:
        return "ev-final_output"
    if head in ("message", "tool_call", "task") and rest:
        index = rest.split(".", 1)[0]
        return f"ev-{head}-{index}" if index.isdigit() and index.isascii() else None
    if head == "path" and rest:
        return "ev-path-" + _escape_id_part(rest.lstrip("./"))
    if head == "note" and rest.isdigit():
        return f"ev-note-{rest}"
    if head == "metric" and rest:
        return "ev-metrics"
    if head in ("tool_calls", "transcript.full") or head.startswith("transcript.last_n"):
        return "ev-top"
    return None


def _pretty(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        return as_text(value)


def _cut(text: str, limit: int | None = MAX_SHOWN_CHARS) -> tuple[str, bool]:
    if limit is not None and len(text) > limit:
        return text[:limit], True
    return text, False


def _message_item(m: Any, limit: int | None = MAX_SHOWN_CHARS) -> TranscriptItem:
    text, cut = _cut(m.content, limit)
    return TranscriptItem(
        kind="message",
        evidence_id=f"message:{m.index}",
        anchor=f"ev-message-{m.index}",
        title=f"{m.role}" + (" (gateway)" if m.origin == "gateway" else ""),
        text=text,
        role=m.role,
        origin=m.origin,
        truncated=cut,
        cut=cut,
        chars=len(m.content),
    )


def _call_item(c: Any, limit: int | None = MAX_SHOWN_CHARS) -> TranscriptItem:
    full = _pretty(c.result)
    result, cut = _cut(full, limit)
    full_args = _pretty(c.args)
    args, args_cut = _cut(full_args, limit)
    return TranscriptItem(
        kind="tool_call",
        evidence_id=f"tool_call:{c.index}",
        anchor=f"ev-tool_call-{c.index}",
        title=c.name,
        status=c.status,
        args=args,
        result=result,
        truncated=cut or args_cut,
        cut=cut or args_cut,
        chars=max(len(full), len(full_args)),  # the longer text, the one cut
        meta={"id": c.id, "started_at": c.started_at, "ended_at": c.ended_at},
    )


def _interleave(messages: list[TranscriptItem], calls: list[TranscriptItem]) -> list[TranscriptItem]:
    tool_positions = [i for i, m in enumerate(messages) if m.role == "tool"]
    before: dict[int, list[TranscriptItem]] = {}
    rest: list[TranscriptItem] = []
    for n, call in enumerate(calls):
        if n < len(tool_positions):
            before.setdefault(tool_positions[n], []).append(call)
        else:
            rest.append(call)
    last_assistant = max((i for i, m in enumerate(messages) if m.role == "assistant"), default=None)
    if rest:
        at = last_assistant if last_assistant is not None else len(messages)
        before.setdefault(at, []).extend(rest)
    out: list[TranscriptItem] = []
    for i, m in enumerate(messages):
        out.extend(before.pop(i, []))
        out.append(m)
    for leftover in before.values():
        out.extend(leftover)
    return out


def _file_items(evidence: Evidence, limit: int | None = MAX_SHOWN_CHARS) -> Iterable[TranscriptItem]:
    for path in sorted(evidence.files):
        entry = evidence.files[path]
        binary = entry.content is None
        text, cut = _cut(entry.content or "", limit)
        yield TranscriptItem(
            kind="file",
            evidence_id=f"path:{path}",
            anchor="ev-path-" + _escape_id_part(path.lstrip("./")),
            title=path,
            text=text,
            truncated=cut or entry.truncated,
            cut=cut,
            chars=len(entry.content or ""),
            binary=binary,
            meta={"size": entry.size, "sha256": entry.sha256, "captured_truncated": entry.truncated},
        )


def transcript_items(evidence: Evidence, *, limit: int | None = MAX_SHOWN_CHARS) -> list[TranscriptItem]:
    """Everything the transcript page shows, in display order (see the module docstring);
    each text cut at ``limit`` characters (None: whole, for the Markdown download)."""
    messages = [_message_item(m, limit) for m in evidence.messages]
    calls = [_call_item(c, limit) for c in evidence.tool_calls] if evidence.channels.tool_calls else []
    items = _interleave(messages, calls)
    final, cut = _cut(evidence.final_output, limit)
    items.append(
        TranscriptItem(
            kind="final_output",
            evidence_id="final_output",
            anchor="ev-final_output",
            title="Final output",
            text=final,
            truncated=cut,
            cut=cut,
            chars=len(evidence.final_output),
        )
    )
    items.extend(_file_items(evidence))
    for i, task in enumerate(evidence.tasks or []):
        commands = "\n".join(task.executed_commands)
        text, cut = _cut(commands, limit)
        items.append(
            TranscriptItem(
                kind="task",
                evidence_id=f"task:{i}",
                anchor=f"ev-task-{i}",
                title=task.description or f"Task {i}",
                text=text,
                truncated=cut,
                cut=cut,
                chars=len(commands),
                meta={"plan": task.plan, "summary": task.summary},
            )
        )
    for n, line in enumerate(evidence.user_notes.splitlines(), start=1):
        text, cut = _cut(line, limit)
        items.append(
            TranscriptItem(
                kind="note",
                evidence_id=f"note:{n}",
                anchor=f"ev-note-{n}",
                title=f"Note line {n}",
                text=text,
                truncated=cut,
                cut=cut,
                chars=len(line),
            )
        )
    return items


def _fence(text: str) -> str:
    ticks = "```"
    while ticks in text:
        ticks += "`"
    return f"{ticks}\n{text}\n{ticks}"


def transcript_markdown(items: Iterable[TranscriptItem]) -> str:
    """The transcript as Markdown, for "copy as Markdown"."""
    out: list[str] = []
    for item in items:
        if item.kind == "message":
            out.append(f"**{item.title}** (`{item.evidence_id}`)\n\n{item.text}")
        elif item.kind == "tool_call":
            block = f"**tool call `{item.title}`** ({item.status}, `{item.evidence_id}`)\n\nargs:\n{_fence(item.args)}"
            if item.result:
                block += f"\n\nresult:\n{_fence(item.result)}"
            out.append(block)
        elif item.kind == "final_output":
            out.append(f"**Final output**\n\n{item.text}")
        elif item.kind == "file":
            body = "(binary file)" if item.binary else _fence(item.text)
            out.append(f"**File `{item.title}`**\n\n{body}")
        elif item.kind == "task":
            out.append(f"**Task: {item.title}**\n\n{_fence(item.text)}")
        elif item.kind == "note":
            out.append(f"> {item.text}")
    return "\n\n".join(out) + "\n"
