"""The task broker could not be reached: one message for the API (503) and the CLI.

Kombu raises ``kombu.exceptions.OperationalError`` when a publish cannot connect (a Redis
that is down, a wrong ``CELERY_BROKER_URL``). The write that wanted the task is committed
by then (tasks are enqueued with ``transaction.on_commit``), so the message says what was
stored and what happens to it; without this the API answered 500 and the CLI a traceback.
"""

from __future__ import annotations

from typing import Any

from kombu.exceptions import OperationalError as BrokerError

CODE = "broker_unavailable"


class BrokerUnavailable(BrokerError):
    """A failed publish with what it leaves behind (``after``: e.g. the run that was stored;
    ``run_id``: that run, which a page may open; ``retried``: the items an operation sent
    again, which an admin action counts)."""

    def __init__(self, reason: str, *, after: str = "", run_id: Any = None, retried: int = 0) -> None:
        super().__init__(reason)
        self.reason = reason
        self.after = after
        self.run_id = run_id
        self.retried = retried


def broker_message(exc: BaseException) -> str:
    reason = (str(getattr(exc, "reason", "") or exc).strip().splitlines() or [type(exc).__name__])[0][:300]
    message = f"cannot reach the task broker ({reason}); check CELERY_BROKER_URL and that the broker runs"
    after = getattr(exc, "after", "")
    return f"{message}. {after}" if after else message
