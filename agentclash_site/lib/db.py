"""Database helpers shared by the worker and the commands."""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable

from django.db import DEFAULT_DB_ALIAS, InterfaceError, OperationalError, ProgrammingError, connections

log = logging.getLogger(__name__)

NO_TABLES = "the database has no tables yet: run python manage.py migrate"


def is_connection_error(exc: BaseException) -> bool:
    """An error of the connection (a restart, a failover, a terminated backend) rather than
    of the statement or its data. Django's classes wrap psycopg's; statements run on psycopg
    cursors directly raise psycopg's own (psycopg is loaded only on PostgreSQL)."""
    if isinstance(exc, OperationalError | InterfaceError):
        return True
    psycopg = sys.modules.get("psycopg")
    return psycopg is not None and isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError)


def is_locked_error(exc: BaseException) -> bool:
    """SQLite's "database is locked": another connection held the write lock for the whole busy
    timeout. In IMMEDIATE mode a transaction takes the lock at BEGIN, so nothing of it ran."""
    return isinstance(exc, OperationalError) and "database is locked" in str(exc)


def not_migrated_message(exc: BaseException, using: str = DEFAULT_DB_ALIAS) -> str | None:
    """What to tell the user when ``exc`` came from a database that ``migrate`` has not (fully)
    set up ("no such table" on SQLite, "relation does not exist" on PostgreSQL), else None.

    Judged by the migration state, not the error text: only asked after a statement failed, so
    loading the migration graph costs nothing on the way that works."""
    if not isinstance(exc, OperationalError | ProgrammingError):
        return None
    from django.db.migrations.executor import MigrationExecutor

    connection = connections[using]
    try:
        if connection.in_atomic_block:
            return None  # the check's own queries could not run in a failed transaction
        if "django_migrations" not in connection.introspection.table_names():
            return NO_TABLES
        executor = MigrationExecutor(connection)
        pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
    except Exception:
        return None  # the database cannot even answer this: let the original error show
    if not pending:
        return None
    return (
        f"the database is not migrated ({len(pending)} migrations not applied): run python manage.py migrate"
    )


class KeeperThread:
    """Calls ``step()`` every ``interval`` seconds on a daemon thread with its own database
    connection (closed when the thread ends), until ``close()``, until ``step`` answers False,
    or until ``until`` (a ``time.monotonic()`` value) has passed. A step that raises one of
    ``errors`` is logged with ``failure`` and its connection dropped: the next step opens a
    new one. What the dispatcher's claim keeper and the scoring lease keeper both need."""

    def __init__(
        self,
        *,
        name: str,
        interval: float,
        step: Callable[[], object],
        failure: str,
        errors: tuple[type[BaseException], ...] = (Exception,),
        until: float | None = None,
    ) -> None:
        self.interval, self.step, self.failure, self.errors, self.until = (
            interval,
            step,
            failure,
            errors,
            until,
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        from django.db import connection

        try:
            while not self._stop.wait(self.interval) and (
                self.until is None or time.monotonic() < self.until
            ):
                try:
                    if self.step() is False:
                        return
                except self.errors:
                    log.exception("%s", self.failure)
                    connection.close()
        finally:
            connection.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
