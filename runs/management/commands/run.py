"""``manage.py run status RUN [--cases]`` and ``run export RUN --format ... [--output F]``
(spec/interfaces.md §6). Exit 0; 2 for an unknown run or a bad format."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from django.core.management.base import CommandParser

from agentclash_site.lib.cli import CliError, JsonCommand
from runs.documents import run_document
from runs.exports import FORMATS, export_stream
from runs.management.commands.eval import render_text
from runs.models import Run


def _run(run_id: str) -> Run:
    try:
        key = uuid.UUID(str(run_id).strip())
    except ValueError:
        raise CliError("unknown_run", f"{run_id!r} is not a run id (a UUID)", field="run") from None
    run = Run.objects.filter(pk=key).first()
    if run is None:
        raise CliError("unknown_run", f"no run {run_id}", field="run")
    return run


class Command(JsonCommand):
    help = "Inspect and export runs."
    path_options = frozenset({"output"})

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        status = sub.add_parser("status", help="the run document as it stands")
        status.add_argument("run", help="run id")
        status.add_argument("--cases", action="store_true", help="include every case")
        self.add_json_argument(status)
        export = sub.add_parser("export", help="export the run's results")
        export.add_argument("run", help="run id")
        export.add_argument("--format", required=True, choices=FORMATS)
        export.add_argument("--output", help="write to this file instead of stdout")

    def handle(self, *args: Any, **options: Any) -> None:
        run = _run(options["run"])
        if options["action"] == "status":
            document = run_document(run, cases=options["cases"])
            self.emit(document, render_text(document))
            return
        stream = export_stream(run, options["format"])
        if options.get("output"):
            path = Path(options["output"])
            try:
                with path.open("w", encoding="utf-8", newline="") as handle:
                    for chunk in stream:
                        handle.write(chunk)
            except OSError as exc:
                raise CliError(
                    "io_error", f"cannot write {path}: {exc.strerror or exc}", field="output"
                ) from exc
            return
        for chunk in stream:
            self.stdout.write(chunk, ending="")
