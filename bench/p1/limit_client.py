#!/usr/bin/env python
"""The P1 limit: a bare aiohttp client sending the workload's requests, 16 in flight, and
applying the four checks in Python. No storage, no grading document.

``run.py`` times it two ways: in its own process (``limit``: the P1_vs_limit divisor, no
start-up cost at all) and as a process of its own like every other tool
(``limit_process``: from process start, interpreter and imports included; reported beside
it for comparison, not as the goal's divisor).

    .venv/bin/python bench/p1/limit_client.py http://127.0.0.1:PORT/v1 2000   # prints {"passed": n}
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make ``bench`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.p1 import workload


async def run_client(base_url: str, cases: int, concurrency: int = 16) -> int:
    """Send cases 1..``cases``; the number that pass all four checks."""
    import aiohttp

    url = base_url.rstrip("/") + "/chat/completions"
    queue = list(range(cases, 0, -1))
    passed = 0
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def worker() -> None:
            nonlocal passed
            while queue:
                n = queue.pop()
                body = {"model": "stub", "messages": [{"role": "user", "content": workload.question(n)}]}
                async with session.post(url, json=body) as resp:
                    resp.raise_for_status()
                    data = await resp.json()
                passed += workload.checks(n, data["choices"][0]["message"]["content"])

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return passed


def main() -> None:
    base_url, cases = sys.argv[1], int(sys.argv[2])
    print(json.dumps({"passed": asyncio.run(run_client(base_url, cases))}))


if __name__ == "__main__":
    main()
