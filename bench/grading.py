"""Grading hot-path benchmark: grade_case over synthetic cases vs the same checks in a bare loop.

    .venv/bin/python bench/grading.py                  # 20,000 cases
    .venv/bin/python bench/grading.py --cases 5000 --profile

Prints checks per second through ``grade_case`` and the ratio
``engine time / bare operations time`` (goal <= 3): process CPU time, the median of
interleaved rounds (bare, engine, bare, engine, ...), because wall time on a shared machine
varies by 2x; the ratio of the best rounds is printed too. ``--documents`` also times
``grade_case`` plus ``CaseGrade.to_dict()`` (the text the engine renders lazily). Not part of
the test suite.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import re2

from grading.engine import evidence_from_response, grade_case
from grading.engine.types import CaseDef, CaseExpectation, GradeContext

SPEC_RAW = {
    "name": "bench",
    "version_number": 1,
    "judge_mode": "deterministic",
    "validators": [
        {
            "key": "exact",
            "type": "exact_match",
            "target": "final_output",
            "expected_from": "case.expectations.answer",
        },
        {"key": "has_total", "type": "contains", "target": "final_output", "expected_from": "literal:total"},
        {
            "key": "shape",
            "type": "regex_match",
            "target": "final_output",
            "expected_from": r"literal:\"total\":\s*\d+",
        },
        {
            "key": "jp",
            "type": "json_path_match",
            "target": "final_output",
            "expected_from": "case.expectations.path",
        },
        {
            "key": "num",
            "type": "numeric_match",
            "target": "case.payload.reported",
            "expected_from": "case.expectations.total",
            "config": {"absolute_tolerance": 0.01},
        },
        {
            "key": "tests_ran",
            "type": "tool_call_assertion",
            "target": "tool_calls",
            "config": {"tool_name": "run_tests", "min_count": 1, "arguments_contain": {"path": "tests/"}},
        },
    ],
    "rules": {
        "job": [
            {
                "label": "no rm -rf",
                "validator": "pattern_match",
                "where": "executed_commands",
                "pattern": r"rm\s+-rf",
                "negate": True,
            }
        ]
    },
    "scorecard": {"dimensions": ["correctness"], "pass_threshold": 0.5},
}
CHECKS_PER_CASE = 7


def load_spec():  # type: ignore[no-untyped-def]
    try:
        from grading.engine.spec import EvaluationSpec

        return EvaluationSpec.model_validate(SPEC_RAW)
    except ImportError:
        return SPEC_RAW


def make_cases(n: int, seed: int = 7) -> list[tuple[CaseDef, object, dict]]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        total = rng.randint(1, 1000)
        items = [{"id": rng.randint(1, 99)} for _ in range(rng.randint(1, 4))]
        doc = {"items": items, "total": total}
        text = json.dumps(doc)
        answer = text if rng.random() < 0.7 else json.dumps({**doc, "total": total + 1})
        case = CaseDef(
            "bench",
            f"c{i}",
            payload={"reported": f"{total}.00" if rng.random() < 0.9 else "n/a"},
            expectations=[
                CaseExpectation("answer", value=answer),
                CaseExpectation("path", value={"path": "$.items[0].id", "value": items[0]["id"]}),
                CaseExpectation("total", value=total),
            ],
        )
        calls = [{"name": "read_file", "args": {"path": "a.py"}}]
        if rng.random() < 0.8:
            calls.append({"name": "run_tests", "args": {"path": "tests/", "verbose": True}})
        calls.append(
            {"name": "Bash", "args": {"command": "ls -la" if rng.random() < 0.95 else "rm -rf build"}}
        )
        response = {"final_output": text, "tool_calls": calls}
        out.append((case, evidence_from_response(response), doc))
    return out


def bare(cases: list) -> int:
    """The same checks with no engine: direct comparisons, RE2 searches, JSON walks."""
    shape = re2.compile(r"\"total\":\s*\d+")
    rule = re2.compile(r"(?im)rm\s+-rf")
    passed = 0
    for case, ev, _doc in cases:
        exp = {e.key: e.value for e in case.expectations}
        out = ev.final_output
        passed += out == exp["answer"]
        passed += "total" in out
        passed += shape.search(out) is not None
        doc = json.loads(out)
        p = exp["path"]
        items = doc.get("items")
        passed += isinstance(items, list) and len(items) > 0 and items[0].get("id") == p["value"]
        with contextlib.suppress(ValueError):
            passed += abs(float(case.payload["reported"]) - float(exp["total"])) <= 0.01
        n = 0
        for c in ev.tool_calls:
            if c.status == "ok" and c.name == "run_tests" and c.args.get("path") == "tests/":
                n += 1
        passed += n >= 1
        cmds = "\n".join(c.args["command"] for c in ev.tool_calls if c.name == "Bash")
        passed += rule.search(cmds) is None
    return passed


def engine(cases: list, spec: object) -> int:
    ctx = GradeContext(case_findings=[])
    passed = 0
    for case, ev, _doc in cases:
        g = grade_case(ev, case, spec, context=ctx)
        passed += g.summary["passed"]
    return passed


def interleaved(fns: list, rounds: int) -> list[list[float]]:  # type: ignore[type-arg]
    """CPU times of each function per round, rounds interleaved (A B A B ...) so both see the
    same machine load."""
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            t = time.process_time()
            fn()
            times[i].append(time.process_time() - t)
    return times


def documents(cases: list, spec: object) -> int:
    """grade_case plus the grading.json document, as a run stores it."""
    ctx = GradeContext(case_findings=[])
    n = 0
    for case, ev, _doc in cases:
        n += len(grade_case(ev, case, spec, context=ctx).to_dict()["expectations"])
    return n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--documents", action="store_true", help="also time grade_case plus CaseGrade.to_dict()")
    args = ap.parse_args()
    spec = load_spec()
    cases = make_cases(args.cases)
    engine(cases[:100], spec)  # warm caches (plan, patterns)
    if args.profile:
        from pyinstrument import Profiler

        prof = Profiler()
        prof.start()
        engine(cases, spec)
        prof.stop()
        print(prof.output_text(unicode=True, color=False, show_all=False))
    fns = [lambda: bare(cases), lambda: engine(cases, spec)]
    if args.documents:
        fns.append(lambda: documents(cases, spec))
    times = interleaved(fns, args.rounds)
    t_bare, t_engine = statistics.median(times[0]), statistics.median(times[1])
    checks = args.cases * CHECKS_PER_CASE
    print(
        f"cases: {args.cases}, checks: {checks} ({CHECKS_PER_CASE} per case), {args.rounds} interleaved rounds"
    )
    print(
        f"bare loop:   {t_bare:.3f} s  ({checks / t_bare:,.0f} checks/s)  [median; best {min(times[0]):.3f} s]"
    )
    print(
        f"grade_case:  {t_engine:.3f} s  ({checks / t_engine:,.0f} checks/s, {args.cases / t_engine:,.0f} cases/s)"
        f"  [median; best {min(times[1]):.3f} s]"
    )
    print(f"ratio engine/bare: {t_engine / t_bare:.2f}")
    print(f"ratio of the best rounds: {min(times[1]) / min(times[0]):.2f}")
    if args.documents:
        t_doc = statistics.median(times[2])
        print(
            f"grade_case + to_dict: {t_doc:.3f} s  ({args.cases / t_doc:,.0f} documents/s), "
            f"over bare: {t_doc / t_bare:.2f}"
        )


if __name__ == "__main__":
    main()
