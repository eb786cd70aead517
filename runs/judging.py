"""Judges for runs (grading.md §6, §8, §9): the seam between the runs app and ``grading.judges``.

Who calls what (R2 / the lead wire these):

- ``judge_for_lane(lane) -> LLMJudge | None``: the judge a lane's dispatch slice passes to
  ``grade_case`` (``LaneContext.judge``). None when the workspace has no judge provider, so
  judge expectations stay NOT_EVALUATED ``no_judge_provider``. The budget is the lane's
  equal share of ``scorecard.judge_limits`` (split over the run's lane count at run start)
  minus what the lane already charged to it (its ``judge_charged_*`` counters, which
  ``runs.recording`` keeps from each grade's ``judge_usage``: the reported usage, or a call's
  reservation when its provider reported none, as the in-memory budget counted it). Every judge shares one process-wide event-loop
  thread, so a judge needs no closing; ``close_judge`` exists for symmetry.
- ``grade_case_with_judge(evidence, case, spec, context=..., judge=...)``: a drop-in for
  ``grade_case`` in ``runs.recording.grade_evidence``: ``grade_case`` plus, when a judge is
  configured, the model's claims (``source: llm``) and their spend
  (``with_model_claims`` does the second half on an existing grade).
- ``rank_run(run) -> int``: the n_wise second pass, from the scoring stage before
  ``compute_stats``: for every n_wise judge and every (challenge, case, repetition) graded in
  two or more lanes and still ``pending_rank`` (so a second call pays nothing), ranks the lanes' answers, re-grades each item with its ranked result
  (other judges replayed, not re-run), archives the pre-rank grade as a ``GradeRevision``
  (numbered like a rescore: the item's revision; the ranked grade is the next one), writes
  the item's grade fields and moves the lane's
  counters (status columns, score sum, ``LaneCounters``) from the old record to the new.
- ``run_model_critique(run, records) -> list[dict]``: the §9(c) critique suggestions to merge
  into the run's ``eval_feedback`` (``source: llm``).
- ``record_run_judge_usage(run)``: the run's judge counters = the sum of its lanes'.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Iterator
from typing import Any

from django.db import transaction
from django.db.models import F, Sum

from agentclash_site.lib.crypto import DecryptionError
from grading.engine.aggregate import LaneCounters, record_from_grade
from grading.engine.critique import judges_to_probe
from grading.engine.types import ExpectationResult, JudgeUsage, Suggestion
from grading.judges import LLMJudge, LoopThread, lane_share
from grading.judges.budget import SharedBudget, judge_limits_of
from grading.judges.judge import get
from grading.judges.model_pass import merge_claims, model_claims, model_critique
from grading.judges.nwise import LaneAnswer, apply_rank, rank_case, split_usage
from grading.judges.probes import JudgeProbes
from grading.models import JudgeProviderConfig, price_table

log = logging.getLogger(__name__)

_loop_lock = threading.Lock()
_shared_loop: LoopThread | None = None


def shared_loop() -> LoopThread:
    """The process-wide judge event-loop thread (created on first use)."""
    global _shared_loop
    with _loop_lock:
        if _shared_loop is None or _shared_loop.closed:
            _shared_loop = LoopThread(name="run-judges")
        return _shared_loop


def _spec_of(run: Any) -> Any:
    from runs.packdata import version_data

    key = run.input_set.key if run.input_set_id else None
    return version_data(run.pack_version, key).spec


def judge_for_workspace(workspace_id: int, *, budget: Any = None) -> LLMJudge | None:
    config = JudgeProviderConfig.objects.select_related("workspace").filter(workspace_id=workspace_id).first()
    if config is None:
        return None
    try:
        provider = config.provider_config()
    except DecryptionError:
        provider = None
    if provider is None:
        return _BrokenJudge(
            "the workspace's judge API key cannot be decrypted with FIELD_ENCRYPTION_KEY; enter the key "
            f"again in {settings_where(config.workspace)}"
        )
    provider.settings_where = settings_where(config.workspace)
    return LLMJudge(provider, budget=budget, prices=price_table(), loop=shared_loop())


def settings_where(workspace: Any) -> str:
    """Where a member fixes the judge provider, as errors name it."""
    from django.urls import reverse

    return f"the workspace's Judge provider settings ({reverse('judge-provider', args=[workspace.slug])})"


def judge_for_lane(lane: Any) -> LLMJudge | None:
    from runs.models import Run, RunLane

    run = Run.objects.light().get(pk=lane.run_id)
    lanes = RunLane.objects.filter(run_id=run.pk).count()
    fresh = (
        RunLane.objects.filter(pk=lane.pk).values("judge_charged_tokens", "judge_charged_usd").first() or {}
    )
    budget = lane_share(
        judge_limits_of(_spec_of(run)),
        lanes,
        spent_tokens=int(fresh.get("judge_charged_tokens") or 0),
        spent_usd=float(fresh.get("judge_charged_usd") or 0.0),
        prices=price_table(),
    )
    return judge_for_workspace(run.workspace_id, budget=budget)


def close_judge(judge: Any) -> None:
    if judge is not None and hasattr(judge, "close"):
        judge.close()  # the shared loop itself stays up


class _BrokenJudge(LLMJudge):
    """A configured provider that cannot be used: every judge is ERROR / infra_error."""

    def __init__(self, message: str) -> None:
        self.message = message

    def evaluate(self, request: Any) -> ExpectationResult:
        from grading.engine.types import OutcomeClass, Status
        from grading.judges.judge import _result

        return _result(
            request, Status.ERROR, OutcomeClass.INFRA_ERROR, "judge_provider_error", f"ERROR: {self.message}"
        )

    def close(self) -> None:
        pass


def with_model_claims(judge: Any, grade: Any, *, evidence: Any, case: Any, spec: Any, context: Any) -> Any:
    """Add the model's claims (and their spend) to a ``CaseGrade`` of ``grade_case``."""
    if isinstance(judge, LLMJudge) and not isinstance(judge, _BrokenJudge):
        merge_claims(grade, model_claims(judge, evidence, case, context, spec, usage=grade.judge_usage))
    return grade


