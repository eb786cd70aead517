"""Loaded with ``-p tests.pytest_env`` before Django settings: test-run defaults.

The suite runs on PostgreSQL and Redis (``make test`` makes sure both are up). Each value
is only a default, so CI or a developer can point the suite elsewhere.
"""

from __future__ import annotations

import os
import tempfile

os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/agentclash")
os.environ.setdefault("CELERY_BROKER_URL", "redis://127.0.0.1:6379/15")
os.environ.setdefault("AGENTCLASH_TESTING", "1")
os.environ.setdefault("DEBUG", "true")
os.environ.setdefault("MEDIA_ROOT", tempfile.mkdtemp(prefix="agentclash-test-media-"))
os.environ.setdefault("LOG_LEVEL", "WARNING")
