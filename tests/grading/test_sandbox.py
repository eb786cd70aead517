"""code_execution and its bubblewrap sandbox (grading.md §3.7). Starts real processes."""

from __future__ import annotations

import shutil

import pytest

from grading.engine import evidence_from_response, grade_case
from grading.engine.sandbox import run_sandboxed
from grading.engine.types import CaseDef, GradeContext
from grading.engine.validators.code_execution import parse_counts, score_counts

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


@pytest.mark.parametrize(
    ("stdout", "counts"),
    [
        (
            'noise\n{"passed": 3, "failed": 1, "errors": 0, "total": 4}\n',
            {"passed": 3, "failed": 1, "errors": 0, "total": 4},
        ),
        (
            '<testsuite name="s" tests="5" failures="1" errors="1" skipped="1">',
            {"passed": 2, "failed": 1, "errors": 1, "total": 4},
        ),
        (
            "==== 1 failed, 4 passed, 1 skipped in 0.12s ====",
            {"passed": 4, "failed": 1, "errors": 0, "total": 5},
        ),
        ("===== 3 passed in 0.01s =====", {"passed": 3, "failed": 0, "errors": 0, "total": 3}),
        (
            "Ran 5 tests in 0.001s\n\nFAILED (failures=1, errors=1)",
            {"passed": 3, "failed": 1, "errors": 1, "total": 5},
        ),
        ("Ran 2 tests in 0.001s\n\nOK", {"passed": 2, "failed": 0, "errors": 0, "total": 2}),
        ("Tests:       1 failed, 9 passed, 10 total", {"passed": 9, "failed": 1, "errors": 0, "total": 10}),
        (" Tests  2 failed | 3 passed (5)", {"passed": 3, "failed": 2, "errors": 0, "total": 5}),
        (
            "test result: ok. 3 passed; 0 failed; 0 ignored\ntest result: FAILED. 1 passed; 2 failed;",
            {"passed": 4, "failed": 2, "errors": 0, "total": 6},
        ),
        (
            "=== RUN TestA\n--- PASS: TestA (0.00s)\n--- FAIL: TestB (0.00s)\nFAIL",
            {"passed": 1, "failed": 1, "errors": 0, "total": 2},
        ),
        ("nothing here", None),
    ],
)
def test_counts_parsing(stdout, counts):
    assert parse_counts(stdout, "") == counts


def test_counts_read_stderr_after_stdout():
    assert parse_counts("no counts", "== 2 passed in 1s ==")["passed"] == 2


def test_scoring_rules():
    c = {"passed": 3, "failed": 1, "errors": 0, "total": 4}
    assert score_counts(c, 1, "fraction_passed")[0] == 0.75
    assert score_counts(c, 1, "all_or_nothing")[0] == 0.0
    assert score_counts(None, 0, "fraction_passed")[0] == 1.0
    assert score_counts(None, 2, "all_or_nothing")[0] == 0.0
    assert score_counts({"passed": 0, "failed": 0, "errors": 0, "total": 0}, 0, "fraction_passed")[0] == 1.0


def test_all_or_nothing_needs_a_test_to_have_run():
    # §3.7: all_or_nothing is 1.0 iff total > 0; reported zero tests do not fall back to exit code 0
    zero = {"passed": 0, "failed": 0, "errors": 0, "total": 0}
    score, how = score_counts(zero, 0, "all_or_nothing")
    assert score == 0.0 and "0 tests" in how
    assert score_counts(parse_counts('{"passed": 0, "total": 0}', ""), 0, "all_or_nothing")[0] == 0.0
    assert score_counts(parse_counts("== 2 deselected in 0.01s ==", ""), 0, "all_or_nothing")[0] == 0.0
    assert score_counts({"passed": 2, "failed": 0, "errors": 0, "total": 2}, 0, "all_or_nothing")[0] == 1.0


