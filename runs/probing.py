"""Baseline-probe findings of a run's cases (grading.md §9a), computed once per run.

``probe_run(run_id)`` (the ``runs.probe_run`` task, enqueued with the run's dispatch so it
runs on another worker process while the calls go out) stores ``Run.case_findings``:
``{"<challenge>\\x1f<case>": [suggestion dicts]}``. A later run of the same pack version and
input set copies them when it is created (``Run.objects.copy_previous_findings``) and is not
probed again. Dispatchers pick the stored findings up (``load_stored_findings``)
and pass them to ``grade_case``; until then they compute a case's findings themselves
(``runs.recording.case_findings``), with the same result.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from typing import Any

import orjson
from django.db import connection, transaction

from grading.engine import grade_case
from grading.engine.critique import probe_case, sort_findings
from grading.engine.types import Suggestion
from runs.judging import run_judge_probes
from runs.models import Run, RunStatus
from runs.packdata import chunked, version_data
from runs.recording import LaneContext, findings_key, forget_computed_findings


class StoredFindings:
    """A run's stored findings as each case's JSON text, parsed when that case is graded.

    Parsing the whole document per dispatch slice (``orjson.loads`` of about 0.5 kB per case
    into ``Suggestion`` objects) peaked at about 77 MiB and kept 10 MiB for 9,900 cases in
    every dispatching process; the texts alone are about the document's size."""

    __slots__ = ("_texts",)

    def __init__(self, texts: dict[str, str]) -> None:
        self._texts = texts

    def __len__(self) -> int:
        return len(self._texts)

    def __contains__(self, key: object) -> bool:
        return key in self._texts

    def get(self, key: str, default: Any = None) -> list[Suggestion] | Any:
        text = self._texts.get(key)
        if text is None:
            return default
        return [Suggestion.from_dict(d) for d in orjson.loads(text)]


# Each case's findings as text, split inside the database: the client never holds the
# whole document parsed.
_STORED_TYPE_SQL = {
    "postgresql": "SELECT jsonb_typeof(case_findings) FROM runs_run WHERE id = %s",
    "sqlite": "SELECT json_type(case_findings) FROM runs_run WHERE id = %s",
}
_STORED_EACH_SQL = {
    "postgresql": "SELECT e.key, e.value::text FROM runs_run r, jsonb_each(r.case_findings) e WHERE r.id = %s",
    "sqlite": "SELECT e.key, e.value FROM runs_run r, json_each(r.case_findings) e WHERE r.id = %s",
}


def load_stored_findings(ctx: LaneContext, run_id: Any) -> bool:
    """Put the run's stored findings on ``ctx`` (a ``StoredFindings``); True when they are there."""
    if ctx.stored_findings is not None:
        return True
    vendor = connection.vendor
    if vendor not in _STORED_TYPE_SQL:
        raise NotImplementedError(f"stored findings are read on PostgreSQL or SQLite, not {vendor}")
    run_pk = Run._meta.pk.get_db_prep_value(run_id, connection)
    with connection.cursor() as cursor:
        cursor.execute(_STORED_TYPE_SQL[vendor], [run_pk])
        row = cursor.fetchone()
        if row is None or row[0] != "object":  # not stored yet, or a JSON null stored as a value
            return False
        cursor.execute(_STORED_EACH_SQL[vendor], [run_pk])
        texts = dict(cursor.fetchall())
    ctx.stored_findings = StoredFindings(texts)
    forget_computed_findings()  # the stored ones serve from now on
    return True


