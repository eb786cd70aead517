"""Pack pages: editor, publish, history, diff. Outsiders 404, viewers 403 on writes, CSRF."""

from __future__ import annotations

import re
from html import unescape as html_unescape

import pytest
from django.test import Client
from django.urls import reverse

from packs import services
from packs.models import Draft, Pack, PackVersion
from tests.clients import logged_in as client_for
from tests.packs.bundle_helpers import base_pack, dump
from tests.packs.publish_fixtures import INVOICES_JSON, mental_math

pytestmark = pytest.mark.django_db


@pytest.fixture
def draft(personas) -> Draft:
    return services.draft_create(
        workspace=personas.workspace, user=personas.owner, name="Mental math draft", bundle_text=mental_math()
    )


@pytest.fixture
def two_versions(personas):
    services.pack_version_publish(
        workspace=personas.workspace, data=mental_math().encode(), user=personas.owner
    )
    return services.pack_version_publish(
        workspace=personas.workspace,
        data=mental_math(number=2, extra_case=True, description="<script>alert(1)</script>").encode(),
        user=personas.owner,
    )


def editor_url(draft: Draft, name: str = "draft-editor") -> str:
    return reverse(name, kwargs={"draft_id": draft.public_id})


# --- list and new ---------------------------------------------------------------------------


def test_the_pack_list_shows_the_current_workspace(personas, two_versions, draft):
    services.pack_version_publish(
        workspace=personas.other_workspace,
        data=mental_math(slug="not-yours").encode(),
        user=personas.outsider,
    )
    page = client_for(personas.viewer).get(reverse("pack-list"))
    assert page.status_code == 200
    html = page.content.decode()
    assert "mental-math" in html and "v2" in html and "Mental math draft" in html
    assert "not-yours" not in html
    assert "New pack" not in html  # viewers cannot create


def test_pages_need_a_login(personas):
    response = Client().get(reverse("pack-list"))
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))


def test_a_new_blank_pack_opens_the_editor(personas):
    response = client_for(personas.editor).post(reverse("draft-new"), {"template": "", "name": "Fresh"})
    draft = Draft.objects.get()
    assert response.status_code == 302 and response["Location"] == editor_url(draft)
    assert draft.name == "Fresh"
    assert services.draft_validate(draft=draft).valid


def test_a_viewer_cannot_start_a_pack(personas):
    assert client_for(personas.viewer).post(reverse("draft-new"), {"template": ""}).status_code == 403
    assert not Draft.objects.exists()


def test_html_posts_enforce_csrf(personas, draft):
    client = Client(enforce_csrf_checks=True)
    client.force_login(personas.owner)
    assert client.post(editor_url(draft, "draft-save"), {"bundle_text": "x"}).status_code == 403
    page = client.get(editor_url(draft))
    assert b'hx-headers=\'{"X-CSRFToken": "' in page.content


# --- the editor -------------------------------------------------------------------------------


def test_the_editor_shows_the_yaml_the_report_and_the_structure(personas, draft):
    page = client_for(personas.owner).get(editor_url(draft))
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="bundle-text"' in html and "Example A: each case graded on its own." in html
    assert 'id="report"' in html and "valid" in html
    assert (
        'id="publish-button"' in html and "disabled" not in html.split('id="publish-button"')[1].split(">")[0]
    )
    assert "crates" in html and "train" in html and "word-problem" in html
    # every hx-get also has a real href
    assert 'href="/packs/drafts/' in html and "hx-get=" in html


def test_a_viewer_reads_the_editor_but_cannot_change_anything(personas, draft):
    client = client_for(personas.viewer)
    page = client.get(editor_url(draft))
    assert page.status_code == 200
    assert b"readonly" in page.content and b'id="publish-button"' not in page.content
    for name, data in (
        ("draft-save", {"bundle_text": "x"}),
        ("draft-publish", {}),
        ("draft-case-save", {}),
        ("draft-case-delete", {"set": "smoke", "case": "crates"}),
        ("draft-file-remove", {"path": "x"}),
        ("draft-delete", {}),
    ):
        assert client.post(editor_url(draft, name), data).status_code == 403, name
    draft.refresh_from_db()
    assert draft.bundle_text == mental_math()


