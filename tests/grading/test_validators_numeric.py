"""numeric_match and math_equivalence (grading.md §3.4)."""

from __future__ import annotations

import pytest
from validator_helpers import run, status

from grading.engine.validators.mathexpr import MathSyntaxError, evaluate, normalise, parse_expression


@pytest.mark.parametrize(
    ("a", "e", "config", "want"),
    [
        ("42", "42", {}, "PASSED"),
        (" 42.0 ", "42", {}, "PASSED"),
        ("42.001", "42", {}, "FAILED"),
        ("42.001", "42", {"absolute_tolerance": 0.01}, "PASSED"),
        ("105", "100", {"relative_tolerance": 0.05}, "PASSED"),
        ("106", "100", {"relative_tolerance": 0.05}, "FAILED"),
        ("106", "100", {"relative_tolerance": 0.05, "absolute_tolerance": 10}, "PASSED"),
        ("100.05", "100", {"tolerance_mode": "relative"}, "PASSED"),
        ("100.2", "100", {"tolerance_mode": "relative"}, "FAILED"),
        ("100.5", "100", {"tolerance": 1, "tolerance_mode": "absolute"}, "PASSED"),
        ("100.5", "100", {"tolerance": 0.01}, "PASSED"),
        ("0.001", "0", {"relative_tolerance": 0.5}, "FAILED"),
        ("0", "0", {"relative_tolerance": 0}, "PASSED"),
        ("3.14159", "3.14", {"significant_digits": 3}, "PASSED"),
        ("€1.234.000", "1.234", {"extract_number": True}, "PASSED"),
        ("about 12% of 50", "12", {"extract_number": True}, "PASSED"),
        ("USD 99", "99", {"extract_number": True}, "PASSED"),
        ("-₹5", "-5", {"extract_number": True}, "PASSED"),
    ],
)
def test_numeric_match(a, e, config, want):
    assert status(run("numeric_match", a, e, config)) == want


def test_v5_vector():
    r = run(
        "numeric_match",
        "The total is $1,234.50 (about 12% more)",
        "1234.5",
        {"extract_number": True, "absolute_tolerance": 0.01},
    )
    assert status(r) == "PASSED" and r.score == 1.0


@pytest.mark.parametrize("bad", ["twelve", "", "inf", "nan", "1_000", "1,000"])
def test_unparseable_actual_is_failed(bad):
    assert status(run("numeric_match", bad, "12")) == "FAILED"


@pytest.mark.parametrize("digits", ["١٢", "１２", "۱۲", "१२"])  # Arabic-Indic, fullwidth, Persian, Devanagari
def test_only_ascii_digits_are_a_number_in_either_parse(digits):
    # §3.4 "a decimal float": Python's float() and re's \d read these as 12; upstream's ParseFloat and RE2 \d do not
    assert status(run("numeric_match", digits, "12")) == "FAILED"
    assert status(run("numeric_match", f"about {digits} apples", "12", {"extract_number": True})) == "FAILED"
    assert status(run("numeric_match", f"{digits} or 12", "12", {"extract_number": True})) == "PASSED"
    r = run("numeric_match", "12", digits)
    assert status(r) == "NOT_EVALUATED" and r.klass().value == "pack_error"


def test_unparseable_expected_is_a_pack_error():
    r = run("numeric_match", "12", "twelve")
    assert status(r) == "NOT_EVALUATED" and r.klass().value == "pack_error"


def test_numeric_accepts_json_numbers_directly():
    assert status(run("numeric_match", 12.0, 12)) == "PASSED"


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("$\\frac{1}{2}$", "((1)/(2))"),
        ("\\boxed{42}", "42"),
        ("3 × 4 ÷ 2", "3 * 4 / 2"),
        ("−5", "-5"),
        ("1,234", "1234"),
        ("\\left(x\\right)", "(x)"),
    ],
)
def test_normaliser(text, want):
    assert normalise(text) == want


def test_parser_never_evals():
    with pytest.raises(MathSyntaxError):
        parse_expression("__import__('os')")
    with pytest.raises(MathSyntaxError):
        parse_expression("1 +")
    with pytest.raises(MathSyntaxError):
        parse_expression("(" * 300 + "1" + ")" * 300)


@pytest.mark.parametrize(
    ("expr", "value"),
    [
        ("2^3^2", 512),
        ("-2^2", -4),
        ("2(3+1)", 8),
        ("sqrt(16)+pi-pi", 4),
        ("1/0", None),
        ("sqrt(-1)", None),
        ("2^100000", None),
    ],
)
def test_evaluation(expr, value):
    v = evaluate(parse_expression(normalise(expr)), {})
    assert v == (pytest.approx(value) if value is not None else None)


