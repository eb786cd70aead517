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
