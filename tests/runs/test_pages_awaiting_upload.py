"""A run with trace_import lanes says on its overview what it waits for: its agent's results,
uploaded. The live progress counts each lane's cases still without a result; members who may
write also get this run's upload route and a curl command (with a placeholder token). In a
run with a hosted lane too, the no-worker notice looks at the hosted lane only."""

from __future__ import annotations

import json
from datetime import timedelta
from unittest.mock import patch

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from runs.models import LaneStatus, RunLane, RunStatus
from runs.services.deployments import deployment_create
from runs.services.trace_import import run_import_results
from runs.states import transition_lane, transition_run
from tests.clients import logged_in as login
from tests.runs.runfactory import create_run, hosted, publish

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}
WAITING = 'data-testid="awaiting-upload"'
HOW = 'data-testid="upload-how"'
CURL = 'id="upload-curl"'
NO_WORKER = "No worker has picked up this run for"


def _trace(workspace, name="ci"):
    return deployment_create(workspace=workspace, name=name, kind="trace_import").deployment


@pytest.fixture
def trace_run(personas):
    version = publish(personas.workspace, cases=3)
    return create_run(personas.workspace, version, [_trace(personas.workspace)])


def pages(client, run):
    return [
        client.get(f"/runs/{run.id}/").content.decode(),
        client.get(f"/runs/{run.id}/?partial=live&was=running", **HTMX).content.decode(),
    ]


def upload(run, *cases):
    lines = [json.dumps({"case_key": c, "final_output": f"answer-{c[1:]}"}) for c in cases]
    outcome = run_import_results(run=run, data="\n".join(lines).encode())
    assert outcome.accepted == len(cases) and not outcome.bad_lines
    run.refresh_from_db()


def test_a_waiting_trace_import_run_says_so_with_its_upload_route(trace_run, personas):
    url = f"http://testserver/api/v1/workspaces/acme/runs/{trace_run.id}/results"
    page, poll = pages(login(personas.owner), trace_run)
    for body in (page, poll):
        assert WAITING in body
        assert "Waiting for this run's agent results to be uploaded" in body
        assert "<strong><bdi>ci</bdi></strong>: 3 of 3 cases still without a result" in body
    # how to upload: on the page, outside the polled fragment (re-rendered every 2 s)
    assert HOW not in poll and CURL not in poll
    assert f"<code>POST {url}</code>" in page
    assert f'curl --fail-with-body -X POST "{url}" \\' in page
    assert 'Authorization: Bearer $AGENTCLASH_TOKEN"' in page
    assert "Content-Type: application/x-ndjson" in page and "--data-binary @results.jsonl" in page
    section = page.split(HOW)[1].split("</section>")[0]
    assert '<a href="/api/v1/docs/">API docs</a>' in section  # (the footer has one too)
    assert page.index(HOW) < page.index('id="live"')
    # the example line is JSON of the response shape, with this run's lane
    line = page.split('<code id="upload-line">')[1].split("</code>")[0].replace("&quot;", '"')
    assert json.loads(line.replace("&#x27;", "'")) == {
        "case_key": "CASE_KEY",
        "deployment": "ci",
        "final_output": "the agent's answer",
    }


def test_the_counts_follow_the_uploads_and_the_explanation_goes_with_the_last(trace_run, personas):
    owner = login(personas.owner)
    upload(trace_run, "c0")
    assert trace_run.status == RunStatus.RUNNING
    for body in pages(owner, trace_run):
        assert "<strong><bdi>ci</bdi></strong>: 2 of 3 cases still without a result" in body
    upload(trace_run, "c1", "c2")
    assert trace_run.status == RunStatus.COMPLETED
    for body in pages(owner, trace_run):
        assert WAITING not in body and HOW not in body and "AGENTCLASH_TOKEN" not in body


def test_repetitions_are_counted_as_such(personas):
    version = publish(personas.workspace, cases=2)
    run = create_run(personas.workspace, version, [_trace(personas.workspace)], repetitions=2)
    page = login(personas.owner).get(f"/runs/{run.id}/").content.decode()
    assert "4 of 4 case repetitions still without a result" in page
    assert "<code>repetition</code> from 1 to 2" in page


def test_the_route_and_command_only_for_members_who_may_write(trace_run, personas):
    """Uploading asks for write access (as cancel, retry and re-score, shown only to them): a
    viewer is told what the run waits for and who uploads, not a command answered 403."""
    for user in (personas.owner, personas.editor):
        page = login(user).get(f"/runs/{trace_run.id}/").content.decode()
        assert HOW in page and CURL in page and 'href="#upload-results"' in page
    page = login(personas.viewer).get(f"/runs/{trace_run.id}/").content.decode()
    assert WAITING in page and "3 of 3 cases still without a result" in page
    assert HOW not in page and CURL not in page and "/results" not in page
    assert "A member who can write to this workspace uploads them." in page


