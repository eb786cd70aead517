"""Text and structure validators (grading.md §3.2) and normalized_match (§3.4)."""

from __future__ import annotations

import pytest
from validator_helpers import run, status


def test_exact_match_is_code_point_exact_without_trimming():
    assert status(run("exact_match", "abc", "abc")) == "PASSED"
    r = run("exact_match", "abc ", "abc")
    assert status(r) == "FAILED" and "offset 3" in r.evidence


def test_exact_match_reports_the_first_difference_in_code_points():
    r = run("exact_match", "héllo wörld", "héllo world")
    assert "offset 7" in r.evidence


def test_exact_match_on_empty_sides():
    assert status(run("exact_match", "", "")) == "PASSED"
    assert status(run("exact_match", "", "x")) == "FAILED"


def test_contains_with_offset_and_case_folding():
    r = run("contains", "The Straße is long", "straße")
    assert status(r) == "FAILED" and "not found" in r.evidence
    r = run("contains", "The STRASSE is long", "straße", {"case_insensitive": True})
    assert status(r) == "PASSED" and "offset 4" in r.evidence


def test_contains_empty_expected_is_found_in_anything():
    assert status(run("contains", "", "")) == "PASSED"


@pytest.mark.parametrize(
    ("text", "pattern", "flags", "want"),
    [
        ("Answer: 42", r"\d+", "", "PASSED"),
        ("answer", "^ANSWER$", "i", "PASSED"),
        ("a\nb", "^b$", "", "FAILED"),
        ("a\nb", "^b$", "m", "PASSED"),
        ("a\nb", "a.b", "", "FAILED"),
        ("a\nb", "a.b", "s", "PASSED"),
    ],
)
def test_regex_match_search_semantics_and_flags(text, pattern, flags, want):
    assert status(run("regex_match", text, pattern, {"flags": flags})) == want


def test_regex_match_reports_the_span_in_code_points():
    r = run("regex_match", "héé 42", r"\d+")
    assert "match at 4-6" in r.evidence


def test_regex_that_does_not_compile_at_grading_time_is_a_pack_error():
    r = run("regex_match", "x", "(unclosed")
    assert status(r) == "NOT_EVALUATED" and r.klass().value == "pack_error"


def test_regex_is_linear_time_on_catastrophic_patterns():
    r = run("regex_match", "a" * 50_000 + "!", "(a+)+$")
    assert status(r) == "FAILED"


@pytest.mark.parametrize(
    ("a", "e", "want"),
    [
        (" TRUE ", "yes", "PASSED"),
        ("0", "false", "PASSED"),
        ("no", "1", "FAILED"),
        ("maybe", "true", "FAILED"),
    ],
)
def test_boolean_assert(a, e, want):
    assert status(run("boolean_assert", a, e)) == want


def test_boolean_assert_expected_not_a_boolean_is_a_pack_error():
    r = run("boolean_assert", "true", "perhaps")
    assert status(r) == "NOT_EVALUATED" and r.klass().value == "pack_error"


SCHEMA = {
    "type": "object",
    "required": ["name", "age"],
    "properties": {"age": {"type": "integer", "minimum": 0}},
}


def test_json_schema_validates_and_lists_pointer_messages():
    assert status(run("json_schema", '{"name": "a", "age": 3}', SCHEMA)) == "PASSED"
    r = run("json_schema", '{"age": -1}', SCHEMA)
    assert status(r) == "FAILED"
    assert "/age:" in r.evidence and "(root): 'name' is a required property" in r.evidence


def test_json_schema_actual_not_json_is_failed_with_offset():
    r = run("json_schema", '{"a": }', SCHEMA)
    assert status(r) == "FAILED" and "not JSON at offset 6" in r.evidence


def test_json_schema_expected_not_a_schema_is_a_pack_error():
    assert status(run("json_schema", "{}", "{not json")) == "NOT_EVALUATED"
    assert status(run("json_schema", "{}", {"type": 12})) == "NOT_EVALUATED"


def test_json_schema_draft_07_by_schema_keyword():
    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "items": [{"type": "string"}]}
    assert status(run("json_schema", '["a", 1]', schema)) == "PASSED"


def test_json_schema_extract_markdown_fence():
    text = 'Here:\n```json\n{"name": "x", "age": 1}\n```\n'
    assert status(run("json_schema", text, SCHEMA)) == "FAILED"
    assert status(run("json_schema", text, SCHEMA, {"extract_markdown_fence": True})) == "PASSED"


