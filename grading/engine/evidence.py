"""The agent-protocol response shape into one ``Evidence`` record (grading.md §1.1).

``evidence_from_response`` is the single door: executors, trace imports and the offline
``grade`` command all build evidence here. What agent-protocol.md calls a config_error
(``final_output`` missing, ``invocations`` together with a non-empty top-level
``tool_calls``, wrong shapes) raises ``ProtocolError``; nothing else does.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import math
from collections.abc import Mapping
from typing import Any

from . import jsontext
from .types import (
    Channels,
    Evidence,
    FileEntry,
    Invocation,
    Message,
    Metrics,
    RenderedPrompt,
    Resolution,
    Task,
    Timing,
    ToolCall,
    as_text,
)

MAX_FILE_BYTES = 1024 * 1024
MAX_CASE_FILE_BYTES = 10 * 1024 * 1024
_ROLES = frozenset({"system", "user", "assistant", "tool"})
# grading.md §1.1: status is ok | error, default ok. Only an absent status or one saying the
# call succeeded is ok; any other value (error, failed, timeout, cancelled, denied...) is error,
# so a call that did not complete never counts as an observed (successful) call.
_OK_STATUSES = frozenset({"", "ok", "success", "succeeded", "successful", "completed"})


class ProtocolError(ValueError):
    """The response is not the protocol's shape (agent-protocol.md: config_error)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _text(value: Any) -> str:
    if value is None:
        return ""
    return as_text(value)


