"""Eval critique: baseline probes (grading.md §9a) and run health (§9b)."""

from __future__ import annotations

import dataclasses

import pytest

from grading.engine.aggregate import CaseRecord
from grading.engine.critique import (
    NOTHING_FOUND,
    assertion_labels,
    echo_text,
    not_probed,
    overall_line,
    probe_case,
    probe_version,
    run_health,
)
from grading.engine.health import RunHealthAccumulator
from grading.engine.types import CaseDef, CaseExpectation, CaseInput, GradeContext, Suggestion

# -- a small fake grader: the seam probe_case exposes until grade_case is wired in ------


def _expected(validator: dict, case: CaseDef) -> str:
    ref = validator.get("expected_from", "")
    if ref.startswith("literal:"):
        return ref[len("literal:") :]
    if ref.startswith("case.inputs."):
        return next(str(i.value) for i in case.inputs if i.key == ref.split(".")[2])
    if ref.startswith("case.expectations."):
        return next(str(e.value) for e in case.expectations if e.key == ref.split(".")[2])
    raise AssertionError(ref)


class FakeGrader:
    def __init__(self) -> None:
        self.calls: list[tuple[object, GradeContext, object]] = []

    def __call__(self, evidence, case, spec, *, context, judge=None):
        self.calls.append((evidence, context, judge))
        out = []
        for guard in ("allowed_tools",):
            if guard in (spec.get("rules") or {}):
                out.append(self._row(f"rules.{guard}", "guard", not evidence.tool_calls, "no calls"))
        for v in spec["validators"]:
            kind = "trajectory" if v["type"] == "tool_trajectory" else "validator"
            out.append(self._validator(v, evidence, case, kind))
        for scope in ("job", "tasks"):
            for i, rule in enumerate((spec.get("rules") or {}).get(scope, [])):
                hit = rule["pattern"] in evidence.final_output
                out.append(self._row(f"rules.{scope}[{i}]", "rule", hit != rule.get("negate", False), "rule"))
        for j in spec.get("llm_judges", []):
            if judge is None:
                out.append(
                    {"key": j["key"], "kind": "judge", "status": "NOT_EVALUATED", "evidence": "no judge"}
                )
            else:
                out.append(
                    {"key": j["key"], "kind": "judge", "status": "PASSED", "evidence": "judge says yes"}
                )
        out.append({"key": "claims", "kind": "claims", "status": "PASSED", "evidence": "no claims"})
        return {"expectations": out}

    @staticmethod
    def _row(key, kind, passed, evidence):
        return {"key": key, "kind": kind, "status": "PASSED" if passed else "FAILED", "evidence": evidence}

    def _validator(self, v, evidence, case, kind):
        t = v["type"]
        out = evidence.final_output
        if v.get("target", "").startswith("file:"):
            out = next(iter(evidence.files.values())).content if evidence.files else None
        if t == "code_execution":
            assert not evidence.files, "the sandbox must never run on synthetic files"
            return self._row(v["key"], kind, True, "exit 0")
        if t == "contains":
            exp = _expected(v, case)
            ok = out is not None and exp in out
            return self._row(
                v["key"], kind, ok, f"expected text {exp!r} occurs at offset 0" if ok else "not found"
            )
        if t == "exact_match":
            return self._row(v["key"], kind, out == _expected(v, case), "compared")
        if t == "broken_match":
            return self._row(v["key"], kind, False, "numbers differ: 42 vs 42.0")
        if t == "file_content_match":
            return self._row(v["key"], kind, out is None or "TODO" not in out, "no TODO")
        if t == "tool_call_assertion":
            return self._row(v["key"], kind, not evidence.tool_calls, "0 matches")
        if t == "tool_trajectory":
            return self._row(v["key"], kind, False, "expected [search], got []")
        raise AssertionError(t)


CASE = CaseDef(
    challenge_key="sum",
    case_key="c1",
    payload={"question": "2+40?"},
    inputs=[CaseInput(key="q", value="What is 2+40?"), CaseInput(key="noted", artifact_key="a1")],
    expectations=[CaseExpectation(key="answer", value="42")],
)
CTX = GradeContext(challenge_key="sum", rendered_instructions="Answer the question: What is 2+40?")


