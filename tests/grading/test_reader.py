"""The results reader of interfaces.md §5."""

from __future__ import annotations

import json

import pytest

from grading.engine.reader import InvalidResults, read_results
from grading.engine.types import CaseDef, GradeContext

CASES = [
    CaseDef(challenge_key="word-problem", case_key="crates"),
    CaseDef(challenge_key="word-problem", case_key="train"),
    CaseDef(challenge_key="word-problem", case_key="change"),
]


def jsonl(*rows) -> bytes:
    return "\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows).encode() + b"\n"


def test_lines_become_executions_grouped_by_deployment_in_order_of_first_appearance():
    data = jsonl(
        {"case_key": "change", "deployment": "b", "final_output": "1"},
        {"case_key": " train ", "final_output": "2"},
        {"case_key": "crates", "deployment": "b", "final_output": "3", "repetition": 2},
        {"case_key": "crates", "deployment": "b", "final_output": "4"},
        {"case_key": "crates", "challenge_key": "word-problem", "final_output": "5"},
    )
    result = read_results(data, CASES)
    assert result.deployments == ["b", "default"]
    assert [(e.deployment, e.case_key, e.repetition, e.line) for e in result.executions] == [
        ("b", "crates", 1, 4),
        ("b", "crates", 2, 3),
        ("b", "change", 1, 1),
        ("default", "crates", 1, 5),
        ("default", "train", 1, 2),
    ]
    assert result.executions[0].evidence.final_output == "4"
    assert [e.case_key for e in result.for_deployment("default")] == ["crates", "train"]


def test_evidence_is_built_as_a_trace_import_with_the_case_context():
    seen = {}

    def build(response, **options):
        seen.update(options)
        from grading.engine.types import Evidence

        return Evidence(final_output=str(response["final_output"]))

    ctx = GradeContext(rendered_instructions="How many crates?", working_directory="/srv")
    read_results(
        jsonl({"case_key": "crates", "final_output": "7"}),
        CASES,
        contexts={("word-problem", "crates"): ctx},
        build_evidence=build,
    )
    assert seen["deployment_kind"] == "trace_import"
    assert seen["rendered_instructions"] == "How many crates?" and seen["working_directory"] == "/srv"


def test_the_real_evidence_builder_reads_the_response_shape():
    line = {
        "case_key": "crates",
        "final_output": {"answer": 42.0},
        "tool_calls": [{"name": "calc", "args": {"x": 1}}],
    }
    [execution] = read_results(jsonl(line), CASES).executions
    assert execution.evidence.final_output == '{"answer":42}'
    assert [c.name for c in execution.evidence.tool_calls] == ["calc"]


def test_every_bad_line_is_listed_in_one_error():
    data = jsonl(
        "{not json",  # 1
        "[1, 2]",  # 2
        {"case_key": "nope", "final_output": ""},  # 3
        {"case_key": "crates", "final_output": "a"},  # 4 (good)
        {"case_key": "crates", "final_output": "b"},  # 5 duplicate of 4
        {"case_key": "train"},  # 6 no final_output
        {"case_key": "train", "final_output": "x", "invocations": [], "tool_calls": [{"name": "a"}]},  # 7
        {"case_key": "change", "final_output": "x", "repetition": 0},  # 8
        {"case_key": "change", "final_output": "x", "repetition": "2"},  # 9
        {"final_output": "x"},  # 10 no case_key
        {"case_key": "change", "challenge_key": "other", "final_output": "x"},  # 11
        {"case_key": "change", "deployment": "", "final_output": "x"},  # 12
        "",  # blank lines are skipped
        {"case_key": "change", "final_output": "x", "tool_calls": "nope"},  # 14 protocol error
    )
    with pytest.raises(InvalidResults) as info:
        read_results(data, CASES)
    err = info.value
    assert err.code == "invalid_results"
    assert err.message == "12 bad result lines"
    messages = {item["line"]: item["message"] for item in err.lines}
    assert sorted(messages) == [1, 2, 3, 5, 6, 7, 8, 9, 10, 11, 12, 14]
    assert messages[1].startswith("not JSON")
    assert messages[2] == "not a JSON object"
    assert messages[3] == "case 'nope' is not in the input set"
    assert (
        "duplicate result for deployment 'default', case 'crates', repetition 1 (first on line 4)"
        in messages[5]
    )
    assert messages[6] == "final_output is required"
    assert "both invocations and a non-empty tool_calls" in messages[7]
    assert messages[8].startswith("repetition must be a positive integer")
    assert messages[9].startswith("repetition must be a positive integer")
    assert messages[10] == "case_key is required"
    assert "challenge_key 'other' does not match case 'change'" in messages[11]
    assert messages[12] == "deployment must be a non-empty string"
    assert messages[14]
    assert err.to_dict() == {
        "error": {"code": "invalid_results", "message": "12 bad result lines", "lines": err.lines}
    }


def test_non_utf8_lines_are_bad_lines():
    with pytest.raises(InvalidResults) as info:
        read_results(b'{"case_key": "crates", "final_output": "\xff"}\n', CASES)
    assert info.value.lines == [{"line": 1, "message": "not UTF-8 text"}]


