"""Lane dispatch against a real-socket fake agent on PostgreSQL."""

from __future__ import annotations

import asyncio
import threading

import pytest
from aiohttp import web

from runs.dispatch import claim_items, dispatch_lane
from runs.models import Attempt, GradeRevision, ItemState, Run, RunItem, RunLane
from runs.recording import ItemResult, record_results
from tests.fakes.agent_server import (
    FakeAgent,
    hang,
    huge,
    invalid_json,
    ok,
    rate_limited,
    raw,
    server_error,
)
from tests.runs.runfactory import create_run, drive, echo_answer, hosted, publish

pytestmark = pytest.mark.django_db(transaction=True)


def test_run_completes_and_grades_every_case(personas):
    version = publish(personas.workspace, cases=4)
    with FakeAgent() as agent:
        agent.default = ok(echo_answer)
        agent.queue(ok({"final_output": "wrong"}), case="c3")
        dep = hosted(personas.workspace, agent.url)
        run = drive(create_run(personas.workspace, version, [dep]))
    assert run.status == "completed"
    lane = RunLane.objects.get(run=run)
    assert (lane.passed, lane.failed, lane.pending) == (3, 1, 0)
    assert Attempt.objects.filter(item__run=run).count() == 4
    assert GradeRevision.objects.filter(item__run=run).count() == 0  # nothing superseded yet
    statuses = dict(RunItem.objects.filter(run=run).values_list("case_key", "status"))
    assert statuses == {"c0": "PASSED", "c1": "PASSED", "c2": "PASSED", "c3": "FAILED"}
    assert run.stats["lanes"][0]["pass_rate"] == 0.75
    assert run.stats["ranking"][0]["deployment"] == "agent"
    assert "eval_feedback" in run.stats
    assert RunItem.objects.get(run=run, case_key="c0").grade["status"] == "PASSED"
    # the agent saw the rendered instructions and never the expectations
    body = agent.requests_for("c1")[0].json
    assert body["challenge"]["instructions"] == "Say answer-1"
    assert "expectations" not in str(body["case"])


def test_failure_modes_end_in_the_right_categories(personas):
    version = publish(personas.workspace, cases=7)
    with FakeAgent() as agent:
        agent.default = ok(echo_answer)
        agent.queue(server_error(503), case="c0")
        agent.queue(rate_limited("0"), rate_limited("0"), case="c1")
        agent.queue(invalid_json(), case="c2")
        agent.queue(raw('{"error": "no"}', status=404), case="c3")
        agent.queue(hang(), case="c4")
        agent.queue(huge(), case="c5")
        agent.queue(server_error(500), server_error(500), server_error(500), case="c6")
        dep = hosted(personas.workspace, agent.url, timeout_seconds=1, max_attempts=3)
        run = drive(create_run(personas.workspace, version, [dep]))
    assert run.status == "completed"
    items = {i.case_key: i for i in RunItem.objects.filter(run=run)}
    cats = {
        k: [a.category for a in Attempt.objects.filter(item=i).order_by("number")] for k, i in items.items()
    }
    assert cats["c0"] == ["infra_error", "ok"] and items["c0"].status == "PASSED"
    assert cats["c1"] == ["infra_error", "infra_error", "ok"] and items["c1"].status == "PASSED"
    assert cats["c2"] == ["config_error"] and items["c2"].display_status == "config_error"
    assert cats["c3"] == ["config_error"] and Attempt.objects.get(item=items["c3"]).status_code == 404
    assert cats["c4"] == ["infra_error", "ok"]
    assert Attempt.objects.filter(item=items["c4"], number=1).get().error_code == "timeout"
    assert cats["c5"] == ["config_error"]
    assert len(Attempt.objects.get(item=items["c5"]).body_excerpt) <= 2048
    assert cats["c6"] == ["infra_error"] * 3 and items["c6"].display_status == "infra_error"
    lane = RunLane.objects.get(run=run)
    assert (lane.passed, lane.config_error, lane.infra_error, lane.pending) == (3, 3, 1, 0)