def test_json_schema_caps_the_error_list_at_ten():
    schema = {"type": "array", "items": {"type": "string"}}
    r = run("json_schema", "[" + ",".join(["1"] * 30) + "]", schema)
    assert r.evidence.count("\n") == 10 and "20 more" in r.evidence


DOC = '{"items": [{"id": 7, "tags": ["x"]}, {"id": 9}], "total": 15.5, "name": "Widget", "nil": null}'


@pytest.mark.parametrize(
    ("expected", "want"),
    [
        ("$.total", "PASSED"),
        ("$.nil", "PASSED"),
        ("$.missing", "FAILED"),
        ({"path": "$.items[1].id", "value": 9.0}, "PASSED"),
        ({"path": "$['name']", "value": "Widget"}, "PASSED"),
        ({"path": "$.name", "comparator": "contains", "value": "dge"}, "PASSED"),
        ({"path": "$.items[0].tags", "comparator": "contains", "value": "x"}, "PASSED"),
        ({"path": "$.items[0]", "comparator": "contains", "value": "tags"}, "PASSED"),
        ({"path": "$.total", "comparator": "greater_than", "value": 15}, "PASSED"),
        ({"path": "$.total", "comparator": "less_than", "value": 15}, "FAILED"),
        ({"path": "$.name", "comparator": "greater_than", "value": 1}, "FAILED"),
        ({"path": "$.missing", "value": 1}, "FAILED"),
        ({"path": "$.items", "comparator": "exists"}, "PASSED"),
    ],
)
def test_json_path_match(expected, want):
    assert status(run("json_path_match", DOC, expected)) == want


@pytest.mark.parametrize(
    "expected",
    [
        {"path": "$.items[*].id", "value": 1},
        {"path": "$..id", "value": 1},
        {"path": "$.items[0:1]", "value": 1},
        {"path": "$.total", "comparator": "greater_than", "value": "x"},
        {"path": "$.total", "comparator": "between", "value": 1},
        {"path": "$.name", "comparator": "contains", "value": 5},
        "not a path",
    ],
)
def test_json_path_expected_side_problems_are_pack_errors(expected):
    r = run("json_path_match", DOC, expected)
    assert status(r) == "NOT_EVALUATED" and r.klass().value == "pack_error"


def test_json_path_actual_not_json_is_failed():
    assert status(run("json_path_match", "oops", "$.a")) == "FAILED"


def test_json_path_reads_a_json_final_output_value_directly():
    assert status(run("json_path_match", {"a": [1, 2]}, {"path": "$.a[1]", "value": 2})) == "PASSED"


@pytest.mark.parametrize(
    ("a", "e", "config", "want"),
    [
        ("  Hello   World ", "hello world", {}, "PASSED"),
        ("Hello, World!", "hello world", {"pipeline": ["lowercase", "strip_punctuation"]}, "PASSED"),
        # strip_formatting removes `, ( ) [ ]` (grading.md §3.4): the comma goes, so does the code
        ("$1,200 USD", "1200", {"pipeline": ["strip_currency", "strip_formatting", "trim"]}, "PASSED"),
        ("1,234,567", "1234567", {"pipeline": ["strip_formatting"]}, "PASSED"),
        ("`x`", "x", {"pipeline": ["strip_formatting"]}, "FAILED"),
        ("$1200 USD", "1200", {"pipeline": ["strip_currency", "trim"]}, "PASSED"),
        ("ｆｕｌｌ", "full", {"pipeline": ["normalize_unicode"]}, "PASSED"),
        (
            "the cat and a dog",
            "cat and dog",
            {"pipeline": ["remove_articles", "collapse_whitespace", "trim"]},
            "PASSED",
        ),
        ("b a c", "a b c", {"pipeline": ["sort_words"]}, "PASSED"),
        ("b\r\na", "a\nb", {"normalizations": ["sort_lines"]}, "PASSED"),
        ("(x) [y]", "x y", {"pipeline": ["strip_formatting"]}, "PASSED"),
    ],
)
def test_normalized_match_steps(a, e, config, want):
    assert status(run("normalized_match", a, e, config)) == want


def test_normalized_match_unknown_step_is_a_pack_error():
    assert status(run("normalized_match", "a", "a", {"pipeline": ["shout"]})) == "NOT_EVALUATED"


