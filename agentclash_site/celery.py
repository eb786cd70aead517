"""The Celery app: ``celery -A agentclash_site worker -B``.

State lives in the database; tasks take ids, are idempotent, acknowledge late and ignore
results. Settings come from Django settings with the ``CELERY_`` prefix.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading

from celery import Celery
from celery.signals import task_postrun, worker_init, worker_shutting_down

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentclash_site.settings")
log = logging.getLogger(__name__)

app = Celery("agentclash_site")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# Site-level tasks live outside any app's package (agentclash_site/tasks.py).
app.conf.imports = ("agentclash_site.tasks",)


def _ensure_filesystem_broker_dirs() -> None:
    from django.conf import settings

    options = getattr(settings, "CELERY_BROKER_TRANSPORT_OPTIONS", {}) or {}
    for key in ("data_folder_in", "data_folder_out", "processed_folder", "control_folder"):
        if key in options:
            os.makedirs(options[key], exist_ok=True)


class _FilesystemHostnameFilter(logging.Filter):
    """Drop kombu's "No hostname was supplied. Reverting to default 'localhost'" while the
    broker is the filesystem transport (``make run``'s default): it has no host, and the
    warning about one confused every ``demo setup`` and ``eval start``. A network broker
    URL without its host keeps the warning."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith("No hostname was supplied"):
            return True
        return not str(app.conf.broker_url or "").startswith("filesystem://")


logging.getLogger("kombu.connection").addFilter(_FilesystemHostnameFilter())


@app.on_configure.connect
def _load_settings(sender: Celery, **kwargs: object) -> None:
    """``celery -A agentclash_site worker`` with a malformed setting: one
    ``configuration error`` line naming the variable and exit 2, not a traceback."""
    from agentclash_site.lib.env import load_settings_or_exit

    load_settings_or_exit()


@app.on_after_configure.connect
def _setup(sender: Celery, **kwargs: object) -> None:
    _ensure_filesystem_broker_dirs()


@task_postrun.connect
def _reset_queries(**kwargs: object) -> None:
    """Forget the task's logged queries. With ``DEBUG`` on, Django logs every statement of a
    connection (the last 9,000) and clears the log when a request starts; a task is not a
    request, so without this a dispatcher process would keep its last 9,000 statements,
    multi-megabyte result batches and findings documents among them."""
    from django.db import reset_queries

    reset_queries()


_worker: object = None  # this process's WorkController (celery worker), for its pool


@worker_init.connect
def _remember_worker(sender: object = None, **kwargs: object) -> None:
    global _worker
    _worker = sender


@worker_shutting_down.connect
def _stop_dispatchers(how: str = "", **kwargs: object) -> None:
    """A warm shutdown (SIGTERM, a first Ctrl-C) asks every dispatch slice to end promptly
    (``runs.dispatch.request_stop``: stop claiming, a short grace for the calls in flight,
    write, give the unfinished items back and dispatch the lane again), so the next worker
    goes on with them at once rather than after their claims expire. The slices run in the
    pool processes, which Celery does not tell: each gets SIGINT, which they take as that
    request (``runs.tasks``). A slice in this process (the solo or threads pool) is told
    directly. Runs in the signal handler: it only sets an event and sends signals. A cold
    shutdown kills the pool processes as before: their claims wait for the sweeper."""
    if how != "Warm":
        return
    import signal
    import sys

    dispatch = sys.modules.get("runs.dispatch")  # loaded where a slice ever ran
    if dispatch is not None:
        dispatch.request_stop()
    pool = getattr(getattr(_worker, "pool", None), "_pool", None)
    for process in list(getattr(pool, "_pool", None) or ()):
        pid = getattr(process, "pid", None)
        if isinstance(pid, int) and pid != os.getpid():
            with contextlib.suppress(OSError):  # it has exited already
                os.kill(pid, signal.SIGINT)


def preload_broker_transport() -> threading.Thread:
    """Import the broker's kombu transport module on a daemon thread and return the thread.

    A command that publishes once (``eval start``) otherwise imports it inside its first
    publish: for Redis, ``kombu.transport.redis`` pulls in redis-py (about 65 ms of imports,
    ``redis.asyncio`` among them). Started before the command's database work, the imports
    run while the main thread waits on PostgreSQL (the items' COPY, the commit's flush).
    Python's per-module import locks make a publish that comes first wait for the import,
    never see half a module."""

    def load() -> None:
        from kombu.transport import resolve_transport

        scheme = str(app.conf.broker_url or "").partition("://")[0].partition("+")[0]
        try:
            if scheme:
                resolve_transport(scheme)
        except Exception:  # the publish reports a bad broker URL with its own error
            log.debug("could not preload the broker transport %r", scheme, exc_info=True)

    thread = threading.Thread(target=load, name="preload-broker-transport", daemon=True)
    thread.start()
    return thread
