"""The structured case form edits the draft's YAML in place: the case it adds, changes or
deletes, and nothing else (the editor says "comments and formatting elsewhere stay")."""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest
import yaml

from packs.forms import CaseEditor
from packs.services import yaml_edit
from packs.services.yaml_edit import CaseEdit
from tests.packs.publish_fixtures import mental_math

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "packs"


def changed_lines(before: str, after: str) -> tuple[list[str], list[str]]:
    """(removed, added) lines of the diff."""
    diff = list(difflib.unified_diff(before.splitlines(), after.splitlines(), n=0, lineterm=""))
    body = [line for line in diff if not line.startswith(("---", "+++", "@@"))]
    return [x[1:] for x in body if x[0] == "-"], [x[1:] for x in body if x[0] == "+"]


@pytest.mark.parametrize("example", ["mental-math", "demo", "invoice-totals", "release-notes"])
def test_adding_a_case_only_adds_its_lines(example):
    text = (EXAMPLES / example / "pack.yaml").read_text()
    first_set = yaml_edit.outline(text)["input_sets"][0]
    edit = CaseEdit(
        input_set_key=first_set["key"],
        challenge_key=first_set["cases"][0]["challenge_key"],
        case_key="added",
        payload={"question": "Two and two?", "tags": ["a", "b"]},
        expectations=[{"key": "answer", "kind": "text", "value": "4"}],
    )
    after = yaml_edit.upsert_case(text, edit)
    removed, added = changed_lines(text, after)
    # The whole document was dumped again: sequences re-indented, flow mappings joined onto
    # one line, [{skill: x}] rewritten as [skill: x] (mental-math: 23 lines changed).
    assert removed == []
    assert "case_key: added" in "\n".join(added)
    data = yaml.safe_load(after)
    new = next(c for c in data["input_sets"][0]["cases"] if c.get("case_key") == "added")
    assert new["payload"] == {"question": "Two and two?", "tags": ["a", "b"]}


def test_editing_a_case_changes_only_its_lines_and_keeps_its_comments():
    text = mental_math().replace("        case_key: train\n", "        case_key: train  # the second case\n")
    edit = CaseEdit(
        input_set_key="smoke",
        challenge_key="word-problem",
        case_key="train",
        payload={"question": "A train covers 120 km in 2 hours. What is its speed in km/h?"},
        expectations=[{"key": "result", "kind": "number", "value": 60}],
        original_case_key="train",
    )
    after = yaml_edit.upsert_case(text, edit)
    removed, added = changed_lines(text, after)
    assert removed == [
        '        payload: {question: "A train covers 90 km in 1.5 hours. What is its speed in km/h?"}'
    ]
    assert len(added) == 1 and "120 km" in added[0]
    assert "# the second case" in after


def test_deleting_a_case_removes_only_its_lines():
    text = mental_math()
    after = yaml_edit.delete_case(text, input_set_key="smoke", case_key="crates")
    removed, added = changed_lines(text, after)
    assert added == []
    assert sorted(removed) == sorted(
        [
            "      - challenge_key: word-problem",
            "        case_key: crates",
            '        payload: {question: "One crate holds 24 apples. How many apples fill 7 crates?"}',
            "        expectations: [{key: result, kind: number, value: 168}]",
        ]
    )


def test_a_comment_between_cases_stays_once_when_either_case_changes():
    text = mental_math().replace(
        "      - challenge_key: word-problem\n        case_key: train\n",
        "      # The train case comes next.\n      - challenge_key: word-problem\n        case_key: train\n",
    )
    for original in ("crates", "train"):
        case = yaml_edit.find_case(text, input_set_key="smoke", case_key=original)
        after = yaml_edit.upsert_case(
            text,
            CaseEdit(
                input_set_key="smoke",
                challenge_key="word-problem",
                case_key=original,
                payload={"question": "changed"},
                expectations=case["expectations"],
                original_case_key=original,
            ),
        )
        assert after.count("# The train case comes next.") == 1, after
        assert yaml.safe_load(after)["input_sets"][0]["cases"][0 if original == "crates" else 1][
            "payload"
        ] == {"question": "changed"}
    after = yaml_edit.delete_case(text, input_set_key="smoke", case_key="crates")
    assert after.count("# The train case comes next.") == 1


def test_editing_a_case_keeps_what_the_form_does_not_show_of_its_rows():
    """An input's ``path`` and ``artifact_key`` and an expectation's ``artifact_key`` have no
    cell in the form: saving the case dropped them."""
    text = mental_math().replace(
        "        expectations: [{key: result, kind: number, value: 168}]\n",
        "        inputs: [{key: doc, kind: file, path: data/doc.txt, artifact_key: gold}]\n"
        "        expectations: [{key: result, kind: number, value: 168, artifact_key: gold}]\n",
    )
    case = yaml_edit.find_case(text, input_set_key="smoke", case_key="crates")
    editor = CaseEditor(_post_data(CaseEditor.for_case("smoke", case)))
    assert editor.is_valid(), editor.form.errors
    after = yaml_edit.upsert_case(text, editor.to_edit())
    saved = yaml.safe_load(after)["input_sets"][0]["cases"][0]
    assert saved["inputs"] == [{"key": "doc", "kind": "file", "path": "data/doc.txt", "artifact_key": "gold"}]
    assert saved["expectations"] == [
        {"key": "result", "kind": "number", "value": 168, "artifact_key": "gold"}
    ]


def test_a_multi_line_or_null_value_survives_the_form_unchanged():
    """A form cell is one line (a browser drops the line breaks of an input's value): a value
    with a line break is shown JSON-quoted, and null as null (it came back as "")."""
    value = "line one\nline two\n"
    cell = yaml_edit.format_value(value)
    assert "\n" not in cell and "\r" not in cell
    assert yaml_edit.parse_value(cell) == value
    assert yaml_edit.parse_value(yaml_edit.format_value("a\r\nb")) == "a\r\nb"
    assert yaml_edit.parse_value(yaml_edit.format_value(None)) is None


def _post_data(editor: CaseEditor) -> dict[str, str]:
    """What the browser posts for an unbound editor's initial values."""
    data: dict[str, str] = {}
    for form in (editor.form, *editor.payload, *editor.inputs, *editor.expectations):
        for bound in form:
            value = bound.value()
            data[bound.html_name] = "" if value is None else str(value)
    for formset in (editor.payload, editor.inputs, editor.expectations):
        for bound in formset.management_form:
            data[bound.html_name] = str(bound.value())
    return data


@pytest.mark.parametrize("cell", ["NaN", "Infinity", "-Infinity", "1e400", "[1, NaN]", '{"a": -1e999}'])
def test_a_cell_json_would_not_write_stays_text(cell):
    """Python's JSON reader takes NaN, Infinity and 1e400 (inf): the case was written with
    .nan or .inf and the validator refused it ("must be a finite number")."""
    assert yaml_edit.parse_value(cell) == cell
    assert yaml_edit.parse_value(yaml_edit.format_value(cell)) == cell
    assert yaml_edit.format_value(cell) == cell  # shown as typed, not quoted
