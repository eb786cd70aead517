"""code_execution (grading.md §3.7): run the pack's test command over the returned files."""

from __future__ import annotations

import math
import re
from typing import Any

from .. import jsontext
from ..refs import Resolved, render_template, visible_assets
from ..sandbox import run_sandboxed
from ..types import OutcomeClass
from .common import Env, VResult, cfg, error, failed, graded, pack_error, unavailable

_COUNT_KEYS = ("passed", "failed", "errors", "total")


def _has_counts(obj: object) -> bool:
    """A JSON object reporting at least one count as a number (a null or a string reports none)."""
    return isinstance(obj, dict) and any(
        isinstance(obj.get(k), (int, float)) and not isinstance(obj.get(k), bool) for k in _COUNT_KEYS
    )


def _object_counts(obj: object) -> dict[str, int] | None:
    """The counts of a JSON object that reports them: every numeric count key a whole number
    >= 0 (NaN, infinities, fractions, negatives and booleans are no test counts: int() of the
    first two raised, a negative failed count made 2 of 1 pass) and ``total`` not below the
    others' sum; else None (not a counts report, the next source decides)."""
    if not _has_counts(obj):
        return None
    assert isinstance(obj, dict)
    counts: dict[str, int] = {}
    for k in _COUNT_KEYS:
        v = obj.get(k)
        if v is None or isinstance(v, str):  # not reported
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return None
        if isinstance(v, float) and not (math.isfinite(v) and v.is_integer()):
            return None
        if v < 0:
            return None
        counts[k] = int(v)
    c = _complete(counts)
    if c["total"] < c["passed"] + c["failed"] + c["errors"]:
        return None
    return c


def _json_counts(text: str) -> dict[str, int] | None:
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if not (line.startswith("{") and line.endswith("}")):
            continue
        try:
            obj = jsontext.loads(line)
        except ValueError:
            continue
        counts = _object_counts(obj)
        if counts is not None:
            return counts
    try:
        obj = jsontext.loads(text)
    except ValueError:
        return None
    return _object_counts(obj)


def _complete(c: dict[str, int]) -> dict[str, int]:
    c.setdefault("passed", 0)
    c.setdefault("failed", 0)
    c.setdefault("errors", 0)
    c.setdefault("total", c["passed"] + c["failed"] + c["errors"])
    return c


_SUITE = re.compile(r"<testsuites?\b([^>]*)>")
_ATTR = re.compile(r'(\w+)="(\d+)"')


def _junit_counts(text: str) -> dict[str, int] | None:
    suites = [
        dict(_ATTR.findall(m.group(1)))
        for m in _SUITE.finditer(text)
        if m.group(0).startswith("<testsuite ") or m.group(0).startswith("<testsuite>")
    ]
    if not suites:
        outer = [dict(_ATTR.findall(m.group(1))) for m in _SUITE.finditer(text)]
        suites = [a for a in outer if "tests" in a]
    suites = [a for a in suites if "tests" in a]
    if not suites:
        return None
    tests = sum(int(a.get("tests", 0)) for a in suites)
    fails = sum(int(a.get("failures", 0)) for a in suites)
    errs = sum(int(a.get("errors", 0)) for a in suites)
    skipped = sum(int(a.get("skipped") or a.get("disabled") or 0) for a in suites)
    passed = max(0, tests - fails - errs - skipped)
    return {"passed": passed, "failed": fails, "errors": errs, "total": passed + fails + errs}


# Agent output, up to the body cap: every pattern here runs in linear time. Leading blanks
# are [^\S\n] (a ``^\s*`` under re.M rescans every following blank line from each one), the
# items are atomic (``\w+`` also eats digits, so they split a run in every way), a ``\s+``
# before a lazy group is possessive and a number after one starts at a non-digit.
_PYTEST_LINE = re.compile(r"^=*[^\S\n]*(?>(?:\d+ \w+(?:, )?)+).*? in [\d.]+s", re.M)
_PYTEST_ITEM = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected)")
_UNITTEST_RAN = re.compile(r"^Ran (\d+) tests? in", re.M)
_UNITTEST_FAILED = re.compile(r"^FAILED \(([^)]*)\)", re.M)
_JEST = re.compile(r"^Tests:\s++(.*?)(?<!\d)(\d++) total", re.M)
_VITEST = re.compile(r"^[^\S\n]*Tests\s++(.*?)\((\d+)\)", re.M)
_CARGO = re.compile(r"test result: \w+\. (\d+) passed; (\d+) failed;")
_GO_PASS = re.compile(r"^[^\S\n]*--- PASS:", re.M)
_GO_FAIL = re.compile(r"^[^\S\n]*--- FAIL:", re.M)


