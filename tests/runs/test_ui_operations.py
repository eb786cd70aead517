"""The operations page shows the sweeper's last run as a labelled table (when it ran, what
it did, the failed steps flagged), not the stored dict."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from runs.models import SweeperStatus
from runs.sweeper import sweep
from runs.views.ops import SWEEP_LABELS, sweep_figures

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff() -> Client:
    from django.contrib.auth.models import Permission

    user = get_user_model().objects.create_user("ops", password="pw-ops-12345", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_run"))  # the page needs it
    client = Client()
    client.force_login(user)
    return client


def rows(body: str) -> dict[str, str]:
    table = body.split('data-testid="sweeper-result"', 1)[1].split("</table>", 1)[0]
    return dict(re.findall(r'<th scope="row">([^<]+)</th><td class="num">([^<]+)</td>', table))


def test_the_last_sweep_is_a_table_of_labelled_counts(personas, staff):
    result = sweep()
    body = staff.get("/runs/operations/").content.decode()
    assert rows(body) == {SWEEP_LABELS[key]: str(value) for key, value in result.items()}
    assert "returned_claims" not in body and "{&#x27;" not in body
    ran = SweeperStatus.objects.get(name="runs").last_run_at
    assert f'Ran at <time datetime="{ran.isoformat()}">{ran:%Y-%m-%d %H:%M:%S} UTC</time>' in body


def test_failed_steps_are_flagged_and_unknown_keys_still_shown(personas, staff):
    SweeperStatus.objects.create(
        name="runs",
        last_run_at=dt.datetime(2026, 5, 4, 3, 2, 1, tzinfo=dt.UTC),
        last_result={"returned_claims": 2, "errors": 1, "slow_lanes": 4},
    )
    body = staff.get("/runs/operations/").content.decode()
    assert rows(body) == {
        "Expired claims returned to pending": "2",
        "Steps that failed (see the worker log)": "1",
        "Slow lanes": "4",
    }
    assert '<tr class="error"><th scope="row">Steps that failed (see the worker log)</th>' in body
    assert 'Ran at <time datetime="2026-05-04T03:02:01+00:00">2026-05-04 03:02:01 UTC</time>' in body


def test_a_stored_result_of_another_shape_is_shown_as_it_is():
    assert [(f.label, f.value) for f in sweep_figures("interrupted")] == [("Result", "interrupted")]
    assert sweep_figures({}) == [] and sweep_figures(None) == []
    assert [f.alarming for f in sweep_figures({"errors": 0})] == [False]
