"""Streamed run exports: ``jsonl``, ``csv``, ``junit``, ``grading`` (interfaces.md §6–§7).

Each writer is a generator of text chunks over ``.iterator(chunk_size=...)`` of plain values,
so a run of any size is exported without loading it. ``export_stream(run, format)`` picks
one; ``CONTENT_TYPES`` and ``FILE_SUFFIX`` serve HTTP responses and files. Shared by the run
API, the ``run export`` command and the run pages.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator
from typing import Any
from xml.sax.saxutils import escape, quoteattr

import orjson
from django.db.models import Case, OuterRef, Subquery, TextField, Value, When
from django.http import StreamingHttpResponse

from runs.documents import display_status
from runs.models import Attempt, Run, RunItem, RunLane

FORMATS = ("jsonl", "csv", "junit", "grading")
CONTENT_TYPES = {
    "jsonl": "application/x-ndjson",
    "csv": "text/csv; charset=utf-8",
    "junit": "application/xml",
    "grading": "application/x-ndjson",
}
FILE_SUFFIX = {"jsonl": "jsonl", "csv": "csv", "junit": "xml", "grading": "grading.jsonl"}
CHUNK = 500

_ROW_FIELDS = (
    "id", "lane__deployment_name", "challenge_key", "case_key", "repetition", "status", "state",
    "last_category", "score", "attempt_count", "outcome_class", "reason_code", "latency_ms",
    "input_tokens", "output_tokens", "cost_usd",
)  # fmt: skip
CSV_COLUMNS = (
    "deployment", "challenge_key", "case_key", "repetition", "status", "score", "outcome_class",
    "reason_code", "attempts", "latency_ms", "input_tokens", "output_tokens", "cost_usd",
)  # fmt: skip


def _rows(run: Run, *fields: str) -> Iterator[dict[str, Any]]:
    qs = RunItem.objects.filter(run=run).order_by("id").values(*fields)
    yield from qs.iterator(chunk_size=CHUNK)


def _flat(v: dict[str, Any]) -> dict[str, Any]:
    return {
        "deployment": v["lane__deployment_name"],
        "challenge_key": v["challenge_key"],
        "case_key": v["case_key"],
        "repetition": v["repetition"],
        "status": display_status(v["status"], v["state"], v["last_category"]),
        "score": v["score"],
        "outcome_class": v["outcome_class"] or None,
        "reason_code": v["reason_code"] or None,
        "attempts": v["attempt_count"],
        "latency_ms": v["latency_ms"],
        "input_tokens": v["input_tokens"],
        "output_tokens": v["output_tokens"],
        "cost_usd": v["cost_usd"],
    }


def _lines(docs: list[bytes]) -> str:
    """JSON documents as JSONL text. U+2028 and U+2029 (valid raw in a JSON string, and
    orjson writes them so) are escaped: Python's ``str.splitlines()`` and other line readers
    split a record there. Outside strings JSON never holds them, so the escape is exact."""
    text = b"\n".join(docs).replace(b"\xe2\x80\xa8", b"\\u2028").replace(b"\xe2\x80\xa9", b"\\u2029")
    return text.decode() + "\n"


def export_jsonl(run: Run) -> Iterator[str]:
    buf: list[bytes] = []
    for v in _rows(run, *_ROW_FIELDS):
        buf.append(orjson.dumps(_flat(v)))
        if len(buf) >= CHUNK:
            yield _lines(buf)
            buf = []
    if buf:
        yield _lines(buf)


def export_csv(run: Run) -> Iterator[str]:
    """One row per case per deployment (per repetition)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")  # RFC 4180: a field holding CR or LF is quoted
    writer.writerow(CSV_COLUMNS)
    for count, v in enumerate(_rows(run, *_ROW_FIELDS), start=1):
        flat = _flat(v)
        writer.writerow(["" if flat[c] is None else flat[c] for c in CSV_COLUMNS])
        if count % CHUNK == 0:
            yield out.getvalue()
            out.seek(0)
            out.truncate()
    yield out.getvalue()


def export_grading(run: Run) -> Iterator[str]:
    """One grading.json document per line (graded cases only)."""
    qs = RunItem.objects.filter(run=run).exclude(status="").order_by("id").values_list("grade", flat=True)
    buf: list[bytes] = []
    for grade in qs.iterator(chunk_size=CHUNK):
        if grade is None:
            continue
        buf.append(orjson.dumps(grade))
        if len(buf) >= 200:
            yield _lines(buf)
            buf = []
    if buf:
        yield _lines(buf)


def _failing_expectations(grade: dict[str, Any] | None) -> list[dict[str, Any]]:
    if not grade:
        return []
    return [e for e in grade.get("expectations") or [] if e.get("status") in ("FAILED", "ERROR")]


# Characters XML 1.0 does not allow (C0 controls but tab and newlines, lone surrogates,
# U+FFFE and U+FFFF): an agent's terminal output (ANSI colours) quoted as evidence made a
# file CI tools refuse to read. They are written as U+FFFD.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _text(value: str) -> str:
    # A raw CR in element text reaches readers as LF (XML end-of-line handling): a CRLF in
    # the evidence came back as one LF, a lone CR as a line break. &#13; keeps it.
    return escape(_NOT_XML.sub("\ufffd", value), {"\r": "&#13;"})


