"""Writes for deployments: create, update, rotate the signing key, delete, test.

Every service validates the whole resulting deployment (kind-dependent URL and model,
bounds, the typed config) and raises :class:`DeploymentError` with a stable code and
the offending field, which the API, the pages and the CLI turn into their own errors.
The database constraints hold the same invariants underneath.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import ProtectedError
from pydantic import ValidationError
from yarl import URL

from agentclash_site.lib.crypto import DecryptionError
from agentclash_site.lib.outbound import run_with_client
from agentclash_site.lib.signing import generate_signing_key
from agentclash_site.workspaces.models import Workspace
from runs.deployment_config import HEADER_VALUE_UNSAFE, DeploymentConfig
from runs.executors import AttemptOutcome, DeploymentTarget, executor_for
from runs.executors.base import without_secrets
from runs.executors.probe import probe_request
from runs.models import (
    MAX_ATTEMPTS_LIMIT,
    MAX_IN_FLIGHT_LIMIT,
    MAX_TIMEOUT_SECONDS,
    Deployment,
    DeploymentKind,
    EvidenceLevel,
)

PROBE_TIMEOUT_CAP = 30.0  # "Test connection" runs inside a web request


class DeploymentError(Exception):
    """A deployment write that cannot be done; ``code`` is stable snake_case."""

    status_code = 400

    def __init__(
        self, code: str, message: str, *, field: str | None = None, choices: list[str] | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.field = field
        self.choices = choices


class DeploymentNameExists(DeploymentError):
    status_code = 409

    def __init__(self, name: str) -> None:
        super().__init__(
            "deployment_name_exists",
            f"a deployment named {name!r} already exists in this workspace",
            field="name",
        )


class DeploymentInUse(DeploymentError):
    status_code = 409


@dataclass(frozen=True)
class DeploymentWithKey:
    """A deployment and its signing key in clear: shown once, then only stored encrypted."""

    deployment: Deployment
    signing_key: str


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def url_field_name(kind: str) -> str:
    """The API/CLI name of the URL for a kind: ``endpoint_url`` or ``base_url``."""
    return "base_url" if kind == DeploymentKind.OPENAI_CHAT else "endpoint_url"


# --- validation ------------------------------------------------------------------------------


def _clean_name(name: Any) -> str:
    if not isinstance(name, str) or not name.strip():
        raise DeploymentError("invalid_name", "a name is required", field="name")
    name = name.strip()
    if len(name) > 100 or _CONTROL.search(name):
        raise DeploymentError(
            "invalid_name", "names are at most 100 characters, without control characters", field="name"
        )
    return name


def _clean_url(url: Any, kind: str) -> str:
    field = url_field_name(kind)
    if kind == DeploymentKind.TRACE_IMPORT:
        if url:
            raise DeploymentError(
                "url_not_allowed", "trace_import deployments are not called: leave the URL empty", field=field
            )
        return ""
    if not isinstance(url, str) or not url.strip():
        raise DeploymentError("missing_url", f"{field} is required for {kind} deployments", field=field)
    url = url.strip()
    try:
        parsed = URL(url)
    except ValueError:
        raise DeploymentError("invalid_url", f"{field} is not a valid URL", field=field) from None
    if parsed.scheme not in ("http", "https") or not parsed.raw_host or not parsed.is_absolute():
        raise DeploymentError("invalid_url", f"{field} must be an absolute http(s) URL", field=field)
    if parsed.user or parsed.password:
        raise DeploymentError(
            "invalid_url", f"{field} must not carry credentials: use the secret instead", field=field
        )
    if parsed.fragment or len(url) > 2000:
        raise DeploymentError(
            "invalid_url", f"{field} must have no #fragment and at most 2000 characters", field=field
        )
    if kind == DeploymentKind.OPENAI_CHAT and parsed.path.rstrip("/").endswith("/chat/completions"):
        # every call went to .../chat/completions/chat/completions and was a 404
        base = str(
            parsed.with_path(parsed.path.rstrip("/").removesuffix("/chat/completions"), keep_query=True)
        )
        raise DeploymentError(
            "invalid_url",
            f"{field} is the API's base URL, without /chat/completions (AgentClash adds it): use {base}",
            field=field,
        )
    return url


def _clean_model(model: Any, kind: str) -> str:
    model = (model or "").strip() if isinstance(model, str | None) else model
    if not isinstance(model, str):
        raise DeploymentError("invalid_model", "model must be a string", field="model")
    if kind == DeploymentKind.OPENAI_CHAT:
        if not model:
            raise DeploymentError(
                "missing_model", "model is required for openai_chat deployments", field="model"
            )
        if len(model) > 200:
            raise DeploymentError("invalid_model", "model is at most 200 characters", field="model")
    elif model:
        raise DeploymentError(
            "model_not_allowed", "model applies to openai_chat deployments only", field="model"
        )
    return model


def _clean_int(value: Any, field: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise DeploymentError(
            f"invalid_{field}", f"{field} must be a whole number from {low} to {high}", field=field
        )
    return value


def _clean_timeout(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= MAX_TIMEOUT_SECONDS:
        raise DeploymentError(
            "invalid_timeout_seconds",
            f"timeout_seconds must be more than 0 and at most {MAX_TIMEOUT_SECONDS:g}",
            field="timeout_seconds",
        )
    return float(value)


def _clean_choice(value: Any, field: str, choices: list[str]) -> str:
    if value not in choices:
        raise DeploymentError(
            f"invalid_{field}", f"{field} must be one of {', '.join(choices)}", field=field, choices=choices
        )
    return value


def clean_config(config: Any, kind: str) -> dict[str, Any]:
    """Validate ``config`` with :class:`DeploymentConfig`; returns its JSON form."""
    if config is None:
        config = {}
    if not isinstance(config, dict):
        raise DeploymentError("invalid_config", "config must be a JSON object", field="config")
    try:
        typed = DeploymentConfig.model_validate(config)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(p) for p in error["loc"])
        message = error["msg"].removeprefix("Value error, ")
        raise DeploymentError(
            "invalid_config", f"config.{where}: {message}", field=f"config.{where}" if where else "config"
        ) from None
    known = list(DeploymentConfig.model_fields)
    for key in typed.model_extra or {}:
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.85)
        problem = (
            f'unknown key; did you mean "{close[0]}"?'
            if close
            else "is set by AgentClash"
            if key in ("model", "messages")
            else "applies to openai_chat deployments only (a request parameter)"
            if kind != DeploymentKind.OPENAI_CHAT
            else ""
        )
        if problem:
            raise DeploymentError("invalid_config", f"config.{key}: {problem}", field=f"config.{key}")
    for where, params in (("stream", typed.model_extra or {}), ("extra_body.stream", typed.extra_body)):
        if params.get("stream"):
            raise DeploymentError(
                "invalid_config",
                f"config.{where}: a streamed reply cannot be read; AgentClash reads one chat completion per case",
                field=f"config.{where}",
            )
    for header, value in typed.extra_headers.items():
        if HEADER_VALUE_UNSAFE.search(value):
            raise DeploymentError(
                "invalid_config",
                f"config.extra_headers: the value of {header} must not contain control characters "
                "(an HTTP header cannot carry them)",
                field="config.extra_headers",
            )
    if kind != DeploymentKind.OPENAI_CHAT:
        for key in DeploymentConfig.MODEL_KEYS:
            if key in typed.model_fields_set:
                raise DeploymentError(
                    "invalid_config",
                    f"config.{key} applies to openai_chat deployments only",
                    field=f"config.{key}",
                )
    return typed.as_json()


def _clean_secret(secret: Any) -> str | None:
    if secret is None or secret == "":
        return None
    if not isinstance(secret, str) or len(secret) > 10_000 or "\n" in secret or "\r" in secret:
        raise DeploymentError(
            "invalid_secret", "the secret must be one line of at most 10,000 characters", field="secret"
        )
    if HEADER_VALUE_UNSAFE.search(secret):  # every call would end config_error invalid_header
        raise DeploymentError(
            "invalid_secret",
            "the secret must not contain control characters (it is sent in an HTTP header): paste it again",
            field="secret",
        )
    return secret


def _validate_state(state: dict[str, Any]) -> dict[str, Any]:
    kind = _clean_choice(state["kind"], "kind", list(DeploymentKind.values))
    return {
        "name": _clean_name(state["name"]),
        "kind": kind,
        "url": _clean_url(state["url"], kind),
        "model": _clean_model(state["model"], kind),
        "max_in_flight": _clean_int(state["max_in_flight"], "max_in_flight", 1, MAX_IN_FLIGHT_LIMIT),
        "timeout_seconds": _clean_timeout(state["timeout_seconds"]),
        "max_attempts": _clean_int(state["max_attempts"], "max_attempts", 1, MAX_ATTEMPTS_LIMIT),
        "evidence_level": _clean_choice(
            state["evidence_level"], "evidence_level", list(EvidenceLevel.values)
        ),
        "config": clean_config(state["config"], kind),
    }


def _ensure_name_free(workspace: Workspace, name: str, *, exclude_pk: int | None = None) -> None:
    qs = Deployment.objects.filter(workspace=workspace, name=name)
    if exclude_pk is not None:
        qs = qs.exclude(pk=exclude_pk)
    if qs.exists():
        raise DeploymentNameExists(name)


def _save(deployment: Deployment, name: str) -> None:
    try:
        with transaction.atomic():  # a savepoint: a lost race on the name stays recoverable
            deployment.save()
    except IntegrityError as exc:
        if "runs_deployment_name_unique" in str(exc):
            raise DeploymentNameExists(name) from None
        raise


# --- services -------------------------------------------------------------------------------


@transaction.atomic
def deployment_create(
    *,
    workspace: Workspace,
    name: str,
    kind: str,
    url: str = "",
    model: str = "",
    secret: str | None = None,
    max_in_flight: int = 8,
    timeout_seconds: float = 120.0,
    max_attempts: int = 3,
    evidence_level: str = EvidenceLevel.STRUCTURED,
    config: dict[str, Any] | None = None,
) -> DeploymentWithKey:
    """Create a deployment with a fresh signing key, returned in clear this once."""
    fields = _validate_state(
        {
            "name": name,
            "kind": kind,
            "url": url,
            "model": model,
            "max_in_flight": max_in_flight,
            "timeout_seconds": timeout_seconds,
            "max_attempts": max_attempts,
            "evidence_level": evidence_level,
            "config": config,
        }
    )
    _ensure_name_free(workspace, fields["name"])
    deployment = Deployment(workspace=workspace, **fields)
    deployment.set_secret(_clean_secret(secret))
    signing_key = generate_signing_key()
    deployment.set_signing_key(signing_key)
    _save(deployment, fields["name"])
    return DeploymentWithKey(deployment=deployment, signing_key=signing_key)


def ensure_kind_may_change(deployment: Deployment) -> None:
    """A kind change waits for the runs that use the deployment: their dispatchers call it
    with the executor of its current kind (a hosted endpoint was called as trace_import, and
    every case ended config_error "please report it"), and a lane keeps the kind it was
    created with. Raises :class:`DeploymentInUse` (field ``kind``) naming the first such run.

    Inside a transaction the deployment's row is locked first (``FOR UPDATE``): a run being
    created with it holds a key-share lock on the row from its lane insert until it commits,
    so this waits for that run and then sees its lane (``run_create`` checks the other
    order)."""
    from runs.models import RunLane, RunStatus

    if transaction.get_connection().in_atomic_block:
        list(Deployment.objects.select_for_update().filter(pk=deployment.pk).values_list("pk"))
    unfinished = (RunStatus.DRAFT, RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.SCORING)
    busy = (
        RunLane.objects.filter(deployment=deployment, run__status__in=unfinished)
        .order_by("run__created_at")
        .values_list("run_id", "run__status")
        .first()
    )
    if busy is not None:
        run_id, status = busy
        raise DeploymentInUse(
            "deployment_in_use",
            f"{deployment.name!r} is used by run {run_id} ({status}); its kind can change once"
            " that run has finished or is cancelled",
            field="kind",
        )


@transaction.atomic
def deployment_update(
    *,
    deployment: Deployment,
    name: str = UNSET,
    kind: str = UNSET,
    url: str = UNSET,
    model: str = UNSET,
    secret: str | None = UNSET,
    max_in_flight: int = UNSET,
    timeout_seconds: float = UNSET,
    max_attempts: int = UNSET,
    evidence_level: str = UNSET,
    config: dict[str, Any] = UNSET,
) -> Deployment:
    """Change the given fields; others stay. ``secret``: a string sets it, None or "" clears it.

    Changing ``kind`` drops the URL and model the new kind does not use.
    """
    # The stored row, locked: ``deployment`` was read before this transaction (a page, an
    # API call), and a kind changed since then (with a run started on the new kind) was
    # compared with the kind read, or written back unchecked with the other fields.
    deployment.refresh_from_db(from_queryset=Deployment.objects.select_for_update())
    given = {
        "name": name,
        "kind": kind,
        "url": url,
        "model": model,
        "max_in_flight": max_in_flight,
        "timeout_seconds": timeout_seconds,
        "max_attempts": max_attempts,
        "evidence_level": evidence_level,
        "config": config,
    }
    state = {key: getattr(deployment, key) for key in given}
    state.update({key: value for key, value in given.items() if value is not UNSET})
    if kind is not UNSET and kind != deployment.kind:
        ensure_kind_may_change(deployment)
        if url is UNSET:
            # A hosted endpoint is not a chat base URL: a new calling kind needs its own URL.
            state["url"] = ""
        if model is UNSET and kind != DeploymentKind.OPENAI_CHAT:
            state["model"] = ""
    fields = _validate_state(state)
    if fields["name"] != deployment.name:
        _ensure_name_free(deployment.workspace, fields["name"], exclude_pk=deployment.pk)
    for key, value in fields.items():
        setattr(deployment, key, value)
    if secret is not UNSET:
        deployment.set_secret(_clean_secret(secret))
    _save(deployment, fields["name"])
    return deployment


@dataclass(frozen=True)
class DeploymentUpsert:
    deployment: Deployment
    created: bool
    signing_key: str | None  # only when created


@transaction.atomic
def deployment_create_or_update(*, workspace: Workspace, name: str, **fields: Any) -> DeploymentUpsert:
    """The CLI's rerun semantics: create the named deployment, or update the given fields."""
    clean = _clean_name(name)
    existing = Deployment.objects.select_for_update().filter(workspace=workspace, name=clean).first()
    if existing is None:
        created = deployment_create(workspace=workspace, name=clean, **fields)
        return DeploymentUpsert(created.deployment, True, created.signing_key)
    return DeploymentUpsert(deployment_update(deployment=existing, **fields), False, None)


