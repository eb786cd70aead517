"""pack-format §15: every conformance example, with exactly its errors and warnings, in §3's order."""

from __future__ import annotations

import io
import zipfile

from tests.packs.bundle_helpers import (
    base_pack,
    check,
    dump,
    errors,
    line_of,
    pack,
    pos_of,
    rules,
    spec_of,
    symlink_info,
    warnings,
)


def test_the_base_pack_is_valid_without_warnings():
    report = check(base_pack())
    assert report.to_body() == {"valid": True, "errors": [], "warnings": []}


def test_1_missing_family_version_zero_and_a_tool_policy_under_prompt_eval():
    doc = pack(pack={"slug": "demo", "name": "Demo"})
    version = doc["version"]
    doc["version"] = {"number": 0, "execution_mode": "prompt_eval", "tool_policy": {"allow_shell": True}}
    doc["version"]["evaluation_spec"] = version["evaluation_spec"]
    text = dump(doc)
    report = check(text)
    assert errors(report) == [
        ("pack.family", "is required"),
        ("version.number", "must be greater than 0"),
        ("version.tool_policy", "must be empty when version.execution_mode is prompt_eval"),
    ]
    assert report.warnings == []
    family, number, policy = report.errors
    assert (family.line, family.column) == (2, 3)  # the parent mapping of the missing key
    assert (number.line, number.column) == (5, 11)
    assert (policy.line, policy.column) == pos_of(text, "allow_shell")


def test_2_a_misspelled_top_level_key_is_a_warning_with_a_suggestion():
    doc = base_pack()
    doc["input_set"] = doc.pop("input_sets")
    text = dump(doc)
    report = check(text)
    assert report.valid
    assert report.errors == []
    assert warnings(report) == [("input_set", 'is not an allowed key; did you mean "input_sets"?')]
    assert rules(report) == ["unknown_key"]
    warning = report.warnings[0]
    assert (warning.line, warning.column) == (line_of(text, "input_set:"), 1)
    strict = check(text, strict=True)
    assert not strict.valid
    assert errors(strict) == [("input_set", 'is not an allowed key; did you mean "input_sets"?')]
    assert strict.errors[0].rule == "unknown_key"
    assert strict.warnings == []


def test_3_custom_tools_under_version_suggest_the_top_level():
    doc = base_pack()
    doc["version"]["tools"] = {"custom": [{"name": "lookup", "implementation": {"type": "mock"}}]}
    report = check(doc)
    assert report.valid
    assert warnings(report) == [("version.tools", 'is not an allowed key; did you mean top-level "tools"?')]
    assert rules(report) == ["unknown_key"]
    assert "tools" not in report.manifest["version"]
    assert "tools" not in report.manifest


def test_4_a_second_version_key_is_reported_at_the_second_key():
    text = dump(base_pack()) + "version:\n  number: 2\n"
    report = check(text)
    assert errors(report) == [("version", "is defined more than once")]
    assert (report.errors[0].line, report.errors[0].column) == (line_of(text, "version:", 2), 1)


def test_5_an_unknown_challenge_in_a_second_case():
    doc = base_pack()
    doc["input_sets"][0]["cases"] = [
        {"challenge_key": "sum", "case_key": "a"},
        {"challenge_key": "summ", "case_key": "b"},
    ]
    text = dump(doc)
    report = check(text)
    assert errors(report) == [
        ("input_sets[0].cases[1].challenge_key", "must reference a declared challenge"),
        (
            "input_sets[0].cases[1].challenge_key",
            "must reference the same challenge as the other cases in this input set",
        ),
    ]
    assert report.warnings == []
    assert {(e.line, e.column) for e in report.errors} == {pos_of(text, "summ")}


def test_6_duplicate_legacy_items_are_reported_where_the_author_wrote_them():
    doc = base_pack()
    doc["input_sets"][0] = {
        "key": "default",
        "name": "Default",
        "items": [{"challenge_key": "sum", "item_key": "q1"}, {"challenge_key": "sum", "item_key": "q1"}],
    }
    text = dump(doc)
    report = check(text)
    assert errors(report) == [
        ("input_sets[0].items[1].item_key", "must be unique per challenge in the input set")
    ]
    assert report.errors[0].line == line_of(text, "item_key: q1", 2)
    # The second item also duplicates the first one's content: a lint, never an error.
    assert warnings(report) == [("input_sets[0].items[1]", "duplicates input_sets[0].items[0]")]


