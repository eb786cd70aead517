"""The embedded broker (Celery's filesystem transport, what ``make run`` uses) has no host:
every process that published a task (``demo setup``, ``eval start``) logged kombu's
"No hostname was supplied. Reverting to default 'localhost'", a warning about a network
address nothing connects to."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

CODE = (
    "import logging, django; django.setup();"
    "logging.basicConfig(level=logging.INFO);"
    "from agentclash_site.celery import app;"
    "conn = app.connection_for_write(); conn.clone(); conn.info();"
    "print('done')"
)


def _run(broker: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="agentclash_site.settings", CELERY_BROKER_URL=broker)
    return subprocess.run(
        [sys.executable, "-c", CODE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def test_the_filesystem_broker_logs_no_hostname_warning() -> None:
    done = _run("filesystem://")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "done"
    assert "No hostname was supplied" not in done.stderr


@pytest.mark.parametrize("broker", ["redis://:6379/0"])
def test_a_network_broker_without_host_still_warns(broker: str) -> None:
    """Only the filesystem transport's warning is dropped: a network URL missing its host
    is a real mistake kombu should go on naming."""
    done = _run(broker)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "No hostname was supplied" in done.stderr
