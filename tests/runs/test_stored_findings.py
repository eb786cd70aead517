"""runs.probing.load_stored_findings: each case's stored findings, split in the database and
parsed when that case is graded (never the whole document parsed in a dispatcher)."""

from __future__ import annotations

from types import SimpleNamespace

from django.db.models import JSONField, Value

from grading.engine.types import Suggestion
from runs.models import Run
from runs.probing import StoredFindings, load_stored_findings, probe_run
from tests.runs.runfactory import create_run, hosted, publish


def _run(personas):
    version = publish(personas.workspace, cases=3)
    dep = hosted(personas.workspace, "http://127.0.0.1:9/")
    return create_run(personas.workspace, version, [dep])


def test_each_case_reads_back_as_the_stored_suggestions(personas):
    run = _run(personas)
    assert probe_run(run.pk) == "computed"
    stored = Run.objects.get(pk=run.pk).case_findings
    ctx = SimpleNamespace(stored_findings=None)
    assert load_stored_findings(ctx, run.pk) is True
    assert isinstance(ctx.stored_findings, StoredFindings) and len(ctx.stored_findings) == 3
    for key, dicts in stored.items():
        assert key in ctx.stored_findings
        got = ctx.stored_findings.get(key)
        assert got == [Suggestion.from_dict(d) for d in dicts] and got
    assert ctx.stored_findings.get("echo\x1fmissing") is None
    assert load_stored_findings(ctx, run.pk) is True  # loaded once per context


def test_nothing_stored_or_a_json_null_is_not_loaded(personas):
    run = _run(personas)
    ctx = SimpleNamespace(stored_findings=None)
    assert load_stored_findings(ctx, run.pk) is False
    Run.objects.filter(pk=run.pk).update(case_findings={})
    assert load_stored_findings(ctx, run.pk) is True and len(ctx.stored_findings) == 0
    for empty in (None, Value(None, JSONField())):  # SQL NULL, then a JSON null
        ctx = SimpleNamespace(stored_findings=None)
        Run.objects.filter(pk=run.pk).update(case_findings=empty)
        assert load_stored_findings(ctx, run.pk) is False and ctx.stored_findings is None