def spec_of(*validators, rules=None, judges=(), critique=None, checks=()):
    return {
        "validators": list(validators),
        "rules": rules,
        "llm_judges": list(judges),
        "critique": critique or {},
        "post_execution_checks": list(checks),
    }


def probe(spec, grade=None, case=CASE, ctx=CTX, **kw):
    return probe_case(spec, case, ctx, grade=grade or FakeGrader(), **kw)


# -- (a) probes ----------------------------------------------------------------


def test_a_check_that_passes_on_the_empty_baseline_is_trivially_satisfied():
    spec = spec_of(
        {"key": "has_text", "type": "contains", "target": "final_output", "expected_from": "literal:"}
    )
    [s] = probe(spec)
    assert s.finding == "trivially_satisfied" and s.assertion == "has_text" and s.source == "deterministic"
    assert "passes on the empty baseline" in s.reason
    assert "expected text '' occurs" in s.reason


def test_a_check_that_passes_on_the_echo_baseline_is_trivially_satisfied():
    spec = spec_of(
        {
            "key": "mentions",
            "label": "Mentions the question",
            "type": "contains",
            "target": "final_output",
            "expected_from": "case.inputs.q",
        }
    )
    [s] = probe(spec)
    assert s.finding == "trivially_satisfied"
    assert s.reason.startswith("'Mentions the question' (mentions) passes on the echo baseline")
    assert "1 case input value echoed back" in s.reason


def test_the_echo_baseline_of_a_payload_only_case_says_it_echoed_the_rendered_instructions():
    # It read "the instructions and 0 case input values echoed back".
    spec = spec_of(
        {"key": "mentions", "type": "contains", "target": "final_output", "expected_from": "literal:2+40"}
    )
    [s] = probe(spec, case=dataclasses.replace(CASE, inputs=[]))
    assert s.finding == "trivially_satisfied"
    assert "passes on the echo baseline (the rendered instructions echoed back): " in s.reason


def test_the_echo_output_is_the_instructions_and_every_input_value_joined_by_newlines():
    case = dataclasses.replace(
        CASE, inputs=[CaseInput(key="a", value="x"), CaseInput(key="b", value={"n": 1.0})]
    )
    assert echo_text(case, CTX) == 'Answer the question: What is 2+40?\nx\n{"n":1}'


def test_the_echo_output_of_a_case_without_rendered_instructions_is_just_its_input_values():
    """With no rendered instructions the echo output began with an empty line ("\\nx"), so
    an exact check of the echoed input did not pass on the echo baseline and was not flagged."""
    case = dataclasses.replace(CASE, inputs=[CaseInput(key="a", value="x"), CaseInput(key="b", value="y")])
    bare = dataclasses.replace(CTX, rendered_instructions="")
    assert echo_text(case, bare) == "x\ny"
    assert echo_text(case, dataclasses.replace(CTX, rendered_instructions=None)) == "x\ny"
    spec = spec_of(
        {"key": "same", "type": "exact_match", "target": "final_output", "expected_from": "case.inputs.q"}
    )
    [s] = probe(spec, ctx=bare)
    assert s.finding == "trivially_satisfied" and s.assertion == "same"
    assert "passes on the echo baseline (1 case input value echoed back)" in s.reason


def test_a_check_that_fails_on_the_reference_output_is_flagged():
    spec = spec_of(
        {
            "key": "good",
            "type": "exact_match",
            "target": "final_output",
            "expected_from": "case.expectations.answer",
        },
        {
            "key": "bad",
            "type": "broken_match",
            "target": "final_output",
            "expected_from": "case.expectations.answer",
        },
    )
    grader = FakeGrader()
    [s] = probe(spec, grader)
    assert (s.finding, s.assertion) == ("fails_on_reference", "bad")
    assert "case.expectations.answer placed as the output" in s.reason
    assert "42 vs 42.0" in s.reason
    # one reference execution serves both validators sharing the expected_from
    assert [e.final_output for e, _c, _j in grader.calls].count("42") == 1


def test_a_reference_for_a_file_target_is_placed_in_the_captured_file():
    spec = spec_of(
        {
            "key": "file_ok",
            "type": "exact_match",
            "target": "file:out",
            "expected_from": "case.expectations.answer",
        },
        checks=[{"key": "out", "type": "file_capture", "path": "/workspace/answer.txt"}],
    )
    grader = FakeGrader()
    assert probe(spec, grader) == []
    ref_evidence = grader.calls[-1][0]
    assert list(ref_evidence.files) == ["answer.txt"] and ref_evidence.files["answer.txt"].content == "42"


