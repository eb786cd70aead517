"""Template filters of the result pages."""

from __future__ import annotations

from datetime import timedelta

import pytest

from runs.templatetags.run_results import duration


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "–"),
        (timedelta(milliseconds=850), "850 ms"),
        (timedelta(seconds=2.04), "2.0 s"),
        (timedelta(minutes=3, seconds=5), "3 min 05 s"),
        (timedelta(hours=1, minutes=2, seconds=10), "1 h 02 min"),
    ],
)
def test_durations_read_like_people_write_them(value, text):
    assert duration(value) == text
