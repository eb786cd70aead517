"""Synthetic graded runs for the page-scaling benchmark, demos and the result-page tests.

``seed_run`` publishes the example pack ``invoice-totals`` (idempotent), grades its two
example responses (a careful agent that passes, a sloppy one that fails) once with the real
engine, and then writes N items whose grades and evidence are copies of those two documents
under synthetic case keys, in bulk. Lane counters, lane stats and the run's ranking are
computed in memory from the same records, so the run looks exactly like one the workers
finished (or, with ``status="running"``, one still in progress).
"""

from __future__ import annotations

import copy
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from django.db import connection, transaction
from django.utils import timezone

from grading.engine.aggregate import CaseRecord, LaneCounters, aggregate_lane
from grading.engine.compare import rank_lanes
from grading.engine.evidence import evidence_from_response
from grading.engine.grade import grade_case
from grading.engine.types import Timing
from runs.lane_settings import CallSettings
from runs.models import (
    Attempt,
    Deployment,
    ItemState,
    LaneStatus,
    Run,
    RunItem,
    RunLane,
    RunStatus,
)

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "packs" / "invoice-totals"
CHALLENGE = "sum-open-invoices"
INPUT_SET = "default"
BATCH = 2000
OK_ATTEMPTS_UP_TO = 5000


@dataclass(frozen=True, slots=True)
class Template:
    response: dict[str, Any]
    grade: dict[str, Any]
    status: str
    outcome_class: str
    score: float | None
    expectations: dict[str, tuple[str, str | None, str | None]]
    dimensions: dict[str, float | None]


def example_version(workspace: Any, user: Any = None) -> Any:
    """The published ``invoice-totals`` version of ``workspace`` (published if missing)."""
    from packs.services import pack_version_publish
    from packs.services.cli import read_bundle_path

    return pack_version_publish(workspace=workspace, data=read_bundle_path(EXAMPLE), user=user).version


def _templates(version: Any) -> dict[str, Template]:
    from runs.packdata import version_data

    data = version_data(version, INPUT_SET)
    case, context = next(data.iter_cases())
    out: dict[str, Template] = {}
    for line in (EXAMPLE / "results.jsonl").read_text().splitlines():
        response = json.loads(line)
        name = response.pop("deployment")
        for key in ("challenge_key", "case_key"):
            response.pop(key, None)
        evidence = evidence_from_response(
            response,
            rendered_instructions=context.rendered_instructions,
            timing=Timing(executor_duration_seconds=1.2),
        )
        grade = grade_case(evidence, case, data.spec, context=context).to_dict()
        out[name] = Template(
            response=response,
            grade=grade,
            status=grade["status"],
            outcome_class=grade.get("outcome_class") or "",
            score=(grade.get("scorecard") or {}).get("overall_score"),
            expectations={
                e["key"]: (e["status"], e.get("outcome_class"), e.get("reason_code"))
                for e in grade["expectations"]
            },
            dimensions={
                d["key"]: d.get("score") for d in (grade.get("scorecard") or {}).get("dimensions", [])
            },
        )
    return out


def _insert(items: list[RunItem]) -> None:
    """Insert unsaved items: COPY on PostgreSQL (about 5x faster than bulk_create with
    large JSON columns), bulk_create elsewhere."""
    if connection.vendor != "postgresql":
        RunItem.objects.bulk_create(items)
        return
    fields = [f for f in RunItem._meta.concrete_fields if not f.primary_key]
    json_fields = {f.attname for f in fields if f.get_internal_type() == "JSONField"}
    columns = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    sql = f"COPY {RunItem._meta.db_table} ({columns}) FROM STDIN"
    with connection.cursor() as cursor, cursor.cursor.copy(sql) as copy:
        for item in items:
            row = []
            for f in fields:
                value = getattr(item, f.attname)
                if f.attname in json_fields:
                    row.append(None if value is None else orjson.dumps(value).decode())
                else:  # plain values (ids, text, numbers, datetimes): psycopg adapts them
                    row.append(value)
            copy.write_row(row)