def test_outsiders_get_404_on_every_draft_page(personas, draft):
    client = client_for(personas.outsider)
    assert client.get(editor_url(draft)).status_code == 404
    assert client.get(editor_url(draft, "draft-case-form")).status_code == 404
    assert client.get(editor_url(draft, "draft-report")).status_code == 404
    for name in ("draft-save", "draft-publish", "draft-case-save", "draft-file-upload", "draft-delete"):
        assert client.post(editor_url(draft, name), {}).status_code == 404, name
    assert Draft.objects.filter(pk=draft.pk).exists()


def report_url_of(html: str) -> str:
    """The report an autosave's answer loads next (editor.js requests it)."""
    found = re.search(r'data-report-url="([^"]+)"', html)
    assert found, "the answer names no report to load"
    return found.group(1).replace("&amp;", "&")


def test_typing_saves_at_once_and_the_report_follows_in_a_second_request(personas, draft):
    broken = mental_math().replace("number: 1", "number: 0")
    client = client_for(personas.editor)
    response = client.post(
        editor_url(draft, "draft-save"), {"name": "Renamed", "bundle_text": broken}, HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert html.lstrip().startswith('<section id="report"')
    assert "data-report-pending" in html and 'data-revision="2"' in html
    assert "must be greater than 0" not in html  # not validated in the save
    assert "<title>Renamed · editor · AgentClash</title>" in html  # htmx sets the page's title
    assert '<h1 id="draft-heading" hx-swap-oob="true"><bdi>Renamed</bdi> ' in html
    assert 'id="draft-revision" value="2" hx-swap-oob="true"' in html
    assert "<html" not in html
    draft.refresh_from_db()
    assert draft.bundle_text == broken and draft.name == "Renamed"

    url = report_url_of(html)
    assert url == editor_url(draft, "draft-report") + "?revision=2"
    report = client.get(url, HTTP_HX_REQUEST="true")
    assert report.status_code == 200
    html = report.content.decode()
    assert html.lstrip().startswith('<section id="report"') and 'data-revision="2"' in html
    assert "version.number" in html and "must be greater than 0" in html
    assert 'class="issue-jump" data-line="' in html
    assert 'id="structure" class="panel" hx-swap-oob="true"' in html
    assert "<html" not in html


def test_a_plain_save_redirects_back_to_the_editor(personas, draft):
    response = client_for(personas.editor).post(
        editor_url(draft, "draft-save"), {"bundle_text": "pack: {}\n"}
    )
    assert response.status_code == 302 and response["Location"] == editor_url(draft)


def test_a_syntax_error_is_listed_with_its_line(personas, draft):
    response = client_for(personas.editor).post(
        editor_url(draft, "draft-save"),
        {"bundle_text": "pack: {slug: x\nversion: [\n"},
        HTTP_HX_REQUEST="true",
    )
    html = client_for(personas.editor).get(report_url_of(response.content.decode())).content.decode()
    assert "must be valid YAML" in html
    assert "Fix the YAML errors to see" in html


def report_html(personas, draft: Draft, text: str) -> str:
    client = client_for(personas.editor)
    response = client.post(editor_url(draft, "draft-save"), {"bundle_text": text}, HTTP_HX_REQUEST="true")
    return client.get(report_url_of(response.content.decode())).content.decode()


def test_a_short_detail_reads_right_after_the_message_escaped(personas, draft):
    html = report_html(personas, draft, "pack: a: b\n")
    assert re.search(
        r'<span class="issue-message">must be valid YAML</span>\s*'
        r'<span class="issue-detail">— mapping values are not allowed in this context</span>',
        html,
    )
    assert "<details>" not in html

    doc = base_pack()
    doc["challenges"][0]["key"] = "<b>sum</b>"
    doc["input_sets"][0]["cases"][0]["challenge_key"] = "<b>summ</b>"
    html = report_html(personas, draft, dump(doc))
    assert re.search(
        r'<span class="issue-message">must reference a declared challenge</span>\s*'
        r'<span class="issue-detail">— declared: &quot;&lt;b&gt;sum&lt;/b&gt;&quot;; '
        r"did you mean &quot;&lt;b&gt;sum&lt;/b&gt;&quot;\?</span>",
        html,
    )
    assert "<b>" not in html


def test_a_long_detail_stays_folded(personas, draft):
    doc = base_pack()
    template = doc["challenges"][0]
    keys = [f"challenge-with-a-rather-long-key-{i}" for i in range(6)]
    doc["challenges"] = [dict(template, key=key) for key in keys]
    doc["input_sets"][0]["cases"][0]["challenge_key"] = "nothing-like-them"
    html = report_html(personas, draft, dump(doc))
    detail = "declared: " + ", ".join(f"&quot;{key}&quot;" for key in keys[:5]) + " (and 1 more)"
    assert len(html_unescape(detail)) > 160
    assert f"<details><summary>detail</summary><pre>{detail}</pre></details>" in html
    assert 'class="issue-detail"' not in html


def test_the_report_folds_a_detail_of_several_lines_or_over_160_characters(draft):
    from django.template.loader import render_to_string

    def item(detail: str | None) -> dict[str, object]:
        out: dict[str, object] = {"field": "f", "message": "m", "line": 1, "column": 1, "kind": "error"}
        return out if detail is None else {**out, "detail": detail}

    details = [None, "x" * 160, "y" * 161, "one\ntwo"]
    report = {"valid": False, "error_count": 4, "warning_count": 0, "items": [item(d) for d in details]}
    html = render_to_string("packs/draft_editor.html#report", {"report": report, "draft": draft})
    assert re.findall(r'<span class="issue-detail">— ([^<]*)</span>', html) == ["x" * 160]
    assert re.findall(r"<details><summary>detail</summary><pre>([^<]*)</pre></details>", html) == [
        "y" * 161,
        "one\ntwo",
    ]


def test_the_case_form_loads_as_a_partial_and_saves_into_the_yaml(personas, draft):
    client = client_for(personas.editor)
    partial = client.get(
        editor_url(draft, "draft-case-form") + "?set=smoke&case=crates", HTTP_HX_REQUEST="true"
    )
    assert partial.status_code == 200
    html = partial.content.decode()
    assert html.lstrip().startswith('<section id="case-form"') and 'value="crates"' in html and "168" in html
    full = client.get(editor_url(draft, "draft-case-form") + "?set=smoke&case=crates")
    assert b"<html" in full.content
    data = {
        "input_set_key": "smoke",
        "challenge_key": "word-problem",
        "case_key": "apples",
        "original_case_key": "",
        "payload-TOTAL_FORMS": "1",
        "payload-INITIAL_FORMS": "0",
        "payload-0-key": "question",
        "payload-0-value": "Three bags of 12 apples: how many apples?",
        "inputs-TOTAL_FORMS": "0",
        "inputs-INITIAL_FORMS": "0",
        "expectations-TOTAL_FORMS": "1",
        "expectations-INITIAL_FORMS": "0",
        "expectations-0-key": "result",
        "expectations-0-kind": "number",
        "expectations-0-value": "36",
        "expectations-0-source": "",
    }
    response = client.post(editor_url(draft, "draft-case-save"), data)
    assert response.status_code == 302
    draft.refresh_from_db()
    assert "case_key: apples" in draft.bundle_text and "value: 36" in draft.bundle_text
    assert "# Example A" in draft.bundle_text
    assert services.draft_validate(draft=draft).valid


def test_a_case_form_error_rerenders_with_400(personas, draft):
    data = {
        "input_set_key": "smoke",
        "challenge_key": "word-problem",
        "case_key": "crates",
        "payload-TOTAL_FORMS": "0",
        "payload-INITIAL_FORMS": "0",
        "inputs-TOTAL_FORMS": "0",
        "inputs-INITIAL_FORMS": "0",
        "expectations-TOTAL_FORMS": "0",
        "expectations-INITIAL_FORMS": "0",
    }
    response = client_for(personas.editor).post(editor_url(draft, "draft-case-save"), data)
    assert response.status_code == 400
    assert b"already has a case" in response.content


def test_deleting_a_case_from_the_panel(personas, draft):
    client_for(personas.editor).post(
        editor_url(draft, "draft-case-delete"), {"set": "smoke", "case": "crates"}
    )
    draft.refresh_from_db()
    assert "case_key: crates" not in draft.bundle_text


def test_uploading_and_removing_a_bundle_file(personas, draft):
    from django.core.files.uploadedfile import SimpleUploadedFile

    client = client_for(personas.editor)
    upload = SimpleUploadedFile("invoices.json", INVOICES_JSON, content_type="application/json")
    client.post(editor_url(draft, "draft-file-upload"), {"file": upload, "path": "data/invoices.json"})
    draft.refresh_from_db()
    assert list(draft.files) == ["data/invoices.json"]
    page = client.get(editor_url(draft))
    assert b"data/invoices.json" in page.content
    client.post(editor_url(draft, "draft-file-remove"), {"path": "data/invoices.json"})
    draft.refresh_from_db()
    assert draft.files == {}


# --- publish -----------------------------------------------------------------------------------


def test_publishing_a_valid_draft_opens_the_version_page(personas, draft):
    response = client_for(personas.editor).post(
        editor_url(draft, "draft-publish"), {"bundle_text": mental_math()}
    )
    version = PackVersion.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("version-detail", kwargs={"version_id": version.public_id})
    assert not Draft.objects.exists()


def test_the_server_refuses_to_publish_a_draft_with_errors(personas, draft):
    broken = mental_math().replace("number: 1", "number: 0")
    response = client_for(personas.editor).post(editor_url(draft, "draft-publish"), {"bundle_text": broken})
    assert response.status_code == 400
    assert b"fix them before publishing" in response.content
    assert not PackVersion.objects.exists()
    assert Draft.objects.get().bundle_text == broken


def test_a_publish_conflict_is_shown_on_the_editor(personas, draft):
    services.pack_version_publish(
        workspace=personas.workspace, data=mental_math(extra_case=True).encode(), user=personas.owner
    )
    response = client_for(personas.editor).post(editor_url(draft, "draft-publish"), {})
    assert response.status_code == 409
    assert b"already published" in response.content


# --- versions, history, diff --------------------------------------------------------------------


def test_the_version_page_shows_its_content(personas, two_versions):
    version = two_versions.version
    page = client_for(personas.viewer).get(
        reverse("version-detail", kwargs={"version_id": version.public_id})
    )
    assert page.status_code == 200
    html = page.content.decode()
    assert "word-problem" in html and "smoke" in html and "apples" in html
    assert "New version from this one" not in html  # viewer
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>alert(1)" not in html


def test_the_pack_page_lists_the_history(personas, two_versions):
    page = client_for(personas.viewer).get(
        reverse("pack-detail", kwargs={"pack_id": two_versions.pack.public_id})
    )
    assert page.status_code == 200
    assert page.content.decode().count("/packs/versions/") >= 2


def test_the_diff_between_two_versions_is_escaped(personas, two_versions):
    url = reverse("version-diff", kwargs={"pack_id": two_versions.pack.public_id}) + "?from=1&to=2"
    page = client_for(personas.viewer).get(url)
    assert page.status_code == 200
    html = page.content.decode()
    assert 'class="d-add">' in html and "case_key: apples" in html
    assert "&lt;script&gt;" in html and "<script>alert" not in html
    missing = client_for(personas.viewer).get(url.replace("to=2", "to=7"))
    assert missing.status_code == 404


def test_a_new_version_from_this_one(personas, two_versions):
    url = reverse("version-new-draft", kwargs={"version_id": two_versions.version.public_id})
    assert client_for(personas.viewer).post(url).status_code == 403
    response = client_for(personas.editor).post(url)
    draft = Draft.objects.get()
    assert response.status_code == 302 and response["Location"] == editor_url(draft)
    assert "number: 3" in draft.bundle_text


def test_the_bundle_download(personas, two_versions):
    url = reverse("version-bundle", kwargs={"version_id": two_versions.version.public_id})
    response = client_for(personas.viewer).get(url)
    assert response.status_code == 200 and response.content == bytes(two_versions.version.source)


def test_outsiders_get_404_on_every_pack_and_version_page(personas, two_versions):
    client = client_for(personas.outsider)
    pack_id, version_id = two_versions.pack.public_id, two_versions.version.public_id
    for url in (
        reverse("pack-detail", kwargs={"pack_id": pack_id}),
        reverse("version-diff", kwargs={"pack_id": pack_id}),
        reverse("version-detail", kwargs={"version_id": version_id}),
        reverse("version-bundle", kwargs={"version_id": version_id}),
    ):
        assert client.get(url).status_code == 404, url
    assert client.post(reverse("version-new-draft", kwargs={"version_id": version_id})).status_code == 404
    assert Pack.objects.count() == 1 and not Draft.objects.exists()


def test_publish_errors_found_only_at_publish_are_shown(personas):
    import uuid

    text = mental_math(asset_artifact_id=str(uuid.uuid4()))
    draft = services.draft_create(
        workspace=personas.workspace, user=personas.owner, name="D", bundle_text=text
    )
    response = client_for(personas.owner).post(editor_url(draft, "draft-publish"), {})
    assert response.status_code == 400
    assert b"must reference an artifact in this workspace" in response.content


@pytest.mark.parametrize("model", ["pack", "packversion", "artifact", "draft", "case", "asset"])
def test_the_admin_lists_pack_objects(personas, two_versions, draft, model):
    from django.contrib.auth import get_user_model

    admin = get_user_model().objects.create_superuser("root", password="pw-root-123")
    client = client_for(admin)
    listing = client.get(f"/admin/packs/{model}/")
    assert listing.status_code == 200
    assert client.get(f"/admin/packs/{model}/?q=mental").status_code == 200


def test_a_published_version_is_read_only_in_the_admin(personas, two_versions):
    from django.contrib.auth import get_user_model

    admin = get_user_model().objects.create_superuser("root", password="pw-root-123")
    page = client_for(admin).get(f"/admin/packs/packversion/{two_versions.version.pk}/change/")
    assert page.status_code == 200
    assert b'name="_save"' not in page.content


NESTED = {
    "flow": "pack: " + "[" * 600 + "]" * 600 + "\ninput_sets: []\n",
    "block": "pack:\n" + "".join(" " * (i + 1) + f"k{i}:\n" for i in range(600)) + "input_sets: []\n",
}


@pytest.mark.parametrize("shape", NESTED)
def test_a_structured_case_edit_of_a_draft_nested_too_deeply_is_refused_not_a_500(personas, shape):
    """The round-trip YAML loader recursed once per level: a draft nested 600 deep (which the
    validator already calls "is nested too deeply") made the case form's save and delete 500."""
    nested = services.draft_create(
        workspace=personas.workspace, user=personas.owner, name="deep", bundle_text=NESTED[shape]
    )
    client = client_for(personas.editor)
    data = {
        "input_set_key": "smoke",
        "challenge_key": "word-problem",
        "case_key": "apples",
        "payload-TOTAL_FORMS": "0",
        "payload-INITIAL_FORMS": "0",
        "inputs-TOTAL_FORMS": "0",
        "inputs-INITIAL_FORMS": "0",
        "expectations-TOTAL_FORMS": "0",
        "expectations-INITIAL_FORMS": "0",
    }
    saved = client.post(editor_url(nested, "draft-case-save"), data)
    assert saved.status_code == 400
    assert b"nested too deeply" in saved.content
    deleted = client.post(editor_url(nested, "draft-case-delete"), {"set": "smoke", "case": "crates"})
    assert deleted.status_code == 302
    nested.refresh_from_db()
    assert nested.bundle_text == NESTED[shape]


def test_an_uploaded_file_over_the_unpacked_limit_is_refused_without_being_read(personas, draft, monkeypatch):
    """No bundle can hold a file over 50 MiB (pack-format §2.2), but the editor's upload read
    a file of any size into memory and stored it as an artifact."""
    from django.core.files.uploadedfile import SimpleUploadedFile

    from packs.bundle import archive
    from packs.models import Artifact

    monkeypatch.setattr(archive, "MAX_UNPACKED_BYTES", 1000)
    client = client_for(personas.editor)
    upload = SimpleUploadedFile("big.bin", b"x" * 1001, content_type="application/octet-stream")
    response = client.post(editor_url(draft, "draft-file-upload"), {"file": upload, "path": "data/big.bin"})
    assert response.status_code == 302
    draft.refresh_from_db()
    assert draft.files == {}
    assert not Artifact.objects.filter(workspace=personas.workspace, size=1001).exists()
    page = client.get(editor_url(draft))
    assert b"data/big.bin not added" in page.content
    ok = SimpleUploadedFile("ok.bin", b"x" * 1000, content_type="application/octet-stream")
    client.post(editor_url(draft, "draft-file-upload"), {"file": ok, "path": "data/ok.bin"})
    draft.refresh_from_db()
    assert list(draft.files) == ["data/ok.bin"]


def _jump_lines(html: str, container_id: str) -> list[str]:
    """The ``data-line`` of each line button in the element ``container_id`` of the page."""
    start = html.index(f'id="{container_id}"')
    block = html[start : html.index("</div>", start)]
    return re.findall(r'class="issue-jump" data-line="(\d+)"', block)


def test_a_strict_publish_refused_for_warnings_says_so_and_where(personas, draft):
    """Strict mode refused a pack with a warning and said "The pack has errors", listing the
    warning without its line; the strict box came back unchecked."""
    text = mental_math().replace("      pass_threshold: 1\n", "")  # implicit_threshold warning
    response = client_for(personas.editor).post(
        editor_url(draft, "draft-publish"), {"bundle_text": text, "strict": "on"}
    )
    assert response.status_code == 400
    html = response.content.decode()
    assert "has errors" not in html
    assert "Strict mode: warnings block publishing" in html
    assert _jump_lines(html, "publish-error") == [str(text.split("\n").index("      dimensions:") + 1)]
    assert "implicit_threshold" in html.split('id="publish-error"')[1].split("</div>")[0]
    assert re.search(r'<input type="checkbox" name="strict"[^>]* checked', html)
    assert not PackVersion.objects.exists()


def test_a_publish_conflict_points_at_the_value_to_change(personas, draft):
    services.pack_version_publish(
        workspace=personas.workspace, data=mental_math(extra_case=True).encode(), user=personas.owner
    )
    response = client_for(personas.editor).post(editor_url(draft, "draft-publish"), {})
    assert response.status_code == 409
    html = response.content.decode()
    number_line = mental_math().split("\n").index("  number: 1") + 1
    assert _jump_lines(html, "publish-error") == [str(number_line)]
    assert "<code>version.number</code>" in html.split('id="publish-error"')[1].split("</div>")[0]


def test_uploading_over_a_bundle_file_says_it_replaced_it(personas, draft):
    """The second upload to a path replaced the first file and said "added to the bundle"."""
    from django.core.files.uploadedfile import SimpleUploadedFile

    client = client_for(personas.editor)
    first = SimpleUploadedFile("invoices.json", INVOICES_JSON, content_type="application/json")
    page = client.post(
        editor_url(draft, "draft-file-upload"), {"file": first, "path": "data/invoices.json"}, follow=True
    )
    assert "data/invoices.json added to the bundle." in page.content.decode()
    second = SimpleUploadedFile("other.json", b"[]", content_type="application/json")
    page = client.post(
        editor_url(draft, "draft-file-upload"), {"file": second, "path": "data/invoices.json"}, follow=True
    )
    html = html_unescape(page.content.decode()).replace("\xa0", " ")
    assert f"data/invoices.json replaced (it was {len(INVOICES_JSON)} bytes, it is 2 bytes)." in html
    draft.refresh_from_db()
    assert list(draft.files) == ["data/invoices.json"]


@pytest.mark.parametrize("htmx", [False, True])
def test_opening_a_case_key_the_set_does_not_have_says_so_in_the_editor(personas, draft, htmx):
    """The "open one by key" box of a long set: a mistyped key was a bare 404 page."""
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    response = client_for(personas.editor).get(
        editor_url(draft, "draft-case-form") + "?set=smoke&case=crate", **headers
    )
    # htmx swaps a 200 only: the fragment is the form saying what is wrong.
    assert response.status_code == (200 if htmx else 404)
    html = html_unescape(response.content.decode())
    assert "Input set smoke has no case crate; keys are case-sensitive." in html
    assert 'id="case-form"' in html
    assert ('id="bundle-text"' in html) is not htmx


def test_an_autosave_to_a_draft_that_is_gone_says_so(personas, draft):
    url = editor_url(draft, "draft-save")
    services.draft_delete(draft=draft)
    answer = client_for(personas.editor).post(url, {"bundle_text": "x"}, HTTP_HX_REQUEST="true")
    assert answer.status_code == 404
    assert "Not saved: this draft is gone (published or deleted" in html_unescape(answer.content.decode())
    assert client_for(personas.editor).post(url, {"bundle_text": "x"}).status_code == 404


def test_a_refused_case_names_its_field_and_takes_the_focus_there(personas, draft):
    """The field's error was a bare span: the input's aria-describedby (set by Django) named
    an id nothing had, and the focus was at the top of the page, far from the side panel."""
    data = {
        "input_set_key": "smoke",
        "challenge_key": "word-problem",
        "case_key": "",
        "payload-TOTAL_FORMS": "0",
        "payload-INITIAL_FORMS": "0",
        "inputs-TOTAL_FORMS": "0",
        "inputs-INITIAL_FORMS": "0",
        "expectations-TOTAL_FORMS": "0",
        "expectations-INITIAL_FORMS": "0",
    }
    client = client_for(personas.editor)
    html = client.post(editor_url(draft, "draft-case-save"), data).content.decode()
    case_key = re.search(r'<input [^>]*name="case_key"[^>]*>', html).group()
    assert 'aria-describedby="id_case_key_error"' in case_key and "autofocus" in case_key
    assert re.search(r'id="id_case_key_error"[^>]*>[^<]*required', html)
    # Refused by the YAML (a key the set has): the focus is on the case key too.
    html = client.post(editor_url(draft, "draft-case-save"), {**data, "case_key": "crates"}).content.decode()
    assert "autofocus" in re.search(r'<input [^>]*name="case_key"[^>]*>', html).group()


@pytest.mark.parametrize(
    "name",
    [
        "draft-save",
        "draft-case-save",
        "draft-case-delete",
        "draft-file-upload",
        "draft-file-remove",
        "draft-publish",
        "draft-delete",
    ],
)
def test_a_get_of_a_form_address_goes_back_to_the_editor(personas, draft, name):
    """The address a refused form was answered at (a case in error, a publish refused), typed
    again or reached through the login page after the session ended (its ``next``), was a
    blank 405 page."""
    response = client_for(personas.editor).get(editor_url(draft, name))
    assert response.status_code == 302 and response["Location"] == editor_url(draft)
    assert client_for(personas.outsider).get(editor_url(draft, name), follow=True).status_code == 404
    assert Draft.objects.filter(pk=draft.pk).exists()


def test_a_get_of_the_open_file_address_goes_to_the_packs_page(personas):
    response = client_for(personas.editor).get(reverse("draft-open-file"))
    assert response.status_code == 302 and response["Location"] == reverse("pack-list")


def test_a_file_uploaded_without_a_path_binds_to_the_asset_of_its_name(personas):
    """The path box is optional and was the file's name: invoices.json landed beside the
    asset's data/invoices.json, bound to nothing (a warning about an unused file)."""
    from django.core.files.uploadedfile import SimpleUploadedFile

    from tests.packs.publish_fixtures import INVOICE_PACK

    draft = services.draft_create(
        workspace=personas.workspace, user=personas.owner, name="Inv", bundle_text=INVOICE_PACK
    )
    client = client_for(personas.editor)
    upload = SimpleUploadedFile("invoices.json", INVOICES_JSON, content_type="application/json")
    page = client.post(editor_url(draft, "draft-file-upload"), {"file": upload, "path": ""}, follow=True)
    draft.refresh_from_db()
    assert list(draft.files) == ["data/invoices.json"]
    assert "data/invoices.json added to the bundle (the path of asset invoices)." in html_unescape(
        page.content.decode()
    )
    report = services.draft_validate(draft=draft)
    assert report.valid and report.to_body()["warnings"] == []
    # A name no asset has stays where it was put.
    other = SimpleUploadedFile("notes.txt", b"n", content_type="text/plain")
    client.post(editor_url(draft, "draft-file-upload"), {"file": other, "path": ""})
    draft.refresh_from_db()
    assert sorted(draft.files) == ["data/invoices.json", "notes.txt"]
