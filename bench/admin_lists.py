#!/usr/bin/env python
"""Admin console scaling: server time and queries of the run admin's lists at a small and a
large number of run items, and what the lists ran before they were bounded.

One workspace gets a run of ``--small`` items, the lists are measured, then a run of
``--large`` items is added (``runs.seeding.seed_run``, COPY) and they are measured again, in a
database of their own (``agentclash_bench_admin``, dropped, created and migrated here). Each
list is requested in process through Django's test client as a superuser; time is the
median of ``--rounds`` requests after one warm-up, queries are counted on one request.
"For reference" times, at the large size, the statements the item list ran before
(``COUNT(*)`` of the whole table, run twice per page; the first 100 rows in the model's
order, through the run's created_at; the attempt list's row query joining items and runs).

    .venv/bin/python bench/admin_lists.py                        # 1,000 then +100,000 items
    .venv/bin/python bench/admin_lists.py --small 500 --large 20000 --rounds 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.database import setup_django  # noqa: E402

DATABASE = "agentclash_bench_admin"
LISTS = {
    "runs": "/admin/runs/run/",
    "lanes": "/admin/runs/runlane/",
    "items": "/admin/runs/runitem/",
    "items, failed": "/admin/runs/runitem/?status__exact=FAILED",
    "items, one run": "/admin/runs/runitem/?q={run}",
    "attempts": "/admin/runs/attempt/",
    "run page": "/admin/runs/run/{run}/change/",
}


def _measure(client, urls: dict[str, str], rounds: int) -> dict[str, tuple[float, int]]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    out = {}
    for label, url in urls.items():
        client.get(url, secure=True)  # warm-up
        with CaptureQueriesContext(connection) as ctx:
            response = client.get(url, secure=True)
        if response.status_code != 200:
            raise RuntimeError(f"{url} answered {response.status_code}")
        queries = len(ctx.captured_queries)  # now: every request starts a new query log
        times = []
        for _ in range(rounds):
            start = time.perf_counter()
            client.get(url, secure=True)
            times.append(time.perf_counter() - start)
        out[label] = (statistics.median(times) * 1000, queries)
    return out


def _timed(fn, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def _reference(rounds: int) -> dict[str, float]:
    from runs.models import Attempt, RunItem

    return {
        "COUNT(*) of run items": _timed(lambda: RunItem.objects.count(), rounds),
        "first 100 items, model order": _timed(
            lambda: list(
                RunItem.objects.select_related("lane").defer("evidence", "grade").order_by("run", "id")[:100]
            ),
            rounds,
        ),
        "first 100 attempts, old join": _timed(
            lambda: list(
                Attempt.objects.select_related("item__run").order_by("item__run", "item", "number")[:100]
            ),
            rounds,
        ),
    }


def measure(*, small: int, large: int, rounds: int, database: str = DATABASE, log=print) -> dict:
    setup_django(database, production=True, label="bench-admin")
    from django.contrib.auth import get_user_model
    from django.test import Client

    from agentclash_site.workspaces.models import Workspace
    from runs.seeding import seed_run

    root = get_user_model().objects.create_superuser("bench-admin", password="x" * 20)
    workspace = Workspace.objects.create(slug="bench-admin", name="Admin bench")
    client = Client(HTTP_HOST="127.0.0.1")
    client.force_login(root)
    figures = {}
    for label, items in (("small", small), ("large", large)):
        started = time.perf_counter()
        run = seed_run(
            workspace=workspace, items=items, lanes=2, infra_error_rate=0.05, name=f"bench {items}"
        )
        log(f"[admin] seeded {items:,} items in {time.perf_counter() - started:.1f} s")
        urls = {name: url.format(run=run.id) for name, url in LISTS.items()}
        figures[label] = _measure(client, urls, rounds)
    return {"figures": figures, "reference": _reference(rounds)}


def main() -> None:
    parser = argparse.ArgumentParser(description="Admin list scaling (server time and queries)")
    parser.add_argument("--small", type=int, default=1000)
    parser.add_argument("--large", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--database", default=DATABASE)
    args = parser.parse_args()
    report = measure(small=args.small, large=args.large, rounds=args.rounds, database=args.database)
    small, large = report["figures"]["small"], report["figures"]["large"]
    total = f"{args.small + args.large:,}"
    print(f"{'list':<16} {f'{args.small:,} items ms':>16} {f'{total} items ms':>18} {'queries':>9}")
    for name in LISTS:
        print(
            f"{name:<16} {small[name][0]:>16.1f} {large[name][0]:>18.1f} {small[name][1]:>4}/{large[name][1]:<4}"
        )
    print(f"for reference, at {total} items (what the item and attempt lists ran before):")
    for name, ms in report["reference"].items():
        print(f"  {name:<30} {ms:>8.1f} ms")


if __name__ == "__main__":
    main()
