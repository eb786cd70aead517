"""Rule validators (grading.md §5.1-§5.4)."""

from __future__ import annotations

import pytest

from grading.engine import evidence_from_response, grade_case
from grading.engine.rules import derive_tasks, derived_status
from grading.engine.types import CaseDef, GradeContext

BASE_VALIDATOR = {"key": "v", "type": "contains", "target": "final_output", "expected_from": "literal:"}


def grade(rules: dict, response: dict, validators=None, **kw):
    spec = {"validators": validators if validators is not None else [BASE_VALIDATOR], "rules": rules}
    ev = evidence_from_response({"final_output": "", **response}, **kw)
    return grade_case(ev, CaseDef("c", "k"), spec, context=GradeContext(case_findings=[]))


def rule_result(g, key="rules.job[0]"):
    return next(r for r in g.expectations if r.key == key)


def pm(where, pattern, scope="job", **kw):
    return {scope: [{"label": "L", "validator": "pattern_match", "where": where, "pattern": pattern, **kw}]}


def test_derived_tasks_one_per_invocation():
    ev = evidence_from_response(
        {
            "final_output": "all done",
            "messages": [
                {"role": "user", "content": "go"},
                {"role": "assistant", "content": "Plan: list then build"},
            ],
            "invocations": [
                {
                    "user_content": "first",
                    "tool_calls": [
                        {"name": "Bash", "args": {"command": "ls"}},
                        {"name": "TodoWrite", "args": {"todos": ["x"]}},
                    ],
                },
                {
                    "user_content": "second",
                    "tool_calls": [{"name": "shell", "args": {"cmd": ["make", "build"]}}],
                    "final_response": "built",
                },
            ],
        }
    )
    tasks = derive_tasks(ev)
    assert [t.executed_commands for t in tasks] == [["ls"], ["make build"]]
    assert tasks[0].plan == '{"todos":["x"]}'
    assert tasks[0].description == "first" and tasks[1].summary == "built"


TWO_INVOCATIONS = {
    "final_output": "done",
    "invocations": [
        {"user_content": "a", "tool_calls": [{"name": "Read", "args": {"path": "x"}}]},
        {"user_content": "b", "tool_calls": [{"name": "Bash", "args": {"command": "rm -rf build"}}]},
        {"user_content": "c", "tool_calls": [{"name": "Bash", "args": {"command": "ls"}}]},
    ],
}


def test_executed_commands_without_reported_tasks_are_per_invocation():
    # The rule reads only the commands (no full task derivation); the texts must be the
    # derived tasks' commands: task 1 matches, and the job text joins every task's lines.
    neg = rule_result(
        grade(pm("executed_commands", r"rm\s+-rf", "tasks", negate=True), TWO_INVOCATIONS), "rules.tasks[0]"
    )
    assert neg.status.value == "FAILED" and neg.evidence.startswith("task 1 executed_commands matches")
    job = rule_result(grade(pm("executed_commands", r"^$", "job"), TWO_INVOCATIONS))
    assert job.status.value == "PASSED"  # task 0 ran no command: an empty line in the job text
    tasks = derive_tasks(evidence_from_response(TWO_INVOCATIONS))
    assert [t.executed_commands for t in tasks] == [[], ["rm -rf build"], ["ls"]]
    # Mixed with a rule that needs full tasks, the same result.
    both = {
        "tasks": pm("executed_commands", r"rm\s+-rf", "tasks", negate=True)["tasks"]
        + pm("task_description", "^c$", "tasks")["tasks"]
    }
    g = grade(both, TWO_INVOCATIONS)
    assert rule_result(g, "rules.tasks[0]").evidence == neg.evidence
    assert rule_result(g, "rules.tasks[1]").evidence.startswith("task 2 task_description matches")


def test_pattern_match_is_case_insensitive_and_multiline():
    g = grade(pm("job_resolution", "^done$"), {"final_output": "line one\nDONE\n"})
    assert rule_result(g).status.value == "PASSED"
    assert "offset 9" in rule_result(g).evidence


