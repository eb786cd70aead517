"""One run seen through every surface (``eval start --follow --json``, ``run status``, the API
run document and case list, the case list page and its filters, the overview's leaderboard,
the exports and the page's CSV download) reports the same facts: two hosted deployments,
repetitions 2, PASSED / FAILED / NOT_EVALUATED (pack_error) / infra_error / config_error."""

from __future__ import annotations

import csv
import io
import json
from collections import Counter, defaultdict

import pytest
import yaml
from aiohttp import web
from django.core.management import call_command

from packs.services import pack_version_publish
from tests.fakes.agent_server import FakeAgent
from tests.runs.runfactory import hosted, pack_yaml

pytestmark = pytest.mark.django_db(transaction=True)
BASE = "/api/v1/workspaces/acme/runs"


@pytest.fixture
def inline_tasks(monkeypatch):
    from runs import tasks
    from runs.dispatch import dispatch_lane
    from runs.scoring import check_run

    def dispatch(lane_id):
        for _ in range(20):
            if not dispatch_lane(lane_id, time_slice=30).requeue:
                break

    monkeypatch.setattr(tasks.dispatch_lane, "delay", dispatch)
    monkeypatch.setattr(tasks.check_run, "delay", check_run)


def _pack(workspace):
    doc = yaml.safe_load(pack_yaml(cases=5))
    cases = doc["input_sets"][0]["cases"]
    cases[4]["expectations"] = []  # c4: reference missing -> NOT_EVALUATED / pack_error
    return pack_version_publish(workspace=workspace, data=yaml.safe_dump(doc).encode()).version


def _agent_behaviour():
    seen = defaultdict(int)

    async def behaviour(request, recorded, agent):
        lane = recorded.path.rsplit("/", 1)[-1]
        case = recorded.case_key
        seen[(lane, case)] += 1
        n = seen[(lane, case)]
        word = recorded.json["challenge"]["instructions"].split()[-1]
        if case == "c1" and lane == "beta":
            return web.json_response({"final_output": "wrong"})
        if case == "c2" and lane == "alpha" and n == 1:
            return web.json_response({"final_output": "wrong"})
        if case == "c3" and lane == "alpha":
            return web.json_response({}, status=500)
        if case == "c3" and lane == "beta" and n == 1:
            return web.json_response({}, status=404)
        return web.json_response(
            {
                "final_output": word,
                "metrics": {"input_tokens": 10 * n, "output_tokens": 3, "cost_usd": 0.0012},
            }
        )

    return behaviour


def _cli(*args):
    out = io.StringIO()
    code = 0
    try:
        call_command(*args, stdout=out, stderr=io.StringIO())
    except SystemExit as exc:
        code = exc.code
    return code, out.getvalue()


def _body(response):
    return json.loads(b"".join(response.streaming_content) if response.streaming else response.content)


def _started(personas):
    """A finished run of "alpha" (2 attempts) and "beta" (1 attempt) over c0..c4, 2 repetitions:
    alpha c2 fails once and c3 always answers 500 (infra_error); beta c1 fails, c3 answers 404
    once (config_error); c4 has no expected answer (NOT_EVALUATED, pack_error)."""
    _pack(personas.workspace)
    with FakeAgent() as agent:
        agent.default = _agent_behaviour()
        hosted(personas.workspace, agent.url_for("/alpha"), name="alpha", max_attempts=2)
        hosted(personas.workspace, agent.url_for("/beta"), name="beta", max_attempts=1)
        code, out = _cli(
            "eval", "start", "--workspace", "acme", "--pack", "echo", "--deployment", "alpha",
            "--deployment", "beta", "--repetitions", "2", "--follow", "--json",
        )  # fmt: skip
    return code, json.loads(out)


def _api_cases(api, run_id, query=""):
    """Every page of the API's case list (3 a page, so the keyset cursor is walked)."""
    rows, after = [], None
    while True:
        url = f"{BASE}/{run_id}/cases?limit=3{query}" + (f"&after={after}" if after else "")
        body = _body(api.get(url))
        rows += body["results"]
        after = body["next"]
        if after is None:
            return rows


