"""The README's CLI section lists every exit code each command has (interfaces.md §4-§6): its
``pack publish`` comment left out 2 (usage or unknown workspace), and others named only part
of what a code means."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from packs.management.commands import grade, pack
from packs.services import cli as publish
from runs.management.commands import run

README = Path(__file__).resolve().parents[2] / "README.md"


def _cli_comments() -> str:
    """The comments of the README's CLI shell block, joined into one line."""
    section = README.read_text(encoding="utf-8").split("\n## CLI\n", 1)[1]
    block = section.split("```sh\n", 1)[1].split("\n```", 1)[0]
    return " ".join(line.split("# ", 1)[1].strip() for line in block.splitlines() if "# " in line)


def _codes(text: str) -> set[int]:
    """The exit codes a comment lists: a digit opening the list or after ", " or "; "."""
    return {int(code) for code in re.findall(r"(?:^|[,;] )(\d)(?=[ ,])", text)}


@pytest.mark.parametrize(
    ("where", "codes"),
    [
        (r"packs: validate \(([^)]*)\)", {0, pack.EXIT_INVALID, pack.EXIT_USAGE}),
        (r"publish \(([^)]*)\)", {0, publish.EXIT_INVALID, publish.EXIT_USAGE, publish.EXIT_CONFLICT}),
        (r"no database \(([^)]*)\)", {0, 1, grade.EXIT_INVALID_INPUT}),
        (r"--follow's exit codes, first match wins: (.*? otherwise)", {0, 1, 2, 3}),
        (r"run status and run export \(([^)]*)\)", {0, 2}),
        (r"answer to it; (.*?) \(the API's", {0, 2, run.REFUSED_EXIT_CODE}),
    ],
    ids=[
        "pack-validate",
        "pack-publish",
        "grade",
        "eval-start-follow",
        "run-status-export",
        "run-operations",
    ],
)
def test_the_readme_lists_every_exit_code_of_the_command(where, codes):
    found = re.search(where, _cli_comments())
    assert found, f"no comment {where!r} in the README's CLI section"
    assert _codes(found.group(1)) == codes, found.group(1)


def test_the_readme_says_what_the_exit_codes_mean_as_the_contract_does():
    comments = _cli_comments()
    assert "2 usage, I/O error or unknown workspace" in comments  # pack publish, interfaces.md §4
    assert "2 usage or I/O error" in comments  # pack validate
    assert "0 no case FAILED and at least one PASSED, 1 otherwise" in comments  # grade, §5
    # eval start --follow, §6: a failed run is 3, a lane with no pass rate is 1, 1.0 by default
    assert "3 infra/config errors or the run failed" in comments
    assert "below --fail-under (default 1.0: any failed case) or none" in comments