def test_an_ambiguous_case_key_needs_a_challenge_key():
    cases = [CaseDef(challenge_key="a", case_key="a"), CaseDef(challenge_key="b", case_key="a")]
    with pytest.raises(InvalidResults) as info:
        read_results(jsonl({"case_key": "a", "final_output": ""}), cases)
    assert "ambiguous" in info.value.lines[0]["message"]
    result = read_results(jsonl({"case_key": "a", "challenge_key": "b", "final_output": ""}), cases)
    assert result.executions[0].challenge_key == "b"


def test_an_empty_file_gives_no_executions_and_crlf_and_bom_are_accepted():
    assert read_results(b"", CASES).executions == []
    data = b"\xef\xbb\xbf" + jsonl({"case_key": "crates", "final_output": "x"}).replace(b"\n", b"\r\n")
    assert len(read_results(data, CASES).executions) == 1


def test_a_repetition_beyond_the_bound_is_a_bad_line_not_a_crash():
    """A repetition of 10**30 was read as valid, and the grading.json could not be written
    (orjson refuses integers beyond 64 bits): the CLI ended in a traceback."""
    data = jsonl(
        {"case_key": "crates", "final_output": "a", "repetition": 10**30},
        {"case_key": "train", "final_output": "a", "repetition": 1_000_001},
        {"case_key": "change", "final_output": "a", "repetition": 1_000_000},
        {"case_key": "crates", "final_output": "a", "repetition": "x" * 500},
    )
    with pytest.raises(InvalidResults) as info:
        read_results(data, CASES)
    messages = {item["line"]: item["message"] for item in info.value.lines}
    assert messages == {
        1: "repetition must be at most 1,000,000, got 1000000000000000000000000000000",
        2: "repetition must be at most 1,000,000, got 1000001",
        4: 'repetition must be a positive integer, got "' + "x" * 58 + "…",
    }


def test_a_null_invocations_beside_tool_calls_is_read_as_a_hosted_agents_reply_is():
    # agent-protocol.md: one response shape for a hosted_http body and a trace-import line.
    # "invocations": null (not grouped) beside tool_calls was a bad line here and an ok reply
    # from a hosted agent, so an import of what the same agent answered was refused.
    line = {"case_key": "crates", "final_output": "x", "invocations": None, "tool_calls": [{"name": "a"}]}
    [execution] = read_results(jsonl(line), CASES).executions
    assert [c.name for c in execution.evidence.tool_calls] == ["a"]


def test_every_bad_line_names_the_field_at_fault():
    """The bad lines said what was wrong but not where: a CI job could not point at the
    field (the trace-import API documents ``field``; only its own checks set it)."""
    data = jsonl(
        "{not json",  # 1: no field
        {"case_key": "nope", "final_output": ""},  # 2
        {"case_key": "crates", "final_output": "a"},  # 3 (good)
        {"case_key": "crates", "final_output": "b"},  # 4 duplicate
        {"case_key": "train"},  # 5
        {"case_key": "train", "final_output": "x", "invocations": [], "tool_calls": [{"name": "a"}]},  # 6
        {"case_key": "change", "final_output": "x", "repetition": 0},  # 7
        {"final_output": "x"},  # 8
        {"case_key": "change", "challenge_key": "other", "final_output": "x"},  # 9
        {"case_key": "change", "deployment": "", "final_output": "x"},  # 10
        {"case_key": "change", "final_output": "x", "messages": [{"role": 3}]},  # 11
        {"case_key": 7},  # 12: two fields, the first named, both in the message
    )
    with pytest.raises(InvalidResults) as info:
        read_results(data, CASES)
    fields = {item["line"]: item.get("field") for item in info.value.lines}
    assert fields == {
        1: None,
        2: "case_key",
        4: "case_key",
        5: "final_output",
        6: "tool_calls",
        7: "repetition",
        8: "case_key",
        9: "challenge_key",
        10: "deployment",
        11: "messages[0].role",
        12: "case_key",
    }
    assert info.value.lines[-1]["message"] == "case_key must be a non-empty string; final_output is required"


def test_a_long_key_is_cut_in_the_message():
    """A case_key of a megabyte came back whole in its line's message (and again for every
    such line), so the error body grew with the bad input."""
    long_key = "k" * 1_000_000
    with pytest.raises(InvalidResults) as info:
        read_results(jsonl({"case_key": long_key, "challenge_key": long_key, "final_output": ""}), CASES)
    assert len(info.value.lines[0]["message"]) < 300


def test_a_key_differing_only_in_case_or_normalisation_is_refused_with_the_real_key():
    """Keys match exactly (interfaces.md §5); a key in another case or Unicode form was
    refused as unknown with nothing to say which case the line meant."""
    import unicodedata

    cases = [*CASES, CaseDef(challenge_key="word-problem", case_key="caf\u00e9")]
    data = jsonl(
        {"case_key": "Crates", "final_output": ""},
        {"case_key": unicodedata.normalize("NFD", "caf\u00e9"), "final_output": ""},
        {"case_key": "CAF\u00c9", "final_output": ""},
        {"case_key": "boats", "final_output": ""},
    )
    with pytest.raises(InvalidResults) as info:
        read_results(data, cases)
    messages = [item["message"] for item in info.value.lines]
    assert messages[0] == "case 'Crates' is not in the input set (keys match exactly: did you mean 'crates'?)"
    assert messages[1].endswith("(keys match exactly: did you mean 'café'?)")
    assert messages[2].endswith("(keys match exactly: did you mean 'café'?)")
    assert messages[3] == "case 'boats' is not in the input set"
