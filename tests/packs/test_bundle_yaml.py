"""The YAML loader (pack-format §2.1): one UTF-8 document, YAML 1.2 scalars, duplicate keys,
merge keys, alias limits, tags, positions; malformed input never raises."""

from __future__ import annotations

import time

import pytest

from packs.bundle.yamlload import MAX_YAML_BYTES, load_yaml, resolve_plain
from tests.packs.bundle_helpers import base_pack, check, dump, errors, line_of, pos_of, warnings


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("yes", "yes"),
        ("no", "no"),
        ("on", "on"),
        ("off", "off"),
        ("Y", "Y"),
        ("2024-01-05", "2024-01-05"),
        ("2024-01-05T10:00:00Z", "2024-01-05T10:00:00Z"),
        ("007", 7),
        ("0o17", 15),
        ("0x1F", 31),
        ("1_000", "1_000"),
        ("1e3", 1000.0),
        ("-.5", -0.5),
        ("true", True),
        ("False", False),
        ("~", None),
        ("null", None),
        ("", None),
        ("+12", 12),
        ("1:30", "1:30"),
    ],
)
def test_plain_scalars_follow_the_yaml_1_2_core_schema(text, value):
    assert resolve_plain(text) == value


def test_a_string_field_takes_the_scalar_text_and_booleans_accept_yaml_1_1():
    doc = base_pack()
    doc["input_sets"][0]["cases"][0]["case_key"] = "CASEKEY"
    text = dump(doc).replace("CASEKEY", "007")
    text = text.replace(
        "execution_mode: native",
        "execution_mode: native\n  tool_policy: {allow_shell: yes, allow_network: Off}",
    )
    report = check(text)
    assert report.valid, report.to_body()
    assert report.manifest["input_sets"][0]["cases"][0]["case_key"] == "007"
    assert report.manifest["tool_policy"]["allow_shell"] is True
    assert report.manifest["tool_policy"]["allow_network"] is False


@pytest.mark.parametrize(
    ("replacement", "message"),
    [
        ("number: '1'", "must be an integer"),
        ("number: 1.5", "must be an integer"),
        ("number: yes", "must be an integer"),
    ],
)
def test_number_fields_are_strict(replacement, message):
    text = dump(base_pack()).replace("number: 1", replacement, 1)
    assert errors(check(text)) == [("version.number", message)]


@pytest.mark.parametrize("value", [".inf", "-.Inf", ".nan"])
def test_non_finite_numbers_are_refused(value):
    doc = base_pack()
    doc["version"]["evaluation_spec"]["scorecard"]["pass_threshold"] = 0.5
    text = dump(doc).replace("pass_threshold: 0.5", f"pass_threshold: {value}")
    assert errors(check(text)) == [
        ("version.evaluation_spec.scorecard.pass_threshold", "must be a finite number")
    ]


def test_a_non_finite_number_in_a_payload_is_refused_too():
    text = dump(base_pack()).replace("a: 1\n", "a: .inf\n")
    assert errors(check(text)) == [("input_sets[0].cases[0].payload.a", "must be a finite number")]


BEYOND_DOUBLE = "9" * 400  # an integer past ~1.8e308, the largest finite double


@pytest.mark.parametrize(
    ("text", "value"),
    [
        (BEYOND_DOUBLE, float("inf")),
        ("-" + BEYOND_DOUBLE, float("-inf")),
        ("9" * 5000, float("inf")),  # more digits than int() reads
        ("0x" + "f" * 300, float("inf")),  # int() reads any hex length
        ("0o" + "7" * 400, float("inf")),
        ("9" * 300, int("9" * 300)),  # within the double range: exact
    ],
)
def test_an_integer_beyond_the_double_range_is_infinite_like_1e400(text, value):
    assert resolve_plain(text) == value


