"""Judge provider clients (grading.md §6.5): OpenAI-compatible Chat Completions and
Anthropic Messages, over the shared outbound client (address guard, body cap).

No Django import: the offline ``grade`` command uses these clients without a database.
Every call goes through :func:`complete`, which retries timeouts (a 408 among them),
connection errors, 429 and 5xx up to ``max_retries`` times (exponential backoff, 1 s base,
factor 2, full jitter, 60 s cap, at least ``Retry-After``; ``runs.retry.parse_retry_after``
reads it; a Retry-After beyond the cap is not waited and ends the call's retries) and
raises :class:`ProviderError` with the outcome class the judge result must carry:
401/403 and exhausted retries are ``infra_error``, any other 4xx is ``evaluator_error``.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from agentclash_site.lib.outbound import OutboundClient, OutboundError, url_path_endswith, url_with_path
from grading.engine.evidence import MAX_TOKEN_COUNT
from runs.retry import failed_generation, failed_generation_status, parse_retry_after, transient_error_in_body

PROVIDER_KINDS = ("openai", "anthropic")
ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_BASE_URLS = {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com"}
BACKOFF_BASE_SECONDS = 1.0
BACKOFF_CAP_SECONDS = 60.0
MAX_RESPONSE_BYTES = 2 * 1024 * 1024
DEFAULT_MAX_OUTPUT_TOKENS = 1024
# The Anthropic tool whose input is the verdict: its input schema forces a JSON object.
VERDICT_TOOL = "record_verdict"
# Retried like a 5xx: 408 is a timeout (a proxy or server that gave up waiting for the
# request), 429 a rate limit.
RETRIED_4XX = frozenset({408, 429})


@dataclass(slots=True)
class ProviderConfig:
    """Where and how to call one provider. ``api_key`` is plain text in memory only."""

    kind: str  # openai | anthropic
    base_url: str = ""
    api_key: str = ""
    model: str = ""  # default model when a judge declares none
    allow_private: bool = False  # the workspace's allow_private_endpoints; the CLI passes True
    backoff_base_seconds: float = BACKOFF_BASE_SECONDS
    backoff_cap_seconds: float = BACKOFF_CAP_SECONDS
    json_mode: bool = True  # OpenAI response_format json_object
    # Where a user changes these settings, named in the errors that call for a fix (a wrong
    # key, an unknown model): the workspace's Judge provider page, or the grade command's flags.
    settings_where: str = "the judge provider settings"

    def __post_init__(self) -> None:
        if self.kind not in PROVIDER_KINDS:
            raise ValueError(
                f"judge provider kind must be one of {', '.join(PROVIDER_KINDS)} (got {self.kind!r})"
            )
        self.base_url = (self.base_url or DEFAULT_BASE_URLS[self.kind]).rstrip("/")

    def __repr__(self) -> str:  # never print the key
        return f"ProviderConfig(kind={self.kind!r}, base_url={self.base_url!r}, model={self.model!r})"


@dataclass(slots=True)
class ChatResult:
    text: str
    model: str
    input_tokens: int = 0
    output_tokens: int = 0
    latency_ms: float = 0.0
    retries: int = 0
    usage_reported: bool = True  # False: the provider reported no (usable) token counts
    # Why this completion, though served and billed, carries no verdict to parse (a refusal,
    # a tool call, no content, an answer cut at the output token limit): an invalid answer.
    problem: str | None = None


@dataclass
class ProviderError(Exception):
    """A call that produced no usable completion. ``outcome_class`` is ``infra_error`` or
    ``evaluator_error`` (grading.md §6.5); ``reason_code`` refines it."""

    message: str
    outcome_class: str = "infra_error"
    reason_code: str = "judge_provider_error"
    status: int | None = None
    retries: int = 0
    latency_ms: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        return self.message


def endpoint(config: ProviderConfig) -> str:
    """``{base_url}/chat/completions`` or ``{base_url}/v1/messages`` (``/messages`` after a
    base path ending ``/v1``), the path appended before the base URL's query (Azure OpenAI's
    ``?api-version=``), as the openai_chat executor does."""
    if config.kind == "anthropic":
        versioned = url_path_endswith(config.base_url, "/v1")
        return url_with_path(config.base_url, "/messages" if versioned else "/v1/messages")
    return url_with_path(config.base_url, "/chat/completions")


def build_request(
    config: ProviderConfig,
    *,
    model: str,
    system: str,
    user: str,
    max_tokens: int,
    schema: dict[str, Any] | None,
) -> tuple[dict[str, str], dict[str, Any]]:
    """Headers and JSON body of one call."""
    if config.kind == "anthropic":
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        if config.api_key:
            headers["x-api-key"] = config.api_key
        body: dict[str, Any] = {
            "model": model,
            "max_tokens": max_tokens,
            "system": system,
            "messages": [{"role": "user", "content": user}],
            "temperature": 1.0,
        }
        if schema is not None:
            body["tools"] = [
                {"name": VERDICT_TOOL, "description": "Record the verdict as JSON.", "input_schema": schema}
            ]
            body["tool_choice"] = {"type": "tool", "name": VERDICT_TOOL}
        return headers, body
    headers = {"Authorization": f"Bearer {config.api_key}"} if config.api_key else {}
    body = {
        "model": model,
        "max_tokens": max_tokens,
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
    }
    if config.json_mode:
        body["response_format"] = {"type": "json_object"}
    return headers, body


def _count(value: Any) -> int | None:
    """A token count from a provider's usage: a whole number up to the bound the engine puts
    on an agent's reported counts, else None (a larger one would overflow the run's 64-bit
    spend columns once summed)."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_TOKEN_COUNT:
        return value
    return None


