"""Reads of the result pages (selectors). Each is a bounded number of queries whatever the
run's size: lanes and stored aggregates for the overview, keyset pages for lists, one item
for a case page. Pinned by ``assertNumQueries`` in ``tests/runs/test_pages_*``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db.models import F, Q, QuerySet

from agentclash_site.lib.pagination import Page, keyset_page
from agentclash_site.workspaces.access import scoped_get
from grading.engine.aggregate import LaneCounters, LatencyHistogram
from grading.engine.stats import round4, round_interval, wilson_interval
from runs.documents import lane_counts
from runs.models import (
    Attempt,
    ComparisonCase,
    GradeRevision,
    ItemState,
    Run,
    RunComparison,
    RunItem,
    RunLane,
    RunResultSummary,
)

GRID_PAGE = 40
CASE_PAGE = 50
RUN_PAGE = 25

# --- access --------------------------------------------------------------------------------


def run_for_user(request: Any, run_id: Any, *, write: bool = False) -> Run:
    """A run of a workspace the user belongs to (404 otherwise), with what headers show."""
    # The version's manifest (every case) and source bytes grow with the pack: never loaded here.
    qs = Run.objects.select_related("pack_version__pack", "input_set").defer(
        "pack_version__manifest", "pack_version__source", "case_findings"
    )
    return scoped_get(request, qs, write=write, id=run_id)


def file_check_paths(run: Run) -> dict[str, str]:
    """``file:<check>`` evidence ids -> the captured path, from the version's evaluation
    spec (one query reading only that part of the manifest)."""
    from packs.models import PackVersion

    checks = (
        PackVersion.objects.filter(pk=run.pack_version_id)
        .annotate(checks=F("manifest__evaluation_spec__post_execution_checks"))
        .values_list("checks", flat=True)
        .first()
    )
    out: dict[str, str] = {}
    for check in checks or []:
        if (
            isinstance(check, dict)
            and isinstance(check.get("key"), str)
            and isinstance(check.get("path"), str)
        ):
            out[check["key"]] = check["path"]
    return out


def item_for_run(run: Run, item_id: int, *, with_payload: bool = True) -> RunItem:
    """One item of ``run`` (404 when it belongs to another run), with its lane and deployment."""
    from django.http import Http404

    qs = RunItem.objects.select_related("lane__deployment").filter(run=run, id=item_id)
    if not with_payload:
        qs = qs.defer("evidence", "grade")
    item = qs.first()
    if item is None:
        raise Http404("No such case in this run.")
    return item


# --- lanes and the leaderboard -----------------------------------------------------------


@dataclass
class LaneRow:
    """One leaderboard row, from lane stats (finished runs) or live counters."""

    lane: RunLane
    pass_rate: float | None
    pass_rate_interval: list[float] | None
    mean_score: float | None
    mean_score_interval: list[float] | None
    graded: int
    counts: dict[str, int]
    p50_ms: float | None
    p95_ms: float | None
    latency: LatencyHistogram
    # None when no item's cost is known (the agent reported none and no price applies, or
    # every judge call was of unknown cost): shown as a dash, never as $0.
    agent_cost_usd: float | None = None
    judge_cost_usd: float | None = None
    # cases with a score, the n of the mean score's bootstrap interval (stored lanes only:
    # a live lane's interval is computed when the run completes)
    scored: int | None = None
    # the worst case validity and the counts per value (grading.md §10.2; stored lanes only)
    validity: str | None = None
    validity_counts: dict[str, int] = field(default_factory=dict)
    rank: int | None = None
    within_noise: bool | None = None
    winner: bool = False
    gates: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def judge_budget_only_tokens(self) -> int:
        """Tokens counted against the lane's judge budget beyond those providers reported: a
        call whose provider reports no usage is charged its reservation (grading.md §6.4),
        so a budget can run out while the reported spend stays low."""
        lane = self.lane
        return max(0, lane.judge_charged_tokens - lane.judge_input_tokens - lane.judge_output_tokens)

    @property
    def done(self) -> int:
        return sum(v for k, v in self.counts.items() if k != "pending")

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def lanes_of(run: Run) -> list[RunLane]:
    """The run's lanes in order, with their deployments (the run page compares what each
    lane recorded with its deployment now); the live counters JSON is deferred and only its
    latency histogram is fetched (the rest can grow with repetitions)."""
    return list(
        RunLane.objects.filter(run=run)
        .select_related("deployment")
        .defer("counters")
        .annotate(
            latency_hist=F("counters__latency"),
            costs_reported=F("counters__agent__cost_reported"),
            judge_costs_unknown=F("counters__judge__cost_unknown"),
        )
        .order_by("position")
    )


def _judge_cost(lane: RunLane, stats: dict[str, Any] | None = None) -> float | None:
    """The lane's known judge spend (the columns its tokens are read from too: every judge,
    claims and critic call, grading.md §6.5); None when its calls all were of unknown cost
    (a provider that reports none, the heuristic judge), as its counters or, once
    completed, its stats say."""
    usage = (stats or {}).get("judge_usage") or {}
    if "run_level" in usage:
        # stored figures: every judge call of the lane, its share of the run-level passes too
        return usage.get("cost_usd")
    # live, or stats stored before they held the run-level passes: the lane's columns
    unknown = getattr(lane, "judge_costs_unknown", 0) or (
        usage.get("calls") and usage.get("cost_usd") is None
    )
    if lane.judge_calls and unknown and not lane.judge_cost_usd:
        return None
    return lane.judge_cost_usd


def leaderboard(run: Run, lanes: Sequence[RunLane], summary: RunResultSummary | None = None) -> list[LaneRow]:
    ranking = {r.get("deployment"): r for r in ((run.stats or {}).get("ranking") or [])}
    gates = _gate_counts(summary)
    # With repetitions a case counts once, as the mean of its repetitions (grading.md §10.3):
    # the per-case tallies live in the counters, read (one query) only for such runs.
    repeated: dict[int, LaneCounters] = {}
    if run.repetitions > 1 and any(not lane.stats for lane in lanes):
        for lane_id, counters in RunLane.objects.filter(run=run).values_list("id", "counters"):
            repeated[lane_id] = (
                LaneCounters.from_dict(counters) if counters else LaneCounters(run.repetitions)
            )
    rows: list[LaneRow] = []
    for lane in lanes:
        stats = lane.stats or {}
        hist = LatencyHistogram.from_dict(getattr(lane, "latency_hist", None))
        if stats:
            agent = stats.get("agent") or {}
            row = LaneRow(
                lane=lane,
                pass_rate=stats.get("pass_rate"),
                pass_rate_interval=stats.get("pass_rate_interval"),
                mean_score=stats.get("mean_score"),
                mean_score_interval=stats.get("mean_score_interval"),
                graded=int(stats.get("graded_cases") or 0),
                counts=lane_counts(lane),
                p50_ms=agent.get("latency_p50_ms"),
                p95_ms=agent.get("latency_p95_ms"),
                latency=hist,
                agent_cost_usd=agent.get("cost_usd"),
                # the lane's judge spend, as its tokens beside it
                judge_cost_usd=_judge_cost(lane, stats),
                scored=stats.get("scored_cases"),
                validity=stats.get("validity"),
                validity_counts={
                    v: n
                    for v in ("invalid", "degraded", "valid")
                    if (n := (stats.get("validity_counts") or {}).get(v))
                },
            )
        else:
            # Live: the lane's own counters (the run document's figures, runs.documents).
            graded = lane.passed + lane.failed
            pass_rate = round4(lane.passed / graded) if graded else None
            interval = round_interval(wilson_interval(lane.passed, graded))
            mean_score = round4(lane.score_sum / lane.scored) if lane.scored else None
            if lane.id in repeated:
                counters = repeated[lane.id]
                graded = counters._rates()[1]
                pass_rate = round4(counters.pass_rate())
                interval = round_interval(counters.pass_rate_interval())
                mean_score = round4(counters.mean_score())
            row = LaneRow(
                lane=lane,
                pass_rate=pass_rate,
                pass_rate_interval=interval,
                mean_score=mean_score,
                mean_score_interval=None,
                graded=graded,
                counts=lane_counts(lane),
                p50_ms=round4(hist.quantile(0.5)),
                p95_ms=round4(hist.quantile(0.95)),
                latency=hist,
                agent_cost_usd=lane.agent_cost_usd if getattr(lane, "costs_reported", 0) else None,
                judge_cost_usd=_judge_cost(lane),
            )
        standing = ranking.get(lane.deployment_name)
        if standing:
            row.rank = standing.get("rank")
            row.within_noise = standing.get("within_noise")
        row.gates = gates.get(str(lane.id), {})
        rows.append(row)
    if ranking:
        rows.sort(key=lambda r: (r.rank is None, r.rank or 0, r.lane.position))
        # lanes tied for first place share rank 1 (§10.4): each of them is a winner, not
        # just the first by name
        for row in rows:
            if row.rank == 1 and row.graded:
                row.winner = True
    return rows


def _gate_counts(summary: RunResultSummary | None) -> dict[str, dict[str, dict[str, int]]]:
    """{lane_id: {gate: {"PASSED": n, "FAILED": n, "other": n}}} from the stored summary."""
    out: dict[str, dict[str, dict[str, int]]] = {}
    if summary is None:
        return out
    for entry in summary.assertion_health or []:
        if entry.get("kind") != "gate":
            continue
        for lane_id, tally in (entry.get("lanes") or {}).items():
            if not (tally.get("PASSED") or tally.get("FAILED")):
                continue  # not graded for this lane (no rules declared)
            out.setdefault(lane_id, {})[entry["key"].removeprefix("gates.")] = tally
    return out


def summary_of(run: Run) -> RunResultSummary | None:
    return RunResultSummary.objects.filter(run=run).first()


def summary_is_current(run: Run, summary: RunResultSummary | None) -> bool:
    return (
        summary is not None and summary.scoring_revision == run.scoring_revision and summary.status == "ready"
    )


def progress_of(lanes: Iterable[RunLane]) -> tuple[dict[str, int], int]:
    """Item states summed over lanes, in display order, and the total."""
    segments = dict.fromkeys(
        (
            "PASSED",
            "FAILED",
            "UNAVAILABLE",
            "NOT_EVALUATED",
            "ERROR",
            "infra_error",
            "config_error",
            "cancelled",
            "pending",
        ),
        0,
    )
    for lane in lanes:
        for key, value in lane_counts(lane).items():
            segments[key] += value
    return segments, sum(segments.values())


# --- the case x deployment grid ------------------------------------------------------------


@dataclass
class GridRow:
    challenge_key: str
    case_key: str
    cells: list[RunItem | None]


def grid_page(
    run: Run, lanes: Sequence[RunLane], *, after: str | None = None
) -> tuple[list[GridRow], Page[Any]]:
    """One page of the case x deployment grid: the first lane's items (repetition 1) in
    keyset order name the rows, one more query fetches every lane's items of those cases
    (every repetition, when the run repeats). Two queries per page, whatever the run's size."""
    if not lanes:
        return [], Page(items=[], next_cursor=None)
    # run and lane are the scope of the keyset (applied as a range on (run, lane, id)).
    keys_qs = RunItem.objects.filter(repetition=1).only("id", "challenge_key", "case_key")
    page = keyset_page(
        keys_qs, sort="id", after=after, size=GRID_PAGE, scope={"run_id": run.id, "lane_id": lanes[0].id}
    )
    keys = [(i.challenge_key, i.case_key) for i in page.items]
    if not keys:
        return [], page
    cells = RunItem.objects.filter(
        run=run,
        challenge_key__in={k[0] for k in keys},
        case_key__in={k[1] for k in keys},
    ).only(
        "id", "lane_id", "challenge_key", "case_key", "repetition", "status", "state", "last_category",
        "outcome_class", "score",
    )  # fmt: skip
    if run.repetitions <= 1:
        cells = cells.filter(repetition=1)
    cells = cells.order_by()  # RunItem's default ordering would join the run table
    by_key: dict[tuple[str, str, int], RunItem] = {}
    repetitions: dict[tuple[str, str, int], list[RunItem]] = {}
    for c in cells:
        key = (c.challenge_key, c.case_key, c.lane_id)
        repetitions.setdefault(key, []).append(c)
        if c.repetition == 1:
            by_key[key] = c
    if run.repetitions > 1:
        # A cell links repetition 1 and says how its repetitions went (a case counts as the
        # mean of its repetitions, grading.md §10.3): repetition 1 alone misread as the case.
        for key, item in by_key.items():
            reps = sorted(repetitions[key], key=lambda i: i.repetition)
            item.repetition_passed = sum(1 for i in reps if i.status == "PASSED")  # type: ignore[attr-defined]
            item.repetition_count = len(reps)  # type: ignore[attr-defined]
            item.repetition_statuses = ", ".join(  # type: ignore[attr-defined]
                f"{i.repetition}: {i.display_status}" for i in reps
            )
    rows = [GridRow(ch, case, [by_key.get((ch, case, lane.id)) for lane in lanes]) for ch, case in keys]
    return rows, page


