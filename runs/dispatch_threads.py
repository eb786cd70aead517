"""The threads of a lane dispatcher (``runs.dispatch``): the asyncio loop thread that makes
the calls, the writer that records finished batches, and the grading pool used with judges.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
import queue
import threading
import time
from collections.abc import Callable, Coroutine
from datetime import timedelta
from typing import Any

from django.db import connection

from agentclash_site.lib.db import KeeperThread, is_connection_error, is_locked_error
from agentclash_site.lib.outbound import close_loop_client
from runs.recording import ItemResult, record_results

log = logging.getLogger(__name__)


_graders: concurrent.futures.ThreadPoolExecutor | None = None
_graders_lock = threading.Lock()


def graders() -> concurrent.futures.ThreadPoolExecutor:
    """A small process-wide pool for grading with judges (blocking provider calls)."""
    global _graders
    with _graders_lock:
        if _graders is None:
            _graders = concurrent.futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="grade")
        return _graders


class LoopThread:
    """An asyncio loop in a daemon thread with one shared outbound client.

    ``start(calls)`` hands a whole claim's calls over with one wake-up of the loop (not one
    ``run_coroutine_threadsafe`` each: every hand-over between the two threads costs a GIL
    switch); each call's result lands in one queue that ``finished`` drains.
    """

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._results: queue.SimpleQueue[tuple[Any, Any, BaseException | None]] = queue.SimpleQueue()
        self._tasks: set[asyncio.Task[Any]] = set()  # touched on the loop thread only
        self.thread = threading.Thread(target=self._run, name="lane-dispatch-loop", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def submit(self, coro: Any) -> concurrent.futures.Future[Any]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def start(self, calls: list[tuple[Any, Coroutine[Any, Any, Any]]]) -> None:
        """Start ``(key, coroutine)`` calls on the loop; ``finished`` returns ``(key, result)``."""
        self.loop.call_soon_threadsafe(self._start, calls)

    def _start(self, calls: list[tuple[Any, Coroutine[Any, Any, Any]]]) -> None:
        for key, coro in calls:
            task = self.loop.create_task(coro)
            self._tasks.add(task)
            task.add_done_callback(functools.partial(self._done, key))

    def _done(self, key: Any, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            self._results.put((key, None, asyncio.CancelledError()))
        else:
            error = task.exception()
            self._results.put((key, None if error is not None else task.result(), error))

    def finished(self, *, wait: float, more: float, expected: int) -> list[tuple[Any, Any]]:
        """The calls finished so far: waits up to ``wait`` seconds for the first, then up to
        ``more`` seconds for others (while fewer than ``expected`` arrived), then takes what
        is there. Raises the error of a call that raised."""
        try:
            first = self._results.get(timeout=wait)
        except queue.Empty:
            return []
        got = [first]
        end = time.monotonic() + more
        while len(got) < expected:
            try:
                got.append(self._results.get_nowait())
                continue
            except queue.Empty:
                pass
            left = end - time.monotonic()
            if left <= 0:
                break
            try:
                got.append(self._results.get(timeout=left))
            except queue.Empty:
                break
        out = []
        for key, value, error in got:
            if error is not None:
                raise error
            out.append((key, value))
        return out

    def _cancel_all(self) -> None:
        for task in list(self._tasks):
            task.cancel()

    def close(self) -> None:
        try:
            self.loop.call_soon_threadsafe(self._cancel_all)
            asyncio.run_coroutine_threadsafe(close_loop_client(), self.loop).result(timeout=10)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout=10)
            self.loop.close()


# Seconds before each new connection when a write lost its connection (``Writer._record``).
RECONNECT_DELAYS = (0.5, 2.0)
MERGE_LIMIT = 512  # results per write when batches queue up behind the writer
# Results per transaction on SQLite, where a write transaction holds the database's one write
# lock: a batch of 512 (a lane's max_in_flight) took ~0.5 s, and every write of the web server
# (an autosave, a login, a publish) waited behind it (bench/sqlite_stack.py).
SQLITE_WRITE_BATCH = 64
# A pause between two such transactions of one batch. A waiting writer does not queue for the
# lock: SQLite's busy handler retries after sleeps that grow to 100 ms, and it missed every gap
# between back-to-back transactions: behind eight 60 ms transactions a write waited ~0.53 s
# (p95) as behind one of 0.48 s; with 20 ms between them, 59 ms. The calls in flight go on
# meanwhile (the loop thread).
SQLITE_WRITE_GAP_SECONDS = 0.02


class Writer:
    """Writes finished batches (``record_results``), inline or on a thread of its own.

    On PostgreSQL a writer thread with its own connection writes while the dispatcher
    thread claims, calls and grades (the item UPDATE is the guard, so the split changes
    nothing about idempotency). Elsewhere (SQLite: one writer at a time) it writes inline,
    ``SQLITE_WRITE_BATCH`` results per transaction.
    """

    def __init__(
        self,
        *,
        lane_id: int,
        owner: str,
        revision: int,
        repetitions: int,
        threaded: bool,
        unstorable: Callable[[ItemResult, BaseException], ItemResult] | None = None,
    ) -> None:
        self.lane_id = lane_id
        self.owner = owner
        self.revision = revision
        self.repetitions = repetitions
        self.threaded = threaded
        # What to write instead of a result the database refused (``_record``); None: raise.
        self.unstorable = unstorable
        self.unstorable_items: list[int] = []
        self.seconds = 0.0
        self._unwritten: dict[int, None] = {}
        self._done: queue.SimpleQueue[tuple[list[ItemResult], list[int]]] = queue.SimpleQueue()
        self._error: BaseException | None = None
        if threaded:
            self._todo: queue.SimpleQueue[list[ItemResult] | None] = queue.SimpleQueue()
            self._thread = threading.Thread(target=self._run, name="lane-writer", daemon=True)
            self._thread.start()

    def _write(self, batch: list[ItemResult]) -> None:
        step = SQLITE_WRITE_BATCH if connection.vendor == "sqlite" else len(batch)
        for start in range(0, len(batch), step):
            if start:
                time.sleep(SQLITE_WRITE_GAP_SECONDS)  # another process's write gets its turn
            self._write_many([batch[start : start + step]])

    def _write_many(self, batches: list[list[ItemResult]]) -> None:
        """One ``record_results`` (one transaction) for the batches; each batch is reported
        done with its own written ids."""
        merged = batches[0] if len(batches) == 1 else [r for b in batches for r in b]
        t0 = time.perf_counter()
        written = self._record(merged)
        self.seconds += time.perf_counter() - t0
        if len(batches) == 1:
            self._done.put((batches[0], written))
            return
        mine = set(written)
        for batch in batches:
            self._done.put((batch, [r.item_id for r in batch if r.item_id in mine]))

    def _record(self, results: list[ItemResult]) -> list[int]:
        """``_record_or_split``; on the writer thread, a write that lost its connection (a
        database restart or failover) is tried again on a new one after each of
        ``RECONNECT_DELAYS``, so the finished calls are not made again. A write whose commit
        landed before the loss finds its items no longer claimed and writes nothing twice.
        Still lost after that: the error ends the slice, which gives its claims back.

        Inline on SQLite, a write that found the database locked for the whole busy timeout
        (another process's long transaction: a big trace import or publish of the web server)
        is tried again the same way, on the same connection: it ran nothing (its BEGIN
        IMMEDIATE failed). Before, it ended the slice, and the calls it had finished were
        made again."""
        for delay in RECONNECT_DELAYS:
            try:
                return self._record_or_split(results)
            except Exception as exc:
                if is_locked_error(exc) and not connection.in_atomic_block:
                    log.warning(
                        "lane %s: the database stayed locked (%s); writing again in %.1fs",
                        self.lane_id,
                        exc,
                        delay,
                    )
                    time.sleep(delay)
                    continue
                if not self.threaded or not is_connection_error(exc):
                    raise
                log.warning(
                    "lane %s: the writer lost its database connection (%s); connecting again in %.1fs",
                    self.lane_id, exc, delay,
                )  # fmt: skip
            time.sleep(delay)
            connection.close()
            try:
                fast_commit(True)  # a new connection: set it up as _run did
            except Exception as exc:
                if not is_connection_error(exc):
                    raise
                # still away: the next write meets the same error, and the last one raises it
        return self._record_or_split(results)

    def _record_or_split(self, results: list[ItemResult]) -> list[int]:
        """``record_results`` for the results; when it fails on their data (not on the
        connection), the halves are written apart until the item at fault is alone, and
        ``unstorable`` gives what is written for it instead: one item's value the database
        refuses no longer fails every item written with it (the batch claimed again and
        again until its claims ran out). The failed write rolled back, so nothing is
        written twice; the item UPDATE still guards each write."""
        try:
            return record_results(
                self.lane_id, results, owner=self.owner, revision=self.revision, repetitions=self.repetitions
            )
        except Exception as exc:
            if is_connection_error(exc):
                raise  # not the data (``_record`` connects again)
            if self.unstorable is None or connection.in_atomic_block:
                raise  # inside a caller's transaction, which this error has spoiled
            if len(results) > 1:
                half = len(results) // 2
                return self._record_or_split(results[:half]) + self._record_or_split(results[half:])
            (result,) = results
            log.error(
                "lane %s item %s: its result could not be written, recording it as unstorable",
                self.lane_id,
                result.item_id,
                exc_info=exc,
            )
            self.unstorable_items.append(result.item_id)
            return record_results(
                self.lane_id,
                [self.unstorable(result, exc)],
                owner=self.owner,
                revision=self.revision,
                repetitions=self.repetitions,
            )

    def _run(self) -> None:
        try:
            fast_commit(True)
            while True:
                batch = self._todo.get()
                if batch is None:
                    return
                # The batches that queued up while the last write ran go in one transaction
                # (the round trips per write, not the rows, are what a write costs).
                batches, size, stop = [batch], len(batch), False
                while size < MERGE_LIMIT:
                    try:
                        more = self._todo.get_nowait()
                    except queue.Empty:
                        break
                    if more is None:
                        stop = True
                        break
                    batches.append(more)
                    size += len(more)
                self._write_many(batches)
                if stop:
                    return
        except BaseException as exc:  # handed to the dispatcher thread by collect()
            self._error = exc
        finally:
            connection.close()

    def submit(self, batch: list[ItemResult]) -> None:
        if not batch:
            return
        for r in batch:
            self._unwritten[r.item_id] = None
        if self.threaded:
            self._todo.put(batch)
        else:
            self._write(batch)

    def unwritten(self) -> list[int]:
        return list(self._unwritten)

    def collect(self) -> list[tuple[list[ItemResult], list[int]]]:
        """The batches written since the last call; raises the writer's error, if any."""
        out = []
        while True:
            try:
                batch, written = self._done.get_nowait()
            except queue.Empty:
                break
            for r in batch:
                self._unwritten.pop(r.item_id, None)
            out.append((batch, written))
        if self._error is not None:
            raise self._error
        return out

    def wait(self, *, below: int = 1) -> list[tuple[list[ItemResult], list[int]]]:
        """Block until fewer than ``below`` results are unwritten (or the writer failed)."""
        out = self.collect()
        while len(self._unwritten) >= below and self.threaded:
            if not self._thread.is_alive():
                out += self.collect()
                if self._error is None and self._unwritten:
                    raise RuntimeError("the lane writer stopped with results unwritten")
                break
            try:
                batch, written = self._done.get(timeout=0.5)
            except queue.Empty:
                continue
            for r in batch:
                self._unwritten.pop(r.item_id, None)
            out.append((batch, written))
            if self._error is not None:
                raise self._error
        return out

    def close(self) -> None:
        if self.threaded and self._thread.is_alive():
            self._todo.put(None)
            self._thread.join(timeout=60)


class ClaimKeeper:
    """Keeps a live dispatcher's claims from expiring, on a thread with its own connection.

    A claim's deadline covers the item's calls (every attempt's timeout plus the backoffs)
    and ``RUNS_CLAIM_MARGIN_SECONDS``, not what follows them: grading (judges make blocking
    calls of up to 60 s each, retried, several samples) and waiting for the writer. The
    dispatcher thread is blocked while it grades, so this thread moves the deadline of every
    claim of ``owner`` that is about to expire to ``now + margin`` (an item whose calls still
    run has its own deadline, earlier: it is never touched before that) and renews the
    lane's lease, every ``interval`` seconds, for at most ``max_seconds``. The sweeper is for
    claims whose dispatcher died: this thread dies with it."""

    def __init__(
        self, *, lane_id: int, owner: str, renew_lease: Callable[[int], None], max_seconds: float
    ) -> None:
        from django.conf import settings

        self.lane_id = lane_id
        self.owner = owner
        self.renew_lease = renew_lease
        self.margin = max(0.1, float(settings.RUNS_CLAIM_MARGIN_SECONDS))
        self.interval = max(0.05, min(5.0, self.margin / 3))
        self._thread = KeeperThread(
            name="lane-claims",
            interval=self.interval,
            step=self.keep,
            failure=f"lane {lane_id}: the claims were not kept alive this time",
            until=time.monotonic() + max_seconds,
        )

    def keep(self) -> int:
        """One round; returns the claims kept. The rows are picked with ``SKIP LOCKED``
        in id order: an item the writer or the sweeper holds is left to them (this thread
        never waits on an item row, so it can never deadlock with their multi-row UPDATEs)
        and is kept on the next round if it is still claimed."""
        from django.utils import timezone

        horizon = timezone.now() + timedelta(seconds=self.margin)
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE runs_runitem SET claim_deadline = %s WHERE id IN (SELECT id FROM runs_runitem"
                " WHERE state = 'claimed' AND claim_deadline < %s AND lane_id = %s AND claim_owner = %s"
                " ORDER BY id FOR UPDATE SKIP LOCKED)",
                [horizon, horizon, self.lane_id, self.owner],
            )
            kept = cursor.rowcount
        self.renew_lease(self.lane_id)
        return kept

    def close(self) -> None:
        self._thread.close()


def fast_commit(on: bool) -> None:
    """On PostgreSQL the dispatcher's commits do not wait for the WAL flush: a commit lost
    to a database crash leaves items claimed, and the sweeper runs them again."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET synchronous_commit TO OFF" if on else "RESET synchronous_commit")
