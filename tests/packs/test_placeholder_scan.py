"""``{{name}}`` placeholders are found in time linear in the text: the pattern
``\\{\\{\\s*([^{}]*?)\\s*\\}\\}`` backtracked cubically on an unclosed ``{{`` followed by
spaces (1,500 spaces took seconds, 4,000 a minute), so one instructions field froze the
validator, the editor's autosave and publish."""

from __future__ import annotations

import time

import pytest

from grading.engine import registry
from packs.bundle.checks import placeholders
from tests.packs.bundle_helpers import base_pack, check, warnings

UNCLOSED = "Spell {{" + " " * 1500 + "word"


@pytest.mark.parametrize("scan", [placeholders, registry.placeholders], ids=["packs", "grading"])
def test_an_unclosed_placeholder_with_many_spaces_is_scanned_at_once(scan):
    started = time.perf_counter()
    assert scan(UNCLOSED) == []
    assert time.perf_counter() - started < 1.0


@pytest.mark.parametrize("scan", [placeholders, registry.placeholders], ids=["packs", "grading"])
def test_placeholders_keep_their_meaning(scan):
    text = "{{a}} {{ b.c }} {{\tspaced\n}} {{}} {{ }} {{x}y}} {{d}}} {{{e}} {{a}}"
    assert scan(text) == ["a", "b.c", "spaced", "d", "e"]


def test_a_pack_whose_instructions_hold_an_unclosed_placeholder_validates_at_once():
    doc = base_pack()
    doc["challenges"][0]["instructions"] = UNCLOSED
    started = time.perf_counter()
    report = check(doc)
    assert time.perf_counter() - started < 5.0
    assert report.valid, report.errors
    assert not [w for w in warnings(report) if "instructions" in w[0]]


def test_the_lint_renders_a_spaced_placeholder_from_the_case():
    from packs.bundle.casechecks import render

    assert render(
        "say {{ word }} and {{\tnested.key }} not {{ missing }}", {"word": "olleh", "nested": {"key": 1}}
    ) == ("say olleh and 1 not {{ missing }}")
