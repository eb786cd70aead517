"""``manage.py deployment create ...`` (spec/interfaces.md §6).

Creates the named deployment, or updates the fields given when it exists (names are
unique per workspace). ``--endpoint`` is the endpoint URL of a hosted_http deployment and
the base URL of an openai_chat one. The secret is read from the environment variable
named by ``--secret-env``, never from argv (which other users can read in ``ps``).
Exit 0 created or updated, 2 invalid.
"""

from __future__ import annotations

import inspect
import os
from typing import Any

from django.core.management.base import CommandParser

from agentclash_site.lib.cli import CliError, JsonCommand
from agentclash_site.lib.outbound import known_refusal
from agentclash_site.workspaces.models import Workspace
from grading.engine import jsontext
from runs.api.deployments import deployment_document
from runs.models import (
    MAX_ATTEMPTS_LIMIT,
    MAX_IN_FLIGHT_LIMIT,
    MAX_TIMEOUT_SECONDS,
    DeploymentKind,
    EvidenceLevel,
)
from runs.services.deployments import DeploymentError, deployment_create, deployment_create_or_update

# What a new deployment gets for the fields not given (deployment_create's defaults).
DEFAULTS = {
    name: parameter.default
    for name, parameter in inspect.signature(deployment_create).parameters.items()
    if parameter.default is not inspect.Parameter.empty
}

OPTION_FIELDS = {
    "endpoint": "url",
    "model": "model",
    "max_in_flight": "max_in_flight",
    "timeout": "timeout_seconds",
    "max_attempts": "max_attempts",
    "evidence_level": "evidence_level",
}


class Command(JsonCommand):
    help = "Manage deployments (agents under test)."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        create = sub.add_parser("create", help="create a deployment, or update the fields given")
        create.add_argument("--workspace", required=True, help="workspace slug")
        create.add_argument(
            "--name",
            required=True,
            help="the deployment's name, unique in the workspace (an existing one is updated)",
        )
        create.add_argument(
            "--kind",
            required=True,
            choices=DeploymentKind.values,
            help="hosted_http: an agent behind an HTTP endpoint; openai_chat: an OpenAI-compatible chat"
            " model; trace_import: results uploaded, no calls",
        )
        create.add_argument("--endpoint", help="endpoint URL (hosted_http) or base URL (openai_chat)")
        create.add_argument("--model", help="model name (openai_chat)")
        create.add_argument(
            "--secret-env",
            metavar="VAR",
            help="read the secret (sent as Authorization: Bearer) from this variable",
        )
        create.add_argument(
            "--max-in-flight",
            type=int,
            help=f"calls in flight at once, 1 to {MAX_IN_FLIGHT_LIMIT} (default when created: {DEFAULTS['max_in_flight']})",
        )
        create.add_argument(
            "--timeout",
            type=float,
            help=f"seconds per attempt, more than 0 and at most {MAX_TIMEOUT_SECONDS:g}"
            f" (default when created: {DEFAULTS['timeout_seconds']:g})",
        )
        create.add_argument(
            "--max-attempts",
            type=int,
            help=f"every attempt counts: 3 = first + 2 retries; 1 to {MAX_ATTEMPTS_LIMIT}"
            f" (default when created: {DEFAULTS['max_attempts']})",
        )
        create.add_argument(
            "--evidence-level",
            choices=EvidenceLevel.values,
            help="structured: tool calls, files and tasks the agent reports are graded; black_box: its final"
            f" output and messages only (default when created: {DEFAULTS['evidence_level']})",
        )
        create.add_argument("--config", help="JSON object, e.g. '{\"temperature\": 0}'")
        self.add_json_argument(create)

    def handle(self, *args: Any, **options: Any) -> None:
        workspace = Workspace.objects.filter(slug=options["workspace"]).first()
        if workspace is None:
            raise CliError("unknown_workspace", f"no workspace {options['workspace']!r}", field="workspace")
        fields: dict[str, Any] = {"kind": options["kind"]}
        for option, field in OPTION_FIELDS.items():
            if options.get(option) is not None:
                fields[field] = options[option]
        if options.get("config") is not None:
            fields["config"] = _parse_config(options["config"])
        if options.get("secret_env") is not None:
            fields["secret"] = _read_secret(options["secret_env"])
        try:
            result = deployment_create_or_update(workspace=workspace, name=options["name"], **fields)
        except DeploymentError as exc:
            raise _option_error(exc) from None
        document: dict[str, Any] = {
            "deployment": deployment_document(result.deployment),
            "created": result.created,
        }
        if result.created:
            document["signing_key"] = result.signing_key
        warning = _refusal_warning(document["deployment"], workspace)
        if warning:
            self.stderr.write(warning)
        self.emit(document, _text(document))


