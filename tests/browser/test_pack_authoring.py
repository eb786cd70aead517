"""An author's journey through the pack editor in Debian chromium, as a keyboard and screen
reader user meets it: what the live regions say, where the focus lands, where errors point."""

from __future__ import annotations

import re

import pytest
import yaml
from playwright.sync_api import expect

from packs import services
from tests.browser import console_errors
from tests.packs.publish_fixtures import mental_math

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_save_status_says_what_the_report_found(personas, login, page):
    """The save status is the live region a screen reader hears while typing: it said "Saved
    and validated." whether the text had no issue or ten, and the report (not live) said how many."""
    draft = services.draft_create(
        workspace=personas.workspace, user=personas.owner, name="Math", bundle_text=mental_math()
    )
    login(personas.editor)
    page.goto(f"/packs/drafts/{draft.public_id}/")
    status = page.locator("#save-status")
    editor = page.locator("#bundle-text")

    editor.fill(mental_math(number=0).replace("difficulty: easy", "difficulty: Easy"))
    expect(status).to_have_text("Saved and validated: 2 errors, 0 warnings. F8 moves to the next one.")
    editor.fill(mental_math().replace("      pass_threshold: 1\n", ""))
    expect(status).to_have_text("Saved and validated: valid, 1 warning.")
    editor.fill(mental_math())
    expect(status).to_have_text("Saved and validated: valid, 0 warnings.")
    assert page.js_errors == []


def test_a_case_takes_as_many_rows_as_it_needs_from_the_keyboard(personas, login, page):
    """A new case had two payload rows, one input and one expectation, and no way to add one."""
    draft = services.draft_create(
        workspace=personas.workspace, user=personas.owner, name="Math", bundle_text=mental_math()
    )
    login(personas.editor)
    page.goto(f"/packs/drafts/{draft.public_id}/")
    page.get_by_role("link", name="Add a case").click()
    form = page.locator("#case-form form")
    expect(form.get_by_label("Case key")).to_be_focused()
    page.keyboard.type("pears")
    for n, (key, value) in enumerate([("question", "How many pears?"), ("unit", "pears"), ("count", "3")]):
        if n >= form.get_by_label("payload key").count():
            form.get_by_role("button", name="Add a payload row").press("Enter")
            expect(form.get_by_label("payload key").nth(n)).to_be_focused()
        form.get_by_label("payload key").nth(n).fill(key)
        form.get_by_label("payload value").nth(n).fill(value)
    form.get_by_label("expectation key").first.fill("result")
    form.get_by_label("expectation kind").first.fill("number")
    form.get_by_label("expectation value").first.fill("3")
    form.get_by_role("button", name="Add an expectation row").click()
    expect(form.get_by_label("expectation key").nth(1)).to_be_focused()
    page.keyboard.type("unit")
    form.get_by_label("expectation value").nth(1).fill("pears")
    form.get_by_role("button", name="Save case").click()

    expect(page.locator("#structure")).to_contain_text("pears")
    draft.refresh_from_db()
    saved = yaml.safe_load(draft.bundle_text)["input_sets"][0]["cases"][-1]
    assert saved["payload"] == {"question": "How many pears?", "unit": "pears", "count": 3}
    assert saved["expectations"] == [
        {"key": "result", "kind": "number", "value": 3},
        {"key": "unit", "kind": "text", "value": "pears"},
    ]
    assert page.js_errors == []


def test_an_issue_after_an_emoji_on_its_line_moves_the_cursor_to_its_value(personas, login, page):
    """Columns count characters; the textarea counts UTF-16 units, two for an emoji: the
    cursor landed one place early per emoji before the value."""
    text = mental_math().replace(
        "title: Solve an arithmetic word problem, category: arithmetic, difficulty: easy",
        'title: "🎉🎉 Solve", category: arithmetic, difficulty: Easy',
    )
    draft = services.draft_create(
        workspace=personas.workspace, user=personas.owner, name="Math", bundle_text=text
    )
    login(personas.owner)
    page.goto(f"/packs/drafts/{draft.public_id}/")
    editor = page.locator("#bundle-text")
    editor.focus()
    page.keyboard.press("F8")
    expect(editor).to_be_focused()
    expected = text.index("Easy") + text[: text.index("Easy")].count("🎉")  # in UTF-16 units
    assert editor.evaluate("el => el.selectionStart") == expected
    assert editor.evaluate("el => el.value.slice(el.selectionStart, el.selectionStart + 4)") == "Easy"
    assert page.js_errors == []


def test_text_typed_just_before_a_side_panel_action_is_saved_first(personas, login, page):
    """Deleting a case (or saving one, uploading a file) posts a form and reloads the editor:
    text typed in the half second before, not autosaved yet, was gone."""
    draft = services.draft_create(
        workspace=personas.workspace, user=personas.owner, name="Math", bundle_text=mental_math()
    )
    login(personas.editor)
    page.goto(f"/packs/drafts/{draft.public_id}/")
    editor = page.locator("#bundle-text")
    editor.focus()
    page.keyboard.press("Control+Home")
    page.keyboard.type("# typed just now\n")
    page.get_by_role("button", name="Delete case train").click()

    expect(page.locator("#structure")).not_to_contain_text("train")
    expect(editor).to_have_value(re.compile(r"^# typed just now\n# Example A"))
    draft.refresh_from_db()
    assert draft.bundle_text.startswith("# typed just now\n# Example A")
    assert "case_key: train" not in draft.bundle_text
    assert page.js_errors == []


