"""Database helpers shared by the worker and the commands."""

from __future__ import annotations

import sys

from django.db import InterfaceError, OperationalError


def is_connection_error(exc: BaseException) -> bool:
    """An error of the connection (a restart, a failover, a terminated backend) rather than
    of the statement or its data. Django's classes wrap psycopg's; statements run on psycopg
    cursors directly raise psycopg's own (psycopg is loaded only on PostgreSQL)."""
    if isinstance(exc, OperationalError | InterfaceError):
        return True
    psycopg = sys.modules.get("psycopg")
    return psycopg is not None and isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError)
