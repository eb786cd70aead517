"""The n_wise pass keeps each item's pre-rank grade as a GradeRevision, numbered like a rescore."""

from __future__ import annotations

import pytest

from runs.models import GradeRevision, Run, RunItem
from runs.services.operations import run_rescore
from runs.tasks import rescore_run
from tests.fakes.agent_server import FakeAgent, ok
from tests.fakes.judge_provider import FakeJudgeProvider, blocks, by_mode, content, rank, verdict
from tests.grading.judges.test_judge_runs import publish_with_judges, setup_provider
from tests.runs.runfactory import create_run, drive, hosted


def _ranked_run(ws, fake):
    setup_provider(ws, fake)
    judges = [{"key": "best", "mode": "n_wise", "model": "gpt-4o-mini", "samples": 1, "prompt": "most exact"}]
    version = publish_with_judges(ws, judges)

    def n_wise(body, path):
        found = dict(blocks(body))
        good = next(bid.split("/")[0] for bid, text in found.items() if not text.startswith("maybe"))
        return rank(lambda labels: [good] + [x for x in labels if x != good])(body, path)

    fake.default = by_mode(
        n_wise=n_wise,
        assertion=verdict({"pass": True}),
        claims=content('{"claims": []}'),
        other=content("{}"),
    )
    with FakeAgent() as agent:
        word = lambda rec: rec.json["challenge"]["instructions"].split()[-1]  # noqa: E731
        agent.route("/good", ok(lambda rec: {"final_output": word(rec)}))
        agent.route("/meh", ok(lambda rec: {"final_output": "maybe " + word(rec)}))
        deps = [
            hosted(ws, agent.url_for("/good"), name="good"),
            hosted(ws, agent.url_for("/meh"), name="meh"),
        ]
        return drive(create_run(ws, version, deps))


def _best(grade):
    return next(e for e in grade["expectations"] if e["key"] == "best")


def test_the_pre_rank_grade_is_kept_and_a_rescore_numbers_past_it(personas):
    with FakeJudgeProvider() as fake:
        run = _ranked_run(personas.workspace, fake)
        assert run.status == "completed" and run.scoring_revision == 1
        items = list(RunItem.objects.filter(run=run).order_by("id"))
        assert len(items) == 4 and {i.scoring_revision for i in items} == {2}
        for item in items:
            old = GradeRevision.objects.get(item=item)
            assert old.revision == 1 and _best(old.grade)["reason_code"] == "pending_rank"
            assert _best(item.grade)["reason_code"] != "pending_rank"
        run = run_rescore(run=run, enqueue=False)
        assert run.scoring_revision == 3  # past every item's revision: numbers never collide
        assert rescore_run(str(run.pk), 3) == 4
    run = Run.objects.get(pk=run.pk)
    assert (run.status, run.scoring_revision, run.stats["scoring_revision"]) == ("completed", 3, 3)
    item = RunItem.objects.get(pk=items[0].pk)
    # 1: pre-rank, 2: ranked, 3: the rescore's pre-rank; the item holds the re-ranked grade
    assert list(GradeRevision.objects.filter(item=item).values_list("revision", flat=True)) == [1, 2, 3]
    assert item.scoring_revision == 4 and _best(item.grade)["reason_code"] != "pending_rank"


@pytest.mark.django_db(transaction=True)
def test_a_cancel_during_the_n_wise_pass_stops_it_and_changes_no_grade(personas):
    """Cancelling a run in ``scoring`` (its n_wise pass running: the judge calls cost money)
    left the pass going: every later case was still ranked and the critique asked, and the
    ranked grades, lane counters and spend were written into the cancelled run, whose
    figures then changed after the cancel. Now the pass stops at the cancel and writes
    nothing more (the answer that came back for the call in flight included)."""
    import threading

    from django.db import connection

    from runs.models import RunLane
    from runs.services.operations import run_cancel
    from tests.fakes.judge_provider import mode_of

    ws = personas.workspace
    with FakeJudgeProvider() as fake:
        setup_provider(ws, fake)
        judges = [
            {"key": "best", "mode": "n_wise", "model": "gpt-4o-mini", "samples": 1, "prompt": "most exact"}
        ]
        version = publish_with_judges(ws, judges)
        holder = {}

        def cancel_then_rank(body, path):
            def cancel():
                try:
                    run_cancel(run=Run.objects.get(pk=holder["run"].pk))
                finally:
                    connection.close()

            if not holder.get("cancelled"):
                holder["cancelled"] = True
                holder["lanes"] = None
                thread = threading.Thread(target=cancel)
                thread.start()
                thread.join()
                holder["lanes"] = list(RunLane.objects.filter(run=holder["run"]).order_by("id").values())
                connection.close()
            return rank(lambda labels: sorted(labels))(body, path)

        fake.default = by_mode(
            n_wise=cancel_then_rank,
            assertion=verdict({"pass": True}),
            claims=content('{"claims": []}'),
            other=content("{}"),
        )
        with FakeAgent() as agent:
            word = lambda rec: rec.json["challenge"]["instructions"].split()[-1]  # noqa: E731
            agent.route("/good", ok(lambda rec: {"final_output": word(rec)}))
            agent.route("/meh", ok(lambda rec: {"final_output": "maybe " + word(rec)}))
            deps = [
                hosted(ws, agent.url_for("/good"), name="good"),
                hosted(ws, agent.url_for("/meh"), name="meh"),
            ]
            holder["run"] = create_run(ws, version, deps)
            run = drive(holder["run"])
        modes = [mode_of(body) for body in fake.requests]
    assert run.status == "cancelled"
    assert modes.count("n_wise") == 1  # two cases: the second was never ranked
    assert "critique" not in modes
    items = list(RunItem.objects.filter(run=run))
    assert len(items) == 4 and {i.scoring_revision for i in items} == {1}
    assert all(_best(i.grade)["reason_code"] == "pending_rank" for i in items)
    assert not GradeRevision.objects.filter(item__run=run).exists()
    assert list(RunLane.objects.filter(run=run).order_by("id").values()) == [
        {**lane, "status": "cancelled", "finished_at": after["finished_at"], "stats": after["stats"]}
        for lane, after in zip(
            holder["lanes"], RunLane.objects.filter(run=run).order_by("id").values(), strict=True
        )
    ]