def _page_ids(run, status):
    """The case list page's items under a status filter (every keyset page)."""
    from runs.results import CaseQuery, case_page

    ids, after = [], None
    while True:
        page = case_page(run, CaseQuery(status=status, after=after))
        ids += [item.id for item in page.items]
        after = page.next_cursor
        if after is None:
            return ids


STATUSES = (
    "PASSED", "FAILED", "NOT_EVALUATED", "UNAVAILABLE", "ERROR", "infra_error", "config_error", "cancelled",
    "pending",
)  # fmt: skip


def _filters_agree(personas, run_id, doc):
    """Each status filter of the API and of the case list page lists the cases the run
    document shows with that status, as many as its lane counts say."""
    from runs.models import Run

    run = Run.objects.get(pk=run_id)
    api = personas.api(personas.viewer)
    every = {(c["deployment"], c["case_key"], c["repetition"]): c for c in _api_cases(api, run_id)}
    for status in STATUSES:
        listed = _api_cases(api, run_id, f"&status={status}")
        assert {c["status"] for c in listed} <= {status}
        shown = Counter(c["status"] for c in doc["cases"])[status]
        assert len(listed) == shown == sum(lane["counts"][status] for lane in doc["lanes"]), status
        assert sorted(_page_ids(run, status.lower())) == sorted(c["id"] for c in listed), status
    return every


def test_every_surface_of_a_finished_run_reports_the_same_facts(personas, inline_tasks):
    from django.test import Client

    from runs.models import Run, RunLane
    from runs.results import lanes_of, leaderboard

    code, follow = _started(personas)
    assert code == 3  # infra_error and config_error cases remain (interfaces.md §6)
    run_id = follow["run"]["id"]
    assert Counter(c["status"] for c in follow["cases"]) == {
        "PASSED": 10, "FAILED": 3, "NOT_EVALUATED": 4, "infra_error": 2, "config_error": 1,
    }  # fmt: skip
    status_code, status_out = _cli("run", "status", run_id, "--cases", "--json")
    assert status_code == 0 and json.loads(status_out) == follow
    api = personas.api(personas.viewer)
    assert _body(api.get(f"{BASE}/{run_id}")) == {"run": follow["run"], "lanes": follow["lanes"]}
    every = _filters_agree(personas, run_id, follow)
    assert [{k: v for k, v in c.items() if k != "id"} for c in every.values()] == follow["cases"]
    for case in every.values():
        detail = _body(api.get(f"{BASE}/{run_id}/cases/{case['id']}"))
        assert {k: detail[k] for k in case if k != "attempts"} == {
            k: v for k, v in case.items() if k != "attempts"
        }
        assert len(detail["attempts"]) == case["attempts"]
        if detail["grading"]:
            assert detail["grading"]["status"] == case["status"]
            assert detail["grading"]["case"]["repetition"] == case["repetition"]
    # exports: one row per case, as the document lists them
    keys = ("deployment", "challenge_key", "case_key", "repetition", "status", "score", "attempts")
    jsonl = [json.loads(line) for line in _cli("run", "export", run_id, "--format", "jsonl")[1].splitlines()]
    assert [{k: r[k] for k in keys} for r in jsonl] == follow["cases"]
    client = Client()
    client.force_login(personas.viewer)
    download = b"".join(client.get(f"/runs/{run_id}/export/csv/").streaming_content).decode()
    table = list(csv.DictReader(io.StringIO(download.removeprefix("\ufeff"), newline="")))
    assert download.removeprefix("\ufeff") == _cli("run", "export", run_id, "--format", "csv")[1]
    assert [r["status"] for r in table] == [c["status"] for c in follow["cases"]]
    assert [int(r["attempts"]) for r in table] == [c["attempts"] for c in follow["cases"]]
    # the overview's leaderboard: the document's figures, and the stored spend totals
    run = Run.objects.get(pk=run_id)
    rows = {row.lane.deployment_name: row for row in leaderboard(run, lanes_of(run))}
    for lane in follow["lanes"]:
        row = rows[lane["deployment"]]
        assert (row.pass_rate, row.pass_rate_interval, row.mean_score, row.mean_score_interval) == (
            lane["pass_rate"], lane["pass_rate_interval"], lane["mean_score"], lane["mean_score_interval"],
        )  # fmt: skip
        assert row.counts == lane["counts"]
        mine = [r for r in jsonl if r["deployment"] == lane["deployment"] and r["status"] not in
                ("infra_error", "config_error")]  # fmt: skip
        stats = RunLane.objects.get(run=run, deployment_name=lane["deployment"]).stats
        assert stats["agent"]["input_tokens"] == sum(r["input_tokens"] or 0 for r in mine)
        assert row.agent_cost_usd == pytest.approx(sum(r["cost_usd"] or 0 for r in mine))
    assert [rows[n].rank for n in ("alpha", "beta")] == [1, 2]  # mean score 0.8333 before 0.75
    # ... and as the page shows them: scores and their intervals at 4 decimals (grading.md §2)
    page = client.get(f"/runs/{run_id}/").content.decode()
    for lane in follow["lanes"]:
        low, high = lane["mean_score_interval"]
        assert f"{lane['mean_score']:.4f}" in page
        assert f"{low:.4f}\u2013{high:.4f}" in page, lane["deployment"]