def _attr(value: str) -> str:
    return quoteattr(_NOT_XML.sub("\ufffd", value))


def _last_attempt(column: str) -> Case:
    """The item's last attempt's ``column``, read only for an item without a grade."""
    last = Attempt.objects.filter(item=OuterRef("pk")).order_by("-number").values(column)[:1]
    return Case(When(status="", then=Subquery(last)), default=Value(""), output_field=TextField())


_LAST_ATTEMPT_ERROR = {"error_code": _last_attempt("error_code"), "error": _last_attempt("error")}


def export_junit(run: Run) -> Iterator[str]:
    """A ``<testsuite>`` per deployment, a ``<testcase>`` per case (and repetition): FAILED
    is a ``<failure>`` with the failing expectations and their evidence; ERROR and
    infra/config errors are ``<error>`` (an item without a grade carries its last
    attempt's error code and message); NOT_EVALUATED, UNAVAILABLE, cancelled and pending
    are ``<skipped>``. Suite totals come from the lane counters."""
    yield '<?xml version="1.0" encoding="UTF-8"?>\n'
    yield f"<testsuites name={_attr(f'agentclash run {run.pk}')}>\n"
    for lane in RunLane.objects.filter(run=run).order_by("position"):
        total = lane.passed + lane.failed + lane.not_evaluated + lane.unavailable + lane.errored
        total += lane.infra_error + lane.config_error + lane.cancelled + max(0, lane.pending)
        errors = lane.errored + lane.infra_error + lane.config_error
        skipped = lane.not_evaluated + lane.unavailable + lane.cancelled + max(0, lane.pending)
        yield (
            f'  <testsuite name={_attr(lane.deployment_name)} tests="{total}" '
            f'failures="{lane.failed}" errors="{errors}" skipped="{skipped}">\n'
        )
        qs = (
            RunItem.objects.filter(lane=lane)
            .annotate(**_LAST_ATTEMPT_ERROR)
            .order_by("id")
            .values_list("challenge_key", "case_key", "repetition", "status", "state", "last_category",
                         "reason_code", "latency_ms", "grade", "attempt_count", "error_code", "error")
        )  # fmt: skip
        parts: list[str] = []
        for (
            ch, case, rep, status, state, category, reason, latency, grade, attempts, error_code, error
        ) in qs.iterator(chunk_size=CHUNK):  # fmt: skip
            name = case if rep == 1 else f"{case} #{rep}"
            seconds = f"{(latency or 0) / 1000:.3f}"
            head = f'    <testcase classname={_attr(ch)} name={_attr(name)} time="{seconds}"'
            shown = display_status(status, state, category)
            if shown == "PASSED":
                parts.append(head + "/>\n")
            elif shown == "FAILED":
                failing = _failing_expectations(grade)
                lines = []
                for e in failing:
                    lines.append(f"{e.get('key')}: {e.get('status')}: {e.get('text') or ''}")
                    evidence = e.get("evidence")
                    if evidence:
                        text = evidence if isinstance(evidence, str) else orjson.dumps(evidence).decode()
                        lines.append("  evidence: " + text[:2000])
                message = ", ".join(str(e.get("key")) for e in failing) or (reason or "failed")
                parts.append(
                    head
                    + f'>\n      <failure message={_attr("failed: " + message)} type="FAILED">'
                    + _text("\n".join(lines))
                    + "</failure>\n    </testcase>\n"
                )
            elif shown in ("infra_error", "config_error") and (error_code or error):
                # no grade: the last attempt says what went wrong (CI shows the message)
                told = f"{error_code or shown}: {error}" if error else error_code
                parts.append(
                    head
                    + f">\n      <error message={_attr(told[:500])} type={_attr(shown)}>"
                    + _text(f"{told}\n{attempts} attempt{'' if attempts == 1 else 's'}")
                    + "</error>\n    </testcase>\n"
                )
            elif shown in ("ERROR", "infra_error", "config_error"):
                parts.append(
                    head + f">\n      <error message={_attr(reason or shown)} type={_attr(shown)}/>\n"
                    "    </testcase>\n"
                )
            else:
                parts.append(
                    head + f">\n      <skipped message={_attr(reason or shown)}/>\n    </testcase>\n"
                )
            if len(parts) >= 200:
                yield "".join(parts)
                parts = []
        yield "".join(parts)
        yield "  </testsuite>\n"
    yield "</testsuites>\n"


WRITERS = {"jsonl": export_jsonl, "csv": export_csv, "junit": export_junit, "grading": export_grading}


def export_stream(run: Run, fmt: str) -> Iterator[str]:
    try:
        writer = WRITERS[fmt]
    except KeyError:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}") from None
    return writer(run)


def export_response(run: Run, fmt: str) -> StreamingHttpResponse:
    """A streamed HTTP download of the export (API and pages)."""
    stream = export_stream(run, fmt)
    response = StreamingHttpResponse((chunk.encode() for chunk in stream), content_type=CONTENT_TYPES[fmt])
    response["Content-Disposition"] = f'attachment; filename="run-{run.pk}.{FILE_SUFFIX[fmt]}"'
    return response
