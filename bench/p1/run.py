#!/usr/bin/env python
"""P1: end to end vs peers. One workload (2,000 cases, 4 checks, 16 in flight), five tools (the limit timed two ways).

Tools: this project (``ours``: real Celery worker, PostgreSQL, Redis, ``eval start``),
promptfoo, Inspect AI, and the limit (a bare aiohttp client applying the same checks in
Python, ``limit_client.py``), timed in this process (``limit``, the goal's divisor) and as
a process of its own like the other tools (``limit_process``, for comparison). All talk to
one local OpenAI-compatible stub (``stub.py``) on 127.0.0.1.

After one warm-up run per tool, the tools alternate (A B C D E, A B C D E, ...) for ``--rounds``
rounds and the median cases/s of each is reported. Every run must pass exactly 1,500 of
2,000 cases and the stub must have served exactly one request per case; anything else is
an error, not a figure. A peer that cannot be installed is printed as "not measured".

    .venv/bin/python bench/p1/run.py                      # all tools, 3 rounds
    .venv/bin/python bench/p1/run.py --tools limit,promptfoo --rounds 1 --cases 200
    .venv/bin/python bench/p1/run.py --json               # one JSON document on stdout

Value: P1_vs_peer = ours / the faster peer (goal >= 5); P1_vs_limit = ours / limit (>= 0.5).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.p1 import workload  # noqa: E402
from bench.p1.ours import Ours  # noqa: E402
from bench.p1.tools import Inspect, Limit, LimitProcess, NotMeasured, Promptfoo  # noqa: E402

TOOL_KEYS = ("ours", "promptfoo", "inspect", "limit", "limit_process")


class Stub:
    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("stub.py")), "--port", "0"],
            stdout=subprocess.PIPE,
            text=True,
        )
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        if not line.startswith("ready "):
            self.proc.kill()
            raise RuntimeError(f"the stub did not start: {line!r}")
        self.port = int(line.split()[1])
        self.root = f"http://127.0.0.1:{self.port}"
        self.base_url = f"{self.root}/v1"

    def _call(self, method: str, path: str) -> dict:
        req = urllib.request.Request(self.root + path, method=method, data=b"" if method == "POST" else None)
        with urllib.request.urlopen(req, timeout=10) as resp:  # loopback only
            return json.loads(resp.read())

    def reset(self) -> None:
        self._call("POST", "/stats/reset")

    def requests(self) -> int:
        return int(self._call("GET", "/stats")["requests"])

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


def make_tools(keys: list[str], cases: int, install: bool) -> list:
    made = {
        "ours": lambda: Ours(cases),
        "promptfoo": lambda: Promptfoo(cases, install),
        "inspect": lambda: Inspect(cases, install),
        "limit": lambda: Limit(cases),
        "limit_process": lambda: LimitProcess(cases),
    }
    return [made[k]() for k in keys]


def measure(
    *,
    tools: list[str] | None = None,
    cases: int = workload.CASES,
    rounds: int = 3,
    install: bool = True,
    log=print,
) -> dict:
    """Run P1 and return ``{"tools": {key: {...}}, "P1_vs_peer": ..., "P1_vs_limit": ...}``."""
    keys = list(tools or TOOL_KEYS)
    want = workload.expected_passes(cases)
    stub = Stub()
    report: dict = {"cases": cases, "expected_passes": want, "rounds": rounds, "tools": {}}
    active: list = []
    set_up: list = []
    try:
        with tempfile.TemporaryDirectory(prefix="p1-") as tmp:
            workdir = Path(tmp)
            for tool in make_tools(keys, cases, install):
                entry = report["tools"].setdefault(tool.key, {"name": tool.name, "runs": []})
                try:
                    log(f"[p1] setting up {tool.name}")
                    tool.setup(stub.base_url, workdir)
                    entry["version"] = getattr(tool, "version", "")
                    active.append(tool)
                    set_up.append(tool)
                except NotMeasured as exc:
                    entry["status"] = "not measured"
                    entry["reason"] = str(exc)
                    log(f"[p1] {tool.name}: not measured: {exc}")
                except Exception as exc:  # setup broke: record why, keep the other tools going
                    entry["status"] = "error"
                    entry["reason"] = f"setup failed: {exc}"
                    log(f"[p1] {tool.name}: setup failed: {exc}")
            for round_no in range(rounds + 1):  # round 0 is the warm-up
                for tool in list(active):
                    entry = report["tools"][tool.key]
                    stub.reset()
                    try:
                        elapsed, passed = tool.run()
                    except Exception as exc:
                        entry["status"] = "error"
                        entry["reason"] = f"round {round_no}: {exc}"
                        log(f"[p1] {tool.name}: error: {exc}")
                        active.remove(tool)
                        continue
                    served = stub.requests()
                    label = "warm-up" if round_no == 0 else f"round {round_no}"
                    log(
                        f"[p1] {label} {tool.name}: {elapsed:.2f} s, {cases / elapsed:.1f} cases/s, {passed} passed, {served} requests"
                    )
                    if passed != want or served != cases:
                        entry["status"] = "error"
                        entry["reason"] = (
                            f"{label}: {passed} cases passed (expected {want}), stub served {served} requests (expected {cases})"
                        )
                        active.remove(tool)
                        continue
                    if round_no > 0:
                        entry["runs"].append(
                            {"seconds": round(elapsed, 3), "cases_per_s": round(cases / elapsed, 2)}
                        )
            for tool in active:
                entry = report["tools"][tool.key]
                entry["status"] = "measured"
                entry["cases_per_s"] = round(statistics.median(r["cases_per_s"] for r in entry["runs"]), 2)
    finally:
        for tool in set_up:
            tool.teardown()
        stub.stop()
    _teardown_failed(report)
    rate = {k: v.get("cases_per_s") for k, v in report["tools"].items() if v.get("status") == "measured"}
    peers = [rate[k] for k in ("promptfoo", "inspect") if k in rate]
    ours = rate.get("ours")
    report["P1_vs_peer"] = round(ours / max(peers), 3) if ours and peers else None
    report["P1_vs_limit"] = round(ours / rate["limit"], 3) if ours and rate.get("limit") else None
    # For comparison only: the bare client timed as a process, as every other tool is.
    report["ours_vs_limit_process"] = (
        round(ours / rate["limit_process"], 3) if ours and rate.get("limit_process") else None
    )
    return report


def _teardown_failed(report: dict) -> None:
    """Tools that errored keep their runs for the record but get no median."""
    for entry in report["tools"].values():
        if entry.get("status") != "measured":
            entry.pop("cases_per_s", None)


def format_table(report: dict) -> str:
    lines = [
        f"P1: {report['cases']} cases, 16 in flight, median of {report['rounds']} rounds after a warm-up",
        "",
    ]
    lines.append(f"{'tool':<24} {'cases/s':>10}  detail")
    for entry in report["tools"].values():
        if entry.get("status") == "measured":
            runs = ", ".join(f"{r['cases_per_s']:.1f}" for r in entry["runs"])
            lines.append(
                f"{entry['name']:<24} {entry['cases_per_s']:>10.1f}  rounds {runs}; {entry.get('version', '')}"
            )
        else:
            lines.append(f"{entry['name']:<24} {'-':>10}  {entry.get('status')}: {entry.get('reason')}")
    lines.append("")
    lines.append(f"P1_vs_peer  = {report['P1_vs_peer']} (goal >= 5)")
    lines.append(f"P1_vs_limit = {report['P1_vs_limit']} (goal >= 0.5)")
    if report.get("ours_vs_limit_process") is not None:
        lines.append(
            f"ours / limit as a process = {report['ours_vs_limit_process']} (for comparison, no goal)"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description="P1: end to end vs promptfoo and Inspect AI")
    parser.add_argument(
        "--tools", default=",".join(TOOL_KEYS), help=f"comma-separated subset of {','.join(TOOL_KEYS)}"
    )
    parser.add_argument("--cases", type=int, default=workload.CASES)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-install", action="store_true", help="do not install missing peers")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    keys = [k.strip() for k in args.tools.split(",") if k.strip()]
    unknown = sorted(set(keys) - set(TOOL_KEYS))
    if unknown:
        parser.error(f"--tools: unknown {', '.join(unknown)}; choose from {', '.join(TOOL_KEYS)}")
    if args.cases % 4:
        parser.error("--cases must be a multiple of 4 (every 4th case fails)")
    started = time.time()
    report = measure(
        tools=keys,
        cases=args.cases,
        rounds=args.rounds,
        install=not args.no_install,
        log=lambda msg: print(msg, file=sys.stderr, flush=True),
    )
    report["seconds"] = round(time.time() - started, 1)
    print(json.dumps(report, indent=2) if args.json else format_table(report))


if __name__ == "__main__":
    main()
