"""The executor interface: one attempt of one case against one deployment.

``await executor.execute(request, *, client) -> AttemptOutcome``. The request carries
everything the call needs (no ORM access inside executors, so they run in any event
loop and in tests without a database); the outcome carries the attempt category of
spec/agent-protocol.md "Outcomes", what to store about the attempt, and on success the
``Evidence`` the grading engine reads. Cancellation is the caller's business: a cancelled
task raises ``CancelledError`` out of ``execute``; the caller records
``AttemptOutcome.cancelled()``.
"""

from __future__ import annotations

import json
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, Any

import orjson

from agentclash_site.lib.outbound import (
    BlockedAddress,
    ConnectionFailed,
    HostNotFound,
    InvalidURL,
    OutboundClient,
    OutboundError,
    OutboundResponse,
    RedirectChangesMethod,
    ResponseTooLarge,
    Timeout,
    TooManyRedirects,
    UndecodableBody,
)
from agentclash_site.lib.signing import SIGNATURE_HEADER, signature_headers
from grading.engine import jsontext
from grading.engine.types import Evidence, Timing
from runs.deployment_config import HEADER_VALUE_UNSAFE
from runs.lane_settings import is_credential_name
from runs.retry import parse_retry_after

if TYPE_CHECKING:
    from runs.deployment_config import DeploymentConfig
    from runs.models import Deployment

EXCERPT_BYTES = 2048
# An attempt's error is one sentence, but it may quote the reply (a protocol error names the
# offending key): past this many characters it is cut, and ends with CUT_MARK.
MAX_ERROR_CHARS = 500
CUT_MARK = " […]"
PROTOCOL_VERSION = "1"


class AttemptCategory(StrEnum):
    OK = "ok"
    INFRA_ERROR = "infra_error"
    CONFIG_ERROR = "config_error"
    CANCELLED = "cancelled"


class NotExecutable(Exception):
    """The deployment kind has nothing to call (trace_import: results are uploaded)."""


# --- the request -----------------------------------------------------------------------------

NO_VALUE: Any = type("NoValue", (), {"__repr__": lambda self: "NO_VALUE", "__bool__": lambda self: False})()


@dataclass(frozen=True, slots=True)
class ChallengeInfo:
    key: str
    title: str = ""
    category: str = ""
    difficulty: str = ""
    instructions: str = ""  # rendered: placeholders filled from the case

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "title": self.title,
            "category": self.category,
            "difficulty": self.difficulty,
            "instructions": self.instructions,
        }


@dataclass(frozen=True, slots=True)
class CaseInputInfo:
    key: str
    kind: str = ""
    value: Any = NO_VALUE  # NO_VALUE when the input declares none (artifact_key or path instead)
    artifact_key: str | None = None
    path: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"key": self.key, "kind": self.kind}
        if self.value is not NO_VALUE:
            out["value"] = self.value
        if self.artifact_key is not None:
            out["artifact_key"] = self.artifact_key
        if self.path is not None:
            out["path"] = self.path
        return out


@dataclass(frozen=True, slots=True)
class AssetLink:
    key: str
    path: str
    media_type: str = ""
    url: str = ""  # a signed, expiring download URL (agentclash_site.lib.signing)

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "path": self.path, "media_type": self.media_type, "url": self.url}


@dataclass(frozen=True, slots=True)
class CaseInfo:
    """What the agent may see of a case. There is deliberately no expectations field:
    expectations are never sent to the agent (spec/agent-protocol.md)."""

    key: str
    payload: Mapping[str, Any] = field(default_factory=dict)
    inputs: tuple[CaseInputInfo, ...] = ()
    assets: tuple[AssetLink, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "payload": dict(self.payload),
            "inputs": [i.to_json() for i in self.inputs],
            "assets": [a.to_json() for a in self.assets],
        }


