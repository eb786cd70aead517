"""Drafts: validatable any number of times, structured edits keep comments, zip drafts."""

from __future__ import annotations

import difflib
import io
import zipfile

import pytest
import yaml

from packs import services
from packs.models import Draft, PackVersion
from packs.services import yaml_edit
from packs.services.yaml_edit import CaseEdit
from tests.packs.publish_fixtures import INVOICE_PACK, INVOICES_JSON, invoice_zip, make_zip, mental_math

pytestmark = pytest.mark.django_db


def new_draft(personas, text: str = "", **kwargs) -> Draft:
    return services.draft_create(
        workspace=personas.workspace, user=personas.owner, name="D", bundle_text=text, **kwargs
    )


def test_the_same_draft_validates_to_the_same_result_every_time(personas):
    draft = new_draft(personas, mental_math().replace("number: 1", "number: 0"))
    bodies = [services.draft_validate(draft=draft).to_body() for _ in range(3)]
    assert bodies[0]["valid"] is False
    assert bodies[0] == bodies[1] == bodies[2]


def test_a_draft_with_files_is_a_deterministic_zip(personas):
    draft = new_draft(personas, INVOICE_PACK)
    services.draft_file_add(draft=draft, path="data/invoices.json", data=INVOICES_JSON, user=personas.owner)
    first = services.draft_bundle(draft=draft)
    assert first == services.draft_bundle(draft=Draft.objects.get(pk=draft.pk))
    with zipfile.ZipFile(io.BytesIO(first)) as archive:
        assert archive.namelist() == ["pack.yaml", "data/invoices.json"]
        assert archive.read("data/invoices.json") == INVOICES_JSON
    assert services.draft_validate(draft=draft).valid


def test_publishing_a_draft_twice_is_already_published(personas):
    draft = new_draft(personas, INVOICE_PACK)
    services.draft_file_add(draft=draft, path="data/invoices.json", data=INVOICES_JSON, user=personas.owner)
    copy = new_draft(personas, INVOICE_PACK, files=dict(draft.files))
    first = services.draft_publish(draft=draft, user=personas.owner)
    assert first.created and not Draft.objects.filter(pk=draft.pk).exists()
    again = services.draft_publish(draft=copy, user=personas.owner)
    assert again.already_published


@pytest.mark.parametrize("path", ["../x", "/etc/passwd", "a/../b", "pack.yaml", ""])
def test_file_paths_must_stay_inside_the_bundle(personas, path):
    draft = new_draft(personas, INVOICE_PACK)
    with pytest.raises(services.DraftError):
        services.draft_file_add(draft=draft, path=path, data=b"x", user=personas.owner)


def test_a_case_added_through_the_form_keeps_comments_and_validates(personas):
    draft = new_draft(personas, mental_math())
    edit = CaseEdit(
        input_set_key="smoke",
        challenge_key="word-problem",
        case_key="apples",
        payload={"question": "Three bags of 12 apples: how many apples?"},
        expectations=[{"key": "result", "kind": "number", "value": 36}],
    )
    services.draft_case_upsert(draft=draft, edit=edit)
    draft.refresh_from_db()
    text = draft.bundle_text
    assert "# Example A: each case graded on its own." in text
    assert "# case.expectations.result resolves against each graded case" in text
    cases = yaml.safe_load(text)["input_sets"][0]["cases"]
    assert cases[-1] == {
        "challenge_key": "word-problem",
        "case_key": "apples",
        "payload": {"question": "Three bags of 12 apples: how many apples?"},
        "expectations": [{"key": "result", "kind": "number", "value": 36}],
    }
    report = services.draft_validate(draft=draft)
    assert report.valid, report.to_body()


def test_editing_a_case_changes_only_that_case(personas):
    draft = new_draft(personas, mental_math())
    before = yaml.safe_load(draft.bundle_text)
    edit = CaseEdit(
        input_set_key="smoke",
        challenge_key="word-problem",
        case_key="train-2",
        payload={"question": "A train covers 90 km in 1.5 hours. What is its speed in km/h?"},
        inputs=[{"key": "units", "kind": "text", "value": "km/h"}],
        expectations=[{"key": "result", "kind": "number", "value": 60}],
        original_case_key="train",
    )
    services.draft_case_upsert(draft=draft, edit=edit)
    after = yaml.safe_load(Draft.objects.get(pk=draft.pk).bundle_text)
    assert after["input_sets"][0]["cases"][0] == before["input_sets"][0]["cases"][0]
    assert after["input_sets"][0]["cases"][1]["case_key"] == "train-2"
    assert after["input_sets"][0]["cases"][1]["inputs"] == [{"key": "units", "kind": "text", "value": "km/h"}]
    assert {k: v for k, v in after.items() if k != "input_sets"} == {
        k: v for k, v in before.items() if k != "input_sets"
    }


