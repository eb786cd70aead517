"""GET /packs/new/ (a bookmark, a typed URL) was a blank 405: it now leads to the packs
page, where the New pack form is."""

from __future__ import annotations

import pytest

from packs.models import Draft
from tests.clients import logged_in as client_for

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("who", ["owner", "viewer"])
def test_get_new_pack_leads_to_the_packs_page(personas, who):
    response = client_for(getattr(personas, who)).get("/packs/new/", follow=True)
    assert response.redirect_chain == [("/packs/", 302)]
    assert response.status_code == 200 and "Challenge packs" in response.content.decode()
    assert not Draft.objects.exists()


def test_the_packs_page_offers_the_new_pack_form_to_writers(personas):
    body = client_for(personas.owner).get("/packs/new/", follow=True).content.decode()
    assert 'action="/packs/new/"' in body and 'aria-label="New pack"' in body
