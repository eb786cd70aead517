"""Shapes found in real upstream packs (upstream AgentClash's examples and catalogs), written
here as minimal packs of our own: each must validate as upstream validates it (pack-format §1).
"""

from __future__ import annotations

from typing import Any

from tests.packs.bundle_helpers import base_pack, check, spec_of

TEMPLATE_ERROR = "unresolved placeholder {{%s}} for case template context"
SPACED = "a placeholder name has no whitespace inside, so it is left as written"


def _with_test_command(command: str) -> dict[str, Any]:
    doc = base_pack()
    spec = spec_of(doc)
    spec["post_execution_checks"] = [{"key": "sol", "type": "file_capture", "path": "sol.py"}]
    spec["validators"].append(
        {"key": "t", "type": "code_execution", "target": "file:sol", "config": {"test_command": command}}
    )
    return doc


def _with_scripted_turn(message: str) -> dict[str, Any]:
    doc = base_pack()
    doc["version"]["execution_mode"] = "multi_turn"
    doc["input_sets"][0]["cases"][0]["user_simulator"] = {
        "schema_version": 1,
        "kind": "hybrid",
        "phases": [{"id": "hi", "actor": "scripted", "turns": [{"message": message}]}],
    }
    return doc


# Upstream checks only ``{{name}}`` / ``{{a.b}}`` (``[A-Za-z_][A-Za-z0-9_.]*``, spaces around
# allowed) in a test_command or a scripted turn. Any other ``{{...}}`` is shell or template text
# it passes through untouched: a docker or kubectl Go template, a Jinja filter.
FOREIGN_TEMPLATES = (
    "docker inspect --format '{{.State.Status}}' app; docker ps --format '{{json .}}'; "
    "echo '{{ name | upper }}' {{ 0 }} {{a-b}} {{#each}}"
)


def test_a_test_command_with_go_template_text_validates_as_upstream():
    report = check(_with_test_command(FOREIGN_TEMPLATES))
    assert report.valid, report.errors
    assert report.warnings == []


def test_a_scripted_turn_with_go_template_text_validates_as_upstream():
    report = check(_with_scripted_turn("Run docker ps --format '{{json .}}' and {{.Names}}"))
    assert report.valid, report.errors


def test_an_unresolved_name_in_a_test_command_is_still_an_error():
    report = check(_with_test_command("pytest -k {{a}} {{ missing }} {{b.c}} {{.State}}"))
    assert [(e.field, e.message, e.detail) for e in report.errors] == [
        (
            "version.evaluation_spec.validators[1].config.test_command",
            TEMPLATE_ERROR % name,
            "input_sets[0].cases[0]",
        )
        for name in ("b.c", "missing")  # sorted by message (§3)
    ]


def test_an_unresolved_name_in_a_scripted_turn_is_still_an_error():
    report = check(_with_scripted_turn("My number is {{ a }} and {{order_id}}"))
    assert [(e.field, e.message) for e in report.errors] == [
        ("input_sets[0].cases[0].user_simulator.phases[0].turns[0].message", TEMPLATE_ERROR % "order_id")
    ]


def test_a_spaced_name_the_case_has_is_a_warning_not_an_error():
    # Upstream never substitutes {{first name}} (no placeholder there), nor does the grader
    # here: the pack publishes, and the author hears that the text is sent as written.
    doc = _with_test_command("greet {{first name}}")
    doc["input_sets"][0]["cases"][0]["payload"]["first name"] = "Ann"
    report = check(doc)
    assert report.valid, report.errors
    assert [(w.field, w.message, w.rule, w.detail) for w in report.warnings] == [
        (
            "version.evaluation_spec.validators[1].config.test_command",
            "does not resolve for input_sets[0].cases[0]",
            "unresolved_reference",
            "{{first name}}: " + SPACED,
        )
    ]
    doc = _with_scripted_turn("I am {{first name}}")
    doc["input_sets"][0]["cases"][0]["payload"]["first name"] = "Ann"
    report = check(doc)
    assert report.valid, report.errors
    assert [(w.field, w.rule, w.detail) for w in report.warnings] == [
        (
            "input_sets[0].cases[0].user_simulator.phases[0].turns[0].message",
            "unresolved_reference",
            "{{first name}}: " + SPACED,
        )
    ]


def test_instructions_with_go_template_text_get_no_unresolved_warning():
    # {{.Names}} / {{json .}} have an empty dotted segment: no case value can fill them, the
    # grader sends them as written, and upstream does not take them for placeholders.
    doc = base_pack()
    doc["challenges"][0]["instructions"] = "Run docker ps --format '{{.Names}}' then '{{json .}}' for {{a}}."
    report = check(doc)
    assert report.valid, report.errors
    assert report.warnings == []
    doc["challenges"][0]["instructions"] = "Run docker ps --format '{{.Names}}' for {{order_id}}."
    assert [(w.field, w.message, w.rule) for w in check(doc).warnings] == [
        ("challenges[0].instructions", "does not resolve for input_sets[0].cases[0]", "unresolved_reference")
    ]