def test_answers_postgresql_cannot_store_as_sent_are_stored_cleaned(personas):
    """PostgreSQL's jsonb refuses NUL and lone surrogates, and orjson refuses integers beyond
    64 bits: one such answer used to fail its whole batch's write (every item of it claimed
    again and again). NUL and lone surrogates become U+FFFD, big integers stay exact, and
    infinities become null (runs.storable)."""
    from runs import tasks
    from runs.services.operations import run_rescore

    version = publish(personas.workspace, cases=4)
    with FakeAgent() as agent:
        agent.default = ok(echo_answer)
        agent.queue(ok({"final_output": "answer-0\u0000", "extra": {"k\u0000": ["v\u0000"]}}), case="c0")
        agent.queue(raw('{"error": "no\\u0000pe"}', status=404), case="c1")
        agent.queue(
            raw('{"final_output": "answer-2\\ud800", "id": 123456789012345678901234567890, "f": 1e400}'),
            case="c2",
        )
        dep = hosted(personas.workspace, agent.url)
        run = drive(create_run(personas.workspace, version, [dep]))
        assert run.status == "completed"
        items = {i.case_key: i for i in RunItem.objects.filter(run=run)}
        # contains "answer-<n>": the stored text differs, the verdicts do not
        assert [items[k].status for k in ("c0", "c2", "c3")] == ["PASSED"] * 3
        response = items["c0"].evidence["response"]
        assert response["final_output"] == "answer-0\ufffd"
        assert response["extra"] == {"k\ufffd": ["v\ufffd"]}
        assert "\x00" not in str(items["c0"].grade)
        assert items["c1"].display_status == "config_error"
        response = items["c2"].evidence["response"]
        assert response["final_output"] == "answer-2\ufffd"
        assert (response["id"], response["f"]) == (123456789012345678901234567890, None)
        # the stored evidence re-grades to the same verdicts
        run_rescore(run=run)
        assert tasks.rescore_run(str(run.pk), 2) == 3
    statuses = dict(RunItem.objects.filter(run=run).values_list("case_key", "status"))
    assert [statuses[k] for k in ("c0", "c2", "c3")] == ["PASSED"] * 3


def test_deeply_nested_replies_end_as_config_errors_or_are_stored_cut(personas):
    """A reply nested deeper than json can parse (it raises RecursionError) used to take down
    the dispatcher; one it can parse but orjson cannot write failed its batch's write."""
    from runs.storable import TOO_DEEP

    version = publish(personas.workspace, cases=3)
    with FakeAgent() as agent:
        agent.default = ok(echo_answer)
        agent.queue(raw('{"final_output": "answer-0", "x": ' + "[" * 5000 + "]" * 5000 + "}"), case="c0")
        agent.queue(raw('{"final_output": "answer-1", "x": ' + "[" * 900 + "]" * 900 + "}"), case="c1")
        dep = hosted(personas.workspace, agent.url)
        run = drive(create_run(personas.workspace, version, [dep]))
    assert run.status == "completed"
    items = {i.case_key: i for i in RunItem.objects.filter(run=run)}
    assert items["c0"].display_status == "config_error"
    attempt = Attempt.objects.get(item=items["c0"])
    assert (attempt.error_code, attempt.error) == (
        "invalid_json",
        "the response body's JSON is nested too deeply to read",
    )
    assert [items[k].status for k in ("c1", "c2")] == ["PASSED", "PASSED"]
    depth, value = 0, items["c1"].evidence["response"]["x"]
    while isinstance(value, list):
        depth, value = depth + 1, value[0]
    assert value == TOO_DEEP and 240 < depth < 250


def test_a_crash_of_ours_costs_one_item_not_the_slice(personas, monkeypatch, caplog):
    """Unknown bugs too: an executor that raises is that item's config_error (internal_error,
    not retried, logged); a grade document that raises while it is built (claims and critique
    are built outside grade_case's net) is that item's ERROR / evaluator_error. The other
    items of the slice are graded as usual."""
    from grading.engine.grade import CaseGrade
    from runs.executors.hosted_http import HostedHttpExecutor

    execute, to_dict = HostedHttpExecutor.execute, CaseGrade.to_dict

    async def flaky_execute(self, request, *, client):
        if request.case.key == "c0":
            raise KeyError("boom")
        return await execute(self, request, client=client)

    def flaky_to_dict(self):
        if self.case.get("case_key") == "c1" and self.reason_code != "evaluator_error":
            raise ZeroDivisionError("bad claims")
        return to_dict(self)

    monkeypatch.setattr(HostedHttpExecutor, "execute", flaky_execute)
    monkeypatch.setattr(CaseGrade, "to_dict", flaky_to_dict)
    monkeypatch.setattr("runs.recording.case_findings", lambda *args: [])  # no baseline probes here
    version = publish(personas.workspace, cases=3)
    with FakeAgent() as agent:
        agent.default = ok(echo_answer)
        dep = hosted(personas.workspace, agent.url, max_attempts=3)
        run = drive(create_run(personas.workspace, version, [dep]))
    assert run.status == "completed"
    items = {i.case_key: i for i in RunItem.objects.filter(run=run)}
    attempts = list(Attempt.objects.filter(item=items["c0"]))
    assert [(a.category, a.error_code) for a in attempts] == [("config_error", "internal_error")]
    assert "KeyError" in attempts[0].error
    assert (items["c1"].status, items["c1"].grade["reason_code"]) == ("ERROR", "evaluator_error")
    assert "ZeroDivisionError: bad claims" in items["c1"].grade["message"]
    assert items["c2"].status == "PASSED"
    assert "the hosted_http executor crashed" in caplog.text and "grading crashed" in caplog.text


