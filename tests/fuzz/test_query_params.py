"""Every page and API list answers hostile query parameters with 2xx, 3xx or 4xx, never 5xx:
each known parameter name (and a few that are not) with values that broke pages before or
break naive parsers (a NUL reached PostgreSQL, which refuses it in text)."""

from __future__ import annotations

import pytest
from django.test import Client

from runs.models import RunItem
from tests.fakes.agent_server import FakeAgent, ok
from tests.runs.runfactory import create_run, drive, echo_answer, hosted, publish

pytestmark = pytest.mark.django_db(transaction=True)

VALUES = ["", "\x00", "-1", "99999999999999999999999", "nan", "'\"", "a" * 5000, "../x"]
PARAMS = [
    "status", "challenge", "deployment", "after", "before", "cursor", "q", "page", "format",
    "baseline", "candidate", "limit", "change", "repetition", "workspace", "next", "strict",
]  # fmt: skip


def test_no_page_or_endpoint_answers_a_hostile_query_parameter_with_a_5xx(personas):
    version = publish(personas.workspace, cases=2)
    with FakeAgent() as agent:
        agent.default = ok(echo_answer)
        run = drive(create_run(personas.workspace, version, [hosted(personas.workspace, agent.url)]))
    item = RunItem.objects.filter(run=run).first()
    pages = [
        "/runs/", f"/runs/{run.pk}/", f"/runs/{run.pk}/cases/", f"/runs/{run.pk}/cases/{item.pk}/",
        f"/runs/{run.pk}/cases/{item.pk}/transcript/", "/runs/compare/", "/runs/new/", "/runs/operations/",
        "/deployments/", "/packs/", "/account/tokens/",
    ]  # fmt: skip
    api = [
        "runs", f"runs/{run.pk}", f"runs/{run.pk}/cases", f"runs/{run.pk}/export", "compare", "packs",
        "deployments", "drafts",
    ]  # fmt: skip
    client = Client(raise_request_exception=False)
    client.force_login(personas.owner)
    token_client = personas.api(personas.owner)
    token_client.raise_request_exception = False
    failures = []
    for url, c in [(u, client) for u in pages] + [
        (f"/api/v1/workspaces/acme/{u}", token_client) for u in api
    ]:
        for name in PARAMS:
            for value in VALUES:
                status = c.get(url, {name: value}).status_code
                if status >= 500:
                    failures.append((url, name, value[:12], status))
    assert failures == []
