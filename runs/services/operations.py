"""Run operations: cancel, retry failed items, re-score.

- ``run_cancel``: nothing new starts and nothing more is graded: pending items and items
  claimed by a dispatcher become ``cancelled`` (attempt category ``cancelled`` on the case
  lists) at once; each dispatcher sees the run's status within ``CANCEL_CHECK_SECONDS``,
  stops claiming and cancels its calls in flight (and their retries), and a result that
  comes back anyway is not written (the writer only writes items still claimed by it). The
  cancelled run's figures never change afterwards.
- ``run_retry_failed``: only items that ended ``infra_error`` / ``config_error`` (no grade)
  go back to pending; their earlier attempts stay and new ones continue the numbering; the
  run (and those lanes) go back to ``running`` and dispatch is enqueued; the run's result
  summary and its comparisons are dropped, to be computed again from the new results.
- ``run_rescore``: a new ``scoring_revision`` and the run back to ``scoring``; on commit the
  ``runs.rescore_run`` task (``run_rescore_execute``) grades every graded item's recorded
  evidence again with the current engine, without calling agents, in batches: each old
  grade is archived as a ``GradeRevision``; lane counters are rebuilt; stats recomputed.
"""

from __future__ import annotations

import functools
import logging
from datetime import timedelta
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from django.db import InterfaceError, OperationalError, connection, transaction
from django.db.models import F, Max, Q
from django.utils import timezone

from agentclash_site.lib.broker import BrokerError, BrokerUnavailable
from grading.engine.aggregate import LaneCounters, record_from_grade
from runs.models import (
    GradeRevision,
    ItemState,
    LaneStatus,
    Run,
    RunComparison,
    RunItem,
    RunLane,
    RunResultSummary,
    RunStatus,
)
from runs.probing import load_stored_findings
from runs.recording import STATUS_COLUMNS, ItemKey, grade_context, grade_evidence, rebuild_evidence
from runs.services.runs import RunError
from runs.states import FINISHED_RUN, record_item_transitions, transition_lane, transition_run
from runs.storable import storable

log = logging.getLogger(__name__)

FAILED_CATEGORIES = ("infra_error", "config_error")


def lock_run(run: Run) -> Run:
    """The run's row locked, after its lanes' rows (in id order): the lane writer locks a
    lane, then updates the run's open count, so an operation that locked the run first and
    then touched a lane could deadlock with it. The stored findings (megabytes for a big
    pack) are not read."""
    qs = Run.objects.filter(pk=run.pk).defer("case_findings")
    if connection.features.has_select_for_update:
        list(RunLane.objects.select_for_update().filter(run_id=run.pk).order_by("id").values_list("id"))
        qs = qs.select_for_update()
    return qs.get()


def run_cancel(*, run: Run, reason: str = "cancelled by a user") -> Run:
    if run.status in FINISHED_RUN:
        raise RunError("run_finished", f"the run is already {run.status}", status_code=409)
    with transaction.atomic():
        run = lock_run(run)
        if run.status in FINISHED_RUN:
            raise RunError("run_finished", f"the run is already {run.status}", status_code=409)
        if run.status == RunStatus.SCORING and rescore_pending(run):
            # The re-grade task would go on writing grades and counters into the cancelled
            # run, or, stopped, leave items of two revisions and counters of neither.
            raise RunError(
                "run_rescoring",
                "the run is being re-scored; wait for the rescore to finish (it calls no agent)",
                status_code=409,
            )
        now = timezone.now()
        moved = []
        for lane in RunLane.objects.filter(run=run):
            count = 0
            for state in (ItemState.PENDING, ItemState.CLAIMED):
                # A claimed item's call may still be in flight: its result is not written.
                moved_now = RunItem.objects.filter(lane=lane, state=state).update(
                    state=ItemState.CANCELLED,
                    last_category="cancelled",
                    finished_at=now,
                    claim_owner="",
                    claim_deadline=None,
                )
                moved.append((run.pk, lane.pk, state, ItemState.CANCELLED, moved_now))
                count += moved_now
            if count:
                RunLane.objects.filter(pk=lane.pk).update(
                    pending=F("pending") - count, cancelled=F("cancelled") + count
                )
                Run.objects.filter(pk=run.pk).update(items_open=F("items_open") - count)
            if lane.status not in (LaneStatus.COMPLETED, LaneStatus.FAILED, LaneStatus.CANCELLED):
                transition_lane(lane, LaneStatus.CANCELLED, reason=reason)
        record_item_transitions(moved, reason=reason)
        transition_run(run, RunStatus.CANCELLED, reason=reason)
        run_id = run.pk
        transaction.on_commit(lambda: _enqueue_check(run_id))
    run.refresh_from_db()
    return run