def _content_text(content: Any) -> str:
    """Message content: a string, or OpenAI-style parts whose text is joined."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, dict) for p in content):
        texts = [p.get("text") for p in content if isinstance(p.get("text"), str)]
        if texts or not content:
            return "".join(texts)
    return as_text(content)


def normalize_path(path: str, working_directory: str = "/workspace") -> str:
    """``\\`` to ``/``, the working directory and leading ``./`` removed (grading.md §1.1)."""
    p = path.replace("\\", "/")
    root = (working_directory or "").replace("\\", "/").rstrip("/")
    if root and (p == root or p.startswith(root + "/")):
        p = p[len(root) :].lstrip("/")
    while p.startswith("./"):
        p = p[2:].lstrip("/")
    while "//" in p:
        p = p.replace("//", "/")
    if p == ".":
        p = ""
    return p.rstrip("/") if len(p) > 1 else p


def _parse_args(raw: Any) -> tuple[dict[str, Any], Any]:
    """(args, unparsed original or None)."""
    if raw is None:
        return {}, None
    if isinstance(raw, dict):
        return raw, None
    if isinstance(raw, str):
        if not raw.strip():
            return {}, None
        try:
            parsed = jsontext.loads(raw)
        except ValueError:
            return {}, raw
        if isinstance(parsed, dict):
            return jsontext.bounded(parsed), None
        return {}, raw
    return {}, raw


def _tool_call(raw: Any, index: int, where: str) -> ToolCall:
    if not isinstance(raw, dict):
        raise ProtocolError(f"{where} must be an object")
    name = raw.get("name")
    if name is None and isinstance(raw.get("function"), dict):  # OpenAI-style call
        name = raw["function"].get("name")
        raw = {**raw, "args": raw["function"].get("arguments")}
    if not isinstance(name, str):
        raise ProtocolError(f"{where}.name must be a string")
    args_raw = raw["args"] if "args" in raw else raw.get("arguments")
    args, unparsed = _parse_args(args_raw)
    attributes = raw.get("attributes")
    if attributes is None:
        attributes = {}
    elif not isinstance(attributes, dict):
        raise ProtocolError(f"{where}.attributes must be an object")
    if unparsed is not None:
        attributes = {
            **attributes,
            "args_unparsed": unparsed if isinstance(unparsed, str) else as_text(unparsed),
        }
    status = raw.get("status")
    status = (
        "ok"
        if status is None or (isinstance(status, str) and status.strip().lower() in _OK_STATUSES)
        else "error"
    )
    call_id = raw.get("id")
    return ToolCall(
        index=index,
        name=name,
        args=args,
        id=None if call_id is None else str(call_id),
        result=raw.get("result"),
        status=status,
        started_at=_opt_str(raw.get("started_at")),
        ended_at=_opt_str(raw.get("ended_at")),
        attributes=attributes,
    )


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


def _list(response: Mapping[str, Any], key: str) -> list[Any] | None:
    value = response.get(key)
    if value is None:
        return None
    if not isinstance(value, list):
        raise ProtocolError(f"{key} must be an array")
    return value


def _messages(
    response: Mapping[str, Any], final_output: str, rendered: str, system: str | None
) -> list[Message]:
    raw = _list(response, "messages")
    if raw is None:
        out: list[Message] = []
        if system:
            out.append(Message(index=0, role="system", content=system))
        out.append(Message(index=len(out), role="user", content=rendered))
        if final_output:
            out.append(Message(index=len(out), role="assistant", content=final_output))
        return out
    out = []
    for i, m in enumerate(raw):
        if not isinstance(m, dict):
            raise ProtocolError(f"messages[{i}] must be an object")
        role = m.get("role")
        if not isinstance(role, str):
            raise ProtocolError(f"messages[{i}].role must be a string")
        role = role.strip().lower()
        if role not in _ROLES:
            role = {"developer": "system", "function": "tool", "model": "assistant"}.get(role, role)
        origin = m.get("origin") or "agent"
        if origin not in ("agent", "gateway"):
            raise ProtocolError(f"messages[{i}].origin must be agent or gateway")
        attributes = m.get("attributes") or {}
        if not isinstance(attributes, dict):
            raise ProtocolError(f"messages[{i}].attributes must be an object")
        out.append(
            Message(
                index=i,
                role=role,
                content=_content_text(m.get("content")),
                origin=origin,
                attributes=attributes,
            )
        )
    return out


def _invocations(
    response: Mapping[str, Any], final_output: str, tool_calls_on: bool
) -> tuple[list[Invocation], list[ToolCall]]:
    raw_invocations = _list(response, "invocations")
    raw_calls = _list(response, "tool_calls")
    calls: list[ToolCall] = []
    if raw_invocations is not None:
        if raw_calls:
            raise ProtocolError("tool_calls must be absent or empty when invocations are given")
        invocations: list[Invocation] = []
        for i, inv in enumerate(raw_invocations):
            if not isinstance(inv, dict):
                raise ProtocolError(f"invocations[{i}] must be an object")
            inv_calls = inv.get("tool_calls")
            if inv_calls is None:
                inv_calls = []
            if not isinstance(inv_calls, list):
                raise ProtocolError(f"invocations[{i}].tool_calls must be an array")
            indexes = []
            if tool_calls_on:
                for k, c in enumerate(inv_calls):
                    calls.append(_tool_call(c, len(calls), f"invocations[{i}].tool_calls[{k}]"))
                    indexes.append(len(calls) - 1)
            inv_id = inv.get("id")
            user_content = inv.get("user_content")
            final_response = inv.get("final_response")
            invocations.append(
                Invocation(
                    id=str(i) if inv_id is None or inv_id == "" else str(inv_id),
                    user_content=None if user_content is None else _content_text(user_content),
                    tool_call_indexes=indexes,
                    final_response=None if final_response is None else _text(final_response),
                )
            )
        return invocations, calls
    if tool_calls_on and raw_calls:
        for k, c in enumerate(raw_calls):
            calls.append(_tool_call(c, k, f"tool_calls[{k}]"))
    return [
        Invocation(id="0", tool_call_indexes=[c.index for c in calls], final_response=final_output)
    ], calls


def _file_bytes(path: str, value: Any) -> bytes:
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass")
    if isinstance(value, dict):
        if isinstance(value.get("content_base64"), str):
            try:
                return base64.b64decode(value["content_base64"], validate=True)
            except (binascii.Error, ValueError) as exc:
                raise ProtocolError(f"files[{path!r}].content_base64 is not valid base64") from exc
        if isinstance(value.get("content"), str):
            return value["content"].encode("utf-8", "surrogatepass")
    raise ProtocolError(f"files[{path!r}] must be text or an object with content_base64")


def _decode(data: bytes, cut: bool) -> str | None:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        # A cut may split the last character; anything else is binary.
        if cut and exc.start >= len(data) - 3:
            return data[: exc.start].decode("utf-8", "ignore")
        return None


def build_files(
    raw: Any, working_directory: str, *, max_file_bytes: int = MAX_FILE_BYTES
) -> dict[str, FileEntry]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ProtocolError("files must be an object of path -> content")
    files: dict[str, FileEntry] = {}
    budget = MAX_CASE_FILE_BYTES
    for path, value in raw.items():
        data = _file_bytes(str(path), value)
        key = normalize_path(str(path), working_directory)
        keep = min(len(data), max_file_bytes, budget)
        truncated = keep < len(data)
        kept = data[:keep]
        budget -= keep
        text = _decode(kept, truncated)
        files[key] = FileEntry(
            path=key,
            content=text,
            size=len(data),
            sha256=hashlib.sha256(data).hexdigest(),
            truncated=truncated,
            content_bytes=None if text is not None else kept,
        )
    return files


def _tasks(raw: Any) -> list[Task] | None:
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise ProtocolError("tasks must be an array")
    tasks = []
    for i, t in enumerate(raw):
        if not isinstance(t, dict):
            raise ProtocolError(f"tasks[{i}] must be an object")
        cmds = t.get("executed_commands") or []
        if isinstance(cmds, str):
            cmds = cmds.splitlines()
        if not isinstance(cmds, list):
            raise ProtocolError(f"tasks[{i}].executed_commands must be an array")
        tasks.append(
            Task(
                description=_text(t.get("description")),
                plan=_text(t.get("plan")),
                summary=_text(t.get("summary")),
                executed_commands=[_text(c) for c in cmds],
            )
        )
    return tasks


def _resolution(raw: Any) -> Resolution | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ProtocolError("resolution must be an object")

    def opt(k: str) -> str | None:
        v = raw.get(k)
        return None if v is None else _text(v)

    return Resolution(
        status=opt("status"), summary=opt("summary"), plan=opt("plan"), gateway_summary=opt("gateway_summary")
    )


# Reported metrics beyond these are not values a reply can have used: they are dropped (as if
# not reported), so the sums over a run stay finite and inside the 64-bit columns that hold
# them. A reply's numbers are anything JSON (and Python's json) allows: 1e400 reads as
# infinity, 10**30 as an integer no column holds; before, int(inf) raised, 10**30 failed the
# batch's write and a cost of 1e308 overflowed the run's scoring.
MAX_TOKEN_COUNT = 10**12
MAX_COST_USD = 1e9
MAX_MILLISECONDS = 1e10  # about 115 days


def _num(value: Any, integer: bool = False, *, limit: float = MAX_MILLISECONDS) -> Any:
    """A reported metric: a finite, non-negative number up to ``limit`` (from a number or
    numeric text), else None; ``integer``: a whole count up to ``MAX_TOKEN_COUNT``."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return None
    if not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if integer:
        if isinstance(value, float) and not value.is_integer():
            return None  # 1.9 tokens is not a count (it was cut to 1)
        count = int(value)
        return count if 0 <= count <= MAX_TOKEN_COUNT else None
    if not 0 <= value <= limit:
        return None
    return float(value)


