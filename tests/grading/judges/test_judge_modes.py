"""LLMJudge against the fake provider over a real socket: modes, parsing, citations,
retries, provider failures, consensus."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

from tests.fakes.judge_provider import cite, content, hang, rate_limited, status, verdict
from tests.grading.judges.helpers import assertion, case, evidence, grade, judge_result, make_judge, spec


def test_assertion_passes_with_citations_and_accounts_usage(fake):
    fake.default = verdict({"pass": True, "confidence": 0.9, "reasoning": "names Paris"})
    with make_judge(fake) as judge:
        g = grade(judge, spec(assertion()))
    r = judge_result(g)
    assert r.status.value == "PASSED" and r.score == 1.0
    assert r.evidence_refs == ["final_output"]
    assert fake.calls == 3 and len(r.details["samples"]) == 3
    assert (
        g.judge_usage.calls == 3 and g.judge_usage.input_tokens == 360 and g.judge_usage.output_tokens == 90
    )
    # gpt-4o-mini: 0.15 / 0.60 USD per 1M tokens
    assert g.judge_usage.cost_usd == pytest.approx((360 * 0.15 + 90 * 0.60) / 1e6)
    sent = fake.requests[0]
    assert sent["model"] == "gpt-4o-mini" and sent["response_format"] == {"type": "json_object"}
    assert fake.headers[0]["authorization"] == "Bearer sk-test"
    assert '<<<EVIDENCE id="final_output">>>\nThe capital is Paris.' in sent["messages"][1]["content"]
    assert "never instructions" in sent["messages"][0]["content"]


def test_expect_false_inverts(fake):
    fake.default = verdict({"pass": True})
    with make_judge(fake) as judge:
        r = judge_result(grade(judge, spec(assertion(expect=False))))
    assert r.status.value == "FAILED" and r.score == 0.0 and r.outcome_class.value == "fail"


def test_word_incorrect_in_reasoning_does_not_override_json(fake):
    fake.default = verdict(
        {"pass": True, "reasoning": "Incorrect? No: the answer is correct, not incorrect."}
    )
    with make_judge(fake) as judge:
        r = judge_result(grade(judge, spec(assertion(samples=1))))
    assert r.status.value == "PASSED"


def test_fenced_json_is_accepted_prose_is_not(fake):
    body = json.dumps({"pass": True, "citations": [{"id": "final_output"}]})
    fake.queue(content(f"```json\n{body}\n```"), content(f"Sure! {body}"), content(f"Sure! {body}"))
    with make_judge(fake) as judge:
        ok = judge_result(grade(judge, spec(assertion(samples=1))))
        bad = judge_result(grade(judge, spec(assertion(samples=1))))
    assert ok.status.value == "PASSED"
    assert bad.status.value == "ERROR" and bad.reason_code == "unparseable_output"


def test_malformed_json_is_retried_once_then_unparseable(fake):
    fake.default = content('{"pass": tru')
    with make_judge(fake) as judge:
        r = judge_result(grade(judge, spec(assertion())))
    assert r.status.value == "ERROR" and r.outcome_class.value == "evaluator_error"
    assert r.reason_code == "unparseable_output" and r.passed is None
    assert fake.calls == 6  # 3 samples, each retried once


def test_invalid_then_valid_answer_counts(fake):
    fake.queue(content("not json"))
    fake.default = verdict({"pass": True})
    with make_judge(fake) as judge:
        r = judge_result(grade(judge, spec(assertion(samples=1))))
    assert r.status.value == "PASSED" and fake.calls == 2


def test_unknown_citation_is_unverifiable(fake):
    fake.default = cite(["final_output", "message:99"])
    with make_judge(fake) as judge:
        r = judge_result(grade(judge, spec(assertion())))
    assert r.status.value == "ERROR" and r.reason_code == "unverifiable_verdict"
    assert "unverifiable verdict: message:99" in r.evidence and r.passed is None


def test_missing_citations_and_false_quote_are_unverifiable(fake):
    fake.queue(content(json.dumps({"pass": True, "citations": []})))
    fake.queue(content(json.dumps({"pass": False, "citations": [{"id": "final_output", "quote": "Berlin"}]})))
    with make_judge(fake) as judge:
        a = judge_result(grade(judge, spec(assertion(samples=1))))
        b = judge_result(grade(judge, spec(assertion(samples=1))))
    assert a.reason_code == "unverifiable_verdict" and "no citations" in a.evidence
    assert b.reason_code == "unverifiable_verdict" and "quote not found" in b.evidence


def test_one_bad_sample_taints_the_judge(fake):
    fake.queue(verdict({"pass": True}), verdict({"pass": True}), cite(["path:nope.txt"]))
    with make_judge(fake) as judge:
        r = judge_result(grade(judge, spec(assertion())))
    assert r.reason_code == "unverifiable_verdict"


def test_citation_with_range_and_context_ids(fake):
    fake.default = cite(["final_output#4-11", "case.expectations.answer"])
    sp = spec(assertion(samples=1, context_from=["final_output", "case.expectations.answer"]))
    with make_judge(fake) as judge:
        r = judge_result(grade(judge, sp))
    assert r.status.value == "PASSED" and r.evidence_refs == ["final_output#4-11", "case.expectations.answer"]


def test_429_then_success_honours_retry_after(fake):
    fake.queue(rate_limited("7"), rate_limited("2"))
    fake.default = verdict({"pass": True})
    sleeps: list[float] = []
    with make_judge(fake, sleeps=sleeps) as judge:
        r = judge_result(grade(judge, spec(assertion(samples=1))))
    assert r.status.value == "PASSED" and fake.calls == 3
    assert sleeps[0] >= 7 and sleeps[1] >= 2
    assert r.details["samples"][0]["calls"][0]["retries"] == 2


@pytest.mark.parametrize("retry_after", ["120", "Fri, 31 Dec 9999 23:59:59 GMT", "9" * 400])
def test_retry_after_beyond_the_cap_is_never_retried_early(fake, retry_after):
    # A Retry-After past the client's 60 s cap was cut to 60 s: the call was retried before
    # the provider said it may be (and refused again). It now ends the call's retries,
    # ERROR / infra_error naming the provider's wait; nothing is retried before it.
    fake.queue(rate_limited(retry_after))
    fake.default = verdict({"pass": True})
    sleeps: list[float] = []
    with make_judge(fake, sleeps=sleeps) as judge:
        r = judge_result(grade(judge, spec(assertion(samples=1))))
    assert fake.calls == 1 and sleeps == []
    assert r.status.value == "ERROR" and r.outcome_class.value == "infra_error"
    assert "Retry-After" in r.evidence and "429" in r.evidence
    if retry_after == "120":
        assert "wait 120 s" in r.evidence


def test_retry_after_at_the_cap_is_waited(fake):
    fake.queue(rate_limited("60"))
    fake.default = verdict({"pass": True})
    sleeps: list[float] = []
    with make_judge(fake, sleeps=sleeps) as judge:
        r = judge_result(grade(judge, spec(assertion(samples=1))))
    assert r.status.value == "PASSED" and fake.calls == 2 and sleeps == [60.0]


def test_5xx_exhausts_retries_infra_error(fake):
    fake.default = status(503)
    with make_judge(fake) as judge:
        r = judge_result(grade(judge, spec(assertion(samples=1, max_retries=2))))
    assert r.status.value == "ERROR" and r.outcome_class.value == "infra_error"
    assert fake.calls == 3 and "503" in r.evidence


@pytest.mark.parametrize(
    ("code", "klass"), [(401, "infra_error"), (403, "infra_error"), (400, "evaluator_error")]
)
def test_4xx_is_not_retried(fake, code, klass):
    fake.default = status(code)
    with make_judge(fake) as judge:
        r = judge_result(grade(judge, spec(assertion(samples=1))))
    assert r.status.value == "ERROR" and r.outcome_class.value == klass and fake.calls == 1


def test_a_408_is_a_timeout_retried_then_infra_error(fake):
    """grading.md §6.5: timeouts are retried. A 408 (a proxy or server that gave up waiting
    for the request) was an "other 4xx": never retried, and ERROR / evaluator_error."""
    fake.queue(status(408), verdict({"pass": True}))
    with make_judge(fake) as judge:
        r = judge_result(grade(judge, spec(assertion(samples=1))))
    assert r.status.value == "PASSED" and fake.calls == 2
    fake.default = status(408)
    with make_judge(fake) as judge:
        r = judge_result(grade(judge, spec(assertion(samples=1, max_retries=1))))
    assert (r.status.value, r.outcome_class.value) == ("ERROR", "infra_error") and fake.calls == 4


def test_timeout_is_infra_error(fake):
    fake.default = hang(5)
    with make_judge(fake) as judge:
        r = judge_result(grade(judge, spec(assertion(samples=1, timeout_ms=300, max_retries=0))))
    assert r.status.value == "ERROR" and r.outcome_class.value == "infra_error" and "timeout" in r.evidence


def test_provider_down_for_the_whole_run(fake):
    base = fake.base_url
    fake.stop()
    cases = [case(f"c{i}") for i in range(3)]
    from grading.judges import LLMJudge, ProviderConfig

    with LLMJudge(
        ProviderConfig(kind="openai", base_url=base, allow_private=True, backoff_base_seconds=0.001)
    ) as j:
        results = [judge_result(grade(j, spec(assertion(max_retries=1)), c=c)) for c in cases]
    assert all(r.status.value == "ERROR" and r.outcome_class.value == "infra_error" for r in results)
    assert all(r.passed is None for r in results)


def test_private_address_refused_without_allow_private(fake):
    from grading.judges import LLMJudge, ProviderConfig

    with LLMJudge(ProviderConfig(kind="openai", base_url=fake.base_url)) as judge:
        r = judge_result(grade(judge, spec(assertion(samples=1))))
    assert r.status.value == "ERROR" and "refused" in r.evidence and fake.calls == 0


def test_rubric_normalised_median(fake):
    fake.queue(verdict({"score": 4}), verdict({"score": 5}), verdict({"score": 4}))
    j = {
        "key": "j",
        "mode": "rubric",
        "rubric": "correct?",
        "model": "gpt-4o-mini",
        "score_scale": {"min": 1, "max": 5},
    }
    with make_judge(fake) as judge:
        r = judge_result(grade(judge, spec(j)))
    assert r.status.value == "PASSED" and r.score == pytest.approx(0.75)
    assert r.details["agreement"] == pytest.approx(0.75) and r.details["variance"] > 0


def test_rubric_score_clamped_and_threshold(fake):
    fake.default = verdict({"score": 0})
    j = {"key": "j", "mode": "rubric", "rubric": "r", "model": "m", "samples": 1, "threshold": 0.1}
    with make_judge(fake) as judge:
        r = judge_result(grade(judge, spec(j)))
    assert r.score == 0.0 and r.status.value == "FAILED"


def test_reference_missing_for_one_case_only(fake):
    fake.default = verdict({"score": 5})
    j = {
        "key": "j",
        "mode": "reference",
        "rubric": "same as reference",
        "model": "gpt-4o-mini",
        "samples": 1,
        "reference_from": "case.expectations.answer",
    }
    with make_judge(fake) as judge:
        with_ref = judge_result(grade(judge, spec(j), c=case("c1", "Paris")))
        without = judge_result(grade(judge, spec(j), c=case("c2", None)))
    assert with_ref.status.value == "PASSED"
    assert without.status.value == "NOT_EVALUATED" and without.reason_code == "reference_missing"
    assert without.outcome_class.value == "pack_error"
    assert fake.calls == 1
    assert '<<<EVIDENCE id="case.expectations.answer">>>\nParis' in fake.requests[0]["messages"][1]["content"]


def test_unable_to_judge(fake):
    fake.default = content(json.dumps({"unable_to_judge": True, "reason": "empty input"}))
    with make_judge(fake) as judge:
        r = judge_result(grade(judge, spec(assertion())))
    assert r.status.value == "UNAVAILABLE" and r.reason_code == "unable_to_judge"


def test_two_models_majority_vote_and_low_agreement(fake):
    def by_model(body):
        return {"pass": body["model"] != "gpt-4o"}

    fake.default = verdict(by_model)
    j = assertion(
        model=None,
        models=["gpt-4o-mini", "gpt-4o", "claude-haiku-4-5"],
        samples=2,
        consensus={"aggregation": "majority_vote"},
    )
    with make_judge(fake) as judge:
        r = judge_result(grade(judge, spec(j)))
        assert r.status.value == "PASSED" and r.details["model_scores"]["gpt-4o"] == 0.0
        assert r.details["agreement"] == pytest.approx(4 / 6)
        j["consensus"]["min_agreement_threshold"] = 0.8
        low = judge_result(grade(judge, spec(j)))
    assert low.status.value == "ERROR" and low.reason_code == "low_agreement" and low.passed is None
    assert fake.calls == 12


def test_unanimous_and_tie(fake):
    fake.queue(verdict({"pass": True}), verdict({"pass": False}))
    with make_judge(fake) as judge:
        tie = judge_result(grade(judge, spec(assertion(samples=2))))
    assert tie.status.value == "FAILED" and tie.details["needs_review"] is True


def test_anthropic_messages_tool_output(fake):
    fake.default = verdict({"pass": True})
    with make_judge(fake, kind="anthropic") as judge:
        r = judge_result(grade(judge, spec(assertion(samples=1, model="claude-haiku-4-5"))))
    assert r.status.value == "PASSED"
    assert fake.paths[0] == "/v1/messages" and fake.headers[0]["x-api-key"] == "sk-test"
    assert fake.headers[0]["anthropic-version"] and fake.requests[0]["max_tokens"] > 0
    assert fake.requests[0]["tool_choice"]["name"] == "record_verdict"


def test_evaluate_from_worker_thread_while_a_loop_runs(fake):
    fake.default = verdict({"pass": True})
    out = {}

    async def main():
        with make_judge(fake) as judge:

            def work():
                out["r"] = judge_result(grade(judge, spec(assertion(samples=2))))

            t = threading.Thread(target=work)
            t.start()
            await asyncio.to_thread(t.join, 10)

    asyncio.run(main())
    assert out["r"].status.value == "PASSED"


def test_judge_crash_in_output_schema_is_contained(fake):
    fake.default = verdict({"pass": True})
    j = assertion(samples=1, output_schema={"type": "object", "required": ["severity"]})
    with make_judge(fake) as judge:
        r = judge_result(grade(judge, spec(j)))
    assert r.status.value == "ERROR" and r.reason_code == "unparseable_output" and "severity" in r.evidence
    _ = evidence


def test_an_output_schema_ref_to_a_url_is_never_fetched(fake):
    # the pack's output_schema is applied to every judge answer; jsonschema fetched a remote
    # $ref in it from the grading worker. It is never fetched: the schema is unusable.
    import http.server
    import threading

    hits: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits.append(self.path)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        fake.default = verdict({"pass": True})
        url = f"http://127.0.0.1:{server.server_address[1]}/schema"
        j = assertion(samples=1, output_schema={"$ref": url})
        with make_judge(fake) as judge:
            r = judge_result(grade(judge, spec(j)))
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
    assert hits == []
    assert r.status.value == "ERROR" and "not inside the schema" in r.evidence, r.evidence


def test_deeply_nested_json_is_invalid_not_a_crash(fake):
    fake.default = content("[" * 100_000)
    with make_judge(fake) as judge:
        r = judge_result(grade(judge, spec(assertion(samples=1))))
    assert r.reason_code == "unparseable_output"


def test_parallel_threads_share_one_budget(fake):
    from grading.judges import JudgeBudget

    fake.default = verdict({"pass": True})
    budget = JudgeBudget(max_tokens=10_000_000)
    out = []
    with make_judge(fake, budget=budget) as judge:
        threads = [
            threading.Thread(
                target=lambda i=i: out.append(judge_result(grade(judge, spec(assertion()), c=case(f"c{i}"))))
            )
            for i in range(6)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(20)
    assert [r.status.value for r in out] == ["PASSED"] * 6
    assert fake.calls == 18 and budget.spent_tokens == 18 * 150 and len(judge.call_log) == 18


def test_server_without_json_mode_is_asked_again_without_it(fake):
    fake.queue(status(400, b'{"error": {"message": "response_format is not supported"}}'))
    fake.default = verdict({"pass": True})
    with make_judge(fake) as judge:
        r = judge_result(grade(judge, spec(assertion(samples=1))))
    assert r.status.value == "PASSED" and fake.calls == 2
    assert "response_format" in fake.requests[0] and "response_format" not in fake.requests[1]


@pytest.mark.parametrize("token", ["Infinity", "NaN", "-Infinity"])
def test_non_json_number_tokens_are_unparseable_never_a_score(fake, token):
    """grading.md §6.2: the answer must be one JSON object; NaN and Infinity are not JSON
    (Python's json reads them, and Infinity clamped to the top of the scale: a full score)."""
    fake.default = content('{"score": ' + token + ', "citations": [{"id": "final_output"}]}')
    rubric = {"key": "j", "mode": "rubric", "rubric": "Names Paris", "model": "gpt-4o-mini", "samples": 1}
    with make_judge(fake) as judge:
        r = judge_result(grade(judge, spec(rubric)))
    assert r.status.value == "ERROR" and r.reason_code == "unparseable_output"
    assert r.score is None
    assert fake.calls == 2  # the invalid answer was retried once


def test_non_json_number_in_confidence_is_unparseable(fake):
    fake.default = content('{"pass": true, "confidence": NaN, "citations": [{"id": "final_output"}]}')
    with make_judge(fake) as judge:
        r = judge_result(grade(judge, spec(assertion(samples=1))))
    assert r.status.value == "ERROR" and r.reason_code == "unparseable_output"


@pytest.mark.parametrize(
    "answer",
    [
        '{"pass": true, "pass": false, "citations": [{"id": "final_output"}]}',
        '{"pass": false, "citations": [{"id": "final_output"}], "pass": true}',
        '{"pass": true, "citations": [{"id": "final_output", "id": "invented"}]}',
    ],
)
def test_an_answer_with_a_repeated_key_is_unparseable_never_its_last_value(fake, answer):
    """grading.md §6.2: one JSON object that validates against the schema. A repeated key
    has no defined value (RFC 8259 §4); Python's json kept the last one, so the verdict was
    whichever "pass" came last, and a citation whichever "id"."""
    fake.default = content(answer)
    with make_judge(fake) as judge:
        r = judge_result(grade(judge, spec(assertion(samples=1))))
    assert (r.status.value, r.reason_code) == ("ERROR", "unparseable_output")
    assert "repeated key" in r.evidence
    assert fake.calls == 2  # the invalid answer was retried once


def test_reference_from_an_unavailable_channel_is_unavailable_not_a_pack_error(fake):
    """grading.md §1.4 rule 4: a reference into a channel the lane does not report is
    UNAVAILABLE / channel_unavailable (the pack is fine; only references into case data that
    do not resolve are reference_missing pack errors)."""
    from grading.engine import evidence_from_response

    ref = {
        "key": "j",
        "mode": "reference",
        "rubric": "same calls?",
        "model": "gpt-4o-mini",
        "reference_from": "tool_calls",
        "samples": 1,
    }
    ev = evidence_from_response({"final_output": "done"}, evidence_level="black_box")
    with make_judge(fake) as judge:
        r = judge_result(grade(judge, spec(ref), ev=ev))
    assert r.status.value == "UNAVAILABLE"
    assert r.outcome_class.value == "unavailable" and r.reason_code == "channel_unavailable"
    assert fake.calls == 0
    missing = dict(ref, reference_from="case.expectations.nope")
    with make_judge(fake) as judge:
        r = judge_result(grade(judge, spec(missing)))
    assert r.status.value == "NOT_EVALUATED" and r.outcome_class.value == "pack_error"
    assert r.reason_code == "reference_missing"


def test_rubric_consensus_at_its_threshold_up_to_float_rounding_passes(fake):
    """§2: thresholds are inclusive. Two models scoring 3 and 6 of 10 normalise to 0.3 and
    0.6, whose mean is 0.45 (computed 0.44999999999999996): threshold 0.45 is met."""
    fake.default = verdict(lambda body: {"score": 3 if body["model"] == "gpt-4o" else 6})
    j = {
        "key": "j",
        "mode": "rubric",
        "rubric": "correct?",
        "models": ["gpt-4o", "gpt-4o-mini"],
        "samples": 1,
        "score_scale": {"min": 0, "max": 10},
        "consensus": {"aggregation": "mean"},
        "threshold": 0.45,
    }
    with make_judge(fake) as judge:
        r = judge_result(grade(judge, spec(j)))
        assert round(r.score, 4) == 0.45 and r.status.value == "PASSED"
        below = judge_result(grade(judge, spec({**j, "threshold": 0.4501})))
    assert below.status.value == "FAILED"
