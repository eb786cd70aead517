"""A judge provider's error text is kept in the grade (shown on the case page to every member):
a provider or proxy that echoes the API key must not put it there."""

from __future__ import annotations

import asyncio
import json
import socket

import pytest

from agentclash_site.lib.outbound import OutboundClient
from grading.judges.providers import ProviderConfig, ProviderError, complete
from tests.fakes.judge_provider import FakeJudgeProvider, status

KEY = "sk-judge-KEY-do-not-show-5678"


@pytest.mark.parametrize("code", [401, 400, 500])
def test_an_echoed_api_key_is_cut_out_of_the_providers_error(code):
    echo = json.dumps({"error": f"bad request with Authorization: Bearer {KEY}"}).encode()
    with FakeJudgeProvider() as fake:
        fake.default = status(code, echo)
        config = ProviderConfig(
            kind="openai", base_url=fake.base_url, api_key=KEY, allow_private=True, backoff_base_seconds=0.001
        )

        async def go():
            async with OutboundClient() as client:
                await complete(client, config, model="m", system="s", user="u", max_retries=1)

        with pytest.raises(ProviderError) as info:
            asyncio.run(go())
    assert KEY not in str(info.value)
    assert "[redacted]" in str(info.value)


@pytest.mark.parametrize("at", [260, 280, 296])
def test_a_key_echoed_across_the_cut_of_the_error_excerpt_is_not_kept_in_part(at):
    # The excerpt was cut at 300 characters before the key was cut out: a key echoed across
    # the cut was kept up to it ("sk-judge-KEY-do-not-sh...").
    echo = ("x" * at + KEY + " and more").encode()
    with FakeJudgeProvider() as fake:
        fake.default = status(500, echo)
        config = ProviderConfig(
            kind="anthropic",
            base_url=fake.base_url,
            api_key=KEY,
            allow_private=True,
            backoff_base_seconds=0.001,
        )

        async def go():
            async with OutboundClient() as client:
                await complete(client, config, model="m", system="s", user="u", max_retries=0)

        with pytest.raises(ProviderError) as info:
            asyncio.run(go())
    assert KEY[:4] not in str(info.value)


def test_a_200_carrying_a_rate_limit_is_retried_not_an_evaluator_error():
    # A gateway's HTTP 200 with only {"error": {"code": 429}} was "chat completion has no
    # choices" (evaluator_error, never retried): the judge verdict was lost to a failure that
    # passes. It is now retried as a 429 is, and gives up as infra_error.
    limited = json.dumps({"error": {"code": 429, "message": "Rate limit exceeded"}}).encode()
    with FakeJudgeProvider() as fake:
        fake.default = status(200, limited, {"Content-Type": "application/json"})
        config = ProviderConfig(
            kind="openai", base_url=fake.base_url, api_key=KEY, allow_private=True, backoff_base_seconds=0.001
        )

        async def go():
            async with OutboundClient() as client:
                await complete(client, config, model="m", system="s", user="u", max_retries=2)

        with pytest.raises(ProviderError) as info:
            asyncio.run(go())
        assert fake.calls == 3
    assert info.value.outcome_class == "infra_error"
    assert "HTTP 200 with an error 429: Rate limit exceeded" in str(info.value)


def test_a_judge_provider_host_that_does_not_exist_is_not_retried():
    # NXDOMAIN was retried max_retries times with backoff, for a typo that never resolves.
    lookups: list[str] = []

    async def no_such_host(host: str, port: int):  # injected: no DNS traffic
        lookups.append(host)
        raise socket.gaierror(socket.EAI_NONAME, "fake resolver")

    config = ProviderConfig(kind="openai", base_url="https://judge.example.invalid/v1", api_key=KEY)

    async def go():
        async with OutboundClient(getaddrinfo=no_such_host) as client:
            await complete(client, config, model="m", system="s", user="u", max_retries=3)

    with pytest.raises(ProviderError) as info:
        asyncio.run(go())
    assert lookups == ["judge.example.invalid"]
    assert info.value.outcome_class == "infra_error" and info.value.retries == 0
    assert "judge.example.invalid does not resolve" in str(info.value)


def _complete_against(fake, max_retries=2):
    config = ProviderConfig(
        kind="openai", base_url=fake.base_url, api_key=KEY, allow_private=True, backoff_base_seconds=0.001
    )

    async def go():
        async with OutboundClient() as client:
            return await complete(client, config, model="m", system="s", user="u", max_retries=max_retries)

    return asyncio.run(go())


def _choice(content, **extra):
    return {"choices": [{"message": {"role": "assistant", "content": content}, **extra}], "model": "m"}


def test_a_generation_the_gateway_reports_failed_is_retried_not_read_as_the_verdict():
    # OpenRouter answers 200 with finish_reason "error" when the model fails mid-generation;
    # its partial text was parsed as the judge's verdict.
    failed = json.dumps(
        _choice('{"score": 1', finish_reason="error", error={"message": "upstream died"})
    ).encode()
    with FakeJudgeProvider() as fake:
        fake.default = status(200, failed, {"Content-Type": "application/json"})
        with pytest.raises(ProviderError) as info:
            _complete_against(fake)
        assert fake.calls == 3
    assert info.value.outcome_class == "infra_error" and "upstream died" in str(info.value)


def test_a_failed_generation_stating_a_4xx_is_rejected_at_once():
    failed = json.dumps(
        _choice("", finish_reason="error", error={"code": 400, "message": "bad prompt"})
    ).encode()
    with FakeJudgeProvider() as fake:
        fake.default = status(200, failed, {"Content-Type": "application/json"})
        with pytest.raises(ProviderError) as info:
            _complete_against(fake)
        assert fake.calls == 1
    assert info.value.outcome_class == "evaluator_error" and "400: bad prompt" in str(info.value)


@pytest.mark.parametrize("encoding", ["utf-16", "utf-32-le"])
def test_a_judge_reply_that_is_not_utf8_is_a_bad_response(encoding):
    # json.loads(bytes) guesses UTF-16 and UTF-32: such a body was read as the verdict.
    body = json.dumps(_choice('{"score": 1}')).encode(encoding)
    with FakeJudgeProvider() as fake:
        fake.default = status(200, body, {"Content-Type": "application/json"})
        with pytest.raises(ProviderError) as info:
            _complete_against(fake)
    assert info.value.reason_code == "judge_bad_response"


def test_a_model_named_by_an_object_is_recorded_as_the_model_asked_for():
    body = json.dumps({**_choice('{"score": 1}'), "model": {"name": "gpt"}}).encode()
    with FakeJudgeProvider() as fake:
        fake.default = status(200, body, {"Content-Type": "application/json"})
        assert _complete_against(fake).model == "m"
