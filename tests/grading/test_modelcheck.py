"""check_model: raw YAML-built data against a pydantic model (pack-format §2.1, §3)."""

from __future__ import annotations

from typing import Annotated

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, JsonValue, model_validator

from grading.engine.configs.fields import Bool, Choice, Key, Trimmed, Unit, fail
from grading.engine.modelcheck import ConfigFor, check_model, format_path, path_is_under, suggest_key


class Closed(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class Inner(Closed):
    match_mode: str = "contains"
    ignore_whitespace: Bool = False


class Scale(Closed):
    min: float
    max: float

    @model_validator(mode="after")
    def _ordered(self) -> Scale:
        if self.min >= self.max:
            raise fail("min must be strictly less than max")
        return self


class Item(Closed):
    key: Key
    count: int = 0
    ratio: float = 0.5
    flag: Bool = False
    mode: Choice("a", "b") = "a"  # type: ignore[valid-type]
    threshold: Unit = 0.5
    payload: dict[str, JsonValue] = {}
    value: JsonValue = None
    scale: Scale | None = None
    inner: Inner | None = None


class Root(Closed):
    name: Key
    items: list[Item] = []
    tags: dict[str, Trimmed] = {}
    either: str | Scale | None = None
    kind: str = "plain"
    config: Annotated[
        dict[str, JsonValue] | None,
        ConfigFor(
            "kind",
            lambda kind: Inner if kind in ("strict", "lenient") else None,
            lambda kind: kind == "lenient",
        ),
    ] = None


def messages(result):
    return {(format_path(issue.path), issue.message) for issue in result.issues}


def test_it_accepts_valid_data_and_returns_the_instance():
    result = check_model(Root, {"name": "x", "items": [{"key": "a", "count": 2}]})
    assert result.issues == []
    assert result.instance.items[0].count == 2


def test_it_reports_a_missing_required_key_at_the_parent():
    result = check_model(Root, {"items": [{"count": 1}]})
    by_path = {issue.path: issue for issue in result.issues}
    assert by_path[("name",)].message == "is required"
    assert by_path[("name",)].anchor == "parent"
    assert by_path[("items", 0, "key")].message == "is required"
    assert result.instance is None


def test_it_treats_a_blank_required_string_as_missing():
    result = check_model(Root, {"name": "   "})
    assert messages(result) == {("name", "is required")}


def test_it_treats_null_as_absent():
    result = check_model(Root, {"name": None, "items": None})
    assert messages(result) == {("name", "is required")}
    assert "items" not in result.cleaned


def test_it_keeps_null_inside_free_form_values():
    result = check_model(Root, {"name": "x", "items": [{"key": "k", "payload": {"a": None}, "value": None}]})
    assert result.issues == []
    assert result.cleaned["items"][0]["payload"] == {"a": None}


def test_it_reports_type_errors_with_the_pack_format_predicates():
    data = {
        "name": ["x"],
        "items": [{"key": "k", "count": "3", "ratio": "0.8", "flag": "maybe", "payload": [], "inner": "x"}],
        "tags": [],
    }
    assert messages(check_model(Root, data)) == {
        ("name", "must be a string"),
        ("items[0].count", "must be an integer"),
        ("items[0].ratio", "must be a number"),
        ("items[0].flag", "must be a boolean"),
        ("items[0].payload", "must be an object"),
        ("items[0].inner", "must be an object"),
        ("tags", "must be an object"),
    }


def test_it_reports_a_list_where_a_list_is_expected():
    assert messages(check_model(Root, {"name": "x", "items": {"key": "k"}})) == {("items", "must be a list")}


def test_it_rejects_an_integral_float_in_an_integer_field():
    assert messages(check_model(Root, {"name": "x", "items": [{"key": "k", "count": 3.0}]})) == {
        ("items[0].count", "must be an integer")
    }


def test_it_rejects_booleans_in_number_fields():
    assert messages(check_model(Root, {"name": "x", "items": [{"key": "k", "ratio": True}]})) == {
        ("items[0].ratio", "must be a number")
    }


def test_it_accepts_an_integer_in_a_number_field():
    result = check_model(Root, {"name": "x", "items": [{"key": "k", "ratio": 1}]})
    assert result.issues == []


def test_it_rejects_non_finite_numbers():
    data = {"name": "x", "items": [{"key": "k", "ratio": float("inf"), "payload": {"a": float("nan")}}]}
    assert messages(check_model(Root, data)) == {
        ("items[0].ratio", "must be a finite number"),
        ("items[0].payload.a", "must be a finite number"),
    }


def test_it_accepts_yaml_11_boolean_spellings_in_boolean_fields():
    for text, expected in [
        ("yes", True),
        ("No", False),
        ("ON", True),
        ("off", False),
        ("y", True),
        ("N", False),
    ]:
        result = check_model(Root, {"name": "x", "items": [{"key": "k", "flag": text}]})
        assert result.issues == []
        assert result.cleaned["items"][0]["flag"] is expected
        assert result.instance.items[0].flag is expected


def test_it_rejects_quoted_true_in_a_boolean_field():
    assert messages(check_model(Root, {"name": "x", "items": [{"key": "k", "flag": "true"}]})) == {
        ("items[0].flag", "must be a boolean")
    }


def test_it_gives_a_string_field_the_scalar_text_of_a_number():
    result = check_model(Root, {"name": 7}, scalar_text=lambda path: "007" if path == ("name",) else None)
    assert result.issues == []
    assert result.instance.name == "007"


def test_it_falls_back_to_the_python_text_of_a_scalar():
    result = check_model(Root, {"name": True, "kind": 1.5})
    assert result.cleaned["name"] == "true"
    assert result.cleaned["kind"] == "1.5"


def test_it_trims_trimmed_fields_in_the_cleaned_data():
    result = check_model(Root, {"name": "  x ", "tags": {"a": " b "}})
    assert result.cleaned["name"] == "x"
    assert result.cleaned["tags"] == {"a": "b"}


def test_it_reports_unknown_keys_at_the_key_and_drops_them():
    result = check_model(Root, {"name": "x", "zzz": 1})
    [issue] = result.issues
    assert issue.path == ("zzz",)
    assert issue.message == "is not an allowed key"
    assert issue.anchor == "key"
    assert issue.severity == "error"
    assert "zzz" not in result.cleaned


def test_it_makes_unknown_keys_warnings_when_the_callback_says_so():
    result = check_model(Root, {"name": "x", "Name2": 1}, unknown_key_severity=lambda path: "warning")
    [issue] = result.issues
    assert issue.severity == "warning"
    assert issue.rule == "unknown_key"
    assert result.instance is not None
    assert "Name2" not in result.cleaned


def test_it_suggests_an_allowed_key_equal_ignoring_case():
    [issue] = check_model(Root, {"name": "x", "Items": []}).issues
    assert issue.message == 'is not an allowed key; did you mean "items"?'


def test_it_suggests_a_close_match():
    [issue] = check_model(Root, {"name": "x", "itmes": []}).issues
    assert issue.message == 'is not an allowed key; did you mean "items"?'


def test_it_suggests_the_only_key_holding_the_word():
    assert suggest_key("mode", ["match_mode", "ignore_whitespace"]) == "match_mode"
    assert suggest_key("mode", ["match_mode", "order_mode"]) is None


def test_it_asks_the_suggest_callback_last():
    seen = []

    def suggest(path, key, allowed):
        seen.append((path, key))
        return 'top-level "tools"'

    [issue] = check_model(Root, {"name": "x", "tools": {}}, suggest=suggest).issues
    assert issue.message == 'is not an allowed key; did you mean top-level "tools"?'
    assert seen == [((), "tools")]


def test_it_checks_a_discriminated_config_against_the_resolved_model():
    result = check_model(
        Root, {"name": "x", "kind": "strict", "config": {"mode": "x", "ignore_whitespace": 3}}
    )
    assert messages(result) == {
        ("config.mode", 'is not an allowed key; did you mean "match_mode"?'),
        ("config.ignore_whitespace", "must be a boolean"),
    }
    assert all(issue.severity == "error" for issue in result.issues)


def test_it_warns_about_unknown_keys_of_a_lenient_config():
    result = check_model(Root, {"name": "x", "kind": "lenient", "config": {"mode": "x"}})
    [issue] = result.issues
    assert (issue.severity, issue.rule, issue.anchor) == ("warning", "unknown_key", "key")
    assert result.cleaned["config"] == {}
    assert result.instance is not None


def test_it_leaves_a_config_free_form_when_the_discriminator_is_unknown():
    result = check_model(Root, {"name": "x", "kind": "other", "config": {"anything": [1]}})
    assert result.issues == []


def test_it_keeps_a_value_rule_message_verbatim():
    data = {"name": "x", "items": [{"key": "k", "threshold": 2, "mode": "c", "scale": {"min": 5, "max": 1}}]}
    assert messages(check_model(Root, data)) == {
        ("items[0].threshold", "must be between 0 and 1"),
        ("items[0].mode", "must be one of a, b"),
        ("items[0].scale", "min must be strictly less than max"),
    }


def test_it_does_not_cascade_a_type_error_into_a_model_rule():
    data = {"name": "x", "items": [{"key": "k", "scale": {"min": "5", "max": 1}}]}
    assert messages(check_model(Root, data)) == {("items[0].scale.min", "must be a number")}


def test_it_validates_only_the_union_member_the_data_selects():
    assert messages(check_model(Root, {"name": "x", "either": {"min": 3, "max": 1}})) == {
        ("either", "min must be strictly less than max")
    }
    assert messages(check_model(Root, {"name": "x", "either": [1]})) == {
        ("either", "must be a string or an object")
    }
    assert check_model(Root, {"name": "x", "either": "text"}).issues == []


def test_it_reports_every_issue_of_the_document_in_one_pass():
    data = {"items": [{"count": "x"}, {"key": "k", "flag": 3}], "bogus": 1}
    assert len(check_model(Root, data).issues) == 5


def test_it_prefixes_issue_paths_with_the_given_path():
    result = check_model(Root, {"items": []}, path=("version", "evaluation_spec"))
    assert [issue.path for issue in result.issues] == [("version", "evaluation_spec", "name")]


def test_it_reports_a_non_object_root():
    result = check_model(Root, ["x"])
    assert messages(result) == {("", "must be an object")}
    assert result.instance is None


def test_it_reports_non_string_keys_by_their_text():
    result = check_model(Root, {"name": "x", 1: "a"})
    assert [issue.path for issue in result.issues] == [("1",)]


def test_format_path_writes_dotted_indexed_paths():
    assert format_path(("input_sets", 0, "cases", 2, "case_key")) == "input_sets[0].cases[2].case_key"
    assert (
        format_path(("validators", 0), "version.evaluation_spec") == "version.evaluation_spec.validators[0]"
    )
    assert format_path(("tags", "a b", "x")) == 'tags["a b"].x'
    assert format_path(("tags", "0")) == 'tags["0"]'
    assert format_path(("my-key",)) == "my-key"
    assert format_path(()) == ""


@given(
    st.lists(st.lists(st.sampled_from(["a", "b", 0, 1]), max_size=4).map(tuple), max_size=12),
    st.lists(st.sampled_from(["a", "b", 0, 1]), max_size=5).map(tuple),
)
@settings(max_examples=300, deadline=None)
def test_path_is_under_is_the_prefix_test_whatever_the_number_of_roots(roots, path):
    # It looks prefixes up when there are more roots than path segments (linear in a pack's
    # rejected values, not quadratic): the answer must be the plain definition's.
    naive = any(path[: len(root)] == root for root in roots)
    assert path_is_under(path, set(roots)) is naive
    assert path_is_under(path, frozenset(roots)) is naive
