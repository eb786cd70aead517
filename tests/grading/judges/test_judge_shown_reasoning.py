"""The evidence line of a judge result quotes one sample's reasoning (shown on the case page
and in grading.json). It quoted the first sample's whatever the verdict, so a FAILED
assertion could read "reasoning: it names Paris, the assertion holds"."""

from __future__ import annotations

from grading.judges import calls as C
from grading.judges.judge import decide
from grading.judges.protocol import Parsed

CITE = [{"id": "final_output"}]


def sample(index: int, data: dict) -> C.Sample:
    return C.Sample(
        model="gpt-4o-mini",
        index=index,
        status=C.OK,
        parsed=Parsed(data={**data, "citations": CITE}, citations=CITE),
    )


def run(decl: dict, answers: list[dict]):
    samples = [sample(i, a) for i, a in enumerate(answers)]
    return decide("j", "t", decl, decl["mode"], ["gpt-4o-mini"], len(samples), samples, lambda eid: "Paris")


def test_a_failed_assertion_shows_the_reasoning_of_a_failing_sample():
    r = run(
        {"mode": "assertion", "assertion": "names Paris"},
        [
            {"pass": True, "reasoning": "it names Paris"},
            {"pass": False, "reasoning": "it names no city"},
            {"pass": False, "reasoning": "no capital named"},
        ],
    )
    assert r.status.value == "FAILED"
    assert "reasoning: it names no city" in r.evidence and "it names Paris" not in r.evidence


def test_expect_false_shows_a_sample_agreeing_with_the_verdict():
    r = run(
        {"mode": "assertion", "assertion": "mentions Berlin", "expect": False},
        [
            {"pass": True, "reasoning": "Berlin is mentioned"},
            {"pass": False, "reasoning": "only Paris"},
            {"pass": False, "reasoning": "no Berlin"},
        ],
    )
    assert r.status.value == "PASSED" and "reasoning: only Paris" in r.evidence


def test_a_rubric_shows_the_sample_nearest_the_score():
    r = run(
        {"mode": "rubric", "rubric": "clear"},
        [
            {"score": 5, "reasoning": "perfect"},
            {"score": 2, "reasoning": "muddled"},
            {"score": 2, "reasoning": "hard to follow"},
        ],
    )
    assert r.score == 0.25 and "reasoning: muddled" in r.evidence
