"""Trace import: results uploaded to a run (``POST .../runs/{id}/results``).

Input is JSONL in the agent-protocol response shape (one line per case execution, with
``case_key``, optional ``challenge_key``, ``deployment`` and ``repetition``), or OTLP JSON
(``{"resourceSpans": [...]}``) whose traces are converted to the same shape (routing
attributes ``agentclash.case_key`` / ``challenge_key`` / ``deployment`` / ``repetition`` on the
resource or the root span; tool calls from ``execute_tool`` spans and ``gen_ai.tool.*``
attributes; messages from ``gen_ai.input.messages`` / ``gen_ai.output.messages``).

Each line is checked with the engine's results reader (``grading.engine.reader``) and then
matched to a pending item of a ``trace_import`` lane of the run by deployment, challenge,
case and repetition. Good lines are graded and recorded (``runs.recording``); every bad
line is reported with its number and the reason. The run completes when every item has a
result (or when it is cancelled by hand).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from grading.engine import jsontext
from grading.engine.reader import DEFAULT_DEPLOYMENT, InvalidResults, read_results
from runs.models import (
    DeploymentKind,
    ItemState,
    LaneStatus,
    Run,
    RunItem,
    RunLane,
    RunStatus,
)
from runs.recording import ItemKey, ItemResult, grade_evidence
from runs.services.runs import RunError
from runs.states import transition_lane, transition_run

MAX_RESULTS_BYTES = 64 * 1024 * 1024


@dataclass
class ImportOutcome:
    accepted: int = 0
    bad_lines: list[dict[str, Any]] = field(default_factory=list)

    def error_body(self) -> dict[str, Any]:
        return {
            "error": {
                "code": "invalid_results",
                "message": f"{len(self.bad_lines)} bad result lines",
                "lines": self.bad_lines,
                "accepted": self.accepted,
            }
        }


# --- OTLP JSON -> response-shaped lines --------------------------------------------------


def _attr_value(value: Mapping[str, Any]) -> Any:
    for key in ("stringValue", "boolValue", "doubleValue"):
        if key in value:
            return value[key]
    if "intValue" in value:
        try:
            return int(value["intValue"])
        except (TypeError, ValueError):
            return value["intValue"]
    if "arrayValue" in value:
        return [_attr_value(v) for v in value["arrayValue"].get("values") or []]
    if "kvlistValue" in value:
        return _attrs(value["kvlistValue"].get("values"))
    return None


def _attrs(items: Iterable[Any] | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items or []:
        if isinstance(item, Mapping) and isinstance(item.get("key"), str):
            out[item["key"]] = _attr_value(item.get("value") or {})
    return out


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


def otlp_to_lines(document: Mapping[str, Any]) -> list[tuple[dict[str, Any] | None, str]]:
    """One response-shaped dict per trace, in order of appearance, with a label for errors
    (``trace <id>``); ``None`` with a message when a trace cannot be converted."""
    traces: dict[str, dict[str, Any]] = {}
    for resource_spans in document.get("resourceSpans") or []:
        if not isinstance(resource_spans, Mapping):
            continue
        resource = _attrs((resource_spans.get("resource") or {}).get("attributes"))
        for scope in resource_spans.get("scopeSpans") or []:
            for span in (scope or {}).get("spans") or []:
                if not isinstance(span, Mapping):
                    continue
                trace_id = str(span.get("traceId") or "")
                entry = traces.setdefault(trace_id, {"resource": resource, "spans": []})
                entry["spans"].append(span)
    out: list[tuple[dict[str, Any] | None, str]] = []
    for trace_id, entry in traces.items():
        label = f"trace {trace_id or '(no traceId)'}"
        spans = entry["spans"]
        roots = [s for s in spans if not s.get("parentSpanId")]
        root = roots[0] if roots else spans[0]
        root_attrs = _attrs(root.get("attributes"))
        routing = {**entry["resource"], **root_attrs}
        line: dict[str, Any] = {}
        for name in ("case_key", "challenge_key", "deployment", "repetition"):
            value = routing.get(f"agentclash.{name}")
            if value is not None:
                line[name] = value
        tool_calls = []
        for span in sorted(spans, key=lambda s: int(s.get("startTimeUnixNano") or 0)):
            attrs = _attrs(span.get("attributes"))
            is_tool = attrs.get("gen_ai.operation.name") == "execute_tool" or str(
                span.get("name") or ""
            ).startswith("execute_tool")
            if not is_tool:
                continue
            name = (
                attrs.get("gen_ai.tool.name")
                or str(span.get("name") or "").removeprefix("execute_tool").strip()
            )
            call: dict[str, Any] = {
                "name": name,
                "args": _json_attr(attrs.get("gen_ai.tool.call.arguments") or {}),
            }
            if attrs.get("gen_ai.tool.call.id"):
                call["id"] = attrs["gen_ai.tool.call.id"]
            if "gen_ai.tool.call.result" in attrs:
                call["result"] = _json_attr(attrs["gen_ai.tool.call.result"])
            status = (span.get("status") or {}).get("code")
            if status in (2, "STATUS_CODE_ERROR"):
                call["status"] = "error"
            tool_calls.append(call)
        messages = _message_list(root_attrs.get("gen_ai.input.messages")) + _message_list(
            root_attrs.get("gen_ai.output.messages")
        )
        final = root_attrs.get("agentclash.final_output")
        if final is None:
            outputs = [
                m for m in _message_list(root_attrs.get("gen_ai.output.messages")) if m["role"] == "assistant"
            ]
            if outputs:
                final = outputs[-1]["content"]
        if final is None:
            out.append(
                (None, f"{label}: no final output (set agentclash.final_output or gen_ai.output.messages)")
            )
            continue
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
        if root_attrs.get("gen_ai.response.model") or root_attrs.get("gen_ai.request.model"):
            metrics["model"] = root_attrs.get("gen_ai.response.model") or root_attrs.get(
                "gen_ai.request.model"
            )
        if metrics:
            line["metrics"] = metrics
        out.append((line, label))
    return out


# --- the import ---------------------------------------------------------------------------


def _lines(data: bytes) -> list[tuple[int, bytes | None, str]]:
    """(line number, JSONL bytes or None, problem) per result line of JSONL or OTLP JSON."""
    stripped = data.lstrip()
    if stripped.startswith(b"{") and b"resourceSpans" in stripped[:4096]:
        try:
            document = jsontext.loads(data)
        except ValueError:
            document = None
        if isinstance(document, Mapping) and "resourceSpans" in document:
            out: list[tuple[int, bytes | None, str]] = []
            for i, (line, problem) in enumerate(otlp_to_lines(document), start=1):
                out.append((i, json.dumps(line).encode() if line is not None else None, problem))
            return out
    out = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if raw.strip():
            out.append((number, raw, ""))
    return out


def run_import_results(*, run: Run, data: bytes) -> ImportOutcome:
    """Grade uploaded results for the run's trace_import lanes; bad lines are reported."""
    from runs.dispatch import lane_context_for
    from runs.scoring import check_lane_and_run

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
    only_lane = next(iter(lanes.values())) if len(lanes) == 1 else None
    run = Run.objects.light().get(pk=run.pk)
    any_lane = next(iter(lanes.values()))
    ctx0 = lane_context_for(any_lane, run, any_lane.deployment)
    pairs = list(ctx0.data.iter_cases())
    cases = [c for c, _ in pairs]
    contexts = {(c.challenge_key, c.case_key): ctx for c, ctx in pairs}
    outcome = ImportOutcome()
    seen: dict[tuple[int, str, str, int], int] = {}
    matched: dict[int, list[tuple[int, Any, dict[str, Any]]]] = {}  # lane id -> (line, execution, response)
    for number, raw, problem in _lines(data):
        if raw is None:
            outcome.bad_lines.append({"line": number, "message": problem})
            continue
        try:
            execution = read_results(raw, cases, contexts=contexts).executions[0]
        except InvalidResults as exc:
            outcome.bad_lines.append({"line": number, "message": exc.lines[0]["message"]})
            continue
        name = execution.deployment
        lane = lanes.get(name)
        if lane is None and name == DEFAULT_DEPLOYMENT and only_lane is not None:
            lane = only_lane
        if lane is None:
            outcome.bad_lines.append(
                {
                    "line": number,
                    "message": f"deployment {name!r} is not a trace_import deployment of this run "
                    f"(one of {', '.join(sorted(lanes))})",
                }
            )
            continue
        if execution.repetition > run.repetitions:
            outcome.bad_lines.append(
                {
                    "line": number,
                    "message": f"repetition {execution.repetition} is above the run's {run.repetitions}",
                }
            )
            continue
        ident = (lane.pk, execution.challenge_key, execution.case_key, execution.repetition)
        if ident in seen:
            outcome.bad_lines.append(
                {
                    "line": number,
                    "message": f"duplicate result for this case and repetition (first on line {seen[ident]})",
                }
            )
            continue
        seen[ident] = number
        matched.setdefault(lane.pk, []).append((number, execution, execution.response))
    by_lane = {lane.pk: lane for lane in lanes.values()}
    for lane_id, rows in matched.items():
        lane = by_lane[lane_id]
        ctx = lane_context_for(lane, run, lane.deployment)
        keys = {(r.challenge_key, r.case_key, r.repetition): r for r in RunItem.objects.filter(
            lane_id=lane_id, state=ItemState.PENDING
        ).only("id", "challenge_key", "case_key", "repetition", "attempt_count")}  # fmt: skip
        results: list[ItemResult] = []
        for number, execution, response in rows:
            item = keys.get((execution.challenge_key, execution.case_key, execution.repetition))
            if item is None:
                outcome.bad_lines.append(
                    {
                        "line": number,
                        "message": "this case and repetition already has a result (or was cancelled)",
                    }
                )
                continue
            key = ItemKey(item.pk, item.challenge_key, item.case_key, item.repetition, item.attempt_count)
            result = grade_evidence(ctx, key, execution.evidence, response, attempt=1)
            results.append(result)
        with transaction.atomic():
            from runs.recording import record_results

            written = record_results(
                lane_id, results, owner=None, revision=run.scoring_revision, repetitions=run.repetitions
            )
            if written:
                if run.status == RunStatus.QUEUED:
                    transition_run(run, RunStatus.RUNNING, reason="results uploaded")
                if lane.status == LaneStatus.QUEUED:
                    transition_lane(lane, LaneStatus.RUNNING, reason="results uploaded")
        outcome.accepted += len(written)
        check_lane_and_run(lane_id)
    outcome.bad_lines.sort(key=lambda b: b["line"])
    return outcome