def test_a_duplicate_case_key_is_refused(personas):
    draft = new_draft(personas, mental_math())
    edit = CaseEdit(input_set_key="smoke", challenge_key="word-problem", case_key="crates")
    with pytest.raises(services.DraftError, match="already has a case"):
        services.draft_case_upsert(draft=draft, edit=edit)


def test_deleting_a_case(personas):
    draft = new_draft(personas, mental_math())
    services.draft_case_delete(draft=draft, input_set_key="smoke", case_key="crates")
    cases = yaml.safe_load(Draft.objects.get(pk=draft.pk).bundle_text)["input_sets"][0]["cases"]
    assert [c["case_key"] for c in cases] == ["train"]


def numeric_keys_pack() -> str:
    """Example A with keys YAML reads as numbers or booleans: validation takes their text."""
    return (
        mental_math()
        .replace("- key: smoke", "- key: 2024-01")
        .replace("case_key: crates", "case_key: 007")
        .replace("case_key: train", "case_key: 1.50")
        .replace("key: word-problem,", "key: yes,")
        .replace("challenge_key: word-problem", "challenge_key: yes")
    )


def test_the_editor_reads_numeric_looking_keys_as_validation_does(personas):
    # The Structure panel showed case "7" for `case_key: 007` (and "1.5", "True"): the
    # published key is "007", and opening the case by it found nothing.
    text = numeric_keys_pack()
    report = services.draft_validate(draft=new_draft(personas, text))
    assert report.valid, report.to_body()
    published = [c["case_key"] for c in report.manifest["input_sets"][0]["cases"]]
    assert published == ["007", "1.50"]
    outline = yaml_edit.outline(text)
    assert [c["key"] for c in outline["challenges"]] == ["yes"]
    (input_set,) = outline["input_sets"]
    assert input_set["key"] == report.manifest["input_sets"][0]["key"] == "2024-01"
    assert [(c["case_key"], c["challenge_key"]) for c in input_set["cases"]] == [
        ("007", "yes"),
        ("1.50", "yes"),
    ]
    case = yaml_edit.find_case(text, input_set_key="2024-01", case_key="007")
    assert case is not None and (case["case_key"], case["challenge_key"]) == ("007", "yes")


def test_saving_a_numeric_looking_case_unchanged_keeps_its_key_and_its_text(personas):
    draft = new_draft(personas, numeric_keys_pack())
    case = yaml_edit.find_case(draft.bundle_text, input_set_key="2024-01", case_key="007")
    edit = CaseEdit(
        input_set_key="2024-01",
        challenge_key=case["challenge_key"],
        case_key=case["case_key"],
        payload=case["payload"],
        expectations=case["expectations"],
        original_case_key=case["case_key"],
    )
    services.draft_case_upsert(draft=draft, edit=edit)
    draft.refresh_from_db()
    assert "case_key: 007\n" in draft.bundle_text  # as written: not 7, not '007'
    report = services.draft_validate(draft=draft)
    assert [c["case_key"] for c in report.manifest["input_sets"][0]["cases"]] == ["007", "1.50"]


def test_a_numeric_looking_case_can_be_renamed_and_deleted_by_its_key(personas):
    draft = new_draft(personas, numeric_keys_pack())
    edit = CaseEdit(input_set_key="2024-01", challenge_key="yes", case_key="008", original_case_key="007")
    services.draft_case_upsert(draft=draft, edit=edit)
    draft.refresh_from_db()
    assert [c["case_key"] for c in yaml_edit.outline(draft.bundle_text)["input_sets"][0]["cases"]] == [
        "008",
        "1.50",
    ]
    with pytest.raises(services.DraftError, match="already has a case"):
        services.draft_case_upsert(
            draft=draft, edit=CaseEdit(input_set_key="2024-01", challenge_key="yes", case_key="1.50")
        )
    services.draft_case_delete(draft=draft, input_set_key="2024-01", case_key="1.50")
    draft.refresh_from_db()
    report = services.draft_validate(draft=draft)
    assert report.valid, report.to_body()
    assert [c["case_key"] for c in report.manifest["input_sets"][0]["cases"]] == ["008"]


