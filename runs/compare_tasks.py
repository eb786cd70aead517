"""Run-versus-run comparison (grading.md §10.4), computed once by a task and stored.

:func:`comparison_request` finds or creates the ``RunComparison`` of a (baseline,
candidate[, lanes]) pair and enqueues :func:`compute_comparison` on commit when it is new,
stale (a run was re-scored since) or lost (pending for longer than ``STALE_AFTER``). The
task matches lanes by deployment name (or takes the two lanes given), reads each lane's
items as plain values, calls ``grading.engine.compare.compare_records`` per lane pair and
stores the summary in ``RunComparison.result`` and every case in ``ComparisonCase`` rows,
which the page lists with keyset pagination. Re-running the task gives the same rows.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

from celery import shared_task
from django.db import connection, transaction
from django.utils import timezone

if TYPE_CHECKING:
    from grading.engine.aggregate import CaseRecord

# The grading engine is imported where a comparison is computed: this module is loaded with
# runs.tasks by every process that enqueues a task (eval start among them).
from runs.lane_settings import CallSettings
from runs.models import (
    RUN_HEAVY_FIELDS,
    ComparisonCase,
    ComparisonStatus,
    Run,
    RunComparison,
    RunItem,
    RunLane,
)

STALE_AFTER = dt.timedelta(minutes=5)
BATCH = 5000
ANALYZE_AFTER = 10_000
VERDICT_ORDER = ("regressed", "improved", "within_noise", "not_comparable")


class CompareError(ValueError):
    """A comparison that cannot be made (other workspace, lane of another run...)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def _revisions(baseline: Run, candidate: Run) -> list[int]:
    return [baseline.scoring_revision, candidate.scoring_revision]


def _unfinished(baseline: Run, candidate: Run) -> list[list[Any]]:
    """Each unfinished run's ``[id, status, open items]``: cases finishing change a
    comparison without a new scoring revision (and the status changes once more when the
    run completes), so they are part of what a stored comparison was computed from."""
    return [[str(run.id), run.status, run.items_open] for run in (baseline, candidate) if not run.is_finished]


def _computed_from(baseline: Run, candidate: Run) -> tuple[Any, Any]:
    return _revisions(baseline, candidate), _unfinished(baseline, candidate)


def comparison_request(
    *,
    baseline: Run,
    candidate: Run,
    baseline_lane: RunLane | None = None,
    candidate_lane: RunLane | None = None,
) -> RunComparison:
    """The stored comparison of two runs (or two lanes), requested for computing if needed."""
    if baseline.workspace_id != candidate.workspace_id:
        raise CompareError("candidate", "both runs must belong to the same workspace")
    if baseline.id == candidate.id and baseline_lane is None:
        raise CompareError("candidate", "pick two different runs, or two lanes of one run")
    if baseline.pack_version.pack_id != candidate.pack_version.pack_id:
        raise CompareError(
            "candidate", "runs of different packs cannot be compared; pick a run of the same pack"
        )
    if baseline_lane is not None and baseline_lane.run_id != baseline.id:
        raise CompareError("baseline", "the baseline lane belongs to another run")
    if candidate_lane is not None and candidate_lane.run_id != candidate.id:
        raise CompareError("candidate", "the candidate lane belongs to another run")
    now = timezone.now()
    comparison, created = RunComparison.objects.get_or_create(
        baseline=baseline,
        candidate=candidate,
        lanes_key=RunComparison.key_for(baseline_lane, candidate_lane),
        defaults={
            "workspace_id": baseline.workspace_id,
            "baseline_lane": baseline_lane,
            "candidate_lane": candidate_lane,
        },
    )
    enqueue = created
    if not created:
        result = comparison.result or {}
        stored = (result.get("revisions"), result.get("unfinished", []))
        qs = RunComparison.objects.filter(id=comparison.id)
        if comparison.status != ComparisonStatus.PENDING and stored != _computed_from(baseline, candidate):
            enqueue = (
                qs.exclude(status=ComparisonStatus.PENDING).update(
                    status=ComparisonStatus.PENDING, created_at=now
                )
                == 1
            )
        elif comparison.status == ComparisonStatus.PENDING:
            # created_at doubles as "last requested": a lost task is re-enqueued.
            enqueue = (
                qs.filter(status=ComparisonStatus.PENDING, created_at__lt=now - STALE_AFTER).update(
                    created_at=now
                )
                == 1
            )
        if enqueue:
            comparison.refresh_from_db()
    if enqueue:
        cid = comparison.id
        transaction.on_commit(lambda: compute_comparison.delay(cid))
    return comparison