def grade_case_with_judge(evidence: Any, case: Any, spec: Any, *, context: Any, judge: Any = None) -> Any:
    from grading.engine.grade import grade_case

    grade = grade_case(evidence, case, spec, context=context, judge=judge)
    if judge is not None:
        try:
            with_model_claims(judge, grade, evidence=evidence, case=case, spec=spec, context=context)
        except Exception as exc:  # the claims pass never costs a case its grade
            grade.eval_feedback.setdefault("notes", []).append(
                f"model claims failed: {type(exc).__name__}: {exc}"
            )
    return grade


def record_run_judge_usage(run: Any) -> None:
    """The run's judge counters = its lanes' sums, written at the end of its scoring."""
    from runs.models import Run, RunLane, RunStatus

    sums = RunLane.objects.filter(run_id=run.pk).aggregate(
        calls=Sum("judge_calls"),
        input_tokens=Sum("judge_input_tokens"),
        output_tokens=Sum("judge_output_tokens"),
        cost=Sum("judge_cost_usd"),
    )
    # guarded: a run cancelled while it was scored keeps the figures it had at the cancel
    Run.objects.filter(pk=run.pk, status=RunStatus.SCORING).update(
        judge_calls=sums["calls"] or 0,
        judge_input_tokens=sums["input_tokens"] or 0,
        judge_output_tokens=sums["output_tokens"] or 0,
        judge_cost_usd=sums["cost"] or 0.0,
    )


def run_model_critique(run: Any, records: Iterable[Any]) -> list[dict[str, Any]]:
    """The model critique suggestions of a completed run (empty without a provider)."""

    judge = judge_for_workspace(run.workspace_id)
    if judge is None or isinstance(judge, _BrokenJudge):
        return []
    spec = _spec_of(run)
    from runs.packdata import version_data

    data = version_data(run.pack_version, run.input_set.key if run.input_set_id else None)
    by_challenge: dict[str, list[Any]] = {}
    for case, _ in data.iter_cases():
        by_challenge.setdefault(case.challenge_key, []).append(case)
    lanes, shares = _lane_shares(run, judge, spec)
    usage = JudgeUsage()
    found = model_critique(
        judge, spec, records, by_challenge, run_id=str(run.pk), budget=SharedBudget(shares), usage=usage
    )
    _charge_lanes(run, usage, [row["pk"] for row in lanes])
    return [s.to_dict() for s in found]


