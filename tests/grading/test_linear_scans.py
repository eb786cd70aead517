"""The engine's own patterns over agent output (test logs, notes, claims) run in time
linear in the text. An agent's reply may hold up to 10 MiB; ``^\\s*`` under ``re.M`` restarts
at every blank line and rescans the rest, and two adjacent ``\\s*`` (or ``\\s+`` then a lazy
``.*?``) split one run of spaces in every way. Each case below took seconds at 20 kB before
(quadratic, or cubic for the notes heading) and would take hours at 10 MiB."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from grading.engine import claims, notes
from grading.engine.validators.code_execution import parse_counts

N = 20_000
BUDGET = 0.5


def _fast(fn: Callable[[], Any]) -> Any:
    started = time.perf_counter()
    result = fn()
    elapsed = time.perf_counter() - started
    assert elapsed < BUDGET, f"took {elapsed:.2f}s"
    return result


@pytest.mark.parametrize(
    "stdout",
    [
        "\n" * N + "x",  # ^\s* of the pytest, go and vitest summaries, at every blank line
        "1 " + "11 " * (N // 3),  # the pytest items' nested repetition
        "Tests" + " " * N,  # vitest: \s+ then a lazy .*?
        "Tests: " + "1" * N,  # jest: a lazy .*? then \d+
    ],
    ids=["blank-lines", "pytest-items", "vitest-spaces", "jest-digits"],
)
def test_code_execution_counts_are_parsed_in_linear_time(stdout):
    assert _fast(lambda: parse_counts(stdout, "")) is None


def test_code_execution_summaries_still_count():
    assert parse_counts("\n\n===== 3 passed, 1 failed in 0.12s =====\n", "")["failed"] == 1
    assert parse_counts("x\n\n   --- PASS: TestA\n--- FAIL: TestB\n", "") == {
        "passed": 1,
        "failed": 1,
        "errors": 0,
        "total": 2,
    }
    jest = parse_counts("Tests:       1 failed, 4 passed, 5 total\n", "")
    assert (jest["passed"], jest["failed"], jest["total"]) == (4, 1, 5)
    vitest = parse_counts("  Tests  2 passed (2)\n", "")
    assert (vitest["passed"], vitest["total"]) == (2, 2)


def test_go_results_in_a_claims_source_are_counted_in_linear_time():
    assert _fast(lambda: claims.parse_test_counts("\n" * N + "x")) is None
    counts = claims.parse_test_counts("\n\n  --- PASS: TestA\n--- FAIL: TestB\n")
    assert (counts.passed, counts.failed) == (1, 1)


def test_paths_listed_after_a_save_verb_are_read_in_linear_time():
    verb_end = len("I saved")
    sentence = "I saved a.py" + " " * N + "b.py"
    assert _fast(lambda: claims._paths_after(sentence, verb_end)) == ["a.py", "b.py"]
    # the object before "to" is read in linear time too
    spaced = "I saved" + (" " * N + "the") * 3 + " " * N + "x.py"
    assert _fast(lambda: claims._paths_after(spaced, verb_end)) == []
    assert claims._paths_after("I saved a.py ,  AND b.py & c.py, d.py and e.py; f.py", verb_end) == [
        "a.py",
        "b.py",
        "c.py",
        "d.py",
        "e.py",
    ]


@pytest.mark.parametrize(
    "text",
    ["#" + " " * 1000 + "x" + " " * 1000 + "#" * 1000 + "x", "**Uncertain**" + " " * N + "x"],
    ids=["heading", "emphasis-heading"],
)
def test_notes_headings_are_read_in_linear_time(text):
    summary = _fast(lambda: notes.user_notes_summary(text))
    assert summary["uncertainties"] == []


def test_notes_headings_still_pick_the_bucket():
    text = "## Uncertainties ##  \n- a\n**Workarounds** :  \n- b\n# Other #x\n- c\n"
    assert notes.user_notes_summary(text) == {
        "uncertainties": ["a"],
        "workarounds": ["b"],
        "needs_review": ["c"],
    }
