"""Trace import: results uploaded to a run (``POST .../runs/{id}/results``).

Input is JSONL in the agent-protocol response shape (one line per case execution, with
``case_key``, optional ``challenge_key``, ``deployment`` and ``repetition``), or OTLP JSON
(``{"resourceSpans": [...]}``) whose traces are converted to the same shape (routing
attributes ``agentclash.case_key`` / ``challenge_key`` / ``deployment`` / ``repetition`` on the
resource or the root span; tool calls from ``execute_tool`` spans and ``gen_ai.tool.*``
attributes; messages and the answer from ``gen_ai.input.messages`` / ``gen_ai.output.messages``
of the root span, else of the last span that has output messages, as GenAI instrumentations
put them on inference spans; token usage from the root span, else summed over the others; the
root span's duration as the latency). The document may also come as OTLP JSON Lines (one
``ExportTraceServiceRequest`` a line, as the Collector's file exporter writes). An OTLP
document whose structure is not OTLP (a list where an object belongs, a time that is not a
number, ...) is refused whole with :class:`OtlpError`, which names the place
(``resourceSpans[0].scopeSpans``).

Each line is checked with the engine's results reader (``grading.engine.reader``) and then
matched to a pending item of a ``trace_import`` lane of the run by deployment, challenge,
case and repetition. An upload is all or nothing, like the offline ``grade`` command: when
any line is bad, nothing is graded or stored and every bad line is counted, the first
``MAX_LISTED`` reported with its number and the reason (the caller fixes the file and sends all of it again). Otherwise every line is
graded (outside any transaction: a judge may be called) into a temporary file, a batch at a
time, and the batches are recorded from it in one transaction
(``runs.recording.record_results``, one call per lane and batch): the upload holds one batch
of lines and grades at a time, whatever its size. The run completes when every item has a
result (or when it is cancelled by hand).
"""

from __future__ import annotations

import dataclasses
import heapq
import json
import pickle
import re
import struct
import tempfile
import zlib
from array import array
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import IO, Any

import orjson
from django.db import transaction
from django.utils import timezone

from grading.engine import jsontext
from grading.engine.reader import (
    DEFAULT_DEPLOYMENT,
    Execution,
    ResultsReader,
    ResultsTooLarge,
    evidence_of,
    gunzipped,
    iter_lines,
)
from runs.executors.base import AttemptCategory, AttemptOutcome
from runs.models import (
    DeploymentKind,
    ItemState,
    LaneStatus,
    Run,
    RunItem,
    RunLane,
    RunStatus,
)
from runs.recording import ItemKey, ItemResult, grade_outcomes
from runs.services.runs import RunError
from runs.states import transition_lane, transition_run
from runs.storable import storable_json

MAX_RESULTS_BYTES = 64 * 1024 * 1024
TOO_LARGE = (
    f"results are limited to {MAX_RESULTS_BYTES // (1024 * 1024)} MB per upload{{what}}: split the file into several uploads (each is "
    "all or nothing on its own)"
)
# Content-Encoding values an upload may carry: a gzip body is inflated (it is recognised by its
# bytes, with or without the header).
READ_ENCODINGS = ("", "identity", "gzip", "x-gzip")
# Uploaded lines graded per loaded batch of cases (below the per-process case cache's 4,096).
GRADE_BATCH = 500


# The byte order marks of a file written in UTF-16 or UTF-32 (Windows PowerShell's ``>``
# writes UTF-16): named, where each line would be a bad line 'not UTF-8 text'.
WIDE_BOMS = (
    (b"\xff\xfe\x00\x00", "UTF-32"),
    (b"\x00\x00\xfe\xff", "UTF-32"),
    (b"\xff\xfe", "UTF-16"),
    (b"\xfe\xff", "UTF-16"),
)

# Bad lines an upload lists (the first, by line); all of them are counted. Listing every one
# held ~330 bytes a line and answered with ~80 a line: 64 MB of one-byte lines, ~10 GB.
MAX_LISTED = 1000


class BadLines:
    """The bad lines of an upload as they are found (not always in line order): every one
    counted, the ``MAX_LISTED`` of the lowest numbers kept."""

    def __init__(self) -> None:
        self.count = 0
        self._kept: list[tuple[int, int, dict[str, Any]]] = []  # a max-heap: (-line, -seq, bad)

    def append(self, bad: dict[str, Any]) -> None:
        self.count += 1
        entry = (-bad["line"], -self.count, bad)
        if len(self._kept) < MAX_LISTED:
            heapq.heappush(self._kept, entry)
        elif entry > self._kept[0]:  # a lower line than the highest kept
            heapq.heapreplace(self._kept, entry)

    def __bool__(self) -> bool:
        return self.count > 0

    def listed(self) -> list[dict[str, Any]]:
        """The kept bad lines, by line (found order within a line)."""
        return [bad for _, _, bad in sorted(self._kept, reverse=True)]


