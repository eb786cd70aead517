#!/usr/bin/env python
"""Which async HTTP client should the outbound client use? Measure, don't guess.

A tiny asyncio HTTP/1.1 stub (keep-alive, fixed JSON reply) runs in a child process on
127.0.0.1; the parent sends ``--requests`` POSTs with ``--concurrency`` in flight through:

- a bare ``aiohttp.ClientSession``,
- a bare ``httpx.AsyncClient``,
- ``agentclash_site.lib.outbound.OutboundClient`` (aiohttp + the address guard, the
  redirect loop and the body cap), to show what the safety costs.

Each client gets a warm-up round first, then the best of ``--rounds`` timed rounds is
reported as requests/s. Loopback only; nothing leaves the machine.

    .venv/bin/python bench/http_clients.py [--requests 2000] [--concurrency 16] [--rounds 3] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

REPLY_BODY = json.dumps({"final_output": "42", "metrics": {"input_tokens": 12, "output_tokens": 3}}).encode()
REQUEST_BODY = json.dumps({"protocol_version": "1", "case": {"key": "c1", "payload": {"x": 1}}}).encode()


# --- the stub server (child process) -----------------------------------------------------


async def _handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    head = (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
        + str(len(REPLY_BODY)).encode()
        + b"\r\n\r\n"
        + REPLY_BODY
    )
    try:
        while True:
            raw = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in raw.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            if length:
                await reader.readexactly(length)
            writer.write(head)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def _serve(port: int) -> None:
    server = await asyncio.start_server(_handle, "127.0.0.1", port, backlog=512)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


# --- the clients ---------------------------------------------------------------------------


async def _drive(send: Callable[[], Awaitable[None]], requests: int, concurrency: int) -> float:
    remaining = requests

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            await send()

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return requests / (time.perf_counter() - started)


async def bench_aiohttp(url: str, requests: int, concurrency: int) -> float:
    import aiohttp

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as session:

        async def send() -> None:
            async with session.post(
                url, data=REQUEST_BODY, headers={"Content-Type": "application/json"}
            ) as r:
                await r.read()
                assert r.status == 200

        await _drive(send, 50, concurrency)  # warm-up: open the pool
        return await _drive(send, requests, concurrency)


async def bench_httpx(url: str, requests: int, concurrency: int) -> float:
    import httpx

    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(limits=limits) as client:

        async def send() -> None:
            r = await client.post(url, content=REQUEST_BODY, headers={"Content-Type": "application/json"})
            assert r.status_code == 200

        await _drive(send, 50, concurrency)
        return await _drive(send, requests, concurrency)


async def bench_outbound(url: str, requests: int, concurrency: int) -> float:
    from agentclash_site.lib.outbound import OutboundClient

    async with OutboundClient() as client:

        async def send() -> None:
            r = await client.request(
                "POST",
                url,
                body=REQUEST_BODY,
                headers={"Content-Type": "application/json"},
                allow_private=True,
            )
            assert r.status == 200

        await _drive(send, 50, concurrency)
        return await _drive(send, requests, concurrency)


CLIENTS = {"aiohttp": bench_aiohttp, "httpx": bench_httpx, "outbound (aiohttp + guard)": bench_outbound}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(_serve(args.serve))
        return 0

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentclash_site.settings")
    port = _free_port()
    stub = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(port)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert stub.stdout is not None
        if stub.stdout.readline().strip() != "ready":
            raise SystemExit("the stub server did not start")
        url = f"http://127.0.0.1:{port}/agent"
        results: dict[str, float] = {}
        for name, fn in CLIENTS.items():
            rates = [asyncio.run(fn(url, args.requests, args.concurrency)) for _ in range(args.rounds)]
            results[name] = max(rates)
    finally:
        stub.terminate()
        stub.wait(timeout=10)

    base = results["httpx"]
    if args.json:
        print(json.dumps({"requests": args.requests, "concurrency": args.concurrency, "rps": results}))
    else:
        print(
            f"{args.requests} POSTs, {args.concurrency} in flight, best of {args.rounds} rounds, "
            f"Python {platform.python_version()}, {os.cpu_count()} CPUs"
        )
        for name, rps in results.items():
            print(f"  {name:28s} {rps:9.0f} req/s   ({rps / base:4.1f}x httpx)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
