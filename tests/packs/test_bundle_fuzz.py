"""Fuzzing: generated and mutated packs never make ``validate_bundle`` raise, and every
issue it reports has a field and a message (pack-format §3)."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from packs.bundle import BundleReport, validate_bundle
from tests.packs.bundle_helpers import base_pack, dump

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = [
    (ROOT / "examples" / "packs" / name / "pack.yaml").read_text()
    for name in ("mental-math", "invoice-totals", "release-notes", "demo")
]
SEEDS = [yaml.safe_load(text) for text in EXAMPLES] + [base_pack()]
# Bounded by default; FUZZ_EXAMPLES=5000 for a longer local run.
FUZZ = settings(
    max_examples=int(os.environ.get("FUZZ_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


def assert_well_formed(report: BundleReport) -> None:
    body = report.to_body()
    assert set(body) == {"valid", "errors", "warnings"}
    assert body["valid"] == (not body["errors"])
    json.dumps(body)
    for item in body["errors"] + body["warnings"]:
        assert isinstance(item["field"], str) and item["field"]
        assert isinstance(item["message"], str) and item["message"]
        assert set(item) <= {"field", "message", "line", "column", "detail", "rule"}
        assert {"field", "message", "line", "column"} <= set(item)
    for item in body["warnings"]:
        assert item["rule"]
    if report.valid:
        json.dumps(report.manifest, allow_nan=False)
        report.case_documents()


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**40), max_value=2**40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(
        ["", " ", "literal:(", "case.payload.x", "file:", "input:", "artifact:", "{{x}}", "${", "yes", "007"]
    ),
)
values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)


def paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            out += paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            out += paths(value, (*prefix, index))
    return out


def replace(doc: Any, path: tuple, value: Any, mode: str) -> Any:
    if not path:
        return value
    parent = doc
    for step in path[:-1]:
        parent = parent[step]
    last = path[-1]
    if mode == "delete" and isinstance(parent, dict):
        del parent[last]
    elif mode == "delete" and isinstance(parent, list):
        parent.pop(last)
    elif mode == "add" and isinstance(parent, dict):
        parent[f"extra_{len(parent)}"] = value
    else:
        parent[last] = value
    return doc


@FUZZ
@given(
    seed=st.sampled_from(range(len(SEEDS))),
    picks=st.lists(
        st.tuples(st.integers(min_value=0), values, st.sampled_from(["set", "delete", "add"])),
        min_size=1,
        max_size=4,
    ),
)
def test_mutated_packs_never_raise(seed, picks):
    doc = copy.deepcopy(SEEDS[seed])
    for index, value, mode in picks:
        candidates = paths(doc)
        doc = replace(doc, candidates[index % len(candidates)], value, mode)
    try:
        text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
    except yaml.YAMLError:
        return
    assert_well_formed(validate_bundle(text))


@FUZZ
@given(
    seed=st.sampled_from(range(len(EXAMPLES))),
    edits=st.lists(
        st.tuples(
            st.integers(min_value=0),
            st.integers(min_value=0, max_value=8),
            st.text(alphabet="{}[]:,-&*!|>'\"#%@` \n\t\\x0?<", max_size=6),
        ),
        min_size=1,
        max_size=5,
    ),
)
def test_byte_edits_of_real_packs_never_raise(seed, edits):
    text = EXAMPLES[seed]
    for position, length, insert in edits:
        position %= len(text) + 1
        text = text[:position] + insert + text[position + length :]
    assert_well_formed(validate_bundle(text))


@FUZZ
@given(
    st.lists(
        st.sampled_from(
            list("ab:- \n[]{},&*!<'\"|>#.0123456789~") + ["yes", "null", "<<", "  ", "pack", "version"]
        ),
        max_size=120,
    )
)
def test_generated_yaml_text_never_raises(tokens):
    assert_well_formed(validate_bundle("".join(tokens)))


@FUZZ
@given(st.binary(max_size=300))
def test_arbitrary_bytes_never_raise(data):
    assert_well_formed(validate_bundle(data))
    assert_well_formed(validate_bundle(b"PK\x03\x04" + data))


@pytest.mark.filterwarnings("ignore:Duplicate name")
@FUZZ
@given(
    data=st.binary(min_size=1, max_size=64),
    position=st.integers(min_value=0),
    names=st.lists(st.text(max_size=10), max_size=3),
)
def test_corrupted_zips_never_raise(data, position, names):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("pack.yaml", dump(base_pack()))
        for name in names:
            with contextlib.suppress(ValueError, UnicodeEncodeError):
                archive.writestr(zipfile.ZipInfo(name or "x"), "content")
    blob = bytearray(buffer.getvalue())
    position %= len(blob)
    blob[position : position + len(data)] = data
    assert_well_formed(validate_bundle(bytes(blob)))