def seed_deployments(workspace: Any, count: int) -> list[Deployment]:
    names = ["careful", "sloppy", "hasty", "steady"][:count] + [f"agent-{i}" for i in range(4, count)]
    return [
        Deployment.objects.get_or_create(workspace=workspace, name=name, defaults={"kind": "trace_import"})[0]
        for name in names
    ]


def seed_run(
    *,
    workspace: Any,
    items: int,
    lanes: int = 2,
    status: str = RunStatus.COMPLETED,
    name: str = "",
    seed: int = 7,
    pass_rates: tuple[float, ...] = (0.8, 0.6, 0.7, 0.5),
    infra_error_rate: float = 0.02,
    done_fraction: float = 1.0,
    user: Any = None,
) -> Run:
    """A run of ``items`` items over ``lanes`` lanes (``items // lanes`` cases each).

    ``done_fraction`` < 1 leaves the rest pending (a running run). The same ``seed`` gives
    the same statuses, so two runs seeded with different seeds differ case by case.
    """
    if lanes < 1 or items < lanes:
        raise ValueError("seed_run needs at least one lane and one item per lane")
    version = example_version(workspace, user)
    templates = _templates(version)
    input_set = version.input_sets.get(key=INPUT_SET)
    challenge = version.challenges.get(key=CHALLENGE)
    deployments = seed_deployments(workspace, lanes)
    rng = random.Random(seed)
    per_lane = items // lanes
    finished = status in (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED)
    now = timezone.now()

    with transaction.atomic():
        run = Run.objects.create(
            workspace=workspace,
            pack_version=version,
            input_set=input_set,
            name=name or f"seeded {items}",
            status=status,
            created_by=user,
            queued_at=now,
            started_at=now,
            finished_at=now if finished else None,
            items_total=per_lane * lanes,
        )
        lane_rows = [
            RunLane.objects.create(
                run=run,
                deployment=d,
                deployment_name=d.name,
                deployment_kind=d.kind,
                settings=CallSettings.of_deployment(d).to_json(),
                position=i,
                status=LaneStatus.COMPLETED if finished else LaneStatus.RUNNING,
                started_at=now,
                finished_at=now if finished else None,
            )
            for i, d in enumerate(deployments)
        ]
        records: dict[str, list[CaseRecord]] = {}
        open_items = 0
        for li, lane in enumerate(lane_rows):
            counters = LaneCounters()
            lane_records: list[CaseRecord] = []
            batch: list[RunItem] = []
            counts = dict.fromkeys(
                ("passed", "failed", "not_evaluated", "unavailable", "errored", "infra_error", "pending"), 0
            )
            spend = {"in": 0, "out": 0, "cost": 0.0, "score_sum": 0.0, "scored": 0}
            pass_rate = pass_rates[li % len(pass_rates)]
            for n in range(per_lane):
                case_key = f"c-{n:06d}"
                item = RunItem(
                    run=run,
                    lane=lane,
                    deployment=lane.deployment,
                    challenge=challenge,
                    case=None,
                    challenge_key=CHALLENGE,
                    case_key=case_key,
                    position=n,
                    repetition=1,
                )
                draw = rng.random()
                if n >= per_lane * done_fraction:
                    item.state = ItemState.PENDING
                    counts["pending"] += 1
                    open_items += 1
                elif draw < infra_error_rate:
                    item.state = ItemState.DONE
                    item.attempt_count = 3
                    item.last_category = "infra_error"
                    counts["infra_error"] += 1
                else:
                    t = templates["careful" if rng.random() < pass_rate else "sloppy"]
                    latency = round(400 + rng.random() * 2600, 1)
                    grade = copy.copy(t.grade)
                    grade["case"] = {
                        **t.grade.get("case", {}),
                        "run_id": str(run.id),
                        "lane_id": str(lane.id),
                        "deployment": lane.deployment_name,
                        "case_key": case_key,
                    }
                    metrics = t.response.get("metrics", {})
                    item.state = ItemState.DONE
                    item.attempt_count = 1
                    item.last_category = "ok"
                    item.status = t.status
                    item.outcome_class = t.outcome_class
                    item.score = t.score
                    item.grade = grade
                    item.evidence = {
                        "response": t.response,
                        "timing": {"executor_duration_seconds": latency / 1000},
                    }
                    item.scoring_revision = 1
                    item.latency_ms = latency
                    item.input_tokens = metrics.get("input_tokens")
                    item.output_tokens = metrics.get("output_tokens")
                    item.cost_usd = metrics.get("cost_usd")
                    item.finished_at = now
                    counts[{"PASSED": "passed", "FAILED": "failed"}.get(t.status, "errored")] += 1
                    spend["in"] += item.input_tokens or 0
                    spend["out"] += item.output_tokens or 0
                    spend["cost"] += item.cost_usd or 0.0
                    if t.score is not None:
                        spend["score_sum"] += t.score
                        spend["scored"] += 1
                    record = CaseRecord(
                        deployment=lane.deployment_name,
                        challenge_key=CHALLENGE,
                        case_key=case_key,
                        status=t.status,
                        lane_id=str(lane.id),
                        outcome_class=t.outcome_class,
                        score=t.score,
                        validity=grade.get("validity"),
                        dimensions=dict(t.dimensions),
                        reliability=t.dimensions.get("reliability"),
                        expectations=dict(t.expectations),
                        input_tokens=item.input_tokens,
                        output_tokens=item.output_tokens,
                        cost_usd=item.cost_usd,
                        latency_ms=latency,
                        pack_version=version.number,
                        run_id=str(run.id),
                    )
                    counters.add(record)
                    lane_records.append(record)
                batch.append(item)
                if len(batch) >= BATCH:
                    _insert(batch)
                    batch = []
            if batch:
                _insert(batch)
            records[lane.deployment_name] = lane_records
            lane.passed, lane.failed, lane.errored = counts["passed"], counts["failed"], counts["errored"]
            lane.infra_error, lane.pending = counts["infra_error"], counts["pending"]
            lane.agent_input_tokens, lane.agent_output_tokens = spend["in"], spend["out"]
            lane.agent_cost_usd = spend["cost"]
            lane.score_sum, lane.scored = spend["score_sum"], spend["scored"]
            lane.counters = counters.to_dict()
            if finished:
                lane.stats = aggregate_lane(
                    lane_records, run_id=str(run.id), deployment=lane.deployment_name
                ).to_dict()
            lane.save()
        # Attempt rows, so the case page can say how each item went: three 503s for the
        # infra errors, and (small runs only, to keep big seeds fast) the ok attempt.
        failed_items = RunItem.objects.filter(run=run, last_category="infra_error").values_list(
            "id", flat=True
        )
        attempts = [
            Attempt(item_id=i, number=n, category="infra_error", status_code=503, error="HTTP 503 from agent")
            for i in failed_items
            for n in (1, 2, 3)
        ]
        if per_lane * lanes <= OK_ATTEMPTS_UP_TO:
            graded = RunItem.objects.filter(run=run, last_category="ok").values_list("id", "latency_ms")
            attempts += [
                Attempt(item_id=i, number=1, category="ok", status_code=200, latency_ms=ms)
                for i, ms in graded
            ]
        Attempt.objects.bulk_create(attempts, batch_size=BATCH)
        run.items_open = open_items
        if finished:
            ranking = rank_lanes(records, run_id=str(run.id))
            run.stats = {"ranking": [s.to_dict() for s in ranking]}
        run.save()
    if connection.vendor == "postgresql" and per_lane * lanes >= 10_000 and not connection.in_atomic_block:
        # Fresh planner statistics, as autovacuum would have them shortly after a large
        # insert (the keyset and grid queries are planned from them).
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {RunItem._meta.db_table}")
    return run
