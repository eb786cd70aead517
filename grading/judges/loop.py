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
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from agentclash_site.lib.outbound import OutboundClient

T = TypeVar("T")


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
        self._loop.run_forever()
        self._loop.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def run(self, fn: Callable[[OutboundClient], Awaitable[T]], timeout: float | None = None) -> T:
        """Run ``fn(client)`` on the loop thread and return its result (or raise its error)."""
        with self._lock:
            if self._closed:
                raise RuntimeError("this judge loop is closed")
        if threading.current_thread() is self._thread:
            raise RuntimeError("LoopThread.run called from its own loop thread")

        async def call() -> T:
            if self._client is None:
                self._client = OutboundClient()
            return await fn(self._client)

        future = asyncio.run_coroutine_threadsafe(call(), self._loop)
        return future.result(timeout)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True

        async def shutdown() -> None:
            if self._client is not None:
                await self._client.close()

        try:
            asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(10)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)

    def __enter__(self) -> LoopThread:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