@dataclass(frozen=True, slots=True)
class DeploymentTarget:
    """The deployment settings an executor needs, with the secrets decrypted.

    ``secret`` and ``signing_key`` are left out of ``repr`` so a logged request never
    carries them.
    """

    kind: str
    url: str = ""  # endpoint_url (hosted_http) or base_url (openai_chat)
    model: str = ""
    secret: str | None = field(default=None, repr=False)
    signing_key: str | None = field(default=None, repr=False)
    timeout_seconds: float = 120.0
    evidence_level: str = "structured"
    config: DeploymentConfig | None = None
    allow_private: bool = False
    name: str = ""
    max_attempts: int = 3
    # Why no call is made (each attempt a config_error ``endpoint_moved``): the run's
    # endpoint is not the deployment's any more, and its live credentials are not sent there
    # (runs.lane_settings.CallSettings.target). "" to call.
    withheld: str = ""

    @classmethod
    def from_deployment(
        cls, deployment: Deployment, *, allow_private: bool | None = None
    ) -> DeploymentTarget:
        """Build from a Deployment row; ``allow_private`` defaults to its workspace's flag."""
        if allow_private is None:
            allow_private = deployment.workspace.allow_private_endpoints
        return cls(
            kind=deployment.kind,
            url=deployment.url,
            model=deployment.model,
            secret=deployment.get_secret(),
            signing_key=deployment.get_signing_key(),
            timeout_seconds=deployment.timeout_seconds,
            evidence_level=deployment.evidence_level,
            config=deployment.typed_config,
            allow_private=allow_private,
            name=deployment.name,
            max_attempts=deployment.max_attempts,
        )

    def auth_headers(self) -> dict[str, str]:
        if not self.secret:
            return {}
        header = self.config.secret_header if self.config else None
        if header and header.lower() != "authorization":
            return {header: self.secret}
        return {"Authorization": f"Bearer {self.secret}"}

    def sensitive_headers(self) -> tuple[str, ...]:
        """What a redirect to another origin must not carry, besides Authorization and
        cookies (the outbound client drops those itself): the secret's own header, every
        configured extra header (an ``x-api-key`` is as much a credential as the secret) and
        the request's signature (a third party could replay the signed body to the agent)."""
        names = [SIGNATURE_HEADER, *(self.config.extra_headers if self.config else ())]
        header = self.config.secret_header if self.config else None
        if header:
            names.append(header)
        return tuple(names)

    def extra_headers(self) -> dict[str, str]:
        return dict(self.config.extra_headers) if self.config else {}

    def header_problem(self) -> str:
        """Why the secret or an extra header cannot go out in an HTTP header ("" when they
        can): the HTTP layer refuses a value with a control character other than tab (saving a
        deployment refuses them too, but one saved before it did may hold one). Names the header, never its value."""
        if self.secret and HEADER_VALUE_UNSAFE.search(self.secret):
            what = "the deployment's secret"
        else:
            bad = [k for k, v in self.extra_headers().items() if HEADER_VALUE_UNSAFE.search(v)]
            if not bad:
                return ""
            what = f"the value of extra header {bad[0]}"
        return f"{what} contains a control character, which an HTTP header cannot carry: edit the deployment"


@dataclass(frozen=True, slots=True)
class ExecutionRequest:
    run_id: str
    item_id: str
    attempt: int  # 1-based; every attempt counts
    deadline: datetime  # aware; the item's deadline, no attempt runs past it
    challenge: ChallengeInfo
    case: CaseInfo
    deployment: DeploymentTarget
    tool_policy: Mapping[str, Any] = field(default_factory=dict)
    execution_mode: str = "native"
    working_directory: str = "/workspace"
    # The case's case_timeout_seconds, which overrides the deployment's timeout; None: none.
    timeout_seconds: float | None = None

    @property
    def attempt_timeout(self) -> float:
        """Seconds one attempt may take: the case's override, else the deployment's."""
        return float(self.timeout_seconds or self.deployment.timeout_seconds)

    def attempt_deadline(self, started_at: datetime) -> datetime:
        """When an attempt that started at ``started_at`` is given up: its timeout, or the
        item's deadline when that comes first."""
        return min(self.deadline, started_at + timedelta(seconds=self.attempt_timeout))

    def protocol_body(self, *, deadline: datetime | None = None) -> dict[str, Any]:
        """The hosted_http request document of spec/agent-protocol.md, exactly.

        ``deadline_at`` is ``deadline``, the attempt's (:meth:`attempt_deadline`): the agent
        is told when its answer stops being awaited, not the end of the item's retries."""
        return {
            "protocol_version": PROTOCOL_VERSION,
            "run_id": str(self.run_id),
            "item_id": str(self.item_id),
            "attempt": self.attempt,
            "deadline_at": iso_z(deadline or self.deadline),
            "challenge": self.challenge.to_json(),
            "case": self.case.to_json(),
            "tool_policy": dict(self.tool_policy),
        }


