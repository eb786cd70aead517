"""Trace import: results uploaded to a run (``POST .../runs/{id}/results``).

Input is JSONL in the agent-protocol response shape (one line per case execution, with
``case_key``, optional ``challenge_key``, ``deployment`` and ``repetition``), or OTLP JSON
(``{"resourceSpans": [...]}``) whose traces are converted to the same shape (routing
attributes ``agentclash.case_key`` / ``challenge_key`` / ``deployment`` / ``repetition`` on the
resource or the root span; tool calls from ``execute_tool`` spans and ``gen_ai.tool.*``
attributes; messages from ``gen_ai.input.messages`` / ``gen_ai.output.messages``). An OTLP
document whose structure is not OTLP (a list where an object belongs, a time that is not a
number, ...) is refused whole with :class:`OtlpError`, which names the place
(``resourceSpans[0].scopeSpans``).

Each line is checked with the engine's results reader (``grading.engine.reader``) and then
matched to a pending item of a ``trace_import`` lane of the run by deployment, challenge,
case and repetition. An upload is all or nothing, like the offline ``grade`` command: when
any line is bad, nothing is graded or stored and every bad line is reported with its number
and the reason (the caller fixes the file and sends all of it again). Otherwise every line is
graded (outside any transaction: a judge may be called) and recorded in one transaction
(``runs.recording.record_results``, one call per lane). The run completes when every item
has a result (or when it is cancelled by hand).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

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

MAX_RESULTS_BYTES = 64 * 1024 * 1024
# Uploaded lines graded per loaded batch of cases (below the per-process case cache's 4,096).
GRADE_BATCH = 500


@dataclass
class ImportOutcome:
    """``accepted`` results were stored, or none were and ``bad_lines`` says why."""

    accepted: int = 0
    bad_lines: list[dict[str, Any]] = field(default_factory=list)

    def error_body(self) -> dict[str, Any]:
        """The 400 body: grade's ``invalid_results`` error (interfaces.md §5), saying that
        nothing was stored."""
        return {
            "error": {
                "code": "invalid_results",
                "message": f"{len(self.bad_lines)} bad result lines; nothing was stored: "
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
        attrs=_attrs(span.get("attributes"), f"{path}.attributes"),
        status_code=code,
    )


def _traces(document: Mapping[str, Any]) -> dict[str, tuple[dict[str, Any], list[_Span]]]:
    """The document's spans by trace id (in order of appearance), each trace with the
    attributes of the resource of its first span; :class:`OtlpError` on a wrong shape."""
    traces: dict[str, tuple[dict[str, Any], list[_Span]]] = {}
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
    root_attrs = (roots[0] if roots else spans[0]).attrs
    routing = {**resource, **root_attrs}
    line: dict[str, Any] = {}
    for name in ("case_key", "challenge_key", "deployment", "repetition"):
        value = routing.get(f"agentclash.{name}")
        if value is not None:
            line[name] = value
    tool_calls = [c for c in (_tool_call(s) for s in sorted(spans, key=lambda s: s.start)) if c is not None]
    outputs = _message_list(root_attrs.get("gen_ai.output.messages"))
    messages = _message_list(root_attrs.get("gen_ai.input.messages")) + outputs
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
    metrics = {}
    for ours, theirs in (
        ("input_tokens", "gen_ai.usage.input_tokens"),
        ("output_tokens", "gen_ai.usage.output_tokens"),
    ):
        if isinstance(root_attrs.get(theirs), int):
            metrics[ours] = root_attrs[theirs]
    model = root_attrs.get("gen_ai.response.model") or root_attrs.get("gen_ai.request.model")
    if model:
        metrics["model"] = model
    if metrics:
        line["metrics"] = metrics
    return line, label


def otlp_to_lines(document: Mapping[str, Any]) -> list[tuple[dict[str, Any] | None, str]]:
    """One response-shaped dict per trace, in order of appearance, with a label for errors
    (``trace <id>``); ``None`` with a message when a trace cannot be converted.

    Raises :class:`OtlpError` (naming the place) when the document is not shaped as OTLP."""
    out: list[tuple[dict[str, Any] | None, str]] = []
    for trace_id, (resource, spans) in _traces(document).items():
        label = f"trace {trace_id or '(no traceId)'}"
        try:
            out.append(_trace_line(resource, spans, label))
        except RecursionError:  # str() of a message part parsed from very deep JSON text
            out.append((None, f"{label}: an attribute is nested too deeply to read"))
    return out


# --- the import ---------------------------------------------------------------------------


def _otlp_lines(document: Mapping[str, Any]) -> list[tuple[int, bytes | None, str]]:
    try:
        converted = otlp_to_lines(document)
    except OtlpError as exc:
        raise RunError(
            "parse_error",
            f"the body is OTLP JSON (it has resourceSpans) but {exc.path} {exc.problem}; send the "
            "OTLP/JSON encoding of ExportTraceServiceRequest, or JSONL of agent responses",
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


def _lines(data: bytes) -> list[tuple[int, bytes | None, str]]:
    """(line number, JSONL bytes or None, label or problem) per result line of JSONL or OTLP
    JSON: an OTLP trace's label (``trace <id>``), or its problem when it has no line."""
    stripped = data.removeprefix(b"\xef\xbb\xbf").lstrip()  # a UTF-8 BOM before an OTLP document
    if stripped.startswith(b"{") and b"resourceSpans" in stripped[:4096]:
        try:
            document = jsontext.loads(stripped)
        except ValueError:
            document = None
        if isinstance(document, Mapping) and "resourceSpans" in document:
            return _otlp_lines(document)
    out: list[tuple[int, bytes | None, str]] = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if raw.strip():
            out.append((number, raw, ""))
    return out


