"""At a phone's width (375 px) every form fits the window: no field, select or action reaches
past it, so nothing is cut off and the page never scrolls sideways."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.test_long_names import PAST_THE_WINDOW, overflow

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 375, "height": 740}


def test_the_deployment_forms_limits_fit_a_phone(personas, login, page):
    """The limits section is a two-column grid that becomes one column on a phone; its ``1fr``
    column was as wide as the evidence level select's longest option, which pushed the four
    fields 23 px past the window and cut the select's text off."""
    login(personas.owner)
    page.set_viewport_size(PHONE)
    page.goto("/deployments/new/")
    page.get_by_text("Limits, evidence and headers").click()
    expect(page.get_by_label("Evidence level")).to_be_visible()
    assert overflow(page) == 0, page.evaluate(PAST_THE_WINDOW)