@pytest.mark.parametrize(
    ("config", "why"),
    [
        ({"tool_name": "rm", "must_call": False}, "must_call: false"),
        ({"tool_name": "rm", "count": 0}, "count: 0"),
        ({"tool_name": "rm", "max_count": 0}, "max_count: 0"),
    ],
)
def test_a_guard_style_tool_call_assertion_is_named_by_the_config_that_makes_it_one(config, why):
    # §9: a concrete, checkable reason. max_count: 0 and count: 0 were reported as
    # "must_call: false", a key the assertion does not set.
    spec = spec_of({"key": "no_rm", "type": "tool_call_assertion", "target": "tool_calls", "config": config})
    [s] = probe(spec)
    assert f"tool_call_assertion with {why}" in s.reason, s.reason


def test_guard_style_checks_are_flagged_with_advice_for_a_positive_companion():
    spec = spec_of(
        {
            "key": "no_calls",
            "type": "tool_call_assertion",
            "target": "tool_calls",
            "config": {"must_call": False},
        },
        {
            "key": "no_todo",
            "type": "file_content_match",
            "target": "file:out",
            "expected_from": "literal:TODO",
            "config": {"match_mode": "not_contains"},
        },
        rules={
            "allowed_tools": ["Read"],
            "job": [{"label": "No rm -rf", "pattern": "rm -rf", "negate": True}],
        },
    )
    suggestions = probe(spec)
    assert [s.assertion for s in suggestions] == [
        "rules.allowed_tools",
        "no_calls",
        "no_todo",
        "rules.job[0]",
    ]
    assert all(s.finding == "trivially_satisfied" for s in suggestions)
    assert all("add a positive companion check" in s.reason for s in suggestions)
    assert "negated rule" in suggestions[-1].reason and "'No rm -rf'" in suggestions[-1].reason
    assert "passes on the empty baseline" in suggestions[1].reason


def test_code_execution_is_not_probed_and_listed_as_such():
    spec = spec_of(
        {"key": "tests", "type": "code_execution", "target": "file:src", "config": {"test_command": "x"}}
    )
    assert probe(spec) == []
    assert not_probed(spec) == [{"assertion": "tests", "reason": "code_execution is not probed"}]


def test_judges_are_skipped_unless_probe_judges_is_set():
    judge = object()
    spec = spec_of(
        {"key": "v", "type": "exact_match", "target": "final_output", "expected_from": "literal:x"},
        judges=[{"key": "tone", "label": "Polite"}],
    )
    grader = FakeGrader()
    assert probe(spec, grader, judge=judge) == []
    assert all(j is None for _e, _c, j in grader.calls)
    assert not_probed(spec)[0]["assertion"] == "tone"

    spec["critique"] = {"probe_judges": True}
    grader = FakeGrader()
    [s] = probe(spec, grader, judge=judge)
    assert s.assertion == "tone" and "passes on the empty baseline" in s.reason
    assert [j for _e, _c, j in grader.calls] == [judge, None]  # the empty baseline only
    assert not_probed(spec) == []


def test_probes_grade_synthetic_evidence_in_a_context_that_does_not_probe_again():
    spec = spec_of(
        {"key": "v", "type": "exact_match", "target": "final_output", "expected_from": "literal:x"}
    )
    grader = FakeGrader()
    probe(spec, grader)
    empty, ctx, _ = grader.calls[0]
    assert empty.final_output == "" and empty.tool_calls == [] and empty.files == {} and empty.tasks == []
    assert [m.role for m in empty.messages] == ["user"]
    if "case_findings" in {f.name for f in dataclasses.fields(GradeContext)}:
        assert ctx.case_findings == []


def test_trajectory_matchers_are_probed_too():
    spec = spec_of({"key": "traj", "type": "tool_trajectory", "target": "tool_calls"})
    assert probe(spec) == []  # fails on empty: fine


