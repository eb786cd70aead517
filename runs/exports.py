"""Streamed run exports: ``jsonl``, ``csv``, ``junit``, ``grading`` (interfaces.md §6–§7).

Each writer is a generator of text chunks over ``.iterator(chunk_size=...)`` of plain values,
so a run of any size is exported without loading it. ``export_stream(run, format)`` picks
one; ``CONTENT_TYPES`` and ``FILE_SUFFIX`` serve HTTP responses and files. Shared by the run
API, the ``run export`` command and the run pages.

Every format lists the run's items in one order (their ids: lane by lane, each in input-set
order and repetition), read in one snapshot (``_snapshot``). A run not finished is exported
as it stands: its unfinished cases are ``pending`` (JSONL, CSV, a ``<skipped>`` JUnit
testcase) and absent from ``grading``, which holds graded cases only; the JUnit file names
the run's status. A re-scored run exports each item's current grade (the archived revisions
stay in ``GradeRevision``); while a re-score runs, items not yet re-graded keep the previous one.
"""

from __future__ import annotations

import contextlib
import csv
import io
import math
import re
from collections import Counter
from collections.abc import Iterator
from decimal import Decimal
from typing import Any
from xml.sax.saxutils import escape, quoteattr

import orjson
from django.db import connection, transaction
from django.db.models import Case, Count, OuterRef, Subquery, Sum, TextField, Value, When
from django.db.models.fields.json import KeyTransform
from django.http import StreamingHttpResponse

from runs.documents import display_status, run_url
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
# The CSV the run page links starts with a UTF-8 byte order mark: Excel opens a CSV without
# one in the system's legacy code page (a deployment "dép" read "dÃ©p"). The API and ``run
# export`` write none: scripts read them (Python's csv module with encoding="utf-8" would
# see the mark in the first column's name) and they stay byte for byte what ``run export``
# writes.
BOM = "\ufeff".encode()

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


def _cell(value: Any) -> Any:
    """A CSV cell: null (and a non-finite float, null in JSONL) is empty; a float is written
    in positional notation, its shortest round-trip digits (a cost of 1.23e-05 dollars is
    0.0000123, as the JSONL has it), never localised; text is kept as it is."""
    if value is None:
        return ""
    if isinstance(value, float):
        if not math.isfinite(value):
            return ""
        return format(Decimal(repr(value)), "f")
    return value


# What a spreadsheet reads as the start of a formula (OWASP "CSV injection"): a case key
# ``=HYPERLINK(...)`` from a pack, or a deployment named ``@SUM(...)``, would be evaluated on
# the machine of whoever opens the page's download in Excel or LibreOffice.
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _spreadsheet_text(value: Any) -> Any:
    """``value`` with a ``'`` before it when it is text a spreadsheet would run as a formula
    (the ``'`` makes Excel and LibreOffice show the rest as text); anything else unchanged."""
    if isinstance(value, str) and value.startswith(FORMULA_START):
        return "'" + value
    return value


def export_csv(run: Run, *, excel: bool = False) -> Iterator[str]:
    """One row per case per deployment (per repetition), ``CSV_COLUMNS`` in that order after a
    header row; RFC 4180 (CRLF, fields quoted when they hold a comma, a quote, CR or LF);
    UTF-8 without a byte order mark (``BOM``). ``excel`` (the page's download): text that a
    spreadsheet would run as a formula starts with ``'`` (``_spreadsheet_text``); the API and
    ``run export`` keep every value as stored, for scripts."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")  # RFC 4180: a field holding CR or LF is quoted
    writer.writerow(CSV_COLUMNS)
    for count, v in enumerate(_rows(run, *_ROW_FIELDS), start=1):
        flat = _flat(v)
        if excel:
            writer.writerow([_cell(_spreadsheet_text(flat[c])) for c in CSV_COLUMNS])
        else:
            writer.writerow([_cell(flat[c]) for c in CSV_COLUMNS])
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


def _cut(text: str, limit: int = 500) -> str:
    return text if len(text) <= limit else text[: limit - 4] + " […]"


def _expectation_lines(expectations: Any, statuses: tuple[str, ...]) -> list[str]:
    """``key: STATUS: text`` and the evidence (cut at 2,000 characters) of the grade's
    expectations with one of ``statuses``: the body of a ``<failure>``, ``<error>`` or
    ``<skipped>``, which CI pages show as the test's details."""
    lines: list[str] = []
    for e in expectations if isinstance(expectations, list) else []:
        if not isinstance(e, dict) or e.get("status") not in statuses:
            continue
        lines.append(f"{e.get('key')}: {e.get('status')}: {e.get('text') or ''}")
        evidence = e.get("evidence")
        if evidence:
            text = evidence if isinstance(evidence, str) else orjson.dumps(evidence).decode()
            lines.append("  evidence: " + _cut(text, 2000))
    return lines


