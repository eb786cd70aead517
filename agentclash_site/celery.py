"""The Celery app: ``celery -A agentclash_site worker -B``.

State lives in the database; tasks take ids, are idempotent, acknowledge late and ignore
results. Settings come from Django settings with the ``CELERY_`` prefix.
"""

from __future__ import annotations

import os

from celery import Celery
from celery.signals import task_postrun

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentclash_site.settings")

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
