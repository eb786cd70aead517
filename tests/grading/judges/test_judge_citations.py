"""Citations shown on case pages: ids resolved for display and the verdict partial."""

from __future__ import annotations

from django.template.loader import render_to_string

from grading.judges.citations import citation_texts, cited_ids
from tests.fakes.judge_provider import cite
from tests.grading.judges.helpers import CTX, assertion, case, evidence, grade, make_judge, spec


def test_citations_resolve_and_render(fake):
    fake.default = cite(["final_output", "case.expectations.answer"])
    ev = evidence("The capital is Paris.")
    with make_judge(fake) as judge:
        doc = grade(judge, spec(assertion(samples=1)), ev=ev).to_dict()
    assert cited_ids(doc) == ["final_output", "case.expectations.answer"]
    texts = citation_texts(doc, ev, case(), CTX)
    assert texts == {"final_output": "The capital is Paris.", "case.expectations.answer": "Paris"}
    exp = next(e for e in doc["expectations"] if e["key"] == "j")
    html = render_to_string("grading/_judge_verdict.html", {"expectation": exp, "citations": texts})
    assert "<summary><code>final_output</code></summary>" in html
    assert "<pre>The capital is Paris.</pre>" in html and "PASSED" in html


def test_other_lanes_ids_do_not_resolve_here():
    doc = {
        "expectations": [
            {
                "kind": "judge",
                "evidence_refs": ["A/final_output", "B/final_output"],
                "details": {"mode": "n_wise", "label": "A"},
            }
        ]
    }
    texts = citation_texts(doc, evidence("mine"), case(), CTX)
    assert texts == {"A/final_output": "mine", "B/final_output": None}


def test_partial_renders_invalid_and_budget_samples(fake):
    from tests.fakes.judge_provider import content

    fake.default = content("not json")
    with make_judge(fake) as judge:
        doc = grade(judge, spec(assertion(samples=1)), ev=evidence("x")).to_dict()
    exp = next(e for e in doc["expectations"] if e["key"] == "j")
    html = render_to_string("grading/_judge_verdict.html", {"expectation": exp})
    assert "unparseable_output" in html and "not a single JSON object" in html
