"""Exit codes of ``eval start --follow`` from the run document (interfaces.md §6)."""

from __future__ import annotations

from runs.management.commands.eval import follow_exit_code

NO_ATTEMPT_FAILURES = {"infra_error": 0, "config_error": 0, "cancelled": 0, "pending": 0}


def document(passed: int, failed: int) -> dict:
    graded = passed + failed
    rate = round(passed / graded, 4) if graded else None  # the document shows 4 decimals
    counts = {"PASSED": passed, "FAILED": failed, **NO_ATTEMPT_FAILURES}
    return {"run": {"status": "completed"}, "lanes": [{"pass_rate": rate, "counts": counts}]}


def test_the_default_fail_under_fails_on_any_failed_case_even_when_the_rate_rounds_to_one():
    """--fail-under defaults to 1.0, "any failed case": one failure in 30,000 cases is a pass
    rate of 0.99997, shown as 1.0; it exited 0."""
    doc = document(29_999, 1)
    assert doc["lanes"][0]["pass_rate"] == 1.0
    assert follow_exit_code(doc, 1.0) == 1
    assert follow_exit_code(document(30_000, 0), 1.0) == 0


def test_a_rate_below_fail_under_exits_1_and_at_it_exits_0():
    assert follow_exit_code(document(3, 1), 0.75) == 0
    assert follow_exit_code(document(3, 1), 0.76) == 1
    assert follow_exit_code(document(0, 0), 0.0) == 1  # null pass rate


def test_a_failed_run_exits_3_whatever_its_lanes_say():
    doc = document(3, 0)
    doc["run"]["status"] = "failed"
    assert follow_exit_code(doc, 0.0) == 3


def test_infra_and_config_errors_exit_3_before_a_low_pass_rate_exits_1():
    """First match wins: 3 (a case still infra_error or config_error) comes before 1."""
    for category in ("infra_error", "config_error"):
        doc = document(0, 2)  # pass rate 0.0: below any --fail-under but 0
        doc["lanes"][0]["counts"][category] = 1
        assert follow_exit_code(doc, 1.0) == 3
        assert follow_exit_code(doc, 0.0) == 3


def test_every_lane_counts_for_exit_1():
    doc = document(2, 0)
    doc["lanes"].append(document(1, 1)["lanes"][0])  # the second lane: pass rate 0.5
    assert follow_exit_code(doc, 0.5) == 0
    assert follow_exit_code(doc, 0.6) == 1
    assert follow_exit_code(doc, 1.0) == 1