def test_a_result_the_database_refuses_costs_that_item_not_its_batch(personas, monkeypatch, caplog):
    """A value PostgreSQL refuses that nothing before the write anticipated (here: a reason
    code and an attempt's error code longer than their varchar(100), as a future bug could
    make them) used to fail the whole batch's write: the slice ended and every item of the
    batch was claimed again and again. The writer now writes the batch in halves until the
    item at fault is alone, and records it as unstorable: done, ERROR / evaluator_error when
    it was graded (never the agent's failure), without evidence, attempts without their texts."""
    from runs import recording

    prepare, attempt_rows = recording._prepare, recording._attempt_rows

    def bad_prepare(r, revision, now):
        item = prepare(r, revision, now)
        if r.key.case_key == "c1" and "could not be stored" not in str(r.grade):
            item.reason_code = "x" * 101
        return item

    def bad_attempt_rows(item_id, result):
        rows = attempt_rows(item_id, result)
        if result.key.case_key == "c2" and "could not be stored" not in rows[0][5]:
            rows[0] = (*rows[0][:4], "y" * 101, *rows[0][5:])
        return rows

    monkeypatch.setattr(recording, "_prepare", bad_prepare)
    monkeypatch.setattr(recording, "_attempt_rows", bad_attempt_rows)
    version = publish(personas.workspace, cases=6)
    with FakeAgent() as agent:
        agent.default = ok(echo_answer)
        agent.queue(server_error(500), case="c2")
        agent.queue(ok({"final_output": "wrong"}), case="c3")
        dep = hosted(personas.workspace, agent.url, max_attempts=1)
        run = create_run(personas.workspace, version, [dep])
        lane = RunLane.objects.get(run=run)
        result = dispatch_lane(lane.pk, time_slice=10)
        run.refresh_from_db()
        calls = {f"c{n}": len(agent.requests_for(f"c{n}")) for n in range(6)}
    assert run.status == "completed"
    assert calls == dict.fromkeys(calls, 1)  # one slice, no item claimed again
    assert result.recorded == 6 and sorted(result.unstorable) == sorted(
        RunItem.objects.filter(run=run, case_key__in=["c1", "c2"]).values_list("id", flat=True)
    )
    items = {i.case_key: i for i in RunItem.objects.filter(run=run)}
    assert {k: i.state for k, i in items.items()} == dict.fromkeys(items, "done")
    c1 = items["c1"]
    assert (c1.status, c1.outcome_class, c1.reason_code) == ("ERROR", "evaluator_error", "evaluator_error")
    assert c1.grade["message"].startswith("the result could not be stored: StringDataRightTruncation")
    assert c1.evidence is None
    attempt = Attempt.objects.get(item=c1)
    assert (attempt.category, attempt.body_excerpt) == ("ok", "")
    assert attempt.error == "the result could not be stored: StringDataRightTruncation"
    c2 = items["c2"]
    assert c2.display_status == "infra_error" and c2.grade is None
    attempt = Attempt.objects.get(item=c2)
    assert (attempt.category, attempt.status_code, attempt.error_code) == ("infra_error", 500, "server_error")
    assert attempt.error == "the result could not be stored: StringDataRightTruncation"
    assert [items[k].status for k in ("c0", "c4", "c5")] == ["PASSED"] * 3
    assert items["c3"].status == "FAILED"
    lane.refresh_from_db()
    assert (lane.passed, lane.failed, lane.errored, lane.infra_error, lane.pending) == (3, 1, 1, 1, 0)
    assert caplog.text.count("its result could not be written") == 2


