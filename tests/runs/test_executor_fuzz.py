"""Fuzzing the executors with arbitrary reply bodies over a real socket: whatever an agent
answers, the attempt ends ok (with evidence the writer can store) or config_error with a
message; never an internal error (a crash of ours, runs.executors.attempts' last net)."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from runs.executors import AttemptCategory
from runs.recording import evidence_document
from runs.storable import storable_json
from tests.fakes.agent_server import raw
from tests.fuzzing import fuzz_settings
from tests.runs.test_executors import SECRET, agent, chat_target, execute, make_request, target  # noqa: F401

text = st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=()), max_size=10)
scalars = st.none() | st.booleans() | st.integers() | st.floats() | text
values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(text, children, max_size=3),
    max_leaves=8,
)


def _maybe(strategy):
    return st.one_of(strategy, values)  # the right shape, or anything


tool_call = st.fixed_dictionaries(
    {},
    optional={
        "name": _maybe(text),
        "args": _maybe(st.dictionaries(text, values, max_size=2) | text),
        "result": values,
        "status": _maybe(st.sampled_from(["ok", "error"])),
        "id": values,
        "function": _maybe(
            st.fixed_dictionaries({}, optional={"name": _maybe(text), "arguments": _maybe(text)})
        ),
        "type": values,
        "attributes": values,
    },
)
message = st.fixed_dictionaries(
    {}, optional={"role": _maybe(st.sampled_from(["user", "assistant", "tool", "system"])), "content": values}
)
hosted_reply = st.fixed_dictionaries(
    {},
    optional={
        "final_output": values,
        "tool_calls": _maybe(st.lists(_maybe(tool_call), max_size=3)),
        "invocations": _maybe(st.lists(values, max_size=2)),
        "messages": _maybe(st.lists(_maybe(message), max_size=3)),
        "metrics": _maybe(
            st.dictionaries(st.sampled_from(["input_tokens", "output_tokens", "cost_usd", "model"]), values)
        ),
        "files": _maybe(st.dictionaries(text, values, max_size=2)),
        "tasks": values,
        "resolution": values,
        "limit_hit": values,
        "execution_error": values,
        "user_notes": values,
    },
)
chat_reply = st.fixed_dictionaries(
    {},
    optional={
        "choices": _maybe(
            st.lists(
                _maybe(
                    st.fixed_dictionaries(
                        {},
                        optional={
                            "message": _maybe(
                                st.fixed_dictionaries(
                                    {},
                                    optional={
                                        "content": _maybe(st.lists(values, max_size=2) | text),
                                        "tool_calls": _maybe(st.lists(_maybe(tool_call), max_size=2)),
                                    },
                                )
                            ),
                            "finish_reason": values,
                        },
                    )
                ),
                max_size=2,
            )
        ),
        "usage": _maybe(
            st.dictionaries(st.sampled_from(["prompt_tokens", "completion_tokens", "total_tokens"]), values)
        ),
        "model": values,
        "error": values,
    },
)
SETTINGS = fuzz_settings(40)


def _check(outcome):
    assert outcome.category in (AttemptCategory.OK, AttemptCategory.CONFIG_ERROR), outcome
    assert outcome.error_code != "internal_error", outcome.error
    if outcome.category == AttemptCategory.OK:
        assert outcome.evidence is not None
        storable_json(evidence_document(outcome.response or {}, outcome.evidence))
    else:
        assert outcome.error


def test_any_hosted_http_reply_is_ok_or_a_config_error(agent):  # noqa: F811
    @SETTINGS
    @given(hosted_reply)
    def check(reply):
        agent.default = raw(json.dumps(reply))
        _check(execute(make_request(target(agent.url))))

    check()


def test_any_chat_reply_is_ok_or_a_config_error(agent):  # noqa: F811
    @SETTINGS
    @given(chat_reply)
    def check(reply):
        agent.default = raw(json.dumps(reply))
        _check(execute(make_request(chat_target(agent))))

    check()
