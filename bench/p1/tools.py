"""The tools P1 drives: the bare aiohttp limit, promptfoo, Inspect AI (this project's leg is ``ours.py``).

Each tool has ``setup(base_url, workdir)`` (raises ``NotMeasured`` with the reason when it
cannot run) and ``run() -> (elapsed_seconds, passed_cases)``. Timing covers the whole tool
invocation as a user would start it (process start to results written), except ``Limit``,
the goal's divisor, which is timed inside the harness; ``LimitProcess`` is the same client
timed like the others.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from bench.p1 import peers, workload


class NotMeasured(Exception):
    """The tool cannot be measured here; the message is the reason."""


class Limit:
    """A bare aiohttp client (``limit_client.py``): the same requests, 16 in flight, the same
    checks in Python; timed inside this process (no interpreter start, no imports)."""

    name = "limit (bare aiohttp)"
    key = "limit"

    def __init__(self, cases: int, concurrency: int = 16) -> None:
        self.cases = cases
        self.concurrency = concurrency

    def setup(self, base_url: str, workdir: Path) -> None:
        self.base_url = base_url

    def run(self) -> tuple[float, int]:
        from bench.p1.limit_client import run_client

        start = time.perf_counter()
        passed = asyncio.run(run_client(self.base_url, self.cases, self.concurrency))
        return time.perf_counter() - start, passed

    def teardown(self) -> None:
        pass


class LimitProcess:
    """The same bare client as a process of its own, timed from process start like the
    other tools (interpreter and imports included)."""

    name = "limit as a process"
    key = "limit_process"

    def __init__(self, cases: int) -> None:
        self.cases = cases

    def setup(self, base_url: str, workdir: Path) -> None:
        self.argv = [
            sys.executable,
            str(Path(__file__).with_name("limit_client.py")),
            base_url,
            str(self.cases),
        ]

    def run(self) -> tuple[float, int]:
        start = time.perf_counter()
        done = subprocess.run(self.argv, capture_output=True, text=True, timeout=600)
        elapsed = time.perf_counter() - start
        if done.returncode != 0:
            raise RuntimeError(f"limit_client.py exited {done.returncode}: {done.stderr[-800:]}")
        return elapsed, int(json.loads(done.stdout)["passed"])

    def teardown(self) -> None:
        pass


class Promptfoo:
    name = "promptfoo"
    key = "promptfoo"

    def __init__(self, cases: int, install: bool = True) -> None:
        self.cases = cases
        self.install = install
        self.version = ""

    def setup(self, base_url: str, workdir: Path) -> None:
        argv, detail = peers.ensure_promptfoo(self.install)
        if argv is None:
            raise NotMeasured(detail)
        self.version = detail
        self.workdir = workdir / "promptfoo"
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.config = self.workdir / "promptfooconfig.json"
        self.config.write_text(json.dumps(workload.promptfoo_config(base_url, self.cases)))
        self.output = self.workdir / "results.json"
        self.argv = [
            *argv,
            "eval",
            "-c",
            str(self.config),
            "--no-cache",
            "--max-concurrency",
            "16",
            "--no-progress-bar",
            "--no-table",
            "--no-write",
            "-o",
            str(self.output),
        ]
        self.env = dict(
            os.environ,
            PROMPTFOO_DISABLE_TELEMETRY="1",
            PROMPTFOO_DISABLE_UPDATE="1",
            PROMPTFOO_DISABLE_REMOTE_GENERATION="1",
            PROMPTFOO_SELF_HOSTED="1",
            PROMPTFOO_CONFIG_DIR=str(self.workdir / "home"),
            PROMPTFOO_CACHE_ENABLED="false",
            OPENAI_API_KEY="bench-not-a-secret",
            NO_COLOR="1",
        )

    def run(self) -> tuple[float, int]:
        self.output.unlink(missing_ok=True)
        start = time.perf_counter()
        done = subprocess.run(
            self.argv, cwd=self.workdir, env=self.env, capture_output=True, text=True, timeout=1800
        )
        elapsed = time.perf_counter() - start
        if not self.output.exists():
            tail = (done.stderr or done.stdout)[-800:]
            raise RuntimeError(f"promptfoo exited {done.returncode} without results: {tail}")
        data = json.loads(self.output.read_text())
        results = data.get("results", {})
        rows = results.get("results") or []
        if len(rows) != self.cases:
            raise RuntimeError(f"promptfoo returned {len(rows)} results, expected {self.cases}")
        errors = [r for r in rows if r.get("error") and not r.get("gradingResult")]
        if errors:
            raise RuntimeError(f"promptfoo: {len(errors)} provider errors, first: {errors[0].get('error')}")
        passed = sum(1 for r in rows if r.get("success"))
        return elapsed, passed

    def teardown(self) -> None:
        pass


class Inspect:
    name = "Inspect AI"
    key = "inspect"

    def __init__(self, cases: int, install: bool = True) -> None:
        self.cases = cases
        self.install = install
        self.version = ""

    def setup(self, base_url: str, workdir: Path) -> None:
        argv, detail = peers.ensure_inspect(self.install)
        if argv is None:
            raise NotMeasured(detail)
        self.version = detail
        self.workdir = workdir / "inspect"
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.task = workload.write_inspect_task(self.workdir / "squares.py", self.cases)
        self.logs = self.workdir / "logs"
        self.argv = [
            *argv,
            "eval",
            self.task.name,  # relative to cwd: inspect refuses absolute task paths
            "--model",
            "openai/stub",
            "-M",
            "responses_api=false",
            "--max-connections",
            "16",
            "--log-format",
            "json",
            "--log-dir",
            str(self.logs),
            "--display",
            "none",
            "--no-fail-on-error",
        ]
        self.env = dict(
            os.environ,
            OPENAI_BASE_URL=base_url,
            OPENAI_API_KEY="bench-not-a-secret",
            INSPECT_TELEMETRY="",
            INSPECT_LOG_DIR=str(self.logs),
        )

    def run(self) -> tuple[float, int]:
        for old in self.logs.glob("*.json") if self.logs.exists() else []:
            old.unlink()
        start = time.perf_counter()
        done = subprocess.run(
            self.argv, cwd=self.workdir, env=self.env, capture_output=True, text=True, timeout=1800
        )
        elapsed = time.perf_counter() - start
        logs = sorted(self.logs.glob("*.json")) if self.logs.exists() else []
        if done.returncode != 0 or not logs:
            tail = (done.stderr or done.stdout)[-800:]
            raise RuntimeError(f"inspect exited {done.returncode}: {tail}")
        data = json.loads(logs[-1].read_text())
        samples = data.get("samples") or []
        if data.get("status") != "success" or len(samples) != self.cases:
            raise RuntimeError(
                f"inspect: status {data.get('status')}, {len(samples)} samples, expected {self.cases}"
            )
        passed = 0
        for sample in samples:
            score = (sample.get("scores") or {}).get("four_checks") or {}
            passed += score.get("value") == "C"
        return elapsed, passed

    def teardown(self) -> None:
        pass