def test_a_json_line_without_numeric_counts_is_not_counts():
    assert parse_counts('{"total": null, "passed": "n/a"}', "") is None
    assert score_counts(parse_counts('{"total": null}', ""), 0, "all_or_nothing")[0] == 1.0


@pytest.mark.parametrize(
    "line",
    [
        '{"passed": NaN, "total": 3}',  # json reads these tokens; int() of them raised: the
        '{"passed": Infinity}',  # validator crashed (ERROR) on the agent's code output
        '{"passed": 1e400, "total": 3}',
        '{"passed": 2, "failed": -1}',  # a negative count made 2 of 1 pass: score 1.0
        '{"passed": 3, "failed": 0, "total": 2}',  # more passed than ran
        '{"passed": 1.5, "total": 2}',  # a fraction of a test
        '{"passed": true, "total": 2}',  # a boolean is no count
    ],
)
def test_a_json_line_whose_counts_are_not_non_negative_whole_numbers_is_not_counts(line):
    # §3.7: counts are test counts; such a line is not a report, and the next source decides
    assert parse_counts(line, "") is None
    assert parse_counts(line + "\n== 1 failed, 1 passed in 0.1s ==", "") == {
        "passed": 1,
        "failed": 1,
        "errors": 0,
        "total": 2,
    }
    assert parse_counts(line, "Ran 2 tests in 0.001s\n\nOK")["passed"] == 2
    assert parse_counts('{"passed": 3.0, "failed": 1, "total": 4}', "")["passed"] == 3  # whole floats count


SPEC_BASE = {"post_execution_checks": [{"key": "sol", "type": "file_capture", "path": "solution.py"}]}
TEST_PY = "from solution import add\nr = [add(1, 2) == 3, add(2, 2) == 4, add(0, 0) == 1]\nimport json\nprint(json.dumps({'passed': sum(r), 'failed': len(r) - sum(r), 'total': len(r)}))\n"


def code_grade(config: dict, files: dict, **kw):
    spec = {
        **SPEC_BASE,
        "validators": [{"key": "tests", "type": "code_execution", "target": "file:sol", "config": config}],
        "scorecard": {"dimensions": ["correctness"], "pass_threshold": 0.0},
    }
    ev = evidence_from_response({"final_output": "done", "files": files}, **kw)
    return grade_case(
        ev, CaseDef("ch", "c", payload={"test": "test_add.py"}), spec, context=GradeContext(case_findings=[])
    )


@needs_bwrap
def test_runs_the_command_over_returned_files_and_scores_fraction_passed():
    g = code_grade(
        {"test_command": "python3 {{test}}", "pass_threshold": 0.5},
        {"solution.py": "def add(a, b):\n    return a + b\n", "test_add.py": TEST_PY},
    )
    r = g.expectations[0]
    assert r.status.value == "PASSED", r.evidence
    assert r.score == pytest.approx(2 / 3)
    assert r.details["counts"]["passed"] == 2 and r.details["exit_code"] == 0
    assert "code:tests" in r.evidence_refs and r.gating
    assert r.evidence.startswith("code:tests: score 0.6667")


@needs_bwrap
def test_all_or_nothing_and_exit_code_fallback():
    files = {"solution.py": "x = 1\n"}
    assert code_grade({"test_command": "true"}, files).expectations[0].score == 1.0
    r = code_grade({"test_command": "exit 3", "scoring": "all_or_nothing"}, files).expectations[0]
    assert r.status.value == "FAILED" and r.score == 0.0 and r.details["exit_code"] == 3


@needs_bwrap
def test_all_or_nothing_with_zero_reported_tests_is_failed():
    cmd = """echo '{"passed": 0, "failed": 0, "errors": 0, "total": 0}'"""
    r = code_grade({"test_command": cmd, "scoring": "all_or_nothing"}, {"solution.py": ""}).expectations[0]
    assert r.status.value == "FAILED" and r.score == 0.0 and r.details["exit_code"] == 0, r.evidence