# --- the case list --------------------------------------------------------------------------

_ENDED = (ItemState.DONE, ItemState.CANCELLED)
CASE_FILTERS = {
    "passed": Q(status="PASSED"),
    "failed": Q(status="FAILED"),
    "unavailable": Q(status="UNAVAILABLE"),
    "not_evaluated": Q(status="NOT_EVALUATED"),
    "error": Q(status="ERROR"),
    # An item sent again (retry-failed) keeps its last category while it waits: it is
    # "pending" (runs.documents.display_status), as the lane counts and the API's filter say.
    "infra_error": Q(status="", state__in=_ENDED, last_category="infra_error"),
    "config_error": Q(status="", state__in=_ENDED, last_category="config_error"),
    "cancelled": Q(status="", state__in=_ENDED, last_category="cancelled"),
    "pending": Q(state__in=(ItemState.PENDING, ItemState.CLAIMED)),
}
# Filters on the grade status alone: with the run order they page along (run, status, id).
GRADE_STATUSES = {
    "passed": "PASSED",
    "failed": "FAILED",
    "unavailable": "UNAVAILABLE",
    "not_evaluated": "NOT_EVALUATED",
    "error": "ERROR",
}
CASE_SORTS = {"id": "id", "score": "score", "-score": "-score"}
CASE_LIST_FIELDS = (
    "id",
    "lane_id",
    "challenge_key",
    "case_key",
    "repetition",
    "status",
    "state",
    "last_category",
    "outcome_class",
    "score",
    "latency_ms",
    "attempt_count",
)


