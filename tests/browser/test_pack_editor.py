"""The pack editor in Debian chromium: type, see errors at their lines, jump, fix, publish."""

from __future__ import annotations

import pytest
from django.conf import settings
from playwright.sync_api import expect

from packs import services
from packs.models import PackVersion
from tests.browser import console_errors
from tests.packs.bundle_helpers import base_pack, dump
from tests.packs.publish_fixtures import mental_math

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def offset_of(text: str, line: int, column: int) -> int:
    lines = text.split("\n")
    return sum(len(x) + 1 for x in lines[: line - 1]) + column - 1


def test_type_an_invalid_pack_jump_to_the_error_fix_it_and_publish(personas, login, page):
    draft = services.draft_create(
        workspace=personas.workspace, user=personas.owner, name="Math", bundle_text=""
    )
    login(personas.owner)
    page.goto(f"/packs/drafts/{draft.public_id}/")
    editor = page.locator("#bundle-text")

    invalid = mental_math().replace("  number: 1\n", "  number: 0\n")
    number_line = invalid.split("\n").index("  number: 0") + 1
    editor.fill(invalid)

    # Validation runs as you type: the error is listed at its line.
    jump = page.locator(f'#report .issue-error .issue-jump[data-line="{number_line}"]')
    expect(jump).to_be_visible()
    expect(page.locator("#report")).to_contain_text("must be greater than 0")
    expect(page.locator("#publish-button")).to_be_disabled()
    expect(page.locator(f'.gutter span[data-line="{number_line}"]')).to_have_class("mark-error")

    # Clicking it moves the cursor to that line and column.
    column = int(jump.get_attribute("data-column"))
    jump.click()
    expect(editor).to_be_focused()
    assert editor.evaluate("el => el.selectionStart") == offset_of(invalid, number_line, column)

    # Fix it from the keyboard where the cursor now is, and wait for the report to agree.
    page.keyboard.press("End")
    page.keyboard.press("Backspace")
    page.keyboard.type("1")
    expect(page.locator('#report[data-valid="true"]')).to_be_visible()
    expect(page.locator("#publish-button")).to_be_enabled()

    page.locator("#publish-button").click()
    page.wait_for_url("**/packs/versions/**")
    version = PackVersion.objects.get()
    assert page.url.endswith(f"/packs/versions/{version.public_id}/")
    expect(page.locator("h1")).to_contain_text("v1")
    assert bytes(version.source).decode() == mental_math()
    assert page.js_errors == []


def test_add_a_case_from_the_side_panel_without_touching_yaml(personas, login, page):
    draft = services.draft_create(
        workspace=personas.workspace, user=personas.owner, name="Math", bundle_text=mental_math()
    )
    login(personas.editor)
    page.goto(f"/packs/drafts/{draft.public_id}/")
    page.get_by_role("link", name="Add a case").click()
    form = page.locator("#case-form form")
    # The form arrives by htmx and takes the focus: only then is it safe to type.
    expect(form.get_by_label("Case key")).to_be_focused()
    form.get_by_label("Case key").fill("apples")
    form.get_by_label("payload key").first.fill("question")
    form.get_by_label("payload value").first.fill("Three bags of 12 apples: how many apples?")
    form.get_by_label("expectation key").first.fill("result")
    form.get_by_label("expectation kind").first.fill("number")
    form.get_by_label("expectation value").first.fill("36")
    form.get_by_role("button", name="Save case").click()

    expect(page.locator("#structure")).to_contain_text("apples")
    expect(page.locator('#report[data-valid="true"]')).to_be_visible()
    text = page.locator("#bundle-text").input_value()
    assert "case_key: apples" in text and "# Example A" in text
    assert page.js_errors == []