@pytest.mark.parametrize(
    ("anchor", "replacement", "field"),
    [
        ("a: 1\n", f"a: {BEYOND_DOUBLE}\n", "input_sets[0].cases[0].payload.a"),
        ("a: 1\n", "a: 0x" + "f" * 4000 + "\n", "input_sets[0].cases[0].payload.a"),
        ("a: 1\n", "a: " + "9" * 5000 + "\n", "input_sets[0].cases[0].payload.a"),
        ("  number: 1\n", f"  number: {BEYOND_DOUBLE}\n", "version.number"),
        ("  number: 1\n", "  number: .nan\n", "version.number"),
        (
            "    case_key: a\n",
            f"    case_key: a\n    case_timeout_seconds: -{BEYOND_DOUBLE}\n",
            "input_sets[0].cases[0].case_timeout_seconds",
        ),
        (
            "  execution_mode: native\n",
            f"  execution_mode: native\n  tool_policy: {{max_tool_calls: {BEYOND_DOUBLE}}}\n",
            "version.tool_policy.max_tool_calls",
        ),
        (
            "  execution_mode: native\n",
            "  execution_mode: native\n  filesystem: {max_workspace_bytes: 0x" + "f" * 300 + "}\n",
            "version.filesystem.max_workspace_bytes",
        ),
        (
            "pass_threshold: 1\n",
            f"pass_threshold: {BEYOND_DOUBLE}\n",
            "version.evaluation_spec.scorecard.pass_threshold",
        ),
    ],
)
def test_a_huge_number_is_a_field_error_never_a_crash_or_a_string(anchor, replacement, field):
    """Such a number crashed the range checks (math.isfinite overflows on the int) or, past
    4300 digits, the case's canonical JSON at publish; past 4300 digits in a payload it was
    silently read as a string, and in an integer field it got "must be an integer"."""
    text = dump(base_pack()).replace(anchor, replacement, 1)
    report = check(text)
    assert errors(report) == [(field, "must be a finite number")]
    error = report.errors[0]
    line = text.splitlines()[error.line - 1]
    assert line[error.column - 1 :].lstrip("-").startswith(("9", "0x", ".nan"))


def test_a_big_integer_within_the_double_range_stays_exact_and_text_fields_keep_their_digits():
    doc = base_pack()
    doc["input_sets"][0]["cases"][0]["payload"]["a"] = int("9" * 300)
    text = dump(doc).replace("title: Sum", f"title: {BEYOND_DOUBLE[:450]}")
    report = check(text)
    assert report.valid, report.to_body()
    assert report.manifest["input_sets"][0]["cases"][0]["payload"]["a"] == int("9" * 300)
    assert report.manifest["challenges"][0]["title"] == BEYOND_DOUBLE[:450]
    assert report.case_documents()["default"][0].document == {"a": int("9" * 300), "b": 2}


def test_duplicate_keys_keep_the_first_value_and_report_the_second_key():
    text = dump(base_pack()).replace("  slug: demo\n", "  slug: demo\n  slug: other\n")
    report = check(text)
    assert errors(report) == [("pack.slug", "is defined more than once")]
    assert (report.errors[0].line, report.errors[0].column) == pos_of(text, "slug: other")
    doc, _ = load_yaml(text.encode())
    assert doc.data["pack"]["slug"] == "demo"


def test_duplicate_keys_in_a_payload_are_reported_with_their_path():
    text = dump(base_pack()).replace("      a: 1\n", "      a: 1\n      a: 9\n")
    assert errors(check(text)) == [("input_sets[0].cases[0].payload.a", "is defined more than once")]


def test_merge_keys_work_and_explicit_keys_win():
    text = """\
x-validator: &contains {type: contains, target: final_output}
pack: {slug: demo, name: Demo, family: reasoning}
version:
  number: 1
  evaluation_spec:
    name: demo
    version_number: 1
    judge_mode: deterministic
    validators:
      - <<: *contains
        key: done
        expected_from: literal:done
      - <<: [*contains]
        key: ok
        type: regex_match
        expected_from: 'literal:o+k'
    scorecard: {pass_threshold: 1, dimensions: [correctness]}
challenges: [{key: c, title: T, category: x, difficulty: easy}]
"""
    report = check(text)
    assert errors(report) == []
    assert warnings(report) == [("x-validator", "is not an allowed key")]
    validators = report.manifest["evaluation_spec"]["validators"]
    assert [(v["key"], v["type"], v["target"]) for v in validators] == [
        ("done", "contains", "final_output"),
        ("ok", "regex_match", "final_output"),
    ]


