#!/usr/bin/env python
"""P5: worker memory. value = worker RSS after 100k graded items / worker RSS after 1k; goal <= 1.2.

One real stack (``bench/p1/ours.py``: its own PostgreSQL database ``agentclash_bench_memory``,
a private redis-server, a ``celery -A agentclash_site worker`` subprocess, an ``openai_chat``
deployment at the P1 stub). The worker first runs a 1,000-case pack; its RSS (the worker
process and its pool children, from /proc) is read once the run completes. Then one run of
the remaining items (99,000 by default: a 9,900-case pack, under the 5 MiB bundle limit, at
10 repetitions, the most a run allows) goes through the same worker and RSS is read again.
Every run must grade every item (3/4 pass, as in P1).

    .venv/bin/python bench/worker_memory.py                  # 1k, then 99k more
    .venv/bin/python bench/worker_memory.py --items 5000     # a quick check of the plumbing
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.p1 import workload  # noqa: E402
from bench.p1.ours import Stack  # noqa: E402
from bench.p1.run import Stub  # noqa: E402
from bench.p1.tools import NotMeasured  # noqa: E402

FIRST = 1000
REPETITIONS = 10  # runs.services.runs.MAX_REPETITIONS


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _run(stack: Stack, slug: str, cases: int, repetitions: int = 1) -> dict:
    elapsed, doc, code = stack.eval_start(slug, timeout=7200, repetitions=repetitions)
    lanes = doc.get("lanes") or []
    status = (doc.get("run") or {}).get("status")
    counts = lanes[0].get("counts", {}) if lanes else {}
    graded = sum(counts.get(k, 0) for k in ("PASSED", "FAILED", "NOT_EVALUATED", "UNAVAILABLE", "ERROR"))
    items = cases * repetitions
    # counts are per item (case x repetition)
    if (
        status != "completed"
        or graded != items
        or counts.get("PASSED") != workload.expected_passes(cases) * repetitions
    ):
        raise RuntimeError(f"{slug}: eval start exited {code}, status {status!r}, counts {counts}")
    return {"items": items, "seconds": round(elapsed, 2), "items_per_s": round(items / elapsed, 1)}


def _settled_rss(stack: Stack) -> int:
    """RSS once the worker is idle: the largest of a few reads 0.5 s apart (pool children
    may still be returning memory right after the run completes)."""
    reads = []
    for _ in range(5):
        reads.append(stack.worker_rss_kib())
        time.sleep(0.5)
    return max(reads)


def measure(*, items: int = 100_000, database: str = "agentclash_bench_memory") -> dict:
    if items <= FIRST or items % 4:
        raise ValueError(f"--items must be a multiple of 4 above {FIRST}")
    rest = items - FIRST
    repetitions = REPETITIONS if rest % (4 * REPETITIONS) == 0 else 1
    rest_cases = rest // repetitions
    stub = Stub()
    with tempfile.TemporaryDirectory(prefix="p5-") as tmp:
        stack = Stack(database=database, workdir=Path(tmp))
        try:
            stack.start()
            stack.create_deployment(stub.base_url)
            for slug, cases in (("p5-first", FIRST), ("p5-rest", rest_cases)):
                path = workload.write_pack(Path(tmp) / f"{slug}.yaml", cases, slug=slug)
                started = time.perf_counter()
                stack.publish(path)
                log(f"[p5] published {slug} ({cases} cases) in {time.perf_counter() - started:.1f} s")
            baseline_idle = _settled_rss(stack)
            first = _run(stack, "p5-first", FIRST)
            rss_first = _settled_rss(stack)
            log(f"[p5] after {FIRST} items: RSS {rss_first / 1024:.1f} MiB ({first['items_per_s']} cases/s)")
            second = _run(stack, "p5-rest", rest_cases, repetitions)
            rss_all = _settled_rss(stack)
            log(f"[p5] after {items} items: RSS {rss_all / 1024:.1f} MiB ({second['items_per_s']} cases/s)")
        finally:
            stack.stop()
            stub.stop()
    return {
        "value": round(rss_all / rss_first, 3),
        "items": items,
        "rss_mib_idle_before": round(baseline_idle / 1024, 1),
        "rss_mib_after_first": round(rss_first / 1024, 1),
        "rss_mib_after_all": round(rss_all / 1024, 1),
        "runs": {"first": first, "rest": second},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description="P5: worker RSS after 100k items / after 1k")
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    try:
        report = measure(items=args.items)
    except NotMeasured as exc:
        report = {"value": None, "reason": str(exc)}
    if args.json:
        print(json.dumps(report, indent=2))
    elif report["value"] is None:
        print(f"P5: not measured: {report['reason']}")
    else:
        print(
            f"P5: worker RSS {report['rss_mib_after_first']} MiB after {FIRST} items, "
            f"{report['rss_mib_after_all']} MiB after {report['items']}: ratio {report['value']} (goal <= 1.2)"
        )
    sys.exit(0 if report["value"] is not None else 1)


if __name__ == "__main__":
    main()