def _bad(number: int, message: str, field_name: str | None = None, *, label: str = "") -> dict[str, Any]:
    """A bad line as grade reports it (interfaces.md §5), plus the field when it is one; an
    OTLP trace's message starts with its label (``trace <id>: ...``)."""
    bad: dict[str, Any] = {"line": number, "message": f"{label}: {message}" if label else message}
    if field_name is not None:
        bad["field"] = field_name
    return bad


@dataclass(slots=True)
class _Matched:
    number: int
    label: str  # "trace <id>" for OTLP, "" for JSONL
    lane: RunLane
    execution: Execution
    item: RunItem | None = None


class _Raced(Exception):
    """Items another upload (or a cancel) finished between the check and the write."""

    def __init__(self, bad_lines: list[dict[str, Any]]) -> None:
        super().__init__(bad_lines)
        self.bad_lines = bad_lines


ALREADY_DONE = "this case and repetition already has a result (or was cancelled)"


def run_import_results(*, run: Run, data: bytes) -> ImportOutcome:
    """Grade uploaded results for the run's trace_import lanes, all or nothing: any bad line
    and nothing is stored, the outcome lists every bad line."""
    from runs.dispatch import lane_context_for

    if len(data) > MAX_RESULTS_BYTES:
        raise RunError("payload_too_large", "results are limited to 64 MB per upload", status_code=413)
    if run.status not in (RunStatus.QUEUED, RunStatus.RUNNING):
        raise RunError(
            "run_not_accepting_results", f"a {run.status} run does not accept results", status_code=409
        )
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
            "payload_too_large", "results are limited to 64 MB per upload, decompressed", status_code=413
        ) from None
    except ValueError as exc:
        raise RunError("parse_error", f"the body is gzip but cannot be read: {exc}") from None
    lines = _lines(data)
    if not lines:
        raise RunError(
            "no_results",
            "the upload has no result lines: send JSONL (one agent response per line) or OTLP "
            "JSON with spans",
        )
    run = Run.objects.light().get(pk=run.pk)
    any_lane = next(iter(lanes.values()))
    ctx0 = lane_context_for(any_lane, run)
    pairs = list(ctx0.data.iter_cases())
    cases = [c for c, _ in pairs]
    contexts = {(c.challenge_key, c.case_key): ctx for c, ctx in pairs}
    outcome = ImportOutcome()
    matched = _match_lines(lines, run, lanes, cases, contexts, outcome.bad_lines)
    _find_items(matched, outcome.bad_lines)
    if outcome.bad_lines:
        outcome.bad_lines.sort(key=lambda b: b["line"])
        return outcome
    try:
        outcome.accepted = _grade_and_record(run, matched)
    except _Raced as exc:
        outcome.bad_lines = sorted(exc.bad_lines, key=lambda b: b["line"])
    return outcome


