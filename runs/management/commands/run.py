"""``manage.py run status RUN [--cases]`` and ``run export RUN --format ... [--output F]``
(spec/interfaces.md §6). Exit 0; 2 for an unknown run or a bad format.

The run operations of the API (``POST .../runs/{id}/cancel``, ``retry-failed``,
``rescore``) for CI: ``run cancel RUN``, ``run retry-failed RUN``, ``run rescore RUN``
(``--json``), through the same services (``runs.services.operations``), printing the body
the API answers: ``{"run": {"id", "status"}}`` for cancel, with ``"retried": N`` for
retry-failed, the run document (as ``run status``) for rescore. Exit 0 done; 2 unknown run
or usage; 3 refused because of the run's state (the API's 409: ``run_finished``,
``run_not_retryable``, ``nothing_to_retry``, ``run_not_rescorable``, ...), as ``pack
publish`` exits 3 for its conflicts."""

from __future__ import annotations

import stat
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from django.core.management.base import CommandParser

from agentclash_site.lib.cli import CliError, JsonCommand, StdoutClosed, refuse_empty_output
from runs.documents import run_document
from runs.exports import FORMATS, export_stream
from runs.management.commands.eval import render_text
from runs.models import Run
from runs.services.runs import RunError

OPERATIONS = ("cancel", "retry-failed", "rescore")
REFUSED_EXIT_CODE = 3  # the operation does not apply to the run as it stands (the API's 409)


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
    help = "Inspect and export runs; cancel, retry failed items, re-score."
    path_options = frozenset({"output"})

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        status = sub.add_parser("status", help="the run document as it stands")
        status.add_argument("run", help="run id")
        status.add_argument("--cases", action="store_true", help="include every case")
        self.add_json_argument(status)
        export = sub.add_parser("export", help="export the run's results")
        export.add_argument("run", help="run id")
        export.add_argument(
            "--format",
            required=True,
            choices=FORMATS,
            help="jsonl or csv: one line per case, deployment and repetition; junit: XML for CI test"
            " reports; grading: JSONL, one grading.json document per graded case",
        )
        export.add_argument("--output", help="write to this file instead of stdout")
        helps = {
            "cancel": "cancel the run: nothing more starts or is graded",
            "retry-failed": "send the run's infra_error and config_error items again",
            "rescore": "re-grade the recorded evidence with the current engine (a task does it)",
        }
        for name in OPERATIONS:
            operation = sub.add_parser(name, help=helps[name])
            operation.add_argument("run", help="run id")
            self.add_json_argument(operation)

    def handle(self, *args: Any, **options: Any) -> None:
        refuse_empty_output(options)
        run = _run(options["run"])
        if options["action"] in OPERATIONS:
            document, text = _operate(options["action"], run)
            self.emit(document, text)
            return
        if options["action"] == "status":
            document = run_document(run, cases=options["cases"])
            self.emit(document, render_text(document))
            return
        stream = export_stream(run, options["format"])
        if options.get("output"):
            _write_file(Path(options["output"]), stream)
            return
        binary = getattr(self.stdout, "buffer", None)  # a process's stdout (not a StringIO)
        if binary is None:
            for chunk in stream:
                self.stdout.write(chunk, ending="")
            return
        # The export is UTF-8 bytes whatever stdout's encoding and newline translation are
        # (a Windows console or a PYTHONIOENCODING): a cp1252 stdout ended the export of a
        # name in another script in an internal error, and text mode turned the CSV's CRLF
        # into CR CR LF.
        self.stdout.flush()
        try:
            for chunk in stream:
                binary.write(chunk.encode())
            binary.flush()
        except BrokenPipeError as exc:
            raise StdoutClosed from exc


def _write_file(path: Path, stream: Iterator[str]) -> None:
    """``stream`` into ``path`` as UTF-8. An export that fails on the way (the database, a
    full disk, Ctrl-C) removes the part it wrote: a truncated JSONL or CSV file read as a
    whole one (a shorter run), and a CI step read a truncated report. Only a regular file
    is removed, never what a symbolic link, a device or a pipe given as the output is."""
    try:
        removable = stat.S_ISREG(path.lstat().st_mode)
    except OSError:
        removable = True  # created here (or refused by open below)
    try:
        handle = path.open("w", encoding="utf-8", newline="")
    except OSError as exc:
        raise CliError("io_error", f"cannot write {path}: {exc.strerror or exc}", field="output") from exc
    try:
        with handle:
            for chunk in stream:
                handle.write(chunk)
    except BaseException as exc:
        stream.close()  # type: ignore[attr-defined]
        if removable:
            path.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            reason = exc.strerror or exc
            raise CliError(
                "io_error", f"cannot write {path}: {reason}; nothing was kept", field="output"
            ) from exc
        raise


def _operate(action: str, run: Run) -> tuple[dict[str, Any], str]:
    """The operation's document (the API's body for it) and its text."""
    from runs.services.operations import run_cancel, run_rescore, run_retry_failed

    try:
        if action == "cancel":
            run = run_cancel(run=run)
            return {"run": {"id": str(run.pk), "status": run.status}}, f"Run {run.pk} cancelled.\n"
        if action == "retry-failed":
            retried = run_retry_failed(run=run)
            run.refresh_from_db()
            document = {"run": {"id": str(run.pk), "status": run.status}, "retried": retried}
            return document, f"Run {run.pk}: {retried} failed item(s) sent again; it is {run.status}.\n"
        run = run_rescore(run=run)
    except RunError as exc:
        code = REFUSED_EXIT_CODE if exc.status_code == 409 else 2
        raise CliError(exc.code, exc.message, exit_code=code, field=exc.field, choices=exc.choices) from exc
    document = run_document(run)
    note = f"Run {run.pk} is being re-scored (revision {run.scoring_revision}): run status {run.pk}\n"
    return document, note + render_text(document)