def _refusal_warning(deployment: dict[str, Any], workspace: Workspace) -> str:
    """What the deployment page warns of, on stderr: every call to the endpoint will be
    refused (its host alone tells), so every case of a run would end in a config_error."""
    url = deployment["endpoint_url"] or deployment["base_url"]
    refusal = known_refusal(url, allow_private=workspace.allow_private_endpoints) if url else None
    if refusal is None:
        return ""
    fix = (
        f"; to allow private endpoints: python manage.py workspace create {workspace.slug} --allow-private-endpoints"
        if refusal.private
        else ""
    )
    return (
        f"warning: every call to {url} will be refused ({refusal.host} {refusal.what}), so every case "
        f"of a run would end in a config_error{fix}"
    )


# The option that gave a service field whose name differs from the option's.
RENAMED_FIELDS = {
    "url": "endpoint",
    "endpoint_url": "endpoint",
    "base_url": "endpoint",
    "timeout_seconds": "timeout",
    "secret": "secret_env",
}


def _option_error(exc: DeploymentError) -> CliError:
    """The service's error with ``field`` the option's name (as every other error of the
    command gives it) and, when the service named its own field, the message prefixed by the
    option the user typed: ``--timeout: timeout_seconds must be more than 0 ...``."""
    field = RENAMED_FIELDS.get(exc.field or "", exc.field)
    message = exc.message
    if field != exc.field and field is not None:
        message = f"--{field.replace('_', '-')}: {message}"
    return CliError(exc.code, message, field=field, choices=exc.choices)


def _parse_config(raw: str) -> dict[str, Any]:
    try:
        value = jsontext.loads(raw)
    except ValueError as exc:
        raise CliError("invalid_config", f"--config is not valid JSON: {exc}", field="config") from None
    if not isinstance(value, dict):
        raise CliError("invalid_config", "--config must be a JSON object", field="config")
    return value


def _read_secret(variable: str) -> str:
    if not variable.strip():
        # `--secret-env "$NAME"` with NAME unset was ignored: the deployment had no secret.
        raise CliError(
            "missing_secret_env",
            "--secret-env is empty: give the name of the environment variable holding the secret",
            field="secret_env",
        )
    value = os.environ.get(variable)
    if not value:
        raise CliError(
            "missing_secret_env", f"environment variable {variable} is not set or empty", field="secret_env"
        )
    return value


def _text(document: dict[str, Any]) -> str:
    d = document["deployment"]
    target = d["endpoint_url"] or d["base_url"] or "no calls (trace import)"
    model = f", model {d['model']}" if d["model"] else ""
    lines = [
        f"deployment {d['name']} {'created' if document['created'] else 'updated'} "
        f"in {d['workspace']}: {d['kind']} -> {target}{model} (id {d['id']})",
        f"secret: {'set' if d['has_secret'] else 'none'}; max in flight {d['max_in_flight']}, "
        f"timeout {d['timeout_seconds']:g}s, max attempts {d['max_attempts']}, evidence {d['evidence_level']}",
    ]
    if document.get("signing_key"):
        lines.append(f"signing key (shown once, store it with your agent): {document['signing_key']}")
    return "\n".join(lines)
