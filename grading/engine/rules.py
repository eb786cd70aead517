"""Rule validators in the 2501 style (grading.md §5.1-§5.4): where-targets mapped onto the
evidence, pattern_match, job_resolution_status, task_count, compliance and gates."""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from .spec import JOB_FIELDS as SPEC_JOB_FIELDS
from .spec import TASK_FIELDS as SPEC_TASK_FIELDS
from .types import (
    Evidence,
    EvidenceText,
    ExpectationResult,
    GradeContext,
    OutcomeClass,
    ResultKind,
    Status,
    Task,
    canonical_json,
)
from .validators.common import PatternError, cfg, clip, compile_re2, quote, search_span

DEFAULT_SHELL_TOOLS = ("Bash", "bash", "shell", "exec", "run_command", "terminal")
PLAN_TOOLS = ("TodoWrite", "update_plan", "write_todos")
# Enum members read per case: ``Status.PASSED`` is a class attribute lookup through the enum
# metaclass (~0.1 us on Python 3.11), a module name is not.
_PASSED, _FAILED, _RULE = Status.PASSED, Status.FAILED, ResultKind.RULE
_PASS, _FAIL = OutcomeClass.PASS, OutcomeClass.FAIL
# The where targets (pack-format §7, declared with the spec models).
TASK_FIELDS = frozenset(SPEC_TASK_FIELDS)
JOB_FIELDS = frozenset(SPEC_JOB_FIELDS)


def rule_result(
    key: str,
    text: str,
    status: Status,
    klass: OutcomeClass,
    evidence: EvidenceText,
    score: float | None,
    reason: str | None,
    required: bool,
    kind: ResultKind = ResultKind.RULE,
) -> ExpectationResult:
    """A rule's or guard's expectation; a required one gates (``gating``, grading.md §5.4)."""
    return ExpectationResult(key, kind, text, status, klass, evidence, score, None, reason, required)


def _command_text(args: dict[str, Any]) -> str | None:
    cmd = args.get("command", args.get("cmd"))
    if isinstance(cmd, list):
        return " ".join(str(c) for c in cmd)
    if isinstance(cmd, str):
        return cmd
    return None


def task_commands(evidence: Evidence, shell_tools: Collection[str] = DEFAULT_SHELL_TOOLS) -> list[list[str]]:
    """Each task's executed_commands: the reported tasks', else per invocation the command
    text of its shell tool calls (§5.2), without deriving the other task fields."""
    if evidence.tasks is not None:
        return [t.executed_commands for t in evidence.tasks]
    calls = evidence.tool_calls
    n = len(calls)
    out = []
    for inv in evidence.invocations:
        commands = []
        for k in inv.tool_call_indexes:
            if k < n:
                call = calls[k]
                if call.name in shell_tools:
                    cmd = _command_text(call.args)
                    if cmd is not None:
                        commands.append(cmd)
        out.append(commands)
    return out


def command_text(evidence: Evidence, shell_tools: Collection[str] = DEFAULT_SHELL_TOOLS) -> str:
    """The job's executed_commands: each task's commands one per line, tasks one line apart
    (field_values of job scope, without deriving or dispatching)."""
    return "\n".join(["\n".join(commands) for commands in task_commands(evidence, shell_tools)])


def derive_tasks(
    evidence: Evidence,
    context: GradeContext | None = None,
    shell_tools: Collection[str] = DEFAULT_SHELL_TOOLS,
) -> list[Task]:
    """The response's tasks when reported, else one task per invocation (§5.2)."""
    if evidence.tasks is not None:
        return evidence.tasks
    commands = task_commands(evidence, shell_tools)
    calls = evidence.tool_calls
    tasks = []
    last = len(evidence.invocations) - 1
    for i, inv in enumerate(evidence.invocations):
        inv_calls = [calls[k] for k in inv.tool_call_indexes if k < len(calls)]
        plans = [canonical_json(x.args) for x in inv_calls if x.name in PLAN_TOOLS]
        if plans:
            plan = "\n".join(plans)
        elif i == 0 and inv_calls:
            plan = next((m.content for m in evidence.messages if m.role == "assistant"), "")
        else:
            plan = ""
        summary = (
            inv.final_response
            if inv.final_response is not None
            else (evidence.final_output if i == last else "")
        )
        description = (
            inv.user_content
            if inv.user_content is not None
            else (evidence.rendered_prompt.instructions if i == 0 else "")
        )
        tasks.append(Task(description or "", plan, summary or "", commands[i]))
    return tasks