def test_job_resolution_prefers_reported_summary():
    g = grade(
        pm("job_resolution", "fixed"), {"final_output": "fixed it", "resolution": {"summary": "nothing"}}
    )
    assert rule_result(g).status.value == "FAILED"


def test_tasks_rule_any_task_and_negate():
    resp = {"tasks": [{"summary": "ok"}, {"summary": "ERROR: boom"}]}
    assert (
        rule_result(grade(pm("task_summary", "error", "tasks"), resp), "rules.tasks[0]").status.value
        == "PASSED"
    )
    neg = rule_result(grade(pm("task_summary", "error", "tasks", negate=True), resp), "rules.tasks[0]")
    assert neg.status.value == "FAILED" and "task 1" in neg.evidence


def test_zero_tasks_or_empty_field_make_the_condition_false():
    r = rule_result(grade(pm("task_summary", ".*", "tasks"), {"tasks": []}), "rules.tasks[0]")
    assert r.status.value == "FAILED" and "0 tasks searched" in r.evidence
    r = rule_result(grade(pm("task_summary", ".*", "tasks", negate=True), {"tasks": []}), "rules.tasks[0]")
    assert r.status.value == "PASSED"


def test_gateway_fields_without_gateway_messages_are_not_applicable():
    g = grade(pm("gateway_messages", "x"), {})
    r = rule_result(g)
    assert (
        r.status.value == "NOT_EVALUATED"
        and r.reason_code == "not_applicable"
        and r.outcome_class.value == "unavailable"
    )
    assert g.gates["compliance"] == "passed"  # excluded from the gate
    assert g.gates["compliance_score"] is None


def test_gateway_messages_after_the_opening_prompt():
    msgs = [
        {"role": "user", "content": "ticket opened", "origin": "gateway"},
        {"role": "assistant", "content": "on it"},
        {"role": "user", "content": "customer says thanks", "origin": "gateway"},
    ]
    assert rule_result(grade(pm("gateway_messages", "thanks"), {"messages": msgs})).status.value == "PASSED"
    assert rule_result(grade(pm("gateway_messages", "opened"), {"messages": msgs})).status.value == "FAILED"


@pytest.mark.parametrize(
    ("response", "status"),
    [
        ({"final_output": "ok"}, "success"),
        ({"final_output": "", "limit_hit": True}, "agentic_failure"),
        ({"final_output": "half", "limit_hit": True}, "partial"),
        ({"final_output": ""}, "no_action"),
        # §5.3 "non-empty final output" and §1.4 rule 7 (strings never trimmed): whitespace is output
        ({"final_output": " \n"}, "success"),
        ({"final_output": "\n", "limit_hit": True}, "partial"),
        ({"final_output": "\t", "tool_calls": [{"name": "ls", "args": {}}]}, "success"),
        ({"final_output": "x", "execution_error": "crash"}, "agentic_failure"),
        ({"final_output": "x", "resolution": {"status": "Escalated"}}, "Escalated"),
    ],
)
def test_derived_job_status(response, status):
    assert derived_status(evidence_from_response(response)) == status


def test_job_resolution_status_is_anchored_and_case_insensitive():
    rules = {"job": [{"label": "s", "validator": "job_resolution_status", "pattern": "success|partial"}]}
    assert rule_result(grade(rules, {"final_output": "ok"})).status.value == "PASSED"
    rules = {"job": [{"label": "s", "validator": "job_resolution_status", "pattern": "succ"}]}
    assert rule_result(grade(rules, {"final_output": "ok"})).status.value == "FAILED"
    rules = {"job": [{"label": "s", "validator": "job_resolution_status", "pattern": "SUCCESS"}]}
    assert rule_result(grade(rules, {"final_output": "ok"})).status.value == "PASSED"


def test_task_count_bounds():
    rules = {"job": [{"label": "n", "validator": "task_count", "min": 2, "max": 3}]}
    assert rule_result(grade(rules, {"tasks": [{}, {}]})).status.value == "PASSED"
    assert rule_result(grade(rules, {"tasks": [{}]})).status.value == "FAILED"
    assert rule_result(grade(rules, {})).status.value == "FAILED"  # one derived task


