"""Evidence references (grading.md §1.3, §1.4), evidence ids (§1.2) and placeholders."""

from __future__ import annotations

import json

import pytest

from grading.engine.evidence import evidence_from_response
from grading.engine.refs import (
    ABSENT,
    CHANNEL_UNAVAILABLE,
    OK,
    REFERENCE_MISSING,
    ReferenceSyntaxError,
    challenge_input_text,
    parse_reference,
    render_template,
    resolve_evidence_id,
    resolve_reference,
)
from grading.engine.types import AssetRef, CaseDef, CaseExpectation, CaseInput, GradeContext

ASSETS = {
    "doc": AssetRef("doc", "docs/readme.md", kind="text", media_type="text/markdown", has_file=True),
    "nofile": AssetRef("nofile", "x.bin"),
    "hidden": AssetRef("hidden", "secret.txt", has_file=True),
    "data": AssetRef("data", "data.json", has_file=True),
}
CONTENT = {
    "doc": b"# Readme",
    "hidden": b"s3cret",
    "data": b'{"rows": [{"v": 3}]}',
    "local": "caf\u00e9".encode(),
}


def loader(asset: AssetRef) -> bytes | None:
    return CONTENT.get(asset.key)


CTX = GradeContext(version_assets=ASSETS, asset_loader=loader)


def make_case(**kw) -> CaseDef:
    defaults = {
        "payload": {"question": {"text": "What is 2+2?"}, "n": [1, {"k": "v"}]},
        "inputs": [
            CaseInput("q", value="2+2"),
            CaseInput("doc", artifact_key="doc"),
            CaseInput("local", path="local.txt"),
            CaseInput("none"),
            CaseInput("data", artifact_key="data"),
        ],
        "expectations": [
            CaseExpectation("answer", value=4),
            CaseExpectation("via_input", source="input:q"),
            CaseExpectation("via_artifact", source="artifact:doc"),
            CaseExpectation("via_key", artifact_key="doc"),
            CaseExpectation("missing_file", artifact_key="nofile"),
        ],
        "assets": [AssetRef("local", "local.txt", has_file=True)],
        "artifact_keys": ["nofile"],
    }
    defaults.update(kw)
    return CaseDef("ch", "c1", **defaults)


EV = evidence_from_response(
    {
        "final_output": "four",
        "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "four"}],
        "tool_calls": [{"name": "calc", "args": {"x": 2}, "result": 4}],
        "files": {"out/a.txt": "hello", "out/sub/b.txt": "b", "top.txt": "t"},
        "user_notes": "line one\nline two",
    }
)
CHECKS = {
    "cap": {"key": "cap", "type": "file_capture", "path": "out/a.txt"},
    "gone": {"key": "gone", "type": "file_capture", "path": "nope.txt"},
    "ls": {"key": "ls", "type": "directory_listing", "path": "out"},
    "small": {"key": "small", "type": "file_capture", "path": "out/a.txt", "max_size_bytes": 3},
}


def res(ref: str, case: CaseDef | None = None, ev=EV):
    return resolve_reference(ref, ev, case or make_case(), CTX, checks=CHECKS)


@pytest.mark.parametrize(
    ("payload", "want"),
    [
        ({"value": "v", "text": "t"}, "v"),
        ({"content": {"text": "nested"}}, "nested"),
        ({"answer": ["only"]}, "only"),
        ({"value": 5, "text": "t"}, "t"),
        ({"value": ["a", "b"]}, '{"value":["a","b"]}'),
        ({}, "{}"),
        ({"other": 1.0}, '{"other":1}'),
    ],
)
def test_challenge_input_key_walk(payload, want):
    assert challenge_input_text(payload) == want


def test_final_output_and_literal():
    assert res("final_output").text == "four"
    assert res("run.final_output").text == "four"
    assert res("literal:a: b ").text == "a: b"  # trimmed reference, text after the first colon


def test_payload_paths_by_key_and_index():
    assert res("case.payload.question.text").text == "What is 2+2?"
    assert res("case.payload.n.1.k").text == "v"
    assert res("case.payload.n.7").state == REFERENCE_MISSING
    assert res("case.payload.nope").state == REFERENCE_MISSING


def test_inputs_value_artifact_key_and_path():
    assert res("case.inputs.q").text == "2+2"
    assert res("case.inputs.doc").text == "# Readme"
    assert res("case.inputs.local").text == "café"
    assert res("case.inputs.none").state == REFERENCE_MISSING
    assert res("case.inputs.absent").state == REFERENCE_MISSING
    assert res("case.inputs.data.rows.0.v").text == "3"