def rule_needs_tasks(rule: Any) -> bool:
    """Whether grading the rule reads derived tasks beyond their executed_commands."""
    validator = cfg(rule, "validator")
    if validator == "job_resolution_status":
        return False
    return not (validator == "pattern_match" and cfg(rule, "where") == "executed_commands")


class FieldUnavailable(Exception):
    def __init__(self, reason: str, status: Status, klass: OutcomeClass, message: str) -> None:
        super().__init__(message)
        self.reason, self.status, self.klass, self.message = reason, status, klass, message


def _task_field(task: Task, where: str, evidence: Evidence) -> str:
    if where == "executed_commands":
        return "\n".join(task.executed_commands)
    if where == "task_summary":
        return task.summary
    if where == "task_description":
        return task.description
    if where == "task_plan":
        return task.plan
    if where == "agent_messages":
        return "\n".join(m.content for m in evidence.messages if m.role == "assistant")
    rp = evidence.rendered_prompt
    parts = [p for p in (rp.system, canonical_json(rp.tool_policy) if rp.tool_policy else None) if p]
    return "\n".join(parts)


def _channel_check(where: str, evidence: Evidence) -> None:
    ch = evidence.channels
    if where == "executed_commands" or where == "task_plan":
        ok = ch.tasks if evidence.tasks is not None else ch.tool_calls
    else:
        ok = True
    if not ok or (
        where in TASK_FIELDS and where != "operational_rules" and not ch.tasks and not ch.tool_calls
    ):
        raise FieldUnavailable(
            "channel_unavailable",
            Status.UNAVAILABLE,
            OutcomeClass.UNAVAILABLE,
            f"UNAVAILABLE: {where} needs the tasks or tool_calls channel, which this lane does not report",
        )


def field_values(
    where: str,
    evidence: Evidence,
    tasks: list[Task] | None,
    job: bool,
    shell_tools: Collection[str] = DEFAULT_SHELL_TOOLS,
) -> list[str]:
    """One text per task for task scope; a single text for job scope. ``tasks`` None: derive
    what the field needs (only the commands for executed_commands)."""
    _channel_check(where, evidence)
    if where == "executed_commands" and tasks is None:
        values = ["\n".join(c) for c in task_commands(evidence, shell_tools)]
        return ["\n".join(values)] if job else values
    if tasks is None:
        tasks = derive_tasks(evidence, None, shell_tools)
    if where in TASK_FIELDS:
        values = [_task_field(t, where, evidence) for t in tasks]
        if where == "agent_messages" and evidence.tasks is None:
            values = values[:1] if values else []
        return ["\n".join(values)] if job else values
    if not job:
        raise FieldUnavailable(
            "invalid_config", Status.NOT_EVALUATED, OutcomeClass.PACK_ERROR, f"{where} is a job-level field"
        )
    if where == "job_resolution":
        r = evidence.resolution
        return [r.summary if r is not None and r.summary is not None else evidence.final_output]
    if where == "job_plan":
        r = evidence.resolution
        if r is not None and r.plan is not None:
            return [r.plan]
        return [tasks[0].plan if tasks else ""]
    if where == "gateway_messages":
        gw = [m for m in evidence.messages if m.origin == "gateway"]
        opening = evidence.messages[0] if evidence.messages else None
        gw = [m for m in gw if m is not opening]
        if not gw:
            raise FieldUnavailable(
                "not_applicable",
                Status.NOT_EVALUATED,
                OutcomeClass.UNAVAILABLE,
                "NOT_EVALUATED: no gateway messages in this execution",
            )
        return ["\n".join(f"{m.role}: {m.content}" for m in gw)]
    if where == "gateway_summary":
        r = evidence.resolution
        if r is None or r.gateway_summary is None:
            raise FieldUnavailable(
                "not_applicable",
                Status.NOT_EVALUATED,
                OutcomeClass.UNAVAILABLE,
                "NOT_EVALUATED: no gateway summary reported",
            )
        return [r.gateway_summary]
    raise FieldUnavailable(
        "invalid_config", Status.NOT_EVALUATED, OutcomeClass.PACK_ERROR, f"unknown where target {where!r}"
    )


