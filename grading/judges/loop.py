"""A private event loop on a daemon thread, so synchronous code can make async HTTP calls.

``grade_case`` (and so ``Judge.evaluate``) is synchronous, and it may be called from a
worker thread while another asyncio loop runs elsewhere in the process (a Celery worker,
an async executor, pytest-asyncio). ``asyncio.run`` / ``async_to_sync`` in that thread
would either fail ("loop already running") or create and tear down a loop per call. The
:class:`LoopThread` owns one loop and one :class:`OutboundClient` for its lifetime;
:meth:`run` submits a coroutine with ``run_coroutine_threadsafe`` and blocks the calling
thread until it finishes. Any number of threads may call :meth:`run` at once. Call
:meth:`close` (or use it as a context manager) when done: it closes the client and joins
the thread.

A caller that stops waiting stops its call. When the wait in :meth:`run` ends with an
exception while the call is still in flight (Ctrl-C's ``KeyboardInterrupt`` in the CLI, a
Celery task's ``SoftTimeLimitExceeded``, ``run``'s own ``timeout``), the call's task is
cancelled and given up to ``CANCEL_GRACE`` seconds to unwind before the exception goes on:
it would otherwise keep calling the provider (and spending) for nobody, and a loop closed
under it logs "Task was destroyed but it is pending!". :meth:`close` does the same for
every task still on the loop before it closes the client's sessions, so neither that nor
"Unclosed client session" is printed at exit.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from agentclash_site.lib.outbound import OutboundClient

log = logging.getLogger(__name__)

T = TypeVar("T")

# Seconds a cancelled call (or, in close, all of them) gets to finish its cancellation.
CANCEL_GRACE = 5.0
# Seconds close waits for the client's sessions to close, and then for the thread to end.
CLOSE_TIMEOUT = 10.0


async def _cancel_and_wait(tasks: set[asyncio.Task[Any]], grace: float) -> None:
    """Cancel ``tasks`` and wait up to ``grace`` seconds for them to finish; log the ones
    that did not (a coroutine that swallows its cancellation)."""
    tasks = {t for t in tasks if not t.done()}
    for task in tasks:
        task.cancel()
    if not tasks:
        return
    _, pending = await asyncio.wait(tasks, timeout=grace)
    for task in pending:
        log.warning("a judge call did not finish its cancellation within %ss: %r", grace, task)


class LoopThread:
    def __init__(self, *, name: str = "judge-loop") -> None:
        self._loop = asyncio.new_event_loop()
        self._client: OutboundClient | None = None
        self._closed = False
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()

    def _main(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_forever()
        finally:
            self._loop.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def run(self, fn: Callable[[OutboundClient], Awaitable[T]], timeout: float | None = None) -> T:
        """Run ``fn(client)`` on the loop thread and return its result (or raise its error).

        If waiting for it is interrupted (an exception raised in this thread, ``timeout``
        passing), the call is cancelled and awaited (bounded) before the exception goes on."""
        with self._lock:
            if self._closed:
                raise RuntimeError("this judge loop is closed")
        if threading.current_thread() is self._thread:
            raise RuntimeError("LoopThread.run called from its own loop thread")
        started: set[asyncio.Task[Any]] = set()  # this call's task, once it runs

        async def call() -> T:
            task = asyncio.current_task()
            assert task is not None
            started.add(task)
            if self._client is None:
                self._client = OutboundClient()
            return await fn(self._client)

        future = None
        try:
            future = asyncio.run_coroutine_threadsafe(call(), self._loop)
            return future.result(timeout)
        except BaseException:
            if future is not None and not future.done():
                self._stop_call(future, started)
            raise

    def _stop_call(self, future: Any, started: set[asyncio.Task[Any]]) -> None:
        """Cancel a call whose caller stopped waiting and wait (bounded) for it to unwind."""
        future.cancel()  # a task that has not started yet is cancelled before it runs
        try:
            asyncio.run_coroutine_threadsafe(_cancel_and_wait(started, CANCEL_GRACE), self._loop).result(
                CANCEL_GRACE + 1
            )
        except Exception:  # the loop is closed or stuck: the caller's exception matters more
            log.warning("could not wait for a cancelled judge call to finish", exc_info=True)

    def close(self) -> None:
        """Cancel the calls still in flight (bounded), close the client, end the thread."""
        with self._lock:
            if self._closed:
                return
            self._closed = True

        async def shutdown() -> None:
            await _cancel_and_wait(asyncio.all_tasks() - {asyncio.current_task()}, CANCEL_GRACE)
            if self._client is not None:
                await self._client.close()

        try:
            asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(CANCEL_GRACE + CLOSE_TIMEOUT)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(CLOSE_TIMEOUT)

    def __enter__(self) -> LoopThread:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
