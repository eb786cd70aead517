"""Settings of child processes on the embedded default (SQLite and Celery's filesystem
broker) whose broker folders are the test's own (``TEST_BROKER_DIR``), not the checkout's
``var/broker`` that ``make run`` uses."""

from __future__ import annotations

import os

from agentclash_site.settings import *  # noqa: F403

_folder = os.environ["TEST_BROKER_DIR"]
CELERY_BROKER_URL = "filesystem://"
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "data_folder_in": f"{_folder}/queue",
    "data_folder_out": f"{_folder}/queue",
    "processed_folder": f"{_folder}/processed",
    "control_folder": f"{_folder}/control",
    "store_processed": False,
    "polling_interval": FILESYSTEM_BROKER_POLL_SECONDS,  # noqa: F405
}
CELERY_BEAT_SCHEDULE_FILENAME = f"{_folder}/celerybeat-schedule"
