"""Baseline-probe findings of a run's cases (grading.md §9a), computed once per run.

``probe_run(run_id)`` (the ``runs.probe_run`` task, enqueued with the run's dispatch so it
runs on another worker process while the calls go out) stores ``Run.case_findings``:
``{"<challenge>\\x1f<case>": [suggestion dicts]}``. A later run of the same pack version and
input set copies them. Dispatchers pick the stored findings up (``load_stored_findings``)
and pass them to ``grade_case``; until then they compute a case's findings themselves
(``runs.recording.case_findings``), with the same result.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import orjson
from django.db import connection
from django.db.models import Subquery

from grading.engine import grade_case
from grading.engine.critique import probe_case, sort_findings
from grading.engine.types import Suggestion
from runs.judging import run_judge_probes
from runs.models import Run, RunStatus
from runs.packdata import version_data
from runs.recording import LaneContext, findings_key


def load_stored_findings(ctx: LaneContext, run_id: Any) -> bool:
    """Put the run's stored findings on ``ctx``; True when they are there."""
    if ctx.stored_findings is not None:
        return True
    # As text, parsed with orjson: several times faster than the driver's JSON loader on a
    # document of about 0.5 kB per case.
    cast = "::text" if connection.vendor == "postgresql" else ""
    sql = f"SELECT case_findings{cast} FROM runs_run WHERE id = %s"  # noqa: S608 (fixed text)
    with connection.cursor() as cursor:
        cursor.execute(sql, [Run._meta.pk.get_db_prep_value(run_id, connection)])
        row = cursor.fetchone()
    if row is None or row[0] is None:
        return False
    stored = orjson.loads(row[0])
    if not isinstance(stored, dict):  # a JSON null stored as a value
        return False
    ctx.stored_findings = {k: [Suggestion.from_dict(d) for d in v] for k, v in stored.items()}
    return True


def probe_run(run_id: Any) -> str:
    run = Run.objects.select_related("pack_version", "input_set").filter(pk=run_id).first()
    if run is None or run.case_findings is not None:
        return "nothing to do"
    if run.status not in (RunStatus.QUEUED, RunStatus.RUNNING):
        return f"run is {run.status}"
    previous = (
        Run.objects.filter(
            pack_version_id=run.pack_version_id, input_set_id=run.input_set_id, case_findings__isnull=False
        )
        .order_by("-created_at")
        .values("case_findings")[:1]
    )
    # Copied inside the database: the document never travels through this process.
    copied = Run.objects.filter(pk=run.pk, case_findings__isnull=True).update(
        case_findings=Subquery(previous)
    )
    if copied and Run.objects.filter(pk=run.pk, case_findings__isnull=False).exists():
        return "copied"
    data = version_data(run.pack_version, run.input_set.key if run.input_set_id else None)
    # critique.probe_judges: judges on the empty baseline, charged to the run's judge budget
    judged = run_judge_probes(
        run, ((case, dataclasses.replace(base, case_findings=[])) for case, base in data.iter_cases())
    )
    found: dict[str, list[dict[str, Any]]] = {}
    for case, base in data.iter_cases():
        probe_ctx = dataclasses.replace(base, case_findings=[])
        suggestions = probe_case(data.spec, case, probe_ctx, grade=grade_case)
        extra = judged.get((case.challenge_key, case.case_key))
        if extra:
            suggestions = sort_findings(data.spec, list(suggestions) + extra)
        found[findings_key(case.challenge_key, case.case_key)] = [s.to_dict() for s in suggestions]
    Run.objects.filter(pk=run.pk, case_findings__isnull=True).update(case_findings=found)
    return "computed"