@dataclass
class ImportOutcome:
    """``accepted`` results were stored, or none were and ``bad_lines`` says why (the first
    ``MAX_LISTED`` bad lines; ``bad_count`` counts them all)."""

    accepted: int = 0
    bad_lines: list[dict[str, Any]] = field(default_factory=list)
    bad_count: int = 0

    def error_body(self) -> dict[str, Any]:
        """The 400 body: grade's ``invalid_results`` error (interfaces.md §5), saying that
        nothing was stored."""
        count = max(self.bad_count, len(self.bad_lines))
        some = f" (the first {len(self.bad_lines)} listed)" if count > len(self.bad_lines) else ""
        return {
            "error": {
                "code": "invalid_results",
                "message": f"{count} bad result lines{some}; nothing was stored: "
                "fix every listed line and send the whole upload again",
                "lines": self.bad_lines,
            }
        }


# --- OTLP JSON -> response-shaped lines --------------------------------------------------
#
# OTLP/JSON is the Protobuf JSON encoding of ``ExportTraceServiceRequest``: a null field is
# the field's default (absent), 64-bit integers may be strings. Every value read is checked
# for its type here, so a document of the wrong shape is one clear error, never a 500.

# arrayValue / kvlistValue nesting allowed in an attribute (each level is three JSON levels).
MAX_VALUE_DEPTH = 64


class OtlpError(ValueError):
    """The OTLP document has the wrong shape at ``path`` (e.g. ``resourceSpans[0].scopeSpans``)."""

    def __init__(self, path: str, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"{path}: {problem}")


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object"


