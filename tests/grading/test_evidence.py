"""evidence_from_response: grading.md §1.1 and the config_error shapes of agent-protocol.md."""

from __future__ import annotations

import base64
import hashlib

import pytest

from grading.engine.evidence import (
    MAX_CASE_FILE_BYTES,
    MAX_FILE_BYTES,
    ProtocolError,
    evidence_from_response,
    normalize_path,
    run_completed_successfully,
    run_failure_count,
)


def test_it_requires_final_output():
    with pytest.raises(ProtocolError, match="final_output"):
        evidence_from_response({"messages": []})


def test_it_refuses_a_body_that_is_not_an_object():
    with pytest.raises(ProtocolError):
        evidence_from_response(["final_output"])  # type: ignore[arg-type]


def test_it_refuses_invocations_with_non_empty_top_level_tool_calls():
    with pytest.raises(ProtocolError, match="tool_calls"):
        evidence_from_response({"final_output": "", "invocations": [], "tool_calls": [{"name": "x"}]})


def test_an_empty_top_level_tool_calls_beside_invocations_is_fine():
    ev = evidence_from_response(
        {"final_output": "", "invocations": [{"tool_calls": [{"name": "a"}]}], "tool_calls": []}
    )
    assert [c.name for c in ev.tool_calls] == ["a"]


@pytest.mark.parametrize(
    "response",
    [
        {"final_output": "", "tool_calls": "nope"},
        {"final_output": "", "tool_calls": [{"args": {}}]},
        {"final_output": "", "messages": [{"content": "no role"}]},
        {"final_output": "", "files": ["a.txt"]},
        {"final_output": "", "files": {"a.bin": {"content_base64": "***"}}},
        {"final_output": "", "tasks": {"a": 1}},
        {"final_output": "", "resolution": "done"},
        {"final_output": "", "invocations": [{"tool_calls": {}}]},
    ],
)
def test_wrong_shapes_are_protocol_errors(response):
    with pytest.raises(ProtocolError):
        evidence_from_response(response)


def test_json_final_output_becomes_canonical_text():
    ev = evidence_from_response({"final_output": {"b": 168.0, "a": "é"}})
    assert ev.final_output == '{"a":"é","b":168}'
    assert ev.final_output_value == {"b": 168.0, "a": "é"}


def test_null_final_output_is_empty_text():
    assert evidence_from_response({"final_output": None}).final_output == ""


def test_absent_messages_are_the_rendered_prompt_and_final_output():
    ev = evidence_from_response(
        {"final_output": "42"}, rendered_instructions="What?", system_prompt="Be brief"
    )
    assert [(m.role, m.content) for m in ev.messages] == [
        ("system", "Be brief"),
        ("user", "What?"),
        ("assistant", "42"),
    ]


def test_absent_invocations_make_one_implicit_invocation_holding_every_call():
    ev = evidence_from_response({"final_output": "x", "tool_calls": [{"name": "a"}, {"name": "b"}]})
    assert len(ev.invocations) == 1
    assert ev.invocations[0].id == "0"
    assert ev.invocations[0].tool_call_indexes == [0, 1]


def test_zero_calls_still_give_one_invocation():
    ev = evidence_from_response({"final_output": "x"})
    assert len(ev.invocations) == 1 and ev.invocations[0].tool_call_indexes == []


def test_explicit_empty_invocations_mean_zero_invocations():
    assert evidence_from_response({"final_output": "x", "invocations": []}).invocations == []


def test_invocation_ids_and_a_case_wide_call_index():
    ev = evidence_from_response(
        {
            "final_output": "x",
            "invocations": [
                {"id": "turn-a", "user_content": "hi", "tool_calls": [{"name": "a"}, {"name": "b"}]},
                {"tool_calls": [{"name": "c"}], "final_response": {"ok": True}},
            ],
        }
    )
    assert [i.id for i in ev.invocations] == ["turn-a", "1"]
    assert ev.invocations[1].tool_call_indexes == [2]
    assert ev.invocations[1].final_response == '{"ok":true}'
    assert [c.index for c in ev.tool_calls] == [0, 1, 2]


def test_unparseable_args_become_empty_with_the_original_kept():
    ev = evidence_from_response(
        {
            "final_output": "",
            "tool_calls": [{"name": "a", "args": "{not json"}, {"name": "b", "args": '{"x": 1}'}],
        }
    )
    assert ev.tool_calls[0].args == {}
    assert ev.tool_calls[0].attributes["args_unparsed"] == "{not json"
    assert ev.tool_calls[1].args == {"x": 1}


def test_call_status_defaults_to_ok():
    ev = evidence_from_response(
        {"final_output": "", "tool_calls": [{"name": "a"}, {"name": "b", "status": "error"}]}
    )
    assert [c.status for c in ev.tool_calls] == ["ok", "error"]


