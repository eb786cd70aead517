"""The n_wise pass keeps each item's pre-rank grade as a GradeRevision, numbered like a rescore."""

from __future__ import annotations

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
