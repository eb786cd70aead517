"""What a lane runs with: the deployment's call settings recorded when the run is created
(``RunLane.settings``), so every call of the run (first attempts, retries, the sweeper's
re-claims, retry-failed) goes out as the run defined it, whatever the deployment says now.

The run's settings (what was evaluated): kind, URL, model, ``config`` without its auth
keys, timeout, max_attempts, evidence level. The operator's, read live on the deployment:
the secret and the signing key (a rotation mid-run keeps working), the headers that carry
credentials (``config.extra_headers``, ``config.secret_header``: an ``x-api-key`` is as
much a credential as the secret, ``DeploymentTarget.sensitive_headers``), the shared
concurrency limit ``max_in_flight`` (counted across runs) and the workspace's
``allow_private_endpoints``. Of the live part only names and flags are recorded (whether
a secret or signing key was configured, the header names), never a value.
runs/MODELS.md "RunLane" says the same.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote_plus, urlsplit, urlunsplit

if TYPE_CHECKING:
    from runs.executors.base import DeploymentTarget
    from runs.models import Deployment, RunLane

# Config keys that carry credentials: they stay with the deployment (read live).
AUTH_CONFIG_KEYS = ("extra_headers", "secret_header")
# The Deployment model's defaults: the page shows these settings only when they differ.
DEFAULTS = {"timeout_seconds": 120.0, "max_attempts": 3, "evidence_level": "structured"}
TRACE_IMPORT = "trace_import"
SHORT = 80  # characters of a value shown in a difference or a summary


@dataclass(frozen=True, slots=True)
class CallSettings:
    kind: str
    url: str = ""
    model: str = ""
    timeout_seconds: float = DEFAULTS["timeout_seconds"]
    max_attempts: int = DEFAULTS["max_attempts"]
    evidence_level: str = DEFAULTS["evidence_level"]
    config: Mapping[str, Any] = field(default_factory=dict)  # without AUTH_CONFIG_KEYS
    # Recorded, not used for calls: what the deployment had configured then (never a value).
    has_secret: bool = False
    has_signing_key: bool = False
    secret_header: str | None = None
    extra_headers: tuple[str, ...] = ()
    # Recorded by migration 0010 from the deployment as it was then, not at run creation.
    backfilled: bool = False
    # Nothing but the kind is known (backfilled lanes whose deployment changed kind since).
    unknown: bool = False

    @property
    def calls_out(self) -> bool:
        return self.kind != TRACE_IMPORT

    @classmethod
    def of_deployment(cls, deployment: Any, *, backfilled: bool = False) -> CallSettings:
        """From a Deployment row (a historical model's too: reads columns only)."""
        if deployment.kind == TRACE_IMPORT:  # nothing is called: only what grades uploads
            return cls(kind=deployment.kind, evidence_level=deployment.evidence_level, backfilled=backfilled)
        config = dict(deployment.config or {})
        headers = config.get("extra_headers") or {}
        return cls(
            kind=deployment.kind,
            url=deployment.url,
            model=deployment.model,
            timeout_seconds=float(deployment.timeout_seconds),
            max_attempts=int(deployment.max_attempts),
            evidence_level=deployment.evidence_level,
            config={k: v for k, v in config.items() if k not in AUTH_CONFIG_KEYS},
            has_secret=bool(deployment.secret_encrypted),
            has_signing_key=bool(deployment.signing_key_encrypted),
            secret_header=config.get("secret_header") or None,
            extra_headers=tuple(sorted(headers)) if isinstance(headers, dict) else (),
            backfilled=backfilled,
        )

    @classmethod
    def kind_only(cls, kind: str) -> CallSettings:
        return cls(kind=kind, backfilled=True, unknown=True)

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> CallSettings:
        """A lane's ``settings``: those ``to_json`` wrote, and the backfilled ones of migration
        0010 (which holds its own frozen copy of this JSON's shape: keep reading it)."""
        auth = doc.get("auth") or {}
        return cls(
            kind=doc["kind"],
            url=doc.get("url", ""),
            model=doc.get("model", ""),
            timeout_seconds=float(doc.get("timeout_seconds", DEFAULTS["timeout_seconds"])),
            max_attempts=int(doc.get("max_attempts", DEFAULTS["max_attempts"])),
            evidence_level=doc.get("evidence_level", DEFAULTS["evidence_level"]),
            config=dict(doc.get("config") or {}),
            has_secret=bool(auth.get("secret")),
            has_signing_key=bool(auth.get("signing_key")),
            secret_header=auth.get("secret_header"),
            extra_headers=tuple(auth.get("extra_headers") or ()),
            backfilled=bool(doc.get("backfilled")),
            unknown=bool(doc.get("unknown")),
        )

    @classmethod
    def of_lane(cls, lane: RunLane) -> CallSettings:
        """The lane's recorded settings; a lane without any (created outside ``run_create``)
        runs with its deployment's, read now."""
        if lane.settings:
            return cls.from_json(lane.settings)
        return cls.of_deployment(lane.deployment)

    def to_json(self) -> dict[str, Any]:
        """``RunLane.settings``: no secret, no signing key, no header value."""
        if self.unknown:
            return {"kind": self.kind, "backfilled": True, "unknown": True}
        doc: dict[str, Any] = {"kind": self.kind, "evidence_level": self.evidence_level}
        if self.calls_out:
            doc.update(
                url=self.url,
                model=self.model,
                timeout_seconds=self.timeout_seconds,
                max_attempts=self.max_attempts,
                config=dict(self.config),
                auth={
                    "secret": self.has_secret,
                    "signing_key": self.has_signing_key,
                    "secret_header": self.secret_header,
                    "extra_headers": list(self.extra_headers),
                },
            )
        if self.backfilled:
            doc["backfilled"] = True
        return doc

    @property
    def system_prompt(self) -> str | None:
        """The system prompt sent with every chat call (openai_chat only)."""
        if self.kind != "openai_chat":
            return None
        prompt = self.config.get("system_prompt")
        return prompt if isinstance(prompt, str) and prompt else None

    def target(self, deployment: Deployment, *, name: str = "") -> DeploymentTarget:
        """The executor's target: these settings, with the deployment's live secrets, auth
        headers and the workspace's private-endpoint flag. Built once per dispatcher.

        The live secret and credential headers go only to the origin the deployment names
        now: re-pointed at another host (another provider, with its key), the run's endpoint
        is not sent them, and every call is refused (``withheld``: a config_error saying
        so), as a redirect to another origin never carries them (``sensitive_headers``)."""
        from runs.deployment_config import DeploymentConfig
        from runs.executors.base import DeploymentTarget

        live = deployment.config or {}
        credentials = {k: live[k] for k in AUTH_CONFIG_KEYS if k in live}
        secret, withheld = deployment.get_secret(), ""
        if self.calls_out and _origin(self.url) != _origin(deployment.url) and (secret or credentials):
            secret, credentials = None, {}
            withheld = (
                f"the deployment calls {host_of(deployment.url) or 'no endpoint'} now, not this run's "
                f"{host_of(self.url)}: its secret and credential headers are not sent to the run's "
                "endpoint; start a new run to call the new one"
            )
        return DeploymentTarget(
            kind=self.kind,
            url=self.url,
            model=self.model,
            secret=secret,
            signing_key=deployment.get_signing_key(),
            timeout_seconds=self.timeout_seconds,
            evidence_level=self.evidence_level,
            config=DeploymentConfig.model_validate({**self.config, **credentials}),
            allow_private=deployment.workspace.allow_private_endpoints,
            name=name or deployment.name,
            max_attempts=self.max_attempts,
            withheld=withheld,
        )

    # --- what the pages show ---

    def _flat(self) -> dict[str, Any]:
        """The run's settings as ``label -> value`` (config keys as ``config.<key>``)."""
        if self.unknown:
            return {"kind": self.kind}
        out: dict[str, Any] = {"kind": self.kind, "evidence_level": self.evidence_level}
        if self.calls_out:
            out.update(url=self.url, model=self.model, timeout_seconds=self.timeout_seconds)
            out["max_attempts"] = self.max_attempts
            out.update({f"config.{k}": v for k, v in sorted(self.config.items())})
        return out

    def differences(self, other: CallSettings) -> list[dict[str, str]]:
        """The run's settings that differ between ``self`` (before) and ``other`` (after):
        ``[{"field", "before", "after"}]`` with values shortened for display ("" when unset).
        Secrets and header values are not settings of the run: never compared."""
        mine, theirs = self._flat(), other._flat()
        return [
            {"field": key, "before": _shown(key, mine.get(key)), "after": _shown(key, theirs.get(key))}
            for key in [*mine, *(k for k in theirs if k not in mine)]
            if mine.get(key) != theirs.get(key) and not (key != "kind" and (self.unknown or other.unknown))
        ]

    def summary(self) -> list[tuple[str, str]]:
        """``(label, value)`` pairs of what the lane ran with, compact: the model and the
        endpoint's host always, the rest only when it differs from the defaults."""
        if self.unknown:
            return [("kind", self.kind), ("settings", "not recorded")]
        if not self.calls_out:
            pairs = [("kind", self.kind)]
            if self.evidence_level != DEFAULTS["evidence_level"]:
                pairs.append(("evidence", self.evidence_level))
            return pairs
        pairs = []
        if self.model:
            pairs.append(("model", self.model))
        if host := host_of(self.url):
            pairs.append(("host", host))
        pairs += [(key, short(value)) for key, value in sorted(self.config.items())]
        if self.timeout_seconds != DEFAULTS["timeout_seconds"]:
            pairs.append(("timeout", f"{self.timeout_seconds:g} s"))
        if self.max_attempts != DEFAULTS["max_attempts"]:
            pairs.append(("attempts", str(self.max_attempts)))
        if self.evidence_level != DEFAULTS["evidence_level"]:
            pairs.append(("evidence", self.evidence_level))
        return pairs


def short(value: Any) -> str:
    """A value for display on one line, at most ``SHORT`` characters."""
    if value is None:
        return ""
    if isinstance(value, str):
        text = value
    else:
        import json

        text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    text = " ".join(text.split())
    return text if len(text) <= SHORT else text[: SHORT - 1] + "…"


# Query parameters whose value is shown elided: their names say they carry a credential
# (Azure Functions' ``code``, ``api_key``, ``access_token``, a signed URL's ``sig``, ...).
_CREDENTIAL_PARAM = re.compile(r"key|token|secret|passw|auth|sig|code|credential|session", re.IGNORECASE)


def host_of(url: str) -> str:
    """The URL's host and port, never its ``user:password@``."""
    try:
        return urlsplit(url).netloc.rpartition("@")[2]
    except ValueError:
        return ""


def _origin(url: str) -> tuple[str, str, int | None]:
    """Scheme, host and port (the scheme's default when none is written)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return ("", url, None)
    scheme = parts.scheme.lower()
    return (scheme, (parts.hostname or "").lower(), port or {"http": 80, "https": 443}.get(scheme))


def is_credential_name(name: str) -> bool:
    """Whether a query parameter or header is named like a credential (``code``,
    ``X-Api-Key``, ``X-Auth-Token``): pages elide its value, attempts redact it."""
    return bool(_CREDENTIAL_PARAM.search(name))


def elided_headers(headers: Mapping[str, Any]) -> dict[str, Any]:
    """The headers with the values of those named like credentials (``X-Api-Key``,
    ``X-Auth-Token``) elided (``…``), as :func:`shown_url` elides query keys."""
    return {name: "…" if is_credential_name(str(name)) else value for name, value in headers.items()}


def shown_headers(headers: Mapping[str, Any]) -> str:
    """Extra headers for a page, one ``Name: value`` a line (:func:`elided_headers`)."""
    return "\n".join(f"{name}: {value}" for name, value in elided_headers(headers).items())


def shown_url(url: str) -> str:
    """The URL for a page: without its ``user:password@`` and with the values of its query
    parameters named like credentials elided (``?api-version=1&code=…``). Deployment URLs
    with credentials are refused (runs.services.deployments), but a row may predate that."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return ""
    query = "&".join(
        f"{name}=…" if sep and is_credential_name(unquote_plus(name)) else f"{name}{sep}{value}"
        for name, sep, value in (pair.partition("=") for pair in parts.query.split("&"))
    )
    return urlunsplit((parts.scheme, host_of(url), parts.path, query, ""))


def _shown(key: str, value: Any) -> str:
    return short(shown_url(value) if key == "url" and isinstance(value, str) else value)


def lane_records(lanes: list[RunLane]) -> list[dict[str, Any]]:
    """Per lane, for the run page: what it recorded (``summary``) and how its deployment
    differs now (``changes``). Read the lanes with their deployments (``select_related``)."""
    out = []
    for lane in lanes:
        recorded = CallSettings.of_lane(lane)
        out.append(
            {
                "lane": lane,
                "settings": recorded,
                "summary": recorded.summary(),
                "changes": recorded.differences(CallSettings.of_deployment(lane.deployment)),
            }
        )
    return out