def test_probe_version_keys_findings_by_case():
    spec = spec_of(
        {"key": "has_text", "type": "contains", "target": "final_output", "expected_from": "literal:"}
    )
    other = dataclasses.replace(CASE, case_key="c2")
    same_key = dataclasses.replace(CASE, challenge_key="other")
    out = probe_version(spec, [CASE, other], CTX, grade=FakeGrader())
    assert list(out) == ["c1", "c2"] and len(out["c1"]) == 1
    out = probe_version(spec, [CASE, same_key], [CTX, CTX], grade=FakeGrader())
    assert list(out) == ["sum/c1", "other/c1"]


def test_labels_follow_grading_json_order():
    spec = spec_of(
        {"key": "v", "label": "V"},
        rules={"allowed_hosts": [], "tasks": [{"label": "T"}]},
        judges=[{"key": "j"}],
    )
    assert list(assertion_labels(spec).items()) == [
        ("rules.allowed_hosts", None),
        ("v", "V"),
        ("rules.tasks[0]", "T"),
        ("j", None),
    ]


# -- overall -------------------------------------------------------------------


def test_overall_counts_findings_by_kind_or_says_nothing_was_found():
    assert overall_line([]) == NOTHING_FOUND
    items = [
        Suggestion("r", "pack_error"),
        Suggestion("r", "trivially_satisfied"),
        Suggestion("r", "pack_error"),
    ]
    assert overall_line(items) == "3 findings: 1 trivially_satisfied, 2 pack_error."
    assert overall_line(items[:1]) == "1 finding: 1 pack_error."


# -- (b) run health ------------------------------------------------------------


def rec(dep, case, exps, *, rep=1, agreement=None, status="PASSED", outcome="pass", reason=None):
    return CaseRecord(
        deployment=dep,
        challenge_key="ch",
        case_key=case,
        status=status,
        outcome_class=outcome,
        reason_code=reason,
        repetition=rep,
        expectations={
            k: v if isinstance(v, tuple) else (v, {"PASSED": "pass", "FAILED": "fail"}.get(v), None)
            for k, v in exps.items()
        },
        judge_agreement=agreement or {},
    )


def findings(feedback, kind):
    return [s for s in feedback.suggestions if s.finding == kind]


def test_no_discrimination_when_every_lane_and_case_gets_the_same_outcome():
    records = [
        rec(d, c, {"v": "PASSED", "w": "PASSED" if d == "a" else "FAILED"}) for d in "ab" for c in ("x", "y")
    ]
    [s] = findings(run_health(records), "no_discrimination")
    assert s.assertion == "v"
    assert "PASSED on all 4 graded results (2 lanes, 2 cases)" in s.reason


def test_the_claims_gate_is_not_reported_as_non_discriminating():
    records = [rec(d, c, {"claims": "PASSED"}) for d in "ab" for c in ("x", "y")]
    assert findings(run_health(records), "no_discrimination") == []


def test_no_discrimination_needs_three_results_and_two_lanes_or_three_cases():
    two = [rec("a", c, {"v": "FAILED"}) for c in ("x", "y")]
    assert findings(run_health(two), "no_discrimination") == []
    one_lane_two_cases = two + [rec("a", "x", {"v": "FAILED"}, rep=2)]
    assert findings(run_health(one_lane_two_cases), "no_discrimination") == []
    three_cases = [rec("a", c, {"v": "FAILED"}) for c in ("x", "y", "z")]
    [s] = findings(run_health(three_cases), "no_discrimination")
    assert "FAILED on all 3 graded results (1 lane, 3 cases)" in s.reason  # was "1 lanes"


def test_mostly_unavailable_over_the_configured_share():
    exps = [("UNAVAILABLE", "unavailable", "channel_unavailable")] * 3 + ["PASSED"] * 2
    records = [rec("a", f"c{i}", {"files": e}) for i, e in enumerate(exps)]
    [s] = findings(run_health(records), "mostly_unavailable")
    assert "3 of 5 results (60%) are UNAVAILABLE or NOT_EVALUATED, over the 50% limit" in s.reason
    assert "channel_unavailable \u00d73" in s.reason
    assert (
        findings(run_health(records, {"critique": {"unavailable_share_max": 0.6}}), "mostly_unavailable")
        == []
    )