def _list(value: Any, path: str) -> list[Any]:
    """A list field (null or absent: empty)."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise OtlpError(path, f"must be a list, got {_kind(value)}")
    return value


def _object(value: Any, path: str, *, element: bool = False) -> Mapping[str, Any]:
    """An object field (null or absent: empty); a list ``element`` may not be null."""
    if value is None and not element:
        return {}
    if not isinstance(value, Mapping):
        raise OtlpError(path, f"must be an object, got {_kind(value)}")
    return value


def _string(value: Any, path: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise OtlpError(path, f"must be a string, got {_kind(value)}")
    return value


def _integer(value: Any, path: str) -> int:
    """A 64-bit integer field: a JSON number or a string of digits (null or absent: 0)."""
    if value is None:
        return 0
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise OtlpError(path, f"must be an integer or a string of digits, got {json.dumps(value)[:60]}")


def _double(value: Any, path: str) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):  # "NaN", "Infinity", "-Infinity" or a number as text
        try:
            return float(value)
        except ValueError:
            pass
    raise OtlpError(path, f"must be a number, got {json.dumps(value)[:60]}")


def _attr_value(value: Any, path: str, depth: int = 0) -> Any:
    """The Python value of an ``AnyValue``; None when it holds none."""
    value = _object(value, path)
    if depth > MAX_VALUE_DEPTH:
        raise OtlpError(path, f"arrayValue / kvlistValue nested more than {MAX_VALUE_DEPTH} levels deep")
    for key in ("stringValue", "bytesValue"):
        if value.get(key) is not None:
            return _string(value[key], f"{path}.{key}")
    if value.get("boolValue") is not None:
        if not isinstance(value["boolValue"], bool):
            raise OtlpError(f"{path}.boolValue", f"must be true or false, got {_kind(value['boolValue'])}")
        return value["boolValue"]
    if value.get("intValue") is not None:
        return _integer(value["intValue"], f"{path}.intValue")
    if value.get("doubleValue") is not None:
        return _double(value["doubleValue"], f"{path}.doubleValue")
    if value.get("arrayValue") is not None:
        at = f"{path}.arrayValue"
        values = _list(_object(value["arrayValue"], at).get("values"), f"{at}.values")
        return [_attr_value(v, f"{at}.values[{i}]", depth + 1) for i, v in enumerate(values)]
    if value.get("kvlistValue") is not None:
        at = f"{path}.kvlistValue"
        return _attrs(_object(value["kvlistValue"], at).get("values"), f"{at}.values", depth + 1)
    return None


def _attrs(items: Any, path: str, depth: int = 0) -> dict[str, Any]:
    """A ``KeyValue`` list as a dict."""
    out: dict[str, Any] = {}
    for i, item in enumerate(_list(items, path)):
        at = f"{path}[{i}]"
        item = _object(item, at, element=True)
        key = item.get("key")
        if not isinstance(key, str):
            raise OtlpError(f"{at}.key", f"must be a string, got {_kind(key)}")
        out[key] = _attr_value(item.get("value"), f"{at}.value", depth)
    return out


@dataclass(slots=True)
class _Span:
    trace_id: str
    parent_id: str
    name: str
    start: int
    end: int
    attrs: dict[str, Any]
    status_code: Any


def _span(span: Any, path: str) -> _Span:
    span = _object(span, path, element=True)
    status = _object(span.get("status"), f"{path}.status")
    code = status.get("code")
    if code is not None and (isinstance(code, bool) or not isinstance(code, (int, str))):
        raise OtlpError(f"{path}.status.code", f"must be a number or a status name, got {_kind(code)}")
    return _Span(
        trace_id=_string(span.get("traceId"), f"{path}.traceId"),
        parent_id=_string(span.get("parentSpanId"), f"{path}.parentSpanId"),
        name=_string(span.get("name"), f"{path}.name"),
        start=_integer(span.get("startTimeUnixNano") or None, f"{path}.startTimeUnixNano"),
        end=_integer(span.get("endTimeUnixNano") or None, f"{path}.endTimeUnixNano"),
        attrs=_attrs(span.get("attributes"), f"{path}.attributes"),
        status_code=code,
    )


_Traces = dict[str, tuple[dict[str, Any], list[_Span]]]


def _traces(document: Mapping[str, Any], traces: _Traces | None = None) -> _Traces:
    """The document's spans by trace id (in order of appearance), each trace with the
    attributes of the resource of its first span, added to ``traces`` (the spans of the
    documents read before, in OTLP JSON Lines: a trace may go on in a later document);
    :class:`OtlpError` on a wrong shape."""
    if traces is None:
        traces = {}
    for r, resource_spans in enumerate(_list(document.get("resourceSpans"), "resourceSpans")):
        at = f"resourceSpans[{r}]"
        resource_spans = _object(resource_spans, at, element=True)
        resource = _object(resource_spans.get("resource"), f"{at}.resource")
        resource_attrs = _attrs(resource.get("attributes"), f"{at}.resource.attributes")
        for s, scope in enumerate(_list(resource_spans.get("scopeSpans"), f"{at}.scopeSpans")):
            scope_at = f"{at}.scopeSpans[{s}]"
            scope = _object(scope, scope_at, element=True)
            for n, raw in enumerate(_list(scope.get("spans"), f"{scope_at}.spans")):
                span = _span(raw, f"{scope_at}.spans[{n}]")
                traces.setdefault(span.trace_id, (resource_attrs, []))[1].append(span)
    return traces


def _json_attr(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return jsontext.loads(value)
        except ValueError:
            return value
    return value


def _message_list(value: Any) -> list[dict[str, Any]]:
    value = _json_attr(value)
    out = []
    for m in value if isinstance(value, list) else []:
        if not isinstance(m, Mapping):
            continue
        content = m.get("content")
        if content is None and isinstance(m.get("parts"), list):
            content = "".join(str(p.get("content", "")) for p in m["parts"] if isinstance(p, Mapping))
        out.append(
            {"role": str(m.get("role") or "assistant"), "content": content if content is not None else ""}
        )
    return out


def _tool_call(span: _Span) -> dict[str, Any] | None:
    attrs = span.attrs
    if attrs.get("gen_ai.operation.name") != "execute_tool" and not span.name.startswith("execute_tool"):
        return None
    name = attrs.get("gen_ai.tool.name") or span.name.removeprefix("execute_tool").strip()
    call: dict[str, Any] = {"name": name, "args": _json_attr(attrs.get("gen_ai.tool.call.arguments") or {})}
    if attrs.get("gen_ai.tool.call.id"):
        call["id"] = attrs["gen_ai.tool.call.id"]
    if "gen_ai.tool.call.result" in attrs:
        call["result"] = _json_attr(attrs["gen_ai.tool.call.result"])
    if span.status_code in (2, "STATUS_CODE_ERROR"):
        call["status"] = "error"
    return call


def _trace_line(
    resource: dict[str, Any], spans: list[_Span], label: str
) -> tuple[dict[str, Any] | None, str]:
    roots = [s for s in spans if not s.parent_id]
    root = roots[0] if roots else spans[0]
    root_attrs = root.attrs
    routing = {**resource, **root_attrs}
    line: dict[str, Any] = {}
    for name in ("case_key", "challenge_key", "deployment", "repetition"):
        value = routing.get(f"agentclash.{name}")
        if value is not None:
            line[name] = value
    in_order = sorted(spans, key=lambda s: s.start)
    tool_calls = [c for c in (_tool_call(s) for s in in_order) if c is not None]
    # The answer and the transcript: the root span's, else those of the last span that has
    # output messages (an inference span: GenAI instrumentations put them there, the
    # conversation so far as its input).
    said_by = root_attrs
    if root_attrs.get("gen_ai.output.messages") is None:
        said_by = next(
            (s.attrs for s in reversed(in_order) if "gen_ai.output.messages" in s.attrs), root_attrs
        )
    outputs = _message_list(said_by.get("gen_ai.output.messages"))
    messages = _message_list(said_by.get("gen_ai.input.messages")) + outputs
    final = root_attrs.get("agentclash.final_output")
    if final is None:
        said = [m for m in outputs if m["role"] == "assistant"]
        if said:
            final = said[-1]["content"]
    if final is None:
        return None, f"{label}: no final output (set agentclash.final_output or gen_ai.output.messages)"
    line["final_output"] = final
    if messages:
        line["messages"] = messages
    if tool_calls:
        line["tool_calls"] = tool_calls
    line.update(_trace_metrics(root, in_order))
    return line, label


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _trace_metrics(root: _Span, in_order: list[_Span]) -> dict[str, Any]:
    """``{"metrics": ...}`` of a trace, or nothing: the token usage the root span reports, else
    the sum of what the other spans report (inference spans); the model of the root span, else
    of the last span naming one; the latency is the root span's duration."""
    metrics: dict[str, Any] = {}
    others = [s for s in in_order if s is not root]
    usage = (("input_tokens", "gen_ai.usage.input_tokens"), ("output_tokens", "gen_ai.usage.output_tokens"))
    counted = [root] if any(_count(root.attrs.get(theirs)) is not None for _, theirs in usage) else others
    for ours, theirs in usage:
        counts = [c for c in (_count(s.attrs.get(theirs)) for s in counted) if c is not None]
        if counts:
            metrics[ours] = sum(counts)
    for attrs in (root.attrs, *(s.attrs for s in reversed(others))):
        model = attrs.get("gen_ai.response.model") or attrs.get("gen_ai.request.model")
        if model:
            metrics["model"] = model
            break
    if 0 < root.start <= root.end:
        metrics["latency_ms"] = (root.end - root.start) / 1_000_000
    return {"metrics": metrics} if metrics else {}


