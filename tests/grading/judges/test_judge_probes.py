"""``critique.probe_judges`` (grading.md §9 (a)): judges run on the empty baseline; one that
passes an empty answer is reported in eval feedback; the probe calls are charged to the
run's judge budget (shared by the lanes), never to an agent."""

from __future__ import annotations

import yaml

from grading.engine.critique import not_probed, probe_judges
from grading.judges import JudgeBudget
from grading.judges.budget import SharedBudget
from grading.judges.probes import JudgeProbes
from tests.fakes.judge_provider import by_mode, prompt_text, verdict
from tests.grading.judges.helpers import CTX, assertion, case, make_judge, spec
from tests.grading.judges.test_judge_grade_command import run_grade, small_pack


def probing(sp, on=True):
    return {**sp, "critique": {"probe_judges": on}}


def test_a_judge_that_passes_the_empty_answer_is_trivially_satisfied(fake):
    fake.default = verdict({"pass": True, "reasoning": "fine"})
    sp = probing(spec(assertion(samples=2)))
    with make_judge(fake) as judge:
        found, usage = probe_judges(sp, case(), CTX, judge=judge)
    [s] = found
    assert (s.assertion, s.finding) == ("j", "trivially_satisfied")
    assert "passes on the empty baseline" in s.reason and "LLM judge" in s.reason
    assert usage.calls == 2 == fake.calls
    # the judge saw the empty final output, not an answer
    assert '<<<EVIDENCE id="final_output">>>\n\n' in prompt_text(fake.requests[0])


def test_a_judge_that_fails_the_empty_answer_or_no_setting_is_quiet(fake):
    fake.default = verdict({"pass": False, "reasoning": "nothing there"})
    with make_judge(fake) as judge:
        assert probe_judges(probing(spec(assertion())), case(), CTX, judge=judge)[0] == []
        calls = fake.calls
        assert probe_judges(probing(spec(assertion()), on=False), case(), CTX, judge=judge) == ([], None)
        assert probe_judges(probing(spec(assertion())), case(), CTX, judge=None) == ([], None)
    assert fake.calls == calls == 3  # only the probe with the setting called


def test_n_wise_judges_are_not_probed():
    nw = {"key": "best", "mode": "n_wise", "model": "gpt-4o-mini", "prompt": "best?"}
    sp = probing(spec(nw))
    assert probe_judges(sp, case(), CTX, judge=object()) == ([], None)
    assert not_probed(sp) == [{"assertion": "best", "reason": "n_wise judges rank lanes; not probed"}]


def test_probes_once_per_case_charged_to_the_shared_run_budget(fake):
    fake.default = verdict({"pass": True})
    lanes = [JudgeBudget(max_tokens=1000), JudgeBudget(max_tokens=1000)]
    sp = probing(spec(assertion(samples=1)))
    with make_judge(fake, max_output_tokens=200) as judge:
        probes = JudgeProbes(judge, sp, SharedBudget(lanes))
        ctx = probes.with_findings(case(), CTX)
        again = probes.with_findings(case(), CTX)
    assert [s.finding for s in ctx.case_findings] == ["trivially_satisfied"]
    assert again.case_findings == ctx.case_findings and fake.calls == 1  # computed once per case
    assert probes.usage.calls == 1 and probes.usage.input_tokens == 120
    assert [b.spent_tokens for b in lanes] == [75, 75]  # split equally between the lanes
    assert judge.budget.spent_tokens == 0  # not the per-lane judge budget of the grading calls


def test_probe_over_budget_is_not_a_finding(fake):
    fake.default = verdict({"pass": True})
    sp = probing(spec(assertion(samples=1)))
    with make_judge(fake, max_output_tokens=200) as judge:
        probes = JudgeProbes(judge, sp, SharedBudget([JudgeBudget(max_tokens=10)]))
        assert probes.findings(case(), CTX) == []
    assert fake.calls == 0 and probes.usage.calls == 0


def test_grade_command_reports_probed_judges_in_eval_feedback(fake, tmp_path):
    judge = {
        "key": "ok",
        "mode": "assertion",
        "assertion": "names Paris",
        "model": "gpt-4o-mini",
        "samples": 1,
    }
    lines = [{"deployment": d, "case_key": "c0", "final_output": "Paris"} for d in ("a", "b")]
    args = small_pack(tmp_path, judge, lines)
    pack = yaml.safe_load((tmp_path / "pack.yaml").read_text())
    pack["version"]["evaluation_spec"]["critique"] = {"probe_judges": True}
    (tmp_path / "pack.yaml").write_text(yaml.safe_dump(pack))
    fake.default = by_mode(
        assertion=verdict({"pass": True, "reasoning": "ok"}),
        claims=verdict({"claims": []}, cite=False),
        critique=verdict({"suggestions": [], "overall": "none"}, cite=False),
    )
    code, doc = run_grade(*args, "--judge-provider", "openai", "--judge-base-url", fake.base_url)
    for entry in doc["cases"]:
        found = [s for s in entry["grading"]["eval_feedback"]["suggestions"] if s["assertion"] == "ok"]
        assert [s["finding"] for s in found] == ["trivially_satisfied"], entry["deployment"]
        assert "trivially_satisfied" in entry["grading"]["eval_feedback"]["overall"]
    assert len(doc["cases"]) == 2
    # 1 probe + 2 graded answers + 2 claims calls + 1 critique, all in the run's judge usage
    per_case = sum(c["grading"]["judge_usage"]["calls"] for c in doc["cases"])
    assert per_case == 4 and doc["judge_usage"]["calls"] == fake.calls == 6