def test_a_refused_autosave_shows_the_servers_reason_and_keeps_the_text(personas, login, page):
    draft = services.draft_create(
        workspace=personas.workspace, user=personas.owner, name="Math", bundle_text=mental_math()
    )
    login(personas.editor)
    page.goto(f"/packs/drafts/{draft.public_id}/")
    name = page.locator("#draft-name")
    status = page.locator("#save-status")

    # Past the 5 MiB limit: the server's message, not "check your connection".
    big = mental_math() + "# " + "x" * (5 * 1024 * 1024) + "\n"
    page.locator("#bundle-text").evaluate(
        "(el, text) => { el.value = text; el.dispatchEvent(new Event('input', {bubbles: true})); }", big
    )
    expect(status).to_contain_text("Not saved: pack.yaml must be at most 5 MiB")
    expect(page.locator("#bundle-text")).to_have_attribute("aria-invalid", "true")
    assert page.locator("#bundle-text").evaluate("el => el.value.length") == len(big)

    # A name longer than the form allows (a client without maxlength): the field is named.
    page.locator("#bundle-text").fill(mental_math())
    expect(status).to_have_text("Saved and validated: valid, 0 warnings.")
    name.evaluate("el => el.removeAttribute('maxlength')")
    name.fill("n" * 301)
    expect(status).to_contain_text("Not saved: Draft name must be at most 300 characters (it has 301).")
    expect(name).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#bundle-text")).not_to_have_attribute("aria-invalid", "true")

    name.fill("Math, renamed")
    expect(status).to_have_text("Saved and validated: valid, 0 warnings.")
    expect(name).not_to_have_attribute("aria-invalid", "true")
    draft.refresh_from_db()
    assert draft.name == "Math, renamed" and draft.bundle_text == mental_math()
    assert page.js_errors == []
    # A refusal is the editor's to show, not an error htmx logs in the console.
    assert page.console_errors == []


def test_two_tabs_editing_one_draft_the_later_save_is_refused_and_its_text_kept(personas, login, page):
    draft = services.draft_create(
        workspace=personas.workspace, user=personas.owner, name="Math", bundle_text=mental_math()
    )
    login(personas.editor)
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    tab_b = page.context.new_page()
    b_logged = console_errors(tab_b)
    for tab in (page, tab_b):
        tab.goto(f"/packs/drafts/{draft.public_id}/")

    # Tab A saves twice: the second autosave carries the revision the first one answered.
    page.locator("#bundle-text").fill(mental_math() + "# from tab A\n")
    expect(page.locator("#save-status")).to_have_text("Saved and validated: valid, 0 warnings.")
    page.locator("#bundle-text").fill(mental_math() + "# from tab A\n# and more\n")
    expect(page.locator("#save-status")).to_have_text("Saved and validated: valid, 0 warnings.")
    a_text = mental_math() + "# from tab A\n# and more\n"

    # Tab B still holds the revision it loaded: refused, its text kept, a way forward offered.
    b_text = mental_math() + "# from tab B\n"
    tab_b.locator("#bundle-text").fill(b_text)
    expect(tab_b.locator("#save-status")).to_contain_text(
        "Not saved: this draft was changed elsewhere (in another tab or by another user); reload to see it."
    )
    expect(tab_b.locator("#save-conflict")).to_be_visible()
    assert tab_b.locator("#bundle-text").input_value() == b_text
    draft.refresh_from_db()
    assert draft.bundle_text == a_text

    tab_b.get_by_role("button", name="Copy my text").click()
    expect(tab_b.locator("#save-status")).to_contain_text("Your text is copied.")
    assert tab_b.evaluate("() => navigator.clipboard.readText()") == b_text

    tab_b.get_by_role("link", name="Reload the saved draft").click()
    expect(tab_b.locator("#save-conflict")).to_be_hidden()
    assert tab_b.locator("#bundle-text").input_value() == a_text
    page.reload()
    assert page.locator("#bundle-text").input_value() == a_text
    assert page.js_errors == []
    # The 409 is the editor's to show, not an error htmx logs in the console.
    assert b_logged == []


