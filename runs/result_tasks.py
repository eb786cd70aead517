"""The result pages' stored aggregates (RunResultSummary): computed once per scoring revision
of a finished run by a task, never per request.

Lane counters already hold counts, spend and the latency histogram; what they cannot hold
without growing with the run is computed here in a few grouped SQL queries: each lane's
score histogram (10 bins), each expectation's outcome tally per lane (assertion health)
and the gates' tallies. On PostgreSQL the grade documents are unnested in the database
(``jsonb_array_elements``); other databases stream the grades in chunks.

Requesting a summary is idempotent: :func:`result_summary_request` flips (or creates) the
row to ``pending`` for the run's current scoring revision with a guarded write, and only the
caller that flipped it enqueues the task (on commit). A pending request older than
``STALE_AFTER`` is re-enqueued (a lost task must not leave the page "computing" forever).
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from typing import Any

from celery import shared_task
from django.db import connection, transaction
from django.utils import timezone

from runs.charts import SCORE_BINS, score_bin
from runs.models import ComparisonStatus, Run, RunItem, RunResultSummary

STALE_AFTER = dt.timedelta(minutes=5)
GATES = ("compliance", "resolution", "guards")


def result_summary_request(*, run: Run) -> RunResultSummary:
    """Make sure a summary for the run's scoring revision exists or is being computed."""
    now = timezone.now()
    summary, created = RunResultSummary.objects.get_or_create(
        run=run, defaults={"scoring_revision": run.scoring_revision, "computed_at": now}
    )
    flipped = created
    if not created and summary.scoring_revision != run.scoring_revision:
        flipped = (
            RunResultSummary.objects.filter(run=run)
            .exclude(scoring_revision=run.scoring_revision)
            .update(scoring_revision=run.scoring_revision, status=ComparisonStatus.PENDING, computed_at=now)
            == 1
        )
    elif not created and summary.status == ComparisonStatus.PENDING:
        flipped = (
            RunResultSummary.objects.filter(
                run=run, status=ComparisonStatus.PENDING, computed_at__lt=now - STALE_AFTER
            ).update(computed_at=now)
            == 1
        )
    if flipped:
        run_id = str(run.id)
        transaction.on_commit(lambda: compute_result_summary.delay(run_id))
        summary.refresh_from_db()
    return summary


@shared_task(name="runs.compute_result_summary")
def compute_result_summary(run_id: str) -> str:
    """Compute and store the summary of a run; returns its status."""
    run = Run.objects.light().filter(id=run_id).first()
    if run is None:
        return "missing"
    revision = run.scoring_revision
    # The request this computation answers: what it writes goes over that row only. A row
    # deleted meanwhile (retry failed items reopened the run) or requested again (a new
    # scoring revision, a stale request re-sent: ``computed_at`` moves) belongs to a later
    # computation; writing over it kept stale figures as the ready summary of the revision.
    request, _ = RunResultSummary.objects.get_or_create(
        run=run,
        defaults={
            "scoring_revision": revision,
            "status": ComparisonStatus.PENDING,
            "computed_at": timezone.now(),
        },
    )
    same_request = RunResultSummary.objects.filter(
        pk=request.pk, scoring_revision=request.scoring_revision, computed_at=request.computed_at
    )
    if request.scoring_revision != revision:  # called for a revision nobody requested yet
        now = timezone.now()
        if same_request.update(scoring_revision=revision, status=ComparisonStatus.PENDING, computed_at=now):
            same_request = RunResultSummary.objects.filter(
                pk=request.pk, scoring_revision=revision, computed_at=now
            )
    try:
        bins, health = _compute(run)
    except Exception as exc:  # recorded on the row and shown on the page, then re-raised
        same_request.update(
            status=ComparisonStatus.FAILED,
            error=f"{type(exc).__name__}: {exc}"[:2000],
            computed_at=timezone.now(),
        )
        raise
    written = same_request.filter(scoring_revision=revision).update(
        status=ComparisonStatus.READY,
        score_bins=bins,
        assertion_health=health,
        error="",
        computed_at=timezone.now(),
    )
    if not written:
        return "superseded"
    return ComparisonStatus.READY


def _compute(run: Run) -> tuple[dict[str, list[int]], list[dict[str, Any]]]:
    bins: dict[str, list[int]] = {}
    # key -> {"kind", "lanes": {lane_id: {"PASSED", "FAILED", "other"}}}
    tallies: dict[str, dict[str, Any]] = {}
    order: list[str] = []

    def bump(key: str, kind: str, lane_id: Any, status: str, n: int) -> None:
        if key not in tallies:
            tallies[key] = {
                "kind": kind,
                "lanes": defaultdict(lambda: {"PASSED": 0, "FAILED": 0, "other": 0}),
            }
            order.append(key)
        slot = status if status in ("PASSED", "FAILED") else "other"
        tallies[key]["lanes"][str(lane_id)][slot] += n

    # key -> the distinct cases (challenge, case) with a graded (PASSED/FAILED) result
    graded_cases: dict[str, int] = {}
    if connection.vendor == "postgresql":
        _postgres(run, bins, bump, graded_cases)
    else:
        _stream(run, bins, bump, graded_cases)
    health = []
    for key in order:
        entry = tallies[key]
        lanes = {k: dict(v) for k, v in entry["lanes"].items()}
        health.append(
            {
                "key": key,
                "kind": entry["kind"],
                "lanes": lanes,
                "discriminates": _discriminates(lanes, graded_cases.get(key, 0)),
            }
        )
    # Gates last, expectations in the order grades list them.
    health.sort(key=lambda e: e["kind"] == "gate")
    return bins, health