def _usage(result: ChatResult, usage: dict[str, Any], input_key: str, output_key: str) -> ChatResult:
    tokens_in, tokens_out = _count(usage.get(input_key)), _count(usage.get(output_key))
    result.input_tokens, result.output_tokens = tokens_in or 0, tokens_out or 0
    result.usage_reported = tokens_in is not None and tokens_out is not None
    return result


def parse_completion(config: ProviderConfig, data: Any, model: str) -> ChatResult:
    """The text of a 200 response (for Anthropic tool use: the tool input as JSON text).
    Raises ProviderError (evaluator_error) when the shape is not the provider's."""
    if not isinstance(data, dict):
        raise ProviderError(
            "provider answered a non-object JSON body", "evaluator_error", "judge_bad_response"
        )
    raw_usage = data.get("usage")
    usage: dict[str, Any] = raw_usage if isinstance(raw_usage, dict) else {}
    if config.kind == "anthropic":
        blocks = data.get("content")
        if not isinstance(blocks, list):
            raise ProviderError(
                "Anthropic response has no content list", "evaluator_error", "judge_bad_response"
            )
        text = None
        for block in blocks:
            if (
                isinstance(block, dict)
                and block.get("type") == "tool_use"
                and block.get("name") == VERDICT_TOOL
            ):
                text = json.dumps(block.get("input"))
                break
        if text is None:
            text = "".join(
                str(b.get("text", "")) for b in blocks if isinstance(b, dict) and b.get("type") == "text"
            )
        result = ChatResult(text=text, model=_reported_model(data, model))
        stop = data.get("stop_reason")
        if stop == "refusal":
            result.problem = f"the judge model refused to answer{_quoted(text)}"
        elif stop == "max_tokens":
            result.problem = _CUT
        return _usage(result, usage, "input_tokens", "output_tokens")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ProviderError("chat completion has no choices", "evaluator_error", "judge_bad_response")
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise ProviderError("chat completion has no message", "evaluator_error", "judge_bad_response")
    content = message.get("content")
    if isinstance(content, list):  # typed parts (Mistral's reasoning models, some gateways): the text ones
        content = "".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)
        )
    result = ChatResult(text=content if isinstance(content, str) else "", model=_reported_model(data, model))
    finish = choices[0].get("finish_reason")
    refusal = message.get("refusal")
    if isinstance(refusal, str) and refusal.strip():
        result.problem = f"the judge model refused to answer{_quoted(refusal)}"
    elif message.get("tool_calls") or message.get("function_call"):
        result.problem = "the judge model answered with a tool call instead of one JSON object"
    elif finish == "length":
        result.problem = _CUT
    elif finish == "content_filter":
        result.problem = (
            "the provider's content filter stopped the judge's answer (finish_reason content_filter)"
        )
    elif not isinstance(content, str) or not content.strip():
        result.problem = f"the judge model answered with no content (finish_reason {finish!r})"
    return _usage(result, usage, "prompt_tokens", "completion_tokens")