def _records(lane: RunLane, pack_version: int) -> tuple[list[CaseRecord], dict[tuple[str, str], int]]:
    from grading.engine.aggregate import CaseRecord

    rows = (
        RunItem.objects.filter(lane=lane)
        .order_by("id")
        .values_list(
            "id",
            "challenge_key",
            "case_key",
            "repetition",
            "status",
            "last_category",
            "state",
            "outcome_class",
            "score",
            "case__content_hash",
        )
    )
    records: list[CaseRecord] = []
    first_item: dict[tuple[str, str], int] = {}
    for item_id, ch, case, rep, status, category, state, outcome, score, content_hash in rows.iterator(
        chunk_size=BATCH
    ):
        shown = status or (category if state in ("done", "cancelled") and category else "pending")
        records.append(
            CaseRecord(
                deployment=lane.deployment_name,
                challenge_key=ch,
                case_key=case,
                status=shown,
                lane_id=str(lane.id),
                repetition=rep,
                outcome_class=outcome or None,
                score=score if status else None,
                content_hash=content_hash,
                pack_version=pack_version,
            )
        )
        if rep == 1 or (ch, case) not in first_item:
            first_item.setdefault((ch, case), item_id)
    return records, first_item


def _lane_like(run: Run, other: RunLane | None) -> RunLane | None:
    """``run``'s lane to set against ``other``: of the same deployment, else the first; never
    ``other`` itself (a lane against its own run is compared with the run's other lanes)."""
    lanes = run.lanes.order_by("position")
    if other is not None:
        lanes = lanes.exclude(pk=other.pk)
        same = lanes.filter(deployment_name=other.deployment_name).first()
        if same is not None:
            return same
    return lanes.first()


def _pairs(comparison: RunComparison) -> tuple[list[tuple[RunLane, RunLane]], list[str], list[str]]:
    if comparison.baseline_lane_id or comparison.candidate_lane_id:
        # A lane against a run: that run's lane of the same deployment (else its first lane).
        base = comparison.baseline_lane or _lane_like(comparison.baseline, comparison.candidate_lane)
        cand = comparison.candidate_lane or _lane_like(comparison.candidate, comparison.baseline_lane)
        return ([(base, cand)] if base and cand else []), [], []
    base = {lane.deployment_name: lane for lane in comparison.baseline.lanes.order_by("position")}
    cand = {lane.deployment_name: lane for lane in comparison.candidate.lanes.order_by("position")}
    pairs = [(base[name], cand[name]) for name in base if name in cand]
    return pairs, [n for n in base if n not in cand], [n for n in cand if n not in base]


def overall_verdict(verdicts: list[str]) -> str:
    for verdict in VERDICT_ORDER:
        if verdict in verdicts:
            return verdict
    return "not_comparable"


