"""The retry policy of spec/agent-protocol.md "Outcomes", pure and seeded."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from runs.retry import backoff_ceiling, next_delay, parse_retry_after

NOW = datetime(2026, 11, 22, 12, 0, 0, tzinfo=UTC)
FAR = NOW + timedelta(hours=1)


def delay(attempt, *, retry_after=None, deadline=FAR, seed=7, max_attempts=10):
    return next_delay(
        attempt,
        retry_after=retry_after,
        now=NOW,
        deadline=deadline,
        rng=random.Random(seed),
        max_attempts=max_attempts,
    )


def test_the_jitter_window_doubles_from_one_second_and_caps_at_thirty():
    assert [backoff_ceiling(n) for n in range(1, 8)] == [1, 2, 4, 8, 16, 30, 30]
    assert backoff_ceiling(1000) == 30


@pytest.mark.parametrize("attempt", [1, 2, 3, 4, 5, 6, 9])
def test_delays_are_full_jitter_within_the_window(attempt):
    delays = [delay(attempt, seed=s) for s in range(300)]
    assert all(0 <= d <= backoff_ceiling(attempt) for d in delays)
    # full jitter: spread over the whole window, not bunched at its top
    assert min(delays) < backoff_ceiling(attempt) * 0.1
    assert max(delays) > backoff_ceiling(attempt) * 0.9


def test_the_same_seed_gives_the_same_delay():
    assert delay(3, seed=42) == delay(3, seed=42)
    assert delay(3, seed=42) == pytest.approx(random.Random(42).uniform(0, 4))


def test_retry_after_is_a_floor():
    assert delay(1, retry_after=5) == 5
    assert delay(1, retry_after=45) == 45  # above the cap: the agent asked for it
    # a smaller Retry-After does not shorten the jittered wait
    assert delay(6, retry_after=0.001, seed=1) == delay(6, seed=1)


def test_no_retry_once_max_attempts_is_reached():
    assert delay(2, max_attempts=3) is not None
    assert delay(3, max_attempts=3) is None
    assert delay(1, max_attempts=1) is None


def test_no_retry_when_the_next_attempt_would_start_past_the_deadline():
    assert delay(1, retry_after=10, deadline=NOW + timedelta(seconds=9)) is None
    assert delay(1, retry_after=10, deadline=NOW + timedelta(seconds=10)) is None
    assert delay(1, retry_after=10, deadline=NOW + timedelta(seconds=11)) == 10
    assert delay(1, deadline=NOW) is None


def test_no_deadline_means_only_max_attempts_limits():
    assert next_delay(1, retry_after=None, now=NOW, deadline=None, rng=random.Random(1)) is not None


def test_attempt_numbers_start_at_one():
    with pytest.raises(ValueError):
        delay(0)


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("7", 7.0),
        (" 0 ", 0.0),
        ("Sun, 22 Nov 2026 12:00:30 GMT", 30.0),
        ("Sun, 22 Nov 2026 11:00:00 GMT", 0.0),  # in the past
        # The two obsolete HTTP-date forms a recipient must read too (RFC 9110 §5.6.7).
        ("Sunday, 22-Nov-26 12:01:00 GMT", 60.0),
        ("Sun Nov 22 12:00:05 2026", 5.0),
        (
            "Fri, 31 Dec 9999 23:59:59 GMT",
            (datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC) - NOW).total_seconds(),
        ),
        ("Sun, 22 Nov 10000 12:00:00 GMT", None),  # past the calendar: malformed, not a crash
        ("1.5", None),  # delta-seconds are whole
        ("5, 6", None),
        ("soon", None),
        ("-3", None),
        ("\u00b2", None),  # latin-1 byte 0xB2 of a header: isdigit() but not int()-able
        ("\u0661", None),  # an Arabic-Indic digit is not delta-seconds either
        ("", None),
        (None, None),
    ],
)
def test_retry_after_is_parsed_from_seconds_or_an_http_date(header, expected):
    assert parse_retry_after(header, now=NOW) == expected


@pytest.mark.parametrize("seconds", ["300000000000", "9" * 400, "9" * 5000])
def test_an_absurd_retry_after_is_no_retry_and_never_raises(seconds):
    """A Retry-After far past any deadline (a year count that leaves the calendar, more
    digits than a float holds or than int() reads) is a wait too long to make: no retry.
    It used to raise (OverflowError, ValueError) in the executor or in next_delay."""
    after = parse_retry_after(seconds, now=NOW)
    assert after is not None and after > 10**9
    assert delay(1, retry_after=after) is None
    assert delay(1, retry_after=float("inf")) is None
