"""``manage.py pack validate|schema|publish`` (spec/interfaces.md §4).

- ``pack validate PATH [--strict] [--json]``: exit 0 valid, 1 invalid, 2 usage or I/O error.
  PATH is a pack YAML, a zip bundle, or a pack directory (``pack.yaml`` plus the files its
  assets name). Touches no database.
- ``pack schema``: prints the pack JSON Schema (pack-format §11). Touches no database.
- ``pack publish``: registered from ``packs.services.cli`` (the publish service's own module).

The publish-independent logic lives in plain functions (``validate_path``,
``report_text``) so other commands and tests can reuse it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from agentclash_site.lib.cli import CliError, JsonCommand
from packs.bundle import BundleIssue, BundleReport, validate_bundle
from packs.bundle.archive import read_bundle, read_error_code, read_error_message
from packs.bundle.schema import render_schema

EXIT_INVALID = 1
EXIT_USAGE = 2


def read_bundle_or_fail(path: Path, *, field: str = "path") -> bytes:
    """The bundle bytes of PATH, read with a limit, or an ``io_error`` (a device, a FIFO, an
    unreadable file) or ``payload_too_large`` error (exit 2) whose ``field`` is the argument
    that named the file (``path``; ``grade`` calls it ``pack``)."""
    try:
        return read_bundle(path)
    except OSError as exc:
        raise CliError(read_error_code(exc), read_error_message(path, exc), field=field) from exc


def validate_path(path: Path, *, strict: bool = False) -> BundleReport:
    return validate_bundle(read_bundle_or_fail(path), strict=strict, filename=path.name)


def issue_line(issue: BundleIssue) -> str:
    """``field: message (line L, column C)``, a warning's rule in brackets, detail indented."""
    text = f"{issue.field}: {issue.message}"
    if issue.line is not None:
        text += f" (line {issue.line}, column {issue.column})"
    if issue.rule:
        text += f" [{issue.rule}]"
    if issue.detail:
        text += "\n    " + issue.detail.replace("\n", "\n    ")
    return text


def report_text(report: BundleReport) -> str:
    def count(n: int, word: str) -> str:
        return f"{n} {word}{'' if n == 1 else 's'}"

    head = "valid" if report.valid else "invalid"
    lines = [f"{head}: {count(len(report.errors), 'error')}, {count(len(report.warnings), 'warning')}"]
    lines += [issue_line(issue) for issue in report.errors]
    lines += ["warning: " + issue_line(issue) for issue in report.warnings]
    return "\n".join(lines)


class Command(JsonCommand):
    help = "Validate challenge packs, print their JSON Schema, or publish them."
    # validate and schema need no database, migrations or system checks.
    requires_system_checks: list[str] = []
    path_options = frozenset({"path"})

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        validate = sub.add_parser("validate", help="validate a pack YAML, zip bundle or pack directory")
        validate.add_argument("path", help="pack.yaml, a zip bundle, or a directory holding pack.yaml")
        validate.add_argument("--strict", action="store_true", help="fail on warnings too")
        self.add_json_argument(validate)
        schema = sub.add_parser("schema", help="print the pack JSON Schema (draft 2020-12)")
        self.add_json_argument(schema)
        publish = _publish_module()
        if publish is not None:
            publish.add_publish_parser(sub, self)

    def handle(self, *args: Any, **options: Any) -> None:
        action = options["action"]
        if action == "validate":
            self.handle_validate(options)
        elif action == "schema":
            self.stdout.write(render_schema(), ending="")
        elif action == "publish":
            publish = _publish_module()
            assert publish is not None
            publish.run_publish(self, options)

    def handle_validate(self, options: dict[str, Any]) -> None:
        report = validate_path(Path(options["path"]), strict=bool(options.get("strict")))
        self.emit(report.to_body(), report_text(report))
        if not report.valid:
            self.stdout.flush()
            sys.exit(EXIT_INVALID)


def _publish_module() -> Any:
    """``packs.services.cli`` (the publish subcommand), imported only when present."""
    try:
        from packs.services import cli
    except ImportError:
        return None
    return cli