def test_an_error_inside_merged_content_points_at_the_anchor():
    text = dump(base_pack()).replace(
        "challenges:\n", "x-c: &c {title: T, category: x, difficulty: trivial}\nchallenges:\n"
    )
    text = text.replace(
        "- key: sum\n  title: Sum\n  category: math\n  difficulty: easy\n", "- key: sum\n  <<: *c\n"
    )
    report = check(text)
    assert errors(report) == [("challenges[0].difficulty", "must be one of easy, medium, hard, expert")]
    assert (report.errors[0].line, report.errors[0].column) == pos_of(text, "trivial")


BILLION_LAUGHS = """\
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
"""


def test_a_billion_laughs_is_refused_quickly():
    started = time.monotonic()
    report = check(BILLION_LAUGHS)
    assert time.monotonic() - started < 3
    assert errors(report) == [("bundle", "uses too many aliases")]
    assert report.errors[0].line is not None


def test_a_small_bomb_past_ten_times_the_parsed_size_is_refused():
    text = "\n".join(BILLION_LAUGHS.splitlines()[:4]) + "\n"  # 9**4 = 6561 nodes from ~60
    assert errors(check(text)) == [("bundle", "uses too many aliases")]


def test_ordinary_alias_reuse_is_fine():
    text = dump(base_pack()).replace(
        "    payload:\n      a: 1\n      b: 2\n", "    payload: &p {a: 1, b: 2}\n"
    )
    text += "  - {challenge_key: sum, case_key: b, payload: *p, inputs: [{key: k, kind: text, value: x}]}\n"
    report = check(text)
    assert report.to_body() == {"valid": True, "errors": [], "warnings": []}
    cases = report.manifest["input_sets"][0]["cases"]
    assert cases[0]["payload"] == cases[1]["payload"] == {"a": 1, "b": 2}


@pytest.mark.parametrize("tag", ["!custom", "!!python/object:os.system", "!!binary", "!include"])
def test_custom_tags_are_refused_at_the_node(tag):
    text = dump(base_pack()).replace("name: Demo", f"name: {tag} Demo")
    report = check(text)
    assert errors(report) == [("bundle", "uses an unsupported tag")]
    assert report.errors[0].line == pos_of(text, tag)[0]


def test_standard_tags_are_fine():
    text = dump(base_pack()).replace("name: Demo", "name: !!str Demo")
    assert check(text).valid


def test_more_than_one_document_is_refused():
    text = dump(base_pack()) + "---\nother: 1\n"
    report = check(text)
    assert errors(report) == [("bundle", "must contain exactly one YAML document")]


@pytest.mark.parametrize(
    "text",
    [
        "pack: {slug: demo\nversion: [\n",
        "pack:\n  slug: demo\n name: x\n",
        "a: 'unterminated\n",
        "- a\nb: c\n",
        "a: b: c\n",
        "\t- tab\n",
        "a: *undefined\n",
        "a: \x01\n",
    ],
)
def test_syntax_errors_are_field_errors_with_parser_text(text):
    report = check(text)
    assert not report.valid
    (error,) = report.errors
    assert error.field == "bundle"
    assert error.message == "must be valid YAML"
    assert error.detail
    assert error.line is not None and error.column is not None


@pytest.mark.parametrize(
    ("old", "new", "what"),
    [
        ("  slug: demo", "\tslug: demo", "a tab"),
        ("  slug: demo", "  \tslug: demo", "a tab"),
        ("- key: sum", "\t- key: sum", "a tab"),
        ("  title: Sum", "\ttitle: Sum", "a tab"),
        ("  slug: demo", "\u00a0 slug: demo", "U+00A0 (NO-BREAK SPACE)"),
        ("  title: Sum", "\u3000title: Sum", "U+3000 (IDEOGRAPHIC SPACE)"),
    ],
)
def test_a_line_indented_with_a_tab_or_an_odd_space_is_named_in_the_detail(old, new, what):
    # libyaml says "found character that cannot start any token" or "mapping values are not
    # allowed in this context", sometimes a line later, and never names the character.
    text = dump(base_pack()).replace(old, new, 1)
    (error,) = check(text).errors
    assert (error.field, error.message) == ("bundle", "must be valid YAML")
    line = line_of(text, new.strip(" \t\u00a0\u3000"))
    assert error.detail.endswith(f"; line {line} is indented with {what}: YAML indents with spaces only")


def test_a_syntax_error_on_lines_indented_with_spaces_has_no_indentation_hint():
    (error,) = check("pack:\n  slug: demo\n  name: [unclosed\nversion: 1\n").errors
    assert "indented" not in error.detail