_CUT = "the judge's answer was cut at the output token limit (max_tokens), so it is not a complete verdict"


def _kind_hint(config: ProviderConfig, model: str) -> str:
    """Why a model may be unknown to this provider: it belongs to the other kind's API."""
    anthropic = model.startswith("claude-")
    if anthropic and config.kind == "openai":
        return (
            f"; {model!r} is an Anthropic model and this judge provider is OpenAI-compatible: "
            "use a judge provider of kind anthropic, or an OpenAI-compatible model"
        )
    if not anthropic and config.kind == "anthropic":
        return (
            f"; this judge provider is of kind anthropic, whose API serves only claude- models: "
            f"for {model!r} use a judge provider of kind openai"
        )
    return ""


def _quoted(text: str) -> str:
    text = " ".join(str(text or "").split())
    return f": {text[:200]!r}" if text else ""


def _reported_model(data: dict[str, Any], asked: str) -> str:
    """The model the provider says answered, when it names one as a string (a ``{"name": ...}``
    object was recorded as its Python repr), else the one asked for."""
    reported = data.get("model")
    return reported if isinstance(reported, str) and reported else asked


def backoff_delay(
    attempt: int, *, retry_after: float | None, rng: random.Random, config: ProviderConfig
) -> float:
    """Full jitter over base × 2^(attempt−1), capped; at least Retry-After (never cut: a
    Retry-After beyond the cap ends the call's retries in :func:`complete` instead)."""
    ceiling = min(config.backoff_cap_seconds, config.backoff_base_seconds * 2 ** min(attempt - 1, 16))
    delay = rng.uniform(0.0, ceiling)
    if retry_after is not None and retry_after > delay:
        delay = float(retry_after)
    return delay


Sleep = Callable[[float], Awaitable[None]]


def _without_key(text: str, config: ProviderConfig) -> str:
    """``text`` (a provider's error, kept in the grade and shown to every member) with the API
    key cut out: a provider or proxy that echoes the request's headers would show it."""
    key = config.api_key
    return text.replace(key, "[redacted]") if key and len(key) >= 4 else text


