"""A programmable fake agent: a real HTTP server on ``127.0.0.1:<free port>``.

It runs aiohttp.web on its own event loop in a background thread, so both plain (sync)
tests and async tests can drive it, and the client under test talks to it over a real
socket. Every request is recorded; what the server answers is programmed per call, per
case key or per path.

Quick reference::

    from tests.fakes.agent_server import FakeAgent, ok, server_error, rate_limited, hang

    with FakeAgent() as agent:
        agent.url                                   # "http://127.0.0.1:PORT/agent"
        agent.url_for("/elsewhere")                 # same server, another path
        agent.queue(server_error(503), ok())        # the next calls, whatever their case
        agent.queue(rate_limited("1"), ok(), case="c2")   # the next calls of case "c2"
        agent.route("/old", redirect(agent.url))    # every call to a path (sticky)
        agent.default = ok({"final_output": "42"})  # when nothing else matches
        ...
        agent.calls                                 # number of requests received
        agent.calls_for("c2")                       # ... for one case key
        agent.requests[-1].json / .headers / .body  # what was sent (assert signatures, that
                                                    # expectations never leave the server)
        agent.wait_for_calls(3, timeout=5)          # poll with a deadline, never sleep
        agent.wait_idle(timeout=5)                  # every handler has returned

Choosing the answer for a request, first match wins: a ``route`` for its path, then the
queue of its case key (``case.key`` of a protocol request), then the global queue, then
``default`` (``ok()``: ``{"final_output": "ok:<case key>"}``). Queued behaviours are used
once each, in order.

Behaviours (build them with these factories; any ``async (request, recorded, agent) ->
web.StreamResponse`` callable works too):

- ``ok(body=None, status=200, headers=None)``: a JSON answer (a dict, or a callable of the
  recorded request returning one).
- ``chat_ok(content="pong", tool_calls=None, usage=..., finish_reason="stop")``: an
  OpenAI chat completion.
- ``server_error(status=500)``, ``rate_limited(retry_after="1", status=429)``.
- ``hang()``: never answers; returns only when the server stops (use a short client timeout).
- ``slow(seconds, then=ok())``: answers after a server-side wait (cut short by ``stop``).
- ``invalid_json()``, ``non_protocol_json(body={"answer": 42})``,
  ``raw(body, status=200, content_type=...)``.
- ``huge(size=50 MiB, declare_length=True, status=200)``: streams ``size`` bytes in 64 KiB chunks and
  stops as soon as the client goes away; ``agent.bytes_sent`` counts what left the server.
- ``redirect(location, status=302)``.
- ``wire(data)``: ``data`` as the raw bytes of the response, then the connection closes.

For address-guard tests pair it with ``tests.fakes.network.loopback_only()``, which makes
any connection attempt to a non-loopback address fail the test.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
from collections import defaultdict, deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from multidict import CIMultiDict

Behaviour = Callable[[web.Request, "RecordedRequest", "FakeAgent"], Awaitable[web.StreamResponse]]

MiB = 1024 * 1024


@dataclass
class RecordedRequest:
    method: str
    path: str
    query: str
    headers: CIMultiDict[str]
    body: bytes
    json: Any = None  # the parsed body, or None when it was not JSON
    received_at: float = field(default_factory=time.monotonic)

    @property
    def case_key(self) -> str | None:
        if isinstance(self.json, dict) and isinstance(self.json.get("case"), dict):
            key = self.json["case"].get("key")
            return key if isinstance(key, str) else None
        return None

    @property
    def challenge_key(self) -> str | None:
        if isinstance(self.json, dict) and isinstance(self.json.get("challenge"), dict):
            key = self.json["challenge"].get("key")
            return key if isinstance(key, str) else None
        return None


# --- behaviours ------------------------------------------------------------------------------


def ok(
    body: dict[str, Any] | Callable[[RecordedRequest], dict[str, Any]] | None = None,
    *,
    status: int = 200,
    headers: dict[str, str] | None = None,
) -> Behaviour:
    async def behaviour(
        request: web.Request, recorded: RecordedRequest, agent: FakeAgent
    ) -> web.StreamResponse:
        if body is None:
            data: Any = {"final_output": f"ok:{recorded.case_key}"}
        elif callable(body):
            data = body(recorded)
        else:
            data = body
        return web.json_response(data, status=status, headers=headers)

    return behaviour


def chat_ok(
    content: str | None = "pong",
    *,
    tool_calls: list[dict[str, Any]] | None = None,
    usage: dict[str, int] | None = None,
    finish_reason: str = "stop",
    model: str = "fake-model",
) -> Behaviour:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    reply = {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": usage
        if usage is not None
        else {"prompt_tokens": 11, "completion_tokens": 2, "total_tokens": 13},
    }
    return ok(reply)


def raw(body: bytes | str, *, status: int = 200, content_type: str = "application/json") -> Behaviour:
    data = body.encode() if isinstance(body, str) else body

    async def behaviour(
        request: web.Request, recorded: RecordedRequest, agent: FakeAgent
    ) -> web.StreamResponse:
        return web.Response(body=data, status=status, headers={"Content-Type": content_type})

    return behaviour


def server_error(
    status: int = 500, body: str = '{"error": "boom"}', *, retry_after: str | None = None
) -> Behaviour:
    async def behaviour(
        request: web.Request, recorded: RecordedRequest, agent: FakeAgent
    ) -> web.StreamResponse:
        headers = {"Content-Type": "application/json"}
        if retry_after is not None:
            headers["Retry-After"] = retry_after
        return web.Response(body=body.encode(), status=status, headers=headers)

    return behaviour


def rate_limited(retry_after: str | None = "1", *, status: int = 429) -> Behaviour:
    return server_error(status, '{"error": "slow down"}', retry_after=retry_after)


def invalid_json(text: str = '{"final_output": "half') -> Behaviour:
    return raw(text)


def non_protocol_json(body: Any = None) -> Behaviour:
    return ok({"answer": 42} if body is None else body)


def wire(data: bytes) -> Behaviour:
    """Write ``data`` to the socket as the whole response (a malformed status line, a bad
    chunk, a body cut short) and close the connection."""

    async def behaviour(
        request: web.Request, recorded: RecordedRequest, agent: FakeAgent
    ) -> web.StreamResponse:
        transport = request.transport
        assert transport is not None
        transport.write(data)
        transport.close()
        return web.Response()  # never sent: the connection is closed

    return behaviour


def redirect(location: str, *, status: int = 302) -> Behaviour:
    async def behaviour(
        request: web.Request, recorded: RecordedRequest, agent: FakeAgent
    ) -> web.StreamResponse:
        return web.Response(status=status, headers={"Location": location})

    return behaviour


def hang(max_seconds: float = 60.0) -> Behaviour:
    """Never answer (until the server stops; ``max_seconds`` is only a safety net)."""

    async def behaviour(
        request: web.Request, recorded: RecordedRequest, agent: FakeAgent
    ) -> web.StreamResponse:
        assert agent._stopping is not None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(agent._stopping.wait(), timeout=max_seconds)
        return web.Response(status=504)

    return behaviour


def slow(seconds: float, then: Behaviour | None = None) -> Behaviour:
    follow = then or ok()

    async def behaviour(
        request: web.Request, recorded: RecordedRequest, agent: FakeAgent
    ) -> web.StreamResponse:
        assert agent._stopping is not None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(agent._stopping.wait(), timeout=seconds)
        return await follow(request, recorded, agent)

    return behaviour


def huge(
    size: int = 50 * MiB, *, declare_length: bool = True, chunk: int = 64 * 1024, status: int = 200
) -> Behaviour:
    """Stream ``size`` bytes; stop as soon as the client disconnects."""
    block = b" " * chunk

    async def behaviour(
        request: web.Request, recorded: RecordedRequest, agent: FakeAgent
    ) -> web.StreamResponse:
        response = web.StreamResponse(status=status, headers={"Content-Type": "application/json"})
        if declare_length:
            response.content_length = size
        await response.prepare(request)
        sent = 0
        try:
            while sent < size:
                part = block[: min(chunk, size - sent)]
                await response.write(part)
                sent += len(part)
                agent.bytes_sent += len(part)
        except (ConnectionError, RuntimeError):
            pass  # the client went away: exactly what the test wants
        return response

    return behaviour


# --- the server -----------------------------------------------------------------------------


class FakeAgent:
    """See the module docstring. ``path`` is the path of :attr:`url`."""

    def __init__(self, *, path: str = "/agent", host: str = "127.0.0.1") -> None:
        self.host = host
        self.path = path
        self.port = 0
        self.requests: list[RecordedRequest] = []
        self.default: Behaviour = ok()
        self.bytes_sent = 0
        self._lock = threading.Lock()
        self._queue: deque[Behaviour] = deque()
        self._case_queues: dict[str, deque[Behaviour]] = defaultdict(deque)
        self._routes: dict[str, Behaviour] = {}
        self._active = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    # programming

    @property
    def url(self) -> str:
        return self.url_for(self.path)

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def url_for(self, path: str) -> str:
        return f"{self.base_url}{path}"

    def queue(self, *behaviours: Behaviour, case: str | None = None) -> FakeAgent:
        with self._lock:
            target = self._case_queues[case] if case is not None else self._queue
            target.extend(behaviours)
        return self

    def route(self, path: str, behaviour: Behaviour) -> FakeAgent:
        with self._lock:
            self._routes[path] = behaviour
        return self

    # observing

    @property
    def calls(self) -> int:
        return len(self.requests)

    def calls_for(self, case_key: str) -> int:
        return sum(1 for r in list(self.requests) if r.case_key == case_key)

    def requests_for(self, case_key: str) -> list[RecordedRequest]:
        return [r for r in list(self.requests) if r.case_key == case_key]

    def wait_for_calls(self, count: int, *, timeout: float = 10.0) -> None:
        self._wait(lambda: self.calls >= count, timeout, f"{count} calls (got {self.calls})")

    def wait_idle(self, *, timeout: float = 10.0) -> None:
        self._wait(lambda: self._active == 0, timeout, "the handlers to finish")

    def _wait(self, predicate: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() >= deadline:
                raise AssertionError(f"timed out after {timeout}s waiting for {what}")
            time.sleep(0.01)

    # lifecycle

    def __enter__(self) -> FakeAgent:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> FakeAgent:
        self._thread = threading.Thread(target=self._run, name="fake-agent", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout=10):
            raise RuntimeError("the fake agent did not start within 10s")
        if self._error is not None:
            raise RuntimeError("the fake agent failed to start") from self._error
        return self

    def stop(self) -> None:
        loop = self._loop
        if loop is None or self._thread is None:
            return
        if self._stopping is not None:
            loop.call_soon_threadsafe(self._stopping.set)
        loop.call_soon_threadsafe(loop.stop)
        self._thread.join(timeout=15)
        self._thread = None

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        try:
            runner = loop.run_until_complete(self._startup())
        except BaseException as exc:  # surfaced by start()
            self._error = exc
            self._ready.set()
            loop.close()
            return
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(runner.cleanup())
            loop.close()

    async def _startup(self) -> web.AppRunner:
        self._stopping = asyncio.Event()
        app = web.Application(client_max_size=64 * MiB)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=2.0)
        await runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, 0))
        self.port = sock.getsockname()[1]
        await web.SockSite(runner, sock).start()
        return runner

    def _pick(self, recorded: RecordedRequest) -> Behaviour:
        with self._lock:
            if recorded.path in self._routes:
                return self._routes[recorded.path]
            key = recorded.case_key
            if key is not None and self._case_queues.get(key):
                return self._case_queues[key].popleft()
            if self._queue:
                return self._queue.popleft()
            return self.default

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self._active += 1
        try:
            body = await request.read()
            try:
                parsed = json.loads(body) if body else None
            except ValueError:
                parsed = None
            recorded = RecordedRequest(
                method=request.method,
                path=request.path,
                query=request.query_string,
                headers=CIMultiDict(request.headers),
                body=body,
                json=parsed,
            )
            self.requests.append(recorded)
            return await self._pick(recorded)(request, recorded, self)
        finally:
            self._active -= 1