def otlp_to_lines(document: Mapping[str, Any]) -> list[tuple[dict[str, Any] | None, str]]:
    """One response-shaped dict per trace, in order of appearance, with a label for errors
    (``trace <id>``); ``None`` with a message when a trace cannot be converted.

    Raises :class:`OtlpError` (naming the place) when the document is not shaped as OTLP."""
    return _converted(_traces(document))


def _converted(traces: _Traces) -> list[tuple[dict[str, Any] | None, str]]:
    out: list[tuple[dict[str, Any] | None, str]] = []
    for trace_id, (resource, spans) in traces.items():
        label = f"trace {trace_id or '(no traceId)'}"
        try:
            out.append(_trace_line(resource, spans, label))
        except RecursionError:  # str() of a message part parsed from very deep JSON text
            out.append((None, f"{label}: an attribute is nested too deeply to read"))
    return out


# --- the import ---------------------------------------------------------------------------


OTLP_FIX = (
    "send the OTLP/JSON encoding of ExportTraceServiceRequest (one document, or one a line as "
    "the OpenTelemetry Collector's file exporter writes them), or JSONL of agent responses"
)


# An OTLP document's start: its one key first.
OTLP_START = re.compile(rb'\{\s*"resourceSpans"\s*:')


def _is_otlp(document: Any) -> bool:
    return isinstance(document, Mapping) and "resourceSpans" in document


def _otlp_json_lines(data: bytes) -> _Traces:
    """The traces of OTLP JSON Lines (an ``ExportTraceServiceRequest`` a line; blank lines
    skipped), a trace's spans gathered from every line; a :class:`RunError` naming the first
    line that is not such a document, or not shaped as OTLP."""
    traces: _Traces = {}
    for number, raw in iter_lines(data):
        if not raw.strip():
            continue
        try:
            document = jsontext.loads(raw)
        except ValueError as exc:
            raise RunError(
                "parse_error", f"line {number}: not JSON ({exc}); {OTLP_FIX}", field=f"line {number}"
            ) from None
        if not _is_otlp(document):
            raise RunError(
                "parse_error",
                f"line {number}: not an OTLP JSON document (no resourceSpans), while line 1 is "
                f"one: {OTLP_FIX}",
                field=f"line {number}",
            )
        try:
            _traces(document, traces)
        except OtlpError as exc:
            raise RunError(
                "parse_error", f"line {number}: {exc.path} {exc.problem}; {OTLP_FIX}", field=exc.path
            ) from None
    return traces