async def complete(
    client: OutboundClient,
    config: ProviderConfig,
    *,
    model: str,
    system: str,
    user: str,
    max_tokens: int = DEFAULT_MAX_OUTPUT_TOKENS,
    schema: dict[str, Any] | None = None,
    timeout: float = 60.0,
    max_retries: int = 3,
    rng: random.Random | None = None,
    sleep: Sleep = asyncio.sleep,
) -> ChatResult:
    """One completion with retries. Raises :class:`ProviderError`."""
    rng = rng or random.Random()
    headers, body = build_request(
        config, model=model, system=system, user=user, max_tokens=max_tokens, schema=schema
    )
    url = endpoint(config)
    started = time.perf_counter()
    attempt = 0
    while True:
        attempt += 1
        retry_after: float | None = None
        try:
            response = await client.request(
                "POST",
                url,
                json_body=body,
                headers=headers,
                timeout=timeout,
                allow_private=config.allow_private,
                max_body_bytes=MAX_RESPONSE_BYTES,
                sensitive_headers=("x-api-key",),
            )
        except OutboundError as exc:
            if exc.code in ("blocked_address", "invalid_url", "host_not_found"):
                raise ProviderError(
                    f"judge provider URL refused: {exc.message}",
                    "infra_error",
                    "judge_provider_error",
                    retries=attempt - 1,
                ) from exc
            failure = _without_key(f"{exc.code}: {exc.message}", config)
            status = None
        else:
            status = response.status
            if response.ok:
                try:
                    data = response.json()
                except ValueError as exc:
                    raise ProviderError(
                        "provider answered 200 with a body that is not JSON",
                        "evaluator_error",
                        "judge_bad_response",
                        status=status,
                        retries=attempt - 1,
                    ) from exc
                passing = transient_error_in_body(data) if config.kind != "anthropic" else None
                failed = (
                    failed_generation(data) if config.kind != "anthropic" and isinstance(data, dict) else None
                )
                if passing is None and failed is not None:
                    # A gateway's 200 for a generation that failed upstream (finish_reason
                    # "error"): its partial text is no verdict. Retried as a 5xx, unless its
                    # error states a 4xx that will not pass.
                    how, stated, said = failed_generation_status(failed)
                    if how == "rejected":
                        detail = _without_key(f"HTTP 200 with an error {stated}: {said}", config)[:300]
                        raise ProviderError(
                            f"judge provider rejected the request ({detail})",
                            "evaluator_error",
                            "judge_request_rejected",
                            status=stated,
                            retries=attempt - 1,
                        )
                    passing = (stated, said or "the generation failed")
                if passing is None:
                    result = parse_completion(config, data, model)
                    result.retries = attempt - 1
                    result.latency_ms = (time.perf_counter() - started) * 1000.0
                    return result
                # A gateway's "200 carrying a 429 / 5xx": retried as that status would be.
                status = passing[0]
                failure = _without_key(f"HTTP 200 with an error {status}: {passing[1]}", config)[:300]
                retry_after = parse_retry_after(response.headers.get("Retry-After"), now=datetime.now(UTC))
            else:
                # cut after the key is cut out: a key echoed across the cut would be kept in part
                snippet = _without_key(response.text(), config)[:300]
                failure = f"HTTP {status}: {snippet}"
                if status in (401, 403):
                    raise ProviderError(
                        f"judge provider refused the credentials: fix the API key in "
                        f"{config.settings_where} ({failure})",
                        "infra_error",
                        "judge_provider_auth",
                        status=status,
                        retries=attempt - 1,
                    )
                if status == 400 and "response_format" in body and "response_format" in snippet:
                    # An OpenAI-compatible server without JSON mode: ask again without it (the
                    # prompt still demands one JSON object, and parsing stays strict).
                    body = {k: v for k, v in body.items() if k != "response_format"}
                    attempt -= 1
                    continue
                if (
                    config.kind == "openai"
                    and status == 400
                    and "max_tokens" in body
                    and "max_completion_tokens" in snippet
                ):
                    # OpenAI's reasoning models (o1, o3, o4, gpt-5) take the output cap only as
                    # max_completion_tokens: ask again with it.
                    body = {k: v for k, v in body.items() if k != "max_tokens"}
                    body["max_completion_tokens"] = max_tokens
                    attempt -= 1
                    continue
                if status == 404:
                    raise ProviderError(
                        f"judge provider has no model {model!r} at {_without_key(url, config)}: fix the "
                        "model name (the pack judge's model / models, or the default model in "
                        f"{config.settings_where}) or the base URL in {config.settings_where}"
                        f"{_kind_hint(config, model)} ({failure})",
                        "evaluator_error",
                        "judge_model_not_found",
                        status=status,
                        retries=attempt - 1,
                    )
                if status not in RETRIED_4XX and status < 500:
                    raise ProviderError(
                        f"judge provider rejected the request ({failure})",
                        "evaluator_error",
                        "judge_request_rejected",
                        status=status,
                        retries=attempt - 1,
                    )
                retry_after = parse_retry_after(response.headers.get("Retry-After"), now=datetime.now(UTC))
        given_up = None
        if attempt > max_retries:
            given_up = (
                f"judge provider failed after {attempt} attempt{'s' if attempt != 1 else ''}: {failure}"
            )
        elif retry_after is not None and retry_after > config.backoff_cap_seconds:
            # Never retried before the provider's Retry-After (§6.5), and never waited past
            # the backoff cap: a judge call holds a grading thread and its case.
            wait = "forever" if retry_after == float("inf") else f"{retry_after:.0f} s"
            given_up = (
                f"judge provider asked to wait {wait} before retrying (Retry-After), longer than "
                f"the {config.backoff_cap_seconds:.0f} s the judge client waits; not retried: {failure}"
            )
        if given_up is not None:
            raise ProviderError(
                given_up,
                "infra_error",
                "judge_provider_error",
                status=status,
                retries=attempt - 1,
                latency_ms=(time.perf_counter() - started) * 1000.0,
            )
        await sleep(backoff_delay(attempt, retry_after=retry_after, rng=rng, config=config))