def test_a_lane_name_is_escaped_in_the_counts_and_the_example_line(personas):
    name = "<b>x</b>\"'&"
    version = publish(personas.workspace, cases=1)
    run = create_run(personas.workspace, version, [_trace(personas.workspace, name)])
    page, poll = pages(login(personas.owner), run)
    assert "<b>x</b>" not in page and "<b>x</b>" not in poll
    assert "<strong><bdi>&lt;b&gt;x&lt;/b&gt;&quot;&#x27;&amp;</bdi></strong>: 1 of 1 case still" in poll
    line = page.split('<code id="upload-line">')[1].split("</code>")[0]
    assert "&lt;b&gt;x&lt;/b&gt;" in line
    unescaped = line.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"').replace("&#x27;", "'")
    assert json.loads(unescaped.replace("&amp;", "&"))["deployment"] == name


def test_no_explanation_for_a_hosted_run(personas):
    version = publish(personas.workspace)
    run = create_run(personas.workspace, version, [hosted(personas.workspace, "http://127.0.0.1:9/")])
    for body in pages(login(personas.owner), run):
        assert WAITING not in body and HOW not in body


def test_the_explanation_costs_no_query(trace_run, personas):
    """From the lanes' counters, already loaded: a waiting run's overview and poll make the
    same queries as once its results are all in and the run is back to running."""
    owner = login(personas.owner)
    owner.get(f"/runs/{trace_run.id}/")  # session warm-up
    counts = {}
    for waiting in (True, False):
        if not waiting:  # same run, same state, nothing pending
            RunLane.objects.filter(run=trace_run).update(pending=0)
        for url, extra in ((f"/runs/{trace_run.id}/", {}), (f"/runs/{trace_run.id}/?partial=live", HTMX)):
            with CaptureQueriesContext(connection) as ctx:
                body = owner.get(url, **extra).content.decode()
            assert (WAITING in body) == waiting
            counts[(waiting, url)] = len(ctx.captured_queries)
    assert counts[(True, f"/runs/{trace_run.id}/")] == counts[(False, f"/runs/{trace_run.id}/")]
    assert (
        counts[(True, f"/runs/{trace_run.id}/?partial=live")]
        == counts[(False, f"/runs/{trace_run.id}/?partial=live")]
    )


# --- a hosted lane and a trace_import lane ------------------------------------------------------


@pytest.fixture
def mixed(personas):
    version = publish(personas.workspace, cases=3)
    run = create_run(
        personas.workspace,
        version,
        [hosted(personas.workspace, "http://127.0.0.1:9/"), _trace(personas.workspace)],
    )
    assert run.status == RunStatus.QUEUED
    return run


def at(run, seconds):
    return patch("django.utils.timezone.now", return_value=run.queued_at + timedelta(seconds=seconds))


def test_an_upload_does_not_hide_that_no_worker_took_the_hosted_lane(mixed, personas):
    owner = login(personas.owner)
    line = json.dumps({"case_key": "c0", "deployment": "ci", "final_output": "answer-0"})
    assert run_import_results(run=mixed, data=line.encode()).accepted == 1
    mixed.refresh_from_db()
    assert mixed.status == RunStatus.RUNNING and mixed.started_at is not None
    with at(mixed, 10):
        assert all(NO_WORKER not in body for body in pages(owner, mixed))
    with at(mixed, 125):
        for body in pages(owner, mixed):
            assert "No worker has picked up this run for 2 minutes." in body
            assert "<strong><bdi>ci</bdi></strong>: 2 of 3 cases still without a result" in body
    # a worker claims the hosted lane: no notice, the trace lane still waits
    hosted_lane = RunLane.objects.get(run=mixed, deployment_kind="hosted_http")
    transition_lane(hosted_lane, LaneStatus.RUNNING, reason="first claim")
    with at(mixed, 600):
        for body in pages(owner, mixed):
            assert NO_WORKER not in body and WAITING in body


def test_a_queued_mixed_run_shows_both(mixed, personas):
    with at(mixed, 125):
        for body in pages(login(personas.owner), mixed):
            assert NO_WORKER in body and "3 of 3 cases still without a result" in body


def test_a_run_moved_on_by_its_worker_alone_still_shows_no_notice(personas):
    """Without a trace_import lane only a worker moves a run to running: running means a
    worker took it, whatever its lanes say."""
    version = publish(personas.workspace)
    run = create_run(personas.workspace, version, [hosted(personas.workspace, "http://127.0.0.1:9/")])
    transition_run(run, RunStatus.RUNNING, reason="first claim")
    with at(run, 600):
        assert all(NO_WORKER not in body for body in pages(login(personas.owner), run))


def test_no_explanation_once_the_trace_lane_has_every_result_while_the_hosted_lane_runs(mixed, personas):
    lines = [json.dumps({"case_key": f"c{i}", "deployment": "ci", "final_output": "x"}) for i in range(3)]
    assert run_import_results(run=mixed, data="\n".join(lines).encode()).accepted == 3
    mixed.refresh_from_db()
    assert mixed.status == RunStatus.RUNNING
    for body in pages(login(personas.owner), mixed):
        assert WAITING not in body and HOW not in body