def _otlp_lines(
    convert: Callable[[], list[tuple[dict[str, Any] | None, str]]],
) -> list[tuple[int, bytes | None, str]]:
    """The numbered response-shaped lines ``convert`` makes of an OTLP document."""
    try:
        converted = convert()
    except OtlpError as exc:
        raise RunError(
            "parse_error",
            f"the body is OTLP JSON (it has resourceSpans) but {exc.path} {exc.problem}; {OTLP_FIX}",
            field=exc.path,
        ) from None
    out: list[tuple[int, bytes | None, str]] = []
    for i, (line, problem) in enumerate(converted, start=1):
        if line is None:
            out.append((i, None, problem))
            continue
        try:
            out.append((i, json.dumps(line).encode(), problem))
        except RecursionError:
            out.append((i, None, f"{problem}: an attribute is nested too deeply to read"))
    return out


LineSource = Callable[[], Iterator[tuple[int, bytes | None, str]]]


def _lines(data: bytes) -> LineSource:
    """What gives (line number, JSONL bytes or None, label or problem) per result line of
    JSONL or OTLP JSON, afresh at each call (the import reads the lines twice): an OTLP
    trace's label (``trace <id>``), or its problem when it has no line. JSONL lines are
    sliced from ``data`` one at a time; an OTLP document is parsed whole, so its converted
    lines are kept (their size is the document's)."""
    stripped = data.removeprefix(b"\xef\xbb\xbf").lstrip()  # a UTF-8 BOM before an OTLP document
    if stripped.startswith(b"{") and b"resourceSpans" in stripped[:4096]:
        try:
            document = jsontext.loads(stripped)
        except ValueError as exc:
            document = None
            problem = exc
        if _is_otlp(document):
            converted = _otlp_lines(lambda: otlp_to_lines(document))
            del document
            return lambda: iter(converted)
        if document is None and b"\n" in stripped.rstrip():  # OTLP JSON Lines, when its first is
            first = next(iter_lines(stripped))[1]
            try:
                first_document = jsontext.loads(first)
            except ValueError:
                first_document = None
            if _is_otlp(first_document):
                del first_document
                converted = _otlp_lines(lambda: _converted(_otlp_json_lines(stripped)))
                return lambda: iter(converted)
            if first_document is None and OTLP_START.match(stripped):  # indented OTLP, not JSON
                raise RunError(
                    "parse_error",
                    f"the body is an OTLP JSON document (it has resourceSpans) but not JSON: {problem}",
                )
    return lambda: ((number, raw, "") for number, raw in iter_lines(data) if raw.strip())


def _bad(number: int, message: str, field_name: str | None = None, *, label: str = "") -> dict[str, Any]:
    """A bad line as grade reports it (interfaces.md §5), plus the field when it is one; an
    OTLP trace's message starts with its label (``trace <id>: ...``)."""
    if label and field_name in ROUTING_FIELDS and message.startswith(f"{field_name} "):
        # its value is at fault: an OTLP exporter sets it with an attribute, not a field
        message += f" (set the agentclash.{field_name} attribute on the resource or the root span)"
    bad: dict[str, Any] = {"line": number, "message": f"{label}: {message}" if label else message}
    if field_name is not None:
        bad["field"] = field_name
    return bad


@dataclass(slots=True)
class _Line:
    """A line read valid and routed to its lane; held for one batch at a time."""

    number: int
    label: str  # "trace <id>" for OTLP, "" for JSONL
    lane: RunLane
    execution: Execution


class _Raced(Exception):
    """Items another upload (or a cancel) finished between the check and the write."""

    def __init__(self, bad_lines: BadLines) -> None:
        super().__init__(bad_lines)
        self.bad_lines = bad_lines


ALREADY_DONE = (
    "this case and repetition already has a result (an earlier upload stored it, or it was "
    "cancelled): leave this line out"
)
# Said of a JSONL line holding more than one JSON value: most often a file whose newlines went.
RUN_TOGETHER = (
    " (more than one JSON value on the line: put each response on a line of its own; curl -d "
    "drops a file's newlines: send it with --data-binary)"
)
# The routing fields an OTLP trace sets with attributes (agent-protocol.md).
ROUTING_FIELDS = ("case_key", "challenge_key", "deployment", "repetition")