@needs_bwrap
def test_time_limit_is_failed_with_score_zero():
    r = code_grade({"test_command": "sleep 30", "timeout_ms": 500}, {"solution.py": ""}).expectations[0]
    assert r.status.value == "FAILED" and r.score == 0.0 and "time limit" in r.evidence


@needs_bwrap
def test_memory_limit_is_failed_with_score_zero():
    r = code_grade(
        {"test_command": "python3 -c 'x = bytearray(2 * 1024 ** 3)'", "memory_mb": 128}, {"solution.py": ""}
    ).expectations[0]
    assert r.status.value == "FAILED" and r.score == 0.0 and "memory limit" in r.evidence


@needs_bwrap
def test_the_sandbox_has_no_network_a_reduced_environment_and_an_unprivileged_user(monkeypatch):
    monkeypatch.setenv("AGENTCLASH_SECRET_FOR_TEST", "leak")
    res = run_sandboxed(
        {"a.txt": b"x"},
        "id -u; env | sort | cut -d= -f1 | tr '\\n' ' '; echo; (python3 -c 'import socket; socket.create_connection((\"1.1.1.1\", 80), 2)' 2>&1 | tail -1); ls",
        timeout_ms=10000,
    )
    assert res.started, res.error
    lines = res.stdout.splitlines()
    assert lines[0] == "65534"
    assert "AGENTCLASH_SECRET_FOR_TEST" not in res.stdout
    assert set(lines[1].split()) <= {"PATH", "HOME", "LANG", "TMPDIR", "PWD", "SHLVL", "_"}
    assert "Error" in lines[2] or "unreachable" in lines[2]
    assert "a.txt" in lines[3:]


@needs_bwrap
def test_output_is_kept_to_64_kib_per_stream_and_the_directory_is_removed():
    res = run_sandboxed({}, "python3 -c 'print(\"y\" * 500000)'; pwd", timeout_ms=10000)
    assert len(res.stdout.encode()) <= 64 * 1024 and res.stdout.rstrip().endswith("/workspace")


def test_a_sandbox_that_cannot_start_is_an_infra_error(monkeypatch):
    monkeypatch.setenv("AGENTCLASH_BWRAP", "/nonexistent/bwrap")
    r = code_grade({"test_command": "true"}, {"solution.py": ""}).expectations[0]
    assert r.status.value == "ERROR"
    assert r.outcome_class.value == "infra_error" and r.reason_code == "sandbox_unavailable"


def test_a_bwrap_that_fails_to_create_namespaces_is_an_infra_error(tmp_path, monkeypatch):
    fake = tmp_path / "bwrap"
    fake.write_text(
        "#!/bin/sh\necho 'bwrap: Creating new namespace failed: Operation not permitted' >&2\nexit 1\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("AGENTCLASH_BWRAP", str(fake))
    r = code_grade({"test_command": "true"}, {"solution.py": ""}).expectations[0]
    assert r.status.value == "ERROR" and r.reason_code == "sandbox_unavailable"
    assert "namespace" in r.evidence


def test_absent_capture_fails_without_running():
    r = code_grade({"test_command": "true"}, {}).expectations[0]
    assert r.status.value == "FAILED" and r.evidence == "file not returned: solution.py"


@needs_bwrap
@pytest.mark.parametrize(
    "files",
    [{"a": b"file", "a/b": b"under it"}, {"a/b": b"under it", "a": b"file"}, {"x/y": b"1", "x/y/z": b"2"}],
    ids=["file-then-nested", "nested-then-file", "deeper"],
)
def test_returned_files_whose_paths_collide_are_skipped_with_a_note_not_a_crash(files):
    """An agent returning both ``a`` and ``a/b`` made the sandbox raise (FileExistsError or
    IsADirectoryError) while it promises never to raise for what the agent sent."""
    result = run_sandboxed(files, "echo ran", timeout_ms=10_000)
    assert result.started and result.exit_code == 0 and "ran" in result.stdout
    assert len(result.notes) == 1 and "skipped" in result.notes[0]
