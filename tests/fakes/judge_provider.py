"""A programmable fake judge provider on a real loopback socket (OpenAI-compatible
``/chat/completions`` and Anthropic ``/v1/messages``).

    with FakeJudgeProvider() as fake:
        fake.base_url                               # "http://127.0.0.1:PORT/v1"
        fake.default = verdict({"pass": True})      # answer every call (citations added)
        fake.queue(rate_limited("0"), verdict({"score": 4}))   # the next calls, in order
        fake.calls, fake.requests[-1]               # count and recorded JSON bodies

Behaviours are callables ``(body: dict, path: str) -> (status, headers, bytes)``:

- ``verdict(obj, cite=True)``: a completion whose content is ``obj`` as JSON; with ``cite``
  the first evidence block of the prompt is cited with a short verbatim quote.
- ``content(text)``: any content text (malformed JSON, prose...).
- ``without_usage(behaviour)``: the same answer with no ``usage`` reported.
- ``with_usage(behaviour, input_tokens, output_tokens)``: the same answer reporting that usage.
- ``cite(ids)``: a passing assertion answer citing these ids (e.g. an unknown one).
- ``status(code, body=b"", headers=None)``, ``rate_limited(retry_after)``.
- ``hang(seconds)``: answers only after ``seconds`` (cut short by ``stop``): a client timeout.
- ``rank(order)``: an n_wise ranking, ``order`` a callable of the labels shown.
"""

from __future__ import annotations

import json
import re
import threading
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Response = tuple[int, dict[str, str], bytes]
Behaviour = Callable[[dict[str, Any], str], Response]

_BLOCK = re.compile(
    r'<<<EVIDENCE id="(?P<id>[^"]+)">>>\n(?P<body>.*?)\n<<<END EVIDENCE id="(?P=id)">>>', re.S
)


def prompt_text(body: dict[str, Any]) -> str:
    msgs = body.get("messages") or []
    return "\n".join(str(m.get("content", "")) for m in msgs if isinstance(m, dict))


def blocks(body: dict[str, Any]) -> list[tuple[str, str]]:
    return [(m.group("id"), m.group("body")) for m in _BLOCK.finditer(prompt_text(body))]


def _completion(body: dict[str, Any], path: str, text: str, usage: tuple[int, int] = (120, 30)) -> Response:
    if path.partition("?")[0].endswith("/messages"):
        try:
            obj = json.loads(text)
        except ValueError:
            payload = {"content": [{"type": "text", "text": text}]}
        else:
            payload = {"content": [{"type": "tool_use", "id": "t1", "name": "record_verdict", "input": obj}]}
        payload.update(
            {"model": body.get("model"), "usage": {"input_tokens": usage[0], "output_tokens": usage[1]}}
        )
    else:
        payload = {
            "id": "chatcmpl-fake",
            "model": body.get("model"),
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)},
        }
    return 200, {"Content-Type": "application/json"}, json.dumps(payload).encode()


def verdict(obj: dict[str, Any] | Callable[[dict[str, Any]], dict[str, Any]], cite: bool = True) -> Behaviour:
    def behave(body: dict[str, Any], path: str) -> Response:
        data = dict(obj(body) if callable(obj) else obj)
        if cite and "citations" not in data:
            found = blocks(body)
            if found:
                bid, text = found[0]
                quote = text.strip().split("\n")[0][:20]
                data["citations"] = [{"id": bid, "quote": quote}] if quote else [{"id": bid}]
        return _completion(body, path, json.dumps(data))

    return behave


def without_usage(behaviour: Behaviour) -> Behaviour:
    """``behaviour`` with the completion's ``usage`` left out (servers that report none)."""

    def behave(body: dict[str, Any], path: str) -> Response:
        code, headers, payload = behaviour(body, path)
        data = json.loads(payload)
        data.pop("usage", None)
        return code, headers, json.dumps(data).encode()

    return behave


