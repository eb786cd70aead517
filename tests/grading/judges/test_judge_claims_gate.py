"""Model claims and the claims gate (grading.md §8): with ``claims.fail_on_contradicted`` a
factual claim the model pass finds contradicted by cited evidence fails "no contradicted
claims" and the case, like a deterministic one; without the gate claims change no verdict;
an unverifiable model claim never counts."""

from __future__ import annotations

import yaml

from grading.engine.grade import CaseGrade
from grading.judges.model_pass import merge_claims, model_claims
from grading.judges.nwise import apply_rank
from tests.fakes.judge_provider import by_mode, verdict
from tests.grading.judges.helpers import CTX, assertion, case, evidence, grade, make_judge, spec
from tests.grading.judges.test_judge_grade_command import run_grade, small_pack

OUTPUT = "The capital is Berlin. Done."
CLAIM = "The capital is Berlin."


def claims_answer(supported, cite_id="challenge_input"):
    return verdict(
        {
            "claims": [
                {
                    "claim": CLAIM,
                    "type": "factual",
                    "span": [0, len(CLAIM)],
                    "supported": supported,
                    "citations": [{"id": cite_id}],
                }
            ]
        },
        cite=False,
    )


def gated(sp, on=True):
    return {**sp, "claims": {"fail_on_contradicted": on}}


def graded_with_model_claims(fake, sp):
    judge = make_judge(fake)
    ev = evidence(OUTPUT)
    g = grade(judge, sp, ev=ev)
    before = (g.status.value, [e.status.value for e in g.expectations if e.key == "claims"])
    merge_claims(g, model_claims(judge, ev, case(), CTX, sp, usage=g.judge_usage))
    judge.close()
    return g, before


def claims_exp(g):
    return next(e for e in g.expectations if e.key == "claims")


def test_contradicted_model_claim_fails_the_gate_and_the_case(fake):
    fake.default = by_mode(assertion=verdict({"pass": True, "reasoning": "ok"}), claims=claims_answer(False))
    g, before = graded_with_model_claims(fake, gated(spec(assertion())))
    assert before == ("PASSED", ["PASSED"])  # deterministic ledger alone: nothing contradicted
    [llm] = [c for c in g.claims if c["source"] == "llm"]
    assert llm["verified"] is False and llm["evidence_refs"] == ["challenge_input"]
    exp = claims_exp(g)
    assert (exp.status.value, exp.outcome_class.value, exp.gating) == ("FAILED", "fail", True)
    assert "llm1" in exp.evidence and CLAIM in exp.evidence and "challenge_input" in exp.evidence_refs
    assert (g.status.value, g.outcome_class.value) == ("FAILED", "fail")
    doc = g.to_dict()
    assert doc["status"] == "FAILED" and doc["summary"]["failed"] == 1
    assert g.judge_usage.calls == 4  # 3 judge samples + 1 claims call, all judge spend
    # the stored document reads back with the same verdict
    assert CaseGrade.from_dict(doc).status.value == "FAILED"


def test_without_the_gate_model_claims_are_advisory(fake):
    fake.default = by_mode(assertion=verdict({"pass": True, "reasoning": "ok"}), claims=claims_answer(False))
    g, _ = graded_with_model_claims(fake, gated(spec(assertion()), on=False))
    assert [c["verified"] for c in g.claims if c["source"] == "llm"] == [False]
    assert not [e for e in g.expectations if e.key == "claims"]
    assert g.status.value == "PASSED"


def test_unverifiable_or_supported_model_claims_do_not_fail_the_gate(fake):
    fake.default = by_mode(
        assertion=verdict({"pass": True, "reasoning": "ok"}), claims=claims_answer(False, "message:99")
    )
    g, _ = graded_with_model_claims(fake, gated(spec(assertion())))
    [llm] = [c for c in g.claims if c["source"] == "llm"]
    assert llm["verified"] is None and "unverifiable" in llm["evidence"]
    assert claims_exp(g).status.value == "PASSED" and g.status.value == "PASSED"
    assert claims_exp(g).evidence == "1 claim, none contradicted (0 verified, 1 unverifiable)"

    fake.default = by_mode(assertion=verdict({"pass": True, "reasoning": "ok"}), claims=claims_answer(True))
    g, _ = graded_with_model_claims(fake, gated(spec(assertion())))
    assert claims_exp(g).status.value == "PASSED" and g.status.value == "PASSED"


def test_n_wise_regrade_replays_model_claims_into_the_gate(fake):
    fake.default = by_mode(assertion=verdict({"pass": True, "reasoning": "ok"}), claims=claims_answer(False))
    sp = gated(spec(assertion()))
    g, _ = graded_with_model_claims(fake, sp)
    calls = fake.calls
    again = apply_rank(g.to_dict(), {}, evidence=evidence(OUTPUT), case=case(), spec=sp, context=CTX)
    assert fake.calls == calls  # replayed, nothing re-run
    assert [c["id"] for c in again.claims if c["source"] == "llm"] == ["llm1"]
    assert claims_exp(again).status.value == "FAILED" and again.status.value == "FAILED"


def test_grade_command_counts_contradicted_model_claims(fake, tmp_path):
    judge = {"key": "ok", "mode": "assertion", "assertion": "names Paris", "model": "gpt-4o-mini"}
    args = small_pack(tmp_path, judge, [{"case_key": "c0", "final_output": OUTPUT}])
    pack = yaml.safe_load((tmp_path / "pack.yaml").read_text())
    pack["version"]["evaluation_spec"]["claims"] = {"fail_on_contradicted": True}
    (tmp_path / "pack.yaml").write_text(yaml.safe_dump(pack))
    fake.default = by_mode(
        assertion=verdict({"pass": True, "reasoning": "ok"}),
        claims=claims_answer(False),
        critique=verdict({"suggestions": [], "overall": "none"}, cite=False),
    )
    code, doc = run_grade(*args, "--judge-provider", "openai", "--judge-base-url", fake.base_url)
    [entry] = doc["cases"]
    g = entry["grading"]
    exp = next(e for e in g["expectations"] if e["key"] == "claims")
    assert exp["status"] == "FAILED" and "llm1" in exp["evidence"]
    assert g["status"] == "FAILED" and code == 1