def _match_lines(
    lines: list[tuple[int, bytes | None, str]],
    run: Run,
    lanes: dict[str, RunLane],
    cases: list[Any],
    contexts: dict[tuple[str, str], Any],
    bad: list[dict[str, Any]],
) -> list[_Matched]:
    """Each good line with its lane; a report of each bad one appended to ``bad``."""
    only_lane = next(iter(lanes.values())) if len(lanes) == 1 else None
    # one reader (the cases indexed once); duplicates are checked per lane below
    reader = ResultsReader(cases, contexts=contexts, duplicates=False)
    seen: dict[tuple[int, str, str, int], int] = {}
    matched: list[_Matched] = []
    for number, raw, label in lines:
        if raw is None:
            bad.append(_bad(number, label))  # the trace's problem, with its label
            continue
        execution = reader.read_line(number, raw)
        if execution is None:
            continue
        if isinstance(execution, dict):
            bad.append(_bad(number, execution["message"], execution.get("field"), label=label))
            continue
        name = execution.deployment
        lane = lanes.get(name)
        if lane is None and name == DEFAULT_DEPLOYMENT and only_lane is not None:
            lane = only_lane
        if lane is None:
            message = (
                f"deployment {name!r} is not a trace_import deployment of this run "
                f"(one of {', '.join(sorted(lanes))})"
            )
            bad.append(_bad(number, message, "deployment", label=label))
            continue
        if execution.repetition > run.repetitions:
            message = f"repetition {execution.repetition} is above the run's {run.repetitions}"
            bad.append(_bad(number, message, "repetition", label=label))
            continue
        ident = (lane.pk, execution.challenge_key, execution.case_key, execution.repetition)
        if ident in seen:
            message = f"duplicate result for this case and repetition (first on line {seen[ident]})"
            bad.append(_bad(number, message, "case_key", label=label))
            continue
        seen[ident] = number
        matched.append(_Matched(number, label, lane, execution))
    return matched


def _find_items(matched: list[_Matched], bad: list[dict[str, Any]]) -> None:
    """Give each matched line its pending item; a line whose item is done is bad."""
    for lane_id in {m.lane.pk for m in matched}:
        pending = {
            (r.challenge_key, r.case_key, r.repetition): r
            for r in RunItem.objects.filter(lane_id=lane_id, state=ItemState.PENDING).only(
                "id", "challenge_key", "case_key", "repetition", "attempt_count"
            )
        }
        for m in matched:
            if m.lane.pk == lane_id:
                e = m.execution
                m.item = pending.get((e.challenge_key, e.case_key, e.repetition))
                if m.item is None:
                    bad.append(_bad(m.number, ALREADY_DONE, "case_key", label=m.label))


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


def _grade_and_record(run: Run, matched: list[_Matched]) -> int:
    """Grade every line (outside the transaction: a judge may be called), then write them all
    in one transaction; :class:`_Raced` (nothing written) when an item is no longer pending."""
    from runs.dispatch import lane_context_for
    from runs.recording import record_results
    from runs.scoring import check_lane_and_run

    # Lanes in id order: two uploads lock their lane rows in the same order.
    by_lane: dict[int, list[_Matched]] = {}
    for m in sorted(matched, key=lambda m: m.lane.pk):
        by_lane.setdefault(m.lane.pk, []).append(m)
    graded: dict[int, tuple[RunLane, list[ItemResult], dict[int, _Matched]]] = {}
    for lane_id, rows in by_lane.items():
        lane = rows[0].lane
        ctx = lane_context_for(lane, run)
        results: list[ItemResult] = []
        lines: dict[int, _Matched] = {}  # by item id
        for number, m in enumerate(rows):
            if number % GRADE_BATCH == 0:  # the batch's cases in one query, as a claim loads them
                ctx.data.load(
                    {
                        (r.execution.challenge_key, r.execution.case_key)
                        for r in rows[number : number + GRADE_BATCH]
                    }
                )
            item = m.item
            assert item is not None  # _find_items reported the lines without one
            key = ItemKey(item.pk, item.challenge_key, item.case_key, item.repetition, item.attempt_count)
            results.append(_graded_upload(ctx, key, m.execution))
            lines[item.pk] = m
        graded[lane_id] = (lane, results, lines)
    written = 0
    with transaction.atomic():
        for lane_id, (lane, results, lines) in graded.items():
            done = record_results(
                lane_id, results, owner=None, revision=run.scoring_revision, repetitions=run.repetitions
            )
            if len(done) != len(results):  # rolls back every lane written so far
                kept = set(done)
                raise _Raced(
                    [
                        _bad(m.number, ALREADY_DONE, "case_key", label=m.label)
                        for pk, m in lines.items()
                        if pk not in kept
                    ]
                )
            written += len(done)
            if lane.status == LaneStatus.QUEUED:
                transition_lane(lane, LaneStatus.RUNNING, reason="results uploaded")
        if written and run.status == RunStatus.QUEUED:
            transition_run(run, RunStatus.RUNNING, reason="results uploaded")
    for lane_id in graded:
        check_lane_and_run(lane_id)
    return written