class _Router:
    """Reads lines against the run's cases and routes each good one to its lane (deployment,
    repetition, and a duplicate check). Nothing is kept per line but one int per item of
    the run's trace_import lanes (the line of its first result, 0 for none)."""

    def __init__(
        self, run: Run, lanes: dict[str, RunLane], cases: list[Any], contexts: dict[tuple[str, str], Any]
    ) -> None:
        self.run = run
        self.lanes = lanes
        self.only_lane = next(iter(lanes.values())) if len(lanes) == 1 else None
        # one reader (the cases indexed once) for both passes; duplicates are checked per
        # lane here
        self.reader = ResultsReader(cases, contexts=contexts, duplicates=False)
        self.contexts = contexts  # the cases' grade contexts the reader builds evidence with
        self._lane_index = {pk: i for i, pk in enumerate(sorted(lane.pk for lane in lanes.values()))}
        self._case_count = len(cases)
        self._first_line: array | None = None

    def routed(self, source: LineSource, bad: BadLines, *, duplicates: bool) -> Iterator[_Line]:
        """Each good line with its lane; a report of each bad one appended to ``bad``."""
        reader = self.reader
        if duplicates:
            self._first_line = array("i", [0]) * (len(self.lanes) * self._case_count * self.run.repetitions)
        for number, raw, label in source():
            if raw is None:
                bad.append(_bad(number, label))  # the trace's problem, with its label
                continue
            execution = reader.read_line(number, raw)
            if execution is None:
                continue
            if isinstance(execution, dict):
                message = execution["message"]
                if not label and message.startswith("not JSON: Extra data"):
                    message += RUN_TOGETHER
                bad.append(_bad(number, message, execution.get("field"), label=label))
                continue
            name = execution.deployment
            lane = self.lanes.get(name)
            if lane is None and name == DEFAULT_DEPLOYMENT and self.only_lane is not None:
                lane = self.only_lane
            if lane is None:
                message = (
                    f"deployment {name!r} is not a trace_import deployment of this run "
                    f"(one of {', '.join(sorted(self.lanes))})"
                )
                bad.append(_bad(number, message, "deployment", label=label))
                continue
            if execution.repetition > self.run.repetitions:
                message = f"repetition {execution.repetition} is above the run's {self.run.repetitions}"
                bad.append(_bad(number, message, "repetition", label=label))
                continue
            if duplicates:
                first = self._first(lane, execution, reader, number)
                if first:
                    message = f"duplicate result for this case and repetition (first on line {first})"
                    bad.append(_bad(number, message, "case_key", label=label))
                    continue
            yield _Line(number, label, lane, execution)

    def _first(self, lane: RunLane, execution: Execution, reader: ResultsReader, number: int) -> int:
        """The line of the first result for this lane, case and repetition (0: this is it)."""
        assert self._first_line is not None
        case_index = reader.order[(execution.challenge_key, execution.case_key)]
        slot = (self._lane_index[lane.pk] * self._case_count + case_index) * self.run.repetitions
        slot += execution.repetition - 1
        first = self._first_line[slot]
        if not first:
            self._first_line[slot] = number
        return first


def _batches(lines: Iterator[_Line]) -> Iterator[list[_Line]]:
    batch: list[_Line] = []
    for line in lines:
        batch.append(line)
        if len(batch) == GRADE_BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def _pending_items(run: Run, batch: list[_Line]) -> dict[tuple[int, str, str, int], ItemKey]:
    """The pending items of the batch's lines, by (lane, challenge, case, repetition)."""
    rows = RunItem.objects.filter(
        run_id=run.pk,
        lane_id__in={line.lane.pk for line in batch},
        case_key__in={line.execution.case_key for line in batch},
        state=ItemState.PENDING,
    ).values_list("lane_id", "id", "challenge_key", "case_key", "repetition", "attempt_count")
    return {(lane_id, *key[1:4]): ItemKey(*key) for lane_id, *key in rows}


def _item_of(line: _Line, items: dict[tuple[int, str, str, int], ItemKey]) -> ItemKey | None:
    e = line.execution
    return items.get((line.lane.pk, e.challenge_key, e.case_key, e.repetition))


def _at_lane_level(execution: Execution, level: str, contexts: Mapping[tuple[str, str], Any]) -> Execution:
    """The line's evidence at its lane's evidence level. The reader builds it before the
    line is routed to a lane, at the level of the cases' grade contexts (structured): a
    ``black_box`` lane's line had a tool_calls channel (and files, tasks, user notes) of
    nothing reported, so a tool check PASSED on calls nobody reported (agent-protocol.md:
    such checks are UNAVAILABLE)."""
    evidence = execution.evidence
    if evidence is None or evidence.channels.tool_calls == (level != "black_box"):
        return execution
    from grading.engine.evidence import evidence_from_response

    ctx = contexts.get((execution.challenge_key, execution.case_key))
    options: dict[str, Any] = {}
    if ctx is not None:
        options = {
            "rendered_instructions": ctx.rendered_instructions,
            "tool_policy": dict(ctx.tool_policy),
            "working_directory": ctx.working_directory,
        }
    rebuilt = evidence_from_response(
        execution.response, deployment_kind="trace_import", evidence_level=level, **options
    )
    return dataclasses.replace(execution, evidence=rebuilt)