def test_form_values_parse_as_json_or_stay_text():
    assert yaml_edit.parse_value("168") == 168
    assert yaml_edit.parse_value("true") is True
    assert yaml_edit.parse_value('["a"]') == ["a"]
    assert yaml_edit.parse_value("007") == "007"
    assert yaml_edit.parse_value("Harbor Tools Ltd") == "Harbor Tools Ltd"
    deep = "[" * 5000 + "]" * 5000  # json raises RecursionError: it stays text, not a 500
    assert yaml_edit.parse_value(deep) == deep
    assert yaml_edit.format_value(deep) == deep
    for value in (168, "168", "text", ["a"], {"b": 1}, True):
        assert yaml_edit.parse_value(yaml_edit.format_value(value)) == value


def test_a_new_version_from_a_published_one_bumps_the_number_and_keeps_comments(personas):
    services.pack_version_publish(
        workspace=personas.workspace, data=mental_math().encode(), user=personas.owner
    )
    v2 = services.pack_version_publish(
        workspace=personas.workspace,
        data=mental_math(number=2, extra_case=True).encode(),
        user=personas.owner,
    ).version
    v1 = PackVersion.objects.get(number=1)
    draft = services.draft_from_version(version=v1, user=personas.owner)
    assert draft.based_on == v1
    assert yaml.safe_load(draft.bundle_text)["version"]["number"] == 3 == v2.number + 1
    assert draft.bundle_text.startswith("# Example A")
    assert services.draft_validate(draft=draft).valid


def test_a_new_version_from_a_zip_version_keeps_its_files(personas):
    version = services.pack_version_publish(
        workspace=personas.workspace, data=invoice_zip(), user=personas.owner
    ).version
    draft = services.draft_from_version(version=version, user=personas.owner)
    assert list(draft.files) == ["data/invoices.json"]
    assert yaml.safe_load(draft.bundle_text)["version"]["number"] == 2
    assert services.draft_publish(draft=draft, user=personas.owner).version.number == 2


def test_a_new_version_from_a_zip_binds_its_files_under_their_normalized_names(personas):
    # pack-format §2.2: members are compared by their normalized names, so a zip written
    # with "./data//invoices.json" binds the asset "data/invoices.json" and publishes; its
    # next draft must bind the file the same way (it was a DraftError, a 500 on the page).
    published = services.pack_version_publish(
        workspace=personas.workspace,
        data=make_zip({"./pack.yaml": INVOICE_PACK, "./data//invoices.json": INVOICES_JSON}),
        user=personas.owner,
    )
    draft = services.draft_from_version(version=published.version, user=personas.owner)
    assert list(draft.files) == ["data/invoices.json"]
    assert draft.bundle_text.startswith("pack: {slug: invoice-totals")
    report = services.draft_validate(draft=draft)
    assert report.valid and report.warnings == []


def test_every_example_pack_is_a_template(personas):
    templates = services.draft_templates()
    assert templates, "examples/packs/ holds the example packs"
    for template in templates:
        draft = services.draft_from_template(
            workspace=personas.workspace, user=personas.owner, template=template["name"]
        )
        report = services.draft_validate(draft=draft)
        assert report.valid, (template, report.to_body())


def test_an_unknown_template_is_refused(personas):
    with pytest.raises(services.DraftError):
        services.draft_from_template(workspace=personas.workspace, user=personas.owner, template="../../etc")


def test_a_template_draft_publishes_the_same_bytes_as_its_directory(personas):
    from packs.services.cli import read_bundle_path
    from packs.services.drafts import examples_dir

    draft = services.draft_from_template(
        workspace=personas.workspace, user=personas.owner, template="invoice-totals"
    )
    assert services.draft_publish(draft=draft, user=personas.owner).created
    again = services.pack_version_publish(
        workspace=personas.workspace,
        data=read_bundle_path(examples_dir() / "invoice-totals"),
        user=personas.owner,
    )
    assert again.already_published