def test_items_sent_again_are_pending_under_every_filter(personas, inline_tasks):
    """retry-failed puts the infra_error / config_error items back to pending: the run
    document counts them pending and so does the API's ``status=pending``, but the case list
    page's "infra_error" filter still listed them (showing "pending"), as its filters read
    the last attempt's category whatever the item's state."""
    from runs.models import Run
    from runs.services.operations import run_retry_failed

    _, follow = _started(personas)
    run_id = follow["run"]["id"]
    assert run_retry_failed(run=Run.objects.get(pk=run_id), enqueue=False) == 3
    doc = json.loads(_cli("run", "status", run_id, "--cases", "--json")[1])
    assert Counter(c["status"] for c in doc["cases"])["pending"] == 3
    _filters_agree(personas, run_id, doc)


@pytest.mark.parametrize("first", ["ci", "bb"])
def test_a_black_box_trace_lane_reports_tool_checks_unavailable_beside_a_structured_one(personas, first):
    """agent-protocol.md: a ``black_box`` deployment has no tool_calls channel, so a check
    of the calls is UNAVAILABLE, never graded on an invented empty list. An upload to a run
    with a structured and a black_box trace_import lane built every line's evidence with the
    first lane's level: the black_box lane's tool check PASSED on "no calls" (or, the other
    way round, the structured lane's was UNAVAILABLE). Every surface shows the lane's cases
    UNAVAILABLE (outcome class unavailable) and the JUnit file skips them."""
    import xml.etree.ElementTree as ET

    from runs.models import RunLane
    from runs.services.deployments import deployment_create
    from tests.runs.runfactory import create_run
    from tests.runs.test_exports_hostile import _upload

    doc = yaml.safe_load(pack_yaml(cases=2))
    spec = doc["version"]["evaluation_spec"]
    spec["validators"].append(
        {"key": "no-search", "type": "tool_call_assertion", "target": "tool_calls",
         "config": {"tool_name": "search", "must_call": False}}
    )  # fmt: skip
    spec["scorecard"]["dimensions"][0]["validators"] = ["answer", "no-search"]
    version = pack_version_publish(workspace=personas.workspace, data=yaml.safe_dump(doc).encode()).version
    levels = {"ci": "structured", "bb": "black_box"}
    names = [first, *(n for n in levels if n != first)]
    deps = [
        deployment_create(
            workspace=personas.workspace, name=n, kind="trace_import", evidence_level=levels[n]
        ).deployment
        for n in names
    ]
    run = create_run(personas.workspace, version, deps)
    lines = [
        {"deployment": d, "case_key": f"c{i}", "final_output": f"answer-{i}"} for d in names for i in range(2)
    ]
    _upload(personas, run, lines)
    run_id = str(run.pk)
    status = json.loads(_cli("run", "status", run_id, "--cases", "--json")[1])
    assert status["run"]["status"] == "completed"
    shown = {(c["deployment"], c["case_key"]): c["status"] for c in status["cases"]}
    assert shown == {("ci", "c0"): "PASSED", ("ci", "c1"): "PASSED", ("bb", "c0"): "UNAVAILABLE",
                     ("bb", "c1"): "UNAVAILABLE"}  # fmt: skip
    lanes = {lane["deployment"]: lane for lane in status["lanes"]}
    assert lanes["bb"]["counts"]["UNAVAILABLE"] == 2 and lanes["bb"]["pass_rate"] is None
    assert lanes["ci"]["counts"]["PASSED"] == 2 and lanes["ci"]["pass_rate"] == 1.0
    _filters_agree(personas, run_id, status)
    jsonl = [json.loads(line) for line in _cli("run", "export", run_id, "--format", "jsonl")[1].splitlines()]
    assert {(r["deployment"], r["outcome_class"]) for r in jsonl} == {("ci", "pass"), ("bb", "unavailable")}
    stats = RunLane.objects.get(run=run, deployment_name="bb").stats
    assert stats["outcome_counts"]["unavailable"] == 2
    junit = ET.fromstring(_cli("run", "export", run_id, "--format", "junit")[1].encode())
    suite = next(s for s in junit.findall("testsuite") if s.get("name") == "bb")
    assert suite.get("skipped") == "2" and suite.get("failures") == "0"


