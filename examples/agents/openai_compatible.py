#!/usr/bin/env python3
"""EXAMPLE ONLY, NOT A MODEL: an OpenAI-compatible chat endpoint that does toy arithmetic.

It lets the ``openai_chat`` deployment kind be demonstrated offline (standard library
only). It answers ``POST /v1/chat/completions`` (and ``/chat/completions``) by pulling the
numbers out of the last user message and combining them with the operation a keyword
suggests (``each``/``times``/``per`` multiply, ``left``/``fewer``/``gave away`` subtract,
``split``/``divided``/``equally`` divide, anything else adds). The reply is just the
number, so graders can check it.

It is deliberately, deterministically wrong on some problems, so a demo run shows
failures next to passes:

- it only ever uses the **first two numbers** (three-step problems come out wrong);
- it does not understand percentages or numbers written as words.

Every reply says what it is: ``model: "example-arithmetic (not a model)"``,
``system_fingerprint: "example-not-a-model"`` and a ``X-Example-Server: not a model`` header.

    python examples/agents/openai_compatible.py --port 8768
    python manage.py deployment create --workspace demo --name arithmetic --kind openai_chat \\
        --endpoint http://127.0.0.1:8768/v1 --model example-arithmetic

(``make run`` uses 8765 and 8766 for the demo's judge and agent: pick another port.)
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL_LABEL = "example-arithmetic (not a model)"
MAX_BODY = 1024 * 1024
NUMBER = re.compile(r"(?<![\w.])-?\d+(?:,\d{3})*(?:\.\d+)?")
KEYWORDS = (
    ("divide", ("divided", "split", "equally", "shared between", "share", "average", "half")),
    ("multiply", ("each", "times", "per", "every", "product", "multiplied", "holds", "rows of", "groups of")),
    (
        "subtract",
        ("left", "fewer", "less", "minus", "difference", "gave away", "spent", "lost", "ate", "remain"),
    ),
)


def numbers_in(text: str) -> list[float]:
    return [float(n.replace(",", "")) for n in NUMBER.findall(text)]


def operation_for(text: str) -> str:
    lowered = text.lower()
    for operation, words in KEYWORDS:
        if any(re.search(rf"\b{re.escape(w)}\b", lowered) for w in words):
            return operation
    return "add"


def solve(text: str) -> str:
    """The toy answer: the first two numbers combined by the keyword's operation."""
    numbers = numbers_in(text)
    if not numbers:
        return "I can only do arithmetic word problems that contain numbers."
    if len(numbers) == 1:
        return format_number(numbers[0])
    a, b = numbers[0], numbers[1]  # the known weakness: any further number is ignored
    operation = operation_for(text)
    if operation == "multiply":
        result = a * b
    elif operation == "subtract":
        result = a - b
    elif operation == "divide":
        if b == 0:
            return "I cannot divide by zero."
        result = a / b
    else:
        result = a + b
    return format_number(result)


def format_number(value: float) -> str:
    if value == int(value):
        return str(int(value))
    return f"{value:.4f}".rstrip("0").rstrip(".")


def last_user_text(messages: Any) -> str:
    if not isinstance(messages, list):
        return ""
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
            return str(content or "")
    return ""


def completion(request: dict[str, Any]) -> dict[str, Any]:
    prompt = last_user_text(request.get("messages"))
    answer = solve(prompt)
    prompt_tokens = sum(
        len(str(m.get("content", "")).split()) for m in request.get("messages") or [] if isinstance(m, dict)
    )
    return {
        "id": f"chatcmpl-example-{int(time.time() * 1000)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": MODEL_LABEL,
        "system_fingerprint": "example-not-a-model",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 1, "total_tokens": prompt_tokens + 1},
    }


def make_handler(*, api_key: str | None, quiet: bool) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "ExampleArithmetic/1 (not a model)"

        def log_message(self, format: str, *args: Any) -> None:
            if not quiet:
                super().log_message(format, *args)

        def _send(self, status: int, document: Any) -> None:
            body = json.dumps(document).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("X-Example-Server", "not a model")
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path.rstrip("/") in ("/v1/models", "/models"):
                self._send(
                    200,
                    {
                        "object": "list",
                        "data": [
                            {
                                "id": "example-arithmetic",
                                "object": "model",
                                "owned_by": "example (not a model)",
                            }
                        ],
                    },
                )
            else:
                self._send(200, {"status": "ok", "note": "example arithmetic server, not a model"})

        def do_POST(self) -> None:
            if self.path.split("?", 1)[0].rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
                self._send(
                    404, {"error": {"message": "only /v1/chat/completions is served", "type": "not_found"}}
                )
                return
            if api_key and self.headers.get("Authorization") != f"Bearer {api_key}":
                self._send(401, {"error": {"message": "invalid API key", "type": "invalid_request_error"}})
                return
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY:
                self._send(413, {"error": {"message": "request too large", "type": "invalid_request_error"}})
                return
            try:
                request = json.loads(self.rfile.read(length))
            except ValueError:
                self._send(
                    400, {"error": {"message": "the body is not JSON", "type": "invalid_request_error"}}
                )
                return
            if not isinstance(request, dict) or not isinstance(request.get("messages"), list):
                self._send(
                    400, {"error": {"message": "messages is required", "type": "invalid_request_error"}}
                )
                return
            self._send(200, completion(request))

    return Handler


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="EXAMPLE ONLY: an OpenAI-compatible toy arithmetic server, not a model."
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--api-key", default=None, help="require Authorization: Bearer <key>")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    server = ThreadingHTTPServer((args.host, args.port), make_handler(api_key=args.api_key, quiet=args.quiet))
    print(
        f"example arithmetic server (NOT A MODEL) on http://{args.host}:{server.server_port}/v1/chat/completions",
        flush=True,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