def _keys(expectations: Any, statuses: tuple[str, ...]) -> str:
    listed = expectations if isinstance(expectations, list) else []
    return ", ".join(str(e.get("key")) for e in listed if isinstance(e, dict) and e.get("status") in statuses)


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
# Only the grade's expectations are read (not its claims, eval feedback, metrics...): a
# chunk of items holds less.
_EXPECTATIONS = {"expectations": KeyTransform("expectations", "grade")}


# What a display status (runs.documents.display_status) is in JUnit: None for a pass, else
# the child element of its <testcase>. Suite and file totals are counted with it too.
_JUNIT_KIND = {
    "PASSED": None,
    "FAILED": "failure",
    "ERROR": "error",
    "infra_error": "error",
    "config_error": "error",
}


def _junit_kind(shown: str) -> str | None:
    return _JUNIT_KIND.get(shown, "skipped")  # NOT_EVALUATED, UNAVAILABLE, cancelled, pending


def _totals(counts: Counter[str | None], ms: float) -> str:
    return (
        f'tests="{counts.total()}" failures="{counts["failure"]}" errors="{counts["error"]}" '
        f'skipped="{counts["skipped"]}" time="{ms / 1000:.3f}"'
    )


def export_junit(run: Run) -> Iterator[str]:
    """A ``<testsuite>`` per deployment (lane order), a ``<testcase>`` per case (and
    repetition: ``name`` is the case key, ``"<case> #<n>"`` from the second repetition on;
    ``classname`` the challenge key). FAILED is a ``<failure>`` with the failing
    expectations and their evidence; ERROR and infra/config errors are ``<error>`` (ERROR
    with its errored expectations, an item without a grade with its last attempt's error
    code and message); NOT_EVALUATED, UNAVAILABLE, cancelled and pending are ``<skipped>``.
    ``tests``, ``failures``, ``errors``, ``skipped`` and ``time`` (the sum of the cases'
    latencies) of ``<testsuites>`` and each ``<testsuite>`` are counted from the same
    items, in the same snapshot (``export_stream``), so they match the testcases even while
    the run is running. Each suite's ``<properties>`` carry ``run_id``, ``run_status`` (a
    run not ``completed`` is a partial report: its unfinished cases are ``pending``) and
    ``scoring_revision``."""
    status, revision = Run.objects.filter(pk=run.pk).values_list("status", "scoring_revision").get()
    url = run_url(run)
    lanes = list(RunLane.objects.filter(run=run).order_by("position").values_list("id", "deployment_name"))
    counts: dict[Any, Counter[str | None]] = {lane_id: Counter() for lane_id, _ in lanes}
    ms: dict[Any, float] = dict.fromkeys(counts, 0.0)
    grouped = (
        RunItem.objects.filter(run=run)
        .values_list("lane_id", "status", "state", "last_category")
        .annotate(n=Count("id"), ms=Sum("latency_ms"))
        .order_by()
    )
    for lane_id, item_status, state, category, n, lane_ms in grouped:
        counts[lane_id][_junit_kind(display_status(item_status, state, category))] += n
        ms[lane_id] += lane_ms or 0.0
    properties = "".join(
        f"      <property name={_attr(name)} value={_attr(str(value))}/>\n"
        for name, value in (
            ("run_id", run.pk),
            ("run_status", status),
            ("scoring_revision", revision),
            ("url", url),
        )
    )
    yield '<?xml version="1.0" encoding="UTF-8"?>\n'
    everything = sum(counts.values(), Counter())
    yield f"<testsuites name={_attr(f'agentclash run {run.pk}')} {_totals(everything, sum(ms.values()))}>\n"
    for lane_id, deployment in lanes:
        yield (
            f"  <testsuite name={_attr(deployment)} {_totals(counts[lane_id], ms[lane_id])}>\n"
            f"    <properties>\n{properties}    </properties>\n"
        )
        qs = (
            RunItem.objects.filter(lane_id=lane_id)
            .annotate(**_LAST_ATTEMPT_ERROR, **_EXPECTATIONS)
            .order_by("id")
            .values_list("id", "challenge_key", "case_key", "repetition", "status", "state", "last_category",
                         "reason_code", "latency_ms", "expectations", "attempt_count", "error_code", "error")
        )  # fmt: skip
        parts: list[str] = []
        for (
            pk, ch, case, rep, item_status, state, category, reason, latency, expectations, attempts, error_code,
            error
        ) in qs.iterator(chunk_size=CHUNK):  # fmt: skip
            name = case if rep == 1 else f"{case} #{rep}"
            seconds = f"{(latency or 0) / 1000:.3f}"
            head = f'    <testcase classname={_attr(ch)} name={_attr(name)} time="{seconds}"'
            shown = display_status(item_status, state, category)
            kind = _junit_kind(shown)
            if kind is None:
                parts.append(head + "/>\n")
                continue
            if shown in ("infra_error", "config_error") and (error_code or error):
                # no grade: the last attempt says what went wrong (CI shows the message)
                told = f"{error_code or shown}: {error}" if error else error_code
                message = told
                lines = [told, f"{attempts} attempt{'' if attempts == 1 else 's'}"]
            elif shown == "FAILED":
                message = "failed: " + (_keys(expectations, ("FAILED", "ERROR")) or reason or "failed")
                lines = _expectation_lines(expectations, ("FAILED", "ERROR"))
            else:
                message = reason or shown
                lines = _expectation_lines(expectations, (shown,))
            element = f"<{kind} message={_attr(_cut(message))}" + (
                "" if kind == "skipped" else f" type={_attr(shown)}"
            )
            if lines:
                element += ">" + _text("\n".join(lines)) + f"</{kind}>"
            else:
                element += "/>"
            link = _text(f"case page: {url}cases/{pk}/")
            parts.append(
                head + f">\n      {element}\n      <system-out>{link}</system-out>\n    </testcase>\n"
            )
            if len(parts) >= 200:
                yield "".join(parts)
                parts = []
        yield "".join(parts)
        yield "  </testsuite>\n"
    yield "</testsuites>\n"