def derived_status(evidence: Evidence) -> str:
    r = evidence.resolution
    if r is not None and r.status is not None:
        return r.status
    has_output = evidence.final_output != ""  # §1.4 rule 7: never trimmed, so "\n" is an output
    if evidence.limit_hit and has_output:
        return "partial"
    if evidence.limit_hit or evidence.execution_error is not None:
        return "agentic_failure"
    if has_output:
        return "success"
    if not evidence.tool_calls:
        return "no_action"
    return "agentic_failure"


def _line_at(text: str, offset: int) -> str:
    start = text.rfind("\n", 0, offset) + 1
    end = text.find("\n", offset)
    return text[start : end if end >= 0 else len(text)]


def _outcome(key: str, label: str, ok: bool, evidence: EvidenceText, required: bool) -> ExpectationResult:
    if ok:
        return rule_result(key, label, Status.PASSED, OutcomeClass.PASS, evidence, 1.0, None, required)
    return rule_result(key, label, Status.FAILED, OutcomeClass.FAIL, evidence, 0.0, None, required)


def _outcome_of(
    key: str, label: str, required: bool, ok: bool
) -> Callable[[EvidenceText], ExpectationResult]:
    """``_outcome`` with everything but the evidence bound: a prepared rule's PASSED or FAILED."""
    status, klass, score = (_PASSED, _PASS, 1.0) if ok else (_FAILED, _FAIL, 0.0)

    def outcome(evidence: EvidenceText) -> ExpectationResult:
        return ExpectationResult(key, _RULE, label, status, klass, evidence, score, None, None, required)

    return outcome


def _ungraded(
    key: str, label: str, status: Status, klass: OutcomeClass, evidence: str, reason: str, required: bool
) -> ExpectationResult:
    return rule_result(key, label, status, klass, clip(evidence), None, reason, required)


# A rule bound to its declaration: (evidence, tasks) -> outcome.
PreparedRule = Callable[[Evidence, list[Task] | None], ExpectationResult]


