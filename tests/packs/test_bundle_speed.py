"""Validation stays within a small multiple of the C parser's own load time (pack-format
§2.1 performance note): per-node work is one event loop plus the model check."""

from __future__ import annotations

import time

import yaml

from packs.bundle import validate_bundle

HEAD = """\
pack: {slug: big, name: Big, family: reasoning}
version:
  number: 1
  execution_mode: prompt_eval
  evaluation_spec:
    name: big-v1
    version_number: 1
    judge_mode: deterministic
    validators:
      - {key: answer, type: numeric_match, target: final_output, expected_from: case.expectations.result}
    scorecard: {pass_threshold: 1, dimensions: [correctness]}
challenges:
  - {key: add, title: Add, category: arithmetic, difficulty: easy, instructions: "{{question}}"}
input_sets:
  - key: big
    name: Big
    cases:
"""


def big_pack(cases: int) -> bytes:
    parts = [HEAD]
    for i in range(cases):
        parts.append(
            f"      - challenge_key: add\n        case_key: case-{i}\n"
            f'        payload: {{question: "What is {i} + {i + 7}?", n: {i}}}\n'
            f"        expectations: [{{key: result, kind: number, value: {2 * i + 7}}}]\n"
        )
    return "".join(parts).encode()


def best_of(runs: int, action) -> float:
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        action()
        best = min(best, time.perf_counter() - started)
    return best


def test_a_large_pack_validates_within_a_few_times_the_c_load():
    data = big_pack(3000)
    report = validate_bundle(data)
    assert report.valid and report.warnings == []
    assert len(report.manifest["input_sets"][0]["cases"]) == 3000
    c_load = best_of(2, lambda: yaml.load(data, Loader=yaml.CSafeLoader))
    validate = best_of(2, lambda: validate_bundle(data))
    assert validate < 4 * c_load, (validate, c_load)
