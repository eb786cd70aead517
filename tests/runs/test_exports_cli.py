"""``run export`` as a process (``manage.py``): UTF-8 bytes on any stdout, ``--output``
to a path that cannot be written, and no truncated file left by an export that fails."""

from __future__ import annotations

import io
import sys

import pytest
from django.core.management import load_command_class

from runs import exports
from runs.models import RunLane
from tests.runs.test_exports_agree import _two_lane_run
from tests.runs.test_exports_hostile import _upload

pytestmark = pytest.mark.django_db(transaction=True)


def _process(*args: str) -> int:
    command = load_command_class("runs", "run")
    try:
        command.run_from_argv(["manage.py", "run", "export", *args])
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


@pytest.fixture
def run(personas):
    run = _two_lane_run(personas)
    _upload(personas, run, [{"deployment": "ci", "case_key": "c0", "final_output": "answer-0"}])
    RunLane.objects.filter(run=run, deployment_name="ci").update(deployment_name="dép 日本 😀")
    return run


class _Stdout(io.TextIOWrapper):
    """A stdout as Windows has it: a legacy code page and CRLF newline translation."""

    def __init__(self) -> None:
        super().__init__(io.BytesIO(), encoding="cp1252", newline="\r\n")

    def bytes(self) -> bytes:
        self.flush()
        return self.buffer.getvalue()


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "junit"])
def test_stdout_gets_the_files_utf8_bytes_whatever_its_encoding(run, tmp_path, monkeypatch, fmt):
    target = tmp_path / "out"
    assert _process(str(run.pk), "--format", fmt, "--output", str(target)) == 0
    stdout = _Stdout()
    monkeypatch.setattr(sys, "stdout", stdout)
    assert _process(str(run.pk), "--format", fmt) == 0
    assert stdout.bytes() == target.read_bytes()
    assert "dép 日本 😀" in target.read_bytes().decode("utf-8")
    if fmt == "csv":
        assert b"\r\r\n" not in stdout.bytes() and stdout.bytes().count(b"\r\n") == 7


def test_a_closed_stdout_ends_the_export_with_exit_141(run, monkeypatch):
    class Closed(io.RawIOBase):
        def writable(self):
            return True

        def write(self, data):
            raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(io.BufferedWriter(Closed()), encoding="utf-8"))
    monkeypatch.setattr("agentclash_site.lib.cli._silence", lambda stream: None)
    assert _process(str(run.pk), "--format", "jsonl") == 141


def test_an_output_that_cannot_be_written_is_a_clear_error_exit_2(run, tmp_path, capsys):
    for target, reason in (
        (tmp_path / "missing" / "out.xml", "No such file or directory"),
        (tmp_path, "Is a directory"),
    ):
        assert _process(str(run.pk), "--format", "junit", "--output", str(target)) == 2
        out, err = capsys.readouterr()
        assert out == "" and err == f"error: output: cannot write {target}: {reason} (io_error)\n"
    assert [p.name for p in tmp_path.iterdir()] == []


def test_an_export_that_fails_on_the_way_leaves_no_truncated_file(run, tmp_path, monkeypatch, capsys):
    def broken(run):
        yield '{"deployment": "ci"}\n'
        raise RuntimeError("the database went away")

    monkeypatch.setitem(exports.WRITERS, "jsonl", broken)
    fresh, old, link = tmp_path / "fresh.jsonl", tmp_path / "old.jsonl", tmp_path / "link.jsonl"
    old.write_text("yesterday's export\n")
    (tmp_path / "elsewhere").mkdir()
    link.symlink_to(tmp_path / "elsewhere" / "target.jsonl")
    for target in (fresh, old, link):
        assert _process(str(run.pk), "--format", "jsonl", "--output", str(target)) == 2
        assert "RuntimeError: the database went away" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["elsewhere", "link.jsonl"]  # a link is not removed