def test_pack_errors_are_reported_per_assertion_and_case_wide():
    records = [
        rec("a", "c1", {"ref": ("NOT_EVALUATED", "pack_error", "reference_missing")}),
        rec("a", "c2", {"ref": "PASSED"}),
        rec("a", "c3", {}, status="NOT_EVALUATED", outcome="pack_error", reason="reference_missing"),
    ]
    found = findings(run_health(records), "pack_error")
    assert [s.assertion for s in found] == ["ref", None]
    assert "1 of 2 results are pack errors (reference_missing \u00d71)" in found[0].reason
    assert "1 of 3 case grades are pack errors" in found[1].reason


def test_judge_disagreement_on_a_low_mean_or_a_case_below_its_threshold():
    low_mean = [
        rec("a", f"c{i}", {"tone": "PASSED"}, agreement={"tone": v}) for i, v in enumerate([0.6, 0.7, 0.8])
    ]
    [s] = findings(run_health(low_mean), "judge_disagreement")
    assert s.assertion == "tone" and "mean agreement 0.70 over 3 cases is below 0.75" in s.reason

    spec = {"llm_judges": [{"key": "tone", "min_agreement_threshold": 0.9}]}
    one_low = [
        rec("a", f"c{i}", {"tone": "PASSED"}, agreement={"tone": v}) for i, v in enumerate([1.0, 1.0, 0.8])
    ]
    [s] = findings(run_health(one_low, spec), "judge_disagreement")
    assert "1 case below the judge's min_agreement_threshold 0.90" in s.reason

    errored = [rec("a", "c1", {"tone": ("ERROR", "evaluator_error", "low_agreement")})]
    assert len(findings(run_health(errored), "judge_disagreement")) == 1
    fine = [rec("a", "c1", {"tone": "PASSED"}, agreement={"tone": 0.9})]
    assert findings(run_health(fine), "judge_disagreement") == []


def test_judge_agreement_at_the_minimum_up_to_float_rounding_is_not_disagreement():
    """§2: thresholds are inclusive. Agreements 0.6, 0.7 and 0.8 average 0.7 (computed
    0.6999999999999998): a judge_agreement_min of 0.7 is met, no "0.70 is below 0.70"."""
    at = [rec("a", f"c{i}", {"tone": "PASSED"}, agreement={"tone": v}) for i, v in enumerate([0.6, 0.7, 0.8])]
    spec = {
        "critique": {"judge_agreement_min": 0.7},
        "llm_judges": [{"key": "tone", "min_agreement_threshold": 0.6}],
    }
    assert findings(run_health(at, spec), "judge_disagreement") == []
    below = {**spec, "critique": {"judge_agreement_min": 0.7001}}
    [s] = findings(run_health(at, below), "judge_disagreement")
    assert "mean agreement 0.70 over 3 cases is below 0.70" in s.reason
    # a case at the judge's own min_agreement_threshold is not below it
    strict = {**spec, "llm_judges": [{"key": "tone", "min_agreement_threshold": 0.6001}]}
    [s] = findings(run_health(at, strict), "judge_disagreement")
    assert "1 case below the judge's min_agreement_threshold 0.60" in s.reason


def test_unstable_across_repeats_lists_each_flaky_lane_and_case():
    records = [
        rec("a", "c1", {"v": "PASSED"}, rep=1),
        rec("a", "c1", {"v": "FAILED"}, rep=2),
        rec("a", "c1", {"v": "PASSED"}, rep=3),
        rec("b", "c1", {"v": "PASSED"}, rep=1),
        rec("b", "c1", {"v": "PASSED"}, rep=2),
    ]
    [s] = findings(run_health(records), "unstable_across_repeats")
    assert s.assertion == "v"
    assert "on 1 lane/case pair: a/ch/c1 (2 PASSED, 1 FAILED)" in s.reason


def test_budget_exhausted_results_are_reported():
    records = [
        rec("a", "c1", {"j": ("NOT_EVALUATED", "unavailable", "judge_budget_exhausted")}),
        rec("a", "c2", {"j": "PASSED"}),
    ]
    [s] = findings(run_health(records), "budget_exhausted")
    assert "1 of 2 results were not evaluated because the judge budget ran out" in s.reason


