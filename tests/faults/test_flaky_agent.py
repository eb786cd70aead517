"""Fault: an agent that fails like a real overloaded service, at rates, not case by case.

A real-socket fake agent answers each call, drawn from a seeded RNG: 20% a 5xx (500/502/503),
10% no answer at all (the 1 s attempt timeout fires), and two bursts of consecutive 429s
with ``Retry-After: 0``; every other call gets the right answer. The run is driven in this
process (``tests.runs.runfactory.drive``) with 3 attempts per item.

Every item must end either graded (its last attempt ``ok``) or ``infra_error`` after all its
attempts; since the agent's real answers are always right, no item may be FAILED: an infra
failure must never be scored as the agent's failure. ``tests/runs/test_dispatch.py`` pins
each failure mode on its own case; this mixes them under concurrency.
"""

from __future__ import annotations

import random

import pytest

from runs.models import Attempt, Run, RunItem, RunLane
from tests.fakes.agent_server import FakeAgent, hang, ok, rate_limited, server_error
from tests.runs.runfactory import create_run, drive, echo_answer, hosted, publish

pytestmark = pytest.mark.django_db(transaction=True)

CASES = 40
MAX_ATTEMPTS = 3
BURSTS = (range(8, 14), range(40, 46))  # call numbers answered 429


class Flaky:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.calls = 0
        self.kinds: list[str] = []

    async def __call__(self, request, recorded, agent):  # type: ignore[no-untyped-def]
        number = self.calls
        self.calls += 1
        if any(number in burst for burst in BURSTS):
            kind, behaviour = "429", rate_limited("0")
        else:
            roll = self.rng.random()
            if roll < 0.20:
                kind, behaviour = "5xx", server_error(self.rng.choice([500, 502, 503]))
            elif roll < 0.30:
                kind, behaviour = "timeout", hang()
            else:
                kind, behaviour = "ok", ok(echo_answer)
        self.kinds.append(kind)
        return await behaviour(request, recorded, agent)


@pytest.mark.parametrize("seed", [7])
def test_injected_5xx_timeouts_and_429_bursts_end_graded_or_infra_error_never_failed(personas, seed):
    version = publish(personas.workspace, cases=CASES, slug=f"flaky-{seed}")
    flaky = Flaky(seed)
    with FakeAgent() as agent:
        agent.default = flaky
        dep = hosted(
            personas.workspace, agent.url, timeout_seconds=1, max_attempts=MAX_ATTEMPTS, max_in_flight=8
        )
        run = drive(create_run(personas.workspace, version, [dep]), slices=60)
    # every kind of fault really happened
    assert {"5xx", "timeout", "429", "ok"} <= set(flaky.kinds), flaky.kinds
    run = Run.objects.get(pk=run.pk)
    assert run.status == "completed"
    items = list(RunItem.objects.filter(run=run))
    assert len(items) == CASES
    outcomes = {"PASSED": 0, "infra_error": 0}
    for item in items:
        attempts = list(Attempt.objects.filter(item=item).order_by("number"))
        categories = [a.category for a in attempts]
        assert 1 <= len(attempts) <= MAX_ATTEMPTS, (item.case_key, categories)
        if item.status:
            # graded: its last attempt reached the agent's real answer, which is right
            assert categories[-1] == "ok" and set(categories[:-1]) <= {"infra_error"}, categories
            assert item.status == "PASSED", (item.case_key, item.status, categories)
        else:
            # not graded: infra_error after every attempt, never a FAILED grade
            assert item.display_status == "infra_error", (item.case_key, item.display_status)
            assert categories == ["infra_error"] * MAX_ATTEMPTS, categories
        outcomes[item.display_status] += 1
    assert outcomes["PASSED"] + outcomes["infra_error"] == CASES
    assert outcomes["PASSED"] > 0
    lane = RunLane.objects.get(run=run)
    assert (lane.passed, lane.infra_error, lane.pending) == (outcomes["PASSED"], outcomes["infra_error"], 0)
    assert lane.failed == 0
    assert agent.calls == Attempt.objects.filter(item__run=run).count()