@dataclass(frozen=True)
class CaseQuery:
    status: str = ""
    challenge: str = ""
    lane: int | None = None
    q: str = ""
    sort: str = "id"
    after: str | None = None


def case_page(run: Run, query: CaseQuery) -> Page[RunItem]:
    """One keyset page of the run's items under ``query``: one query (two on the page where
    a score sort runs from scored into unscored items)."""
    # The columns fixed by the filters lead the index the list walks, (run, id),
    # (run, status, id), (run, lane, id) or (run, score, id); keyset_page applies them.
    sort = CASE_SORTS.get(query.sort, "id")
    scope: dict[str, Any] = {"run_id": run.id}
    qs: QuerySet[RunItem] = RunItem.objects.only(*CASE_LIST_FIELDS)
    if sort == "id" and query.status in GRADE_STATUSES:
        scope["status"] = GRADE_STATUSES[query.status]
    elif query.status in CASE_FILTERS:
        qs = qs.filter(CASE_FILTERS[query.status])
    if sort == "id" and query.lane is not None and "status" not in scope:
        scope["lane_id"] = query.lane
    elif query.lane is not None:
        qs = qs.filter(lane_id=query.lane)
    if query.challenge:
        qs = qs.filter(challenge_key=query.challenge)
    if query.q:
        qs = qs.filter(case_key__icontains=query.q)
    return keyset_page(qs, sort=sort, after=query.after, size=CASE_PAGE, nullable=sort != "id", scope=scope)