def test_run_health_reads_grading_documents_and_names_assertions_by_label():
    doc = {
        "case": {"deployment": "a", "challenge_key": "ch", "case_key": "c1"},
        "status": "PASSED",
        "outcome_class": "pass",
        "expectations": [
            {
                "key": "v",
                "status": "NOT_EVALUATED",
                "outcome_class": "pack_error",
                "reason_code": "reference_missing",
            }
        ],
    }
    feedback = run_health([doc], {"validators": [{"key": "v", "label": "Answer matches"}]})
    assert feedback.suggestions[0].reason.startswith("'Answer matches' (v):")
    assert feedback.overall == "2 findings: 1 mostly_unavailable, 1 pack_error."
    assert feedback.to_dict()["suggestions"][0]["assertion"] == "v"


def test_a_clean_run_gives_the_fixed_sentence():
    records = [rec("a", "c1", {"v": "PASSED"}), rec("b", "c1", {"v": "FAILED"})]
    feedback = run_health(records)
    assert feedback.suggestions == [] and feedback.overall == NOTHING_FOUND


def test_run_health_is_independent_of_record_order():
    records = [
        rec(d, c, {"v": "PASSED", "u": ("UNAVAILABLE", "unavailable", None)}) for d in "ab" for c in "xyz"
    ]
    assert run_health(records).to_dict() == run_health(list(reversed(records))).to_dict()


def every_finding_records():
    out = []
    for d in "ab":
        for i, c in enumerate(("x", "y", "z")):
            budget = d == "b" and c == "x"
            exps = {
                "same": "PASSED",
                "files": ("UNAVAILABLE", "unavailable", "channel_unavailable") if i else "FAILED",
                "ref": ("NOT_EVALUATED", "pack_error", "reference_missing") if c == "z" else "PASSED",
                "tone": ("NOT_EVALUATED", "unavailable", "judge_budget_exhausted") if budget else "PASSED",
            }
            out.append(rec(d, c, exps, agreement={"tone": 0.5 + 0.1 * i}))
            out.append(rec(d, c, {"same": "PASSED", "flaky": "FAILED" if d == "a" else "PASSED"}, rep=2))
            out.append(rec(d, c, {"flaky": "PASSED"}, rep=3))
    out.append(rec("a", "w", {}, status="NOT_EVALUATED", outcome="pack_error", reason="unresolved_case_ref"))
    return out


EVERY_FINDING_SPEC = {
    "validators": [{"key": "same", "label": "Same"}, {"key": "files"}, {"key": "ref"}, {"key": "flaky"}],
    "llm_judges": [{"key": "tone", "label": "Tone", "min_agreement_threshold": 0.65}],
}


def test_run_health_findings_wording_and_order():
    # pinned from the record-based implementation that the streaming accumulator replaced
    feedback = run_health(every_finding_records(), EVERY_FINDING_SPEC)
    assert [(s.finding, s.assertion, s.reason) for s in feedback.suggestions] == [
        ("no_discrimination", "same", "'Same' (same) is PASSED on all 12 graded results (2 lanes, 3 cases): "
         "it does not tell agents or cases apart"),
        ("no_discrimination", "ref", "ref is PASSED on all 4 graded results (2 lanes, 2 cases): it does not "
         "tell agents or cases apart"),
        ("no_discrimination", "tone", "'Tone' (tone) is PASSED on all 5 graded results (2 lanes, 3 cases): "
         "it does not tell agents or cases apart"),
        ("mostly_unavailable", "files", "files: 4 of 6 results (67%) are UNAVAILABLE or NOT_EVALUATED, over "
         "the 50% limit (channel_unavailable \u00d74)"),
        ("pack_error", "ref", "ref: 2 of 6 results are pack errors (reference_missing \u00d72); fix the pack, "
         "these never count against the agent"),
        ("pack_error", None, "1 of 19 case grades are pack errors (unresolved_case_ref \u00d71)"),
        ("judge_disagreement", "tone", "'Tone' (tone): mean agreement 0.60 over 6 cases is below 0.75; "
         "4 cases below the judge's min_agreement_threshold 0.65"),
        ("unstable_across_repeats", "flaky", "flaky got both PASSED and FAILED across repetitions on 3 "
         "lane/case pairs: a/ch/x (1 PASSED, 1 FAILED), a/ch/y (1 PASSED, 1 FAILED), a/ch/z (1 PASSED, "
         "1 FAILED)"),
        ("budget_exhausted", "tone", "'Tone' (tone): 1 of 6 results were not evaluated because the judge "
         "budget ran out (judge_budget_exhausted); raise scorecard.judge_limits or reduce samples"),
    ]  # fmt: skip
    assert feedback.overall == (
        "9 findings: 3 no_discrimination, 1 mostly_unavailable, 2 pack_error, 1 judge_disagreement, "
        "1 unstable_across_repeats, 1 budget_exhausted."
    )


