"""Grade documents (``CaseGrade.to_dict()``, timing aside) of the grading benchmark's workload,
of varied evidence under the same spec and of the example packs' recorded results, held to
digests the engine wrote before its hot path was reworked: a speed-up must not change a
verdict, a score, an evidence text or a field of the document.

A deliberate change of what a grade says updates the digests:

    .venv/bin/python -m tests.grading.test_grade_documents --write
"""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import json
import random
import sys
from pathlib import Path
from typing import Any

import pytest

from grading.engine import evidence_from_response, grade_case
from grading.engine.types import CaseDef, CaseExpectation, GradeContext

ROOT = Path(__file__).resolve().parents[2]
DIGESTS = Path(__file__).with_name("grade_documents.json")
EXAMPLES = ROOT / "examples" / "packs"
# (pack directory or zip, results file, input set)
EXAMPLE_RUNS = [
    ("mental-math", "mental-math/results.jsonl", None),
    ("invoice-totals.zip", "invoice-totals/results.jsonl", None),
    ("release-notes", "release-notes/results.jsonl", None),
    *(("demo", f"demo/results/{s}.jsonl", s) for s in ("triage", "config", "ledger")),
]


def _bench() -> Any:
    spec = importlib.util.spec_from_file_location("bench_grading", ROOT / "bench" / "grading.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _digest(doc: Any) -> str:
    return hashlib.sha256(json.dumps(doc, sort_keys=True, ensure_ascii=True).encode()).hexdigest()[:16]


def _document(grade: Any) -> dict[str, Any]:
    doc = grade.to_dict()
    doc.pop("timing")
    return doc


def bench_documents(n: int = 600) -> list[str]:
    bench = _bench()
    spec = bench.load_spec()
    ctx = GradeContext(case_findings=[])
    return [
        _digest(_document(grade_case(ev, case, spec, context=ctx))) for case, ev, _ in bench.make_cases(n)
    ]


def varied_documents(n: int = 400) -> list[str]:
    """The benchmark's spec (as a dict and as a model) on evidence that takes the other paths:
    black_box lanes, no tool calls channel, missing or odd case data, non-JSON answers."""
    bench = _bench()
    rng = random.Random(11)
    specs = [bench.load_spec(), copy.deepcopy(bench.SPEC_RAW)]
    out = []
    for i in range(n):
        answer = rng.choice(
            ['{"items": [{"id": 3}], "total": 7}', '{"total": 7}', "7", "", "[1]", "not json"]
        )
        calls = [
            {
                "name": rng.choice(["run_tests", "Bash", "read_file"]),
                "args": rng.choice(
                    [{"path": "tests/"}, {"command": "rm -rf x"}, {"command": ["ls", "-l"]}, {}, {"path": 3}]
                ),
                "status": rng.choice(["ok", "ok", "error"]),
            }
            for _ in range(rng.randint(0, 3))
        ]
        response: dict[str, Any] = {"final_output": answer, "tool_calls": calls}
        if rng.random() < 0.15:
            response = {"final_output": answer}
        evidence = evidence_from_response(
            response, evidence_level=rng.choice(["structured", "structured", "black_box"])
        )
        expectations = [
            CaseExpectation("answer", value=rng.choice([answer, "7", 7])),
            CaseExpectation(
                "path",
                value=rng.choice([{"path": "$.items[0].id", "value": 3}, "$.total", {"path": "$..x"}, 5]),
            ),
            CaseExpectation("total", value=rng.choice([7, "7", "seven", 7.001])),
        ]
        if rng.random() < 0.2:
            expectations.pop(rng.randrange(3))
        payload = rng.choice([{"reported": "7.00"}, {"reported": 7}, {"reported": "n/a"}, {}, {"other": 1}])
        case = CaseDef("bench", f"v{i}", payload=payload, expectations=expectations)
        ctx = GradeContext(case_findings=[])
        out.append(_digest(_document(grade_case(evidence, case, specs[i % 2], context=ctx))))
    return out


def example_documents() -> dict[str, str]:
    from grading.engine.offline import grade_offline
    from packs.bundle.archive import bundle_from_directory
    from packs.bundle.selection import select_input_set
    from packs.bundle.validate import validate_bundle

    out = {}
    for pack, results, input_set in EXAMPLE_RUNS:
        path = EXAMPLES / pack
        data = path.read_bytes() if path.is_file() else bundle_from_directory(path)
        report = validate_bundle(data, filename=path.name)
        assert report.valid and report.manifest is not None and report.bundle is not None
        key = select_input_set(report.manifest, input_set).key
        document = grade_offline(
            spec=report.evaluation_spec,
            pack_slug=report.bundle.pack.slug,
            pack_number=report.bundle.version.number,
            input_set_name=key,
            cases=report.grading_cases(key),
            results=(EXAMPLES / results).read_bytes(),
        )
        for entry in document["cases"]:
            entry["grading"].pop("timing")
        out[f"{pack}:{key}"] = _digest(document)
    return out


def current() -> dict[str, Any]:
    return {"bench": bench_documents(), "varied": varied_documents(), "examples": example_documents()}


@pytest.fixture(scope="module")
def stored() -> dict[str, Any]:
    return json.loads(DIGESTS.read_text())  # type: ignore[no-any-return]


def _first_difference(now: list[str], then: list[str]) -> str:
    i = next((i for i, (a, b) in enumerate(zip(now, then, strict=True)) if a != b), None)
    return f"case {i} differs first ({sum(a != b for a, b in zip(now, then, strict=True))} in all)"


def test_the_benchmark_workload_grades_to_the_same_documents(stored):
    now = bench_documents()
    assert now == stored["bench"], _first_difference(now, stored["bench"])


def test_varied_evidence_grades_to_the_same_documents(stored):
    now = varied_documents()
    assert now == stored["varied"], _first_difference(now, stored["varied"])


def test_the_example_packs_grade_to_the_same_documents(stored):
    assert example_documents() == stored["examples"]


if __name__ == "__main__" and "--write" in sys.argv:
    import django

    django.setup()
    DIGESTS.write_text(json.dumps(current(), indent=1) + "\n")
    print(f"wrote {DIGESTS}")