def challenge_keys(run: Run) -> list[str]:
    """The run's challenge keys, from the lane counters' per-challenge tallies (no item scan)."""
    keys: list[str] = []
    for lane in (
        RunLane.objects.filter(run=run)
        .order_by()
        .annotate(ch=F("counters__challenges"))
        .values_list("ch", flat=True)
    ):
        for key in lane or {}:
            if key not in keys:
                keys.append(key)
    return sorted(keys)


# --- one case -----------------------------------------------------------------------------


def attempts_of(item: RunItem) -> list[Attempt]:
    return list(Attempt.objects.filter(item=item).order_by("number"))


def grade_revisions_of(item: RunItem) -> list[GradeRevision]:
    """The item's earlier grades, oldest first (their documents deferred). An item graded
    once (``scoring_revision`` 0 or 1) has none, and costs no query."""
    if item.scoring_revision <= 1:
        return []
    return list(GradeRevision.objects.filter(item=item).defer("grade").order_by("revision"))


def grade_revision_document(item: RunItem, revision: Any) -> dict[str, Any] | None:
    """One earlier grade's grading.json, None when the item has no such revision."""
    try:
        number = int(revision)
    except (TypeError, ValueError):
        return None
    return GradeRevision.objects.filter(item=item, revision=number).values_list("grade", flat=True).first()