def _lane_shares(run: Any, judge: LLMJudge, spec: Any) -> tuple[list[dict[str, Any]], list[Any]]:
    """The run's lanes and each lane's remaining judge budget share (grading.md §6.4)."""
    from runs.models import RunLane

    lanes = list(
        RunLane.objects.filter(run_id=run.pk)
        .order_by("pk")  # the order _charge_lanes books the shares in
        .values("pk", "judge_charged_tokens", "judge_charged_usd")
    )
    limits = judge_limits_of(spec)
    shares = [
        lane_share(
            limits,
            len(lanes),
            spent_tokens=row["judge_charged_tokens"],
            spent_usd=row["judge_charged_usd"],
            prices=judge.budget.prices,
        )
        for row in lanes
    ]
    return lanes, shares


def run_judge_probes(run: Any, cases: Iterable[tuple[Any, Any]]) -> dict[tuple[str, str], list[Suggestion]]:
    """``critique.probe_judges``: each per-case judge on the empty baseline, once per case,
    charged to the run's judge budget (split over the lanes, never to an agent). Returns the
    ``trivially_satisfied`` findings per (challenge key, case key); empty when the pack does
    not ask for judge probes or the workspace has no working judge provider."""
    spec = _spec_of(run)
    if not judges_to_probe(spec):
        return {}
    judge = judge_for_workspace(run.workspace_id)
    if judge is None or isinstance(judge, _BrokenJudge):
        return {}
    lanes, shares = _lane_shares(run, judge, spec)
    probes = JudgeProbes(judge, spec, SharedBudget(shares))
    found = {(case.challenge_key, case.case_key): probes.findings(case, context) for case, context in cases}
    _charge_lanes(run, probes.usage, [row["pk"] for row in lanes])
    return {key: value for key, value in found.items() if value}


def _charge_lanes(run: Any, usage: JudgeUsage, lane_ids: list[int]) -> bool:
    """Book a run-level judge pass's spend (critique, judge probes) on the lanes, split
    evenly; False (nothing booked) when the run was cancelled meanwhile.

    A cancelled run's figures never change after the cancel (EXECUTION.md), judge counters
    included: as an n_wise answer that lands after the cancel is dropped with its spend, and a
    dispatcher's call in flight is not written, so is the spend of a critique (or probe)
    call that was in flight when the cancel landed. The call did happen: it is logged.
    Checked under the lanes' locks, taken in id order as a cancel takes them before it moves
    the run: the cancel committed before this read, or waits for this write."""
    from runs.models import Run, RunLane, RunStatus

    if not usage.calls or not lane_ids:
        return False
    with transaction.atomic():
        list(RunLane.objects.select_for_update().filter(pk__in=lane_ids).order_by("pk").values_list("pk"))
        if Run.objects.filter(pk=run.pk, status=RunStatus.CANCELLED).exists():
            log.info(
                "run %s was cancelled while a judge pass ran: its %d call(s) (%d input, %d output"
                " tokens, $%s) are not booked on the run",
                run.pk,
                usage.calls,
                usage.input_tokens,
                usage.output_tokens,
                usage.cost_usd,
            )
            return False
        for lane_id, share in zip(sorted(lane_ids), split_usage(usage, len(lane_ids)), strict=True):
            RunLane.objects.filter(pk=lane_id).update(
                judge_calls=F("judge_calls") + share.calls,
                judge_input_tokens=F("judge_input_tokens") + share.input_tokens,
                judge_output_tokens=F("judge_output_tokens") + share.output_tokens,
                judge_cost_usd=F("judge_cost_usd") + (share.cost_usd or 0.0),
                judge_charged_tokens=F("judge_charged_tokens") + share.charged()[0],
                judge_charged_usd=F("judge_charged_usd") + share.charged()[1],
            )
    return True


