"""Export downloads of a run (streamed): the browser side of ``runs.exports``. The CSV
starts with a UTF-8 byte order mark here, for Excel (``runs.exports.BOM``)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse

from runs.results import run_for_user

FORMATS = ("csv", "jsonl", "junit", "grading")


@login_required
def run_export(request: HttpRequest, run_id: Any, fmt: str) -> HttpResponse:
    if fmt not in FORMATS:
        raise Http404("No such export format.")
    run = run_for_user(request, run_id)
    from runs.exports import export_response

    return export_response(run, fmt, excel=True)
