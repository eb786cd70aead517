"""Graded similarity validators (grading.md §3.3)."""

from __future__ import annotations

import math

import pytest
from validator_helpers import run, status

from grading.engine.validators.similarity import bleu, chrf, rouge


def test_fuzzy_is_the_indel_ratio():
    r = run("fuzzy_match", "kitten", "sitting")
    # indel distance 5 (LCS 4 of 6+7): 1 - 5/13
    assert r.score == pytest.approx(1 - 5 / 13)
    assert status(r) == "FAILED" and "threshold 0.8" in r.evidence


def test_fuzzy_both_empty_is_one():
    assert run("fuzzy_match", "", "").score == 1.0


def test_fuzzy_options():
    assert (
        run("fuzzy_match", "HELLO  world", "hello world", {"case_insensitive": True, "normalize": True}).score
        == 1.0
    )


def test_fuzzy_over_the_size_limit_is_an_evaluator_error():
    r = run("fuzzy_match", "a" * 100_001, "a")
    assert (
        status(r) == "ERROR" and r.klass().value == "evaluator_error" and r.reason_code == "input_too_large"
    )


def test_token_f1():
    r = run("token_f1", "the cat sat", "the cat sat down")
    assert r.score == pytest.approx(2 * 1 * 0.75 / 1.75)
    assert run("token_f1", "", "").score == 1.0
    assert run("token_f1", "", "x").score == 0.0
    r = run(
        "token_f1",
        "The Cat!",
        "cat",
        {"normalize": True, "remove_punctuation": True, "remove_articles": True},
    )
    assert r.score == 1.0


def test_bleu_basic_properties():
    assert bleu(["the", "cat", "is", "on", "the", "mat"], [["the", "cat", "is", "on", "the", "mat"]])[
        0
    ] == pytest.approx(1.0)
    assert bleu([], [[]])[0] == 1.0
    assert bleu([], [["x"]])[0] == 0.0
    assert bleu(["a", "b", "c", "d"], [["x", "y"]])[0] == 0.0


def test_bleu_brevity_penalty_and_clipping():
    score, _ = bleu(["the", "the"], [["the", "cat", "the"]], max_ngram=1)
    assert score == pytest.approx(1.0 * math.exp(1 - 3 / 2))
    score, _ = bleu(["the", "the", "the"], [["the", "cat"]], max_ngram=1)
    assert score == pytest.approx(1 / 3)


def test_bleu_method1_smoothing_for_higher_orders():
    cand, ref = ["a", "b", "c"], [["a", "c", "b"]]
    assert bleu(cand, ref, 2, "none")[0] == 0.0
    assert bleu(cand, ref, 2, "method1")[0] == pytest.approx(math.sqrt(1.0 * (1 / 3)))


def test_bleu_reference_array_rule():
    r = run("bleu_score", "the cat sat", '["a dog ran", "the cat sat"]')
    assert r.score == pytest.approx(1.0)
    r = run("bleu_score", "x", "[1, 2]")
    assert status(r) == "NOT_EVALUATED"
    assert run("bleu_score", "[not json", "[not json").score == pytest.approx(1.0)


def test_rouge_variants():
    assert rouge(["a", "b", "c", "d"], ["a", "c", "d"], "rouge-l")[0] == pytest.approx(2 * 0.75 * 1 / 1.75)
    assert rouge(["a", "b"], ["b", "a"], "rouge-1")[0] == 1.0
    assert rouge(["a", "b"], ["b", "a"], "rouge-2")[0] == 0.0
    assert rouge([], [], "rouge-l")[0] == 1.0


def test_rouge_best_over_references_and_beta():
    r = run("rouge_score", "the cat", '["dog", "the cat"]', {"variant": "rouge-1"})
    assert r.score == 1.0
    p, rr = 1.0, 0.5
    assert rouge(["a"], ["a", "b"], "rouge-1", 2.0)[0] == pytest.approx(5 * p * rr / (4 * p + rr))


def test_chrf():
    assert chrf("abc", "abc")[0] == 1.0
    assert chrf("", "")[0] == 1.0
    assert chrf("a", "")[0] == 0.0
    assert chrf("a b", "ab")[0] == 1.0  # whitespace removed
    assert 0 < run("chrf_score", "kitten", "sitting").score < 1


def test_similarity_thresholds_are_inclusive():
    r = run("token_f1", "a b", "a c", {"threshold": 0.5})
    assert r.score == pytest.approx(0.5) and status(r) == "PASSED"
