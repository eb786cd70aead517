"""``openai_chat``: one ``/chat/completions`` call with the rendered challenge as the prompt.

Request: ``{"model", "messages": [system?, user]}`` merged with the deployment's config
parameters (temperature, max_tokens, ..., ``extra_body``); config cannot override
``model`` or ``messages``. Reply: ``choices[0].message.content`` is the final output;
``tool_calls`` in the reply are recorded, never executed; ``usage`` fills the metrics;
the transcript is the request messages plus the reply. There is no files channel.
``finish_reason: "length"`` sets ``limit_hit`` (the model stopped on its token limit);
``finish_reason: "error"`` or an error on the choice (a gateway's 200 for a generation that
failed upstream) is an infra error, retried, not an answer.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

from agentclash_site.lib.outbound import OutboundClient, url_with_path
from grading.engine import jsontext
from runs.executors.base import AttemptCategory, AttemptOutcome, AttemptTimer, ExecutionRequest, Executor
from runs.executors.evidence import ProtocolError, build_evidence
from runs.retry import failed_generation, failed_generation_status, transient_error_in_body


def chat_completions_url(base_url: str) -> str:
    """``{base_url}/chat/completions``, the path appended before the base URL's query (Azure
    OpenAI's ``?api-version=``)."""
    return url_with_path(base_url, "/chat/completions")


def chat_messages(request: ExecutionRequest) -> list[dict[str, str]]:
    config = request.deployment.config
    messages: list[dict[str, str]] = []
    if config is not None and config.system_prompt:
        messages.append({"role": "system", "content": config.system_prompt})
    messages.append({"role": "user", "content": request.challenge.instructions})
    return messages


def chat_body(request: ExecutionRequest) -> dict[str, Any]:
    config = request.deployment.config
    params = config.chat_params() if config is not None else {}
    return {**params, "model": request.deployment.model, "messages": chat_messages(request)}


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: text, and a refusal part's text
        return "".join(
            p[key]
            for p in content
            if isinstance(p, dict)
            for key in ("text", "refusal")
            if isinstance(p.get(key), str)
        )
    return json.dumps(content, ensure_ascii=False)


def _refusal(message: dict[str, Any]) -> str:
    """The model's refusal (``message.refusal``, OpenAI's structured outputs), or ""."""
    refusal = message.get("refusal")
    return refusal if isinstance(refusal, str) else ""


def _tool_call(raw: Any) -> dict[str, Any] | str:
    """The call in the protocol's shape, or what is wrong with it."""
    if not isinstance(raw, dict):
        return "must be an object"
    function = raw.get("function") if isinstance(raw.get("function"), dict) else {}
    name = function.get("name", raw.get("name"))
    if not isinstance(name, str):
        return "has no function name"
    args: Any = function.get("arguments", raw.get("args", {}))
    if isinstance(args, str):
        # Unparseable arguments stay text: the engine records them as args_unparsed.
        with contextlib.suppress(ValueError):
            args = jsontext.loads(args) if args.strip() else {}
    call: dict[str, Any] = {"name": name, "args": args, "attributes": {"executed": False}}
    if isinstance(raw.get("id"), str):
        call["id"] = raw["id"]
    return call


