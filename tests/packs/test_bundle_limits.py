"""Texts longer than the columns that store them are field errors of the validator
(``packs.bundle.limits``), at the value's line and column: ``pack validate`` and the editor
said "valid" to a 301-character pack name that publish then refused."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from packs.bundle import limits
from packs.models import Asset, Case, Challenge, InputSet, Pack
from tests.packs.bundle_helpers import base_pack, check, dump, errors, pos_of

Doc = dict[str, Any]


def _set(path: tuple[Any, ...]) -> Callable[[Doc, str], None]:
    def apply(doc: Doc, value: str) -> None:
        target = doc
        for step in path[:-1]:
            target = target[step]
        target[path[-1]] = value

    return apply


def _challenge_key(doc: Doc, value: str) -> None:
    doc["challenges"][0]["key"] = value
    doc["input_sets"][0]["cases"][0]["challenge_key"] = value


def _legacy_item_key(doc: Doc, value: str) -> None:
    doc["input_sets"][0] = {
        "key": "default",
        "name": "Default",
        "items": [{"challenge_key": "sum", "item_key": value, "payload": {}}],
    }


def _asset(where: str, name: str) -> Callable[[Doc, str], None]:
    def apply(doc: Doc, value: str) -> None:
        owner = {
            "version": doc["version"],
            "challenge": doc["challenges"][0],
            "case": doc["input_sets"][0]["cases"][0],
        }[where]
        asset = {"key": "a", "path": "a.json", "artifact_id": "5b0c1f8e-7a44-4f5e-9d43-1d2b8e0f6a11"}
        asset[name] = value
        owner["assets"] = [asset]

    return apply


ASSET_PREFIX = {"version": "version", "challenge": "challenges[0]", "case": "input_sets[0].cases[0]"}

FIELDS = [
    ("pack.name", limits.PACK_NAME, _set(("pack", "name"))),
    ("pack.family", limits.PACK_FAMILY, _set(("pack", "family"))),
    ("challenges[0].key", limits.CHALLENGE_KEY, _challenge_key),
    ("challenges[0].title", limits.CHALLENGE_TITLE, _set(("challenges", 0, "title"))),
    ("challenges[0].category", limits.CHALLENGE_CATEGORY, _set(("challenges", 0, "category"))),
    ("input_sets[0].key", limits.INPUT_SET_KEY, _set(("input_sets", 0, "key"))),
    ("input_sets[0].name", limits.INPUT_SET_NAME, _set(("input_sets", 0, "name"))),
    ("input_sets[0].cases[0].case_key", limits.CASE_KEY, _set(("input_sets", 0, "cases", 0, "case_key"))),
    ("input_sets[0].cases[0].item_key", limits.CASE_KEY, _set(("input_sets", 0, "cases", 0, "item_key"))),
    ("input_sets[0].items[0].item_key", limits.CASE_KEY, _legacy_item_key),
    *(
        (f"{ASSET_PREFIX[where]}.assets[0].{name}", limit, _asset(where, name))
        for where in ("version", "challenge", "case")
        for name, limit in (
            ("key", limits.ASSET_KEY),
            ("path", limits.ASSET_PATH),
            ("kind", limits.ASSET_KIND),
            ("media_type", limits.ASSET_MEDIA_TYPE),
        )
    ),
]


def _with(apply: Callable[[Doc, str], None], value: str) -> str:
    doc = copy.deepcopy(base_pack())
    apply(doc, value)
    return dump(doc)


@pytest.mark.parametrize(("field", "limit", "apply"), FIELDS, ids=[f[0] for f in FIELDS])
def test_a_value_one_longer_than_its_column_is_an_error_at_the_value(field, limit, apply):
    value = "x" * (limit + 1)
    text = _with(apply, value)
    report = check(text)
    assert errors(report) == [(field, f"must be at most {limit} characters")]
    line, column = pos_of(text, value)
    assert (report.errors[0].line, report.errors[0].column) == (line, column)


@pytest.mark.parametrize(("field", "limit", "apply"), FIELDS, ids=[f[0] for f in FIELDS])
def test_a_value_as_long_as_its_column_is_valid(field, limit, apply):
    report = check(_with(apply, "x" * limit))
    assert report.valid, errors(report)


def test_the_limit_counts_the_trimmed_text():
    doc = base_pack()
    doc["pack"]["name"] = "  " + "N" * limits.PACK_NAME + "  "
    assert check(doc).valid


def test_the_columns_are_as_long_as_the_limits():
    # The validator's limits are the ones the database enforces (PostgreSQL refuses longer).
    columns = {
        (Pack, "slug"): limits.PACK_SLUG,
        (Pack, "name"): limits.PACK_NAME,
        (Pack, "family"): limits.PACK_FAMILY,
        (Challenge, "key"): limits.CHALLENGE_KEY,
        (Challenge, "title"): limits.CHALLENGE_TITLE,
        (Challenge, "category"): limits.CHALLENGE_CATEGORY,
        (InputSet, "key"): limits.INPUT_SET_KEY,
        (InputSet, "name"): limits.INPUT_SET_NAME,
        (InputSet, "challenge_key"): limits.CHALLENGE_KEY,
        (Case, "case_key"): limits.CASE_KEY,
        (Case, "item_key"): limits.CASE_KEY,
        (Asset, "key"): limits.ASSET_KEY,
        (Asset, "path"): limits.ASSET_PATH,
        (Asset, "kind"): limits.ASSET_KIND,
        (Asset, "media_type"): limits.ASSET_MEDIA_TYPE,
    }
    assert {key: key[0]._meta.get_field(key[1]).max_length for key in columns} == columns