def test_black_box_task_fields_are_unavailable_and_gating():
    g = grade(pm("executed_commands", "ls", "tasks"), {}, evidence_level="black_box")
    r = rule_result(g, "rules.tasks[0]")
    assert r.status.value == "UNAVAILABLE" and r.gating
    assert g.status.value == "UNAVAILABLE"


def test_bad_pattern_is_a_pack_error():
    r = rule_result(grade(pm("job_resolution", "(x"), {"final_output": "x"}))
    assert r.status.value == "NOT_EVALUATED" and r.outcome_class.value == "pack_error"


def test_informational_rules_count_in_compliance_but_never_block():
    rules = {
        "job": [
            {"label": "a", "validator": "pattern_match", "where": "job_resolution", "pattern": "ok"},
            {
                "label": "b",
                "validator": "pattern_match",
                "where": "job_resolution",
                "pattern": "never",
                "required": False,
            },
        ]
    }
    g = grade(rules, {"final_output": "ok"})
    assert g.gates["compliance_score"] == 0.5
    assert g.gates["compliance"] == "passed" and g.status.value == "PASSED"
    assert [r.gating for r in g.expectations if r.kind.value == "rule"] == [True, False]


def test_without_ground_truth_the_resolution_gate_mirrors_compliance():
    g = grade(pm("job_resolution", "ok"), {"final_output": "nope"})
    assert g.gates == {
        "compliance": "failed",
        "resolution": "failed",
        "guards": "not_graded",
        "compliance_score": 0.0,
    }


def test_ground_truth_validators_feed_the_resolution_gate():
    validators = [{**BASE_VALIDATOR, "key": "gt", "expected_from": "literal:ok", "ground_truth": True}]
    g = grade(pm("job_resolution", "."), {"final_output": "nope"}, validators=validators)
    assert g.gates["compliance"] == "passed" and g.gates["resolution"] == "failed"
    assert g.status.value == "FAILED"


def test_no_rules_means_gates_not_graded():
    g = grade_case(
        evidence_from_response({"final_output": "x"}),
        CaseDef("c", "k"),
        {"validators": [BASE_VALIDATOR]},
        context=GradeContext(case_findings=[]),
    )
    assert g.gates["compliance"] == "not_graded" and g.gates["resolution"] == "not_graded"


MISSING_REFERENCE = {
    "key": "v",
    "type": "contains",
    "target": "final_output",
    "expected_from": "case.payload.nope",
}


@pytest.mark.parametrize(
    "rules",
    [
        {"allowed_tools": ["Read"]},  # a guard that passed
        pm("gateway_messages", "x"),  # a rule that is not applicable
        pm("job_resolution", "ok", required=False),  # an informational rule that passed
        pm("job_resolution", "ok"),  # a required rule that passed
    ],
    ids=["guard", "not_applicable", "informational", "required"],
)
def test_a_case_with_rules_passes_only_when_its_scorecard_passes_too(rules):
    # §5.4: a case with rules passes only when both gates pass, the scorecard passes and no
    # guard failed. With the only validator a pack error the scorecard grades nothing, but
    # the gates passed (vacuously, or on a rule): the case was PASSED on no graded check.
    g = grade(rules, {"final_output": "ok", "tool_calls": [{"name": "Read"}]}, validators=[MISSING_REFERENCE])
    assert g.scorecard["passed"] is None
    assert (g.status.value, g.outcome_class.value, g.reason_code) == (
        "NOT_EVALUATED",
        "pack_error",
        "reference_missing",
    )
    # the same rules with a scorecard that passes: PASSED; one that fails: FAILED
    g = grade(rules, {"final_output": "ok", "tool_calls": [{"name": "Read"}]})
    assert g.status.value == "PASSED" and g.scorecard["passed"] is True
    failing = {**BASE_VALIDATOR, "expected_from": "literal:never"}
    g = grade(rules, {"final_output": "ok", "tool_calls": [{"name": "Read"}]}, validators=[failing])
    assert g.status.value == "FAILED"
