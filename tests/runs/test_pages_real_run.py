"""The result pages on a run the dispatcher really executed (fake agent over a real socket):
the stored evidence rebuilds the transcript the grade cites, anchors included."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from runs.models import RunItem
from runs.result_tasks import compute_result_summary
from tests.fakes.agent_server import FakeAgent, ok
from tests.runs.runfactory import create_run, drive, echo_answer, hosted, publish

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_dispatched_run_reads_back_through_every_page(personas):
    version = publish(personas.workspace, cases=3)
    with FakeAgent() as agent:
        agent.default = ok(echo_answer)
        # No messages reported: the transcript is the rendered prompt and the final output.
        agent.queue(ok({"final_output": "no idea"}), case="c2")
        dep = hosted(personas.workspace, agent.url)
        run = drive(create_run(personas.workspace, version, [dep]))
    assert run.status == "completed"
    compute_result_summary(str(run.id))
    client = Client()
    client.force_login(personas.viewer)

    overview = client.get(f"/runs/{run.id}/").content.decode()
    assert "66.7%" in overview and "winner" in overview and "Computing" not in overview
    assert "<code>answer</code>" in overview  # its row in assertion health

    failed = RunItem.objects.get(run=run, case_key="c2")
    page = client.get(f"/runs/{run.id}/cases/{failed.id}/").content.decode()
    assert 'data-testid="case-status">FAILED<' in page
    anchors = set(
        re.findall(rf'/runs/{run.id}/cases/{failed.id}/transcript/(?:\?at=[\w-]+)?#([\w-]+)"', page)
    )
    assert "ev-final_output" in anchors
    transcript = client.get(f"/runs/{run.id}/cases/{failed.id}/transcript/").content.decode()
    for anchor in anchors:
        assert f'id="{anchor}"' in transcript
    # message 0 is the rendered prompt, as grading saw it
    assert re.search(r'id="ev-message-0".*?Say answer-2', transcript, re.S)
    assert re.search(r'id="ev-final_output".*?no idea', transcript, re.S)


def _cost_cells(overview: str) -> list[tuple[str, str]]:
    """(agent cost, judge cost) of each leaderboard row, in order."""
    rows = re.findall(
        r'<td class="num">[^<]*/[^<]*<br><small>([^<]*)</small></td>\s*'
        r'<td class="num">[^<]*<br><small>([^<]*)</small></td>',
        overview,
    )
    return [(agent.strip(), judge.strip()) for agent, judge in rows]


def test_an_unknown_cost_reads_as_a_dash_never_as_zero_dollars(personas):
    # An agent that reports no cost (and no price applies) used to read "$0.0000": free.
    version = publish(personas.workspace, cases=2)
    with FakeAgent() as silent, FakeAgent() as priced:
        silent.default = ok(echo_answer)
        priced.default = ok(lambda recorded: {**echo_answer(recorded), "metrics": {"cost_usd": 0.25}})
        deployments = [
            hosted(personas.workspace, silent.url, name="silent"),
            hosted(personas.workspace, priced.url, name="priced"),
        ]
        run = drive(create_run(personas.workspace, version, deployments))
    assert run.status == "completed"
    client = Client()
    client.force_login(personas.viewer)
    cells = _cost_cells(client.get(f"/runs/{run.id}/").content.decode())
    # No judge in this pack: no judge calls, so the judge spend is known to be nothing.
    assert sorted(cells) == [("$0.5000", "$0.0000"), ("–", "$0.0000")]
