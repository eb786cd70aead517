"""Strict parsers for environment variables (spec/interfaces.md §1).

A malformed value is a start-up error that names the variable and the fix; nothing is
silently coerced (``DEBUG=ture`` is not False).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit


class ConfigError(Exception):
    """A setting is missing or malformed; the message names the variable."""


def load_settings_or_exit() -> None:
    """Load Django's settings; on a :class:`ConfigError` print ``configuration error: ...``
    on stderr and exit 2, as ``manage.py`` does. For the entry points that are not
    ``manage.py`` (the Celery worker, the WSGI/ASGI servers), which otherwise stopped on a
    malformed setting with a 90-line traceback and exit 1.

    Under gunicorn the exit is 3, its worker-boot failure: gunicorn loads the app in each
    worker and boots a new one after any other exit, so with 2 the server never stopped and
    printed the line twice a second; on 3 the master stops ("Worker failed to boot", exit 3).
    """
    import sys

    from django.conf import settings

    try:
        settings.INSTALLED_APPS  # noqa: B018 - imports the settings module
    except ConfigError as exc:
        sys.stderr.write(f"configuration error: {exc}\n")
        raise SystemExit(3 if "gunicorn" in sys.modules else 2) from None


_TRUE = {"true", "1"}
_FALSE = {"false", "0"}


def parse_bool(name: str, raw: str) -> bool:
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ConfigError(f"{name} must be true or false (or 1/0), got {raw!r}")


def env_bool(name: str, default: bool, environ: Mapping[str, str] | None = None) -> bool:
    environ = os.environ if environ is None else environ
    raw = environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    return parse_bool(name, raw)


def env_int(name: str, default: int, environ: Mapping[str, str] | None = None, *, minimum: int = 0) -> int:
    """A whole number, ``minimum`` or more (every integer setting is a count or seconds)."""
    environ = os.environ if environ is None else environ
    raw = environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        value = minimum - 1
    if value < minimum:
        raise ConfigError(f"{name} must be a whole number {minimum} or more, got {raw!r}")
    return value


def env_text(name: str, default: str, environ: Mapping[str, str] | None = None) -> str:
    """The trimmed value, or ``default`` when unset or blank (as for every other variable:
    an env file's ``MEDIA_ROOT=`` is no value, not the working directory)."""
    environ = os.environ if environ is None else environ
    return (environ.get(name) or "").strip() or default


def env_class_path(name: str, default: str, environ: Mapping[str, str] | None = None) -> str:
    """A dotted path ``package.module.Class`` whose module is installed; a backend that is
    not failed only at its first use (an upload), with a traceback naming no variable."""
    import importlib.util

    value = env_text(name, default, environ)
    if value == default:
        return value
    module, _, attribute = value.rpartition(".")
    if not module or not all(part.isidentifier() for part in value.split(".")):
        raise ConfigError(
            f"{name} must be a dotted path to a class such as storages.backends.s3.S3Storage, got {value!r}"
        )
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise ConfigError(
            f"{name} names module {module!r}, which is not installed: install its package "
            "(django-storages for storages.backends.*) or fix the path"
        )
    return value


def env_float(
    name: str, default: float, environ: Mapping[str, str] | None = None, *, positive: bool = False
) -> float:
    """A finite number of seconds; ``positive``: greater than 0 (a period, a time slice)."""
    environ = os.environ if environ is None else environ
    raw = environ.get(name)
    if raw is None or raw.strip() == "":
        return float(default)
    try:
        value = float(raw.strip())
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        bound = "greater than 0" if positive else "0 or more"
        raise ConfigError(f"{name} must be a number {bound} (seconds), got {raw!r}")
    return value


_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def env_log_level(name: str, default: str, environ: Mapping[str, str] | None = None) -> str:
    """A logging level name in any case (``debug`` is DEBUG); logging itself accepts only
    upper case and failed with "Unable to configure root logger", naming no variable."""
    environ = os.environ if environ is None else environ
    raw = environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip().upper()
    if value not in _LOG_LEVELS:
        raise ConfigError(f"{name} must be one of {', '.join(_LOG_LEVELS)} (any case), got {raw!r}")
    return value


def env_base_url(name: str, default: str, environ: Mapping[str, str] | None = None) -> str:
    """An absolute http(s) URL without a trailing slash (links are built on it)."""
    environ = os.environ if environ is None else environ
    raw = environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip().rstrip("/")
    parts = urlsplit(value)
    if parts.scheme.lower() not in {"http", "https"} or not parts.netloc:
        raise ConfigError(
            f"{name} must be an absolute http(s) URL such as https://evals.example.com, got {raw!r}"
        )
    return value


def env_broker_url(name: str, default: str, environ: Mapping[str, str] | None = None) -> str:
    """A Celery broker URL (several may be joined by ";" for failover) whose transport kombu
    knows; an unknown one failed only at the first publish, with a KeyError traceback."""
    from kombu.transport import TRANSPORT_ALIASES

    environ = os.environ if environ is None else environ
    raw = environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip()
    for url in filter(None, (part.strip() for part in value.split(";"))):
        scheme, sep, _ = url.partition("://")
        if not sep or not scheme:
            raise ConfigError(
                f"{name} must be a broker URL such as redis://127.0.0.1:6379/0, amqp://host// or "
                f"filesystem://, got {raw!r}"
            )
        transport = scheme.split("+", 1)[0]
        if transport not in TRANSPORT_ALIASES:
            raise ConfigError(
                f"{name} has unsupported scheme {scheme!r}: use redis://, amqp://, filesystem:// "
                "or another kombu transport"
            )
    return value


def env_list(name: str, default: list[str], environ: Mapping[str, str] | None = None) -> list[str]:
    environ = os.environ if environ is None else environ
    raw = environ.get(name)
    if raw is None or raw.strip() == "":
        return list(default)
    return [part.strip() for part in raw.split(",") if part.strip()]


def env_json_object(
    name: str, default: dict[str, Any], environ: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """A JSON object from the environment; anything else is a start-up error naming the variable."""
    environ = os.environ if environ is None else environ
    raw = environ.get(name)
    if raw is None or raw.strip() == "":
        return dict(default)
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise ConfigError(f'{name} must be a JSON object, e.g. {{"bucket_name": "x"}}: {exc}') from None
    if not isinstance(value, dict):
        raise ConfigError(f"{name} must be a JSON object, got {type(value).__name__}")
    return value


def parse_database_url(url: str, *, base_dir: Path) -> dict[str, Any]:
    """``sqlite:///relative/path``, ``sqlite:////absolute/path``, ``postgres://`` or
    ``postgresql://``. Anything else is an error naming the scheme."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme == "sqlite":
        if not url.lower().startswith("sqlite:///"):
            raise ConfigError("DATABASE_URL for SQLite must look like sqlite:///var/db.sqlite3")
        raw_path = url[len("sqlite:///") :].split("?", 1)[0]
        if not raw_path:
            raise ConfigError("DATABASE_URL for SQLite needs a file path, e.g. sqlite:///var/db.sqlite3")
        path = Path(unquote(raw_path))
        if not path.is_absolute():
            path = base_dir / path
        path.parent.mkdir(parents=True, exist_ok=True)
        return {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(path),
            # WAL lets the web server read while the worker writes; IMMEDIATE takes the
            # write lock at BEGIN so two writers queue on the busy timeout instead of
            # failing with "database is locked" on lock upgrade.
            "OPTIONS": {
                "timeout": 30,
                "transaction_mode": "IMMEDIATE",
                "init_command": (
                    "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA busy_timeout=30000;"
                ),
            },
        }
    if scheme in {"postgres", "postgresql"}:
        name = unquote(parts.path.lstrip("/"))
        if not name:
            raise ConfigError(
                "DATABASE_URL for PostgreSQL needs a database name: postgres://user@host:5432/dbname"
            )
        options: dict[str, Any] = {}
        for key, values in parse_qs(parts.query).items():
            options[key] = values[-1]
        try:
            port = parts.port
        except ValueError:
            raise ConfigError(
                "DATABASE_URL has a port that is not a number: postgres://user@host:5432/dbname"
            ) from None
        config: dict[str, Any] = {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": name,
            "USER": unquote(parts.username or ""),
            "PASSWORD": unquote(parts.password or ""),
            "HOST": parts.hostname or "",
            "PORT": str(port or ""),
            "CONN_MAX_AGE": 60,
            "CONN_HEALTH_CHECKS": True,
        }
        if options:
            config["OPTIONS"] = options
        return config
    shown = scheme or "(none)"
    raise ConfigError(
        f"DATABASE_URL has unsupported scheme {shown!r}: use sqlite:///path, postgres:// or postgresql://"
    )
