"""The pack JSON Schema (pack-format §11): generated, checked in, never stricter than the validator."""

from __future__ import annotations

import copy
import json
import re

import jsonschema
import pytest
import yaml

from packs.bundle.schema import SCHEMA_PATH, pack_json_schema, render_schema
from tests.packs.bundle_helpers import base_pack, check, dump, pack, spec_of

VALIDATOR = jsonschema.Draft202012Validator(pack_json_schema())


def schema_ok(document: dict | str) -> bool:
    if isinstance(document, str):
        document = yaml.safe_load(document)
    return VALIDATOR.is_valid(document)


def test_the_checked_in_schema_is_the_generated_one():
    # Regenerate with: python manage.py pack schema > packs/schemas/challenge-pack.v1.json
    assert SCHEMA_PATH.read_text() == render_schema()


def test_it_is_a_draft_2020_12_schema():
    schema = json.loads(SCHEMA_PATH.read_text())
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)


def _snippet_2() -> dict:
    doc = base_pack()
    doc["input_set"] = doc.pop("input_sets")
    return doc


def _snippet_3() -> dict:
    doc = base_pack()
    doc["version"]["tools"] = {"custom": [{"name": "lookup", "implementation": {"type": "mock"}}]}
    return doc


def _snippet_9() -> dict:
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
    return doc


def _lenient_scalars() -> str:
    """Valid for the validator: YAML 1.1 booleans, numbers in text fields, nulls for absent keys."""
    text = dump(base_pack())
    text = re.sub(r"\n( *)slug: demo\n", r"\n\1slug: demo\n\1description: null\n", text)
    text = re.sub(r"\n( *)case_key: a\n", r"\n\1case_key: 007\n\1item_key: ~\n\1inputs: null\n", text)
    text = re.sub(r"\n( *)title: Sum\n", r"\n\1title: 2024\n", text)
    assert "007" in text and "2024" in text and "description: null" in text
    return (
        text + "tools:\n  custom:\n  - name: lookup\n    description: 42\n    implementation: {type: mock}\n"
    )


def _many_options() -> dict:
    doc = base_pack()
    version = doc["version"]
    version["tool_policy"] = {
        "allowed_tool_kinds": ["File", "data"],
        "allow_shell": "yes",
        "max_tool_calls": 5,
    }
    version["filesystem"] = {"working_directory": "/workspace", "readable_roots": ["/data"]}
    version["sandbox"] = {
        "network_access": False,
        "network_allowlist": ["10.0.0.0/8"],
        "env_vars": {"MODE": "test"},
        "additional_packages": ["jq"],
    }
    version["deployment_defaults"] = {"aliases": {"fast": "gpt-4.1-mini"}, "lineups": {"default": ["fast"]}}
    version["assets"] = [
        {"key": "gold", "path": "/data/gold.json", "artifact_id": "6f1c8e4a-5b7d-4c1e-9a3f-2d8b7e6c5a41"}
    ]
    spec = spec_of(doc)
    spec["llm_judges"] = [
        {"key": "rank", "mode": "n_wise", "model": "gpt-4.1", "prompt": "Rank.", "position_debiasing": True}
    ]
    spec["judge_mode"] = "hybrid"
    spec["scorecard"] = {
        "strategy": "hybrid",
        "dimensions": [
            {"key": "c", "source": "validators", "gate": True, "pass_threshold": 1},
            {"key": "r", "source": "llm_judge", "judge_key": "rank"},
        ],
    }
    case = doc["input_sets"][0]["cases"][0]
    case["inputs"] = [{"key": "q", "kind": "json", "value": None}]
    case["case_timeout_seconds"] = -1
    case["artifacts"] = [{"key": "gold"}]
    return doc


def _null_text_items() -> dict:
    # A null (or an empty `- `) item of a text list or map is empty text (§2.1).
    doc = base_pack()
    doc["version"]["sandbox"] = {"env_vars": {"TOKEN": None}}
    doc["version"]["filesystem"] = {"readable_roots": [None], "writable_roots": ["out", None]}
    doc["security"] = {"forbidden_egress": [{"host": "*.example.com", "allow": [None]}]}
    return doc


@pytest.mark.parametrize(
    "make",
    [base_pack, _snippet_2, _snippet_3, _snippet_9, _lenient_scalars, _many_options, _null_text_items],
    ids=["base", "snippet-2", "snippet-3", "snippet-9", "lenient-scalars", "many-options", "null-text-items"],
)
def test_documents_the_validator_accepts_pass_the_schema(make):
    document = make()
    report = check(document)
    assert report.valid, report.to_body()
    if make is _lenient_scalars:
        assert report.manifest["challenges"][0]["title"] == "2024"
        assert report.manifest["input_sets"][0]["cases"][0]["case_key"] == "007"
    assert schema_ok(document if isinstance(document, str) else copy.deepcopy(document))


@pytest.mark.parametrize(
    ("mutate", "path"),
    [
        (lambda d: d["version"].update(number="one"), "version.number"),
        (lambda d: d["challenges"][0].update(difficulty="trivial"), "challenges[0].difficulty"),
        (lambda d: spec_of(d).update(unknown=1), "version.evaluation_spec.unknown"),
        (lambda d: d.pop("version"), "version"),
        (lambda d: d["input_sets"][0].update(cases="none"), "input_sets[0].cases"),
    ],
)
def test_the_schema_states_types_enums_required_keys_and_closed_spec_objects(mutate, path):
    document = base_pack()
    mutate(document)
    assert not schema_ok(document), path
    assert not check(document).valid


def test_unknown_keys_outside_the_evaluation_spec_are_only_warnings_so_the_schema_admits_them():
    document = pack(extra={"anything": 1})
    assert check(document).valid
    assert schema_ok(document)


def test_references_are_stated_as_a_pattern():
    document = base_pack()
    spec_of(document)["validators"][0]["target"] = "output"
    assert not schema_ok(document)