def _enqueue_check(run_id: Any) -> None:
    from runs import tasks

    try:
        tasks.check_run.delay(str(run_id))
    except BrokerError as exc:
        # The cancel is committed: the sweeper computes a cancelled run's figures it lacks.
        raise BrokerUnavailable(
            str(exc),
            after=f"Run {run_id} is cancelled; its figures over the graded cases are computed once the "
            f"broker is back (run status {run_id})",
        ) from exc


RETRYABLE = (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.RUNNING)
# Why a run in each other status cannot retry items, and what to do instead.
_NOT_RETRYABLE = {
    RunStatus.CANCELLED: "a cancelled run cannot retry items; start a new run",
    RunStatus.SCORING: "a scoring run cannot retry items; wait for scoring to finish, then retry",
    RunStatus.QUEUED: "a queued run has no finished items to retry yet; wait for it to finish",
    RunStatus.DRAFT: "a draft run has no finished items to retry; wait for it to be queued and finish",
}


def _check_retryable(run: Run) -> None:
    if run.status not in RETRYABLE:
        message = _NOT_RETRYABLE.get(run.status, f"a {run.status} run cannot retry items")
        raise RunError("run_not_retryable", message, status_code=409)


def run_retry_failed(*, run: Run, enqueue: bool = True) -> int:
    """Send the run's infra/config failures again; returns how many items were reopened."""
    _check_retryable(run)
    with transaction.atomic():
        run = lock_run(run)
        _check_retryable(run)  # again under the lock: a cancel may have come in between
        failed = RunItem.objects.filter(
            run=run, state=ItemState.DONE, status="", last_category__in=FAILED_CATEGORIES
        )
        per_lane: dict[int, dict[str, int]] = {}
        for lane_id, category in failed.values_list("lane_id", "last_category"):
            per_lane.setdefault(lane_id, {}).setdefault(category, 0)
            per_lane[lane_id][category] += 1
        if not per_lane:
            raise RunError(
                "nothing_to_retry", "the run has no infra_error or config_error items", status_code=409
            )
        _check_same_kind(per_lane)
        total = failed.update(
            state=ItemState.PENDING, claim_owner="", claim_deadline=None, claims=0, finished_at=None
        )
        moved = []
        if run.status != RunStatus.RUNNING:
            transition_run(run, RunStatus.RUNNING, reason="retry failed items")
        for lane in RunLane.objects.filter(pk__in=list(per_lane)):
            counts = per_lane[lane.pk]
            n = sum(counts.values())
            RunLane.objects.filter(pk=lane.pk).update(
                pending=F("pending") + n,
                infra_error=F("infra_error") - counts.get("infra_error", 0),
                config_error=F("config_error") - counts.get("config_error", 0),
                stats=None,
            )
            if lane.status != LaneStatus.RUNNING:
                transition_lane(lane, LaneStatus.RUNNING, reason="retry failed items")
            moved.append((run.pk, lane.pk, ItemState.DONE, ItemState.PENDING, n))
        # A run whose scoring failed is scored again as a whole: its lanes without a retried
        # item wait in scoring (as a lane that finished before the others), and complete with
        # the run; left failed, a completed run kept failed lanes.
        for lane in RunLane.objects.filter(run=run, status=LaneStatus.FAILED).exclude(pk__in=list(per_lane)):
            transition_lane(lane, LaneStatus.SCORING, reason="retry failed items: scored again with the run")
        Run.objects.filter(pk=run.pk).update(items_open=F("items_open") + total, stats=None)
        # What was computed from the finished items (gates, assertion health, comparisons)
        # is computed again once the retried items are done: the scoring revision does not
        # change, so nothing else would tell those results are out of date.
        RunResultSummary.objects.filter(run=run).delete()
        RunComparison.objects.filter(Q(baseline=run) | Q(candidate=run)).delete()
        record_item_transitions(moved, reason="retry failed items")
        if enqueue:
            run_id = run.pk
            transaction.on_commit(functools.partial(_enqueue_retry, run_id, total))
    return total


def _enqueue_retry(run_id: Any, total: int) -> None:
    from runs.services.runs import enqueue_run

    try:
        enqueue_run(run_id)
    except BrokerError as exc:
        # The items are pending again: the sweeper dispatches the run's lanes once it can.
        unavailable = BrokerUnavailable(
            getattr(exc, "reason", str(exc)),
            after=f"Run {run_id} is running again ({total} failed item{'s' if total != 1 else ''} sent "
            f"again); they are dispatched once the broker is back (run status {run_id})",
            retried=total,
        )
        raise unavailable from exc


