#!/usr/bin/env python
"""Run every benchmark (P1..P5), print one table and write ``bench/results.json``.

    .venv/bin/python bench/run_all.py                 # everything (make bench)
    .venv/bin/python bench/run_all.py --only P1,P3    # a subset; the others keep their last entry
    .venv/bin/python bench/run_all.py --quick         # small sizes, to check the plumbing

``bench/results.json`` is a list of ``{"id", "value", "unit", "goal": {"op", "value"},
"measured_at", "machine": {"cores", "memory_gb"}, "detail"}`` with ids ``P1_vs_peer``,
``P1_vs_limit``, ``P2``, ``P3``, ``P4``, ``P5``. A figure that could not be measured has
``value: null`` and the reason in ``detail``. Nothing here runs inside the test suite.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import traceback
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

RESULTS = BENCH / "results.json"
IDS = ("P1_vs_peer", "P1_vs_limit", "P2", "P3", "P4", "P5")
GOALS = {
    "P1_vs_peer": (">=", 5, "x (ours / faster peer, cases/s)"),
    "P1_vs_limit": (">=", 0.5, "x (ours / bare aiohttp client, cases/s)"),
    "P2": ("<=", 3, "x (engine time / bare operations time)"),
    "P3": ("<=", 5, "x (validate+publish time / C YAML parse time)"),
    "P4": ("<=", 1.2, "x (worst page server time at 100k items / at 1k)"),
    "P5": ("<=", 1.2, "x (worker RSS after 100k graded items / after 1k)"),
}


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def machine() -> dict:
    cores = os.cpu_count() or 0
    try:
        kib = next(
            int(line.split()[1])
            for line in Path("/proc/meminfo").read_text().splitlines()
            if line.startswith("MemTotal:")
        )
        memory_gb = round(kib / 1024 / 1024, 1)
    except (OSError, StopIteration, ValueError):
        memory_gb = None
    return {"cores": cores, "memory_gb": memory_gb}


def entry(fid: str, value: float | None, detail: dict | str) -> dict:
    op, goal, unit = GOALS[fid]
    return {
        "id": fid,
        "value": value,
        "unit": unit,
        "goal": {"op": op, "value": goal},
        "measured_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "detail": detail,
    }


def _failure(exc: BaseException) -> str:
    return f"not measured: {type(exc).__name__}: {exc}".strip()


# --- the benchmarks ----------------------------------------------------------------------


def run_p1(quick: bool) -> list[dict]:
    from bench.p1 import run as p1

    try:
        report = p1.measure(cases=200 if quick else 2000, rounds=1 if quick else 3, log=log)
    except Exception as exc:
        traceback.print_exc()
        return [entry("P1_vs_peer", None, _failure(exc)), entry("P1_vs_limit", None, _failure(exc))]
    log(p1.format_table(report))
    tools = {
        key: (
            {
                "cases_per_s": t["cases_per_s"],
                "rounds": [r["cases_per_s"] for r in t["runs"]],
                "version": t.get("version"),
            }
            if t.get("status") == "measured"
            else {"cases_per_s": None, "status": t.get("status"), "reason": t.get("reason")}
        )
        for key, t in report["tools"].items()
    }
    base = {"cases": report["cases"], "rounds": report["rounds"], "tools": tools}

    def why(keys: tuple[str, ...]) -> str | None:
        missing = [
            f"{k}: {tools[k].get('status')} ({tools[k].get('reason')})"
            for k in keys
            if not tools[k]["cases_per_s"]
        ]
        return "; ".join(missing) or None

    peer_detail = dict(base)
    if report["P1_vs_peer"] is None:
        peer_detail["reason"] = why(("ours",)) or why(("promptfoo", "inspect"))
    limit_detail = dict(base)
    # The same bare client timed from process start, as the other tools are (no goal).
    limit_detail["ours_vs_limit_process"] = report.get("ours_vs_limit_process")
    if report["P1_vs_limit"] is None:
        limit_detail["reason"] = why(("ours", "limit"))
    return [
        entry("P1_vs_peer", report["P1_vs_peer"], peer_detail),
        entry("P1_vs_limit", report["P1_vs_limit"], limit_detail),
    ]


def run_p2(quick: bool) -> list[dict]:
    argv = [sys.executable, str(BENCH / "grading.py")]
    if quick:
        argv += ["--cases", "2000", "--rounds", "1"]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=3600)
    match = re.search(r"ratio engine/bare:\s*([0-9.]+)", done.stdout)
    if done.returncode != 0 or not match:
        return [
            entry(
                "P2", None, f"not measured: bench/grading.py exited {done.returncode}: {done.stderr[-600:]}"
            )
        ]
    log(done.stdout.strip())
    return [entry("P2", float(match.group(1)), {"output": done.stdout.strip().splitlines()})]


def run_p3(quick: bool) -> list[dict]:
    argv = [sys.executable, str(BENCH / "publish.py"), "--json"]
    if quick:
        argv += ["--cases", "1000", "--rounds", "1"]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        return [
            entry(
                "P3", None, f"not measured: bench/publish.py exited {done.returncode}: {done.stderr[-600:]}"
            )
        ]
    report = json.loads(done.stdout)
    log(
        f"P3: ratio {report['value']} (parse {report['parse_s']:.3f} s, validate+publish {report['publish_s']:.3f} s)"
    )
    return [entry("P3", report["value"], report)]


def run_p4(quick: bool) -> list[dict]:
    """bench/pages.py (the result-pages work) ends with one line
    ``pages: worst ratio R (100k/1k), queries equal: yes|no``; that line is the contract."""
    script = BENCH / "pages.py"
    if not script.exists():
        return [entry("P4", None, "not measured: bench/pages.py missing")]
    argv = [sys.executable, str(script)]
    if quick:
        argv += ["--small", "200", "--large", "2000", "--rounds", "3"]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=7200)
    match = re.search(r"pages: worst ratio ([0-9.]+) .*queries equal: (yes|no)", done.stdout)
    if done.returncode != 0 or not match:
        tail = (done.stderr or done.stdout)[-600:]
        return [entry("P4", None, f"not measured: bench/pages.py exited {done.returncode}: {tail}")]
    log(done.stdout.strip())
    detail = {"queries_equal": match.group(2) == "yes", "output": done.stdout.strip().splitlines()}
    return [entry("P4", float(match.group(1)), detail)]


def run_p5(quick: bool) -> list[dict]:
    argv = [sys.executable, str(BENCH / "worker_memory.py"), "--json"]
    if quick:
        argv += ["--items", "5000"]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=7200)
    try:
        report = json.loads(done.stdout)
    except ValueError:
        return [
            entry(
                "P5",
                None,
                f"not measured: bench/worker_memory.py exited {done.returncode}: {done.stderr[-600:]}",
            )
        ]
    value = report.get("value")
    return [entry("P5", value, report if value is not None else f"not measured: {report.get('reason')}")]


RUNNERS = {"P1": run_p1, "P2": run_p2, "P3": run_p3, "P4": run_p4, "P5": run_p5}


def load_previous() -> dict[str, dict]:
    try:
        return {e["id"]: e for e in json.loads(RESULTS.read_text())}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def met(e: dict) -> str:
    if e["value"] is None:
        return "-"
    op, goal = e["goal"]["op"], e["goal"]["value"]
    return "yes" if (e["value"] >= goal if op == ">=" else e["value"] <= goal) else "NO"


def table(entries: list[dict]) -> str:
    lines = [f"{'id':<12} {'value':>8}  {'goal':<8} {'met':<4} detail"]
    for e in entries:
        value = "-" if e["value"] is None else f"{e['value']:g}"
        goal = f"{e['goal']['op']} {e['goal']['value']}"
        if isinstance(e["detail"], str):
            detail = e["detail"]
        elif e["id"].startswith("P1"):
            detail = ", ".join(
                f"{k} {t['cases_per_s']:.1f}/s" if t["cases_per_s"] else f"{k} {t['status']}"
                for k, t in e["detail"]["tools"].items()
            )
        else:
            detail = e["unit"]
        lines.append(f"{e['id']:<12} {value:>8}  {goal:<8} {met(e):<4} {detail[:110]}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description="run every benchmark and write bench/results.json")
    parser.add_argument("--only", default="P1,P2,P3,P4,P5", help="comma-separated subset of P1..P5")
    parser.add_argument(
        "--quick", action="store_true", help="small sizes: checks the plumbing, not figures to quote"
    )
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    wanted = [p.strip().upper() for p in args.only.split(",") if p.strip()]
    unknown = sorted(set(wanted) - set(RUNNERS))
    if unknown:
        parser.error(f"--only: unknown {', '.join(unknown)}; choose from {', '.join(RUNNERS)}")
    previous = load_previous() if args.output == RESULTS else {}
    fresh: dict[str, dict] = {}
    for key in wanted:
        log(f"== {key}")
        for e in RUNNERS[key](args.quick):
            if args.quick and isinstance(e["detail"], dict):
                e["detail"]["quick"] = True
            fresh[e["id"]] = e
    entries = []
    for fid in IDS:
        if fid in fresh:
            entries.append(fresh[fid])
        elif fid in previous:
            entries.append(previous[fid])
        else:
            entries.append(entry(fid, None, "not measured: not run yet (bench/run_all.py --only)"))
    args.output.write_text(json.dumps(entries, indent=2) + "\n")
    print(table(entries))
    print(f"\nwrote {args.output}")


if __name__ == "__main__":
    main()
