"""The engine side of ``manage.py grade`` (interfaces.md §5).

The command parses the pack, picks the input set, builds one ``(CaseDef, GradeContext)``
per case (the context carrying the challenge: key, instructions, rendered instructions,
assets, tool policy, working directory) and calls :func:`grade_offline` with the results
file's bytes. The returned dict is exactly the ``--json`` document; :func:`offline_exit_code`
and :func:`render_text` give the exit code and the readable table.

Reading errors raise :class:`~grading.engine.reader.InvalidResults` (exit 2, its
``to_dict()`` is the error body). Same inputs give the same document except ``timing``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from .aggregate import STATUSES, CaseRecord, aggregate_lane, record_from_grade
from .critique import probe_case, run_health
from .reader import DEFAULT_DEPLOYMENT, Execution, evidence_of, read_results
from .stats import round4, round_interval
from .types import CaseDef, GradeContext

OFFLINE_RUN_ID = "offline"
NO_RESULT_MESSAGE = "no result line for this case in the results file"

GradeFn = Callable[..., Any]
NoResultFn = Callable[[CaseDef, GradeContext], Any]


def _default_grade() -> GradeFn:
    from .grade import grade_case

    return grade_case


def _default_no_result() -> NoResultFn:
    from .grade import CaseGrade

    def no_result(case: CaseDef, context: GradeContext) -> Any:
        return CaseGrade.no_result(case, context, reason_code="no_result", message=NO_RESULT_MESSAGE)

    return no_result


def _as_dict(grade: Any) -> dict[str, Any]:
    return grade.to_dict() if hasattr(grade, "to_dict") else dict(grade)


def _execution_context(
    base: GradeContext,
    *,
    deployment: str,
    repetition: int,
    pack_slug: str,
    pack_number: int,
    findings: list[Any] | None,
) -> GradeContext:
    return dataclasses.replace(
        base,
        run_id=OFFLINE_RUN_ID,
        lane_id=deployment,
        deployment=deployment,
        repetition=repetition,
        attempt=1,
        pack_slug=pack_slug or base.pack_slug,
        pack_version=pack_number or base.pack_version,
        deployment_kind="trace_import",
        case_findings=findings,
    )


def grade_offline(
    *,
    spec: Any,
    pack_slug: str,
    pack_number: int,
    input_set_name: str | None,
    cases: Sequence[tuple[CaseDef, GradeContext]],
    results: bytes | str,
    judge: Any = None,
    grade: GradeFn | None = None,
    no_result: NoResultFn | None = None,
    on_case: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Grade a results file against the cases of one input set; the ``--json`` document.

    ``on_case``: each case entry is handed to it once graded and not kept (the document's
    ``cases`` is then empty; the lanes and feedback are computed from compact records), so a
    caller can write a document of any size without holding it."""
    grade = grade or _default_grade()
    no_result = no_result or _default_no_result()
    contexts = {(c.challenge_key, c.case_key): ctx for c, ctx in cases}
    result_set = read_results(results, [c for c, _ in cases], contexts=contexts, keep_evidence=False)
    deployments = result_set.deployments or [DEFAULT_DEPLOYMENT]
    by_lane_case: dict[tuple[str, str, str], list[Execution]] = {}
    for ex in result_set.executions:
        by_lane_case.setdefault((ex.deployment, ex.challenge_key, ex.case_key), []).append(ex)

    findings: dict[tuple[str, str], list[Any]] = {}

    def case_findings(case: CaseDef, base: GradeContext) -> list[Any]:
        key = (case.challenge_key, case.case_key)
        if key not in findings:
            ctx = _execution_context(
                base,
                deployment=DEFAULT_DEPLOYMENT,
                repetition=1,
                pack_slug=pack_slug,
                pack_number=pack_number,
                findings=[],
            )
            findings[key] = probe_case(spec, case, ctx, grade=grade)
        return findings[key]

    entries: list[dict[str, Any]] = []
    records: list[CaseRecord] = []
    keep = on_case or entries.append
    for dep in deployments:
        for case, base in cases:
            executions = by_lane_case.get((dep, case.challenge_key, case.case_key), [])
            if not executions:
                ctx = _execution_context(
                    base,
                    deployment=dep,
                    repetition=1,
                    pack_slug=pack_slug,
                    pack_number=pack_number,
                    findings=[],
                )
                doc = _as_dict(no_result(case, ctx))
                records.append(record_from_grade(doc, content_hash=case.content_hash))
                keep(_entry(dep, case, 1, doc))
                continue
            probe = case_findings(case, base)
            for ex in executions:
                ctx = _execution_context(
                    base,
                    deployment=dep,
                    repetition=ex.repetition,
                    pack_slug=pack_slug,
                    pack_number=pack_number,
                    findings=list(probe),
                )
                evidence = evidence_of(ex, contexts)  # one execution's evidence at a time
                doc = _as_dict(grade(evidence, case, spec, context=ctx, judge=judge))
                records.append(
                    record_from_grade(doc, metrics=evidence.metrics, content_hash=case.content_hash)
                )
                keep(_entry(dep, case, ex.repetition, doc))

    lanes = []
    for dep in deployments:
        lane = aggregate_lane(
            [r for r in records if r.deployment == dep], run_id=OFFLINE_RUN_ID, deployment=dep
        )
        lanes.append(
            {
                "deployment": dep,
                "counts": {s: lane.micro.counts.get(s, 0) for s in STATUSES},
                "pass_rate": round4(lane.micro.pass_rate),
                "pass_rate_interval": round_interval(lane.micro.pass_rate_interval),
                "mean_score": round4(lane.micro.mean_score),
                "mean_score_interval": round_interval(lane.micro.mean_score_interval),
            }
        )
    return {
        "pack": {"slug": pack_slug, "number": pack_number},
        "input_set": input_set_name,
        "cases": entries,
        "lanes": lanes,
        "eval_feedback": run_health(records, spec).to_dict(),
    }


