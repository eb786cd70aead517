"""Where a judge call goes (grading.md §6.5): the provider's path is appended to the base
URL's path, before its query (Azure OpenAI's ``?api-version=``)."""

from __future__ import annotations

import asyncio

import pytest

from agentclash_site.lib.outbound import OutboundClient
from grading.judges.providers import ProviderConfig, complete
from tests.fakes.judge_provider import FakeJudgeProvider, verdict


def call(fake: FakeJudgeProvider, kind: str, base_path: str) -> None:
    origin = fake.base_url[: -len("/v1")]
    config = ProviderConfig(kind=kind, base_url=origin + base_path, api_key="sk-test", allow_private=True)

    async def go():
        async with OutboundClient() as client:
            return await complete(client, config, model="m", system="s", user="u", max_retries=0)

    asyncio.run(go())


@pytest.mark.parametrize(
    ("kind", "base_path", "sent"),
    [
        (
            "openai",
            "/openai/deployments/gpt?api-version=2024-06-01",
            "/openai/deployments/gpt/chat/completions?api-version=2024-06-01",
        ),
        ("openai", "/v1/?team=evals", "/v1/chat/completions?team=evals"),
        ("anthropic", "?beta=1", "/v1/messages?beta=1"),
        ("anthropic", "/v1?beta=1", "/v1/messages?beta=1"),
        ("anthropic", "/proxy/?beta=1", "/proxy/v1/messages?beta=1"),
    ],
)
def test_the_providers_path_goes_before_the_base_urls_query(kind, base_path, sent):
    # The path was appended to the query ("?api-version=2024-06-01/chat/completions"), so
    # every judge call went to the base path and 404ed: every judge ERROR / infra_error.
    with FakeJudgeProvider() as fake:
        fake.default = verdict({"pass": True})
        call(fake, kind, base_path)
        assert fake.paths == [sent]