def test_a_write_that_lost_its_connection_is_written_again_on_a_new_one(personas, monkeypatch):
    """A database restart under the writer: the batch is written on a new connection, the
    finished calls are not made again and the slice goes on."""
    import psycopg

    from runs import dispatch_threads

    record, calls = dispatch_threads.record_results, []

    def lost_once(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        return record(*args, **kwargs)

    monkeypatch.setattr(dispatch_threads, "record_results", lost_once)
    monkeypatch.setattr(dispatch_threads, "RECONNECT_DELAYS", (0.01, 0.01))
    version = publish(personas.workspace, cases=6)
    with FakeAgent() as agent:
        agent.default = ok(echo_answer)
        dep = hosted(personas.workspace, agent.url, max_in_flight=3)
        run = create_run(personas.workspace, version, [dep])
        result = dispatch_lane(RunLane.objects.get(run=run).pk, time_slice=10)
        assert agent.calls == 6
    run.refresh_from_db()
    assert (result.reason, result.recorded, run.status) == ("lane drained", 6, "completed")
    assert len(calls) >= 2


def test_a_failed_slice_gives_its_claims_back_at_once(personas, monkeypatch):
    """A slice that fails (here its writer's database connection stays lost) used to leave
    its items claimed until their deadlines (an item's timeout times its attempts: minutes
    for a slow agent). It gives them back and asks to be dispatched again; the items are
    then graded once each."""
    import psycopg

    from runs import dispatch_threads

    record, lost = dispatch_threads.record_results, [True]

    def lost_connection(*args, **kwargs):
        if lost[0]:
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        return record(*args, **kwargs)

    monkeypatch.setattr(dispatch_threads, "record_results", lost_connection)
    monkeypatch.setattr(dispatch_threads, "RECONNECT_DELAYS", (0.01, 0.01))
    version = publish(personas.workspace, cases=6)
    with FakeAgent() as agent:
        agent.default = ok(echo_answer)
        dep = hosted(personas.workspace, agent.url, max_in_flight=3, max_attempts=3)
        run = create_run(personas.workspace, version, [dep])
        lane = RunLane.objects.get(run=run)
        requeued = []
        with pytest.raises(psycopg.OperationalError):
            dispatch_lane(lane.pk, time_slice=10, requeue=requeued.append)
        assert requeued == [lane.pk]
        assert not RunItem.objects.filter(run=run, state="claimed").exists()
        assert RunItem.objects.filter(run=run, state="pending").count() >= 1
        assert RunLane.objects.get(pk=lane.pk).dispatch_until is None
        lost[0] = False  # the database is back
        run = drive(run)
        sent = [(r.json["item_id"], r.json["attempt"]) for r in agent.requests]
    assert run.status == "completed"
    assert RunItem.objects.filter(run=run, status="PASSED").count() == 6
    # the items given back went out again under new attempt numbers, never a repeated one
    assert len(sent) > 6 and len(set(sent)) == len(sent)
    attempts = Attempt.objects.filter(item__run=run)
    assert attempts.filter(category="ok").count() == 6  # graded once each
    assert set(attempts.exclude(category="ok").values_list("category", "error_code")) == {
        ("infra_error", "dispatcher_failed")
    }


def test_an_item_whose_slices_keep_failing_ends_infra_error(personas, monkeypatch):
    """Giving claims back cannot loop: an item claimed max_attempts times whose slice failed
    ends infra_error (dispatcher_failed), as a claim that keeps expiring does."""
    from runs import dispatch

    claim = dispatch.claim_items
    version = publish(personas.workspace, cases=2)
    with FakeAgent() as agent:
        agent.default = ok(echo_answer)
        dep = hosted(personas.workspace, agent.url, max_in_flight=2, max_attempts=2)
        run = create_run(personas.workspace, version, [dep])
        lane = RunLane.objects.get(run=run)

        def claim_then_fail(**kwargs):
            if kwargs["finished"] or not claim_then_fail.first:
                raise RuntimeError("a bug of ours")
            claim_then_fail.first = False
            return claim(**kwargs)

        monkeypatch.setattr(dispatch, "claim_items", claim_then_fail)
        for _ in range(2):  # each slice claims both items, then fails
            claim_then_fail.first = True
            with pytest.raises(RuntimeError):
                dispatch_lane(lane.pk, time_slice=10)
        monkeypatch.undo()
    items = list(RunItem.objects.filter(run=run))
    assert [(i.state, i.last_category, i.claims) for i in items] == [("done", "infra_error", 2)] * 2
    for item in items:  # one attempt per lost claim, each keeping the numbers it may have sent
        assert list(item.attempts.values_list("number", "error_code", "error")) == [
            (
                1,
                "dispatcher_failed",
                "the item's dispatcher failed while it held the item; attempts 1 to 2 may have"
                " reached the agent, what came back is unknown; the item goes out again",
            ),
            (
                3,
                "dispatcher_failed",
                "the item's dispatcher failed 2 times while it held the item; giving up"
                " (attempts 3 to 4 may have reached the agent, what came back is unknown)",
            ),
        ]
        assert item.attempt_count == 4
    run.refresh_from_db()
    lane.refresh_from_db()
    assert (lane.infra_error, lane.pending, run.items_open) == (2, 0, 0)
    # closed at once, not when the next sweep finds it (the failed slice never reached the
    # closing check; a deployment without a beat left the run running for good)
    assert (run.status, lane.status) == ("completed", "completed")


@pytest.mark.parametrize(
    "metrics",
    [
        {"input_tokens": 10**30, "output_tokens": -5, "cost_usd": 1.7e308, "latency_ms": "1e400"},
        {"input_tokens": 2**63, "output_tokens": 1.5, "total_tokens": 10**40, "ttft_ms": 1e308},
    ],
)
def test_metrics_no_reply_can_have_used_are_dropped(personas, metrics):
    """A reply's numbers are anything JSON allows: token counts beyond 64 bits failed the
    batch's write, a cost of 1e308 overflowed the run's scoring, int(inf) raised. Counts above
    10**12, costs above 1e9 USD, times above 1e10 ms and negative values read as not reported."""
    version = publish(personas.workspace, cases=3)
    with FakeAgent() as agent:
        agent.default = ok(echo_answer)
        for case in ("c0", "c1"):
            agent.queue(ok({"final_output": f"answer-{case[1]}", "metrics": metrics}), case=case)
        agent.queue(
            ok({"final_output": "answer-2", "metrics": {"input_tokens": 7, "cost_usd": 0.5}}), case="c2"
        )
        dep = hosted(personas.workspace, agent.url)
        run = drive(create_run(personas.workspace, version, [dep]))
    assert run.status == "completed"
    rows = dict(RunItem.objects.filter(run=run).values_list("case_key", "input_tokens"))
    assert rows == {"c0": None, "c1": None, "c2": 7}
    assert RunItem.objects.get(run=run, case_key="c0").cost_usd is None


def _peak_tracker(delay: float):
    state = {"active": 0, "peak": 0}

    async def behaviour(request: web.Request, recorded, agent) -> web.StreamResponse:
        state["active"] += 1
        state["peak"] = max(state["peak"], state["active"])
        try:
            await asyncio.sleep(delay)
        finally:
            state["active"] -= 1
        return web.json_response(echo_answer(recorded))

    return behaviour, state


def test_max_in_flight_holds_across_racing_dispatchers_and_runs(personas):
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("concurrent dispatchers are a PostgreSQL setup (SQLite runs one worker process)")
    version = publish(personas.workspace, cases=10)
    behaviour, state = _peak_tracker(0.05)
    with FakeAgent() as agent:
        agent.default = behaviour
        dep = hosted(personas.workspace, agent.url, max_in_flight=3)
        runs = [create_run(personas.workspace, version, [dep]) for _ in range(2)]
        lanes = [RunLane.objects.get(run=r) for r in runs]
        errors: list[BaseException] = []

        def work(lane_id: int) -> None:
            from django.db import connection

            try:
                dispatch_lane(lane_id, time_slice=30)
            except BaseException as exc:  # surfaced below
                errors.append(exc)
            finally:
                connection.close()

        threads = [threading.Thread(target=work, args=(lane.pk,)) for lane in lanes + lanes]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
    assert not errors
    assert state["peak"] <= 3
    assert state["peak"] >= 2  # they did run concurrently
    for run in runs:
        run.refresh_from_db()
        assert run.status == "completed"
        assert RunItem.objects.filter(run=run, status="PASSED").count() == 10
    assert agent.calls == 20  # no item was called twice


def test_a_claim_counts_only_unfinished_claims_against_the_limits(personas):
    version = publish(personas.workspace, cases=6)
    dep = hosted(personas.workspace, "http://127.0.0.1:9/agent", max_in_flight=3)
    run = create_run(personas.workspace, version, [dep], max_in_flight=2)
    lane = RunLane.objects.get(run=run)
    first = claim_items(lane=lane, run=run, deployment=dep, owner="a")
    assert len(first) == 2  # the run's override (2) is below the deployment's limit (3)
    assert claim_items(lane=lane, run=run, deployment=dep, owner="a") == []
    # another owner's finished ids free nothing; this owner's free their slots
    assert claim_items(lane=lane, run=run, deployment=dep, owner="b", finished=[first[0]["id"]]) == []
    more = claim_items(lane=lane, run=run, deployment=dep, owner="a", finished=[first[0]["id"]], wanted=5)
    assert len(more) == 1 and more[0]["id"] not in {r["id"] for r in first}
    assert claim_items(
        lane=lane, run=run, deployment=dep, owner="a", finished=[r["id"] for r in first], wanted=1
    )
    assert RunItem.objects.filter(run=run, state=ItemState.CLAIMED).count() == 4


def test_recording_is_idempotent_and_owner_guarded(personas):
    version = publish(personas.workspace, cases=2)
    dep = hosted(personas.workspace, "http://127.0.0.1:9/agent")
    run = create_run(personas.workspace, version, [dep])
    lane = RunLane.objects.get(run=run)
    rows = claim_items(lane=lane, run=run, deployment=dep, owner="first")
    assert len(rows) == 2
    # the sweeper hands item 0 to another owner
    RunItem.objects.filter(pk=rows[0]["id"]).update(claim_owner="second")
    results = [ItemResult(item_id=r["id"], category="infra_error") for r in rows]
    written = record_results(lane.pk, results, owner="first", revision=1)
    assert written == [rows[1]["id"]]
    assert record_results(lane.pk, results, owner="first", revision=1) == []  # redelivered
    lane.refresh_from_db()
    assert (lane.infra_error, lane.pending) == (1, 1)
    assert Run.objects.get(pk=run.pk).items_open == 1
    assert RunItem.objects.get(pk=rows[0]["id"]).state == ItemState.CLAIMED


def test_probe_findings_are_computed_once_per_run_and_used_by_grading(
    personas, enqueued, django_capture_on_commit_callbacks
):
    from runs.probing import probe_run
    from runs.services.runs import enqueue_run

    version = publish(personas.workspace, cases=2)
    with FakeAgent() as agent:
        agent.default = ok(echo_answer)
        dep = hosted(personas.workspace, agent.url)
        inline = drive(create_run(personas.workspace, version, [dep]))  # findings computed in the dispatcher
        run = create_run(personas.workspace, version, [dep])
        enqueue_run(run.pk)
        assert enqueued.names().count("runs.probe_run") == 1
        assert probe_run(run.pk) == "computed"
        run.refresh_from_db()
        assert set(run.case_findings) == {"echo\x1fc0", "echo\x1fc1"}
        assert run.case_findings["echo\x1fc0"][0]["finding"] == "trivially_satisfied"
        assert probe_run(run.pk) == "nothing to do"
        # A later run of the version copies them when it is created and is not probed again.
        with django_capture_on_commit_callbacks(execute=True):
            again = create_run(personas.workspace, version, [dep], enqueue=True)
        assert Run.objects.get(pk=again.pk).case_findings == run.case_findings
        assert enqueued.names().count("runs.probe_run") == 1  # the first run's only
        assert enqueued.names().count("runs.dispatch_lane") == 2
        assert probe_run(again.pk) == "nothing to do"
        # A run created before any other stored findings copies them in its probe task.
        late = create_run(personas.workspace, version, [dep])
        Run.objects.filter(pk=late.pk).update(case_findings=None)
        assert probe_run(late.pk) == "copied"
        assert Run.objects.get(pk=late.pk).case_findings == run.case_findings
        run = drive(run)
    stored = RunItem.objects.get(run=run, case_key="c0").grade["eval_feedback"]
    computed = RunItem.objects.get(run=inline, case_key="c0").grade["eval_feedback"]
    assert stored == computed and stored["suggestions"]


def test_the_run_override_lowers_the_limit(personas):
    version = publish(personas.workspace, cases=4)
    behaviour, state = _peak_tracker(0.05)
    with FakeAgent() as agent:
        agent.default = behaviour
        dep = hosted(personas.workspace, agent.url, max_in_flight=8)
        run = drive(create_run(personas.workspace, version, [dep], max_in_flight=1))
    assert run.status == "completed" and state["peak"] == 1


def test_a_rate_limit_asking_for_an_absurd_wait_is_that_items_infra_error(personas):
    """A 429 whose Retry-After is past any deadline (3e11 s; 400 digits) ends its item
    infra_error, rate_limited, not retried; the other items of the slice are called once.
    It used to raise OverflowError: in next_delay (the whole slice failed, its claims went
    back and every item in flight was called again) or in the executor (a config_error,
    internal_error: a rate limit counted as the deployment's misconfiguration)."""
    from tests.fakes.agent_server import slow

    version = publish(personas.workspace, cases=3)
    with FakeAgent() as agent:
        agent.default = ok(echo_answer)
        agent.queue(rate_limited("300000000000"), case="c0")
        agent.queue(rate_limited("9" * 400), case="c1")
        agent.queue(slow(0.5, ok(echo_answer)), case="c2")
        dep = hosted(personas.workspace, agent.url, max_attempts=3)
        run = drive(create_run(personas.workspace, version, [dep]))
        calls = {key: agent.calls_for(key) for key in ("c0", "c1", "c2")}
    assert run.status == "completed"
    items = {i.case_key: i for i in RunItem.objects.filter(run=run)}
    for key in ("c0", "c1"):
        attempts = [
            (a.category, a.error_code, a.status_code) for a in Attempt.objects.filter(item=items[key])
        ]
        assert attempts == [("infra_error", "rate_limited", 429)], key
        assert items[key].display_status == "infra_error"
    assert items["c2"].status == "PASSED"
    assert calls == {"c0": 1, "c1": 1, "c2": 1}
    lane = RunLane.objects.get(run=run)
    assert (lane.passed, lane.infra_error, lane.config_error, lane.pending) == (1, 2, 0, 0)


def test_an_endless_retry_after_is_stored_as_null_on_every_database():
    """PostgreSQL's JSON batch stored an infinite Retry-After as null, SQLite's plain
    parameters as Infinity (then served as a non-JSON ``Infinity`` by the attempt lists)."""
    from runs.executors.base import AttemptCategory, AttemptOutcome
    from runs.recording import _attempt_rows

    result = ItemResult(
        item_id=1,
        attempts=[
            AttemptOutcome(AttemptCategory.INFRA_ERROR, status_code=429, retry_after=float("inf")),
            AttemptOutcome(AttemptCategory.INFRA_ERROR, status_code=429, retry_after=3e11),
        ],
    )
    assert [row[8] for row in _attempt_rows(1, result)] == [None, 3e11]


def test_every_call_the_limit_allows_gets_a_connection_at_once(personas, monkeypatch):
    """The dispatcher's outbound client pooled 256 connections while a deployment may allow
    512 calls in flight: the calls past the pool waited for a connection inside their
    timeout, and a slow but healthy agent's items ended infra_error (timeout), sent too late
    to be answered in time. Here the pool is made smaller than the limit to show it."""
    from agentclash_site.lib.outbound import OutboundClient
    from tests.fakes.agent_server import slow

    monkeypatch.setitem(OutboundClient.__init__.__kwdefaults__, "pool_limit", 2)
    version = publish(personas.workspace, cases=4)
    with FakeAgent() as agent:
        agent.default = slow(1.5, ok(echo_answer))
        dep = hosted(personas.workspace, agent.url, timeout_seconds=2, max_attempts=1, max_in_flight=4)
        run = drive(create_run(personas.workspace, version, [dep]))
        assert agent.calls == 4
    assert run.status == "completed"
    lane = RunLane.objects.get(run=run)
    assert (lane.passed, lane.infra_error) == (4, 0)


def test_a_slice_closes_its_writer_and_keeper_even_when_its_loop_fails_to_close(personas, monkeypatch):
    """``loop.close()`` raising (its HTTP client not closed in time) skipped the writer's and
    the claim keeper's close; each part is closed now, and the failure still ends the slice."""
    from runs import dispatch_threads

    closed: list[str] = []
    real_loop_close = dispatch_threads.LoopThread.close
    real_writer_close = dispatch_threads.Writer.close
    real_keeper_close = dispatch_threads.ClaimKeeper.close

    def loop_close(self):
        real_loop_close(self)
        closed.append("loop")
        raise RuntimeError("the client did not close in time")

    def writer_close(self):
        closed.append("writer")
        real_writer_close(self)

    def keeper_close(self):
        closed.append("keeper")
        real_keeper_close(self)

    monkeypatch.setattr(dispatch_threads.LoopThread, "close", loop_close)
    monkeypatch.setattr(dispatch_threads.Writer, "close", writer_close)
    monkeypatch.setattr(dispatch_threads.ClaimKeeper, "close", keeper_close)
    version = publish(personas.workspace, cases=3)
    with FakeAgent() as agent:
        agent.default = ok(echo_answer)
        dep = hosted(personas.workspace, agent.url)
        run = create_run(personas.workspace, version, [dep])
        lane = RunLane.objects.get(run=run)
        with pytest.raises(RuntimeError, match="did not close in time"):
            dispatch_lane(lane.pk, time_slice=30)
    assert closed == ["keeper", "loop", "writer"]
    assert sorted(RunItem.objects.filter(run=run).values_list("state", "status")) == [("done", "PASSED")] * 3


def test_a_second_dispatcher_leaves_a_lane_whose_lease_is_live(personas):
    """A dispatch task sent while the lane's own waited in a busy queue (the sweeper's) must
    not start a second chain of slices: it leaves the lane, claiming nothing and sending no
    task, while the live dispatcher's lease holds; once that lease lapses it takes the lane."""
    from datetime import timedelta

    from django.utils import timezone

    version = publish(personas.workspace, cases=3)
    with FakeAgent() as agent:
        dep = hosted(personas.workspace, agent.url)
        run = create_run(personas.workspace, version, [dep])
        lane = RunLane.objects.get(run=run)
        RunLane.objects.filter(pk=lane.pk).update(dispatch_until=timezone.now() + timedelta(seconds=60))
        sent: list[int] = []
        result = dispatch_lane(lane.pk, time_slice=5, requeue=sent.append)
        assert (result.claimed, sent, result.reason) == (0, [], "another dispatcher holds the lane's lease")
        assert RunItem.objects.filter(run=run, state=ItemState.PENDING).count() == 3
        assert agent.calls == 0

        RunLane.objects.filter(pk=lane.pk).update(dispatch_until=timezone.now() - timedelta(seconds=1))
        result = dispatch_lane(lane.pk, time_slice=5, requeue=sent.append)
    assert result.claimed == 3 and result.reason == "lane drained"
    assert RunLane.objects.get(pk=lane.pk).dispatch_until is None
    run.refresh_from_db()
    assert run.status == "completed"


def test_a_slice_taking_a_lapsed_lease_returns_the_lost_dispatchers_claims_at_once(personas):
    """A killed worker's claims held the lane's in-flight slots until their deadlines (each
    attempt's timeout times max_attempts plus the margin: ~7 minutes with the defaults) and the
    run stood still. On PostgreSQL a live dispatcher renews its lease every few seconds, so the
    slice that takes a lapsed lease gives those claims back at once and goes on."""
    from datetime import timedelta

    from django.db import connection
    from django.utils import timezone

    if connection.vendor != "postgresql":
        pytest.skip("the lease's liveness comes from the ClaimKeeper thread, a PostgreSQL setup")
    version = publish(personas.workspace, cases=4)
    with FakeAgent() as agent:
        agent.default = ok(echo_answer)
        dep = hosted(personas.workspace, agent.url, max_in_flight=2)
        run = create_run(personas.workspace, version, [dep])
        lane = RunLane.objects.get(run=run)
        lost = claim_items(lane=lane, run=run, deployment=dep, owner="killed-worker")
        assert len(lost) == 2  # every slot of the deployment
        RunLane.objects.filter(pk=lane.pk).update(dispatch_until=timezone.now() - timedelta(seconds=1))
        result = dispatch_lane(lane.pk, time_slice=10)
    assert (result.claimed, result.reason) == (4, "lane drained")
    run.refresh_from_db()
    assert run.status == "completed"
    assert RunItem.objects.filter(run=run, status="PASSED").count() == 4
    assert agent.calls == 4
    for item in RunItem.objects.filter(pk__in=[row["id"] for row in lost]):
        attempts = list(item.attempts.order_by("number").values_list("category", "error_code"))
        assert attempts[0] == ("infra_error", "claim_expired") and attempts[-1][0] == "ok"
