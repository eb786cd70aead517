"""The editor's Structure panel (``yaml_edit.outline``): read the way validation reads the
text, in one linear pass. ruamel's round-trip loader took 12 s on a 3.9 MB draft whose
comments followed the last value (it joins such a block one line at a time)."""

from __future__ import annotations

import re

import pytest
import yaml

from bench.p1 import workload
from packs.services import yaml_edit


def big_pack(cases: int) -> str:
    doc = workload.pack_document(cases, slug="big")
    return yaml.dump(doc, Dumper=yaml.CSafeDumper, sort_keys=False, width=200)


def test_the_outline_of_a_big_draft_lists_every_case_in_order():
    comments = "".join(f"# note {i}: the rest of this line is a comment\n" for i in range(20_000))
    outline = yaml_edit.outline(comments + big_pack(2_000) + comments)
    [input_set] = outline["input_sets"]
    assert len(input_set["cases"]) == 2_000
    expected = [
        case["case_key"] for case in workload.pack_document(2_000, slug="big")["input_sets"][0]["cases"]
    ]
    assert [case["case_key"] for case in input_set["cases"]] == expected
    assert [c["key"] for c in outline["challenges"]] == ["square"]


def test_the_outline_never_goes_through_the_round_trip_loader(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the outline must not use ruamel's round-trip loader")

    monkeypatch.setattr(yaml_edit, "YAML", refuse)
    monkeypatch.setattr(yaml_edit, "load_yaml_guess_indent", refuse)
    outline = yaml_edit.outline(big_pack(3) + "# trailing\n" * 10)
    assert len(outline["input_sets"][0]["cases"]) == 3


def test_the_outline_reads_yaml_1_2_like_validation_does():
    text = "challenges:\n  - key: on\n    title: Seven\ninput_sets:\n  - key: yes\n    cases:\n      - case_key: no\n"
    outline = yaml_edit.outline(text)
    assert outline["challenges"] == [{"key": "on", "title": "Seven"}]
    assert outline["input_sets"][0]["key"] == "yes"
    assert outline["input_sets"][0]["cases"][0]["case_key"] == "no"


@pytest.mark.parametrize(
    "text", ["challenges: 5\n", "input_sets: 5\n", "input_sets:\n  - key: a\n    cases: 5\n"]
)
def test_a_section_that_is_not_a_list_is_skipped_not_a_crash(text):
    outline = yaml_edit.outline(text)
    assert outline["challenges"] == [] and all(s["cases"] == [] for s in outline["input_sets"])


@pytest.mark.parametrize("text", ["a: [1\n", "- 1\n", "a: *nope\n"])
def test_text_that_does_not_parse_as_a_mapping_has_no_outline(text):
    with pytest.raises(yaml_edit.YamlEditError):
        yaml_edit.outline(text)


@pytest.mark.django_db
def test_the_structure_panel_lists_200_cases_of_a_set_and_says_how_many_more(personas):
    # A 10,000-case draft rendered 10,000 rows on every load and autosave (14.5 MB).
    from packs import services
    from tests.clients import logged_in
    from tests.packs.bundle_helpers import base_pack

    doc = base_pack()
    doc["input_sets"][0]["cases"] = [
        {"challenge_key": "sum", "case_key": f"k{i}", "payload": {"a": i}} for i in range(250)
    ]
    draft = services.draft_create(
        workspace=personas.workspace, name="big", bundle_text=yaml.safe_dump(doc), user=personas.owner
    )
    page = logged_in(personas.owner).get(f"/packs/drafts/{draft.public_id}/").content.decode()
    listed = re.findall(r"<code>(k\d+)</code> <span class=\"muted\">sum</span>", page)
    assert listed == [f"k{i}" for i in range(200)]
    assert "50 more cases not listed here" in page
    assert "· 250 cases" in page


def test_the_report_lists_200_issues_errors_first_and_counts_them_all(personas):
    # A warning per case (the P1 pack's answers appear in its questions) made every autosave
    # answer 5.7 MB of list items on a 10,000-case draft.
    from packs import services
    from tests.clients import logged_in

    text = big_pack(400).replace("  number: 1\n", "  number: 0\n", 1)  # one error too
    draft = services.draft_create(
        workspace=personas.workspace, name="big", bundle_text=text, user=personas.owner
    )
    report = services.draft_validate(draft=draft).to_body()
    assert len(report["errors"]) == 1 and len(report["warnings"]) > 200
    total = len(report["errors"]) + len(report["warnings"])
    page = logged_in(personas.owner).get(f"/packs/drafts/{draft.public_id}/").content.decode()
    kinds = re.findall(r'<li class="issue issue-(error|warning)"', page)
    assert kinds == ["error"] + ["warning"] * 199
    assert f"Showing the first 200 of {total} issues" in page
    assert f"{len(report['warnings'])} warnings" in page and "1 error<" in page


def test_the_gutter_of_a_long_draft_is_left_to_the_script(personas):
    from packs import services
    from tests.clients import logged_in

    client = logged_in(personas.owner)
    for cases, spans in ((20, True), (400, False)):
        text = big_pack(cases)
        lines = text.count("\n") + 1
        draft = services.draft_create(
            workspace=personas.workspace, name="d", bundle_text=text, user=personas.owner
        )
        page = client.get(f"/packs/drafts/{draft.public_id}/").content.decode()
        gutter = re.search(r'<div class="gutter" aria-hidden="true">(.*?)</div>', page).group(1)
        assert (gutter.count("<span") == lines) if spans else gutter == "", (cases, lines)