class _SchemaServer:
    """A loopback HTTP server that answers every GET with a JSON Schema and records the path."""

    def __init__(self) -> None:
        import http.server
        import threading

        hits = self.hits = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                hits.append(self.path)
                body = b'{"type": "string"}'
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> _SchemaServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


@pytest.fixture
def schema_server():
    with _SchemaServer() as server:
        yield server


@pytest.mark.parametrize("draft", [None, "http://json-schema.org/draft-07/schema#"])
def test_a_schema_ref_to_a_url_is_never_fetched(schema_server, draft):
    # jsonschema fetched a remote $ref by default: a pack's schema made the grading worker
    # request any URL (a cloud metadata address, an internal service, one that never answers)
    # and graded on the answer. Only references inside the schema are followed; a remote one
    # is the pack's error.
    schema = {"$ref": f"{schema_server.url}/secret"}
    if draft:
        schema["$schema"] = draft
    import json

    for answer in ('"text"', "5"):
        r = run("json_schema", answer, json.dumps(schema))
        assert (status(r), r.outcome_class.value, r.reason_code) == (
            "NOT_EVALUATED",
            "pack_error",
            "invalid_schema",
        ), r.evidence
        assert "/secret" in r.evidence and "not fetched" in r.evidence, r.evidence
    assert schema_server.hits == []
    # references inside the schema, and to the bundled meta-schemas, still resolve
    local = {"$defs": {"name": {"type": "string"}}, "$ref": "#/$defs/name"}
    assert status(run("json_schema", '"text"', json.dumps(local))) == "PASSED"
    assert status(run("json_schema", "5", json.dumps(local))) == "FAILED"
    meta = {"$ref": "https://json-schema.org/draft/2020-12/schema"}
    assert status(run("json_schema", '{"type": "object"}', json.dumps(meta))) == "PASSED"
    assert status(run("json_schema", '{"type": 5}', json.dumps(meta))) == "FAILED"


class _NoPythonRe:
    """Stands in for the ``re`` module inside jsonschema: any use of it fails the test."""

    def __getattr__(self, name: str) -> object:
        raise AssertionError(f"jsonschema used Python's re.{name} on a pack pattern")


def test_json_schema_patterns_run_on_re2_never_python_re(monkeypatch):
    # §3.1: every regular expression uses RE2; a schema's pattern, patternProperties and
    # additionalProperties went through Python's re (backtracking: "^(a+)+$" against 40 a's
    # and a "!" held a grading worker for hours; the 5 s limit is read after the check).
    import json

    import jsonschema

    monkeypatch.setattr(jsonschema._keywords, "re", _NoPythonRe())
    monkeypatch.setattr(jsonschema._utils, "re", _NoPythonRe())
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string", "pattern": "^(a+)+$"}},
        "patternProperties": {"^x-\\p{Ll}+$": {"type": "integer"}},
        "additionalProperties": False,
    }
    ok = {"name": "aaa", "x-tag": 1}
    assert status(run("json_schema", json.dumps(ok), json.dumps(schema))) == "PASSED"
    r = run("json_schema", json.dumps({"name": "a" * 40 + "!", "x-tag": "s", "y": 1}), json.dumps(schema))
    assert status(r) == "FAILED"
    assert "does not match '^(a+)+$'" in r.evidence and "/x-tag: 's' is not of type 'integer'" in r.evidence
    assert "'y' does not match any of the regexes" in r.evidence, r.evidence


@pytest.mark.parametrize(
    ("pattern", "answer", "want"),
    [
        ("^\\p{L}+$", '"héllo"', "PASSED"),  # RE2 (and JSON Schema's ECMA) syntax, not Python's
        ("^\\p{L}+$", '"h3llo"', "FAILED"),
        ("(?<=a)b", '"ab"', "NOT_EVALUATED"),  # a lookbehind is Python's, not RE2's
        ("(a)\\1", '"aa"', "NOT_EVALUATED"),  # so is a backreference
    ],
)
def test_json_schema_patterns_use_re2_syntax(pattern, answer, want):
    import json

    r = run("json_schema", answer, json.dumps({"type": "string", "pattern": pattern}))
    assert status(r) == want, r.evidence
    if want == "NOT_EVALUATED":
        assert r.outcome_class.value == "pack_error" and r.reason_code == "invalid_schema"
        assert "RE2" in r.evidence, r.evidence
