"""Closing lanes and runs, and the figures computed once when a run completes.

``check_lane_and_run(lane_id)`` moves a lane whose counter says nothing is pending to
``scoring`` and, when the run's ``items_open`` counter reaches 0, the run to ``scoring``
and finalises it (``finalize_run``): per-lane ``aggregate_lane`` (Wilson and bootstrap
intervals, seeds per interfaces.md §5 with the run id), the ranking (``rank_lanes``) and
run health (``run_health``), stored in ``Run.stats`` / ``RunLane.stats``; then lanes and run
are ``completed``. The guarded status UPDATE makes exactly one caller finalise.
"""

from __future__ import annotations

from typing import Any

from grading.engine.aggregate import CaseRecord, aggregate_lane, record_from_grade
from grading.engine.compare import rank_lanes
from grading.engine.critique import run_health
from runs.models import LaneStatus, Run, RunItem, RunLane, RunStatus
from runs.packdata import version_data
from runs.states import transition_lane, transition_run

OPEN_RUN = (RunStatus.QUEUED, RunStatus.RUNNING)
OPEN_LANE = (LaneStatus.QUEUED, LaneStatus.RUNNING)


def check_lane_and_run(lane_id: int) -> None:
    lane = RunLane.objects.get(pk=lane_id)
    if lane.status in OPEN_LANE and lane.pending <= 0:
        transition_lane(lane, LaneStatus.SCORING, reason="no item pending")
    check_run(lane.run_id)


def check_run(run_id: Any) -> bool:
    """Finalise the run when its counter says no item is pending or claimed. True when
    this call finalised it. A cancelled run gets its stats over what was graded once its
    last in-flight item is written."""
    run = Run.objects.defer("case_findings").get(pk=run_id)
    if run.status == RunStatus.CANCELLED and run.items_open <= 0:
        Run.objects.filter(pk=run.pk).update(stats=compute_stats(run))
        return False
    if run.status not in OPEN_RUN or run.items_open > 0:
        return False
    for lane in RunLane.objects.filter(run_id=run.pk, status__in=OPEN_LANE):
        transition_lane(lane, LaneStatus.SCORING, reason="no item pending")
    if not transition_run(run, RunStatus.SCORING, reason="every item finished"):
        return False
    finalize_run(run)
    return True


def lane_records(lane: RunLane) -> list[CaseRecord]:
    """The lane's graded executions as CaseRecords (streamed from the stored grades)."""
    records = []
    rows = (
        RunItem.objects.filter(lane_id=lane.pk)
        .exclude(status="")
        .order_by("id")
        .values_list("grade", "input_tokens", "output_tokens", "cost_usd", "latency_ms")
    )
    for grade, tin, tout, cost, latency in rows.iterator(chunk_size=500):
        if not grade:
            continue
        metrics = {"input_tokens": tin, "output_tokens": tout, "cost_usd": cost, "latency_ms": latency}
        records.append(record_from_grade(grade, metrics=metrics))
    return records


def compute_stats(run: Run, *, critique: bool = False) -> dict[str, Any]:
    """Every lane's aggregate, the ranking and run health (plus, with ``critique``, the
    judge model's critique suggestions); stores the lane stats too."""
    lanes = list(RunLane.objects.filter(run_id=run.pk).order_by("position"))
    by_lane: dict[str, list[CaseRecord]] = {}
    aggregates = {}
    lane_docs = []
    for lane in lanes:
        records = lane_records(lane)
        by_lane[lane.deployment_name] = records
        agg = aggregate_lane(records, run_id=str(run.pk), deployment=lane.deployment_name)
        aggregates[lane.deployment_name] = agg
        doc = agg.to_dict()
        RunLane.objects.filter(pk=lane.pk).update(stats=doc)
        lane.stats = doc
        lane_docs.append(doc)
    ranking = rank_lanes(by_lane, run_id=str(run.pk), aggregates=aggregates) if by_lane else []
    spec = version_data(run.pack_version, run.input_set.key if run.input_set_id else None).spec
    all_records = [r for rows in by_lane.values() for r in rows]
    feedback = run_health(all_records, spec).to_dict()
    if critique:
        from runs.judging import run_model_critique

        extra = run_model_critique(run, all_records)
        if extra:
            feedback["suggestions"] = [*feedback.get("suggestions", []), *extra]
    stats = {
        "scoring_revision": run.scoring_revision,
        "lanes": lane_docs,
        "ranking": [standing.to_dict() for standing in ranking],
        "eval_feedback": feedback,
    }
    return stats


def finalize_run(run: Run) -> None:
    """From ``scoring``: the n_wise judge pass, then the stats (with the model critique of
    the eval when a judge provider is set), then lanes and run complete."""
    from runs.judging import rank_run, record_run_judge_usage

    try:
        rank_run(run)
        stats = compute_stats(run, critique=True)
        record_run_judge_usage(run)
    except Exception as exc:
        Run.objects.filter(pk=run.pk).update(stats={"error": str(exc)[:500]})
        for lane in RunLane.objects.filter(run_id=run.pk, status=LaneStatus.SCORING):
            transition_lane(lane, LaneStatus.FAILED, reason="scoring failed")
        transition_run(run, RunStatus.FAILED, reason=f"scoring failed: {exc}"[:500])
        raise
    Run.objects.filter(pk=run.pk).update(stats=stats)
    run.stats = stats
    for lane in RunLane.objects.filter(run_id=run.pk, status=LaneStatus.SCORING):
        transition_lane(lane, LaneStatus.COMPLETED, reason="scored")
    transition_run(run, RunStatus.COMPLETED, reason="scored")