def test_a_second_pack_from_a_template_gets_a_free_slug(personas):
    """A second draft from a template kept the published first one's slug and version 1, so
    publishing it was refused (version exists) however it was edited. It now names a free
    slug; comments and layout of the template are kept."""

    def from_template():
        draft = services.draft_from_template(
            workspace=personas.workspace, user=personas.owner, template="mental-math"
        )
        assert services.draft_publish(draft=draft, user=personas.owner).created
        return draft

    first, second, third = from_template(), from_template(), from_template()
    assert yaml_edit.pack_slug(first.bundle_text) == "mental-math"
    assert yaml_edit.pack_slug(second.bundle_text) == "mental-math-2"
    assert yaml_edit.pack_slug(third.bundle_text) == "mental-math-3"
    assert first.bundle_text.count("#") == second.bundle_text.count("#")
    other = services.draft_from_template(
        workspace=personas.other_workspace, user=personas.outsider, template="mental-math"
    )
    assert yaml_edit.pack_slug(other.bundle_text) == "mental-math"  # another workspace's packs do not count


def test_a_draft_name_that_is_too_long_is_refused_not_cut_short(personas):
    draft = new_draft(personas, mental_math())
    with pytest.raises(services.DraftError, match="at most 300 characters \\(it has 301\\)"):
        services.draft_update(draft=draft, name="N" * 301, bundle_text="changed")
    draft.refresh_from_db()
    assert (draft.name, draft.bundle_text) == ("D", mental_math())  # nothing saved
    with pytest.raises(services.DraftError, match="Draft name"):
        services.draft_create(workspace=personas.workspace, user=personas.owner, name="N" * 301)
    assert services.draft_update(draft=draft, name="N" * 300).name == "N" * 300


def test_a_draft_named_after_a_long_pack_name_keeps_the_version_number(personas):
    version = services.pack_version_publish(
        workspace=personas.workspace, data=mental_math(name="M" * 300).encode(), user=personas.owner
    ).version
    draft = services.draft_from_version(version=version, user=personas.owner)
    assert len(draft.name) == 300 and draft.name.endswith("… v2")


def _changed_lines(before: str, after: str) -> list[str]:
    diff = difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
    return [line for line in diff if line[:1] in "+-" and line[:3] not in ("+++", "---")]


@pytest.mark.parametrize("template", [t["name"] for t in services.draft_templates()])
def test_a_new_version_of_a_template_pack_changes_only_its_number_line(personas, template):
    """ruamel's dump of the whole bundle re-indented block sequences and joined flow mappings'
    continuation lines: the next version of the mental-math example differed on 46 lines,
    and the version diff page showed all of them next to the one change the author made."""
    first = services.draft_from_template(workspace=personas.workspace, user=personas.owner, template=template)
    published = services.draft_publish(draft=first, user=personas.owner).version
    draft = services.draft_from_version(version=published, user=personas.owner)
    number = published.number
    assert _changed_lines(first.bundle_text, draft.bundle_text) == [
        f"-  number: {number}",
        f"+  number: {number + 1}",
    ]


def test_a_second_pack_from_a_flow_style_template_changes_only_its_slug(personas):
    def from_template():
        draft = services.draft_from_template(
            workspace=personas.workspace, user=personas.owner, template="mental-math"
        )
        services.draft_publish(draft=draft, user=personas.owner)
        return draft

    first, second = from_template(), from_template()
    assert _changed_lines(first.bundle_text, second.bundle_text) == [
        "-pack: {slug: mental-math, name: Mental Math, family: reasoning}",
        "+pack: {slug: mental-math-2, name: Mental Math, family: reasoning}",
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "version: {number: 1, execution_mode: prompt_eval}\n",
            "version: {number: 7, execution_mode: prompt_eval}\n",
        ),
        ("version:\n  number: 1 # bumped by hand\n", "version:\n  number: 7 # bumped by hand\n"),
        ("version:\r\n  number: 1\r\n", "version:\r\n  number: 7\r\n"),
        # a quoted number is a string: rewriting it in place would keep it one, so it is dumped
        ("version:\n  number: '1'\n", "version:\n  number: 7\n"),
    ],
)
def test_setting_the_version_number_rewrites_only_its_value(text, expected):
    assert yaml_edit.set_version_number(text, 7) == expected
