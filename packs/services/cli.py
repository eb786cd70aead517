"""``manage.py pack publish PATH --workspace SLUG [--strict] [--json]`` (spec/interfaces.md §4).

The ``pack`` command registers this subcommand; the publishing itself is
``pack_version_publish``. Exit 0 created or already published; 1 invalid (the validate
body); 3 conflict (an error object); 2 usage, I/O error or unknown workspace.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from agentclash_site.lib.cli import CliError, JsonCommand
from agentclash_site.workspaces.models import Workspace
from packs.bundle import archive
from packs.services.publish import PackInvalid, PublishConflict, PublishResult, pack_version_publish

EXIT_INVALID = 1
EXIT_USAGE = 2
EXIT_CONFLICT = 3


def add_publish_parser(subparsers: Any, command: JsonCommand) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("publish", help="validate and publish a pack as a new immutable version")
    parser.add_argument(
        "path", help="pack.yaml, a zip bundle, or a directory holding pack.yaml and its files"
    )
    parser.add_argument("--workspace", required=True, help="the workspace slug")
    parser.add_argument("--strict", action="store_true", help="fail on warnings too")
    command.add_json_argument(parser)
    return parser


def read_bundle_path(path: Path) -> bytes:
    """The bytes of a bundle file (read with a limit, as ``pack validate`` reads it), or of
    a pack directory: pack.yaml alone, or a reproducible zip of pack.yaml and the files its
    assets name."""
    return archive.read_bundle(path)


def run_publish(command: JsonCommand, options: dict[str, Any]) -> PublishResult:
    workspace = Workspace.objects.filter(slug=options["workspace"]).first()
    if workspace is None:
        raise CliError(
            "unknown_workspace", f"no workspace with slug {options['workspace']!r}", field="workspace"
        )
    path = Path(options["path"])
    try:
        data = read_bundle_path(path)
    except OSError as exc:
        code = archive.read_error_code(exc)
        raise CliError(code, archive.read_error_message(path, exc), field="path") from exc
    try:
        result = pack_version_publish(
            workspace=workspace, data=data, strict=bool(options.get("strict")), filename=path.name
        )
    except PackInvalid as exc:
        body = {k: exc.report_body[k] for k in ("valid", "errors", "warnings")}
        if not getattr(command, "_as_json", False):
            command.stderr.write(_issues(body))
        raise CliError(exc.code, "the pack is invalid", exit_code=EXIT_INVALID, document=body) from exc
    except PublishConflict as exc:
        raise CliError(exc.code, exc.message, exit_code=EXIT_CONFLICT, field=exc.field) from exc
    doc = result.to_dict()
    verb = "already published" if result.already_published else "published"
    lines = [f"{verb}: {doc['slug']} v{doc['number']} ({doc['pack_version_id']})"]
    lines += [f"  input set {key}: {value}" for key, value in doc["input_set_ids"].items()]
    lines += [f"  warning: {_issue_line(w)}" for w in doc["warnings"]]
    command.emit(doc, "\n".join(lines))
    return result


def _issue_line(issue: dict[str, Any]) -> str:
    where = f"{issue['line']}:{issue['column']} " if issue.get("line") else ""
    rule = f" [{issue['rule']}]" if issue.get("rule") else ""
    return f"{where}{issue['field']}: {issue['message']}{rule}"


def _issues(body: dict[str, Any]) -> str:
    lines = [f"error: {_issue_line(e)}" for e in body["errors"]]
    lines += [f"warning: {_issue_line(w)}" for w in body["warnings"]]
    return "\n".join(lines)