def _check_same_kind(lane_ids: Any) -> None:
    """A lane is dispatched with the executor of its deployment's current kind: one whose
    deployment changed kind since the run started would be called with the wrong protocol."""
    changed = (
        RunLane.objects.filter(pk__in=list(lane_ids))
        .exclude(deployment__kind=F("deployment_kind"))
        .values_list("deployment_name", "deployment_kind", "deployment__kind")
        .first()
    )
    if changed is not None:
        name, was, now = changed
        raise RunError(
            "deployment_changed",
            f"deployment {name!r} was {was} when the run started and is {now} now; start a new run",
            status_code=409,
        )


# What to do instead of re-scoring a run in each status that cannot be.
_NOT_RESCORABLE = {
    RunStatus.SCORING: "wait for its scoring to finish, then re-score it",
    RunStatus.CANCELLED: "a cancelled run stays as it was cancelled; start a new run",
}


def _check_rescorable(run: Run) -> None:
    if run.status not in (RunStatus.COMPLETED, RunStatus.FAILED):
        todo = _NOT_RESCORABLE.get(run.status, "wait for it to finish, then re-score it")
        raise RunError(
            "run_not_rescorable",
            f"only a completed or failed run can be re-scored (this one is {run.status}); {todo}",
            status_code=409,
        )


RESCORE_BATCH = 500
# What cuts a re-grade short without being its error: the task's soft time limit (a big run's
# re-grade takes more than one task) and a lost database connection.
RESUMABLE = (SoftTimeLimitExceeded, OperationalError, InterfaceError)
RESCORE_STALL = timedelta(minutes=5)


def run_rescore(*, run: Run, enqueue: bool = True) -> Run:
    """Open a new scoring revision and enqueue the re-grade (``runs.rescore_run``, on commit).

    The run (and its lanes) move to ``scoring`` now; the task re-grades the recorded evidence
    of every graded item (no agent is called), rebuilds the lane counters and completes the
    run (:func:`run_rescore_execute`)."""
    _check_rescorable(run)
    with transaction.atomic():
        run = lock_run(run)
        _check_rescorable(run)  # again under the lock: a retry or a cancel may have come in between
        # above every item's revision: the n_wise pass numbers a ranked grade one past the
        # pre-rank grade it archives
        top = RunItem.objects.filter(run_id=run.pk).aggregate(top=Max("scoring_revision"))["top"] or 0
        revision = max(run.scoring_revision, top) + 1
        Run.objects.filter(pk=run.pk).update(scoring_revision=revision)
        run.scoring_revision = revision
        transition_run(run, RunStatus.SCORING, reason=f"rescore (revision {revision})")
        for lane in RunLane.objects.filter(run=run).exclude(status=LaneStatus.SCORING):
            transition_lane(lane, LaneStatus.SCORING, reason=f"rescore (revision {revision})")
        if enqueue:
            transaction.on_commit(functools.partial(_enqueue_rescore, str(run.pk), revision))
    return run


def _enqueue_rescore(run_id: str, revision: int) -> None:
    from runs import tasks

    try:
        tasks.rescore_run.delay(run_id, revision)
    except BrokerError as exc:
        # The revision is committed: the sweeper sends a stalled re-grade again.
        raise BrokerUnavailable(
            str(exc),
            after=f"Run {run_id} is re-scoring (revision {revision}); its re-grade is sent once the "
            f"broker is back (run status {run_id})",
        ) from exc


def rescore_pending(run: Run) -> bool:
    """True while items of the run's current scoring revision still wait for their re-grade."""
    if run.scoring_revision <= 1:
        return False
    return _regrade_queryset(run.pk, run.scoring_revision).exists()


def rescore_stalled(run: Run) -> bool:
    """True when no re-grade batch of the run was written for ``RESCORE_STALL`` (each batch
    archives its old grades with the time): the task was lost, not just long."""
    latest = GradeRevision.objects.filter(item__run_id=run.pk).aggregate(at=Max("created_at"))["at"]
    return latest is None or latest < timezone.now() - RESCORE_STALL


def _regrade_queryset(run_id: Any, revision: int) -> Any:
    return RunItem.objects.filter(
        run_id=run_id, scoring_revision__lt=revision, evidence__isnull=False
    ).exclude(status="")