def iso_z(moment: datetime) -> str:
    if moment.tzinfo is None:
        raise ValueError("datetimes sent to agents must be timezone-aware")
    return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


# --- the outcome -------------------------------------------------------------------------------


@dataclass(slots=True)
class AttemptOutcome:
    category: AttemptCategory
    status_code: int | None = None
    latency_ms: float | None = None
    body_excerpt: str = ""  # at most EXCERPT_BYTES of the body, decoded leniently
    error: str = ""  # one readable sentence; "" when ok
    error_code: str = ""  # stable snake_case: timeout, http_status, invalid_json, ...
    retry_after: float | None = None  # seconds, from Retry-After (delta or HTTP-date)
    # The JSON body as received; for an ok openai_chat attempt, the reply in the agent
    # protocol's response shape (what the evidence document records).
    response: dict[str, Any] | None = None
    evidence: Evidence | None = None  # set when category is ok
    started_at: datetime | None = None
    ended_at: datetime | None = None

    @property
    def ok(self) -> bool:
        return self.category is AttemptCategory.OK

    @property
    def retryable(self) -> bool:
        """Only infra errors are retried automatically (spec/agent-protocol.md "Outcomes")."""
        return self.category is AttemptCategory.INFRA_ERROR

    @classmethod
    def cancelled(cls, message: str = "the run was cancelled") -> AttemptOutcome:
        now = datetime.now(UTC)
        return cls(
            AttemptCategory.CANCELLED, error=message, error_code="cancelled", started_at=now, ended_at=now
        )

    def summary(self) -> dict[str, Any]:
        """What an attempt row stores (no evidence, no raw response)."""
        return {
            "category": str(self.category),
            "status_code": self.status_code,
            "latency_ms": self.latency_ms,
            "body_excerpt": self.body_excerpt,
            "error": self.error,
            "error_code": self.error_code,
            "retry_after": self.retry_after,
            "started_at": self.started_at.isoformat() if self.started_at else None,
            "ended_at": self.ended_at.isoformat() if self.ended_at else None,
        }


def excerpt(body: bytes) -> str:
    return body[:EXCERPT_BYTES].decode("utf-8", errors="replace")