def test_an_errored_case_is_error_on_every_surface(personas):
    """ERROR / evaluator_error (input over limits): counted ERROR on the lane and listed by
    the ERROR filters, left out of the pass rate (grading.md §10.2), an ``<error>`` in JUnit,
    with its outcome class and reason in the JSONL and the CSV."""
    import xml.etree.ElementTree as ET

    from runs.services.deployments import deployment_create
    from tests.runs.runfactory import create_run
    from tests.runs.test_exports_hostile import _upload

    doc = yaml.safe_load(pack_yaml(cases=3))
    spec = doc["version"]["evaluation_spec"]
    spec["validators"] = [
        {
            "key": "number",
            "type": "json_schema",
            "target": "final_output",
            "expected_from": 'literal:{"type": "number"}',
        }
    ]
    spec["scorecard"]["dimensions"][0]["validators"] = ["number"]
    for case in doc["input_sets"][0]["cases"]:
        case["expectations"] = []
    version = pack_version_publish(workspace=personas.workspace, data=yaml.safe_dump(doc).encode()).version
    dep = deployment_create(workspace=personas.workspace, name="ci", kind="trace_import").deployment
    run = create_run(personas.workspace, version, [dep])
    outputs = ["1", '"one"', "9" * 5000]  # a number, not a number, an integer past Python's digit limit
    _upload(personas, run, [{"case_key": f"c{i}", "final_output": out} for i, out in enumerate(outputs)])
    run_id = str(run.pk)
    status = json.loads(_cli("run", "status", run_id, "--cases", "--json")[1])
    assert [c["status"] for c in status["cases"]] == ["PASSED", "FAILED", "ERROR"]
    lane = status["lanes"][0]
    assert lane["counts"]["ERROR"] == 1 and lane["pass_rate"] == 0.5
    _filters_agree(personas, run_id, status)
    jsonl = [json.loads(line) for line in _cli("run", "export", run_id, "--format", "jsonl")[1].splitlines()]
    assert (jsonl[2]["outcome_class"], jsonl[2]["reason_code"], jsonl[2]["score"]) == (
        "evaluator_error", "input_too_large", None,
    )  # fmt: skip
    table = list(csv.DictReader(io.StringIO(_cli("run", "export", run_id, "--format", "csv")[1], newline="")))
    assert [(r["status"], r["outcome_class"]) for r in table] == [
        (r["status"], r["outcome_class"]) for r in jsonl
    ]
    suite = ET.fromstring(_cli("run", "export", run_id, "--format", "junit")[1].encode()).find("testsuite")
    assert (suite.get("failures"), suite.get("errors"), suite.get("skipped")) == ("1", "1", "0")
    assert suite.findall("testcase")[2].find("error").get("type") == "ERROR"


