"""What a ``--json`` command run as a process (``manage.py``) does when it fails in a way no
command table lists (spec/interfaces.md §2: one JSON document on stdout, the command's own
code for the error, else 2): an unexpected exception, a reader of stdout that goes away, a
malformed setting. Run in this process through ``run_from_argv``, as manage.py runs them."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest
from django.core.management import load_command_class

MENTAL = Path(__file__).resolve().parents[2] / "examples" / "packs" / "mental-math"


def _run_as_process(app: str, name: str, *args: str) -> int:
    command = load_command_class(app, name)
    try:
        command.run_from_argv(["manage.py", name, *args])
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


@pytest.mark.parametrize("as_json", [True, False], ids=["json", "text"])
def test_an_unexpected_exception_is_an_internal_error_exit_2_not_1(monkeypatch, capsys, as_json):
    """An exception nothing anticipated ended the process with Python's exit 1 and only a
    traceback: for ``pack validate`` 1 means "the pack is invalid" (for ``grade`` "a case
    FAILED", for ``eval start --follow`` "a pass rate below --fail-under"), so a crash read as
    a verdict and stdout held no JSON. Now: an ``internal_error`` object, exit 2, the
    traceback on stderr."""
    from packs.management.commands import pack

    def broken(*args, **kwargs):
        raise RuntimeError("the validator fell over\nsecond line")

    monkeypatch.setattr(pack, "validate_bundle", broken)
    flags = ["--json"] if as_json else []
    code = _run_as_process("packs", "pack", "validate", str(MENTAL / "pack.yaml"), *flags)
    out, err = capsys.readouterr()
    assert code == 2
    assert "Traceback" in err and "RuntimeError: the validator fell over" in err
    if as_json:
        error = json.loads(out)["error"]
        assert error["code"] == "internal_error"
        assert error["message"].startswith("internal error: RuntimeError: the validator fell over; ")
    else:
        assert out == ""
        assert "internal error: RuntimeError: the validator fell over" in err


class _ClosedPipe(io.StringIO):
    """A stdout whose reader went away (``manage.py ... | head`` after head exited)."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self) -> None:
        raise BrokenPipeError(32, "Broken pipe")


class _ClosedPipeSeenAtFlush(io.StringIO):
    """A closed pipe a small document fits in the buffer of: only the flush fails (by the
    interpreter at exit: "Exception ignored ... BrokenPipeError" and exit 120)."""

    def flush(self) -> None:
        raise BrokenPipeError(32, "Broken pipe")


@pytest.mark.parametrize("stream", [_ClosedPipe, _ClosedPipeSeenAtFlush], ids=["write", "flush"])
@pytest.mark.parametrize(
    ("app", "argv"),
    [
        ("packs", ["pack", "validate", str(MENTAL / "pack.yaml"), "--json"]),
        ("packs", ["pack", "schema"]),
        ("packs", ["grade", str(MENTAL / "pack.yaml"), "--results", str(MENTAL / "results.jsonl"), "--json"]),
    ],
    ids=["validate", "schema", "grade"],
)
def test_a_closed_stdout_ends_the_command_quietly_with_exit_141(monkeypatch, capsys, app, argv, stream):
    """``run export RUN --format jsonl | head`` (or any command piped into a reader that
    stops early) ended in a BrokenPipeError traceback, exit 1; now it stops quietly with the
    exit a shell shows for ``cat`` there (128 + SIGPIPE)."""
    monkeypatch.setattr(sys, "stdout", stream())
    code = _run_as_process(app, *argv)
    err = capsys.readouterr().err
    assert code == 141
    assert err == ""


@pytest.mark.parametrize("as_json", [True, False], ids=["json", "text"])
def test_a_malformed_setting_under_json_prints_an_error_object(monkeypatch, capsys, as_json):
    """A malformed variable stopped ``manage.py <command> --json`` with a "configuration
    error" line on stderr and an empty stdout: a script reading the one JSON document found
    none. The same line stays on stderr; under --json the error object is on stdout."""
    import manage
    from agentclash_site.lib.env import ConfigError

    def refuse(argv):
        raise ConfigError("DEBUG must be true or false (or 1/0), got 'yes'")

    monkeypatch.setattr("django.core.management.execute_from_command_line", refuse)
    monkeypatch.setattr(manage, "_collect_after_setup", lambda: None)  # it turns gc off until setup
    flags = ["--json"] if as_json else []
    monkeypatch.setattr(sys, "argv", ["manage.py", "pack", "validate", "x.yaml", *flags])
    with pytest.raises(SystemExit) as info:
        manage.main()
    out, err = capsys.readouterr()
    assert info.value.code == 2
    assert "configuration error: DEBUG must be true or false (or 1/0), got 'yes'" in err
    if as_json:
        assert json.loads(out) == {
            "error": {
                "code": "configuration_error",
                "message": "DEBUG must be true or false (or 1/0), got 'yes'",
            }
        }
    else:
        assert out == ""


@pytest.mark.parametrize(
    ("app", "argv", "field", "choices"),
    [
        (
            "runs",
            ["deployment", "create", "--workspace", "w", "--name", "n", "--kind", "http"],
            "kind",
            ["hosted_http", "openai_chat", "trace_import"],
        ),
        ("runs", ["run", "export", "r", "--format", "xml"], "format", ["jsonl", "csv", "junit", "grading"]),
        ("packs", ["pack", "frob"], "action", ["validate", "schema", "publish"]),
        (
            "runs",
            ["eval", "start", "--workspace", "w", "--pack", "p", "--deployment", "d", "--repetitions", "x"],
            "repetitions",
            None,
        ),  # fmt: skip
        ("packs", ["grade", "pack.yaml"], "results", None),  # a required option missing
        ("runs", ["run", "status"], "run", None),  # a required argument missing
        # a required option with choices missing: the choices are the fix
        (
            "runs",
            ["deployment", "create", "--workspace", "w", "--name", "n"],
            "kind",
            ["hosted_http", "openai_chat", "trace_import"],
        ),
        ("runs", ["run", "export", "r"], "format", ["jsonl", "csv", "junit", "grading"]),
        ("packs", ["pack"], "action", ["validate", "schema", "publish"]),
    ],
    ids=[
        "choice",
        "choice-of-export",
        "subcommand",
        "int",
        "required-option",
        "required-argument",
        "required-choice",
        "required-format",
        "required-subcommand",
    ],
)
def test_a_usage_error_names_the_option_and_lists_its_choices(monkeypatch, capsys, app, argv, field, choices):
    """argparse's usage errors came out as {"code": "usage", "message"} only: the error shape
    has ``field`` and ``choices`` for this, and a script read neither (interfaces.md §2)."""
    monkeypatch.setattr(sys, "argv", ["manage.py", *argv, "--json"])
    code = _run_as_process(app, *argv, "--json")
    out, err = capsys.readouterr()
    error = json.loads(out)["error"]
    assert code == 2 and error["code"] == "usage"
    assert error["field"] == field
    assert error.get("choices") == choices
    assert f"error: {error['message']}" in err  # the usual line stays on stderr
