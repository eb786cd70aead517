"""Ctrl-C on a command (spec/interfaces.md §2): one ``interrupted`` line on stderr and exit 2,
not a KeyboardInterrupt traceback; under ``--json`` the ``interrupted`` error object on stdout
unless part of a document is there already. ``eval start`` keeps its own ``interrupted``
(exit 3) once its run is queued. The interrupt is raised from a patched inner function."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest
from django.core.management import call_command, load_command_class

MENTAL = Path(__file__).resolve().parents[2] / "examples" / "packs" / "mental-math"
INTERRUPTED = {"error": {"code": "interrupted", "message": "interrupted before the command finished"}}


def interrupt(*args, **kwargs):
    raise KeyboardInterrupt


def _cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command(*args, stdout=out, stderr=err)
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    except KeyboardInterrupt:  # raised on, it would stop the whole test session
        pytest.fail("the KeyboardInterrupt escaped the command (a traceback to the user)")
    return code, out.getvalue(), err.getvalue()


def test_pack_validate_json_prints_the_interrupted_object(monkeypatch):
    from packs.management.commands import pack

    monkeypatch.setattr(pack, "validate_bundle", interrupt)
    code, out, err = _cli("pack", "validate", str(MENTAL / "pack.yaml"), "--json")
    assert (code, json.loads(out), err) == (2, INTERRUPTED, "interrupted\n")


def test_pack_validate_text_is_one_line_on_stderr(monkeypatch):
    from packs.management.commands import pack

    monkeypatch.setattr(pack, "validate_bundle", interrupt)
    assert _cli("pack", "validate", str(MENTAL / "pack.yaml")) == (2, "", "interrupted\n")


def test_as_a_process_no_traceback(monkeypatch, capsys):
    """Through ``run_from_argv``, as manage.py runs it (sys.stdout, sys.stderr)."""
    from packs.management.commands import pack

    monkeypatch.setattr(pack, "validate_bundle", interrupt)
    command = load_command_class("packs", "pack")
    try:
        with pytest.raises(SystemExit) as info:
            command.run_from_argv(["manage.py", "pack", "validate", str(MENTAL / "pack.yaml"), "--json"])
    except KeyboardInterrupt:
        pytest.fail("the KeyboardInterrupt escaped the command (a traceback to the user)")
    captured = capsys.readouterr()
    assert info.value.code == 2
    assert json.loads(captured.out) == INTERRUPTED
    assert captured.err == "interrupted\n"


def _interrupt_at_case(monkeypatch, number: int) -> None:
    """``grade``'s streamed grading stops (Ctrl-C) when case ``number`` is graded."""
    from packs.management.commands import grade

    real = grade.grade_offline

    def grade_offline(*args, on_case, **kwargs):
        seen = []

        def on_case_then_stop(entry):
            seen.append(entry)
            if len(seen) == number:
                raise KeyboardInterrupt
            on_case(entry)

        return real(*args, on_case=on_case_then_stop, **kwargs)

    monkeypatch.setattr(grade, "grade_offline", grade_offline)


def test_grade_json_interrupted_mid_document_prints_no_second_document(monkeypatch):
    """The streamed document is on stdout up to the first case: an error object after it
    would make stdout two documents; stderr says the one there is incomplete."""
    _interrupt_at_case(monkeypatch, 2)
    code, out, err = _cli(
        "grade", str(MENTAL / "pack.yaml"), "--results", str(MENTAL / "results.jsonl"), "--json"
    )
    assert code == 2
    assert err == "interrupted; the JSON document on stdout is incomplete\n"
    assert out.startswith('{\n  "pack": {') and out.count('\n      "case_key": ') == 1  # the first case only
    assert '"interrupted"' not in out
    with pytest.raises(json.JSONDecodeError):
        json.loads(out)


def test_grade_json_interrupted_before_any_output_prints_the_object(monkeypatch):
    _interrupt_at_case(monkeypatch, 1)
    code, out, err = _cli(
        "grade", str(MENTAL / "pack.yaml"), "--results", str(MENTAL / "results.jsonl"), "--json"
    )
    assert (code, json.loads(out), err) == (2, INTERRUPTED, "interrupted\n")


@pytest.mark.django_db
def test_pack_publish_json(monkeypatch, personas, tmp_path):
    from packs.services import cli as publish

    monkeypatch.setattr(publish, "pack_version_publish", interrupt)
    pack_file = tmp_path / "pack.yaml"
    shutil.copy(MENTAL / "pack.yaml", pack_file)
    code, out, err = _cli("pack", "publish", str(pack_file), "--workspace", "acme", "--json")
    assert (code, json.loads(out), err) == (2, INTERRUPTED, "interrupted\n")


@pytest.mark.django_db
def test_run_export_interrupted_mid_stream(monkeypatch, personas):
    """A text export stops where it was: the line on stderr, exit 2."""
    from runs.management.commands import run as run_command
    from runs.services.deployments import deployment_create
    from tests.runs.runfactory import create_run, publish

    version = publish(personas.workspace, cases=1)
    dep = deployment_create(workspace=personas.workspace, name="ci", kind="trace_import").deployment
    run = create_run(personas.workspace, version, [dep])

    def stream(run, fmt):
        yield "first line\n"
        raise KeyboardInterrupt

    monkeypatch.setattr(run_command, "export_stream", stream)
    assert _cli("run", "export", str(run.pk), "--format", "jsonl") == (2, "first line\n", "interrupted\n")


@pytest.mark.django_db
def test_eval_start_before_its_run_exists_is_interrupted_exit_2(monkeypatch, personas):
    from runs.management.commands import eval as eval_command

    monkeypatch.setattr(eval_command, "pack_version_for", interrupt)
    code, out, err = _cli(
        "eval", "start", "--workspace", "acme", "--pack", "echo", "--deployment", "ci", "--json"
    )
    assert (code, json.loads(out), err) == (2, INTERRUPTED, "interrupted\n")


@pytest.mark.django_db
def test_eval_start_keeps_its_own_interrupted_naming_the_queued_run(monkeypatch, personas):
    from runs import documents
    from runs.models import Run
    from runs.services.deployments import deployment_create
    from tests.runs.runfactory import publish

    publish(personas.workspace, cases=1)
    deployment_create(workspace=personas.workspace, name="ci", kind="trace_import")
    monkeypatch.setattr(documents, "run_document", interrupt)
    code, out, err = _cli(
        "eval", "start", "--workspace", "acme", "--pack", "echo", "--deployment", "ci", "--json"
    )
    run = Run.objects.get()
    error = json.loads(out)["error"]
    assert (code, error["code"], err) == (3, "interrupted", "")
    assert f"run status {run.pk}" in error["message"]