def _discriminates(lanes: dict[str, dict[str, int]], cases: int) -> bool | None:
    """grading.md §9(b) ``no_discrimination``: the same graded outcome for every lane and
    case, with 3+ graded results and 2+ lanes or 3+ cases, never discriminates (False).
    None when there are too few graded results, lanes and cases to tell (as the run
    health of ``grading.engine.health`` decides it: repetitions count as results, not as
    cases)."""
    passed = sum(t["PASSED"] for t in lanes.values())
    failed = sum(t["FAILED"] for t in lanes.values())
    graded_lanes = sum(1 for t in lanes.values() if t["PASSED"] or t["FAILED"])
    if passed + failed < 3:
        return None
    if passed and failed:
        return True
    return None if graded_lanes < 2 and cases < 3 else False


def _postgres(run: Run, bins: dict[str, list[int]], bump: Any, graded_cases: dict[str, int]) -> None:
    with connection.cursor() as cur:
        cur.execute(
            "SELECT lane_id, LEAST(%s, GREATEST(0, FLOOR(score * %s)))::int, COUNT(*) "
            "FROM runs_runitem WHERE run_id = %s AND score IS NOT NULL GROUP BY 1, 2",
            [SCORE_BINS - 1, SCORE_BINS, run.id],
        )
        for lane_id, b, n in cur.fetchall():
            bins.setdefault(str(lane_id), [0] * SCORE_BINS)[b] += n
        cur.execute(
            "SELECT i.lane_id, e->>'key', COALESCE(e->>'kind', ''), COALESCE(e->>'status', ''), "
            "MIN(e.ord), COUNT(*) "
            "FROM runs_runitem i, jsonb_array_elements(i.grade->'expectations') WITH ORDINALITY AS e(e, ord) "
            "WHERE i.run_id = %s AND jsonb_typeof(i.grade->'expectations') = 'array' "
            "GROUP BY 1, 2, 3, 4 ORDER BY 5, 2",
            [run.id],
        )
        for lane_id, key, kind, status, _ord, n in cur.fetchall():
            bump(key or "?", kind, lane_id, status, n)
        cur.execute(
            "SELECT e->>'key', COUNT(DISTINCT (i.challenge_key, i.case_key)) "
            "FROM runs_runitem i, jsonb_array_elements(i.grade->'expectations') AS e "
            "WHERE i.run_id = %s AND jsonb_typeof(i.grade->'expectations') = 'array' "
            "AND e->>'status' IN ('PASSED', 'FAILED') GROUP BY 1",
            [run.id],
        )
        for key, n in cur.fetchall():
            graded_cases[key or "?"] = n
        cur.execute(
            "SELECT i.lane_id, g.key, g.value, COUNT(*) "
            "FROM runs_runitem i, jsonb_each_text(i.grade->'gates') AS g "
            "WHERE i.run_id = %s AND jsonb_typeof(i.grade->'gates') = 'object' AND g.key = ANY(%s) "
            "GROUP BY 1, 2, 3 ORDER BY 2",
            [run.id, list(GATES)],
        )
        for lane_id, gate, value, n in cur.fetchall():
            bump(
                f"gates.{gate}",
                "gate",
                lane_id,
                {"passed": "PASSED", "failed": "FAILED"}.get(value, "other"),
                n,
            )


def _stream(run: Run, bins: dict[str, list[int]], bump: Any, graded_cases: dict[str, int]) -> None:
    rows = (
        RunItem.objects.filter(run=run)
        .exclude(grade=None)
        .values_list("lane_id", "score", "grade", "challenge_key", "case_key")
    )
    seen: set[tuple[str, str, str]] = set()
    for lane_id, score, grade, challenge_key, case_key in rows.iterator(chunk_size=500):
        if score is not None:
            bins.setdefault(str(lane_id), [0] * SCORE_BINS)[score_bin(score)] += 1
        for e in (grade or {}).get("expectations") or []:
            key = e.get("key") or "?"
            bump(key, e.get("kind") or "", lane_id, e.get("status") or "", 1)
            if e.get("status") in ("PASSED", "FAILED") and (key, challenge_key, case_key) not in seen:
                seen.add((key, challenge_key, case_key))
                graded_cases[key] = graded_cases.get(key, 0) + 1
        gates = (grade or {}).get("gates") or {}
        for gate in GATES:
            if gate in gates:
                value = {"passed": "PASSED", "failed": "FAILED"}.get(gates[gate], "other")
                bump(f"gates.{gate}", "gate", lane_id, value, 1)
