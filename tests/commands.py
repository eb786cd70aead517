"""Run a management command in this process, as ``--json`` callers see it."""

from __future__ import annotations

import json
from io import StringIO

from django.core.management import call_command


def json_command(*args: str) -> tuple[int, dict]:
    """(exit code, the one JSON document printed on stdout) of ``manage.py *args``."""
    out = StringIO()
    try:
        call_command(*args, stdout=out, stderr=StringIO())
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    return code, json.loads(out.getvalue())