def prepare_rule(
    key: str, scope: str, rule: Any, compiled: Any = None, shell_tools: Collection[str] = DEFAULT_SHELL_TOOLS
) -> PreparedRule:
    """The rule's declaration read once (label, required, negate, pattern compiled); the
    result grades one case's evidence. Never raises on a bad declaration: it is graded as a
    pack error."""
    required = bool(cfg(rule, "required", True))
    negate = bool(cfg(rule, "negate", False))
    validator = cfg(rule, "validator")
    label = str(cfg(rule, "label", key))
    job = scope == "job"
    suffix = " (negated)" if negate else ""

    def constant(status: Status, klass: OutcomeClass, evidence: str, reason: str) -> PreparedRule:
        def grade(evidence_: Evidence, tasks: list[Task] | None) -> ExpectationResult:
            return _ungraded(key, label, status, klass, evidence, reason, required)

        return grade

    if validator == "task_count":
        lo, hi = cfg(rule, "min"), cfg(rule, "max")
        bounds = f"[{'' if lo is None else lo}, {'' if hi is None else hi}]"

        def task_count(evidence: Evidence, tasks: list[Task] | None) -> ExpectationResult:
            if not evidence.channels.tasks and evidence.tasks is None:
                return _ungraded(
                    key,
                    label,
                    Status.UNAVAILABLE,
                    OutcomeClass.UNAVAILABLE,
                    "UNAVAILABLE: lane reports no tasks (black_box)",
                    "channel_unavailable",
                    required,
                )
            n = len(tasks if tasks is not None else derive_tasks(evidence, None, shell_tools))
            cond = (lo is None or n >= lo) and (hi is None or n <= hi)
            return _outcome(key, label, cond != negate, f"{n} tasks; bounds {bounds}{suffix}", required)

        return task_count
    if validator not in ("job_resolution_status", "pattern_match"):
        return constant(
            Status.NOT_EVALUATED,
            OutcomeClass.PACK_ERROR,
            f"unknown rule validator {validator!r}",
            "invalid_config",
        )
    pattern = str(cfg(rule, "pattern", ""))
    try:
        if validator == "job_resolution_status":
            rx = compiled or compile_re2(f"(?i)^(?:{pattern})$")
        else:
            rx = compiled or compile_re2("(?im)" + pattern)
    except PatternError as exc:
        return constant(
            Status.NOT_EVALUATED,
            OutcomeClass.PACK_ERROR,
            f"{key}.pattern: pattern {quote(pattern)} is not a valid RE2 pattern: {exc}",
            "invalid_pattern",
        )

    if validator == "job_resolution_status":

        def resolution_status(evidence: Evidence, tasks: list[Task] | None) -> ExpectationResult:
            status = derived_status(evidence)
            cond = search_span(rx, status) is not None
            source = (
                "reported"
                if evidence.resolution is not None and evidence.resolution.status is not None
                else "derived"
            )
            return _outcome(
                key,
                label,
                cond != negate,
                lambda: (
                    f"job status {quote(status)} ({source}) {'matches' if cond else 'does not match'}"
                    f" ^(?:{pattern})${suffix}"
                ),
                required,
            )

        return resolution_status

    where = str(cfg(rule, "where", ""))
    job_commands = job and where == "executed_commands"  # the usual rule: read the commands alone
    passed = _outcome_of(key, label, required, not negate)
    failed = _outcome_of(key, label, required, negate)

    def pattern_match(evidence: Evidence, tasks: list[Task] | None) -> ExpectationResult:
        try:
            if job_commands:
                _channel_check(where, evidence)
                values = [command_text(evidence, shell_tools)]
            else:
                values = field_values(where, evidence, tasks, job, shell_tools)
        except FieldUnavailable as exc:
            return _ungraded(key, label, exc.status, exc.klass, exc.message, exc.reason, required)
        for i, text in enumerate(values):
            if not text:
                continue
            span = search_span(rx, text)
            if span is not None:
                return passed((_hit_text, i, span[0], text))  # rendered on first read
        return failed((_miss_text, values))

    def _hit_text(i: int, offset: int, text: str) -> str:
        where_txt = f"task {i}" if not job else "job"
        line = _line_at(text, offset)
        return f"{where_txt} {where} matches {quote(pattern)} at offset {offset}: {quote(line, 200)}{suffix}"

    def _miss_text(values: list[str]) -> str:
        total = sum(len(v) for v in values)
        searched = f"{len(values)} {'task' if not job else 'field'}{'s' if len(values) != 1 else ''} searched"
        return f"no match for {quote(pattern)} in {where} ({total} code points, {searched}){suffix}"

    return pattern_match


def grade_rule(
    key: str, scope: str, rule: Any, evidence: Evidence, tasks: list[Task] | None, compiled: Any = None
) -> ExpectationResult:
    """One rule on one case (``prepare_rule`` once per spec is the fast way)."""
    return prepare_rule(key, scope, rule, compiled)(evidence, tasks)


def compliance(outcomes: list[ExpectationResult]) -> tuple[float | None, str, Status, OutcomeClass | None]:
    """(compliance score, gate, gate status for the verdict, its outcome class).

    The score is the pass rate of the graded rules; the gate fails on a failed required rule,
    else is not graded on the first required ERROR, UNAVAILABLE or NOT_EVALUATED rule (in
    that order; a NOT_EVALUATED rule of class unavailable does not count), else passes."""
    passed = graded = 0
    failed_required = False
    error = unavailable = not_evaluated = None
    for o in outcomes:
        st = o.status
        if st is _PASSED:
            passed += 1
            graded += 1
        elif st is _FAILED:
            graded += 1
            failed_required = failed_required or o.gating
        elif not o.gating:  # a required rule gates
            continue
        elif st is Status.ERROR:
            error = error or o
        elif st is Status.UNAVAILABLE:
            unavailable = unavailable or o
        elif st is Status.NOT_EVALUATED and o.outcome_class is not OutcomeClass.UNAVAILABLE:
            not_evaluated = not_evaluated or o
    score = passed / graded if graded else None
    if failed_required:
        return score, "failed", _FAILED, _FAIL
    bad = error or unavailable or not_evaluated
    if bad is not None:
        return score, "not_graded", bad.status, bad.outcome_class
    return score, "passed", _PASSED, _PASS