def _metrics(response: Mapping[str, Any], timing: Timing) -> Metrics:
    raw = response.get("metrics") or {}
    if not isinstance(raw, dict):
        raise ProtocolError("metrics must be an object")
    usage: dict[str, Any] = response["usage"] if isinstance(response.get("usage"), dict) else {}
    m = Metrics(
        input_tokens=_num(raw.get("input_tokens", usage.get("prompt_tokens")), True),
        output_tokens=_num(raw.get("output_tokens", usage.get("completion_tokens")), True),
        total_tokens=_num(raw.get("total_tokens", usage.get("total_tokens")), True),
        cost_usd=_num(raw.get("cost_usd"), limit=MAX_COST_USD),
        latency_ms=_num(raw.get("latency_ms")),
        ttft_ms=_num(raw.get("ttft_ms")),
        model=None if raw.get("model") is None else str(raw.get("model")),
    )
    if m.total_tokens is None and (m.input_tokens is not None or m.output_tokens is not None):
        m.total_tokens = (m.input_tokens or 0) + (m.output_tokens or 0)
    if m.latency_ms is None and timing.executor_duration_seconds:
        m.latency_ms = timing.executor_duration_seconds * 1000.0
    return m


def _execution_error(value: Any) -> str | None:
    """The agent's report that it could not finish, or None: ``false`` and a blank text
    report nothing (agents write ``"execution_error": false``); anything else is the
    report, as text."""
    if value is None or value is False or (isinstance(value, str) and not value.strip()):
        return None
    return _text(value)


def _timing(timing: Any) -> Timing:
    if timing is None:
        return Timing()
    if isinstance(timing, Timing):
        return timing
    if isinstance(timing, dict):
        return Timing(
            started_at=_opt_str(timing.get("started_at")),
            ended_at=_opt_str(timing.get("ended_at")),
            executor_duration_seconds=float(timing.get("executor_duration_seconds") or 0.0),
        )
    raise TypeError("timing must be a Timing or a dict")