def test_an_autosave_after_the_session_ended_says_so_and_keeps_the_text(personas, login, page):
    draft = services.draft_create(
        workspace=personas.workspace, user=personas.owner, name="Math", bundle_text=mental_math()
    )
    login(personas.editor)
    page.goto(f"/packs/drafts/{draft.public_id}/")
    status = page.locator("#save-status")
    # Logged out elsewhere: the session cookie is gone, the CSRF cookie stays.
    kept = [c for c in page.context.cookies() if c["name"] != settings.SESSION_COOKIE_NAME]
    page.context.clear_cookies()
    page.context.add_cookies(kept)

    typed = mental_math() + "# typed after the session ended\n"
    page.locator("#bundle-text").fill(typed)
    expect(status).to_contain_text("Your session has ended: nothing was saved or loaded.")
    # The login page was swapped into the report (its own <main> and form) and the status
    # said "Saved and validated.".
    expect(page.locator("#report")).to_be_visible()
    expect(page.locator("input[name=password]")).to_have_count(0)
    note = page.locator("[data-session-ended]")
    expect(note.get_by_role("link", name="Log in again")).to_have_attribute(
        "href", f"/login/?next=/packs/drafts/{draft.public_id}/"
    )
    expect(page.locator("#save-conflict")).to_be_visible()  # reload, or copy the text first
    assert page.locator("#bundle-text").input_value() == typed
    draft.refresh_from_db()
    assert draft.bundle_text == mental_math()

    # Logged in again (in another tab), the next save goes through and the note goes away.
    login(personas.editor)
    page.locator("#bundle-text").fill(typed + "# and saved\n")
    expect(status).to_have_text("Saved and validated: valid, 0 warnings.")
    expect(note).to_have_count(0)
    expect(page.locator("#save-conflict")).to_be_hidden()
    draft.refresh_from_db()
    assert draft.bundle_text == typed + "# and saved\n"
    assert page.js_errors == []


def test_an_autosaved_rename_updates_the_heading_and_the_page_title(personas, login, page):
    draft = services.draft_create(
        workspace=personas.workspace, user=personas.owner, name="Math", bundle_text=mental_math()
    )
    login(personas.editor)
    page.goto(f"/packs/drafts/{draft.public_id}/")
    expect(page.get_by_role("heading", level=1)).to_have_text("Math draft")
    expect(page).to_have_title("Math · editor · AgentClash")

    page.locator("#draft-name").fill("Mental math")
    expect(page.locator("#save-status")).to_have_text("Saved and validated: valid, 0 warnings.")
    expect(page.get_by_role("heading", level=1)).to_have_text("Mental math draft")
    expect(page).to_have_title("Mental math · editor · AgentClash")
    assert page.locator("h1").count() == 1
    assert page.js_errors == []


def test_a_report_arriving_after_a_later_save_is_never_shown_as_the_current_one(personas, login, page):
    """The report of revision 2 is held back until revision 3 is saved: it is not swapped in
    (the editor holds revision 3), and revision 3's report, queued behind it, is."""
    draft = services.draft_create(
        workspace=personas.workspace, user=personas.owner, name="Math", bundle_text=mental_math()
    )
    login(personas.editor)
    page.goto(f"/packs/drafts/{draft.public_id}/")
    held = []

    def hold_revision_2(route):
        if "revision=2" in route.request.url:
            held.append(route)
        else:
            route.continue_()

    page.route("**/report/**", hold_revision_2)
    page.evaluate(
        """() => {
          window.reportsShown = [];
          new MutationObserver(() => {
            const r = document.getElementById("report");
            window.reportsShown.push(`${r.dataset.revision}:${r.dataset.valid || "pending"}`);
          }).observe(document.getElementById("report-slot"), { childList: true });
        }"""
    )
    editor = page.locator("#bundle-text")
    with page.expect_request(lambda request: "revision=2" in request.url):
        editor.fill(mental_math(number=0))  # revision 2: one error
    expect(page.locator('#report[data-report-pending][data-revision="2"]')).to_be_attached()
    editor.fill(mental_math(name="Mental Math 3"))  # revision 3: valid, a text not validated yet
    expect(page.locator('#report[data-report-pending][data-revision="3"]')).to_be_attached()
    assert len(held) == 1
    held[0].continue_()

    expect(page.locator('#report[data-valid="true"][data-revision="3"]')).to_be_visible()
    expect(page.locator("#save-status")).to_have_text("Saved and validated: valid, 0 warnings.")
    assert page.evaluate("window.reportsShown") == ["2:pending", "3:pending", "3:true"]
    assert page.js_errors == []


