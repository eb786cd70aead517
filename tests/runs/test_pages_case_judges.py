"""The case page of a judge-graded item: per judge sample the model, verdict, reasoning and
cited ids, each citation a link to its transcript anchor; the query count stays pinned."""

from __future__ import annotations

import pytest
from django.test import Client

from grading.engine import evidence_from_response, grade_case
from runs.models import RunItem
from runs.seeding import seed_run
from tests.fakes.judge_provider import cite
from tests.grading.judges.helpers import CTX, case, make_judge

pytestmark = pytest.mark.django_db

REASONING = "The final answer <b>names</b> the capital"


@pytest.fixture
def fake():
    from tests.fakes.judge_provider import FakeJudgeProvider

    with FakeJudgeProvider() as provider:
        yield provider


def judge_graded(fake, response):
    """A real judge grade (fake provider) of the item's own stored response."""
    fake.default = cite(["final_output", "challenge_input", "B/final_output"], reasoning=REASONING)
    sp = {
        "validators": [],
        "llm_judges": [
            {
                "key": "names-it",
                "mode": "assertion",
                "assertion": "names it",
                "model": "gpt-4o-mini",
                "samples": 2,
            }
        ],
        "scorecard": {"dimensions": ["correctness"]},
    }
    ev = evidence_from_response(response)
    with make_judge(fake) as judge:
        return grade_case(ev, case(), sp, context=CTX, judge=judge).to_dict()


def test_judge_samples_with_reasoning_and_clickable_citations_outsider_404(
    personas, fake, django_assert_num_queries
):
    run = seed_run(workspace=personas.workspace, items=2, lanes=1, name="judged", infra_error_rate=0.0)
    item = RunItem.objects.filter(run=run).exclude(evidence=None).order_by("id").first()
    doc = judge_graded(fake, item.evidence["response"])
    exp = next(e for e in doc["expectations"] if e["key"] == "names-it")
    # "B/final_output" is another lane's label: unresolvable here, so the verdict is unverifiable
    assert exp["reason_code"] == "unverifiable_verdict" and len(exp["details"]["samples"]) == 2
    RunItem.objects.filter(pk=item.pk).update(grade=doc)
    client = Client()
    client.force_login(personas.owner)
    url = f"/runs/{run.id}/cases/{item.id}/"
    client.get(url)
    with django_assert_num_queries(9):  # the pinned count of the case page (test_pages_views)
        body = client.get(url).content.decode()
    transcript = f"/runs/{run.id}/cases/{item.id}/transcript/"
    start = body.index('id="judge-samples-names-it"')
    table = body[start : body.index("</details>", start)]
    assert table.count("<tr>") == 3  # header + 2 samples
    assert "<code>gpt-4o-mini</code>" in table and table.count("<td>pass") == 2
    assert "The final answer &lt;b&gt;names&lt;/b&gt; the capital" in table  # escaped reasoning
    assert f'<a class="ref" href="{transcript}#ev-final_output">final_output</a>' in table
    assert "<code>challenge_input</code>" in table  # case data: not in the transcript
    assert "<code>B/final_output</code>" in table  # another lane's answer: never linked here
    # the raw samples are not repeated in the details list
    assert "<dt>samples</dt>" not in body
    # the link target exists on the transcript page
    assert 'id="ev-final_output"' in client.get(transcript).content.decode()

    outsider = Client()
    outsider.force_login(personas.outsider)
    assert outsider.get(url).status_code == 404


def test_a_judge_sample_citing_a_captured_file_links_to_the_file():
    """A citation of ``file:<check>`` (the demo's judge cites the written result) made the case
    page a 500 (KeyError 'at') once message and tool-call links gained their ``?at=`` window:
    a captured file is always on the transcript's first page, so its link needs none."""
    from runs.views.results import _judge_samples

    details = {"mode": "assertion", "samples": [{"verdict": "pass", "citations": [{"id": "file:report"}]}]}
    (sample,) = _judge_samples(details, {"report": "out/report.md"}, "/runs/r/cases/1/transcript/")
    (citation,) = sample["citations"]
    assert citation["href"].startswith("/runs/r/cases/1/transcript/#") and "?at=" not in citation["href"]