def evidence_from_response(
    response: dict[str, Any],
    *,
    deployment_kind: str = "hosted_http",
    evidence_level: str = "structured",
    rendered_instructions: str = "",
    system_prompt: str | None = None,
    tool_policy: dict[str, Any] | None = None,
    working_directory: str = "/workspace",
    timing: Timing | dict[str, Any] | None = None,
) -> Evidence:
    """Build the evidence of one case execution from the agent's response body."""
    if not isinstance(response, Mapping):
        raise ProtocolError("the response must be a JSON object")
    response = jsontext.bounded(response)  # as deep as evidence keeps, NaN as null (jsontext)
    if "final_output" not in response:
        raise ProtocolError("final_output is required")
    black_box = evidence_level == "black_box"
    channels = Channels(
        tool_calls=not black_box,
        files=not black_box and deployment_kind != "openai_chat",
        tasks=not black_box,
        user_notes=not black_box,
    )
    value = response["final_output"]
    final_output = "" if value is None else as_text(value)
    t = _timing(timing)
    invocations, calls = _invocations(response, final_output, channels.tool_calls)
    files = build_files(response.get("files"), working_directory) if channels.files else {}
    notes = response.get("user_notes") if channels.user_notes else None
    if notes is not None and not isinstance(notes, str):
        raise ProtocolError("user_notes must be a string")
    limit_hit = response.get("limit_hit", False)
    if not isinstance(limit_hit, bool) and limit_hit is not None:
        raise ProtocolError("limit_hit must be a boolean")
    return Evidence(
        final_output=final_output,
        final_output_value="" if value is None else value,
        messages=_messages(response, final_output, rendered_instructions, system_prompt),
        invocations=invocations,
        tool_calls=calls,
        files=files,
        tasks=_tasks(response.get("tasks")) if channels.tasks else None,
        resolution=_resolution(response.get("resolution")),
        user_notes=notes or "",
        metrics=_metrics(response, t),
        timing=t,
        rendered_prompt=RenderedPrompt(
            system=system_prompt, instructions=rendered_instructions, tool_policy=dict(tool_policy or {})
        ),
        channels=channels,
        execution_error=_execution_error(response.get("execution_error")),
        limit_hit=bool(limit_hit),
        attempt_ok=True,
        raw=dict(response),
    )


# ---------------------------------------------------------------------------
# Derived metrics (grading.md §1.1 "metrics", §7 execution_metrics)
# ---------------------------------------------------------------------------


def tool_call_counts(evidence: Evidence) -> dict[str, int]:
    counts: dict[str, int] = {}
    for c in evidence.tool_calls:
        counts[c.name] = counts.get(c.name, 0) + 1
    return counts


def failed_call_count(evidence: Evidence) -> int:
    return sum(1 for c in evidence.tool_calls if c.status != "ok")


def run_completed_successfully(evidence: Evidence) -> int:
    return int(evidence.attempt_ok and evidence.execution_error is None and not evidence.limit_hit)


def run_failure_count(evidence: Evidence) -> int:
    return failed_call_count(evidence) + (1 if evidence.execution_error is not None else 0)


def total_steps(evidence: Evidence) -> int:
    steps = sum(1 for m in evidence.messages if m.role == "assistant")
    return steps if steps else len(evidence.invocations)


def metric_value(evidence: Evidence, name: str) -> Any:
    """A named metric of this case (``metric:<name>`` ids and run_* collectors)."""
    m = evidence.metrics
    table: dict[str, Any] = {
        "input_tokens": m.input_tokens,
        "output_tokens": m.output_tokens,
        "total_tokens": m.total_tokens,
        "cost_usd": m.cost_usd,
        "latency_ms": m.latency_ms,
        "ttft_ms": m.ttft_ms,
        "model": m.model,
    }
    if name in table:
        return table[name]
    if name == "tool_calls" or name == "total_tool_calls":
        return len(evidence.tool_calls)
    if name == "failed_tool_calls":
        return failed_call_count(evidence)
    if name == "steps" or name == "total_steps":
        return total_steps(evidence)
    if name == "run_completed_successfully":
        return run_completed_successfully(evidence)
    if name == "run_failure_count":
        return run_failure_count(evidence)
    if name.startswith("tool_calls."):
        return tool_call_counts(evidence).get(name[len("tool_calls.") :], 0)
    return None