def rank_run(run: Any) -> int:
    """The n_wise pass of a run (see the module docstring). Returns the items re-graded."""
    from runs.dispatch import lane_context_for
    from runs.models import RunItem, RunLane
    from runs.recording import STATUS_COLUMNS, ItemKey, case_findings, grade_context, rebuild_evidence

    spec = _spec_of(run)
    decls = [j for j in get(spec, "llm_judges", []) or [] if str(get(j, "mode", "")) == "n_wise"]
    if not decls:
        return 0
    judge = judge_for_workspace(run.workspace_id)
    if judge is None or isinstance(judge, _BrokenJudge):
        return 0  # the pending_rank results stay, visibly NOT_EVALUATED
    lanes = {lane.pk: lane for lane in RunLane.objects.filter(run_id=run.pk).select_related("deployment")}
    contexts = {pk: lane_context_for(lane, run) for pk, lane in lanes.items()}
    limits = judge_limits_of(spec)
    shared = SharedBudget(
        [
            lane_share(
                limits,
                len(lanes),
                spent_tokens=lane.judge_charged_tokens,
                spent_usd=lane.judge_charged_usd,
                prices=judge.budget.prices,
            )
            # in the order the ranking's spend is booked (sorted lane keys, split_usage)
            for lane in sorted(lanes.values(), key=lambda lane: str(lane.pk))
        ]
    )
    items = (
        RunItem.objects.filter(run_id=run.pk)
        .filter(evidence__isnull=False)
        .exclude(status="")
        .order_by("challenge_key", "case_key", "repetition", "lane_id")
    )
    changed = 0
    checks = {str(get(c, "key")): c for c in get(spec, "post_execution_checks", []) or []}
    for (challenge, case_key, rep), group in _consecutive_groups(items.iterator(chunk_size=500)):
        pending = [d for d in decls if any(_pending(item.grade, str(get(d, "key"))) for item in group)]
        if not pending:
            continue  # already ranked (finalize ran before): never pay twice
        if not still_scoring(run.pk):
            break  # cancelled meanwhile: no judge call more, nothing written into it
        prepared = []
        for item in group:
            ctx = contexts[item.lane_id]
            case, base = ctx.data.case(challenge, case_key)
            evidence = rebuild_evidence(ctx, base, item.evidence)
            key = ItemKey(item.pk, challenge, case_key, rep, item.attempt_count)
            findings = case_findings(ctx, case, base)
            context = grade_context(ctx, key, base, attempt=item.attempt_count, findings=findings)
            prepared.append((item, case, evidence, context))
        answers = [LaneAnswer(str(item.lane_id), ev, case, context) for item, case, ev, context in prepared]
        ranked: dict[str, dict[str, ExpectationResult]] = {}
        shares: dict[str, JudgeUsage] = {}
        for decl in pending:
            out = rank_case(judge, decl, answers, checks=checks, budget=shared)  # type: ignore[arg-type]
            for (lane_key, result), share in zip(
                sorted(out.results.items()), split_usage(out.usage, len(out.results)), strict=True
            ):
                ranked.setdefault(lane_key, {})[str(get(decl, "key"))] = result
                shares.setdefault(lane_key, JudgeUsage()).add(share)
        for item, case, evidence, context in prepared:
            lane_key = str(item.lane_id)
            if lane_key not in ranked:
                continue
            grade = apply_rank(
                item.grade,
                ranked[lane_key],
                evidence=evidence,
                case=case,
                spec=spec,
                context=context,
                usage_share=shares.get(lane_key),
            )
            if not _write_item(item, grade.to_dict(), shares.get(lane_key), STATUS_COLUMNS):
                return changed  # cancelled while this case was ranked: its answer is dropped
            changed += 1
    return changed


def still_scoring(run_id: Any, *, locked: bool = False, or_cancelled: bool = False) -> bool:
    """Whether the run is still in ``scoring`` (a cancel moves it on while it is scored) and,
    when this thread scores it (under ``scoring_lock``'s lease), the lease is still its own:
    a worker whose lease lapsed (not renewed in time) and was taken over stops as for a
    cancel, rather than pay the judge calls again beside the new owner and write over its
    grades; it logs why. ``locked`` (in a transaction, after the run's lanes, as a cancel
    takes them): the run's row stays locked until the transaction ends, so no cancel and no
    claim of the lease lands between this answer and the writes it guards. ``or_cancelled``:
    a run cancelled since counts too (the lease alone decides), for a write that completes
    what was written before the cancel."""
    from runs.models import Run, RunStatus
    from runs.scoring import lease_held_here

    statuses = (RunStatus.SCORING, RunStatus.CANCELLED) if or_cancelled else (RunStatus.SCORING,)
    scoring = Run.objects.filter(pk=run_id, status__in=statuses)
    if locked:
        scoring = scoring.select_for_update()
    owner = lease_held_here(run_id)
    if owner is None:
        return scoring.exists()
    row = scoring.values_list("scoring_owner", flat=True).first()
    if row is not None and row != owner:
        log.warning(
            "run %s: this worker's scoring lease lapsed and another process took the run over;"
            " this scoring stops and writes nothing more (the new owner scores the run)",
            run_id,
        )
    return row == owner