WRITERS = {"jsonl": export_jsonl, "csv": export_csv, "junit": export_junit, "grading": export_grading}


@contextlib.contextmanager
def _snapshot() -> Iterator[None]:
    """On PostgreSQL, one REPEATABLE READ, READ ONLY transaction around an export: its
    queries (the run, the lanes, the totals, the items) see the database at one moment, so
    the JUnit totals are those of its testcases even while workers record results. Within a
    transaction already open the export uses that one. SQLite is left alone: Django opens
    its transactions IMMEDIATE there (a write lock for the whole download)."""
    if connection.vendor != "postgresql" or connection.in_atomic_block:
        yield
        return
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        yield


def _consistent(stream: Iterator[str]) -> Iterator[str]:
    with _snapshot():
        yield from stream  # closing this generator closes ``stream`` and ends the transaction


def export_stream(run: Run, fmt: str, *, excel: bool = False) -> Iterator[str]:
    try:
        writer = WRITERS[fmt]
    except KeyError:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}") from None
    if excel and fmt == "csv":
        return _consistent(export_csv(run, excel=True))
    return _consistent(writer(run))


def _encoded(stream: Iterator[str], prefix: bytes) -> Iterator[bytes]:
    try:
        if prefix:
            yield prefix
        for chunk in stream:
            yield chunk.encode()
    finally:
        stream.close()  # type: ignore[attr-defined]  # a download cut short ends the snapshot now


def export_response(run: Run, fmt: str, *, excel: bool = False) -> StreamingHttpResponse:
    """A streamed HTTP download of the export (API and pages). ``excel``: a CSV starts with
    a UTF-8 byte order mark (see ``BOM``) and its formula-like text is quoted (``export_csv``)."""
    prefix = BOM if excel and fmt == "csv" else b""
    response = StreamingHttpResponse(
        _encoded(export_stream(run, fmt, excel=excel), prefix), content_type=CONTENT_TYPES[fmt]
    )
    response["Content-Disposition"] = f'attachment; filename="run-{run.pk}.{FILE_SUFFIX[fmt]}"'
    return response