def bounded_error(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    """``text`` cut to ``limit`` characters (``CUT_MARK`` included) when longer."""
    if len(text) <= limit:
        return text
    return text[: limit - len(CUT_MARK)] + CUT_MARK


REDACTED = "[redacted]"


def without_secrets(outcome: AttemptOutcome, target: DeploymentTarget) -> AttemptOutcome:
    """``outcome`` with the deployment's secret, signing key and the values of its extra
    headers named like credentials (``X-Api-Key``) cut out of its body excerpt and error: an
    agent (or a proxy's error page) that echoes the request's headers would otherwise put
    them on the case and deployment pages, in front of every member."""
    keys = [value for name, value in target.extra_headers().items() if is_credential_name(name)]
    secrets = [s for s in (target.secret, target.signing_key, *keys) if s and len(s) >= 4]
    if not secrets:
        return outcome
    changes: dict[str, str] = {}
    for name in ("body_excerpt", "error"):
        text = original = getattr(outcome, name)
        for secret in secrets:
            text = _cut_secret_redacted(text.replace(secret, REDACTED), secret)
        if text != original:
            changes[name] = text
    return replace(outcome, **changes) if changes else outcome


def _cut_secret_redacted(text: str, secret: str) -> str:
    """``text`` with a trailing start of ``secret`` (4 characters or more) redacted: both
    texts are cut (the excerpt at ``EXCERPT_BYTES``, a quoted error message at its limit, an
    error at ``MAX_ERROR_CHARS`` before its ``CUT_MARK``), and a secret echoed across the cut
    was otherwise stored up to it."""
    if text.endswith(CUT_MARK):
        return _cut_secret_redacted(text[: -len(CUT_MARK)], secret) + CUT_MARK
    head = secret[:4]
    at = text.find(head, max(0, len(text) - len(secret) + 1))
    while at != -1:
        if secret.startswith(text[at:]):
            return text[:at] + REDACTED
        at = text.find(head, at + 1)
    return text


# --- shared HTTP attempt plumbing -----------------------------------------------------------

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


class AttemptTimer:
    """Wall-clock start and end for Evidence.timing, monotonic duration for latency."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.started_at = clock()
        self.ended_at = self.started_at
        self._t0 = time.perf_counter()
        self.duration = 0.0

    def stop(self) -> None:
        self.duration = time.perf_counter() - self._t0
        self.ended_at = self.clock()

    @property
    def latency_ms(self) -> float:
        return round(self.duration * 1000.0, 3)

    def timing(self) -> Timing:
        return Timing(
            started_at=iso_z(self.started_at),
            ended_at=iso_z(self.ended_at),
            executor_duration_seconds=self.duration,
        )


_CONFIG_ERRORS: tuple[type[OutboundError], ...] = (
    BlockedAddress,
    HostNotFound,
    InvalidURL,
    RedirectChangesMethod,
    TooManyRedirects,
    ResponseTooLarge,
    UndecodableBody,
)
_INFRA_ERRORS: tuple[type[OutboundError], ...] = (Timeout, ConnectionFailed)


class Executor(ABC):
    """One deployment kind's adapter. Stateless; one instance serves concurrent calls."""

    kind: str = ""

    def __init__(self, *, clock: Clock = utc_now) -> None:
        self.clock = clock

    @abstractmethod
    async def execute(self, request: ExecutionRequest, *, client: OutboundClient) -> AttemptOutcome:
        """Run one attempt. Never raises for agent or network failures: they are outcomes."""

    # -- helpers for HTTP executors --

    def outcome(
        self, category: AttemptCategory, timer: AttemptTimer, *, body: bytes = b"", **fields: Any
    ) -> AttemptOutcome:
        if "error" in fields:
            fields["error"] = bounded_error(fields["error"])
        return AttemptOutcome(
            category,
            latency_ms=timer.latency_ms,
            body_excerpt=excerpt(body),
            started_at=timer.started_at,
            ended_at=timer.ended_at,
            **fields,
        )

    async def post(
        self,
        request: ExecutionRequest,
        *,
        client: OutboundClient,
        url: str,
        payload: dict[str, Any],
        timer: AttemptTimer,
    ) -> tuple[OutboundResponse | None, AttemptOutcome | None]:
        """POST ``payload`` as signed JSON; returns the 2xx response, or the failed outcome."""
        target = request.deployment
        if target.withheld:
            timer.stop()
            return None, self.outcome(
                AttemptCategory.CONFIG_ERROR, timer, error=target.withheld, error_code="endpoint_moved"
            )
        problem = target.header_problem()
        if problem:
            timer.stop()
            return None, self.outcome(
                AttemptCategory.CONFIG_ERROR, timer, error=problem, error_code="invalid_header"
            )
        remaining = (request.attempt_deadline(timer.started_at) - timer.started_at).total_seconds()
        if remaining <= 0:
            timer.stop()
            return None, self.outcome(
                AttemptCategory.INFRA_ERROR,
                timer,
                error="the item's deadline passed before the attempt started",
                error_code="deadline_passed",
            )
        body = _json_body(payload)
        headers = {
            **target.extra_headers(),
            "Content-Type": "application/json",
            "Accept": "application/json",
            **target.auth_headers(),
            **signature_headers(body, target.signing_key),
        }
        try:
            response = await client.request(
                "POST",
                url,
                body=body,
                headers=headers,
                timeout=remaining,
                allow_private=target.allow_private,
                sensitive_headers=target.sensitive_headers(),
            )
        except OutboundError as exc:
            timer.stop()
            category = (
                AttemptCategory.CONFIG_ERROR
                if isinstance(exc, _CONFIG_ERRORS)
                else AttemptCategory.INFRA_ERROR
            )
            # A failure after the status line (a body too large, cut off, too slow) keeps the
            # status and the start of the body, as every attempt's record does.
            return None, self.outcome(
                category, timer, error=exc.message, error_code=exc.code, status_code=exc.status, body=exc.body
            )
        timer.stop()
        return response, self.status_failure(response, timer)

    def status_failure(self, response: OutboundResponse, timer: AttemptTimer) -> AttemptOutcome | None:
        """The outcome for a non-2xx status, or None for 2xx."""
        status = response.status
        if 200 <= status < 300:
            return None
        retry_after = parse_retry_after(response.headers.get("Retry-After"), now=timer.ended_at)
        common = {"status_code": status, "retry_after": retry_after, "body": response.body}
        if status == 429:
            return self.outcome(
                AttemptCategory.INFRA_ERROR,
                timer,
                error="the agent is rate limiting (HTTP 429)",
                error_code="rate_limited",
                **common,
            )
        if status == 408:  # the server gave up waiting for the request: a timeout
            return self.outcome(
                AttemptCategory.INFRA_ERROR,
                timer,
                error="the agent's server timed out waiting for the request (HTTP 408)",
                error_code="request_timeout",
                **common,
            )
        if status >= 500:
            return self.outcome(
                AttemptCategory.INFRA_ERROR,
                timer,
                error=f"the agent failed with HTTP {status}",
                error_code="server_error",
                **common,
            )
        hint = {
            401: ": check the deployment's secret",
            403: ": check the deployment's secret",
            404: ": check the URL",
        }.get(status, "")
        return self.outcome(
            AttemptCategory.CONFIG_ERROR,
            timer,
            error=f"the agent answered HTTP {status}{hint}",
            error_code="http_status",
            **common,
        )

    def parse_json_object(
        self, response: OutboundResponse, timer: AttemptTimer
    ) -> tuple[dict[str, Any] | None, AttemptOutcome | None]:
        try:
            # Decoded here: ``json.loads`` of bytes guesses UTF-16 and UTF-32 too, and JSON
            # between systems is UTF-8 (RFC 8259 §8.1; a byte order mark may be ignored).
            data = jsontext.loads(response.body.decode("utf-8-sig"))
        except (ValueError, UnicodeDecodeError) as exc:
            return None, self.outcome(
                AttemptCategory.CONFIG_ERROR,
                timer,
                status_code=response.status,
                body=response.body,
                error=_not_json(response, exc),
                error_code="invalid_json",
            )
        if not isinstance(data, dict):
            return None, self.outcome(
                AttemptCategory.CONFIG_ERROR,
                timer,
                status_code=response.status,
                body=response.body,
                error="the response body is not a JSON object",
                error_code="not_protocol",
            )
        return data, None


def _not_json(response: OutboundResponse, exc: Exception) -> str:
    """Why a body could not be read as JSON, in the words the case page shows."""
    if isinstance(exc, jsontext.JSONTooDeep):
        return "the response body's JSON is nested too deeply to read"
    if not response.body.strip():
        return f"the response body is empty (HTTP {response.status}): a JSON object is required"
    if isinstance(exc, UnicodeDecodeError) or b"\x00" in response.body[:4]:
        # A NUL among the first bytes of JSON text: UTF-16 or UTF-32 (RFC 4627 §3).
        return "the response body is not UTF-8 text, as JSON must be"
    if response.content_type and "json" not in response.content_type:
        return f"the response body is not JSON (Content-Type {response.content_type})"
    return "the response body is not JSON"


def _json_body(payload: Any) -> bytes:
    """Compact UTF-8 JSON: orjson, or ``json`` for what orjson refuses (integers beyond 64
    bits, non-string keys). NaN and infinities, which are not JSON, go out as null."""
    try:
        return orjson.dumps(payload)
    except TypeError:  # orjson.JSONEncodeError
        return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()