def test_7_case_sources_and_artifact_keys_must_resolve():
    doc = base_pack()
    doc["input_sets"][0]["cases"][0].update(
        inputs=[{"key": "question", "kind": "text", "value": "2+2"}],
        expectations=[
            {"key": "a", "kind": "text", "source": "input:questoin"},
            {"key": "b", "kind": "text", "artifact_key": "gold"},
        ],
    )
    report = check(doc)
    assert errors(report) == [
        ("input_sets[0].cases[0].expectations[0].source", "must reference a declared case input"),
        ("input_sets[0].cases[0].expectations[1].artifact_key", "must reference a declared version asset"),
    ]
    assert report.warnings == []


def test_8_a_validator_without_expected_from_and_with_a_bad_target():
    doc = base_pack()
    spec_of(doc)["validators"] = [{"key": "ok", "type": "exact_match", "target": "output"}]
    text = dump(doc)
    report = check(text)
    assert errors(report) == [
        ("version.evaluation_spec.validators[0].expected_from", "is required"),
        ("version.evaluation_spec.validators[0].target", "must be a supported evidence reference"),
    ]
    required, target = report.errors
    assert (required.line, required.column) == pos_of(text, "key: ok")  # the validator's mapping
    assert (target.line, target.column) == pos_of(text, "output")


def test_9_a_stray_mode_in_a_file_content_match_config_is_a_warning():
    doc = base_pack()
    spec = spec_of(doc)
    spec["post_execution_checks"] = [{"key": "solution", "type": "file_capture", "path": "solution.py"}]
    spec["validators"] = [
        {
            "key": "src",
            "type": "file_content_match",
            "target": "file:solution",
            "expected_from": "literal:def f",
            "config": {"mode": "contains"},
        }
    ]
    report = check(doc)
    assert report.valid
    assert warnings(report) == [
        (
            "version.evaluation_spec.validators[0].config.mode",
            'is not an allowed key; did you mean "match_mode"?',
        )
    ]
    assert rules(report) == ["unknown_key"]
    assert "mode" not in report.manifest["evaluation_spec"]["validators"][0]["config"]
    assert not check(doc, strict=True).valid


def test_10_a_backreference_is_not_re2():
    doc = base_pack()
    spec_of(doc)["validators"] = [
        {
            "key": "echo",
            "type": "regex_match",
            "target": "final_output",
            "expected_from": "literal:(\\w+) \\1",
        }
    ]
    report = check(doc)
    assert errors(report) == [
        ("version.evaluation_spec.validators[0].expected_from", "must be a valid RE2 pattern")
    ]
    assert report.errors[0].detail.startswith("invalid escape sequence: \\1")  # RE2's own text
    assert "RE2 has no backreferences" in report.errors[0].detail


def test_11_scorecard_coherence_in_hybrid_mode():
    doc = base_pack()
    spec = spec_of(doc)
    spec["judge_mode"] = "hybrid"
    spec["llm_judges"] = [
        {"key": "tone", "mode": "rubric", "model": "claude-haiku-4-5", "rubric": "5: polite."}
    ]
    spec["scorecard"] = {
        "strategy": "hybrid",
        "dimensions": [
            {"key": "q", "source": "llm_judge", "judge_key": "tonee"},
            {"key": "speed", "source": "latency", "normalization": {"target": 1000, "max": 5000}},
        ],
    }
    report = check(doc)
    assert errors(report) == [
        (
            "version.evaluation_spec.scorecard.strategy",
            "hybrid strategy requires at least one gated dimension",
        ),
        ("version.evaluation_spec.scorecard.dimensions[0].judge_key", 'references unknown judge key "tonee"'),
        ("version.evaluation_spec.scorecard.dimensions[1].better_direction", "must be higher or lower"),
    ]


def test_12_a_zip_with_a_path_leaving_the_root_and_a_symlink():
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("pack.yaml", dump(base_pack()))
        archive.writestr("../notes.txt", "notes")
        archive.writestr(symlink_info("data/link"), "/etc/passwd")
    report = check(buffer.getvalue())
    assert [(e.field, e.message, e.detail, e.line, e.column) for e in report.errors] == [
        ("bundle", "must not contain paths that leave the archive root", "../notes.txt", None, None),
        ("bundle", "must not contain symbolic links", "data/link", None, None),
    ]
