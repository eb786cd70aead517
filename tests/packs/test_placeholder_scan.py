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


SPACED = "a placeholder name has no whitespace inside, so it is left as written"


def _spaced_name_pack() -> dict:
    doc = base_pack()
    doc["challenges"][0]["instructions"] = "Greet {{first name}} from {{ city }}."
    doc["input_sets"][0]["cases"][0]["payload"] = {"first name": "Ann", "city": "Oslo"}
    return doc


def test_a_name_with_whitespace_inside_is_unresolved_as_the_grader_leaves_it_verbatim():
    # The validator found "first name" in the payload and said nothing, while the grader's
    # renderer never substitutes such a name: the agent was sent "{{first name}}".
    report = check(_spaced_name_pack())
    assert report.valid
    assert [(w.field, w.message, w.rule, w.detail) for w in report.warnings] == [
        (
            "challenges[0].instructions",
            "does not resolve for input_sets[0].cases[0]",
            "unresolved_reference",
            "{{first name}}: " + SPACED,
        )
    ]
    ((_case, context),) = report.grading_cases("default")
    assert context.rendered_instructions == "Greet {{first name}} from Oslo."


def test_a_test_command_or_a_scripted_turn_with_a_spaced_name_is_a_warning():
    # Upstream checks only {{name}} / {{a.b}} there and accepts the pack (pack-format §1);
    # the text is sent as written, which the author hears as L5 (tests/packs/test_upstream_shapes.py).
    doc = _spaced_name_pack()
    doc["challenges"][0]["instructions"] = "Greet them."
    spec = doc["version"]["evaluation_spec"]
    spec["post_execution_checks"] = [{"key": "sol", "type": "file_capture", "path": "sol.py"}]
    spec["validators"] = [
        {
            "key": "t",
            "type": "code_execution",
            "target": "file:sol",
            "config": {"test_command": "run {{first name}}"},
        }
    ]
    report = check(doc)
    assert report.valid, report.errors
    assert [(w.field, w.message, w.detail) for w in report.warnings] == [
        (
            "version.evaluation_spec.validators[0].config.test_command",
            "does not resolve for input_sets[0].cases[0]",
            "{{first name}}: " + SPACED,
        )
    ]
    doc = _spaced_name_pack()
    doc["challenges"][0]["instructions"] = "Greet them."
    doc["version"]["execution_mode"] = "multi_turn"
    doc["input_sets"][0]["cases"][0]["user_simulator"] = {
        "schema_version": 1,
        "kind": "hybrid",
        "phases": [{"id": "hi", "actor": "scripted", "turns": [{"message": "I am {{first name}}"}]}],
    }
    report = check(doc)
    assert report.valid, report.errors
    assert [(w.field, w.message, w.detail) for w in report.warnings] == [
        (
            "input_sets[0].cases[0].user_simulator.phases[0].turns[0].message",
            "does not resolve for input_sets[0].cases[0]",
            "{{first name}}: " + SPACED,
        )
    ]


def test_the_lint_leaves_a_spaced_name_verbatim_like_the_grader():
    from grading.engine.refs import render_template
    from packs.bundle.casechecks import render

    scope = {"first name": "Ann", "a": {"b c": 1}}
    text = "{{first name}} {{a.b c}} {{ a.x }}"
    assert render(text, scope) == render_template(text, None, scope) == text  # type: ignore[arg-type]
