"""``--help`` of the CI commands: every option says what it takes, and a bounded one its range
and default, as the code validates them (no database needed)."""

from __future__ import annotations

import argparse

import pytest

from runs.models import MAX_ATTEMPTS_LIMIT, MAX_IN_FLIGHT_LIMIT, MAX_TIMEOUT_SECONDS
from runs.services.runs import MAX_REPETITIONS


def _parsers(command: str) -> dict[str, argparse.ArgumentParser]:
    """The command's parser, or its subcommands' parsers by name."""
    from django.core.management import load_command_class

    app = {"grade": "packs", "pack": "packs"}.get(command, "runs")
    parser = load_command_class(app, command).create_parser("manage.py", command)
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(subs[0].choices) if subs else {command: parser}


def _helps(command: str, action: str) -> dict[str, str]:
    parser = _parsers(command)[action]
    parser.format_help()  # renders (a stray % in a help text raises here)
    return {a.option_strings[-1] if a.option_strings else a.dest: a.help or "" for a in parser._actions}


@pytest.mark.parametrize(
    ("command", "action"),
    [
        ("eval", "start"),
        ("deployment", "create"),
        ("run", "status"),
        ("run", "export"),
        ("run", "cancel"),
        ("run", "retry-failed"),
        ("run", "rescore"),
        ("grade", "grade"),
    ],
)
def test_every_option_has_a_help_text(command, action):
    missing = [name for name, text in _helps(command, action).items() if not text.strip()]
    assert missing == []


def test_eval_start_states_the_ranges_and_defaults():
    helps = _helps("eval", "start")
    assert "a fraction from 0 to 1 (default 1.0: any failed case)" in helps["--fail-under"]
    assert f"1 to {MAX_REPETITIONS} (default 1)" in helps["--repetitions"]


def test_deployment_create_states_the_ranges_and_the_defaults_of_a_new_deployment():
    helps = _helps("deployment", "create")
    assert f"1 to {MAX_IN_FLIGHT_LIMIT} (default when created: 8)" in helps["--max-in-flight"]
    assert f"at most {MAX_TIMEOUT_SECONDS:g} (default when created: 120)" in helps["--timeout"]
    assert f"1 to {MAX_ATTEMPTS_LIMIT} (default when created: 3)" in helps["--max-attempts"]
    assert "(default when created: structured)" in helps["--evidence-level"]
