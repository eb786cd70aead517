"""File validators and postconditions (grading.md §3.5), through grade_case so the absent,
truncated and unavailable rules of §1.4 apply."""

from __future__ import annotations

import pytest

from grading.engine import evidence_from_response, grade_case
from grading.engine.types import CaseDef, GradeContext

CHECKS = [
    {"key": "out", "type": "file_capture", "path": "out.json"},
    {"key": "tree", "type": "directory_listing", "path": "src"},
    {"key": "big", "type": "file_capture", "path": "big.txt", "max_size_bytes": 10},
]
FILES = {
    "out.json": '{"a": 1, "b": [1, 2]}',
    "src/pkg/__init__.py": "",
    "src/pkg/mod.py": "print('hi')",
    "src/README.md": "readme",
    "big.txt": "0123456789abcdefghij",
}


def one(validator: dict, files: dict | None = FILES, **kw):
    spec = {"validators": [{"key": "v", **validator}], "post_execution_checks": CHECKS}
    response = {"final_output": "done"}
    if files is not None:
        response["files"] = files
    ev = evidence_from_response(response, **kw)
    return grade_case(ev, CaseDef("ch", "c"), spec, context=GradeContext(case_findings=[])).expectations[0]


def test_file_exists_both_ways():
    assert one({"type": "file_exists", "target": "file:out"}).status.value == "PASSED"
    assert one({"type": "file_exists", "target": "file:out"}, files={}).status.value == "FAILED"
    r = one({"type": "file_exists", "target": "file:out", "config": {"must_exist": False}}, files={})
    assert r.status.value == "PASSED"


@pytest.mark.parametrize(
    ("config", "expected", "want"),
    [
        ({}, 'literal:"a": 1', "PASSED"),
        ({"match_mode": "exact"}, 'literal:{"a": 1, "b": [1, 2]}', "PASSED"),
        ({"match_mode": "exact", "ignore_whitespace": True}, 'literal:{"a":  1,  "b": [1,   2]}', "PASSED"),
        ({"match_mode": "regex"}, r'literal:"b":\s*\[1', "PASSED"),
        ({"match_mode": "not_contains"}, "literal:secret", "PASSED"),
        ({"match_mode": "not_contains"}, "literal:a", "FAILED"),
        ({"match_mode": "json_equal"}, 'literal:{"b": [1.0, 2], "a": 1.0}', "PASSED"),
        ({"match_mode": "json_equal"}, 'literal:{"b": [2, 1], "a": 1}', "FAILED"),
    ],
)
def test_file_content_match_modes(config, expected, want):
    r = one({"type": "file_content_match", "target": "file:out", "expected_from": expected, "config": config})
    assert r.status.value == want


def test_file_content_match_on_an_absent_file_fails_with_the_path():
    r = one({"type": "file_content_match", "target": "file:out", "expected_from": "literal:a"}, files={})
    assert r.status.value == "FAILED" and r.evidence == "file not returned: out.json"


def test_json_equal_with_expected_not_json_is_a_pack_error():
    r = one(
        {
            "type": "file_content_match",
            "target": "file:out",
            "expected_from": "literal:{oops",
            "config": {"match_mode": "json_equal"},
        }
    )
    assert r.status.value == "NOT_EVALUATED" and r.outcome_class.value == "pack_error"


def test_file_json_schema():
    schema = {"type": "object", "required": ["a"]}
    assert (
        one({"type": "file_json_schema", "target": "file:out", "config": {"schema": schema}}).status.value
        == "PASSED"
    )
    bad = one(
        {"type": "file_json_schema", "target": "file:out", "config": {"schema": schema}},
        files={"out.json": "nope"},
    )
    assert bad.status.value == "FAILED" and "not JSON" in bad.evidence


def test_directory_structure_lists_offenders():
    ok = one(
        {
            "type": "directory_structure",
            "target": "file:tree",
            "config": {
                "required_files": ["pkg/mod.py", "README.md"],
                "required_directories": ["pkg"],
                "forbidden_files": ["secrets.env"],
            },
        }
    )
    assert ok.status.value == "PASSED"
    bad = one(
        {
            "type": "directory_structure",
            "target": "file:tree",
            "config": {"required_files": ["pkg/missing.py"], "forbidden_files": ["README.md"]},
        }
    )
    assert bad.status.value == "FAILED"
    assert "missing file pkg/missing.py" in bad.evidence and "forbidden README.md present" in bad.evidence