def run_rescore_execute(*, run_id: Any, revision: int) -> int:
    """The re-grade of revision ``revision`` (the task's body); returns the items re-graded.

    Idempotent: a redelivered task (or a second one) skips items already at ``revision``
    (each batch archives the old grades as ``GradeRevision`` rows, numbered by the item's
    previous ``scoring_revision``, and writes the new ones in one transaction), and does
    nothing once the run moved past that revision or left ``scoring``. Items are streamed
    ``RESCORE_BATCH`` at a time; lane counters are rebuilt from the stored grades (streamed
    too), then the run is finalised (``runs.scoring.finalize_run``)."""
    from runs.scoring import scoring_lock

    # Under the run's scoring lock: a batch can take longer than RESCORE_STALL, and the
    # sweeper then enqueued the re-grade again; the second task re-graded the same items
    # beside the first. Now it (and the sweeper's finalize) finds the lock held and leaves.
    with scoring_lock(run_id) as mine:
        if not mine:
            return 0
        try:
            return _rescore_execute(run_id, revision)
        except RESUMABLE:
            raise  # the sweeper sends the re-grade again; it resumes where it stopped
        except Exception as exc:
            # Sent again by the sweeper, it raised again every 5 minutes, and the run stayed
            # in scoring for good (a cancel is refused while its re-grade is pending).
            _rescore_failed(run_id, revision, exc)
            raise


def _rescore_failed(run_id: Any, revision: int, exc: Exception) -> None:
    """The re-grade of ``revision`` stopped on an error: the run ends ``failed`` saying why
    (a failed scoring's end), so it can be re-scored again once the cause is fixed."""
    from runs.scoring import fail_scoring

    log.error("run %s: re-scoring (revision %s) failed: %s", run_id, revision, exc)
    run = Run.objects.light().filter(pk=run_id, scoring_revision=revision, status=RunStatus.SCORING).first()
    if run is not None:
        # The lanes' counts and counters follow the grades written so far (some of this
        # revision, the rest of the one before), as the case list shows them; each lane is
        # its own try: an error of the database itself stops there.
        for lane in RunLane.objects.filter(run_id=run.pk):
            try:
                _rebuild_lane_counters(lane, run.repetitions)
            except Exception:
                log.exception("run %s: the counters of lane %s were not rebuilt", run_id, lane.pk)
        reason = f"re-scoring failed (revision {revision}): {type(exc).__name__}: {exc}"
        fail_scoring(run, error=reason, reason=reason)


def _rescore_execute(run_id: Any, revision: int) -> int:
    from runs.dispatch import lane_context_for
    from runs.scoring import finalize_run

    run = Run.objects.light().filter(pk=run_id).first()
    if run is None or run.scoring_revision != revision or run.status != RunStatus.SCORING:
        return 0
    done = 0
    for lane in RunLane.objects.filter(run=run).select_related("deployment", "deployment__workspace"):
        ctx = lane_context_for(lane, run)
        load_stored_findings(ctx, run.pk)
        pending = (
            _regrade_queryset(run.pk, revision)
            .filter(lane_id=lane.pk)
            .order_by("id")
            .only("id", "challenge_key", "case_key", "repetition", "attempt_count", "status",
                  "outcome_class", "score", "grade", "evidence", "scoring_revision")
        )  # fmt: skip
        batch: list[RunItem] = []
        for item in pending.iterator(chunk_size=RESCORE_BATCH):
            batch.append(item)
            if len(batch) >= RESCORE_BATCH:
                if (graded := _regrade_batch(ctx, batch, revision)) is None:
                    return done
                done, batch = done + graded, []
        if batch:
            if (graded := _regrade_batch(ctx, batch, revision)) is None:
                return done
            done += graded
        if not _rebuild_lane_counters(lane, run.repetitions):
            return done
    run.refresh_from_db()
    if run.status == RunStatus.SCORING and run.scoring_revision == revision:
        finalize_run(run)
    return done


