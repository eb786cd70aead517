"""The editor's stored report (packs.services.draft_reports): it is always what a full
validate_bundle of the draft's bytes gives, whatever changed (text, cases, files, the
validator), and it spares the editor the validation of what was validated already."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from packs import bundle as pack_bundle
from packs import services
from packs.bundle import BundleIssue
from packs.models import Artifact, Draft, DraftReport
from packs.services import draft_reports, yaml_edit
from tests.clients import logged_in as client_for
from tests.packs.publish_fixtures import INVOICE_PACK, INVOICES_JSON, mental_math

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def draft(personas) -> Draft:
    return services.draft_create(
        workspace=personas.workspace, user=personas.owner, name="Math", bundle_text=mental_math()
    )


@pytest.fixture
def validations(monkeypatch) -> list[int]:
    """Counts the full validations of draft bytes (the one place the editor validates)."""
    calls: list[int] = []
    real = services.drafts.draft_validate

    def counting(**kwargs):
        calls.append(1)
        return real(**kwargs)

    monkeypatch.setattr(services.drafts, "draft_validate", counting)
    return calls


def fresh(draft: Draft) -> dict:
    """The editor's view of a full validation of the draft's bytes now, nothing stored."""
    draft = Draft.objects.get(pk=draft.pk)
    report = pack_bundle.validate_bundle(services.draft_bundle(draft=draft))
    return draft_reports.report_view(report, draft.bundle_text)


def shown(draft: Draft) -> dict:
    return draft_reports.draft_report(Draft.objects.get(pk=draft.pk))


def new_case(key: str, value: object = 1) -> yaml_edit.CaseEdit:
    return yaml_edit.CaseEdit(
        input_set_key="smoke",
        challenge_key="word-problem",
        case_key=key,
        payload={"question": f"What is {key}?"},
        expectations=[{"key": "result", "kind": "number", "value": value}],
    )


def test_a_stored_report_is_used_while_the_draft_is_unchanged(draft, validations):
    first = shown(draft)
    assert first == fresh(draft) and len(validations) == 1
    assert shown(draft) == first and len(validations) == 1  # stored: not validated again
    services.draft_update(draft=Draft.objects.get(pk=draft.pk), name="Renamed")
    assert shown(draft) == first and len(validations) == 1  # a rename changes no byte


@pytest.mark.parametrize(
    "edit",
    [
        pytest.param(
            lambda d: services.draft_update(
                draft=d, bundle_text=mental_math(extra_case=True).replace("apples", "crates")
            ),
            id="add-duplicate",
        ),
        pytest.param(lambda d: services.draft_case_upsert(draft=d, edit=new_case("pears")), id="add"),
        pytest.param(
            lambda d: services.draft_case_delete(draft=d, input_set_key="smoke", case_key="train"),
            id="remove",
        ),
        pytest.param(
            lambda d: services.draft_update(
                draft=d,
                bundle_text=d.bundle_text.replace("challenge_key: word-problem", "challenge_key: nope", 1),
            ),
            id="change",
        ),
        pytest.param(
            lambda d: services.draft_update(draft=d, bundle_text=d.bundle_text.replace("cases:", "cases: [")),
            id="break-the-yaml",
        ),
    ],
)
def test_after_an_edit_of_the_cases_the_report_is_a_fresh_validations(draft, edit, validations):
    before = shown(draft)
    edit(Draft.objects.get(pk=draft.pk))
    after = shown(draft)
    assert after == fresh(draft)
    assert after != before  # each edit changes the report: a stale one would be caught
    assert len(validations) == 2


def test_an_undone_edit_gives_the_first_report_again(draft):
    before = shown(draft)
    original = Draft.objects.get(pk=draft.pk).bundle_text
    services.draft_update(
        draft=Draft.objects.get(pk=draft.pk), bundle_text=original.replace("number: 1", "number: 0")
    )
    assert shown(draft) != before
    services.draft_update(draft=Draft.objects.get(pk=draft.pk), bundle_text=original)
    assert shown(draft) == before == fresh(draft)


def add_file(draft: Draft, path: str, data: bytes, user) -> None:
    services.draft_file_add(draft=Draft.objects.get(pk=draft.pk), path=path, data=data, user=user)


def remove_file(draft: Draft, path: str) -> None:
    services.draft_file_remove(draft=Draft.objects.get(pk=draft.pk), path=path)


def test_uploading_and_removing_files_gives_a_fresh_validations_report(personas):
    draft = services.draft_create(
        workspace=personas.workspace, user=personas.owner, name="Invoices", bundle_text=INVOICE_PACK
    )
    without = shown(draft)
    assert without == fresh(draft) and without["valid"]
    # With a file the draft is a zip, and the asset's relative path must name a member.
    add_file(draft, "notes.txt", b"unused", personas.owner)
    missing = shown(draft)
    assert missing == fresh(draft) and not missing["valid"]
    add_file(draft, "data/invoices.json", INVOICES_JSON, personas.owner)
    bound = shown(draft)
    assert bound == fresh(draft) and bound != missing and bound["valid"]
    assert [item["rule"] for item in bound["items"]] == ["unused_bundle_file"]
    remove_file(draft, "notes.txt")
    clean = shown(draft)
    assert clean == fresh(draft) and clean != bound
    remove_file(draft, "data/invoices.json")
    assert shown(draft) == fresh(draft) == without


def test_a_file_whose_artifact_is_gone_is_validated_as_absent(personas):
    draft = services.draft_create(
        workspace=personas.workspace, user=personas.owner, name="Invoices", bundle_text=INVOICE_PACK
    )
    add_file(draft, "notes.txt", b"unused", personas.owner)
    add_file(draft, "data/invoices.json", INVOICES_JSON, personas.owner)
    bound = shown(draft)
    Artifact.objects.filter(public_id=Draft.objects.get(pk=draft.pk).files["data/invoices.json"]).delete()
    gone = shown(draft)
    assert gone == fresh(draft) and gone != bound and not gone["valid"]


def test_a_changed_validator_computes_the_report_again(draft, monkeypatch, validations):
    stored = shown(draft)
    real = pack_bundle.validate_bundle

    def stricter(data, **kwargs):  # a new rule: one more warning on every bundle
        report = real(data, **kwargs)
        report.warnings.append(BundleIssue("pack", "a new rule", rule="new_rule", severity="warning"))
        return report

    monkeypatch.setattr(pack_bundle, "validate_bundle", stricter)
    monkeypatch.setattr(draft_reports, "validator_fingerprint", lambda: "the next release")
    after = shown(draft)
    assert after == fresh(draft) and after != stored
    assert after["warning_count"] == stored["warning_count"] + 1
    assert len(validations) == 2
    assert DraftReport.objects.get(draft=draft).body == after


def test_the_validator_fingerprint_follows_the_validators_source(tmp_path, monkeypatch):
    package = tmp_path / "fakevalidator"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "rules.py").write_text("LIMIT = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(draft_reports, "_VALIDATOR_SOURCES", ("fakevalidator",))
    draft_reports.validator_fingerprint.cache_clear()
    try:
        first = draft_reports.validator_fingerprint()
        (package / "rules.py").write_text("LIMIT = 2\n")
        draft_reports.validator_fingerprint.cache_clear()
        assert draft_reports.validator_fingerprint() != first
    finally:
        draft_reports.validator_fingerprint.cache_clear()


# --- the editor's requests ------------------------------------------------------------------


def url(draft: Draft, name: str) -> str:
    return reverse(name, kwargs={"draft_id": draft.public_id})


def test_an_autosave_then_opening_the_editor_validates_once(personas, draft, validations):
    client = client_for(personas.editor)
    text = mental_math(extra_case=True)
    saved = client.post(url(draft, "draft-save"), {"bundle_text": text, "revision": "1"}, **HTMX)
    assert saved.status_code == 200 and len(validations) == 0  # answered at once
    report_url = re.search(r'data-report-url="([^"]+)"', saved.content.decode()).group(1)
    report = client.get(report_url.replace("&amp;", "&"), **HTMX)
    assert report.status_code == 200 and 'data-revision="2"' in report.content.decode()
    assert "apples" in report.content.decode()  # the side panel of the saved text
    assert len(validations) == 1
    page = client.get(url(draft, "draft-editor"))
    assert page.status_code == 200 and len(validations) == 1  # the stored report
    assert page.context["report"] == fresh(draft)


def test_a_rename_is_answered_with_the_stored_report_at_once(personas, draft, validations):
    client = client_for(personas.editor)
    client.get(url(draft, "draft-editor"))
    saved = client.post(url(draft, "draft-save"), {"name": "Renamed", "revision": "1"}, **HTMX)
    html = saved.content.decode()
    assert "data-report-pending" not in html and 'data-valid="true"' in html and 'data-revision="2"' in html
    assert len(validations) == 1


def test_the_report_of_a_revision_the_draft_has_left_is_not_answered(personas, draft, validations):
    client = client_for(personas.editor)
    services.draft_update(draft=draft, bundle_text=mental_math(number=0))  # revision 2
    stale = client.get(url(draft, "draft-report") + "?revision=1", **HTMX)
    assert stale.status_code == 204 and stale.content == b""
    assert len(validations) == 0
    current = client.get(url(draft, "draft-report") + "?revision=2", **HTMX)
    assert current.status_code == 200 and "must be greater than 0" in current.content.decode()
    assert client.get(url(draft, "draft-report") + "?revision=x").status_code == 400


def test_a_viewer_reads_the_report_and_an_outsider_gets_404(personas, draft):
    assert client_for(personas.viewer).get(url(draft, "draft-report") + "?revision=1").status_code == 200
    assert client_for(personas.outsider).get(url(draft, "draft-report") + "?revision=1").status_code == 404
    assert client_for(personas.outsider).get(url(draft, "draft-report")).status_code == 404


def test_the_same_text_in_two_workspaces_keeps_a_report_per_draft(personas):
    """Two drafts holding the same text (one with the file its asset names, one without, in
    another workspace): each is shown the report of its own bytes, never the other's, and a
    draft naming the other workspace's artifact reads it as absent (nothing of it leaks)."""
    ours = services.draft_create(
        workspace=personas.workspace, user=personas.owner, name="Invoices", bundle_text=INVOICE_PACK
    )
    add_file(ours, "data/invoices.json", INVOICES_JSON, personas.owner)
    theirs = services.draft_create(
        workspace=personas.other_workspace, user=personas.outsider, name="Invoices", bundle_text=INVOICE_PACK
    )
    add_file(theirs, "notes.txt", b"unused", personas.outsider)
    ours_report, theirs_report = shown(ours), shown(theirs)
    assert ours_report == fresh(ours) and theirs_report == fresh(theirs) and ours_report != theirs_report
    assert DraftReport.objects.filter(draft__in=[ours, theirs]).count() == 2
    # Their draft names our artifact (a forged files map): validated as absent, as published.
    foreign = Draft.objects.get(pk=ours.pk).files["data/invoices.json"]
    Draft.objects.filter(pk=theirs.pk).update(
        files=Draft.objects.get(pk=theirs.pk).files | {"data/invoices.json": foreign}
    )
    forged = shown(theirs)
    assert forged == fresh(theirs) == theirs_report
    assert shown(ours) == ours_report


def unmasked(body: bytes) -> str:
    """A page without its CSRF tokens (masked afresh on every response)."""
    body_text = re.sub(r'("X-CSRFToken": ")[^"]*', r"\1", body.decode())
    return re.sub(r'(name="csrfmiddlewaretoken" value=")[^"]*', r"\1", body_text)


def test_an_outsider_learns_nothing_from_the_report_url(personas, draft):
    """A foreign draft answers as a draft that does not exist, whatever the revision (a bad
    one too: the 400 would tell the draft exists), and nothing is computed for it."""
    outsider = client_for(personas.outsider)
    missing = reverse("draft-report", args=["00000000-0000-4000-8000-000000000000"])
    for query in ("", "?revision=1", "?revision=2", "?revision=x", "?revision=99999999999999999999"):
        for headers in ({}, HTMX):
            foreign = outsider.get(url(draft, "draft-report") + query, **headers)
            nothing = outsider.get(missing + query, **headers)
            assert foreign.status_code == nothing.status_code == 404, query
            assert unmasked(foreign.content) == unmasked(nothing.content)
    assert not DraftReport.objects.filter(draft=draft).exists()
