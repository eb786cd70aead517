"""Template filters of the result pages."""

from __future__ import annotations

from datetime import timedelta

import pytest

from runs.templatetags.run_results import duration, interval, pct, score, score_interval


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "–"),
        (timedelta(milliseconds=850), "850 ms"),
        (0.0034, "3.4 ms"),  # the case page's executor and grader times, in seconds
        (0.00004, "0.04 ms"),  # read "0.00 s" there
        (timedelta(seconds=2.04), "2.0 s"),
        (timedelta(minutes=3, seconds=5), "3 min 05 s"),
        (timedelta(hours=1, minutes=2, seconds=10), "1 h 02 min"),
    ],
)
def test_durations_read_like_people_write_them(value, text):
    assert duration(value) == text


def test_a_figure_that_rounds_to_zero_never_shows_a_minus_sign():
    noise = -2.8e-17  # a mean of repetitions against the same score
    assert score(noise) == "0.0000" and score(-0.0) == "0.0000" and score(-0.5) == "-0.5000"
    assert pct(noise) == "0.0%"
    assert interval([noise, 0.0]) == "0.0–0.0%"
    assert score_interval([noise, 0.1]) == "0.0000–0.1000"