@pytest.mark.parametrize(
    ("reported", "want"),
    [
        (None, "ok"),
        ("", "ok"),
        ("OK", "ok"),
        (" success ", "ok"),
        ("completed", "ok"),
        ("error", "error"),
        ("Failed", "error"),
        ("timeout", "error"),
        ("timed_out", "error"),
        ("cancelled", "error"),
        ("denied", "error"),
        (504, "error"),
    ],
)
def test_an_unknown_call_status_is_not_ok(reported, want):
    # §1.1: status ok | error, default ok (when absent). A call that timed out or was cancelled
    # did not succeed, so it must not be an observed call for the matchers.
    call = {"name": "a"} if reported is None else {"name": "a", "status": reported}
    ev = evidence_from_response({"final_output": "", "tool_calls": [call]})
    assert ev.tool_calls[0].status == want


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        ("./src/a.py", "src/a.py"),
        ("/workspace/src/a.py", "src/a.py"),
        ("src\\win\\b.txt", "src/win/b.txt"),
        ("/etc/passwd", "/etc/passwd"),
        ("././x", "x"),
    ],
)
def test_path_normalisation(raw, want):
    assert normalize_path(raw, "/workspace") == want


def test_files_text_and_base64_with_hash_and_size():
    data = b"\x89PNG\x00\xff"
    ev = evidence_from_response(
        {
            "final_output": "",
            "files": {"./a.txt": "héllo", "img.png": {"content_base64": base64.b64encode(data).decode()}},
        }
    )
    a = ev.files["a.txt"]
    assert a.content == "héllo" and a.size == len("héllo".encode()) and not a.truncated
    assert a.sha256 == hashlib.sha256("héllo".encode()).hexdigest()
    img = ev.files["img.png"]
    assert img.content is None and img.content_bytes == data


def test_files_over_one_mebibyte_are_truncated_and_flagged():
    big = "x" * (MAX_FILE_BYTES + 10)
    ev = evidence_from_response({"final_output": "", "files": {"big.txt": big}})
    f = ev.files["big.txt"]
    assert f.truncated and len(f.content) == MAX_FILE_BYTES and f.size == MAX_FILE_BYTES + 10


def test_the_case_budget_of_ten_mebibytes_truncates_later_files():
    files = {f"f{i}.txt": "y" * MAX_FILE_BYTES for i in range(11)}
    ev = evidence_from_response({"final_output": "", "files": files})
    kept = sum(len(f.content or "") for f in ev.files.values())
    assert kept == MAX_CASE_FILE_BYTES
    assert ev.files["f10.txt"].truncated and ev.files["f10.txt"].content == ""


def test_tasks_absent_are_none_and_explicit_empty_are_zero():
    assert evidence_from_response({"final_output": ""}).tasks is None
    assert evidence_from_response({"final_output": "", "tasks": []}).tasks == []


def test_black_box_makes_channels_unavailable_and_never_fabricates():
    ev = evidence_from_response(
        {
            "final_output": "x",
            "tool_calls": [{"name": "a"}],
            "files": {"a": "b"},
            "tasks": [],
            "user_notes": "n",
        },
        evidence_level="black_box",
    )
    assert (
        not ev.channels.tool_calls
        and not ev.channels.files
        and not ev.channels.tasks
        and not ev.channels.user_notes
    )
    assert ev.tool_calls == [] and ev.files == {} and ev.tasks is None and ev.user_notes == ""
    assert ev.channels.messages and ev.channels.resolution


def test_openai_chat_has_no_files_channel():
    ev = evidence_from_response({"final_output": "x", "files": {"a": "b"}}, deployment_kind="openai_chat")
    assert not ev.channels.files and ev.files == {}
    assert ev.channels.tool_calls


def test_metrics_and_reliability_figures():
    ev = evidence_from_response(
        {
            "final_output": "x",
            "metrics": {"input_tokens": 10, "output_tokens": 5, "cost_usd": 0.01},
            "tool_calls": [{"name": "a", "status": "error"}],
            "execution_error": "boom",
        },
        timing={"executor_duration_seconds": 1.5},
    )
    assert ev.metrics.total_tokens == 15
    assert ev.metrics.latency_ms == 1500.0
    assert run_completed_successfully(ev) == 0
    assert run_failure_count(ev) == 2


@pytest.mark.parametrize("reported", [None, "", "  ", False])
def test_an_execution_error_of_false_or_blank_reports_no_error(reported):
    # agent-protocol.md: execution_error is the agent reporting it could not finish.
    # "execution_error": false was read as the error "false": the case counted as the
    # agent's failure (reliability, job status) though it said it had none.
    ev = evidence_from_response({"final_output": "x", "execution_error": reported})
    assert ev.execution_error is None
    assert run_completed_successfully(ev) == 1 and run_failure_count(ev) == 0


@pytest.mark.parametrize(
    ("reported", "kept"), [("boom", "boom"), (True, "true"), ({"code": 7}, '{"code":7}')]
)
def test_any_other_execution_error_is_the_agents_report(reported, kept):
    ev = evidence_from_response({"final_output": "x", "execution_error": reported})
    assert ev.execution_error == kept
    assert run_completed_successfully(ev) == 0


@pytest.mark.parametrize(
    ("reported", "count"),
    [
        (7, 7),
        (7.0, 7),
        ("7", 7),
        ("7.0", 7),
        (1.9, None),
        ("1.9", None),
        (-1, None),
        (True, None),
        ("x", None),
    ],
)
def test_a_token_count_is_a_whole_number_or_not_reported(reported, count):
    # 1.9 was cut to 1, a count nobody reported.
    ev = evidence_from_response({"final_output": "x", "metrics": {"input_tokens": reported}})
    assert ev.metrics.input_tokens == count
