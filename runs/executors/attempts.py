"""Attempts of one item in process: execute, and retry infra errors per runs.retry.

For callers that keep an item in one task (the CLI, tests, a dispatcher that retries in
place). A dispatcher that re-queues instead calls ``runs.retry.next_delay`` itself.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
from collections.abc import Awaitable, Callable

from agentclash_site.lib.outbound import OutboundClient
from runs.executors.base import (
    AttemptCategory,
    AttemptOutcome,
    Clock,
    ExecutionRequest,
    Executor,
    bounded_error,
    utc_now,
    without_secrets,
)
from runs.retry import next_delay

log = logging.getLogger(__name__)

Sleep = Callable[[float], Awaitable[object]]


async def run_attempts(
    executor: Executor,
    request: ExecutionRequest,
    *,
    client: OutboundClient,
    rng: random.Random,
    sleep: Sleep = asyncio.sleep,
    clock: Clock = utc_now,
    on_attempt: Callable[[AttemptOutcome], object] | None = None,
) -> list[AttemptOutcome]:
    """Every attempt's outcome, in order; the last one is final.

    Starts at ``request.attempt`` (the item's next attempt number: attempts of an earlier
    round, before "retry failed items", keep theirs) and stops at the first outcome that is
    not an infra error, after ``max_attempts`` attempts of this round, or when the next
    attempt would pass the deadline.
    """
    outcomes: list[AttemptOutcome] = []
    first = attempt = request.attempt
    while True:
        try:
            outcome = await executor.execute(dataclasses.replace(request, attempt=attempt), client=client)
        except Exception as exc:  # a bug of ours, not the agent's: one item's outcome, not the lane's
            log.exception(
                "item %s attempt %s: the %s executor crashed", request.item_id, attempt, executor.kind
            )
            now = clock()
            outcome = AttemptOutcome(
                AttemptCategory.CONFIG_ERROR,
                error=f"AgentClash failed on this attempt ({type(exc).__name__}: "
                f"{bounded_error(str(exc), 300)}); please report it",
                error_code="internal_error",
                started_at=now,
                ended_at=now,
            )
        outcome = without_secrets(outcome, request.deployment)
        outcomes.append(outcome)
        if on_attempt is not None:
            on_attempt(outcome)
        if not outcome.retryable:
            return outcomes
        delay = next_delay(
            attempt - first + 1,  # this round's attempt: its backoff and its max_attempts
            retry_after=outcome.retry_after,
            now=clock(),
            deadline=request.deadline,
            rng=rng,
            max_attempts=request.deployment.max_attempts,
        )
        if delay is None:
            return outcomes
        await sleep(delay)
        attempt += 1
