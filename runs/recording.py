"""Grading one finished item and writing batches of results (the ``item_record_grade`` step).

:func:`grade_item` turns an executed item (attempt outcomes) or an uploaded result into an
:class:`ItemResult` (grading with ``grading.engine.grade_case``); :func:`record_results`
writes a batch of them for one lane in one transaction: a guarded re-read of the items
(only items still claimed by this owner, or still pending for a trace import, are written:
a redelivered task never grades twice), one pipelined UPDATE per item, ``bulk_create`` of
the attempts, one UPDATE of the lane's counters and one of the run's open count. It
returns the ids it wrote. The current grade lives on the item (``RunItem.grade``); a
re-score archives it as a ``GradeRevision`` before replacing it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from grading.engine import CaseGrade, grade_case
from grading.engine.aggregate import CaseRecord, LaneCounters, record_from_grade
from grading.engine.critique import probe_case
from grading.engine.evidence import evidence_from_response
from grading.engine.stats import seed_for
from grading.engine.types import Evidence, Timing
from runs.executors.base import AttemptCategory, AttemptOutcome
from runs.models import (
    ItemState,
    Run,
    RunLane,
)
from runs.packdata import VersionData
from runs.storable import storable, storable_json

log = logging.getLogger(__name__)

# grade status -> RunLane count column
STATUS_COLUMNS = {
    "PASSED": "passed",
    "FAILED": "failed",
    "NOT_EVALUATED": "not_evaluated",
    "UNAVAILABLE": "unavailable",
    "ERROR": "errored",
}
CATEGORY_COLUMNS = {
    AttemptCategory.INFRA_ERROR: "infra_error",
    AttemptCategory.CONFIG_ERROR: "config_error",
    AttemptCategory.CANCELLED: "cancelled",
}

# Findings a dispatcher computed itself (before the probe task stored the run's): an LRU of
# FINDINGS_CACHE_SIZE cases per process (it held up to 50,000 cases, ~4 kB each: worker memory
# grew with the pack); emptied once a run's stored findings are loaded.
FINDINGS_CACHE_SIZE = 1024
_findings_cache: OrderedDict[tuple[int, str, str | None, str, str], list[Any]] = OrderedDict()
_findings_lock = threading.Lock()


@dataclass(slots=True)
class ItemKey:
    """What grading needs to know about one item (plain values, no ORM instance)."""

    id: int
    challenge_key: str
    case_key: str
    repetition: int
    attempt_count: int = 0


@dataclass(slots=True)
class ItemResult:
    item_id: int
    attempts: list[AttemptOutcome] = field(default_factory=list)
    category: str = AttemptCategory.OK
    grade: dict[str, Any] | None = None
    evidence: dict[str, Any] | None = None
    record: CaseRecord | None = None
    latency_ms: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    first_attempt_number: int = 1
    key: ItemKey | None = None  # set for an executed item (``unstorable_result`` needs it)


@dataclass(slots=True)
class LaneContext:
    """Per-lane grading inputs, built once per dispatch."""

    run_id: str
    lane_id: int
    deployment_name: str
    deployment_kind: str
    evidence_level: str
    system_prompt: str | None
    pack_version_id: int
    input_set_key: str | None
    data: VersionData
    scoring_revision: int
    repetitions: int
    judge: Any = None
    pack_hash: str = ""
    # runs.probing.StoredFindings ("challenge\x1fcase" -> [Suggestion] by .get): Run.case_findings
    # once the probe task stored them
    stored_findings: Any = None


def findings_key(challenge_key: str, case_key: str) -> str:
    """The key of a case in ``Run.case_findings``."""
    return f"{challenge_key}\x1f{case_key}"


def probe_findings(ctx: LaneContext, case: Any, base: Any) -> list[Any]:
    probe_ctx = dataclasses.replace(base, case_findings=[])
    return list(probe_case(ctx.data.spec, case, probe_ctx, grade=grade_case))


def forget_computed_findings() -> None:
    """Drop the findings this process computed itself (the run's stored findings replace them)."""
    with _findings_lock:
        _findings_cache.clear()


def case_findings(ctx: LaneContext, case: Any, base: Any) -> list[Any]:
    """Baseline-probe findings of a case (they depend on the spec and the case only), passed
    to ``grade_case``: from the run's stored findings (``Run.case_findings``, computed once
    per run by the ``runs.probe_run`` task) when present, else computed once per pack
    version and case in this process."""
    if ctx.stored_findings is not None:
        stored = ctx.stored_findings.get(findings_key(case.challenge_key, case.case_key))
        if stored is not None:
            return stored
    key = (ctx.pack_version_id, ctx.pack_hash, ctx.input_set_key, case.challenge_key, case.case_key)
    with _findings_lock:
        hit = _findings_cache.get(key)
        if hit is not None:
            _findings_cache.move_to_end(key)
    if hit is not None:
        return hit
    found = probe_findings(ctx, case, base)
    with _findings_lock:
        _findings_cache[key] = found
        while len(_findings_cache) > FINDINGS_CACHE_SIZE:
            _findings_cache.popitem(last=False)
    return found


def grade_context(ctx: LaneContext, item: ItemKey, base: Any, *, attempt: int, findings: list[Any]) -> Any:
    return dataclasses.replace(
        base,
        run_id=ctx.run_id,
        lane_id=str(ctx.lane_id),
        deployment=ctx.deployment_name,
        repetition=item.repetition,
        attempt=attempt,
        pack_slug=ctx.data.pack_slug,
        pack_version=ctx.data.pack_number,
        deployment_kind=ctx.deployment_kind,
        evidence_level=ctx.evidence_level,
        seed=seed_for(
            ctx.run_id, ctx.deployment_name, f"{item.challenge_key}/{item.case_key}#{item.repetition}"
        ),
        case_findings=list(findings),
    )


def evidence_document(response: dict[str, Any], evidence: Evidence) -> dict[str, Any]:
    timing = evidence.timing
    return {
        "response": response,
        "timing": {
            "started_at": timing.started_at,
            "ended_at": timing.ended_at,
            "executor_duration_seconds": timing.executor_duration_seconds,
        }
        if timing is not None
        else None,
    }


def rebuild_evidence(ctx: LaneContext, base: Any, document: dict[str, Any]) -> Evidence:
    """The Evidence of a recorded response (re-scoring: no agent is called)."""
    timing = document.get("timing")
    return evidence_from_response(
        document.get("response") or {},
        deployment_kind=ctx.deployment_kind,
        evidence_level=ctx.evidence_level,
        rendered_instructions=base.rendered_instructions,
        system_prompt=ctx.system_prompt,
        tool_policy=dict(base.tool_policy),
        working_directory=base.working_directory,
        timing=Timing(**timing) if isinstance(timing, dict) else None,
    )


def grade_evidence(
    ctx: LaneContext, item: ItemKey, evidence: Evidence, response: dict[str, Any], *, attempt: int
) -> ItemResult:
    case, base = ctx.data.case(item.challenge_key, item.case_key)
    findings = case_findings(ctx, case, base)
    context = grade_context(ctx, item, base, attempt=attempt, findings=findings)
    try:
        grade = grade_case(evidence, case, ctx.data.spec, context=context, judge=ctx.judge)
        if ctx.judge is not None:
            from runs.judging import with_model_claims

            grade = with_model_claims(
                ctx.judge, grade, evidence=evidence, case=case, spec=ctx.data.spec, context=context
            )
        doc = grade.to_dict()  # claims and critique are built here, outside grade_case's net
    except Exception as exc:  # one item's grade, never the dispatcher's slice
        log.exception("item %s (%s/%s): grading crashed", item.id, item.challenge_key, item.case_key)
        doc = CaseGrade.crashed(case, context, exc).to_dict()
    metrics = evidence.metrics
    record = record_from_grade(doc, metrics=metrics, content_hash=case.content_hash)
    return ItemResult(
        item_id=item.id,
        category=AttemptCategory.OK,
        grade=doc,
        evidence=evidence_document(response, evidence),
        record=record,
        input_tokens=getattr(metrics, "input_tokens", None),
        output_tokens=getattr(metrics, "output_tokens", None),
        cost_usd=getattr(metrics, "cost_usd", None),
    )


def grade_outcomes(
    ctx: LaneContext, item: ItemKey, outcomes: list[AttemptOutcome], response: dict[str, Any] | None
) -> ItemResult:
    """The result of an executed item: graded when its last attempt is ok."""
    last = outcomes[-1]
    number = item.attempt_count + len(outcomes)
    if last.ok and last.evidence is not None:
        result = grade_evidence(ctx, item, last.evidence, response or {}, attempt=number)
    else:
        result = ItemResult(item_id=item.id, category=str(last.category))
    result.attempts = outcomes
    result.key = item
    result.first_attempt_number = item.attempt_count + 1
    result.latency_ms = last.latency_ms
    if result.record is not None:
        result.record.latency_ms = last.latency_ms
    return result


def unstorable_result(ctx: LaneContext, result: ItemResult, exc: BaseException) -> ItemResult:
    """What is written for an executed item whose own write failed on its data (a value the
    database refused that nothing before the write anticipated; ``runs.dispatch_threads``
    finds the item by writing its batch in halves): the item is done, graded ERROR /
    evaluator_error when it had a grade (the evaluator could not keep what it saw: never
    the agent's failure), its response and evidence left out, its attempts kept with their categories,
    codes and times but not their texts. The reason is in the grade's message and in the
    attempts' error."""
    if result.key is None:
        raise ValueError("unstorable_result needs the item's key (grade_outcomes sets it)")
    reason = f"the result could not be stored: {type(exc).__name__}"
    attempts = [
        dataclasses.replace(a, error=reason, body_excerpt="", response=None, evidence=None)
        for a in result.attempts
    ]
    out = ItemResult(
        item_id=result.item_id,
        attempts=attempts,
        category=result.category,
        latency_ms=result.latency_ms,
        first_attempt_number=result.first_attempt_number,
        key=result.key,
    )
    if result.grade is None:
        return out
    item = result.key
    case, base = ctx.data.case(item.challenge_key, item.case_key)
    number = result.first_attempt_number + len(result.attempts) - 1
    context = grade_context(ctx, item, base, attempt=number, findings=[])
    doc = CaseGrade.crashed(case, context, exc, what="the result could not be stored").to_dict()
    out.grade = doc  # no evidence: a re-score keeps this grade rather than grade nothing
    out.record = record_from_grade(doc, metrics=None, content_hash=case.content_hash)
    out.record.latency_ms = result.latency_ms
    return out


# --- writing -------------------------------------------------------------------------------


def _attempt_rows(item_id: int, result: ItemResult) -> list[tuple[Any, ...]]:
    """The item's attempts as rows in ``_ATTEMPT_COLUMNS`` order (plain tuples: a model
    instance per attempt cost more than writing it)."""
    return [
        (
            item_id,
            result.first_attempt_number + offset,
            str(outcome.category),
            outcome.status_code,
            outcome.error_code[:100],
            storable(outcome.error),  # an agent's text may be quoted in it
            outcome.latency_ms,
            outcome.body_excerpt.replace("\x00", ""),
            # an endless Retry-After (runs.retry) is stored as null, on every database
            outcome.retry_after
            if outcome.retry_after is None or math.isfinite(outcome.retry_after)
            else None,
            outcome.started_at,
            outcome.ended_at,
        )
        for offset, outcome in enumerate(result.attempts)
    ]


_ITEM_COLUMNS = (
    "state", "claim_owner", "claim_deadline", "attempt_count", "last_category", "status",
    "outcome_class", "reason_code", "score", "grade", "evidence", "scoring_revision",
    "latency_ms", "input_tokens", "output_tokens", "cost_usd", "finished_at",
)  # fmt: skip
_JSON_COLUMNS = frozenset({"grade", "evidence"})


def _json(value: Any) -> str | None:
    return None if value is None else storable_json(value).decode()


# PostgreSQL types of the batch document's fields (jsonb_to_recordset).
_PG_TYPES = {
    "id": "bigint", "state": "varchar", "claim_owner": "varchar", "claim_deadline": "timestamptz", "attempt_count": "integer",
    "last_category": "varchar", "status": "varchar", "outcome_class": "varchar", "reason_code": "varchar",
    "score": "double precision", "grade": "jsonb", "evidence": "jsonb", "scoring_revision": "integer",
    "latency_ms": "double precision", "input_tokens": "bigint", "output_tokens": "bigint",
    "cost_usd": "double precision", "finished_at": "timestamptz",
}  # fmt: skip


def _item_json(item: _ItemRow) -> dict[str, Any]:
    out: dict[str, Any] = {"id": item.pk}
    for column in _ITEM_COLUMNS:
        out[column] = getattr(item, column)
    return out


@contextlib.contextmanager
def server_cursor() -> Iterator[Any]:
    """A psycopg cursor with server-side binding on Django's connection (its own cursors
    bind on the client: a large JSON parameter would be escaped into the SQL text)."""
    import psycopg

    connection.ensure_connection()
    with psycopg.Cursor(connection.connection) as cursor:
        yield cursor


def _item_rows(items: list[_ItemRow]) -> list[list[Any]]:
    rows = []
    for item in items:
        row: list[Any] = [item.pk]
        for column in _ITEM_COLUMNS:
            value = getattr(item, column)
            if column in _JSON_COLUMNS:
                value = _json(value)
            elif isinstance(value, datetime):
                value = connection.ops.adapt_datetimefield_value(value)
            row.append(value)
        rows.append(row)
    return rows


def _write_items(items: list[_ItemRow], *, state: str, owner: str) -> list[int]:
    """Write the items' result columns where an item is still in ``state`` (and, when
    claimed, still claimed by ``owner``); returns the ids written. ``attempt_count`` of each
    item is the number of attempts to add. On PostgreSQL one ``UPDATE ... FROM
    jsonb_to_recordset(...) RETURNING`` for the batch; elsewhere one guarded UPDATE per item.
    Both are far cheaper than ``bulk_update``'s CASE expressions."""
    columns = [c for c in _ITEM_COLUMNS if c != "attempt_count"]
    guard = "state = %s" + (" AND claim_owner = %s" if state == ItemState.CLAIMED else "")
    guard_params = [state, owner] if state == ItemState.CLAIMED else [state]
    if connection.vendor == "postgresql":
        # The batch travels as one JSON document (orjson, in C) unpacked by the server with
        # jsonb_to_recordset: no per-value adaptation in Python, and the statement text is the
        # same for every batch (server-side binding; parsed and planned like any other). As
        # jsonb the document is parsed once: json_to_recordset parsed it, then parsed each
        # grade and evidence again into its jsonb column (the server's time for 2,000 P1
        # items: 76 -> 42 ms).
        doc = storable_json([_item_json(item) for item in items], option=orjson.OPT_NAIVE_UTC)
        sets = ", ".join(f"{c} = v.{c}" for c in columns)
        record = ", ".join(f"{c} {_PG_TYPES[c]}" for c in ("id", *_ITEM_COLUMNS))
        where = " AND ".join(f"t.{g}" for g in guard.split(" AND "))
        sql = (
            f"UPDATE runs_runitem AS t SET {sets}, attempt_count = t.attempt_count + v.attempt_count"  # noqa: S608 (our columns)
            f" FROM jsonb_to_recordset(%s::jsonb) AS v({record}) WHERE t.id = v.id AND {where} RETURNING t.id"
        )
        with server_cursor() as cursor:
            cursor.execute(sql, [doc.decode(), *guard_params])
            return [r[0] for r in cursor.fetchall()]
    rows = _item_rows(items)
    with connection.cursor() as cursor:
        written = []
        index = {name: i + 1 for i, name in enumerate(_ITEM_COLUMNS)}
        sets = ", ".join(f"{c} = %s" for c in columns)
        for row in rows:
            cursor.execute(
                f"UPDATE runs_runitem SET {sets}, attempt_count = attempt_count + %s"  # noqa: S608 (our columns)
                f" WHERE id = %s AND {guard}",
                [*(row[index[c]] for c in columns), row[index["attempt_count"]], row[0], *guard_params],
            )
            if cursor.rowcount:
                written.append(row[0])
        return written


def _locked(qs: Any) -> Any:
    return qs.select_for_update() if connection.features.has_select_for_update else qs


class _ItemRow:
    """An item's new result columns (``_ITEM_COLUMNS``) and its ``pk``: a model instance per
    item only carried them to the batch UPDATE."""

    __slots__ = ("pk", *_ITEM_COLUMNS)

    def __init__(self, pk: int) -> None:
        self.pk = pk


def _prepare(r: ItemResult, revision: int, now: datetime) -> _ItemRow:
    """The item's new result columns (``attempt_count`` holds the attempts to add)."""
    item = _ItemRow(r.item_id)
    item.attempt_count = len(r.attempts)
    item.state = ItemState.DONE
    item.claim_owner = ""
    item.claim_deadline = None
    item.last_category = r.category if r.attempts or r.grade is None else AttemptCategory.OK
    item.latency_ms = r.latency_ms
    item.input_tokens = r.input_tokens
    item.output_tokens = r.output_tokens
    item.cost_usd = r.cost_usd
    item.finished_at = now
    graded = r.grade is not None and r.record is not None
    item.status = (r.grade.get("status") or "") if graded and r.grade else ""
    item.outcome_class = (r.grade.get("outcome_class") or "") if graded and r.grade else ""
    item.reason_code = ((r.grade.get("reason_code") or "") if graded and r.grade else "")[:100]
    item.score = r.record.score if graded and r.record else None
    item.grade = r.grade if graded else None
    item.evidence = r.evidence if graded else None
    item.scoring_revision = revision if graded else 0
    return item


def _add_deltas(deltas: dict[str, Any], counters: LaneCounters, r: ItemResult, item: _ItemRow) -> None:
    if r.grade is not None and r.record is not None:
        counters.add(r.record)
        column = STATUS_COLUMNS.get(item.status)
        if column:
            deltas[column] = deltas.get(column, 0) + 1
        if r.record.score is not None:
            deltas["score_sum"] = deltas.get("score_sum", 0.0) + r.record.score
            deltas["scored"] = deltas.get("scored", 0) + 1
        for name, value in (
            ("agent_input_tokens", r.input_tokens),
            ("agent_output_tokens", r.output_tokens),
            ("agent_cost_usd", r.cost_usd),
            ("judge_calls", r.record.judge_calls),
            ("judge_input_tokens", r.record.judge_input_tokens),
            ("judge_output_tokens", r.record.judge_output_tokens),
            ("judge_cost_usd", r.record.judge_cost_usd),
            ("judge_charged_tokens", r.record.judge_charged_tokens),
            ("judge_charged_usd", r.record.judge_charged_usd),
        ):
            if value:
                deltas[name] = deltas.get(name, 0) + value
        return
    column = CATEGORY_COLUMNS.get(AttemptCategory(r.category))
    if column:
        deltas[column] = deltas.get(column, 0) + 1


_ATTEMPT_COLUMNS = (
    "item_id", "number", "category", "status_code", "error_code", "error", "latency_ms", "body_excerpt",
    "retry_after", "started_at", "finished_at",
)  # fmt: skip


_ATTEMPT_TYPES = (
    "bigint", "integer", "varchar", "integer", "varchar", "text", "double precision", "text",
    "double precision", "timestamptz", "timestamptz",
)  # fmt: skip


def _insert_attempts(rows: list[tuple[Any, ...]]) -> None:
    """Insert attempt rows (``_ATTEMPT_COLUMNS`` order)."""
    if not rows:
        return
    if connection.vendor == "postgresql":
        # One JSON document per batch, as for the items.
        doc = storable_json(rows, option=orjson.OPT_NAIVE_UTC)
        names = ", ".join(_ATTEMPT_COLUMNS)
        picks = ", ".join(f"(r->>{i})::{t}" for i, t in enumerate(_ATTEMPT_TYPES))
        sql = f"INSERT INTO runs_attempt ({names}) SELECT {picks} FROM json_array_elements(%s::json) AS r"  # noqa: S608 (our columns)
        with server_cursor() as cursor:
            cursor.execute(sql, [doc.decode()])
        return
    adapt = connection.ops.adapt_datetimefield_value
    one = "(" + ", ".join(["%s"] * len(_ATTEMPT_COLUMNS)) + ")"
    with connection.cursor() as cursor:
        for start in range(0, len(rows), 500):
            chunk = rows[start : start + 500]
            params: list[Any] = []
            for row in chunk:
                params += [*row[:-2], adapt(row[-2]), adapt(row[-1])]
            cursor.execute(
                f"INSERT INTO runs_attempt ({', '.join(_ATTEMPT_COLUMNS)}) VALUES "  # noqa: S608 (our columns)
                + ", ".join([one] * len(chunk)),
                params,
            )


def record_results(
    lane_id: int,
    results: Sequence[ItemResult],
    *,
    owner: str | None,
    revision: int,
    repetitions: int = 1,
    now: datetime | None = None,
) -> list[int]:
    """Write a batch of one lane's results; returns the item ids actually written.

    ``owner``: the dispatcher's claim owner (items must still be claimed by it); None for
    a trace import (items must still be pending). The item UPDATE itself is the guard (it
    only matches items in that state), so a redelivered batch writes nothing. Runs in the
    caller's transaction when there is one (no savepoint), else in its own.
    """
    if not results:
        return []
    now = now or timezone.now()
    by_id = {r.item_id: r for r in results}
    items = {r.item_id: _prepare(r, revision, now) for r in results}
    guard_state = ItemState.CLAIMED if owner is not None else ItemState.PENDING
    pg = connection.vendor == "postgresql"
    with transaction.atomic(savepoint=False):
        if pg:
            with server_cursor() as cursor:
                cursor.execute(
                    "SELECT run_id, counters::text FROM runs_runlane WHERE id = %s FOR UPDATE", [lane_id]
                )
                run_id, counters_text = cursor.fetchone()
            counters_doc = orjson.loads(counters_text) if counters_text else None
        else:
            lane_q = RunLane.objects.filter(pk=lane_id)
            run_id, counters_doc = _locked(lane_q).values_list("run_id", "counters").get()
        written = _write_items(list(items.values()), state=guard_state, owner=owner or "")
        if not written:
            return []
        counters = LaneCounters.from_dict(counters_doc) if counters_doc else LaneCounters(repetitions)
        counters.repetitions = max(counters.repetitions, repetitions)
        deltas: dict[str, Any] = {}
        attempts: list[tuple[Any, ...]] = []
        for pk in written:
            r = by_id[pk]
            attempts += _attempt_rows(pk, r)
            _add_deltas(deltas, counters, r, items[pk])
        _insert_attempts(attempts)
        n = len(written)
        if pg:
            # The lane's counters and the run's open count in one statement.
            sets = "".join(f", {name} = {name} + %s" for name in deltas)  # fixed column names
            sql = (
                f"WITH lane AS (UPDATE runs_runlane SET counters = %s::jsonb, pending = pending - %s{sets}"  # noqa: S608
                " WHERE id = %s RETURNING run_id)"
                " UPDATE runs_run SET items_open = items_open - %s WHERE id = (SELECT run_id FROM lane)"
            )
            params = [orjson.dumps(counters.to_dict()).decode(), n, *deltas.values(), lane_id, n]
            with server_cursor() as cursor:
                cursor.execute(sql, params)
            return sorted(written)
        RunLane.objects.filter(pk=lane_id).update(
            counters=counters.to_dict(),
            pending=F("pending") - n,
            **{name: F(name) + value for name, value in deltas.items()},
        )
        Run.objects.filter(pk=run_id).update(items_open=F("items_open") - n)
    return sorted(written)