def test_the_accumulator_takes_one_outcome_at_a_time_in_any_order():
    records = every_finding_records()
    expected = run_health(records, EVERY_FINDING_SPEC).to_dict()
    health = RunHealthAccumulator(EVERY_FINDING_SPEC)
    for r in reversed(records[: len(records) // 2]):
        case = {"outcome_class": r.outcome_class, "reason_code": r.reason_code}
        health.add(r.deployment, r.case_id, r.expectations, r.judge_agreement, **case)
    partial = health.finish().to_dict()
    assert partial != expected  # half the outcomes give other figures
    for r in records[len(records) // 2 :]:
        health.add_record(r)
    assert health.finish().to_dict() == expected
    assert health.finish().to_dict() == expected  # finish() reads, it does not consume


def test_repetition_counts_are_exact_past_a_byte():
    records = [rec("a", "c1", {"v": "PASSED"}, rep=i) for i in range(1, 301)]
    records += [rec("a", "c1", {"v": "FAILED"}, rep=301), rec("a", "c2", {"v": "FAILED"})]
    [s] = findings(run_health(records), "unstable_across_repeats")
    assert s.reason.endswith("on 1 lane/case pair: a/ch/c1 (300 PASSED, 1 FAILED)")


# -- with the real grade_case and EvaluationSpec --------------------------------


def _real_spec(**extra):
    import pytest

    spec_module = pytest.importorskip("grading.engine.spec")
    pytest.importorskip("grading.engine.grade")
    data = {
        "name": "math",
        "version_number": 1,
        "judge_mode": "deterministic",
        "validators": [
            {
                "key": "exact",
                "type": "exact_match",
                "target": "final_output",
                "expected_from": "case.expectations.answer",
            },
            {"key": "vacuous", "type": "contains", "target": "final_output", "expected_from": "literal:"},
            {"key": "echoed", "type": "contains", "target": "final_output", "expected_from": "case.inputs.q"},
            {
                "key": "digits",
                "type": "regex_match",
                "target": "final_output",
                "expected_from": "case.expectations.pattern",
            },
            {
                "key": "no_rm",
                "type": "tool_call_assertion",
                "target": "tool_calls",
                "config": {"tool_name": "rm", "must_call": False},
            },
        ],
        "scorecard": {"dimensions": ["correctness"]},
        **extra,
    }
    return spec_module.EvaluationSpec.model_validate(data)


def test_probes_run_through_the_real_grade_case():
    spec = _real_spec()
    case = dataclasses.replace(
        CASE,
        expectations=[
            CaseExpectation(key="answer", value="42"),
            CaseExpectation(key="pattern", value="^\\d+$"),
        ],
    )
    suggestions = probe_case(spec, case, CTX)
    found = [(s.assertion, s.finding) for s in suggestions]
    # exact_match passes its own reference; a regex used as the reference output does not match itself
    assert found == [
        ("vacuous", "trivially_satisfied"),
        ("echoed", "trivially_satisfied"),
        ("no_rm", "trivially_satisfied"),
        ("digits", "fails_on_reference"),
    ]


def test_the_real_grade_case_carries_the_probe_findings_in_its_eval_feedback():
    from grading.engine.grade import grade_case
    from grading.engine.types import Evidence

    spec = _real_spec()
    case = dataclasses.replace(
        CASE,
        expectations=[CaseExpectation(key="answer", value="42"), CaseExpectation(key="pattern", value="^4")],
    )
    doc = grade_case(Evidence(final_output="42"), case, spec, context=CTX).to_dict()
    assertions = [s.get("assertion") for s in doc["eval_feedback"]["suggestions"]]
    assert "vacuous" in assertions and "echoed" in assertions
    assert doc["eval_feedback"]["overall"] == "4 findings: 3 trivially_satisfied, 1 fails_on_reference."