def test_enter_after_a_list_item_lines_up_with_its_first_key(personas, login, page):
    """Enter kept the dash's indentation: the next key of the item typed there was a YAML
    error (or a key of the parent). It lines up under the item's first key, as editors do."""
    draft = services.draft_create(
        workspace=personas.workspace, user=personas.owner, name="New", bundle_text=""
    )
    login(personas.owner)
    page.goto(f"/packs/drafts/{draft.public_id}/")
    editor = page.locator("#bundle-text")
    editor.focus()
    page.keyboard.type("cases:\n- key: a\nkind: text\n# note:\nvalue: 1")
    expect(editor).to_have_value("cases:\n  - key: a\n    kind: text\n    # note:\n    value: 1")
    assert page.js_errors == []


def test_typing_in_a_draft_published_from_another_tab_says_it_is_gone(personas, login, page):
    """Publishing deletes the draft: the other tab's autosave said "the server answered 404
    ... try again" (it never works again) and htmx logged an error."""
    draft = services.draft_create(
        workspace=personas.workspace, user=personas.owner, name="Math", bundle_text=mental_math()
    )
    login(personas.owner)
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    tab_b = page.context.new_page()
    b_logged = console_errors(tab_b)
    for tab in (page, tab_b):
        tab.goto(f"/packs/drafts/{draft.public_id}/")
    page.locator("#publish-button").click()
    page.wait_for_url("**/packs/versions/**")

    typed = mental_math() + "# typed in the other tab\n"
    tab_b.locator("#bundle-text").fill(typed)
    status = tab_b.locator("#save-status")
    expect(status).to_contain_text("Not saved: this draft is gone (published or deleted")
    conflict = tab_b.locator("#save-conflict")
    expect(conflict.get_by_role("button", name="Copy my text")).to_be_visible()
    expect(conflict.get_by_role("link", name="Reload the saved draft")).to_be_hidden()
    conflict.get_by_role("button", name="Copy my text").click()
    assert tab_b.evaluate("() => navigator.clipboard.readText()") == typed
    assert tab_b.locator("#bundle-text").input_value() == typed
    # The 404 is the editor's to show, not an error htmx logs in the console.
    assert b_logged == []


def test_deleting_the_draft_asks_first(personas, login, page):
    """One press of "Delete this draft" (Enter on the focused button) deleted the draft and
    its files for good, without a question."""
    from packs.models import Draft

    draft = services.draft_create(
        workspace=personas.workspace, user=personas.owner, name="Math", bundle_text=mental_math()
    )
    login(personas.owner)
    page.goto(f"/packs/drafts/{draft.public_id}/")
    asked: list[str] = []

    def answer(dialog, accept):
        asked.append(dialog.message)
        dialog.accept() if accept else dialog.dismiss()

    page.once("dialog", lambda d: answer(d, False))
    page.get_by_role("button", name="Delete this draft").press("Enter")
    expect(page.locator("#bundle-text")).to_be_visible()
    assert asked == ["Delete the draft Math? Its text and files are deleted for good."]
    assert Draft.objects.filter(pk=draft.pk).exists()

    page.once("dialog", lambda d: answer(d, True))
    page.get_by_role("button", name="Delete this draft").click()
    page.wait_for_url("**/packs/")
    expect(page.get_by_role("status")).to_contain_text("Draft 'Math' deleted.")
    assert not Draft.objects.filter(pk=draft.pk).exists()


def test_a_report_arriving_keeps_the_focus_on_the_case_link_it_had(personas, login, page):
    """Each "Edit" link read "Edit" alone (which case?), and a report arriving (the side
    panel swapped with it) dropped the keyboard's focus on one to the top of the page."""
    draft = services.draft_create(
        workspace=personas.workspace, user=personas.owner, name="Math", bundle_text=mental_math()
    )
    login(personas.editor)
    page.goto(f"/packs/drafts/{draft.public_id}/")
    link = page.get_by_role("link", name="Edit case train")
    link.focus()
    # Text typed a moment ago (or in another tab): its report comes in while the focus is here.
    page.locator("#bundle-text").evaluate(
        "(el, text) => { el.value = text; el.dispatchEvent(new Event('input', {bubbles: true})); }",
        mental_math(extra_case=True),
    )
    expect(page.locator('#report[data-valid="true"][data-revision="2"]')).to_be_visible()
    expect(page.locator("#structure")).to_contain_text("apples")
    expect(link).to_be_focused()
    expect(page.get_by_role("button", name="Delete case train")).to_be_visible()
    assert page.js_errors == []
