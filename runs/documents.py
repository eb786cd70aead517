"""The JSON documents of a run: the ``eval start --follow`` / ``run status`` document
(interfaces.md §6), case rows, and the case detail. Read from precomputed figures (lane
columns and counters; ``Run.stats`` once completed), never by loading a run's grades.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django.conf import settings

from grading.engine.aggregate import STATUSES, LaneCounters
from grading.engine.stats import round4, round_interval
from runs.models import Attempt, GradeRevision, ItemState, Run, RunItem, RunLane

CASE_FIELDS = (
    "id", "lane__deployment_name", "challenge_key", "case_key", "repetition", "status", "state",
    "last_category", "score", "attempt_count", "outcome_class", "reason_code", "latency_ms",
)  # fmt: skip


def run_url(run: Run) -> str:
    return f"{settings.PUBLIC_BASE_URL}/runs/{run.pk}/"


def lane_counts(lane: RunLane) -> dict[str, int]:
    return {
        "PASSED": lane.passed,
        "FAILED": lane.failed,
        "NOT_EVALUATED": lane.not_evaluated,
        "UNAVAILABLE": lane.unavailable,
        "ERROR": lane.errored,
        "infra_error": lane.infra_error,
        "config_error": lane.config_error,
        "cancelled": lane.cancelled,
        "pending": max(0, lane.pending),
    }


def lane_document(lane: RunLane, run: Run) -> dict[str, Any]:
    # The lane's stored figures whenever it has them (as the overview shows them): a run
    # whose scoring failed after they were stored has ``stats = {"error": ...}``.
    stats = lane.stats or None
    if stats is not None:
        figures = {
            "pass_rate": stats.get("pass_rate"),
            "pass_rate_interval": stats.get("pass_rate_interval"),
            "mean_score": stats.get("mean_score"),
            "mean_score_interval": stats.get("mean_score_interval"),
        }
    else:
        counters = LaneCounters.from_dict(lane.counters) if lane.counters else LaneCounters(run.repetitions)
        figures = {
            "pass_rate": round4(counters.pass_rate()),
            "pass_rate_interval": round_interval(counters.pass_rate_interval()),
            "mean_score": round4(counters.mean_score()),
            "mean_score_interval": None,  # the bootstrap interval is computed at completion
        }
    return {"deployment": lane.deployment_name, **figures, "counts": lane_counts(lane)}


def run_summary(run: Run) -> dict[str, Any]:
    version = run.pack_version
    return {
        "id": str(run.pk),
        "status": run.status,
        "pack": {"slug": version.pack.slug, "number": version.number},
        "input_set": run.input_set.key if run.input_set_id else None,
        "url": run_url(run),
    }


def run_document(run: Run, *, cases: bool = False) -> dict[str, Any]:
    """``{"run", "lanes"[, "cases"]}`` as interfaces.md §6 shows it."""
    run = Run.objects.light().get(pk=run.pk)
    lanes = list(RunLane.objects.filter(run=run).order_by("position"))
    doc: dict[str, Any] = {"run": run_summary(run), "lanes": [lane_document(lane, run) for lane in lanes]}
    if cases:
        doc["cases"] = list(iter_case_rows(run))
    return doc


def display_status(status: str, state: str, last_category: str) -> str:
    if status:
        return status
    if state in (ItemState.PENDING, ItemState.CLAIMED):
        return "pending"
    return last_category or "pending"


def case_row(values: dict[str, Any]) -> dict[str, Any]:
    """The §6 case entry (plus the item id) from ``.values(*CASE_FIELDS)``."""
    return {
        "id": values["id"],
        "deployment": values["lane__deployment_name"],
        "challenge_key": values["challenge_key"],
        "case_key": values["case_key"],
        "repetition": values["repetition"],
        "status": display_status(values["status"], values["state"], values["last_category"]),
        "score": values["score"],
        "attempts": values["attempt_count"],
    }


def iter_case_rows(run: Run, *, with_id: bool = False) -> Iterator[dict[str, Any]]:
    rows = RunItem.objects.filter(run=run).order_by("id").values(*CASE_FIELDS)
    for values in rows.iterator(chunk_size=1000):
        row = case_row(values)
        if not with_id:
            row.pop("id")
        yield row


# Filters of the case list: grade statuses, attempt categories and "pending".
GRADE_FILTERS = frozenset(STATUSES)
CATEGORY_FILTERS = frozenset({"infra_error", "config_error", "cancelled"})


def filter_cases(qs: Any, status: str | None) -> Any:
    if not status:
        return qs
    if status in GRADE_FILTERS:
        return qs.filter(status=status)
    if status in CATEGORY_FILTERS:
        return qs.filter(status="", state__in=[ItemState.DONE, ItemState.CANCELLED], last_category=status)
    if status == "pending":
        return qs.filter(state__in=[ItemState.PENDING, ItemState.CLAIMED])
    raise ValueError(status)


def case_detail(item: RunItem) -> dict[str, Any]:
    attempts = [
        {
            "number": a.number,
            "category": a.category,
            "status_code": a.status_code,
            "error_code": a.error_code,
            "error": a.error,
            "latency_ms": a.latency_ms,
            "retry_after": a.retry_after,
            "body_excerpt": a.body_excerpt,
            "started_at": a.started_at.isoformat() if a.started_at else None,
            "finished_at": a.finished_at.isoformat() if a.finished_at else None,
        }
        for a in Attempt.objects.filter(item=item).order_by("number")
    ]
    revisions = [
        {"revision": r.revision, "status": r.status, "score": r.score, "created_at": r.created_at.isoformat()}
        for r in GradeRevision.objects.filter(item=item).order_by("revision")
    ]
    return {
        "id": item.pk,
        "deployment": item.lane.deployment_name,
        "challenge_key": item.challenge_key,
        "case_key": item.case_key,
        "repetition": item.repetition,
        "status": item.display_status,
        "score": item.score,
        "scoring_revision": item.scoring_revision,
        "grading": item.grade,
        "attempts": attempts,
        "previous_revisions": revisions,
    }