@pytest.mark.parametrize(
    ("config", "files", "want", "evidence"),
    [
        ({"condition": "exists"}, FILES, "PASSED", None),
        ({"condition": "exists"}, {}, "FAILED", None),
        ({"condition": "not_exists"}, {}, "PASSED", None),
        ({"condition": "contains", "value": '"b"'}, FILES, "PASSED", None),
        ({"condition": "contains", "value": "x"}, {}, "FAILED", "file not returned: out.json"),
        ({"condition": "not_contains", "value": "zzz"}, FILES, "PASSED", None),
        ({"condition": "regex_match", "value": r"\[1, \d\]"}, FILES, "PASSED", None),
        ({"condition": "equals", "value": {"a": 1.0, "b": [1, 2]}}, FILES, "PASSED", None),
        ({"condition": "equals", "value": '{"a": 1}'}, FILES, "FAILED", None),
        ({"condition": "json_path_match", "json_path": "$.b[1]", "value": 2}, FILES, "PASSED", None),
        ({"condition": "json_path_match", "json_path": "$.c", "value": 2}, FILES, "FAILED", None),
    ],
)
def test_postcondition(config, files, want, evidence):
    r = one({"type": "postcondition", "target": "file:out", "config": config}, files=files)
    assert r.status.value == want
    assert r.gating  # ground truth for the resolution gate
    if evidence:
        assert r.evidence == evidence


def test_a_failure_on_truncated_capture_is_unavailable_but_a_pass_stands():
    failed = one({"type": "contains", "target": "file:big", "expected_from": "literal:xyz"})
    assert failed.status.value == "UNAVAILABLE" and failed.reason_code == "capture_truncated"
    passed = one({"type": "contains", "target": "file:big", "expected_from": "literal:0123"})
    assert passed.status.value == "PASSED"


def test_file_checks_without_the_files_channel_are_unavailable():
    r = one({"type": "file_exists", "target": "file:out"}, evidence_level="black_box")
    assert r.status.value == "UNAVAILABLE" and r.reason_code == "channel_unavailable"
    r = one({"type": "file_exists", "target": "file:out"}, deployment_kind="openai_chat")
    assert r.status.value == "UNAVAILABLE"


def test_text_validators_on_an_absent_capture_fail():
    r = one({"type": "exact_match", "target": "file:out", "expected_from": "literal:x"}, files={})
    assert r.status.value == "FAILED" and r.evidence == "file not returned: out.json"


def test_directory_structure_reads_config_paths_as_the_returned_paths_are_read():
    # §1.1 normalises returned paths (\ to /, leading ./ removed); the same spelling in the
    # config named a file that was "missing", and a forbidden ./pkg/mod.py was never found.
    tree = {"type": "directory_structure", "target": "file:tree"}
    ok = one(
        {
            **tree,
            "config": {
                "required_files": ["./pkg/mod.py", "pkg//__init__.py", ".\\README.md"],
                "required_directories": ["./pkg/"],
            },
        }
    )
    assert ok.status.value == "PASSED", ok.evidence
    bad = one({**tree, "config": {"forbidden_files": ["./pkg/mod.py", "pkg\\__init__.py"]}})
    assert bad.status.value == "FAILED"
    assert "forbidden ./pkg/mod.py present" in bad.evidence and "pkg\\__init__.py present" in bad.evidence


def test_a_file_json_schema_ref_to_a_url_is_never_fetched():
    # the schema is the pack's: a remote $ref is a pack error, and nothing is requested (the
    # port is closed: a fetch would have been a connection error, an ERROR or a crash)
    schema = {"$ref": "http://127.0.0.1:9/schema.json"}
    r = one({"type": "file_json_schema", "target": "file:out", "config": {"schema": schema}})
    assert (r.status.value, r.outcome_class.value, r.reason_code) == (
        "NOT_EVALUATED",
        "pack_error",
        "invalid_schema",
    ), r.evidence
