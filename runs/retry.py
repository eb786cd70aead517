"""When to try an attempt again (spec/agent-protocol.md "Outcomes").

Only infra errors (timeout, a 408 included; connection error, 5xx, 429) are retried, up to the
deployment's ``max_attempts`` (which counts every attempt: 3 = the first + 2 retries).
The wait before attempt n+1 is full jitter over 1 s × 2^(n−1), capped at 30 s, and at
least the agent's ``Retry-After`` when it sent one; no retry is scheduled when the next
attempt would start at or past the item's deadline. Pure functions: the caller passes
the clock and the random generator.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

BASE_DELAY_SECONDS = 1.0
MAX_BACKOFF_SECONDS = 30.0
DEFAULT_MAX_ATTEMPTS = 3
MAX_RETRY_AFTER_DIGITS = 300  # a float holds about 1.8e308


def backoff_ceiling(attempt_number: int) -> float:
    """The jitter window after attempt ``attempt_number`` (1-based): 1, 2, 4, ... ≤ 30 s."""
    exponent = min(attempt_number - 1, 16)  # 2^16 s is far past the cap; avoids huge floats
    return min(MAX_BACKOFF_SECONDS, BASE_DELAY_SECONDS * 2**exponent)


def next_delay(
    attempt_number: int,
    *,
    retry_after: float | None,
    now: datetime,
    deadline: datetime | None,
    rng: random.Random,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
) -> float | None:
    """Seconds to wait before the attempt after ``attempt_number``, or None for no retry.

    ``attempt_number`` is the attempt that just failed with an infra error (1 for the
    first). ``retry_after`` is the agent's Retry-After in seconds (see
    :func:`parse_retry_after`), or None.
    """
    if attempt_number < 1:
        raise ValueError("attempt_number starts at 1")
    if attempt_number >= max_attempts:
        return None
    delay = rng.uniform(0.0, backoff_ceiling(attempt_number))
    if retry_after is not None and retry_after > delay:
        delay = float(retry_after)
    # Compared in seconds: ``now + timedelta(delay)`` overflows for an absurd Retry-After
    # (a year count past 9999, or infinity), and the exception ended the dispatcher's slice.
    if deadline is not None and delay >= (deadline - now).total_seconds():
        return None
    if delay == float("inf"):
        return None  # never: no deadline bounds it, and asyncio.sleep(inf) would never end
    return delay


def parse_retry_after(value: str | None, *, now: datetime) -> float | None:
    """A Retry-After header as seconds from ``now``: delta-seconds or an HTTP-date.

    Malformed values give None; a date in the past gives 0.
    """
    if value is None:
        return None
    text = value.strip()
    if not text:
        return None
    if text.isdigit():
        # ASCII digits only: "²" (a latin-1 header byte) is isdigit() and int() refuses it.
        if not text.isascii():
            return None
        # More digits than a float's range (or than int() reads: 4,300) is a wait of forever.
        return float(int(text)) if len(text) <= MAX_RETRY_AFTER_DIGITS else float("inf")
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    if when.tzinfo is None:  # RFC 7231 dates are GMT
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - now).total_seconds())


# Error names OpenAI-compatible servers put in ``error.code`` / ``error.type`` for a failure
# that passes: rate limits, overload and server-side errors.
_TRANSIENT_ERROR_NAMES = {
    "rate_limit_exceeded": 429,
    "rate_limit_error": 429,
    "too_many_requests": 429,
    "server_error": 500,
    "internal_server_error": 500,
    "api_error": 500,
    "overloaded_error": 529,
    "service_unavailable": 503,
    "timeout": 408,
}


def transient_error_in_body(reply: object) -> tuple[int, str] | None:
    """A 200 whose JSON body is only an error object (``{"error": {"code": 429, ...}}``, as
    gateways such as OpenRouter and LiteLLM answer when the model behind them is rate
    limited or down): ``(status, message)`` when that error passes (408, 429, 5xx or a
    name meaning one of them), so it is retried as the HTTP status would be; None otherwise
    (a body with choices, or an error that will not pass, which stays a config error)."""
    if not isinstance(reply, dict) or reply.get("choices"):
        return None
    error = reply.get("error")
    if not isinstance(error, dict):
        return None
    status: int | None = None
    for key in ("code", "status", "status_code"):
        value = error.get(key)
        if isinstance(value, bool):
            continue
        if isinstance(value, int) or (isinstance(value, str) and value.isdigit() and len(value) == 3):
            number = int(value)
            if number in (408, 429) or 500 <= number <= 599:
                status = number
                break
    if status is None:
        for key in ("code", "type"):
            value = error.get(key)
            if isinstance(value, str) and value.lower() in _TRANSIENT_ERROR_NAMES:
                status = _TRANSIENT_ERROR_NAMES[value.lower()]
                break
    if status is None:
        return None
    message = error.get("message")
    return status, (message if isinstance(message, str) else "")[:300]


def failed_generation(reply: dict[str, Any]) -> dict[str, Any] | None:
    """The error of a reply whose first choice says the generation failed, or None.

    OpenRouter and other gateways answer HTTP 200 when the model fails mid-generation, with
    ``finish_reason: "error"`` and the error on the choice (a partial message beside it):
    that text is no answer of the model's. ``{}`` when no error object says more."""
    choices = reply.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None
    error = choices[0].get("error")
    if isinstance(error, str) and error:
        return {"message": error}
    if isinstance(error, dict) and error:
        return error
    return {} if choices[0].get("finish_reason") == "error" else None


def stated_status(error: dict[str, Any]) -> int | None:
    """The HTTP status an error object states (``code``, ``status`` or ``status_code``)."""
    for key in ("code", "status", "status_code"):
        value = error.get(key)
        if isinstance(value, bool):
            continue
        stated = isinstance(value, int) or (isinstance(value, str) and value.isdigit() and len(value) == 3)
        if stated and 100 <= int(value) <= 599:
            return int(value)
    return None


def failed_generation_status(error: dict[str, Any]) -> tuple[str, int, str]:
    """How the error of a failed generation (``failed_generation``) is treated, as
    ``(how, status, message)``, the same for agents and judges: ``"passes"`` when it states a
    status or names an error that passes (408, 429, 5xx, ``overloaded_error``...), retried as
    that status; ``"rejected"`` when it states another 4xx, which will not pass; ``"failed"``
    when it states neither, retried as a 500."""
    passing = transient_error_in_body({"error": error})
    if passing is not None:
        return "passes", *passing
    message = error.get("message")
    said = message[:300] if isinstance(message, str) else ""
    status = stated_status(error)
    if status is not None and 400 <= status < 500:
        return "rejected", status, said
    return "failed", 500, said