def test_expectations_follow_sources():
    assert res("case.expectations.answer").text == "4"
    assert res("case.expectations.via_input").text == "2+2"
    assert res("case.expectations.via_artifact").text == "# Readme"
    assert res("case.expectations.via_key").text == "# Readme"
    r = res("case.expectations.missing_file")
    assert r.state == REFERENCE_MISSING and "no stored file" in r.message


def test_artifacts_visibility_and_fields():
    assert res("artifact.doc").text == "docs/readme.md"
    assert res("artifact.doc.media_type").text == "text/markdown"
    assert res("artifact.doc.content").text == "# Readme"
    assert res("artifact.local.content").text == "café"
    assert res("artifact.nofile.content").state == REFERENCE_MISSING
    assert res("artifact.hidden").state == REFERENCE_MISSING  # a version asset the case does not name


def test_the_empty_case_resolves_only_challenge_input():
    empty = CaseDef("ch", "ch", empty_case=True)
    assert res("challenge_input", empty).text == "{}"
    assert res("case.payload", empty).state == REFERENCE_MISSING
    assert res("case.inputs.q", empty).state == REFERENCE_MISSING


def test_file_capture_listing_and_absence():
    assert res("file:cap").text == "hello"
    absent = res("file:gone")
    assert absent.state == ABSENT and absent.message == "file not returned: nope.txt"
    listing = json.loads(res("file:ls").text)
    assert listing == {
        "path": "out",
        "entries": [
            {"path": "a.txt", "is_dir": False},
            {"path": "sub", "is_dir": True},
            {"path": "sub/b.txt", "is_dir": False},
        ],
    }
    small = res("file:small")
    assert small.text == "hel" and small.truncated
    assert res("file:undeclared").state == REFERENCE_MISSING


def test_channels_unavailable():
    bb = evidence_from_response({"final_output": "x"}, evidence_level="black_box")
    assert res("file:cap", ev=bb).state == CHANNEL_UNAVAILABLE
    assert res("tool_calls", ev=bb).state == CHANNEL_UNAVAILABLE


def test_tool_calls_and_transcripts():
    assert json.loads(res("tool_calls").text) == [
        {"name": "calc", "args": {"x": 2}, "result": 4, "status": "ok"}
    ]
    assert res("transcript.full").text == "user: hi\nassistant: four"
    assert res("transcript.last_n:1").text == "assistant: four"


@pytest.mark.parametrize(
    "bad", ["case.payload..x", "transcript.last_n:0", "file:  ", "nonsense", "case.inputs."]
)
def test_bad_syntax(bad):
    with pytest.raises(ReferenceSyntaxError):
        parse_reference(bad)
    assert res(bad).state == REFERENCE_MISSING


def test_evidence_ids():
    case = make_case()

    def rid(i, extra=None):
        return resolve_evidence_id(i, EV, case, CTX, extra, checks=CHECKS)

    assert rid("message:1") == "four"
    assert rid("message:9") is None
    assert rid("tool_call:0.args") == '{"x":2}'
    assert rid("tool_call:0.result") == "4"
    assert json.loads(rid("tool_call:0"))["name"] == "calc"
    assert rid("path:./out/a.txt") == "hello"
    assert rid("task:0.summary") == "four"
    assert rid("note:2") == "line two"
    assert rid("note:0") is None
    assert rid("metric:total_tool_calls") == "1"
    assert rid("code:run", {"code:run": "exit code: 0"}) == "exit code: 0"
    assert rid("final_output#1-3") == "ou"
    assert rid("final_output#2-9") is None
    assert rid("case.payload.question.text") == "What is 2+2?"
    assert rid("case.inputs.absent") is None


def test_offsets_count_code_points():
    ev = evidence_from_response({"final_output": "héllo wörld"})
    assert resolve_evidence_id("final_output#6-11", ev, make_case(), CTX) == "wörld"


def test_placeholders_render_payload_and_inputs_inputs_win():
    case = make_case(payload={"q": "payload wins?", "a": {"b": [1.0, 2]}})
    text = "Q={{q}} AB={{ a.b }} missing={{nope}} obj={{a}}"
    assert render_template(text, case) == 'Q=2+2 AB=[1,2] missing={{nope}} obj={"b":[1,2]}'


def test_resolution_states_are_ok_by_default():
    assert res("final_output").state == OK
