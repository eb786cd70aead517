#!/usr/bin/env python
"""A local OpenAI-compatible chat stub for the P1 benchmark (loopback only, asyncio).

``POST .../chat/completions`` reads the last user message, finds ``Q<n>:`` in it and answers
at once, deterministically, with ``A<n> = <n*n> {"n": <n>}``; every 4th case (n divisible
by 4) gets a wrong value (``n*n + 1``), so of cases 1..2000 exactly 1,500 pass all checks.
A message without ``Q<n>:`` gets ``A0 = 0 {"n": 0}``.

``GET /stats`` answers ``{"requests": <chat completions served>}`` and ``POST /stats/reset``
zeroes it, so a harness can check that a tool sent exactly the requests it should have.
``GET .../models`` lists one model, for clients that probe it.

    .venv/bin/python bench/p1/stub.py --port 0      # prints "ready <port>" once listening
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import time

Q_RE = re.compile(r"Q(\d+):")
STATE = {"requests": 0}


def answer_for(n: int) -> str:
    value = n * n + 1 if n % 4 == 0 and n > 0 else n * n
    return f'A{n} = {value} {{"n": {n}}}'


def expected_for(n: int) -> str:
    return f'A{n} = {n * n} {{"n": {n}}}'


def _last_user_text(body: dict) -> str:
    for message in reversed(body.get("messages") or []):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):  # content parts
                return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
            return str(content or "")
    return ""


def completion(body: dict) -> dict:
    match = Q_RE.search(_last_user_text(body))
    n = int(match.group(1)) if match else 0
    text = answer_for(n)
    return {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": str(body.get("model") or "stub"),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
                "logprobs": None,
            }
        ],
        "usage": {"prompt_tokens": 20, "completion_tokens": 10, "total_tokens": 30},
    }


def _response(status: int, payload: dict) -> bytes:
    data = json.dumps(payload).encode()
    reason = {200: "OK", 404: "Not Found", 400: "Bad Request"}.get(status, "OK")
    return (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\nConnection: keep-alive\r\n\r\n"
    ).encode() + data


async def _read_body(reader: asyncio.StreamReader, headers: dict[str, str]) -> bytes:
    if headers.get("transfer-encoding", "").lower() == "chunked":
        parts = []
        while True:
            size = int((await reader.readuntil(b"\r\n")).strip().split(b";")[0], 16)
            if size == 0:
                await reader.readuntil(b"\r\n")
                return b"".join(parts)
            parts.append(await reader.readexactly(size))
            await reader.readexactly(2)
    length = int(headers.get("content-length", "0") or 0)
    return await reader.readexactly(length) if length else b""


def route(method: str, path: str, raw: bytes) -> bytes:
    path = path.split("?", 1)[0]
    if method == "POST" and path.endswith("/chat/completions"):
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            return _response(400, {"error": {"message": "body is not JSON"}})
        STATE["requests"] += 1
        return _response(200, completion(body if isinstance(body, dict) else {}))
    if method == "GET" and path == "/stats":
        return _response(200, {"requests": STATE["requests"]})
    if method == "POST" and path == "/stats/reset":
        STATE["requests"] = 0
        return _response(200, {"requests": 0})
    if method == "GET" and path.endswith("/models"):
        return _response(
            200, {"object": "list", "data": [{"id": "stub", "object": "model", "owned_by": "bench"}]}
        )
    return _response(404, {"error": {"message": f"no route {method} {path}"}})


async def _handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = (lines[0].split(" ", 2) + ["", ""])[:3]
            headers = {}
            for line in lines[1:]:
                if ":" in line:
                    k, v = line.split(":", 1)
                    headers[k.strip().lower()] = v.strip()
            raw = await _read_body(reader, headers)
            writer.write(route(method, path, raw))
            await writer.drain()
            if headers.get("connection", "").lower() == "close":
                break
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, ValueError):
        pass
    finally:
        writer.close()


async def serve(host: str, port: int) -> None:
    server = await asyncio.start_server(_handle, host, port, backlog=1024)
    bound = server.sockets[0].getsockname()[1]
    print(f"ready {bound}", flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--host", default="127.0.0.1", choices=["127.0.0.1", "::1"])
    args = parser.parse_args()
    asyncio.run(serve(args.host, args.port))


if __name__ == "__main__":
    main()