@shared_task(name="runs.compute_comparison")
def compute_comparison(comparison_id: int) -> str:
    comparison = (
        RunComparison.objects.select_related(
            "baseline__pack_version__pack", "candidate__pack_version__pack", "baseline_lane", "candidate_lane"
        )
        .defer(*(f"{side}__{name}" for side in ("baseline", "candidate") for name in RUN_HEAVY_FIELDS))
        .filter(id=comparison_id)
        .first()
    )
    if comparison is None:
        return "missing"
    baseline, candidate = comparison.baseline, comparison.candidate
    try:
        result, rows = _compute(comparison, baseline, candidate)
    except Exception as exc:  # recorded on the row (the page shows it), then re-raised
        RunComparison.objects.filter(id=comparison.id).update(
            status=ComparisonStatus.FAILED,
            error=f"{type(exc).__name__}: {exc}"[:2000],
            computed_at=timezone.now(),
        )
        raise
    with transaction.atomic():
        ComparisonCase.objects.filter(comparison=comparison).delete()
        ComparisonCase.objects.bulk_create(rows, batch_size=BATCH)
        RunComparison.objects.filter(id=comparison.id).update(
            status=ComparisonStatus.READY, result=result, error="", computed_at=timezone.now()
        )
    if len(rows) >= ANALYZE_AFTER and connection.vendor == "postgresql":
        # A large insert leaves the planner's statistics stale until autovacuum gets to
        # them; meanwhile the page's keyset query was planned as a scan of the whole
        # comparison (77 ms instead of 0.2 ms at 100k cases). Refresh them now.
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {ComparisonCase._meta.db_table}")
    return ComparisonStatus.READY


def _compute(
    comparison: RunComparison, baseline: Run, candidate: Run
) -> tuple[dict[str, Any], list[ComparisonCase]]:
    from grading.engine.compare import CLASSES, compare_records

    pairs, only_baseline, only_candidate = _pairs(comparison)
    lanes: list[dict[str, Any]] = []
    rows: list[ComparisonCase] = []
    totals = dict.fromkeys(CLASSES, 0)
    for base_lane, cand_lane in pairs:
        base_records, base_items = _records(base_lane, baseline.pack_version.number)
        cand_records, cand_items = _records(cand_lane, candidate.pack_version.number)
        name = (
            cand_lane.deployment_name
            if base_lane.deployment_name == cand_lane.deployment_name
            else (f"{base_lane.deployment_name} → {cand_lane.deployment_name}")
        )
        result = compare_records(
            base_records, cand_records, run_id=str(candidate.id), deployment=cand_lane.deployment_name
        )
        summary = result.to_dict()
        summary.pop("cases")
        summary.update(
            deployment=name,
            baseline_lane=base_lane.id,
            candidate_lane=cand_lane.id,
            # What the two lanes recorded and ran with (model, URL, config, ...), where it differs.
            settings_changed=CallSettings.of_lane(base_lane).differences(CallSettings.of_lane(cand_lane)),
        )
        lanes.append(summary)
        for c in result.cases:
            totals[c.change] += 1
            key = (c.challenge_key, c.case_key)
            rows.append(
                ComparisonCase(
                    comparison=comparison,
                    deployment=name,
                    change=c.change,
                    challenge_key=c.challenge_key,
                    case_key=c.case_key,
                    baseline_status=c.baseline_status or "",
                    candidate_status=c.candidate_status or "",
                    baseline_score=c.baseline_score,
                    candidate_score=c.candidate_score,
                    score_delta=c.score_delta,
                    noisy=c.noisy,
                    case_changed=c.case_changed,
                    baseline_item_id=base_items.get(key),
                    candidate_item_id=cand_items.get(key),
                )
            )
    result_doc = {
        "verdict": overall_verdict([lane["verdict"] for lane in lanes]),
        "counts": totals,
        "lanes": lanes,
        "only_baseline": only_baseline,
        "only_candidate": only_candidate,
        "baseline": {
            "run": str(baseline.id),
            "pack": baseline.pack_version.pack.slug,
            "version": baseline.pack_version.number,
        },
        "candidate": {
            "run": str(candidate.id),
            "pack": candidate.pack_version.pack.slug,
            "version": candidate.pack_version.number,
        },
        "same_pack": baseline.pack_version.pack_id == candidate.pack_version.pack_id,
        "revisions": _revisions(baseline, candidate),
        "unfinished": _unfinished(baseline, candidate),
    }
    return result_doc, rows