def test_the_parser_position_is_reported():
    report = check("pack:\n  slug: demo\n  name: [unclosed\nversion: 1\n")
    (error,) = report.errors
    assert error.message == "must be valid YAML"
    assert error.line == 4


def test_invalid_utf8_is_refused():
    report = check(b"pack: {slug: d\xffmo}\n")
    assert errors(report) == [("bundle", "must be valid YAML")]
    assert "UTF-8" in report.errors[0].detail


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be", "utf-16-le"])
def test_a_utf16_file_is_refused_with_the_fix(encoding):
    bom = {"utf-16-be": "\ufeff", "utf-16-le": "\ufeff"}.get(encoding, "")
    report = check((bom + dump(base_pack())).encode(encoding))
    (error,) = report.errors
    assert (error.field, error.message, error.line, error.column) == ("bundle", "must be valid YAML", 1, 1)
    assert error.detail.endswith("save it as UTF-8")


def test_a_bom_is_ignored():
    assert check(b"\xef\xbb\xbf" + dump(base_pack()).encode()).valid


def test_a_document_over_5_mib_is_refused():
    text = dump(base_pack()) + "# " + "x" * (6 * 1024 * 1024) + "\n"
    started = time.monotonic()
    report = check(text)
    assert time.monotonic() - started < 2
    assert errors(report) == [("bundle", "must be at most 5 MiB")]
    assert (report.errors[0].line, report.errors[0].column) == (None, None)


def test_exactly_5_mib_is_allowed():
    text = dump(base_pack())
    text += "#" * (MAX_YAML_BYTES - len(text.encode()) - 1) + "\n"
    assert len(text.encode()) == MAX_YAML_BYTES
    assert check(text).valid


@pytest.mark.parametrize("text", ["- 1\n- 2\n", "just text\n", "42\n"])
def test_a_root_that_is_not_a_mapping_is_refused(text):
    assert errors(check(text)) == [("bundle", "must be an object")]


def test_an_empty_document_reports_the_required_keys():
    assert errors(check("")) == [
        ("challenges", "must contain at least one challenge"),
        ("pack", "is required"),
        ("version", "is required"),
    ]


@pytest.mark.parametrize("depth", [300, 20000])
def test_deep_nesting_is_refused_quickly(depth):
    started = time.monotonic()
    flow = check("a: " + "[" * depth + "]" * depth + "\n")
    block = check("a:\n  " + "- " * depth + "x\n")
    assert time.monotonic() - started < 2
    assert errors(flow) == [("bundle", "is nested too deeply")]
    assert errors(block) == [("bundle", "is nested too deeply")]


def test_null_means_absent_except_in_free_form_values():
    text = dump(base_pack()).replace("  slug: demo\n", "  slug: demo\n  description: null\n")
    text = text.replace(
        "    payload:\n      a: 1\n      b: 2\n",
        "    payload: {a: null}\n    inputs:\n    - {key: q, kind: json, value: null}\n    - {key: r, kind: text}\n",
    )
    report = check(text)
    assert report.valid, report.to_body()
    case = report.manifest["input_sets"][0]["cases"][0]
    assert case["payload"] == {"a": None}
    assert case["inputs"] == [{"key": "q", "kind": "json", "value": None}, {"key": "r", "kind": "text"}]
    assert "description" not in report.manifest["pack"]
    defs = report.case_defs("default")[0]
    assert defs.inputs[0].value is None
    from grading.engine.types import MISSING

    assert defs.inputs[1].value is MISSING


@pytest.mark.parametrize("spelling", ["null", "~", "NULL", ""])
def test_a_null_item_of_a_text_list_or_map_is_empty_text_never_the_word_null(spelling):
    # §2.1: a null is not a string; it used to take its scalar text, so `[null]` installed
    # the apt package "null" and `default: [~]` named the deployment "~".
    doc = base_pack()
    doc["version"]["sandbox"] = {"env_vars": {"TOKEN": "N"}, "additional_packages": ["N"]}
    doc["version"]["filesystem"] = {"readable_roots": ["N"]}
    doc["version"]["deployment_defaults"] = {"aliases": {"fast": "N"}, "lineups": {"default": ["a", "N"]}}
    text = dump(doc).replace("- N\n", f"- {spelling}\n").replace(": N\n", f": {spelling}\n")
    report = check(text)
    assert errors(report) == [
        ("version.sandbox.additional_packages[0]", "must be a valid apt package name"),
        ("version.deployment_defaults.aliases.fast", "selector is required"),
        ("version.deployment_defaults.lineups.default[1]", "selector is required"),
    ]
    del doc["version"]["sandbox"]["additional_packages"], doc["version"]["deployment_defaults"]
    report = check(dump(doc).replace("- N\n", f"- {spelling}\n").replace(": N\n", f": {spelling}\n"))
    assert report.valid, report.to_body()
    assert report.manifest["sandbox"]["env_vars"] == {"TOKEN": ""}  # as upstream's zero value
    assert report.manifest["filesystem"]["readable_roots"] == [""]


