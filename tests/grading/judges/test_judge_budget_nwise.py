"""Budgets (grading.md §6.4) and the n_wise second pass (§6.1) against the fake provider."""

from __future__ import annotations

import dataclasses

import pytest

from grading.engine import evidence_from_response, grade_case
from grading.judges import JudgeBudget, lane_share
from grading.judges.budget import LaneBudgets, SharedBudget
from grading.judges.nwise import LaneAnswer, apply_rank, label_orders, rank_case
from grading.pricing import default_table
from tests.fakes.judge_provider import blocks, cite, rank, verdict, with_usage, without_usage
from tests.grading.judges.helpers import CTX, assertion, case, grade, judge_result, make_judge, spec


def test_max_samples_per_judge_caps_samples(fake):
    fake.default = verdict({"pass": True})
    budget = lane_share({"max_samples_per_judge": 1}, 1)
    with make_judge(fake, budget=budget) as judge:
        r = judge_result(grade(judge, spec(assertion(samples=5))))
    assert r.status.value == "PASSED" and fake.calls == 1 and r.details["samples_per_model"] == 1


def test_lane_share_splits_equally_and_zero_is_unset():
    share = lane_share({"max_tokens": 9000, "max_calls_usd": 0.3, "max_samples_per_judge": 0}, 3)
    assert share.max_tokens == 3000 and share.max_usd == pytest.approx(0.1) and share.max_samples is None
    assert not lane_share({"max_tokens": 0, "max_calls_usd": 0}, 2).limited
    lanes = LaneBudgets({"max_tokens": 1000}, 2)
    assert lanes.for_lane("a") is lanes.for_lane("a") and lanes.for_lane("b").max_tokens == 500


def test_budget_hit_half_way_leaves_the_rest_not_evaluated(fake):
    fake.default = verdict({"pass": True})
    budget = JudgeBudget(max_tokens=1500)
    results = []
    with make_judge(fake, budget=budget, max_output_tokens=200) as judge:
        for i in range(8):
            results.append(judge_result(grade(judge, spec(assertion(samples=1)), c=case(f"c{i}"))))
    statuses = [r.status.value for r in results]
    graded = statuses.count("PASSED")
    assert 0 < graded < 8, statuses
    assert statuses == ["PASSED"] * graded + ["NOT_EVALUATED"] * (
        8 - graded
    )  # never graded after running out
    assert all(r.reason_code == "judge_budget_exhausted" for r in results[graded:])
    assert "judge token budget exhausted" in results[-1].evidence
    assert fake.calls == graded and budget.spent_tokens == graded * 150 <= 1500


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_a_call_whose_usage_is_not_reported_is_charged_its_reservation(fake, kind):
    # A server that reports no usage (some local and proxy servers) settled every call at 0
    # tokens and $0: max_tokens and max_calls_usd were never reached, however many calls.
    fake.default = without_usage(verdict({"pass": True}))
    budget = JudgeBudget(max_tokens=1500, max_usd=1.0)
    results = []
    with make_judge(fake, kind=kind, budget=budget, max_output_tokens=200) as judge:
        for i in range(8):
            results.append(judge_result(grade(judge, spec(assertion(samples=1)), c=case(f"c{i}"))))
    statuses = [r.status.value for r in results]
    graded = statuses.count("PASSED")
    assert 0 < graded < 8, statuses
    assert statuses == ["PASSED"] * graded + ["NOT_EVALUATED"] * (8 - graded)
    assert fake.calls == graded and 0 < budget.spent_tokens <= 1500 and budget.spent_usd > 0
    usage = results[0].details["samples"][0]["calls"][0]
    assert (usage["input_tokens"], usage["output_tokens"], usage["cost_usd"]) == (0, 0, None)  # unknown


def test_usd_budget_and_unknown_price(fake):
    fake.default = verdict({"pass": True})
    with make_judge(fake, budget=JudgeBudget(max_usd=0.5)) as judge:
        unknown = judge_result(grade(judge, spec(assertion(samples=1, model="some-local-model"))))
        known = judge_result(grade(judge, spec(assertion(samples=1))))
    assert unknown.reason_code == "judge_budget_exhausted" and "no price known" in unknown.evidence
    assert known.status.value == "PASSED" and fake.calls == 1


def test_partial_samples_kept_but_unused(fake):
    fake.default = verdict({"pass": True})
    budget = JudgeBudget(max_tokens=1)  # nothing fits
    with make_judge(fake, budget=budget) as judge:
        r = judge_result(grade(judge, spec(assertion())))
    assert r.status.value == "NOT_EVALUATED" and r.outcome_class.value == "unavailable"
    assert fake.calls == 0 and len(r.details["samples"]) == 3