def _summary_counts(text: str) -> dict[str, int] | None:
    lines = _PYTEST_LINE.findall(text)
    if lines:
        c = {"passed": 0, "failed": 0, "errors": 0}
        for n, word in _PYTEST_ITEM.findall(lines[-1]):
            if word == "passed" or word == "xpassed":
                c["passed"] += int(n)
            elif word == "failed":
                c["failed"] += int(n)
            elif word.startswith("error"):
                c["errors"] += int(n)
        return _complete(c)
    ran = _UNITTEST_RAN.findall(text)
    if ran:
        total = int(ran[-1])
        c = {"failed": 0, "errors": 0}
        m = _UNITTEST_FAILED.findall(text)
        if m:
            for part in m[-1].split(","):
                k, _, v = part.strip().partition("=")
                if k == "failures" and v.isdigit():
                    c["failed"] = int(v)
                elif k == "errors" and v.isdigit():
                    c["errors"] = int(v)
        skipped = re.search(r"skipped=(\d+)", m[-1]) if m else None
        total -= int(skipped.group(1)) if skipped else 0
        return {"passed": max(0, total - c["failed"] - c["errors"]), **c, "total": total}
    for rx in (_JEST, _VITEST):
        found = rx.findall(text)
        if found:
            body, total = found[-1]
            c = {"passed": 0, "failed": 0, "errors": 0}
            for n, word in re.findall(r"(\d+) (passed|failed)", body):
                c[word] += int(n)
            return {**c, "total": c["passed"] + c["failed"] if c["passed"] + c["failed"] else int(total)}
    cargo = _CARGO.findall(text)
    if cargo:
        p = sum(int(a) for a, _ in cargo)
        f = sum(int(b) for _, b in cargo)
        return {"passed": p, "failed": f, "errors": 0, "total": p + f}
    gp, gf = len(_GO_PASS.findall(text)), len(_GO_FAIL.findall(text))
    if gp or gf:
        return {"passed": gp, "failed": gf, "errors": 0, "total": gp + gf}
    return None


def parse_counts(stdout: str, stderr: str) -> dict[str, int] | None:
    """Counts from stdout then stderr: JSON object, JUnit XML, runner summaries."""
    for stream in (stdout, stderr):
        for parser in (_json_counts, _junit_counts, _summary_counts):
            counts = parser(stream)
            if counts is not None:
                return counts
    return None


def score_counts(counts: dict[str, int] | None, exit_code: int | None, scoring: str) -> tuple[float, str]:
    if scoring == "all_or_nothing" and counts is not None and counts.get("total", 0) <= 0:
        # §3.7: 1.0 iff total > 0; a run that reports zero tests has not shown that anything works
        return 0.0, "all_or_nothing: the test counts report 0 tests"
    if counts is None or counts.get("total", 0) <= 0:
        # fraction_passed over zero tests is 0/0; §3.7 does not define it, so upstream's rule stands
        ok = exit_code == 0
        what = "no test counts found" if counts is None else "the test counts report 0 tests"
        return (1.0 if ok else 0.0), f"{what}; exit code {exit_code} decides"
    total, passed = counts["total"], counts["passed"]
    if scoring == "all_or_nothing":
        ok = counts["failed"] == 0 and counts["errors"] == 0
        return (1.0 if ok else 0.0), "all_or_nothing"
    return min(1.0, passed / total), f"fraction_passed {passed}/{total}"


def code_record(
    key: str,
    command: str,
    exit_code: int | None,
    counts: dict[str, int] | None,
    stdout: str,
    stderr: str,
    extra: str = "",
) -> str:
    shown = ", ".join(f"{k}={v}" for k, v in counts.items()) if counts else "none"
    return (
        f"command: {command}\nexit code: {exit_code}\ncounts: {shown}{extra}\n"
        f"stdout (last 1000): {stdout[-1000:]}\nstderr (last 1000): {stderr[-1000:]}"
    )


def code_execution(actual: Resolved, expected: Any, config: Any, env: Env) -> VResult:
    template = cfg(config, "test_command")
    if not isinstance(template, str) or not template.strip():
        return pack_error("code_execution needs config.test_command", "invalid_config")
    scoring = str(cfg(config, "scoring", "fraction_passed"))
    if scoring not in ("fraction_passed", "all_or_nothing"):
        return pack_error(f"scoring {scoring!r} is not supported", "invalid_config")
    evidence, context = env.evidence, env.context
    if not evidence.channels.files:
        return unavailable("UNAVAILABLE: lane reports no files")
    command = render_template(template, env.case)
    files: dict[str, bytes] = {}
    for asset in visible_assets(env.case, context).values():
        data = context.asset_loader(asset) if context.asset_loader is not None else None
        if data is not None:
            files[asset.path] = data
    for path, entry in evidence.files.items():
        files[path] = (
            entry.content.encode("utf-8") if entry.content is not None else (entry.content_bytes or b"")
        )
    result = run_sandboxed(
        files,
        command,
        timeout_ms=int(cfg(config, "timeout_ms", 30000)),
        memory_mb=int(cfg(config, "memory_mb", 512)),
        workdir_inside=context.working_directory or "/workspace",
        bwrap=cfg(config, "_bwrap"),
    )
    threshold = float(cfg(config, "pass_threshold", 1.0))
    rid = f"code:{env.key}"
    if not result.started:
        env.records[rid] = f"command: {command}\nsandbox unavailable: {result.error}"
        return error(f"sandbox unavailable: {result.error}", "sandbox_unavailable", OutcomeClass.INFRA_ERROR)
    counts = parse_counts(result.stdout, result.stderr)
    details = {
        "command": command,
        "exit_code": result.exit_code,
        "counts": counts,
        "stdout_tail": result.stdout[-1000:],
        "stderr_tail": result.stderr[-1000:],
    }
    if result.timed_out or result.memory_exceeded:
        what = "time limit" if result.timed_out else "memory limit"
        env.records[rid] = code_record(
            env.key, command, result.exit_code, counts, result.stdout, result.stderr, f"\n{what} hit"
        )
        return failed(f"{rid}: {what} hit; {env.records[rid]}"[:990], details={**details, "limit": what})
    score, how = score_counts(counts, result.exit_code, scoring)
    env.records[rid] = code_record(env.key, command, result.exit_code, counts, result.stdout, result.stderr)
    text = f"{rid}: score {score:.4f} ({how}; threshold {threshold:g}); {env.records[rid]}"
    return graded(score, threshold, text, details=details)