def test_a_cancelled_runs_cancelled_cases_are_counted_on_every_surface(personas, inline_tasks):
    """A run cancelled while its trace_import lane waited: status, the API and page filters
    count the cancelled repetitions, and so does the overview's "Not graded" column (it
    listed every other kind of ungraded case but not the cancelled ones: a lane with 7 of
    its 10 repetitions cancelled showed nothing there)."""
    import re

    from django.test import Client

    from runs.services.deployments import deployment_create
    from runs.services.operations import run_cancel
    from tests.runs.runfactory import create_run
    from tests.runs.test_exports_hostile import _upload

    version = _pack(personas.workspace)
    ci = deployment_create(workspace=personas.workspace, name="ci", kind="trace_import").deployment
    run = create_run(personas.workspace, version, [ci], repetitions=2)
    _upload(
        personas,
        run,
        [
            {"case_key": "c0", "repetition": 1, "final_output": "answer-0"},
            {"case_key": "c1", "repetition": 1, "final_output": "nope"},
            {"case_key": "c1", "repetition": 2, "final_output": "answer-1"},
        ],
    )
    run_cancel(run=run)
    run_id = str(run.pk)
    code, out = _cli("run", "status", run_id, "--cases", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["run"]["status"] == "cancelled"
    counts = doc["lanes"][0]["counts"]
    assert (counts["PASSED"], counts["FAILED"], counts["cancelled"]) == (2, 1, 7)
    assert doc["lanes"][0]["pass_rate"] == 0.75  # c0 1.0, c1 0.5 (grading.md §10.3)
    _filters_agree(personas, run_id, doc)
    client = Client()
    client.force_login(personas.viewer)
    page = client.get(f"/runs/{run_id}/").content.decode()
    board = page[page.index('id="leaderboard-h"') : page.index("</table>", page.index('id="leaderboard-h"'))]
    assert re.search(r'<span class="badge st-cancelled">cancelled 7</span>', board)


def test_a_rescored_run_shows_its_new_revision_on_every_surface(personas, inline_tasks):
    """Scoring revision 2 of a run whose revision 1 had graded alpha's c0 FAILED: the status
    document, the filters, the case document (its revision, the archived one), the JUnit
    properties and the overview all read revision 2's grades."""
    import xml.etree.ElementTree as ET

    from django.test import Client

    from runs.models import Run, RunItem, RunLane
    from runs.results import lanes_of, leaderboard
    from runs.services.operations import run_rescore
    from runs.tasks import rescore_run

    _, follow = _started(personas)
    run_id = follow["run"]["id"]
    item = RunItem.objects.get(run_id=run_id, lane__deployment_name="alpha", case_key="c0", repetition=1)
    RunItem.objects.filter(pk=item.pk).update(
        status="FAILED", score=0.0, grade=dict(item.grade, status="FAILED")
    )
    RunLane.objects.filter(run_id=run_id, deployment_name="alpha").update(passed=4, failed=2)
    run_rescore(run=Run.objects.get(pk=run_id), enqueue=False)
    rescore_run(run_id, 2)
    status = json.loads(_cli("run", "status", run_id, "--cases", "--json")[1])
    assert status["run"]["status"] == "completed"
    assert status["lanes"] == follow["lanes"] and status["cases"] == follow["cases"]
    _filters_agree(personas, run_id, status)
    detail = _body(personas.api(personas.viewer).get(f"{BASE}/{run_id}/cases/{item.pk}"))
    assert (detail["status"], detail["scoring_revision"], detail["grading"]["status"]) == (
        "PASSED",
        2,
        "PASSED",
    )
    assert [(r["revision"], r["status"]) for r in detail["previous_revisions"]] == [(1, "FAILED")]
    junit = ET.fromstring(_cli("run", "export", run_id, "--format", "junit")[1].encode())
    for suite in junit.findall("testsuite"):
        properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
        assert properties["scoring_revision"] == "2" and properties["run_status"] == "completed"
    run = Run.objects.get(pk=run_id)
    rows = leaderboard(run, lanes_of(run))
    assert [(r.lane.deployment_name, r.pass_rate, r.counts) for r in rows] == [
        (lane["deployment"], lane["pass_rate"], lane["counts"]) for lane in status["lanes"]
    ]
    client = Client()
    client.force_login(personas.viewer)
    assert 'data-testid="scoring-revision">revision 2 ' in client.get(f"/runs/{run_id}/").content.decode()


def test_a_judged_runs_judge_spend_is_one_figure_on_the_overview(personas):
    """grading.md §6.5: every judge, claim-extraction and critic call is summed in the lane's
    judge usage. The overview's "Judge tokens · cost" cell showed the lane's tokens of every
    call (the grades' and the run's judge probes') beside the cost of the grades' calls only,
    once the run completed (while it ran, the cost of every call): two figures of different
    calls in one cell, and a cost that dropped when the run completed."""
    from django.test import Client

    from grading.models import ModelPrice
    from runs.models import Run, RunItem, RunLane
    from runs.results import lanes_of, leaderboard
    from runs.templatetags.run_results import usd
    from tests.fakes.agent_server import ok
    from tests.fakes.judge_provider import FakeJudgeProvider, by_mode, content, verdict
    from tests.grading.judges.test_judge_runs import publish_with_judges, setup_provider
    from tests.runs.runfactory import create_run, drive

    # the admin price table (seeded by a migration, emptied by an earlier test's flush)
    ModelPrice.objects.update_or_create(
        model="gpt-4o-mini", defaults={"input_usd_per_million": 0.15, "output_usd_per_million": 0.6}
    )
    ws = personas.workspace
    judges = [
        {"key": "j", "mode": "assertion", "assertion": "says the word", "model": "gpt-4o-mini", "samples": 1}
    ]
    with FakeJudgeProvider() as fake:
        setup_provider(ws, fake)
        version = publish_with_judges(ws, judges)
        fake.default = by_mode(
            assertion=verdict({"pass": True}), claims=content('{"claims": []}'), other=content("{}")
        )
        with FakeAgent() as agent:
            agent.default = ok(
                lambda rec: {"final_output": rec.json["challenge"]["instructions"].split()[-1]}
            )
            run = drive(create_run(ws, version, [hosted(ws, agent.url, name="a")], repetitions=2))
    run = Run.objects.get(pk=run.pk)
    assert run.status == "completed"
    lane = RunLane.objects.get(run=run)
    graded_calls = sum(item.grade["judge_usage"]["calls"] for item in RunItem.objects.filter(run=run))
    assert lane.judge_calls > graded_calls  # the run's judge probes are booked on the lane too
    row = leaderboard(run, lanes_of(run))[0]
    assert row.judge_cost_usd == pytest.approx(lane.judge_cost_usd) and lane.judge_cost_usd > 0
    assert run.judge_cost_usd == pytest.approx(lane.judge_cost_usd)  # the run's total: its lanes'
    client = Client()
    client.force_login(personas.viewer)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    tokens = lane.judge_input_tokens + lane.judge_output_tokens
    assert f'<td class="num">{tokens}<br><small>{usd(lane.judge_cost_usd)}</small>' in page
