"""A judge call whose provider reports no usage is charged its reservation (grading.md §6.4);
that charge must reach the case's ``judge_usage``, from which a resumed lane rebuilds its
budget. ``grade_case`` summed only the reported fields of each judge's usage, so the charge
of the judge calls was lost (only the claims pass, added directly, kept its)."""

from __future__ import annotations

from grading.engine.grade import CaseGrade
from tests.fakes.judge_provider import verdict, without_usage
from tests.grading.judges.helpers import assertion, grade, judge_result, make_judge, spec


def test_unreported_usage_is_charged_in_the_case_judge_usage(fake):
    fake.default = without_usage(verdict({"pass": True}))
    g = grade(make_judge(fake, max_output_tokens=500), spec(assertion(samples=3)))
    r = judge_result(g)
    assert r.status.value == "PASSED"
    calls = [c for s in r.details["samples"] for c in s["calls"]]
    charged = sum(c["charged_tokens"] for c in calls)
    assert len(calls) == 3 and charged > 3 * 500  # each at least its output cap
    usage = g.judge_usage
    assert (usage.calls, usage.input_tokens, usage.output_tokens, usage.cost_usd) == (3, 0, 0, None)
    assert usage.charged_tokens == charged and usage.charged_usd > 0
    doc = g.to_dict()["judge_usage"]
    assert doc["charged_tokens"] == charged
    assert CaseGrade.from_dict(g.to_dict()).judge_usage.charged() == (charged, usage.charged_usd)