def _regrade_batch(ctx: Any, items: list[RunItem], revision: int) -> int | None:
    """Re-grades and writes a batch; None (nothing graded or written) once this thread no
    longer scores the run: cancelled, or its scoring lease was taken over (no judge call is
    paid twice, no grade written over the new owner's)."""
    from runs.judging import still_scoring

    if not still_scoring(ctx.run_id):
        return None
    now = timezone.now()
    archive = [
        GradeRevision(
            item_id=item.pk, revision=item.scoring_revision, status=item.status,
            outcome_class=item.outcome_class, score=item.score, grade=item.grade, created_at=now,
        )
        for item in items
    ]  # fmt: skip
    ctx.data.load((item.challenge_key, item.case_key) for item in items)  # the batch's cases: one query
    for item in items:
        key = ItemKey(item.pk, item.challenge_key, item.case_key, item.repetition, item.attempt_count)
        case, base = ctx.data.case(item.challenge_key, item.case_key)
        try:
            evidence = rebuild_evidence(ctx, base, item.evidence)
            result = grade_evidence(
                ctx, key, evidence, item.evidence.get("response") or {}, attempt=item.attempt_count
            )
            if result.grade is None or result.record is None:
                raise RuntimeError("the engine returned no grade")
            grade, score = result.grade, result.record.score
        except RESUMABLE:
            raise  # the task's time is up, or the database went away: not this item's fault
        except Exception as exc:
            # One item's recorded evidence that cannot be read or graded again (recorded by
            # another version, a response the reader refuses now) costs that item, not the
            # re-score: ERROR / evaluator_error saying why, its evidence kept.
            log.exception("run %s: item %s could not be re-graded", ctx.run_id, item.pk)
            grade, score = _not_regraded(ctx, key, case, base, exc)
        item.grade = storable(grade)  # a judge's text may hold NUL characters
        item.status = grade.get("status") or ""
        item.outcome_class = grade.get("outcome_class") or ""
        item.reason_code = (grade.get("reason_code") or "")[:100]
        item.score = score
        item.scoring_revision = revision
        item.evidence = None  # not written; frees the batch's evidence early
    with transaction.atomic():
        if not still_scoring(ctx.run_id, locked=True):
            return None
        GradeRevision.objects.bulk_create(archive, batch_size=RESCORE_BATCH, ignore_conflicts=True)
        RunItem.objects.bulk_update(
            items, ["grade", "status", "outcome_class", "reason_code", "score", "scoring_revision"],
            batch_size=RESCORE_BATCH,
        )  # fmt: skip
    return len(items)


def _not_regraded(ctx: Any, key: ItemKey, case: Any, base: Any, exc: Exception) -> tuple[dict[str, Any], Any]:
    """The grade document and score of an item whose recorded evidence could not be re-graded."""
    from grading.engine import CaseGrade

    context = grade_context(ctx, key, base, attempt=key.attempt_count, findings=[])
    doc = CaseGrade.crashed(case, context, exc, what="the recorded evidence could not be re-graded").to_dict()
    return doc, record_from_grade(doc, metrics=None, content_hash=case.content_hash).score


def _rebuild_lane_counters(lane: RunLane, repetitions: int) -> bool:
    """The lane's counters, status counts, score sums and judge spend from its current grades;
    written (True) only while this thread still holds the run's scoring lease, as a batch is:
    the lane's row locked, then the run's (``still_scoring``), so what a new owner of the
    lease wrote since these grades were read (an n_wise grade moves the counters) is never
    written over. A cancel that landed after the lane's last batch (it is refused while
    batches are pending) does not stop it: the counters then agree with the grades written."""
    from runs.judging import still_scoring
    from runs.recording import _locked

    counters = LaneCounters(repetitions)
    counts = dict.fromkeys(STATUS_COLUMNS.values(), 0)
    score_sum, scored = 0.0, 0
    charged_tokens, charged_usd = 0, 0.0  # what the judge calls counted against judge_limits
    rows = (
        RunItem.objects.filter(lane_id=lane.pk)
        .exclude(status="")
        .order_by("id")
        .values_list("grade", "status", "score", "input_tokens", "output_tokens", "cost_usd", "latency_ms")
    )
    for grade, status, score, tin, tout, cost, latency in rows.iterator(chunk_size=RESCORE_BATCH):
        if not grade:
            continue
        metrics = {"input_tokens": tin, "output_tokens": tout, "cost_usd": cost, "latency_ms": latency}
        record = record_from_grade(grade, metrics=metrics)
        counters.add(record)
        charged_tokens += record.judge_charged_tokens
        charged_usd += record.judge_charged_usd
        column = STATUS_COLUMNS.get(status)
        if column:
            counts[column] += 1
        if score is not None:
            score_sum += score
            scored += 1
    summary = counters.summary()
    with transaction.atomic():
        list(_locked(RunLane.objects.filter(pk=lane.pk)).values_list("pk"))
        if not still_scoring(lane.run_id, locked=True, or_cancelled=True):
            return False
        RunLane.objects.filter(pk=lane.pk).update(
            counters=counters.to_dict(),
            score_sum=score_sum,
            scored=scored,
            judge_calls=int(summary["judge_usage"]["calls"] or 0),
            judge_input_tokens=int(summary["judge_usage"]["input_tokens"] or 0),
            judge_output_tokens=int(summary["judge_usage"]["output_tokens"] or 0),
            judge_cost_usd=float(summary["judge_usage"]["cost_usd"] or 0.0),
            judge_charged_tokens=charged_tokens,
            judge_charged_usd=charged_usd,
            **counts,
        )
    return True