def test_judge_spend_stays_out_of_agent_metrics(fake):
    fake.default = verdict({"pass": True})
    ev = evidence_from_response({"final_output": "Paris", "metrics": {"input_tokens": 7, "cost_usd": 0.01}})
    with make_judge(fake) as judge:
        g = grade(judge, spec(assertion(samples=1)), ev=ev)
    assert ev.metrics.input_tokens == 7 and ev.metrics.cost_usd == 0.01
    assert g.judge_usage.input_tokens == 120


# -- n_wise ---------------------------------------------------------------------------------

NWISE = {"key": "best", "mode": "n_wise", "model": "gpt-4o-mini", "prompt": "Which answer is most correct?"}


def _answers(texts: dict[str, str]) -> list[LaneAnswer]:
    return [
        LaneAnswer(
            lane,
            evidence_from_response({"final_output": t}),
            case(),
            dataclasses.replace(CTX, lane_id=lane, deployment=lane),
        )
        for lane, t in texts.items()
    ]


def _by_text(labels_to_text: dict[str, str], best_first: list[str]):
    def order(labels: list[str]) -> list[str]:
        return sorted(labels, key=lambda label: best_first.index(labels_to_text[label]))

    return order


def test_label_orders_shuffle_is_seeded_cyclic_rotates():
    a = label_orders("ABC", 3, "shuffle", ("r", "c", "k"))
    assert a == label_orders("ABC", 3, "shuffle", ("r", "c", "k")) and all(
        sorted(o) == list("ABC") for o in a
    )
    assert label_orders("ABC", 3, "cyclic", ()) == [list("ABC"), list("BCA"), list("CAB")]
    assert label_orders("AB", 2, "none", ()) == [["A", "B"], ["A", "B"]]


def test_rank_case_borda_position_debiased(fake):
    texts = {"lane-x": "Paris", "lane-y": "Lyon", "lane-z": "I do not know"}
    label_of = {"A": "Paris", "B": "Lyon", "C": "I do not know"}  # labels follow sorted lane ids
    fake.default = rank(_by_text(label_of, ["Paris", "Lyon", "I do not know"]))
    decl = dict(NWISE, position_debiasing="cyclic")
    with make_judge(fake) as judge:
        out = rank_case(judge, decl, _answers(texts))
    scores = {lane: r.score for lane, r in out.results.items()}
    assert scores == {"lane-x": 1.0, "lane-y": 0.5, "lane-z": 0.0}
    assert out.results["lane-x"].status.value == "PASSED" and out.results["lane-z"].status.value == "FAILED"
    assert fake.calls == 3 and out.usage.calls == 3
    firsts = [blocks(body)[0][0] for body in fake.requests]
    assert sorted(firsts) == [
        "A/final_output",
        "B/final_output",
        "C/final_output",
    ]  # each label shown first once
    prompt = fake.requests[0]["messages"][1]["content"]
    assert "lane-x" not in prompt and "dep" not in prompt  # opaque labels only


def test_rank_case_reads_upstream_boolean_debiasing_in_a_raw_declaration(fake):
    # §6.1: upstream's true means shuffle, false none. The spec model converts them, but
    # rank_case also takes a raw declaration, where str(False) read as "False": a shuffle.
    texts = {"lane-x": "Paris", "lane-y": "Lyon", "lane-z": "I do not know"}
    label_of = {"A": "Paris", "B": "Lyon", "C": "I do not know"}
    fake.default = rank(_by_text(label_of, ["Paris", "Lyon", "I do not know"]))
    with make_judge(fake) as judge:
        rank_case(judge, dict(NWISE, position_debiasing=False, samples=4), _answers(texts))
    shown = [[b[0] for b in blocks(body)] for body in fake.requests]
    assert shown == [["A/final_output", "B/final_output", "C/final_output"]] * 4
    fake.requests.clear()
    with make_judge(fake) as judge:
        rank_case(judge, dict(NWISE, position_debiasing=True, samples=4), _answers(texts))
    wanted = label_orders("ABC", 4, "shuffle", ("r1", case().challenge_key, "c1", "best"))
    # the samples' calls run concurrently: compare the orders shown, not the arrival order
    assert sorted([b[0].split("/")[0] for b in blocks(body)] for body in fake.requests) == sorted(wanted)


def test_rank_case_invalid_ranking_and_single_lane(fake):
    fake.default = rank(lambda labels: labels[:1])  # omits a label: invalid, retried once
    with make_judge(fake) as judge:
        out = rank_case(judge, dict(NWISE, samples=1), _answers({"a": "x", "b": "y"}))
        single = rank_case(judge, NWISE, _answers({"a": "x"}))
    assert {r.reason_code for r in out.results.values()} == {"unparseable_output"} and fake.calls == 2
    assert (
        single.results["a"].status.value == "NOT_EVALUATED"
        and single.results["a"].reason_code == "single_lane"
    )