def _graded_upload(ctx: Any, key: ItemKey, execution: Execution) -> ItemResult:
    """An uploaded line is the item's one attempt (ok, at upload time, with the latency the
    line reports): ``attempts`` counts it as for an executed item, not 0."""
    now = timezone.now()
    evidence = evidence_of(execution)  # kept: the upload reads with keep_evidence (the default)
    outcome = AttemptOutcome(
        AttemptCategory.OK,
        latency_ms=evidence.metrics.latency_ms if evidence.metrics is not None else None,
        response=execution.response,
        evidence=evidence,
        started_at=now,
        ended_at=now,
    )
    return grade_outcomes(ctx, key, [outcome], execution.response)


def run_import_results(*, run: Run, data: bytes) -> ImportOutcome:
    """Grade uploaded results for the run's trace_import lanes, all or nothing: any bad line
    and nothing is stored, the outcome lists the first ``MAX_LISTED`` bad lines and counts them
    all.

    Three passes, each holding one batch of ``GRADE_BATCH`` lines at a time: every line is
    checked (and its item found); every line is graded (outside any transaction: a judge may
    be called) into a temporary file, a batch per record; the batches are written from it in
    one transaction. The memory an upload takes does not grow with its lines (only the body
    does, and one int per item of the run's trace_import lanes)."""
    from runs.dispatch import lane_context_for

    if len(data) > MAX_RESULTS_BYTES:
        raise RunError("payload_too_large", TOO_LARGE.format(what=""), status_code=413)
    _check_accepting(run.status)
    lanes = {
        lane.deployment_name: lane
        for lane in RunLane.objects.filter(
            run=run, deployment_kind=DeploymentKind.TRACE_IMPORT
        ).select_related("deployment", "deployment__workspace")
    }
    if not lanes:
        raise RunError(
            "no_trace_import_lane",
            "this run has no trace_import deployment; results can only be uploaded to those",
            status_code=409,
        )
    try:
        data = gunzipped(data, MAX_RESULTS_BYTES)
    except ResultsTooLarge:
        raise RunError(
            "payload_too_large", TOO_LARGE.format(what=", decompressed"), status_code=413
        ) from None
    except ValueError as exc:
        raise RunError("parse_error", f"the body is gzip but cannot be read: {exc}") from None
    for bom, name in WIDE_BOMS:
        if data.startswith(bom):
            raise RunError(
                "parse_error",
                f"the body is {name} (it starts with its byte order mark): send it as UTF-8 "
                f"(iconv -f {name} -t UTF-8; in PowerShell, Out-File -Encoding utf8)",
            )
    source = _lines(data)
    if next(source(), None) is None:
        raise RunError(
            "no_results",
            "the upload has no result lines: send JSONL (one agent response per line) or OTLP "
            "JSON with spans",
        )
    run = Run.objects.light().get(pk=run.pk)
    any_lane = next(iter(lanes.values()))
    ctx0 = lane_context_for(any_lane, run)
    pairs = list(ctx0.data.iter_cases())
    router = _Router(run, lanes, [c for c, _ in pairs], {(c.challenge_key, c.case_key): x for c, x in pairs})
    del pairs
    outcome = ImportOutcome()
    bad = BadLines()
    _check(router, source, bad)
    if not bad:
        try:
            with tempfile.TemporaryFile(prefix="agentclash-trace-import-") as spool:
                _grade(router, source, spool)
                outcome.accepted = _record(run, router, spool)
        except _Raced as exc:
            bad = exc.bad_lines
    if bad:  # items no longer pending because the run was cancelled meanwhile: the run's answer
        _check_accepting(Run.objects.filter(pk=run.pk).values_list("status", flat=True).get())
    outcome.bad_lines, outcome.bad_count = bad.listed(), bad.count
    return outcome


def _check_accepting(status: str) -> None:
    if status not in (RunStatus.QUEUED, RunStatus.RUNNING):
        raise RunError(
            "run_not_accepting_results", f"a {status} run does not accept results", status_code=409
        )


def _check(router: _Router, source: LineSource, bad: BadLines) -> None:
    """Pass 1: every line read, routed and given its pending item; a report of each bad one
    appended to ``bad``."""
    lines = router.routed(source, bad, duplicates=True)
    for batch in _batches(lines):
        items = _pending_items(router.run, batch)
        for line in batch:
            if _item_of(line, items) is None:
                bad.append(_bad(line.number, ALREADY_DONE, "case_key", label=line.label))


# A record of the spool: its length (8 bytes) and the zlib of a pickle of (lane id,
# [(result, grade JSON, evidence JSON)], [(item id, line number, label)]), one per lane of a
# batch of lines. Each result is spooled without what ``record_results`` does not write (its
# attempts' response and evidence objects: most of its bytes and of the time to pickle it),
# and its grade and evidence documents as the JSON the writer makes of them
# (``storable_json``): pickle takes two levels of the interpreter's recursion limit per level
# of a document, so a document ~500 levels deep (which the writer stores) could not be
# pickled.
_SPOOL_LENGTH = struct.Struct("<Q")


