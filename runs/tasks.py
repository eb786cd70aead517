"""Celery tasks of the runs app. They take ids, are idempotent and acknowledge late
(settings); the database is the source of truth and the sweeper re-enqueues lost work."""

from __future__ import annotations

import logging
import time
from typing import Any

from celery import shared_task
from celery.signals import worker_process_init

from runs.memory import release_free_memory

logger = logging.getLogger("runs.dispatch")


@worker_process_init.connect
def _freeze_long_lived(**_: Any) -> None:
    """In each new worker process, before its first task: collect once and freeze what is
    alive (runs.dispatch.freeze_long_lived), so the first dispatch slice does not pay it."""
    from runs.dispatch import freeze_long_lived
    from runs.memory import limit_malloc_arenas

    limit_malloc_arenas()
    freeze_long_lived()


def _stop_on_sigint() -> None:
    """In a pool process: SIGINT asks its dispatch slices to stop (runs.dispatch.request_stop).
    The main process sends it on a warm shutdown (agentclash_site/celery.py), and a Ctrl-C in
    a terminal reaches the whole process group. Billiard ignores SIGINT in pool processes
    (after ``worker_process_init``, so it is set here, as a slice starts); nothing else uses
    it there. SIGTERM (how Celery kills a pool process: a cold shutdown, a revoke with
    terminate) keeps its meaning. Not in the main process (the solo pool), where SIGINT is
    Celery's own shutdown signal and ``worker_shutting_down`` tells the slice directly."""
    import signal
    import threading

    from billiard.process import current_process

    if current_process().name == "MainProcess" or threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGINT) is not _on_sigint:
        signal.signal(signal.SIGINT, _on_sigint)


def _on_sigint(signum: int, frame: Any) -> None:
    from runs.dispatch import request_stop

    request_stop()


@shared_task(name="runs.dispatch_lane")
def dispatch_lane(lane_id: int) -> dict[str, Any]:
    """One time slice of a lane (runs.dispatch); re-enqueues itself while work remains."""
    from runs.dispatch import dispatch_lane as run_slice

    _stop_on_sigint()
    started = time.perf_counter()
    try:
        result = run_slice(lane_id, requeue=lambda lid: dispatch_lane.delay(lid))
    finally:
        release_free_memory()  # the slice's batches, grades and (at the end) scoring
    logger.info(
        "lane %s: %s; claimed %d, recorded %d in %.2fs (peak in flight %d; seconds %s)",
        lane_id, result.reason, result.claimed, result.recorded, time.perf_counter() - started,
        result.peak_in_flight, {k: round(v, 2) for k, v in result.timings.items()},
    )  # fmt: skip
    return {"claimed": result.claimed, "recorded": result.recorded, "reason": result.reason}


@shared_task(name="runs.check_run")
def check_run(run_id: str) -> bool:
    """Finalise a run whose counters say every item finished."""
    from runs.scoring import check_run as check

    try:
        return check(run_id)
    finally:
        release_free_memory()  # scoring's transient rows


@shared_task(name="runs.sweep")
def sweep() -> dict[str, Any]:
    """The periodic recovery sweep (runs.sweeper)."""
    from runs.sweeper import sweep as run_sweep

    return run_sweep()


# The result pages' tasks (stored summaries and comparisons) register with the worker here.
from runs import compare_tasks, result_tasks  # noqa: E402, F401


@shared_task(name="runs.probe_run")
def probe_run(run_id: str) -> str:
    """Store the run's baseline-probe findings once (runs.probing)."""
    from runs.probing import probe_run as probe

    try:
        return probe(run_id)
    finally:
        release_free_memory()  # every case built and probed once


@shared_task(name="runs.rescore_run")
def rescore_run(run_id: str, revision: int) -> int:
    """Re-grade a run's recorded evidence for scoring revision ``revision`` (idempotent:
    ``runs.services.operations.run_rescore_execute``)."""
    from runs.services.operations import run_rescore_execute

    return run_rescore_execute(run_id=run_id, revision=revision)
