"""``hosted_http``: POST the protocol request to the team's agent, read the protocol response."""

from __future__ import annotations

from agentclash_site.lib.outbound import OutboundClient
from runs.executors.base import AttemptCategory, AttemptOutcome, AttemptTimer, ExecutionRequest, Executor
from runs.executors.evidence import ProtocolError, build_evidence, protocol_problem


class HostedHttpExecutor(Executor):
    kind = "hosted_http"

    async def execute(self, request: ExecutionRequest, *, client: OutboundClient) -> AttemptOutcome:
        timer = AttemptTimer(self.clock)
        payload = request.protocol_body(deadline=request.attempt_deadline(timer.started_at))
        response, failure = await self.post(
            request, client=client, url=request.deployment.url, payload=payload, timer=timer
        )
        if failure is not None or response is None:
            return failure  # type: ignore[return-value]
        data, failure = self.parse_json_object(response, timer)
        if failure is not None or data is None:
            return failure  # type: ignore[return-value]
        common = {"status_code": response.status, "body": response.body, "response": data}
        problem = protocol_problem(data)
        if problem is not None:
            return self.outcome(
                AttemptCategory.CONFIG_ERROR, timer, error=problem[1], error_code=problem[0], **common
            )
        try:
            evidence = build_evidence(data, request=request, timing=timer.timing())
        except ProtocolError as exc:
            return self.outcome(
                AttemptCategory.CONFIG_ERROR,
                timer,
                error=f"the response is not the protocol's: {exc.message}",
                error_code="protocol_error",
                **common,
            )
        return self.outcome(AttemptCategory.OK, timer, evidence=evidence, **common)
