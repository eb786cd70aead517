#!/usr/bin/env python
"""P3: publish a generated 10,000-case pack, relative to parsing the same file with the C YAML loader.

value = (validate + publish time through ``pack_version_publish`` on PostgreSQL)
        / (``yaml.load(data, Loader=yaml.CSafeLoader)`` time of the same bytes);  goal <= 5.

The pack is the P1 workload's shape (one challenge, one input set, 10,000 cases with a
payload and three expectations each, four validators). Each round publishes it under a
fresh slug (the same bytes again would be answered as ``already_published``) into its own
database (``agentclash_bench_publish`` by default, dropped, created and migrated here).
The parse time is the best of three parses; rounds report the median ratio. Wall time.

    .venv/bin/python bench/publish.py                   # 10,000 cases, 3 rounds
    .venv/bin/python bench/publish.py --cases 2000 --rounds 1 --profile   # pyinstrument tree
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.database import setup_django  # noqa: E402

DATABASE = "agentclash_bench_publish"


def _pack_bytes(cases: int, slug: str) -> bytes:
    import yaml

    from bench.p1 import workload

    doc = workload.pack_document(cases, slug=slug)
    return yaml.dump(doc, Dumper=yaml.CSafeDumper, sort_keys=False, width=200).encode()


def _parse_seconds(data: bytes) -> float:
    import yaml

    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        yaml.load(data, Loader=yaml.CSafeLoader)
        best = min(best, time.perf_counter() - start)
    return best


def measure(
    *, cases: int = 10_000, rounds: int = 3, database: str = DATABASE, profile: bool = False, log=print
) -> dict:
    setup_django(database)
    from django.contrib.auth import get_user_model

    from agentclash_site.workspaces.models import Workspace
    from packs.models import Case
    from packs.services.publish import pack_version_publish

    user, _ = get_user_model().objects.get_or_create(username="bench")
    workspace, _ = Workspace.objects.get_or_create(slug="p3bench", defaults={"name": "P3 bench"})
    runs = []
    profiler = None
    for round_no in range(rounds + 1):  # round 0 warms caches and imports
        slug = f"p3-publish-{round_no}"
        data = _pack_bytes(cases, slug)
        parse = _parse_seconds(data)
        if profile and round_no == rounds:
            from pyinstrument import Profiler

            profiler = Profiler(interval=0.001)
            profiler.start()
        start = time.perf_counter()
        result = pack_version_publish(workspace=workspace, data=data, user=user, filename="pack.yaml")
        publish = time.perf_counter() - start
        if profiler is not None:
            profiler.stop()
        stored = Case.objects.filter(input_set__version=result.version).count()
        if stored != cases:
            raise RuntimeError(f"publish stored {stored} cases, expected {cases}")
        label = "warm-up" if round_no == 0 else f"round {round_no}"
        log(
            f"[p3] {label}: {len(data) / 1e6:.1f} MB, parse {parse:.3f} s, validate+publish {publish:.3f} s, ratio {publish / parse:.2f}"
        )
        if round_no:
            runs.append(
                {
                    "parse_s": round(parse, 4),
                    "publish_s": round(publish, 4),
                    "ratio": round(publish / parse, 3),
                }
            )
    report = {
        "cases": cases,
        "bytes": len(data),
        "rounds": runs,
        "value": round(statistics.median(r["ratio"] for r in runs), 2),
        "parse_s": statistics.median(r["parse_s"] for r in runs),
        "publish_s": statistics.median(r["publish_s"] for r in runs),
    }
    if profiler is not None:
        report["profile"] = profiler.output_text(unicode=False, color=False, show_all=False)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description="P3: publish vs C YAML parse")
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--database", default=DATABASE)
    parser.add_argument("--profile", action="store_true", help="pyinstrument tree of the last publish")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.cases % 4:
        parser.error("--cases must be a multiple of 4")
    report = measure(
        cases=args.cases,
        rounds=args.rounds,
        database=args.database,
        profile=args.profile,
        log=lambda m: print(m, file=sys.stderr, flush=True),
    )
    if args.json:
        print(json.dumps(report, indent=2))
        return
    if "profile" in report:
        print(report["profile"])
    print(
        f"P3: {args.cases} cases, {report['bytes'] / 1e6:.1f} MB: parse {report['parse_s']:.3f} s, "
        f"validate+publish {report['publish_s']:.3f} s, ratio {report['value']} (goal <= 5)"
    )


if __name__ == "__main__":
    main()