def _spool_record(lane_id: int, results: list[ItemResult], where: list[tuple[int, int, str]]) -> bytes:
    rows = [
        (
            dataclasses.replace(
                r,
                grade=None,
                evidence=None,
                attempts=[dataclasses.replace(a, response=None, evidence=None) for a in r.attempts],
            ),
            None if r.grade is None else storable_json(r.grade, option=orjson.OPT_NAIVE_UTC),
            None if r.evidence is None else storable_json(r.evidence, option=orjson.OPT_NAIVE_UTC),
        )
        for r in results
    ]
    record = zlib.compress(pickle.dumps((lane_id, rows, where), pickle.HIGHEST_PROTOCOL), 1)
    return _SPOOL_LENGTH.pack(len(record)) + record


def _spooled(spool: IO[bytes]) -> Iterator[tuple[int, list[ItemResult], list[tuple[int, int, str]]]]:
    spool.seek(0)
    while header := spool.read(_SPOOL_LENGTH.size):
        (length,) = _SPOOL_LENGTH.unpack(header)
        # our own records, in a file this process created (unlinked, mode 0600)
        lane_id, rows, where = pickle.loads(zlib.decompress(spool.read(length)))  # noqa: S301
        results = []
        for result, grade, evidence in rows:
            result.grade = None if grade is None else json.loads(grade)
            result.evidence = None if evidence is None else json.loads(evidence)
            results.append(result)
        yield lane_id, results, where


def _grade(router: _Router, source: LineSource, spool: IO[bytes]) -> None:
    """Pass 2: every line graded (outside any transaction: a judge may be called), a batch at
    a time, into ``spool``; :class:`_Raced` when an item is no longer pending."""
    from runs.dispatch import lane_context_for

    run = router.run
    contexts: dict[int, Any] = {}
    bad = BadLines()
    for batch in _batches(router.routed(source, bad, duplicates=False)):
        items = _pending_items(run, batch)
        by_lane: dict[int, tuple[list[ItemResult], list[tuple[int, int, str]]]] = {}
        for lane_id in sorted({line.lane.pk for line in batch}):
            lane = next(line.lane for line in batch if line.lane.pk == lane_id)
            if lane_id not in contexts:
                contexts[lane_id] = lane_context_for(lane, run)
            # the batch's cases in one query, as a claim loads them
            contexts[lane_id].data.load(
                {(li.execution.challenge_key, li.execution.case_key) for li in batch if li.lane.pk == lane_id}
            )
            by_lane[lane_id] = ([], [])
        for line in batch:
            key = _item_of(line, items)
            if key is None:
                bad.append(_bad(line.number, ALREADY_DONE, "case_key", label=line.label))
                continue
            results, where = by_lane[line.lane.pk]
            execution = _at_lane_level(line.execution, contexts[line.lane.pk].evidence_level, router.contexts)
            results.append(_graded_upload(contexts[line.lane.pk], key, execution))
            where.append((key.id, line.number, line.label))
        for lane_id, (results, where) in by_lane.items():
            if results:
                spool.write(_spool_record(lane_id, results, where))
    if bad:  # a line read valid in pass 1 and not now: its item was finished meanwhile
        raise _Raced(bad)


def _record(run: Run, router: _Router, spool: IO[bytes]) -> int:
    """Pass 3: write the spooled results in one transaction, every trace_import lane locked
    first in id order (as two uploads and the lane writer take them); :class:`_Raced`
    (nothing written) listing every line whose item is no longer pending."""
    from runs.recording import _locked, record_results
    from runs.scoring import check_lane_and_run

    lane_ids = sorted(lane.pk for lane in router.lanes.values())
    written = 0
    written_lanes: set[int] = set()
    raced = BadLines()
    with transaction.atomic():
        list(_locked(RunLane.objects.filter(pk__in=lane_ids).order_by("pk")).values_list("pk"))
        for lane_id, results, where in _spooled(spool):
            done = record_results(
                lane_id, results, owner=None, revision=run.scoring_revision, repetitions=run.repetitions
            )
            if len(done) != len(results):  # rolls back every batch written so far
                kept = set(done)
                for pk, n, label in where:
                    if pk not in kept:
                        raced.append(_bad(n, ALREADY_DONE, "case_key", label=label))
            written += len(done)
            written_lanes.add(lane_id)
        if raced:
            raise _Raced(raced)
        for lane in router.lanes.values():
            if lane.pk in written_lanes and lane.status == LaneStatus.QUEUED:
                transition_lane(lane, LaneStatus.RUNNING, reason="results uploaded")
        if written and run.status == RunStatus.QUEUED:
            transition_run(run, RunStatus.RUNNING, reason="results uploaded")
    for lane_id in sorted(written_lanes):
        check_lane_and_run(lane_id)
    return written
