#!/usr/bin/env python
"""Run execution throughput: N cases against a local OpenAI-compatible stub, end to end.

Creates its own PostgreSQL database (``agentclash_bench_runs``, dropped and recreated),
publishes the P1 workload pack (``bench/p1/workload.py``, N cases, 4 checks each), creates an
``openai_chat`` deployment (``max_in_flight`` 16) pointed at ``bench/p1/stub.py`` on a free
loopback port, and then:

- ``--mode inprocess`` (default): ``run_create`` then the lane dispatcher called in this
  process until the run is completed (claims, calls, grading, bulk writes, scoring);
- ``--mode celery``: ``manage.py eval start --follow --json`` with one real Celery worker
  (default prefork concurrency) and a private redis-server kept across rounds, timed from
  the command's process start to the completed run document; the worker's slice log lines
  (seconds per phase) are printed. The first round on each worker child pays for parsing
  the pack and the per-case baseline probes (cached per process afterwards).

Prints cases/s and the run's outcome counts. Loopback only.

    .venv/bin/python bench/runs_throughput.py --cases 2000
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
PG = os.environ.get("BENCH_PG", "postgres://postgres@127.0.0.1:5432")
DB = os.environ.get("BENCH_RUNS_DB", "agentclash_bench_runs")


def start_stub() -> tuple[subprocess.Popen, int]:
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "p1" / "stub.py"), "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    line = proc.stdout.readline() if proc.stdout else ""
    if not line.startswith("ready "):
        proc.kill()
        raise RuntimeError(f"the stub did not start: {line!r}")
    return proc, int(line.split()[1])


def recreate_db() -> None:
    import psycopg

    with psycopg.connect(f"{PG}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{DB}"')


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--max-in-flight", type=int, default=16)
    parser.add_argument("--mode", choices=["inprocess", "celery"], default="inprocess")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--profile", action="store_true", help="cProfile the in-process run")
    args = parser.parse_args()

    recreate_db()
    os.environ["DATABASE_URL"] = f"{PG}/{DB}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentclash_site.settings")
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from agentclash_site.workspaces.models import Workspace
    from bench.p1.workload import pack_document
    from packs.services import pack_version_publish

    call_command("migrate", verbosity=0)
    user, _ = get_user_model().objects.get_or_create(username="bench")
    workspace = Workspace.objects.create(slug="bench", name="Bench", allow_private_endpoints=True)
    import yaml

    version = pack_version_publish(
        workspace=workspace, data=yaml.safe_dump(pack_document(args.cases)).encode()
    ).version
    stub, port = start_stub()
    try:
        from runs.services.deployments import deployment_create

        dep = deployment_create(
            workspace=workspace,
            name="stub",
            kind="openai_chat",
            url=f"http://127.0.0.1:{port}/v1",
            model="stub",
            max_in_flight=args.max_in_flight,
            timeout_seconds=30,
        ).deployment
        stack = CeleryStack().__enter__() if args.mode == "celery" else None
        rates: list[float] = []
        for round_no in range(1, args.rounds + 1):
            if stack is not None:
                elapsed, counts = stack.round(workspace, version)
            elif args.mode == "inprocess" and args.profile:
                import cProfile
                import pstats

                profiler = cProfile.Profile()
                elapsed, counts = profiler.runcall(inprocess, workspace, user, version, dep)
                stats = pstats.Stats(profiler)
                stats.sort_stats("tottime").print_stats(30)
                stats.sort_stats("cumulative").print_callees("record_results")
            elif args.mode == "inprocess":
                elapsed, counts = inprocess(workspace, user, version, dep)
            rates.append(args.cases / elapsed)
            print(
                f"round {round_no}: {args.cases} cases in {elapsed:.2f} s = {args.cases / elapsed:.0f} cases/s "
                f"({args.mode}, max_in_flight {args.max_in_flight}); {counts}"
            )
        if len(rates) > 1:
            import statistics

            # The first round pays for the caches of a fresh process (pack parse, probes).
            print(f"median of warm rounds 2-{len(rates)}: {statistics.median(rates[1:]):.0f} cases/s")
        if stack is not None:
            stack.__exit__(None, None, None)
    finally:
        stub.kill()


class _null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def inprocess(workspace, user, version, dep):  # type: ignore[no-untyped-def]
    from runs.dispatch import dispatch_lane
    from runs.models import Run, RunLane
    from runs.services.runs import run_create

    start = time.perf_counter()
    run = run_create(workspace=workspace, user=user, pack_version=version, deployments=[dep], enqueue=False)
    lane = RunLane.objects.get(run=run)
    timings: dict[str, float] = {}
    sql_time: dict[str, list[float]] = {}

    def timed(execute, sql, params, many, context):  # type: ignore[no-untyped-def]
        t0 = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            key = " ".join(sql.split()[:3])[:60]
            entry = sql_time.setdefault(key, [0, 0.0])
            entry[0] += 1
            entry[1] += time.perf_counter() - t0

    from django.db import connection

    with connection.execute_wrapper(timed) if os.environ.get("BENCH_SQL") else _null():
        while Run.objects.filter(pk=run.pk, status__in=["queued", "running"]).exists():
            result = dispatch_lane(lane.pk, time_slice=60)
            print("slice:", result.claimed, result.recorded, result.peak_in_flight, result.reason)
            for k, v in result.timings.items():
                timings[k] = timings.get(k, 0.0) + v
    for key, (n, t) in sorted(sql_time.items(), key=lambda kv: -kv[1][1])[:15]:
        print(f"  sql {t:6.2f} s {n:6d}x  {key}")
    print("dispatcher seconds by phase:", {k: round(v, 2) for k, v in timings.items()})
    elapsed = time.perf_counter() - start
    run.refresh_from_db()
    lane.refresh_from_db()
    return elapsed, {
        "status": run.status,
        "passed": lane.passed,
        "failed": lane.failed,
        "infra_error": lane.infra_error,
        "config_error": lane.config_error,
    }


class CeleryStack:
    """A private redis-server and one ``celery worker`` kept across rounds (warm caches)."""

    def __enter__(self):  # type: ignore[no-untyped-def]
        from tests.processes import redis_server

        self._redis = redis_server()
        port = self._redis.__enter__()
        self._tmp = tempfile.TemporaryDirectory()
        self.env = dict(os.environ, PYTHONUNBUFFERED="1", CELERY_BROKER_URL=f"redis://127.0.0.1:{port}/0")
        self.log_path = Path(self._tmp.name) / "worker.log"
        self._log = open(self.log_path, "wb")
        self.worker = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "agentclash_site", "worker", "--loglevel", "INFO",
             "--without-gossip", "--without-mingle", "--without-heartbeat"],
            cwd=ROOT, env=self.env, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        return self

    def __exit__(self, *exc: object) -> None:
        os.killpg(self.worker.pid, 15)
        self.worker.wait(timeout=30)
        self._log.close()
        self._tmp.cleanup()
        self._redis.__exit__(None, None, None)

    def slice_lines(self) -> list[str]:
        text = self.log_path.read_text(errors="replace")
        return [line[-200:] for line in text.splitlines() if "INFO runs.dispatch" in line]

    def round(self, workspace, version):  # type: ignore[no-untyped-def]
        seen = len(self.slice_lines())
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "manage.py", "eval", "start", "--workspace", workspace.slug, "--pack",
             version.pack.slug, "--deployment", "stub", "--follow", "--json", "--fail-under", "0"],
            cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=1800,
        )  # fmt: skip
        elapsed = time.perf_counter() - start
        for line in self.slice_lines()[seen:]:
            print("  worker:", line)
        doc = json.loads(done.stdout)
        lane = doc["lanes"][0]
        return elapsed, {"exit": done.returncode, "status": doc["run"]["status"], "counts": lane["counts"]}


if __name__ == "__main__":
    main()