def _consecutive_groups(items: Iterable[Any]) -> Iterator[tuple[tuple[str, str, int], list[Any]]]:
    """The items of one (challenge, case, repetition) at a time, from a stream ordered by
    that key: only one group's items are held, never the run's."""
    key: tuple[str, str, int] | None = None
    group: list[Any] = []
    for item in items:
        item_key = (item.challenge_key, item.case_key, item.repetition)
        if item_key != key:
            if group:
                yield key, group  # type: ignore[misc]
            key, group = item_key, []
        group.append(item)
    if group:
        yield key, group  # type: ignore[misc]


def _pending(grade: Any, key: str) -> bool:
    for e in (grade or {}).get("expectations") or []:
        if e.get("key") == key:
            return e.get("reason_code") == "pending_rank"
    return False


def _write_item(item: Any, doc: dict[str, Any], spend: JudgeUsage | None, columns: dict[str, str]) -> bool:
    """Writes the ranked grade; False (nothing written) when the run left ``scoring``."""
    from runs.models import GradeRevision, RunItem, RunLane
    from runs.storable import storable

    doc = storable(doc)  # a judge's text may hold NUL characters
    with transaction.atomic():
        lane = RunLane.objects.select_for_update().get(pk=item.lane_id)
        # Under the lane's lock: a cancel locks the run's lanes before it moves the run, so
        # it either committed before this read or waits for this write; the run's row locked
        # too, so the lease is not taken over before this write commits.
        if not still_scoring(item.run_id, locked=True):
            return False
        old = record_from_grade(item.grade or {})
        new = record_from_grade(doc)
        old.latency_ms = new.latency_ms = item.latency_ms
        counters = LaneCounters.from_dict(lane.counters) if lane.counters else None
        if counters is not None:
            counters.remove(old)
            counters.add(new)
            lane.counters = counters.to_dict()
        old_col, new_col = columns.get(item.status), columns.get(str(doc.get("status")))
        updates: dict[str, Any] = {"counters": lane.counters}
        if old_col != new_col:
            if old_col:
                updates[old_col] = F(old_col) - 1
            if new_col:
                updates[new_col] = F(new_col) + 1
        score = new.score
        if item.score is not None:
            updates["score_sum"] = F("score_sum") - item.score
            updates["scored"] = F("scored") - 1
        if score is not None:
            updates["score_sum"] = (updates.get("score_sum") or F("score_sum")) + score
            updates["scored"] = (updates.get("scored") or F("scored")) + 1
        if spend is not None and spend.calls:
            updates["judge_calls"] = F("judge_calls") + spend.calls
            updates["judge_input_tokens"] = F("judge_input_tokens") + spend.input_tokens
            updates["judge_output_tokens"] = F("judge_output_tokens") + spend.output_tokens
            updates["judge_cost_usd"] = F("judge_cost_usd") + (spend.cost_usd or 0.0)
            charged_tokens, charged_usd = spend.charged()
            updates["judge_charged_tokens"] = F("judge_charged_tokens") + charged_tokens
            updates["judge_charged_usd"] = F("judge_charged_usd") + charged_usd
        RunLane.objects.filter(pk=lane.pk).update(**updates)
        # the pre-rank grade stays viewable, numbered as a rescore numbers the grade it
        # supersedes (the item's revision); the ranked grade is the item's next revision
        GradeRevision.objects.bulk_create(
            [
                GradeRevision(
                    item_id=item.pk,
                    revision=item.scoring_revision,
                    status=item.status,
                    outcome_class=item.outcome_class,
                    score=item.score,
                    grade=item.grade or {},
                )
            ],
            ignore_conflicts=True,
        )
        RunItem.objects.filter(pk=item.pk).update(
            grade=doc,
            status=str(doc.get("status") or ""),
            outcome_class=str(doc.get("outcome_class") or ""),
            reason_code=str(doc.get("reason_code") or "")[:100],
            score=score,
            scoring_revision=item.scoring_revision + 1,
        )
    return True