def test_a_draft_another_request_is_validating_shows_its_report_when_it_is_stored(
    personas, login, page, monkeypatch
):
    """Opened while another request validates its text (no report stored yet), the editor
    says it is still validating, asks again every second, and shows the report the other
    request stored: the text is validated once."""
    from packs.services import draft_reports
    from tests.packs.test_draft_report_race import DEADLINE, HeldValidation, in_thread, load

    draft = services.draft_create(
        workspace=personas.workspace, user=personas.owner, name="Math", bundle_text=mental_math()
    )
    held = HeldValidation(monkeypatch)
    first, first_out = in_thread(load, draft.pk)
    assert held.started.wait(DEADLINE)
    monkeypatch.setattr(draft_reports, "REPORT_WAIT_SECONDS", 0.05)
    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url) if "/report/" in request.url else None)
    login(personas.viewer)
    page.goto(f"/packs/drafts/{draft.public_id}/")
    expect(page.locator("#report[data-report-retry]")).to_contain_text("Still validating this text")
    for _ in range(int(DEADLINE * 20)):  # the editor asks again while the other validates
        if len(asked) >= 2:
            break
        page.wait_for_timeout(50)
    assert len(asked) >= 2
    expect(page.locator("#report[data-report-retry]")).to_be_attached()
    held.release()
    expect(page.locator('#report[data-valid="true"][data-revision="1"]')).to_be_visible()
    expect(page.locator("#structure")).to_contain_text("word-problem")
    first.join(DEADLINE)
    assert not first.is_alive() and "error" not in first_out, first_out
    assert held.calls == 1
    assert page.js_errors == []


def test_a_short_detail_shows_after_the_message_and_a_long_one_stays_folded(personas, login, page):
    draft = services.draft_create(
        workspace=personas.workspace, user=personas.owner, name="Math", bundle_text=""
    )
    login(personas.owner)
    page.goto(f"/packs/drafts/{draft.public_id}/")
    editor = page.locator("#bundle-text")

    editor.fill("pack: a: b\n")
    issue = page.locator("#report .issue-error", has_text="must be valid YAML")
    expect(issue.locator(".issue-message")).to_have_text("must be valid YAML")
    expect(issue.locator(".issue-detail")).to_be_visible()
    expect(issue.locator(".issue-detail")).to_have_text("— mapping values are not allowed in this context")
    expect(issue.locator("details")).to_have_count(0)

    doc = base_pack()
    template = doc["challenges"][0]
    doc["challenges"] = [dict(template, key=f"challenge-with-a-rather-long-key-{i}") for i in range(6)]
    doc["input_sets"][0]["cases"][0]["challenge_key"] = "challenge-with-a-rather-long-key-9"
    editor.fill(dump(doc))
    issue = page.locator("#report .issue-error", has_text="must reference a declared challenge")
    expect(issue.locator("details summary")).to_be_visible()
    expect(issue.locator("details pre")).to_be_hidden()
    expect(issue.locator(".issue-detail")).to_have_count(0)
    issue.locator("details summary").click()
    expect(issue.locator("details pre")).to_contain_text('did you mean "challenge-with-a-rather-long-key-')
    assert page.js_errors == []
