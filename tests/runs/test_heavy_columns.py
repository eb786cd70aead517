"""The large columns (a run's stored findings, a version's manifest and source: megabytes for
a big pack) are never read whole by the execution path, scoring or result pages, and a
worker task does not keep Django's DEBUG query log."""

from __future__ import annotations

import re

from celery.signals import task_postrun
from django.db import connection
from django.test.utils import CaptureQueriesContext

from runs.dispatch import dispatch_lane
from runs.models import RUN_HEAVY_FIELDS, Run, RunItem, RunLane
from runs.probing import probe_run
from runs.scoring import check_run
from tests.fakes.agent_server import FakeAgent, ok
from tests.runs.runfactory import create_run, drive, echo_answer, hosted, publish

# A heavy column in a SELECT's column list (a key transform such as
# ("packs_packversion"."manifest" -> 'version') reads one member and is fine).
_WHOLE = re.compile(r'"(case_findings|manifest|source)"\s*(,|FROM\b)')


def _whole_reads(queries: list[dict]) -> list[str]:
    out = []
    for q in queries:
        sql = q["sql"]
        if sql.lstrip().upper().startswith("SELECT") and _WHOLE.search(sql.split(" WHERE ")[0]):
            out.append(sql[:300])
    return out


def test_light_runs_defer_the_heavy_columns(personas):
    version = publish(personas.workspace, cases=2)
    run = create_run(personas.workspace, version, [hosted(personas.workspace, "http://127.0.0.1:9/")])
    light = Run.objects.light().get(pk=run.pk)
    assert "case_findings" in light.get_deferred_fields()
    assert {"manifest", "source"} <= light.pack_version.get_deferred_fields()
    assert len(RUN_HEAVY_FIELDS) == 3


def test_a_run_and_its_scoring_never_read_a_heavy_column_whole(personas):
    version = publish(personas.workspace, cases=3)
    with FakeAgent() as agent:
        agent.default = ok(echo_answer)
        dep = hosted(personas.workspace, agent.url)
        first = create_run(personas.workspace, version, [dep])
        assert probe_run(first.pk) == "computed"
        assert drive(first).status == "completed"
        run = create_run(personas.workspace, version, [dep])  # copies the stored findings
        assert Run.objects.filter(pk=run.pk, case_findings__isnull=False).exists()
        with CaptureQueriesContext(connection) as captured:
            for lane in RunLane.objects.filter(run=run):
                dispatch_lane(lane.pk, time_slice=10)
            check_run(run.pk)
        run = Run.objects.light().get(pk=run.pk)

    assert run.status == "completed"
    assert RunItem.objects.filter(run=run, status="PASSED").count() == 3
    assert captured.captured_queries, "no query was captured"
    assert _whole_reads(captured.captured_queries) == []


def test_the_whole_read_check_sees_a_plain_read(personas):
    """The check above can fail: a plain instance read selects every column."""
    version = publish(personas.workspace, cases=1)
    run = create_run(personas.workspace, version, [hosted(personas.workspace, "http://127.0.0.1:9/")])
    with CaptureQueriesContext(connection) as captured:
        Run.objects.get(pk=run.pk).pack_version  # noqa: B018
    assert len(_whole_reads(captured.captured_queries)) == 2  # the run's findings, the version's


def test_a_finished_task_forgets_its_logged_queries(settings, personas):
    settings.DEBUG = True
    list(Run.objects.all())
    assert connection.queries_log
    task_postrun.send(sender=None, task_id="t", task=None, args=(), kwargs={}, retval=None, state="SUCCESS")
    assert not connection.queries_log
