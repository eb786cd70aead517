#!/usr/bin/env python
"""Result-page scaling: server time and query count of the pages at 1k and 100k items.

Two runs of each size are seeded with ``runs.seeding.seed_run`` (the ``bench seed-run``
command's function: COPY of synthetic graded items) into a database of their own
(``agentclash_bench_pages``, dropped, created and migrated here). Their stored result
summaries and the comparison of the two runs are computed first (by the same functions the
tasks run), as a finished run has them. Then each page is requested in process through
Django's test client, logged in as a workspace member:

- the run overview (``/runs/<id>/``),
- the first case-list page and a deep one (keyset cursor at 90% of the run),
- a failed case's result page,
- the compare page of the two runs (stored comparison, first page of cases).

Server time is the wall time of the request (middleware, views, queries, templates), the
median of ``--rounds`` requests after one warm-up, small and large requests interleaved so
that drift in the machine's load hits both alike; queries are counted on one request after the warm-up.
Prints a table, the overview's response size, and ends with exactly one line
``pages: worst ratio R (100k/1k), queries equal: yes|no``.

    .venv/bin/python bench/pages.py                          # 1,000 vs 100,000 items
    .venv/bin/python bench/pages.py --small 500 --large 20000 --rounds 5
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

DATABASE = "agentclash_bench_pages"
OVERVIEW_BUDGET = 100 * 1024


def _seed(workspace, user, items: int, log) -> dict:
    from runs.compare_tasks import compute_comparison
    from runs.models import RunComparison, RunItem
    from runs.result_tasks import compute_result_summary
    from runs.seeding import seed_run

    started = time.perf_counter()
    a = seed_run(workspace=workspace, items=items, lanes=2, name=f"bench {items} a", seed=1, user=user)
    b = seed_run(
        workspace=workspace,
        items=items,
        lanes=2,
        name=f"bench {items} b",
        seed=2,
        pass_rates=(0.7, 0.65),
        user=user,
    )
    for run in (a, b):
        compute_result_summary(str(run.id))
    # Stored as the compare task stores it (called directly: no broker in this process).
    comparison = RunComparison.objects.create(workspace=workspace, baseline=a, candidate=b)
    compute_comparison(comparison.id)
    ids = list(RunItem.objects.filter(run=b).order_by("id").values_list("id", flat=True))
    failed = (
        RunItem.objects.filter(run=b, status="FAILED").order_by("-id").values_list("id", flat=True).first()
    )
    log(
        f"[pages] seeded 2 x {items} items, summaries and comparison in {time.perf_counter() - started:.1f} s"
    )
    return {"a": a, "b": b, "deep_id": ids[int(len(ids) * 0.9)], "failed": failed}


def _urls(seeded: dict) -> dict[str, str]:
    from agentclash_site.lib.pagination import encode_cursor

    a, b = seeded["a"], seeded["b"]
    return {
        "overview": f"/runs/{b.id}/",
        "cases, first page": f"/runs/{b.id}/cases/",
        "cases, deep page": f"/runs/{b.id}/cases/?after={encode_cursor('id', [seeded['deep_id']])}",
        "case page": f"/runs/{b.id}/cases/{seeded['failed']}/",
        "compare": f"/runs/compare/?baseline={a.id}&candidate={b.id}",
    }


def _count(client, url: str) -> tuple[int, int]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url, secure=True)
    if response.status_code != 200:
        raise RuntimeError(f"{url} answered {response.status_code}")
    return len(ctx.captured_queries), len(response.content)


def _timed(client, url: str) -> float:
    start = time.perf_counter()
    client.get(url, secure=True)
    return time.perf_counter() - start


def measure(
    *, small: int = 1000, large: int = 100_000, rounds: int = 15, database: str = DATABASE, log=print
) -> dict:
    setup_django(database, production=True, label="bench-pages")
    from django.contrib.auth import get_user_model
    from django.test import Client

    from agentclash_site.workspaces.models import Role, Workspace
    from agentclash_site.workspaces.services import membership_set_role

    user, _ = get_user_model().objects.get_or_create(username="bench-pages")
    workspace, _ = Workspace.objects.get_or_create(slug="bench-pages", defaults={"name": "Pages bench"})
    membership_set_role(workspace=workspace, user=user, role=Role.OWNER)
    client = Client(HTTP_HOST="127.0.0.1")
    client.force_login(user)
    urls = {
        label: _urls(_seed(workspace, user, items, log))
        for label, items in (("small", small), ("large", large))
    }
    rows = []
    overview_bytes = 0
    for page in urls["small"]:
        small_url, large_url = urls["small"][page], urls["large"][page]
        _timed(client, small_url), _timed(client, large_url)  # warm-up (session, caches)
        (q_small, _), (q_large, size) = _count(client, small_url), _count(client, large_url)
        if page == "overview":
            overview_bytes = size
        # Interleaved, so drift in the machine's load hits both sizes alike.
        t_small, t_large = [], []
        for _ in range(rounds):
            t_small.append(_timed(client, small_url))
            t_large.append(_timed(client, large_url))
        m_small, m_large = statistics.median(t_small), statistics.median(t_large)
        rows.append(
            {
                "page": page,
                "small_ms": m_small * 1000,
                "large_ms": m_large * 1000,
                "ratio": m_large / m_small,
                "q_small": q_small,
                "q_large": q_large,
            }
        )
    return {
        "small": small,
        "large": large,
        "rows": rows,
        "overview_bytes": overview_bytes,
        "worst_ratio": max(r["ratio"] for r in rows),
        "queries_equal": all(r["q_small"] == r["q_large"] for r in rows),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description="Result-page scaling (server time and queries, small vs large run)"
    )
    parser.add_argument("--small", type=int, default=1000)
    parser.add_argument("--large", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--database", default=DATABASE)
    args = parser.parse_args()
    report = measure(small=args.small, large=args.large, rounds=args.rounds, database=args.database)
    small, large = f"{args.small:,}", f"{args.large:,}"
    print(f"{'page':<20} {small + ' ms':>12} {large + ' ms':>12} {'ratio':>7} {'queries':>9}")
    for r in report["rows"]:
        queries = f"{r['q_small']}/{r['q_large']}"
        print(
            f"{r['page']:<20} {r['small_ms']:>12.2f} {r['large_ms']:>12.2f} {r['ratio']:>7.2f} {queries:>9}"
        )
    size = report["overview_bytes"]
    verdict = "under" if size < OVERVIEW_BUDGET else "OVER"
    print(f"overview first response at {large} items: {size / 1024:.1f} KB ({verdict} the 100 KB goal)")
    print(
        f"pages: worst ratio {report['worst_ratio']:.2f} ({large_label(args.large)}/{large_label(args.small)}), "
        f"queries equal: {'yes' if report['queries_equal'] else 'no'}"
    )


def large_label(n: int) -> str:
    return f"{n // 1000}k" if n % 1000 == 0 and n >= 1000 else str(n)


if __name__ == "__main__":
    main()