def protocol_response(request: ExecutionRequest, reply: dict[str, Any]) -> dict[str, Any] | str:
    """The reply in the protocol response shape, or a message saying why it is not a chat reply."""
    choices = reply.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        if isinstance(reply.get("error"), dict | str):
            error = reply["error"]
            message = error.get("message", "") if isinstance(error, dict) else error
            return f"the model endpoint returned an error: {str(message)[:300]}"
        return "the reply has no choices: not a chat completion"
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, dict):
        return "choices[0].message is missing: not a chat completion"
    content = _content_text(message.get("content"))
    # A refusal comes with a null content: it is the model's answer, graded and shown as one
    # (it was lost, and the case graded against "" as if the model had said nothing).
    refused = not content and bool(_refusal(message))
    if refused:
        content = _refusal(message)
    raw_calls = message.get("tool_calls") or []
    if not isinstance(raw_calls, list):
        return "choices[0].message.tool_calls must be an array: not a chat completion"
    calls: list[dict[str, Any]] = []
    for k, raw in enumerate(raw_calls):
        call = _tool_call(raw)
        if isinstance(call, str):  # the model's calls are evidence: none is dropped unsaid
            return f"choices[0].message.tool_calls[{k}] {call}: not a chat completion"
        calls.append(call)
    usage = reply.get("usage") if isinstance(reply.get("usage"), dict) else {}
    # The model the endpoint says answered, when it names one (else the deployment's).
    reported = reply.get("model")
    model = reported if isinstance(reported, str) and reported else request.deployment.model
    metrics: dict[str, Any] = {"model": model}
    for ours, theirs in (
        ("input_tokens", "prompt_tokens"),
        ("output_tokens", "completion_tokens"),
        ("total_tokens", "total_tokens"),
    ):
        if usage.get(theirs) is not None:
            # As reported: the evidence reads counts one way for every kind (whole numbers,
            # 7.0 and "7" included; anything else is not reported).
            metrics[ours] = usage[theirs]
    assistant: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        assistant["attributes"] = {"tool_calls": [c["name"] for c in calls]}
    if refused:
        assistant.setdefault("attributes", {})["refusal"] = True
    out: dict[str, Any] = {
        "final_output": content,
        "messages": [*chat_messages(request), assistant],
        "tool_calls": calls,
        "metrics": metrics,
    }
    if choice.get("finish_reason") == "length":
        out["limit_hit"] = True
    return out


class OpenAIChatExecutor(Executor):
    kind = "openai_chat"

    async def execute(self, request: ExecutionRequest, *, client: OutboundClient) -> AttemptOutcome:
        timer = AttemptTimer(self.clock)
        url = chat_completions_url(request.deployment.url)
        response, failure = await self.post(
            request, client=client, url=url, payload=chat_body(request), timer=timer
        )
        if failure is not None or response is None:
            return failure  # type: ignore[return-value]
        reply, failure = self.parse_json_object(response, timer)
        if failure is not None or reply is None:
            return failure  # type: ignore[return-value]
        common = {"status_code": response.status, "body": response.body, "response": reply}
        failed = failed_generation(reply)
        if failed is not None:
            return self._generation_failed(failed, timer, common)
        normalized = protocol_response(request, reply)
        if isinstance(normalized, str):
            passing = transient_error_in_body(reply)
            if passing is not None:  # retried as that HTTP status would be (never the agent's fault)
                return self._passing_error(passing, timer, common)
            return self.outcome(
                AttemptCategory.CONFIG_ERROR,
                timer,
                error=normalized,
                error_code="not_chat_completion",
                **common,
            )
        system = request.deployment.config.system_prompt if request.deployment.config else None
        try:
            evidence = build_evidence(
                normalized, request=request, timing=timer.timing(), system_prompt=system
            )
        except ProtocolError as exc:
            return self.outcome(
                AttemptCategory.CONFIG_ERROR, timer, error=exc.message, error_code="protocol_error", **common
            )
        # The evidence document records the reply in the protocol's response shape: the
        # outcome carries it (converted once, here, not again where the item is graded).
        common["response"] = normalized
        return self.outcome(AttemptCategory.OK, timer, evidence=evidence, **common)

    def _passing_error(
        self, passing: tuple[int, str], timer: AttemptTimer, common: dict[str, Any]
    ) -> AttemptOutcome:
        status, message = passing
        return self.outcome(
            AttemptCategory.INFRA_ERROR,
            timer,
            error=f"the model endpoint answered HTTP 200 with an error {status}"
            + (f": {message}" if message else ""),
            error_code="rate_limited" if status == 429 else "server_error",
            **common,
        )

    def _generation_failed(
        self, error: dict[str, Any], timer: AttemptTimer, common: dict[str, Any]
    ) -> AttemptOutcome:
        """A generation the endpoint reports failed: an infra error, retried (a provider's
        failure, never the model's answer), unless its error states a status that will not
        pass (a 4xx but 408 and 429), which is a config error as that status would be."""
        how, status, message = failed_generation_status(error)
        if how == "passes":
            return self._passing_error((status, message), timer, common)
        said = f": {message}" if message else ""
        if how == "rejected":
            return self.outcome(
                AttemptCategory.CONFIG_ERROR,
                timer,
                error=f"the model endpoint answered HTTP 200 with an error {status}{said}",
                error_code="not_chat_completion",
                **common,
            )
        return self.outcome(
            AttemptCategory.INFRA_ERROR,
            timer,
            error=f"the model stopped with an error (finish_reason error){said}",
            error_code="server_error",
            **common,
        )