@transaction.atomic
def deployment_rotate_signing_key(*, deployment: Deployment) -> DeploymentWithKey:
    """Replace the signing key; the new one is returned in clear this once."""
    signing_key = generate_signing_key()
    deployment.set_signing_key(signing_key)
    deployment.save(update_fields=["signing_key_encrypted", "updated_at"])
    return DeploymentWithKey(deployment=deployment, signing_key=signing_key)


@transaction.atomic
def deployment_delete(*, deployment: Deployment) -> None:
    try:
        with transaction.atomic():
            deployment.delete()
    except ProtectedError:
        raise DeploymentInUse(
            "deployment_in_use", f"{deployment.name!r} is used by runs and cannot be deleted"
        ) from None


def deployment_test_connection(*, deployment: Deployment) -> AttemptOutcome:
    """One real request through the deployment's executor and the outbound client.

    Network I/O: never call inside a transaction. Honours the workspace's
    ``allow_private_endpoints``; the wait is capped at 30 s.
    """
    if not deployment.calls_out:
        raise DeploymentError(
            "not_callable", "trace_import deployments are not called: upload results to a run instead"
        )
    try:
        target = DeploymentTarget.from_deployment(deployment)
    except DecryptionError:
        raise DeploymentError(
            "secret_unreadable",
            "the stored secret or signing key cannot be decrypted (was FIELD_ENCRYPTION_KEY changed? "
            "list the old key in FIELD_ENCRYPTION_KEY_FALLBACKS): or set the secret again and rotate "
            "the signing key",
        ) from None
    target = dataclasses.replace(target, timeout_seconds=min(target.timeout_seconds, PROBE_TIMEOUT_CAP))
    request = probe_request(target)
    executor = executor_for(target.kind)
    outcome = run_with_client(lambda client: executor.execute(request, client=client))
    return without_secrets(outcome, target)
