"""The benchmarks' own databases: dropped, created, migrated, and Django set up on them.

Each benchmark that needs Django uses a database of its own on the local PostgreSQL
(``BENCH_PG``, default ``postgres://postgres@127.0.0.1:5432``), never the development or test
ones.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PG = os.environ.get("BENCH_PG", "postgres://postgres@127.0.0.1:5432")


def recreate_database(name: str) -> None:
    import psycopg

    with psycopg.connect(f"{PG}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def setup_django(database: str, *, production: bool = False, label: str = "bench") -> None:
    """A fresh, migrated ``database`` and ``django.setup()`` on it. ``production``: as a
    deployment runs (``DEBUG=false``: no query log or template debug), with throwaway keys
    for this process."""
    os.environ["DATABASE_URL"] = f"{PG}/{database}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentclash_site.settings")
    if production:
        os.environ["DEBUG"] = "false"
        os.environ.setdefault("SECRET_KEY", f"{label}-" + "x" * 50)
        if not os.environ.get("FIELD_ENCRYPTION_KEY"):
            from cryptography.fernet import Fernet

            os.environ["FIELD_ENCRYPTION_KEY"] = Fernet.generate_key().decode()
        os.environ.setdefault("LOG_LEVEL", "WARNING")
    recreate_database(database)
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
        cwd=ROOT,
        env=dict(os.environ),
        check=True,
    )
    import django

    django.setup()