@pytest.mark.parametrize(
    ("a", "e", "config", "want"),
    [
        ("0.5", "\\frac{1}{2}", {}, "PASSED"),
        ("The answer is #### 4", "4", {"extract_answer": True}, "PASSED"),
        ("Final: 7", "7", {"extract_answer": True, "answer_delimiter": "Final:"}, "PASSED"),
        ("2x + 2", "2(x+1)", {}, "PASSED"),
        ("x^2", "x*x", {}, "PASSED"),
        ("x^2", "2x", {}, "FAILED"),
        ("√4", "2", {"comparison_mode": "numeric"}, "PASSED"),
        ("3.0000001", "3", {"comparison_mode": "numeric"}, "PASSED"),
        ("3.001", "3", {"comparison_mode": "numeric"}, "FAILED"),
        ("x", "1", {"comparison_mode": "numeric"}, "FAILED"),
        ("banana!", "1", {}, "FAILED"),
        ("$$\\sqrt{2}\\cdot\\sqrt{2}$$", "2", {}, "PASSED"),
    ],
)
def test_math_equivalence(a, e, config, want):
    assert status(run("math_equivalence", a, e, config)) == want


def test_math_unparseable_or_free_expected_is_a_pack_error():
    assert status(run("math_equivalence", "1", "1 +")) == "NOT_EVALUATED"
    assert status(run("math_equivalence", "1", "y", {"comparison_mode": "numeric"})) == "NOT_EVALUATED"


@pytest.mark.parametrize(
    ("a", "e", "want"),
    [
        # Two values that overflow (or divide by zero) are not equal: both were "undefined"
        # and the symbolic test skipped the point, so 10^400 passed for -10^400.
        ("10^400", "-10^400", "NOT_EVALUATED"),
        ("1/0", "1/0", "NOT_EVALUATED"),
        ("5", "1/0", "NOT_EVALUATED"),
        ("sqrt(-x)", "-sqrt(-x)", "NOT_EVALUATED"),  # the expected is defined at no sample
        ("10^400", "5", "FAILED"),
        ("1/(x-x)", "x", "FAILED"),
        # a point where both sides are undefined is still skipped when others decide
        ("sqrt(x-1)", "sqrt(x-1)", "PASSED"),
        ("sqrt(x-1)", "-sqrt(x-1)", "FAILED"),
    ],
)
def test_math_symbolic_never_passes_on_undefined_values(a, e, want):
    r = run("math_equivalence", a, e)
    assert status(r) == want, r.evidence
    if want == "NOT_EVALUATED":
        assert r.outcome_class.value == "pack_error" and r.reason_code == "unparseable_expected"
        assert "no finite value" in r.evidence, r.evidence


def test_math_symbolic_is_deterministic():
    a = run("math_equivalence", "x^2+1", "x^2+1.0000001").evidence
    assert a == run("math_equivalence", "x^2+1", "x^2+1.0000001").evidence


@pytest.mark.parametrize(
    ("a", "e", "config", "want"),
    [
        # §3.4 "within" a tolerance includes it: 1.1 - 1 is 0.10000000000000009 in binary floats
        ("1.1", "1", {"absolute_tolerance": 0.1}, "PASSED"),
        ("1.3", "1.2", {"absolute_tolerance": 0.1}, "PASSED"),
        ("0.9", "1", {"absolute_tolerance": 0.1}, "PASSED"),
        ("1.1", "1", {"tolerance": 0.1, "tolerance_mode": "absolute"}, "PASSED"),
        ("1.1", "1.0", {"relative_tolerance": 0.1}, "PASSED"),
        ("0.33", "0.3", {"relative_tolerance": 0.1}, "PASSED"),
        ("$1.10", "1", {"extract_number": True, "absolute_tolerance": 0.1}, "PASSED"),
        # ... and nothing beyond it
        ("1.1000001", "1", {"absolute_tolerance": 0.1}, "FAILED"),
        ("1.2", "1", {"absolute_tolerance": 0.1}, "FAILED"),
        ("0.3300001", "0.3", {"relative_tolerance": 0.1}, "FAILED"),
        ("0.1", "0", {"relative_tolerance": 0.1}, "FAILED"),
        ("1e-300", "0", {"absolute_tolerance": 0}, "FAILED"),
    ],
)
def test_a_difference_equal_to_the_tolerance_is_within_it(a, e, config, want):
    r = run("numeric_match", a, e, config)
    assert status(r) == want, r.evidence
    assert ("within" in r.evidence) == (want == "PASSED")


def test_a_unicode_minus_sign_makes_the_number_negative():
    # "−" (U+2212, typeset minus) was skipped: "−5 °C" read as 5 and passed against 5.
    assert status(run("numeric_match", "It is −5 °C", "5", {"extract_number": True})) == "FAILED"
    assert status(run("numeric_match", "It is −5 °C", "-5", {"extract_number": True})) == "PASSED"
    assert status(run("numeric_match", "−5", "-5")) == "PASSED"
    assert status(run("numeric_match", "−0.5", "0.5", {"absolute_tolerance": 0.1})) == "FAILED"


def test_digits_and_dots_read_as_the_decimal_pattern_reads_them():
    """parse_number skips the pattern for a side of digits and dots alone: float() must then
    accept exactly the strings the pattern allows (and refuse '1.2.3', '.', '')."""
    import itertools
    import math

    from grading.engine.validators.numeric import _DECIMAL, parse_number

    for n in range(6):
        for chars in itertools.product("09.", repeat=n):
            text = "".join(chars)
            want = float(text) if _DECIMAL.fullmatch(text) else None
            assert parse_number(text, False) == want, text
            assert want is None or math.isfinite(want)