def test_rank_case_citation_must_name_a_label(fake):
    fake.default = cite(["final_output"], ranking=["A", "B"])  # no label prefix: unverifiable
    with make_judge(fake) as judge:
        out = rank_case(judge, dict(NWISE, samples=1), _answers({"a": "x", "b": "y"}))
    assert {r.reason_code for r in out.results.values()} == {"unverifiable_verdict"}


def test_pending_rank_then_apply_rank_rescored(fake):
    sp = {
        "validators": [
            {"key": "v", "type": "contains", "target": "final_output", "expected_from": "literal:a"}
        ],
        "llm_judges": [dict(NWISE, samples=1)],
        "scorecard": {
            "dimensions": [{"key": "q", "source": "llm_judge", "judge_key": "best"}],
            "pass_threshold": 0.5,
        },
    }
    answers = _answers({"a": "Paris", "b": "Lyon"})
    fake.default = rank(_by_text({"A": "Paris", "B": "Lyon"}, ["Paris", "Lyon"]))
    with make_judge(fake) as judge:
        first = {a.lane: grade_case(a.evidence, a.case, sp, context=a.context, judge=judge) for a in answers}
        assert {judge_result(g, "best").reason_code for g in first.values()} == {"pending_rank"}
        out = rank_case(judge, sp["llm_judges"][0], answers)
    new = {
        a.lane: apply_rank(
            first[a.lane].to_dict(),
            {"best": out.results[a.lane]},
            evidence=a.evidence,
            case=a.case,
            spec=sp,
            context=a.context,
            usage_share=out.usage,
        )
        for a in answers
    }
    assert judge_result(new["a"], "best").score == 1.0 and new["a"].status.value == "PASSED"
    assert judge_result(new["b"], "best").score == 0.0 and new["b"].status.value == "FAILED"
    assert new["a"].judge_usage.calls == 1


def test_rank_case_with_a_lane_missing_the_context_channel_is_unavailable(fake):
    """grading.md §1.1 / §1.4 rule 4: evidence for an unavailable channel is never fabricated
    and a check that needs it is UNAVAILABLE. A black_box lane has no tool_calls: ranking it
    on the text "no tool_calls channel" would score the missing channel as the agent's
    failure (last place, FAILED)."""
    answers = [
        LaneAnswer(
            "lane-a",
            evidence_from_response({"final_output": "x", "tool_calls": [{"name": "search"}]}),
            case(),
            dataclasses.replace(CTX, lane_id="lane-a", deployment="lane-a"),
        ),
        LaneAnswer(
            "lane-b",
            evidence_from_response({"final_output": "y"}, evidence_level="black_box"),
            case(),
            dataclasses.replace(CTX, lane_id="lane-b", deployment="lane-b"),
        ),
    ]
    fake.default = rank(lambda labels: sorted(labels))
    with make_judge(fake) as judge:
        out = rank_case(judge, dict(NWISE, samples=1, context_from=["tool_calls"]), answers)
    assert {r.status.value for r in out.results.values()} == {"UNAVAILABLE"}
    assert {r.reason_code for r in out.results.values()} == {"channel_unavailable"}
    assert {r.outcome_class.value for r in out.results.values()} == {"unavailable"}
    assert fake.calls == 0


def test_a_shared_ranking_charges_the_lanes_every_token_reported(fake):
    # The lanes' shares of a ranking were the reported tokens floor-divided by the lane
    # count: 121 + 32 tokens over 3 lanes were charged 40 + 10 each, 3 tokens never counted
    # against max_tokens (and their price against max_calls_usd) on every call.
    fake.default = with_usage(rank(lambda labels: sorted(labels)), 121, 32)
    lanes = [JudgeBudget(max_tokens=100_000, max_usd=10.0) for _ in range(3)]
    with make_judge(fake) as judge:
        out = rank_case(
            judge,
            dict(NWISE, samples=2),
            _answers({"a": "x", "b": "y", "c": "z"}),
            budget=SharedBudget(lanes),
        )
    assert fake.calls == 2 and (out.usage.input_tokens, out.usage.output_tokens) == (242, 64)
    assert sum(b.spent_tokens for b in lanes) == 242 + 64
    assert sum(b.spent_usd for b in lanes) == pytest.approx(default_table().cost(NWISE["model"], 242, 64))
    assert max(b.spent_tokens for b in lanes) - min(b.spent_tokens for b in lanes) <= 2 * fake.calls
