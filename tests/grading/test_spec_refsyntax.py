"""Evidence-reference syntax (pack-format §8) and the JSON path subset (grading.md §3.2)."""

from __future__ import annotations

import re

import pytest

from grading.engine.refsyntax import (
    REFERENCE_JSON_PATTERN,
    JsonPathSyntaxError,
    RefKind,
    RefSyntaxError,
    is_supported_reference,
    parse_json_path,
    parse_reference,
)

VALID = [
    ("final_output", RefKind.FINAL_OUTPUT, None, ()),
    ("run.final_output", RefKind.FINAL_OUTPUT, None, ()),
    ("challenge_input", RefKind.CHALLENGE_INPUT, None, ()),
    ("case.payload", RefKind.CASE_PAYLOAD, None, ()),
    ("case.payload.items.0.id", RefKind.CASE_PAYLOAD, None, ("items", "0", "id")),
    ("case.inputs.question", RefKind.CASE_INPUT, "question", ()),
    ("case.inputs.doc.title", RefKind.CASE_INPUT, "doc", ("title",)),
    ("case.expectations.result", RefKind.CASE_EXPECTATION, "result", ()),
    ("artifact.invoices", RefKind.ARTIFACT, "invoices", ()),
    ("artifact.invoices.content", RefKind.ARTIFACT, "invoices", ("content",)),
    ("file:report", RefKind.FILE, "report", ()),
    ("transcript.full", RefKind.TRANSCRIPT, "full", ()),
    ("transcript.from_mismatch", RefKind.TRANSCRIPT, "from_mismatch", ()),
    ("turn.expectations", RefKind.TRANSCRIPT, "turn.expectations", ()),
    ("transcript.last_n:3", RefKind.TRANSCRIPT, "last_n", ()),
    ("tool_calls", RefKind.TOOL_CALLS, None, ()),
    ("literal:", RefKind.LITERAL, None, ()),
]

INVALID = [
    "output",
    "",
    "   ",
    "case.payload.",
    "case.payload..a",
    "case.payload.a. .b",
    "case.inputs",
    "case.inputs.",
    "case.expectations",
    "artifact",
    "artifact.",
    "file:",
    "file:   ",
    "transcript.last_n:0",
    "transcript.last_n:-1",
    "transcript.last_n:x",
    "transcript",
    "Final_Output",
]


@pytest.mark.parametrize(("text", "kind", "name", "path"), VALID)
def test_it_classifies_every_supported_reference(text, kind, name, path):
    ref = parse_reference(text)
    assert (ref.kind, ref.name, ref.path) == (kind, name, path)


@pytest.mark.parametrize("text", INVALID)
def test_it_rejects_unsupported_references(text):
    with pytest.raises(RefSyntaxError):
        parse_reference(text)
    assert not is_supported_reference(text)


def test_it_trims_the_reference_before_checking_it():
    ref = parse_reference("  case.payload.question \n")
    assert ref.text == "case.payload.question"


def test_a_literal_keeps_everything_after_the_first_colon_but_loses_trailing_spaces():
    assert parse_reference("literal:a: b  ").literal == "a: b"
    assert parse_reference(r"literal:(\w+) \1").literal == r"(\w+) \1"


def test_a_file_reference_names_the_check():
    assert parse_reference("file: report").name == "report"


def test_last_n_holds_n():
    assert parse_reference("transcript.last_n:12").last_n == 12


def test_case_data_kinds_are_flagged():
    assert parse_reference("case.payload").is_case_data
    assert parse_reference("artifact.a").is_case_data
    assert parse_reference("challenge_input").is_case_data
    assert not parse_reference("final_output").is_case_data
    assert not parse_reference("literal:x").is_case_data


def test_it_rejects_non_strings():
    assert not is_supported_reference(3)
    assert not is_supported_reference(None)


@pytest.mark.parametrize(
    "text", [item[0] for item in VALID] + ["  final_output  ", "literal:x\ny", "file: a b"]
)
def test_the_json_schema_pattern_accepts_every_valid_reference(text):
    assert re.search(REFERENCE_JSON_PATTERN, text)


@pytest.mark.parametrize("text", INVALID)
def test_the_json_schema_pattern_rejects_what_the_parser_rejects(text):
    assert not re.search(REFERENCE_JSON_PATTERN, text)


@pytest.mark.parametrize(
    ("path", "steps"),
    [
        ("$", ()),
        ("$.total", ("total",)),
        ("$.items[1].id", ("items", 1, "id")),
        ("$['a b']", ("a b",)),
        ('$["x"][0]', ("x", 0)),
        ("$[name]", ("name",)),
        ("$.a-b_c", ("a-b_c",)),
        (" $.a ", ("a",)),
    ],
)
def test_it_parses_the_json_path_subset(path, steps):
    assert parse_json_path(path) == steps


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("$.*", "wildcards"),
        ("$[*]", "wildcards"),
        ("$..a", "recursive descent"),
        ("$[1:2]", "slices"),
        ("$[?(@.a > 1)]", "filters"),
        ("$[-1]", "negative"),
        ("$[0,1]", "unions"),
        ("total", r"starts with \$"),
        ("$.", "missing name"),
        ("$[", "unterminated"),
        ("$['a'", "unterminated"),
    ],
)
def test_it_rejects_json_path_syntax_outside_the_subset(path, reason):
    with pytest.raises(JsonPathSyntaxError, match=reason):
        parse_json_path(path)