def with_usage(behaviour: Behaviour, input_tokens: int, output_tokens: int) -> Behaviour:
    """``behaviour`` reporting ``input_tokens`` and ``output_tokens`` as its usage (either API)."""

    def behave(body: dict[str, Any], path: str) -> Response:
        code, headers, payload = behaviour(body, path)
        data = json.loads(payload)
        if "choices" in data:
            data["usage"] = {
                "prompt_tokens": input_tokens,
                "completion_tokens": output_tokens,
                "total_tokens": input_tokens + output_tokens,
            }
        else:
            data["usage"] = {"input_tokens": input_tokens, "output_tokens": output_tokens}
        return code, headers, json.dumps(data).encode()

    return behave


def content(text: str) -> Behaviour:
    return lambda body, path: _completion(body, path, text)


def cite(ids: list[str], **fields: Any) -> Behaviour:
    data = {"pass": True, "reasoning": "see citations", **fields, "citations": [{"id": i} for i in ids]}
    return lambda body, path: _completion(body, path, json.dumps(data))


def status(code: int, body: bytes = b"", headers: dict[str, str] | None = None) -> Behaviour:
    return lambda req, path: (
        code,
        dict(headers or {}),
        body or json.dumps({"error": f"status {code}"}).encode(),
    )


def rate_limited(retry_after: str = "0") -> Behaviour:
    return status(429, headers={"Retry-After": retry_after})


def rank(order: Callable[[list[str]], list[str]]) -> Behaviour:
    """An n_wise answer: ``order`` gets the labels in prompt order and returns the ranking."""

    def behave(body: dict[str, Any], path: str) -> Response:
        found = blocks(body)
        labels: list[str] = []
        for bid, _ in found:
            label = bid.split("/", 1)[0]
            if label not in labels:
                labels.append(label)
        data = {"ranking": order(labels), "reasoning": "ranked", "citations": [{"id": found[0][0]}]}
        return _completion(body, path, json.dumps(data))

    return behave


class _Server(ThreadingHTTPServer):
    request_queue_size = 128  # socketserver's default of 5 drops concurrent connects (1 s SYN retry)


class FakeJudgeProvider:
    def __init__(self) -> None:
        self.default: Behaviour = verdict({"pass": True, "confidence": 0.9, "reasoning": "ok"})
        self._queue: deque[Behaviour] = deque()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.requests: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self.headers: list[dict[str, str]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go out without a delayed-ACK stall

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = {}
                with fake._lock:
                    fake.requests.append(body)
                    fake.paths.append(self.path)
                    fake.headers.append({k.lower(): v for k, v in self.headers.items()})
                    behaviour = fake._queue.popleft() if fake._queue else fake.default
                code, headers, payload = behaviour(body, self.path)
                if code < 0:  # hang
                    fake._stop.wait(-code)
                    code, headers, payload = 504, {}, b"{}"
                try:
                    self.send_response(code)
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:
                    pass

        self._server = _Server(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    def queue(self, *behaviours: Behaviour) -> None:
        with self._lock:
            self._queue.extend(behaviours)

    @property
    def calls(self) -> int:
        with self._lock:
            return len(self.requests)

    def start(self) -> FakeJudgeProvider:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FakeJudgeProvider:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def hang(seconds: float = 5.0) -> Behaviour:
    return lambda body, path: (-int(max(1, seconds)), {}, b"")


_MODE = re.compile(r"You are an evaluation judge \(mode: (?P<mode>\w+)\)")


def mode_of(body: dict[str, Any]) -> str:
    m = _MODE.search(prompt_text(body))
    return m.group("mode") if m else ""


def by_mode(**behaviours: Behaviour) -> Behaviour:
    """Dispatch on the judge mode named in the system prompt (assertion, rubric, reference,
    n_wise, claims, critique); ``other`` answers the rest (default: a 400)."""
    other = behaviours.pop("other", status(400))

    def behave(body: dict[str, Any], path: str) -> Response:
        return behaviours.get(mode_of(body), other)(body, path)

    return behave