def siblings_of(item: RunItem) -> list[RunItem]:
    """The same case (and repetition) in the run's other lanes, for the side-by-side view."""
    return list(
        RunItem.objects.filter(
            run_id=item.run_id,
            challenge_key=item.challenge_key,
            case_key=item.case_key,
            repetition=item.repetition,
        )
        .exclude(id=item.id)
        .select_related("lane")
        .defer("evidence")
        .order_by("lane__position")
    )


def lane_counters(lane: RunLane) -> LaneCounters:
    return LaneCounters.from_dict(lane.counters)


# --- comparisons ------------------------------------------------------------------------------


COMPARE_FILTERS = (
    "regression",
    "improvement",
    "unchanged_pass",
    "unchanged_fail",
    "not_comparable",
    "added",
    "removed",
)


def comparison_cases(
    comparison: RunComparison, *, change: str = "", after: str | None = None
) -> Page[ComparisonCase]:
    qs = ComparisonCase.objects.all()
    scope: dict[str, Any] = {"comparison_id": comparison.id}  # applied by keyset_page
    if change in COMPARE_FILTERS:
        scope["change"] = change
    return keyset_page(qs, sort="id", after=after, size=CASE_PAGE, scope=scope)


# --- lane figures (grading.md §10.3) ----------------------------------------------------------


@dataclass
class LaneFigures:
    """The stored lane and challenge figures the leaderboard has no room for: coverage,
    macro means, dimension and compliance means, and per challenge the pass rate over n
    graded cases and the coverage. From the lanes' stats (already loaded): no query."""

    dimensions: list[str]
    lanes: list[tuple[RunLane, dict[str, Any]]]
    challenges: list[tuple[str, list[dict[str, Any] | None]]]

    @property
    def has_compliance(self) -> bool:
        return any(stats.get("compliance_mean") is not None for _, stats in self.lanes)


def lane_figures(lanes: Sequence[RunLane]) -> LaneFigures | None:
    """None while no lane has its stored figures (the run has not completed)."""
    stored = [(lane, lane.stats) for lane in lanes if lane.stats and "graded_cases" in lane.stats]
    if not stored:
        return None
    dimensions: list[str] = []
    challenge_keys: list[str] = []
    for _, stats in stored:
        for key in stats.get("dimension_means") or {}:
            if key not in dimensions:
                dimensions.append(key)
        for key in stats.get("challenges") or {}:
            if key not in challenge_keys:
                challenge_keys.append(key)
    challenges = [
        (key, [(stats.get("challenges") or {}).get(key) for _, stats in stored])
        for key in sorted(challenge_keys)
    ]
    return LaneFigures(dimensions=dimensions, lanes=stored, challenges=challenges)