def probe_run(run_id: Any) -> str:
    run = Run.objects.light().filter(pk=run_id, case_findings__isnull=True).first()
    if run is None:
        return "nothing to do"
    if run.status not in (RunStatus.QUEUED, RunStatus.RUNNING):
        return f"run is {run.status}"
    if Run.objects.copy_previous_findings(run):
        return "copied"
    data = version_data(run.pack_version, run.input_set.key if run.input_set_id else None)
    # critique.probe_judges: judges on the empty baseline, charged to the run's judge budget
    judged = run_judge_probes(
        run, ((case, dataclasses.replace(base, case_findings=[])) for case, base in data.iter_cases())
    )

    def rows() -> Iterator[tuple[str, str]]:
        for case, base in data.iter_cases():
            probe_ctx = dataclasses.replace(base, case_findings=[])
            suggestions = probe_case(data.spec, case, probe_ctx, grade=grade_case)
            extra = judged.get((case.challenge_key, case.case_key))
            if extra:
                suggestions = sort_findings(data.spec, list(suggestions) + extra)
            yield (
                findings_key(case.challenge_key, case.case_key),
                orjson.dumps([s.to_dict() for s in suggestions]).decode(),
            )

    store_findings(run.pk, rows())
    return "computed"


# The document is assembled inside the database from one row per case: a probing process
# holds one case's findings at a time, never the whole document (5.6 MB of JSON text for
# 9,900 cases, built and then copied again into the statement, kept ~15 MiB of its RSS).
_LOAD_TABLE = "runs_findings_load"
_ASSEMBLE_SQL = {
    "postgresql": (
        f"UPDATE runs_run SET case_findings = (SELECT COALESCE(jsonb_object_agg(k, v::jsonb),"  # noqa: S608
        f" '{{}}'::jsonb) FROM {_LOAD_TABLE}) WHERE id = %s AND case_findings IS NULL"
    ),
    "sqlite": (
        f"UPDATE runs_run SET case_findings = (SELECT json_group_object(k, json(v))"  # noqa: S608
        f" FROM {_LOAD_TABLE}) WHERE id = %s AND case_findings IS NULL"
    ),
}
_LOAD_BATCH = 500


def store_findings(run_id: Any, rows: Iterable[tuple[str, str]]) -> None:
    """Store ``{key: findings}`` as ``Run.case_findings`` from ``(key, JSON text)`` rows,
    unless the run has findings already; all or nothing (one transaction).

    On SQLite the rows (each a probe of its case: ~0.5 ms of CPU, a second for 2,000 cases)
    are loaded into the temporary table outside any transaction: a temporary table is the
    connection's own, and writing it takes no lock of the database. Only the UPDATE that
    assembles the document is a transaction: inside one, the probing held the database's one
    write lock (IMMEDIATE transactions), and every write of the web server and the worker
    waited for it."""
    vendor = connection.vendor
    if vendor not in _ASSEMBLE_SQL:
        raise NotImplementedError(f"findings are stored on PostgreSQL or SQLite, not {vendor}")
    run_pk = Run._meta.pk.get_db_prep_value(run_id, connection)
    if vendor == "postgresql":
        with transaction.atomic():
            connection.ensure_connection()
            # Rows are loaded a batch at a time: producing them reads the database (the cases),
            # which cannot happen on this connection while a COPY is open.
            with connection.connection.cursor() as cursor:
                # IF NOT EXISTS and emptied: inside an outer transaction the table outlives this one.
                cursor.execute(
                    f"CREATE TEMP TABLE IF NOT EXISTS {_LOAD_TABLE} (k text, v text) ON COMMIT DROP"
                )
                cursor.execute(f"DELETE FROM {_LOAD_TABLE}")  # noqa: S608
                for batch in chunked(rows, _LOAD_BATCH):
                    with cursor.copy(f"COPY {_LOAD_TABLE} (k, v) FROM STDIN") as copy:
                        for row in batch:
                            copy.write_row(row)
                cursor.execute(_ASSEMBLE_SQL[vendor], [run_pk])
        return
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TEMP TABLE IF NOT EXISTS {_LOAD_TABLE} (k text, v text)")
        try:
            cursor.execute(f"DELETE FROM {_LOAD_TABLE}")  # noqa: S608
            for batch in chunked(rows, _LOAD_BATCH):
                cursor.executemany(f"INSERT INTO {_LOAD_TABLE} (k, v) VALUES (%s, %s)", batch)  # noqa: S608
            with transaction.atomic():
                cursor.execute(_ASSEMBLE_SQL[vendor], [run_pk])
        finally:
            cursor.execute(f"DROP TABLE IF EXISTS {_LOAD_TABLE}")
