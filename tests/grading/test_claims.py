"""The deterministic claims ledger (grading.md §8)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from grading.engine.claims import (
    MAX_CLAIMS,
    claim_to_dict,
    extract_claims,
    parse_test_counts,
    split_sentences,
)
from grading.engine.types import Channels, Evidence, FileEntry, GradeContext, Message, Task, ToolCall

CTX = GradeContext()


def bash(index: int, command: str, result: object = None, status: str = "ok") -> ToolCall:
    return ToolCall(index=index, name="Bash", args={"command": command}, result=result, status=status)


def claims_of(text: str, calls=(), files=None, channels=None, spec=None, **kw):
    ev = Evidence(
        final_output=text,
        tool_calls=list(calls),
        files=files or {},
        channels=channels or Channels(),
        **kw,
    )
    return extract_claims(ev, spec, CTX)


def only(claims, kind):
    found = [c for c in claims if c.kind == kind]
    assert len(found) == 1, claims
    return found[0]


# -- sentences -----------------------------------------------------------------


def test_sentences_split_at_punctuation_before_whitespace_line_breaks_and_bullets():
    text = "Done. Saved report.json! Next?\n- first item\n* second item\n1. third"
    sentences = [s.text for s in split_sentences(text)]
    assert sentences == ["Done.", "Saved report.json!", "Next?", "first item", "second item", "third"]


def test_sentence_spans_are_code_point_offsets_into_the_source():
    text = "Résumé ✓ done. Wrote `ü.txt`."
    for s in split_sentences(text):
        assert text[s.start : s.end] == s.text


def test_fenced_code_is_skipped():
    text = "Before.\n```bash\nI ran the tests\n```\nAfter.\n~~~\nran the tests\n~~~"
    assert [s.text for s in split_sentences(text)] == ["Before.", "After."]


def test_claims_inside_fenced_code_are_not_extracted():
    assert claims_of("```\nI ran the tests.\n```") == []


# -- tests_ran -----------------------------------------------------------------


def test_tests_ran_is_verified_by_a_shell_call_that_runs_a_test_runner():
    c = only(
        claims_of("I ran the test suite.", [bash(0, "ls"), bash(1, "python -m pytest -q tests/")]),
        "tests_ran",
    )
    assert c.verified is True
    assert c.type == "process" and c.source == "deterministic"
    assert c.evidence_refs == ["tool_call:1"]
    assert "python -m pytest -q tests/" in c.evidence


@pytest.mark.parametrize(
    "command",
    [
        "pytest",
        "python3 -m unittest discover",
        "tox -e py311",
        "npm test",
        "yarn test",
        "pnpm run test",
        "npx jest --ci",
        "vitest run",
        "go test ./...",
        "cargo test",
        "mvn -q test",
        "./gradlew test",
        "make test",
        "bundle exec rspec",
        "vendor/bin/phpunit",
        "dotnet test",
    ],
)
def test_every_listed_test_runner_is_recognised(command):
    assert only(claims_of("Executed the tests.", [bash(0, command)]), "tests_ran").verified is True


def test_tests_ran_is_contradicted_when_no_call_runs_tests():
    c = only(claims_of("I ran the tests.", [bash(0, "ls -la")]), "tests_ran")
    assert c.verified is False
    assert "no shell call runs a test runner" in c.evidence


def test_tests_ran_is_unverifiable_without_the_tool_calls_channel():
    c = only(claims_of("I ran the tests.", channels=Channels(tool_calls=False)), "tests_ran")
    assert c.verified is None


def test_shell_tool_names_come_from_the_spec():
    spec = SimpleNamespace(rules=SimpleNamespace(shell_tool_names=["sh"]), claims=None)
    call = ToolCall(index=0, name="sh", args={"cmd": "pytest"})
    assert only(claims_of("I ran the tests.", [call], spec=spec), "tests_ran").verified is True
    assert only(claims_of("I ran the tests.", [bash(0, "pytest")], spec=spec), "tests_ran").verified is False


@pytest.mark.parametrize(
    "text",
    [
        "I did not run the tests.",
        "I couldn't run the tests.",
        "I failed to run the tests.",
        "I was unable to run the tests.",
        "I have not run the tests.",
    ],
)
def test_a_negation_before_the_verb_yields_no_claim(text):
    assert claims_of(text, [bash(0, "pytest")]) == []


# -- tests_pass ----------------------------------------------------------------


def test_all_n_tests_pass_is_verified_by_the_last_test_run_output():
    calls = [
        bash(0, "pytest", "1 failed, 4 passed in 0.2s"),
        bash(1, "pytest", "===== 5 passed in 0.1s ====="),
    ]
    c = only(claims_of("All five tests pass.", calls), "tests_pass")
    assert c.verified is True and c.type == "factual"
    assert c.evidence_refs == ["tool_call:1.result"]
    assert "5 passed in 0.1s" in c.evidence


def test_tests_pass_is_contradicted_by_a_failure():
    c = only(claims_of("All tests passed.", [bash(0, "pytest", "2 failed, 3 passed in 1s")]), "tests_pass")
    assert c.verified is False
    assert "2 failed" in c.evidence


def test_tests_pass_is_contradicted_by_an_error():
    result = "Ran 4 tests in 0.01s\n\nFAILED (errors=1)"
    c = only(claims_of("Tests are passing.", [bash(0, "python -m unittest", result)]), "tests_pass")
    assert c.verified is False


def test_tests_pass_is_contradicted_by_a_different_count():
    c = only(claims_of("12 tests passed.", [bash(0, "pytest", "10 passed in 1s")]), "tests_pass")
    assert c.verified is False
    assert "10 passed, not 12" in c.evidence


def test_tests_pass_is_unverifiable_when_no_counts_exist_anywhere():
    c = only(claims_of("All tests pass.", [bash(0, "pytest", "exit status 0")]), "tests_pass")
    assert c.verified is None


def test_tests_pass_falls_back_to_a_code_execution_record():
    ev = Evidence(final_output="All 3 tests pass.")
    records = {
        "unit": {"command": "pytest", "exit_code": 0, "counts": {"passed": 3, "failed": 0, "errors": 0}}
    }
    c = only(extract_claims(ev, None, CTX, code_records=records), "tests_pass")
    assert c.verified is True
    assert c.evidence_refs == ["code:unit"]


def test_tests_pass_reads_json_counts_in_a_tool_result():
    call = bash(0, "npm test", {"passed": 4, "failed": 1, "errors": 0, "total": 5})
    assert only(claims_of("All tests pass.", [call]), "tests_pass").verified is False


def test_runner_summaries_are_parsed():
    assert parse_test_counts("Tests:       1 failed, 5 passed, 6 total").failed == 1
    assert parse_test_counts("test result: ok. 7 passed; 0 failed; 0 ignored").passed == 7
    assert parse_test_counts("Ran 3 tests in 0.001s\n\nOK").passed == 3
    go = parse_test_counts("=== RUN   TestA\n--- PASS: TestA (0.00s)\n--- FAIL: TestB (0.00s)")
    assert (go.passed, go.failed) == (1, 1)
    assert parse_test_counts("nothing here") is None


def test_not_all_tests_pass_is_a_negation():
    assert claims_of("Not all tests pass yet.", [bash(0, "pytest", "3 passed")]) == []


# -- file_saved ----------------------------------------------------------------


def test_file_saved_is_verified_by_a_write_call_with_suffix_matching():
    call = ToolCall(index=0, name="Write", args={"file_path": "/workspace/out/report.json", "content": "{}"})
    c = only(claims_of("Saved the results to `report.json`.", [call]), "file_saved")
    assert c.verified is True
    assert c.evidence_refs == ["tool_call:0.args"]
    assert "/workspace/out/report.json" in c.evidence


def test_a_failed_write_call_does_not_count():
    call = ToolCall(index=0, name="Write", args={"file_path": "report.json"}, status="error")
    assert only(claims_of("Wrote report.json.", [call]), "file_saved").verified is False


def test_file_saved_is_verified_by_a_shell_redirect_or_tee():
    redirect = only(claims_of("Wrote out/log.txt.", [bash(0, "make > out/log.txt 2>&1")]), "file_saved")
    assert redirect.verified is True
    tee = only(claims_of("Saved notes.md.", [bash(0, "echo hi | tee -a ./notes.md")]), "file_saved")
    assert tee.verified is True


def test_file_saved_is_verified_by_a_returned_file():
    files = {"out/data.csv": FileEntry(path="out/data.csv", content="a,b", size=3, sha256="x")}
    c = only(claims_of("I created data.csv.", files=files), "file_saved")
    assert c.verified is True
    assert c.evidence_refs == ["path:out/data.csv"]


def test_file_saved_is_contradicted_when_not_returned_and_never_written():
    c = only(claims_of("Saved the summary to summary.md.", [bash(0, "cat README.md")]), "file_saved")
    assert c.verified is False
    assert "summary.md was not returned" in c.evidence


def test_file_saved_is_unverifiable_when_neither_channel_is_available():
    channels = Channels(tool_calls=False, files=False)
    assert only(claims_of("Saved summary.md.", channels=channels), "file_saved").verified is None


def test_write_tool_names_come_from_the_spec():
    spec = SimpleNamespace(claims=SimpleNamespace(write_tool_names=["put_file"]), rules=None)
    call = ToolCall(index=0, name="put_file", args={"path": "a/b.txt"})
    assert only(claims_of("Wrote a/b.txt.", [call], spec=spec), "file_saved").verified is True


def test_every_listed_path_after_the_verb_is_a_claim():
    calls = [ToolCall(index=0, name="Write", args={"path": "src/app.py"})]
    claims = claims_of("Created src/app.py and `tests/test_app.py`.", calls)
    saved = [c for c in claims if c.kind == "file_saved"]
    assert [c.verified for c in saved] == [True, False]


def test_paths_need_a_slash_a_short_extension_or_backticks():
    claims = claims_of("I saved it in the usual place and wrote version 1.2 notes.")
    assert [c for c in claims if c.kind == "file_saved"] == []


def saved_paths(text: str) -> list[str]:
    return [c.evidence.split(" was not returned")[0] for c in claims_of(text) if c.kind == "file_saved"]


@pytest.mark.parametrize(
    ("text", "paths"),
    [
        ("Saved the report to out/report.md.", ["out/report.md"]),
        ("I wrote `src/app.py`.", ["src/app.py"]),
        ("created file notes.txt", ["notes.txt"]),
        ("I created a new file called notes.txt.", ["notes.txt"]),
        ("Wrote the file 'data/out.csv' and b.py.", ["data/out.csv", "b.py"]),
        ("The output has been written to out.json.", ["out.json"]),
        ("I have written the output to out.json.", ["out.json"]),
        ("Saved report.json to disk.", ["report.json"]),
    ],
)
def test_file_saved_names_the_path_that_is_the_verbs_object(text, paths):
    """§8: "saved / wrote / created (to) <path>": the path directly after the verb, after
    "to" (a short object may come first: "the report to"), "the file" or a quote."""
    assert saved_paths(text) == paths


@pytest.mark.parametrize(
    "text",
    [
        "I created a PR that updates config.yaml.",
        "I wrote a summary of the Vue.js docs.",
        "wrote tests for utils.py",
        "created an issue about setup.cfg",
        "saved time by caching x.json",
        "I created a helper that writes to out.json and reads in.json.",
    ],
)
def test_a_path_elsewhere_in_a_save_sentence_is_not_a_file_saved_claim(text):
    """A path that is not the verb's object is no file_saved claim: the case did not fail
    under fail_on_contradicted because "I created a PR that updates config.yaml" was read as
    a claim to have saved config.yaml."""
    assert saved_paths(text) == []


# -- files_created_count -------------------------------------------------------


def test_files_created_count_counts_distinct_paths_of_successful_write_calls():
    calls = [
        ToolCall(index=0, name="Write", args={"file_path": "a.py"}),
        ToolCall(index=1, name="Edit", args={"file_path": "./a.py"}),
        ToolCall(index=2, name="create_file", args={"path": "b.py"}),
        ToolCall(index=3, name="Write", args={"file_path": "c.py"}, status="error"),
    ]
    assert only(claims_of("Created two files.", calls), "files_created_count").verified is True
    c = only(claims_of("I created 3 new files.", calls), "files_created_count")
    assert c.verified is False
    assert "2 distinct paths written, not 3" in c.evidence


def test_files_created_count_is_unverifiable_without_tool_calls():
    c = only(claims_of("Created 3 files.", channels=Channels(tool_calls=False)), "files_created_count")
    assert c.verified is None


# -- command_ran ---------------------------------------------------------------


def test_command_ran_is_verified_when_a_shell_command_contains_it():
    c = only(claims_of("I ran `ruff check .`", [bash(4, "cd src &&  ruff check . --fix")]), "command_ran")
    assert c.verified is True
    assert c.evidence_refs == ["tool_call:4"]


def test_command_ran_is_contradicted_when_no_shell_call_has_it():
    assert only(claims_of("I ran `make lint`.", [bash(0, "make test")]), "command_ran").verified is False


def test_command_ran_is_unverifiable_without_tool_calls():
    c = only(claims_of("I executed `make lint`.", channels=Channels(tool_calls=False)), "command_ran")
    assert c.verified is None


def test_reported_task_commands_count_as_structured_evidence():
    tasks = [Task(executed_commands=["make lint"])]
    c = only(claims_of("I ran `make lint`.", tasks=tasks), "command_ran")
    assert c.verified is True and c.evidence_refs == ["task:0.executed_commands"]


# -- source, matching and limits -----------------------------------------------


def test_claims_come_from_the_last_assistant_message_without_a_final_output():
    messages = [
        Message(index=0, role="assistant", content="I ran the tests."),
        Message(index=1, role="assistant", content="Wrote out.txt."),
    ]
    claims = claims_of("", [bash(0, "pytest")], messages=messages)
    assert [c.kind for c in claims] == ["file_saved"]


def test_matching_is_case_insensitive():
    assert only(claims_of("I RAN THE TESTS.", [bash(0, "pytest")]), "tests_ran").verified is True


def test_claims_carry_ids_spans_and_serialise():
    text = "Intro line\nI ran the tests."
    c = only(claims_of(text, [bash(0, "pytest")]), "tests_ran")
    assert c.id == "c1"
    assert text[c.span[0] : c.span[1]] == c.claim == "I ran the tests."
    d = claim_to_dict(c)
    assert d["span"] == [11, 27] and d["verified"] is True and d["kind"] == "tests_ran"


def test_at_most_fifty_claims_are_kept():
    text = "\n".join(f"Wrote file{i}.txt." for i in range(80))
    claims = claims_of(text)
    assert len(claims) == MAX_CLAIMS
    assert claims[-1].id == "c50"


def test_no_text_means_no_claims():
    assert claims_of("") == []
