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

from grading.engine.types import Evidence, ToolCall, as_text

# A page shows at most this much of any one text; the rest stays in the export.
MAX_SHOWN_CHARS = 200_000
# The page shows the conversation's first TRANSCRIPT_HEAD and last TRANSCRIPT_TAIL items
# (messages and tool calls); the ones between load TRANSCRIPT_CHUNK at a time (htmx), by
# their position in the conversation. An agent with 20,000 tool calls made a page of many MB.
TRANSCRIPT_HEAD = 100
TRANSCRIPT_TAIL = 10
TRANSCRIPT_CHUNK = 200
# ... and fewer when their texts are long: a window ends after this many characters shown.
TRANSCRIPT_WINDOW_CHARS = 1_000_000
# The anchors of conversation items, the only ones the first page may leave out.
CONVERSATION_ANCHORS = ("ev-message-", "ev-tool_call-")


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


def _interleave(messages: list[Any], calls: list[Any]) -> list[Any]:
    tool_positions = [i for i, m in enumerate(messages) if m.role == "tool"]
    before: dict[int, list[Any]] = {}
    rest: list[Any] = []
    for n, call in enumerate(calls):
        if n < len(tool_positions):
            before.setdefault(tool_positions[n], []).append(call)
        else:
            rest.append(call)
    last_assistant = max((i for i, m in enumerate(messages) if m.role == "assistant"), default=None)
    if rest:
        at = last_assistant if last_assistant is not None else len(messages)
        before.setdefault(at, []).extend(rest)
    out: list[Any] = []
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


def _conversation(evidence: Evidence) -> list[Any]:
    """The evidence's messages and tool calls in display order (see the module docstring)."""
    calls = list(evidence.tool_calls) if evidence.channels.tool_calls else []
    return _interleave(list(evidence.messages), calls)


def _conversation_item(entry: Any, limit: int | None) -> TranscriptItem:
    return _call_item(entry, limit) if isinstance(entry, ToolCall) else _message_item(entry, limit)


def _after_conversation(evidence: Evidence, limit: int | None) -> list[TranscriptItem]:
    """Final output, files, tasks and notes: what follows the conversation."""
    items: list[TranscriptItem] = []
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
    items.extend(_file_items(evidence, limit))
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


def transcript_items(evidence: Evidence, *, limit: int | None = MAX_SHOWN_CHARS) -> list[TranscriptItem]:
    """Everything the transcript shows, in display order (see the module docstring); each
    text cut at ``limit`` characters (None: whole, for the Markdown download)."""
    items = [_conversation_item(entry, limit) for entry in _conversation(evidence)]
    return items + _after_conversation(evidence, limit)


@dataclass(slots=True)
class TranscriptWindow:
    """What one transcript page (or its htmx fragment) shows of the conversation: ``shown``
    from position ``start``, then ``hidden`` items from position ``more_from`` not shown
    (loaded on demand), then the last few (``tail``) and what follows the conversation."""

    start: int
    shown: list[TranscriptItem]
    more_from: int | None
    hidden: int
    tail: list[TranscriptItem]
    after: list[TranscriptItem]
    total: int


def _entry_anchor(entry: Any) -> str:
    return f"ev-tool_call-{entry.index}" if isinstance(entry, ToolCall) else f"ev-message-{entry.index}"


def transcript_window(
    evidence: Evidence,
    *,
    start: int = 0,
    count: int = TRANSCRIPT_HEAD,
    tail: int = TRANSCRIPT_TAIL,
    at: str | None = None,
) -> TranscriptWindow:
    """The conversation items at positions ``start`` .. ``start + count`` (never into the
    tail), the count of those between them and the tail, the tail and the rest. Only the
    items shown are built (pretty-printed, cut), not the thousands between.

    The window ends early once its texts reach ``TRANSCRIPT_WINDOW_CHARS``. ``at``, the
    anchor of a message or tool call (an evidence link), makes it hold that item: the first
    page does, else the window starts a couple of items before it."""
    order = _conversation(evidence)
    total = len(order)
    tail_from = max(total - tail, 0)
    reach = -1  # the window goes at least this far, whatever its texts' length
    if at and not start:
        position = next((n for n, entry in enumerate(order) if _entry_anchor(entry) == at), None)
        if position is not None and position < tail_from:
            if position >= count:
                start, count = max(position - 2, 0), TRANSCRIPT_CHUNK
            reach = position
    start = min(max(start, 0), tail_from)
    end = min(start + count, tail_from)
    if start == 0 and total <= count + tail:  # nothing worth hiding
        end = tail_from
    shown: list[TranscriptItem] = []
    size = 0
    for position in range(start, end):  # long texts end the window early: the page stays small
        if shown and size >= TRANSCRIPT_WINDOW_CHARS and position > reach:
            end = position
            break
        shown.append(_conversation_item(order[position], MAX_SHOWN_CHARS))
        size += len(shown[-1].text) + len(shown[-1].args) + len(shown[-1].result)
    hidden = tail_from - end
    return TranscriptWindow(
        start=start,
        shown=shown,
        more_from=end if hidden else None,
        hidden=hidden,
        tail=[_conversation_item(entry, MAX_SHOWN_CHARS) for entry in order[tail_from:]],
        after=_after_conversation(evidence, MAX_SHOWN_CHARS),
        total=total,
    )


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
