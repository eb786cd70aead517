#!/usr/bin/env python
"""Peak memory of one trace import (``run_import_results``) by the size of the upload.

One database of its own (``agentclash_bench_trace_import``: dropped, created, migrated), a
published 5,000-case pack (the P1 workload's shape: four checks a case) and a
``trace_import`` deployment. For each size a run is created (repetitions enough for that
many items) and one process of its own uploads that many JSONL lines (3/4 of them right, a
few messages and a tool call each, as an agent response is) and reports its peak RSS
(``VmHWM``) and its RSS just before the import (the body read, Django set up), so that the
difference is what the import itself held, and the import's wall and CPU time (for a look, not a
goal: the machine is shared).

    .venv/bin/python bench/trace_import_memory.py                       # 1,000 / 10,000 / 50,000
    .venv/bin/python bench/trace_import_memory.py --sizes 2000          # a quick check
    BENCH_TRACE_PROFILE=1 .venv/bin/python bench/trace_import_memory.py --sizes 10000  # + pyinstrument
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

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.database import PG, setup_django  # noqa: E402

DATABASE = "agentclash_bench_trace_import"
CASES = 5000
MAX_REPETITIONS = 10  # runs.services.runs.MAX_REPETITIONS


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def _line(n: int, repetition: int) -> bytes:
    from bench.p1 import workload

    answer = workload.expected(n) if n % 4 else f'A{n} = {n * n + 1} {{"n": {n}}}'
    return json.dumps(
        {
            "case_key": f"c{n}",
            "repetition": repetition,
            "final_output": answer,
            "messages": [
                {"role": "user", "content": workload.question(n)},
                {"role": "assistant", "content": answer},
            ],
            "tool_calls": [{"name": "square", "args": {"n": n}, "result": n * n}],
            "metrics": {"input_tokens": 40, "output_tokens": 12, "latency_ms": 250},
        }
    ).encode()


def upload(lines: int) -> bytes:
    return b"\n".join(_line(i % CASES + 1, i // CASES + 1) for i in range(lines)) + b"\n"


def child(run_id: str, path: str) -> None:
    """Set Django up on the bench database, read the body, import it, print the figures."""
    os.environ["DATABASE_URL"] = f"{PG}/{DATABASE}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentclash_site.settings")
    import django

    django.setup()
    from runs.models import Run
    from runs.services.trace_import import run_import_results

    run = Run.objects.get(pk=run_id)
    data = Path(path).read_bytes()
    before = _status_kb("VmRSS")
    profiler = None
    if os.environ.get("BENCH_TRACE_PROFILE"):
        from pyinstrument import Profiler

        profiler = Profiler(interval=0.001)
        profiler.start()
    started, cpu = time.perf_counter(), time.process_time()
    outcome = run_import_results(run=run, data=data)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    if profiler is not None:
        profiler.stop()
        print(profiler.output_text(unicode=False, color=False, show_all=False), file=sys.stderr)
    if outcome.bad_lines:
        raise SystemExit(f"bad lines: {outcome.bad_lines[:3]}")
    figures = {"accepted": outcome.accepted, "before_kb": before, "peak_kb": _status_kb("VmHWM")}
    print(json.dumps({**figures, "seconds": round(seconds, 2), "cpu_seconds": round(cpu, 2)}))


def measure(sizes: list[int], log=print) -> list[dict]:
    setup_django(DATABASE, production=True, label="bench-trace-import")
    from django.contrib.auth import get_user_model

    from agentclash_site.workspaces.models import Role, Workspace
    from agentclash_site.workspaces.services import membership_set_role
    from bench.publish import _pack_bytes
    from packs.services.publish import pack_version_publish
    from runs.services.deployments import deployment_create
    from runs.services.runs import run_create

    user, _ = get_user_model().objects.get_or_create(username="bench-trace")
    workspace, _ = Workspace.objects.get_or_create(slug="bench-trace", defaults={"name": "Trace bench"})
    membership_set_role(workspace=workspace, user=user, role=Role.OWNER)
    version = pack_version_publish(workspace=workspace, data=_pack_bytes(CASES, "trace-bench")).version
    deployment = deployment_create(workspace=workspace, name="traces", kind="trace_import").deployment
    rows = []
    for size in sizes:
        repetitions = -(-size // CASES)
        if repetitions > MAX_REPETITIONS:
            raise SystemExit(f"{size} lines need more than {MAX_REPETITIONS} repetitions of {CASES} cases")
        run = run_create(
            workspace=workspace,
            user=user,
            pack_version=version,
            deployments=[deployment],
            repetitions=repetitions,
            enqueue=False,
        )
        with tempfile.NamedTemporaryFile(suffix=".jsonl") as body:
            body.write(upload(size))
            body.flush()
            mb = body.tell() / 1e6
            out = subprocess.run(
                [sys.executable, __file__, "--child", str(run.pk), body.name],
                cwd=ROOT,
                env=dict(os.environ),
                check=True,
                capture_output=True,
                text=True,
            )
        if os.environ.get("BENCH_TRACE_PROFILE"):
            log(out.stderr)
        figures = json.loads(out.stdout.strip().splitlines()[-1])
        if figures["accepted"] != size:
            raise SystemExit(f"{size} lines: {figures['accepted']} accepted")
        row = {
            "lines": size,
            "body_mb": round(mb, 1),
            "before_mb": round(figures["before_kb"] / 1024, 1),
            "peak_mb": round(figures["peak_kb"] / 1024, 1),
            "import_mb": round((figures["peak_kb"] - figures["before_kb"]) / 1024, 1),
            "seconds": figures["seconds"],
            "cpu_seconds": figures["cpu_seconds"],
        }
        log(f"[trace import] {row}")
        rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description="Peak RSS of one trace import by its size")
    parser.add_argument("--sizes", default="1000,10000,50000", help="lines per upload, comma-separated")
    parser.add_argument("--child", nargs=2, metavar=("RUN", "FILE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    rows = measure(sizes, log=lambda m: print(m, file=sys.stderr, flush=True))
    print(
        f"{'lines':>8} {'body MB':>8} {'RSS before':>11} {'peak RSS':>9} {'import MB':>10} {'wall s':>7} {'CPU s':>6}"
    )
    for row in rows:
        print(
            f"{row['lines']:>8,} {row['body_mb']:>8} {row['before_mb']:>11} {row['peak_mb']:>9}"
            f" {row['import_mb']:>10} {row['seconds']:>7} {row['cpu_seconds']:>6}"
        )


if __name__ == "__main__":
    main()