def _entry(deployment: str, case: CaseDef, repetition: int, doc: dict[str, Any]) -> dict[str, Any]:
    return {
        "deployment": deployment,
        "challenge_key": case.challenge_key,
        "case_key": case.case_key,
        "repetition": repetition,
        "grading": doc,
    }


def offline_exit_code(document: dict[str, Any]) -> int:
    """0 when no case is FAILED and at least one PASSED; 1 otherwise (2 is the caller's,
    for invalid input)."""
    statuses = [(c.get("grading") or {}).get("status") for c in document.get("cases") or []]
    return 0 if "FAILED" not in statuses and "PASSED" in statuses else 1


# ---------------------------------------------------------------------------
# Readable output
# ---------------------------------------------------------------------------


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value)


def _fmt_interval(value: Any, interval: Any) -> str:
    if value is None:
        return "-"
    if not interval:
        return _fmt(float(value))
    return f"{float(value):.4f} [{float(interval[0]):.4f}, {float(interval[1]):.4f}]"


def _table(header: list[str], rows: list[list[str]], right: set[int] = frozenset()) -> list[str]:  # type: ignore[assignment]
    widths = [
        max(len(header[i]), *(len(r[i]) for r in rows)) if rows else len(header[i])
        for i in range(len(header))
    ]

    def line(cells: list[str]) -> str:
        return "  ".join(
            cell.rjust(widths[i]) if i in right else cell.ljust(widths[i]) for i, cell in enumerate(cells)
        ).rstrip()

    return [line(header), line(["-" * w for w in widths]), *(line(r) for r in rows)]


def render_text(document: dict[str, Any]) -> str:
    """The readable form of the offline document (the output without ``--json``)."""
    pack = document.get("pack") or {}
    input_set = document.get("input_set")
    out = [
        f"Pack {pack.get('slug')} v{pack.get('number')}, input set {input_set if input_set else '(none)'}",
        "",
    ]
    lane_rows = []
    for lane in document.get("lanes") or []:
        counts = lane.get("counts") or {}
        lane_rows.append(
            [
                str(lane.get("deployment")),
                *(str(counts.get(s, 0)) for s in STATUSES),
                _fmt_interval(lane.get("pass_rate"), lane.get("pass_rate_interval")),
                _fmt_interval(lane.get("mean_score"), lane.get("mean_score_interval")),
            ]
        )
    out += _table(
        [
            "deployment",
            "passed",
            "failed",
            "not_eval",
            "unavail",
            "error",
            "pass rate [95% CI]",
            "mean score [95% CI]",
        ],
        lane_rows,
        right={1, 2, 3, 4, 5},
    )
    out.append("")
    case_rows = []
    for c in document.get("cases") or []:
        g = c.get("grading") or {}
        score = (g.get("scorecard") or {}).get("overall_score")
        case_rows.append(
            [
                str(c.get("deployment")),
                str(c.get("challenge_key")),
                str(c.get("case_key")),
                str(c.get("repetition")),
                str(g.get("status")),
                _fmt(float(score))
                if isinstance(score, (int, float)) and not isinstance(score, bool)
                else "-",
                str(g.get("reason_code") or ""),
            ]
        )
    out += _table(
        ["deployment", "challenge", "case", "rep", "status", "score", "reason"], case_rows, right={3, 5}
    )
    feedback = document.get("eval_feedback") or {}
    out.append("")
    out.append(f"Eval feedback: {feedback.get('overall', '')}")
    for s in feedback.get("suggestions") or []:
        who = f"{s['assertion']}: " if s.get("assertion") else ""
        out.append(f"  - [{s.get('finding', '')}] {who}{s.get('reason', '')}")
    return "\n".join(out) + "\n"