def test_a_null_payload_and_definition_become_empty_objects():
    text = dump(base_pack()).replace("    payload:\n      a: 1\n      b: 2\n", "    payload: ~\n")
    text = text.replace("  instructions: Add them.\n", "  definition: null\n")
    report = check(text)
    assert report.valid
    assert report.manifest["input_sets"][0]["cases"][0]["payload"] == {}
    assert report.manifest["challenges"][0]["definition"] == {}


def test_a_required_string_that_is_blank_is_absent():
    text = dump(base_pack()).replace("  name: Demo\n", "  name: '   '\n")
    assert errors(check(text)) == [("pack.name", "is required")]


def test_payload_keys_that_are_numbers_keep_their_text():
    text = dump(base_pack()).replace("      a: 1\n", "      1: one\n      true: yes\n")
    report = check(text)
    assert report.valid
    assert report.manifest["input_sets"][0]["cases"][0]["payload"] == {"1": "one", "true": "yes", "b": 2}


def test_complex_keys_are_refused():
    assert errors(check("? [a, b]\n: c\n")) == [("bundle", "must use text mapping keys")]


def test_nul_characters_are_refused_before_they_reach_the_database():
    text = dump(base_pack()).replace("name: Demo", 'name: "De\\0mo"', 1)
    report = check(text)
    assert errors(report) == [("pack.name", "must not contain NUL characters")]
    assert report.errors[0].line == 3


def _editor_position(text: str, needle: str) -> tuple[int, int]:
    """1-based (line, column) of ``needle`` with lines broken at LF only, as the editor's
    text area and most text editors count them (``str.splitlines`` also breaks at U+2028)."""
    offset = text.index(needle)
    line_start = text.rfind("\n", 0, offset) + 1
    return text.count("\n", 0, offset) + 1, offset - line_start + 1


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\x85"])
def test_positions_after_a_line_or_paragraph_separator_are_the_editors(separator):
    """libyaml starts a new line at U+0085, U+2028 and U+2029 (YAML 1.1 line breaks); the
    editor and CLI users count lines at LF, so every later error pointed below its line."""
    doc = base_pack()
    doc["pack"]["name"] = f"Two{separator}{separator}lines"
    doc["version"]["execution_mode"] = "Not A Mode"
    text = dump(doc)
    report = check(text)
    (error,) = report.errors
    assert error.field == "version.execution_mode"
    assert (error.line, error.column) == _editor_position(text, "Not A Mode")


def test_a_duplicate_key_and_a_column_after_a_separator_on_the_same_line():
    text = dump(base_pack()).replace("  name: Demo\n", '  name: "A\u2028B"\n  name: Again\n', 1)
    report = check(text)
    assert errors(report) == [("pack.name", "is defined more than once")]
    assert (report.errors[0].line, report.errors[0].column) == _editor_position(text, "name: Again")

    pack_block = "pack:\n  slug: demo\n  name: Demo\n  family: reasoning\n"
    flow = dump(base_pack()).replace(pack_block, 'pack: {name: "A\u2028B", slug: demo, family: [x]}\n')
    report = check(flow)
    assert errors(report) == [("pack.family", "must be a string")]
    assert (report.errors[0].line, report.errors[0].column) == _editor_position(flow, "[x]")


def test_a_syntax_error_after_a_separator_is_placed_on_the_editors_line():
    text = 'name: "x\u2028y\u2028z"\nversion: [1\n'
    document, issues = load_yaml(text.encode())
    assert document is None
    assert (issues[0].line, issues[0].column) == (3, 1)  # the end of input; libyaml said line 5
