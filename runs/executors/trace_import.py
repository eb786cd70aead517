"""``trace_import``: nothing to call. Results are uploaded to the run instead
(``POST .../runs/{id}/results``), so this executor refuses to be called."""

from __future__ import annotations

from agentclash_site.lib.outbound import OutboundClient
from runs.executors.base import AttemptOutcome, ExecutionRequest, Executor, NotExecutable


class TraceImportExecutor(Executor):
    kind = "trace_import"

    async def execute(self, request: ExecutionRequest, *, client: OutboundClient) -> AttemptOutcome:
        raise NotExecutable(
            "trace_import deployments are not called: upload their results to the run instead"
        )
