"""Run exports at two sizes (the query count does not grow with the items) and who may
download them."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from runs.exports import FORMATS, export_stream
from tests.runs.test_exports_hostile import BASE, _get, _hostile_run

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_viewer_exports_and_an_outsider_gets_404_in_every_format(personas):
    run = _hostile_run(personas)
    outsider = personas.api(personas.outsider)
    for fmt in FORMATS:
        assert _get(personas, run, fmt, user=personas.viewer), fmt
        assert outsider.get(f"{BASE}/{run.pk}/export?format={fmt}").status_code == 404, fmt
        assert outsider.get(f"/api/v1/workspaces/globex/runs/{run.pk}/export?format={fmt}").status_code == 404


def _queries(run, fmt):
    with CaptureQueriesContext(connection) as ctx:
        size = sum(len(chunk) for chunk in export_stream(run, fmt))
    assert size
    return len(ctx.captured_queries)


def test_the_query_count_of_every_export_does_not_grow_with_the_items(personas):
    from runs.seeding import seed_run

    small = seed_run(workspace=personas.workspace, items=10, lanes=2, infra_error_rate=0.3, seed=1)
    large = seed_run(workspace=personas.workspace, items=1200, lanes=2, infra_error_rate=0.3, seed=2)
    for fmt in FORMATS:
        assert _queries(small, fmt) == _queries(large, fmt), fmt
