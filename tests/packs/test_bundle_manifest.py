"""Normalization and stored forms (pack-format §5, §6) and the typed cases handed to grading."""

from __future__ import annotations

import hashlib

import pytest

from grading.engine.types import MISSING, canonical_json
from packs.bundle.stored import stored_case
from tests.packs.bundle_helpers import base_pack, check, spec_of


def items_pack() -> dict:
    doc = base_pack()
    doc["input_sets"] = [
        {
            "key": " legacy ",
            "name": "Legacy",
            "description": "  kept as written  ",
            "items": [
                {"challenge_key": "sum", "item_key": " q1 ", "payload": {"x": 1}},
                {"challenge_key": "sum", "item_key": "q2"},
            ],
        },
        {
            "key": "modern",
            "name": "Modern",
            "cases": [
                {"challenge_key": "sum", "case_key": "c1", "item_key": "other"},
                {"challenge_key": "sum", "item_key": "only-item", "payload": {"y": 2}},
                {
                    "challenge_key": "sum",
                    "case_key": "rich",
                    "payload": {"z": 3},
                    "inputs": [{"key": "q", "kind": "text", "value": "2+2"}],
                    "expectations": [{"key": "a", "kind": "number", "value": 4.0}],
                    "case_timeout_seconds": 30,
                },
            ],
        },
    ]
    return doc


def test_items_become_cases_and_the_manifest_never_has_items():
    report = check(items_pack())
    assert report.valid, report.to_body()
    legacy, modern = report.manifest["input_sets"]
    assert "items" not in legacy and "items" not in modern
    assert legacy["key"] == "legacy"
    assert legacy["description"] == "  kept as written  "
    assert [(c["case_key"], c["item_key"], c["payload"]) for c in legacy["cases"]] == [
        ("q1", "q1", {"x": 1}),
        ("q2", "q2", {}),
    ]
    assert [(c["case_key"], c["item_key"]) for c in modern["cases"]] == [
        ("c1", "other"),  # case_key wins as the effective key; item_key is kept
        ("only-item", "only-item"),
        ("rich", "rich"),
    ]
    assert all(not s.items for s in report.bundle.input_sets)


def test_case_documents_are_legacy_payloads_or_envelopes():
    report = check(items_pack())
    docs = report.case_documents()
    assert list(docs) == ["legacy", "modern"]
    legacy = docs["legacy"]
    assert [(d.case_key, d.document, d.legacy) for d in legacy] == [("q1", {"x": 1}, True), ("q2", {}, True)]
    rich = docs["modern"][2]
    assert rich.document == {
        "schema_version": 1,
        "case_key": "rich",
        "payload": {"z": 3},
        "inputs": [{"key": "q", "kind": "text", "value": "2+2"}],
        "expectations": [{"key": "a", "kind": "number", "value": 4.0}],
        "case_timeout_seconds": 30,
    }
    assert not rich.legacy
    assert rich.content_hash == hashlib.sha256(canonical_json(rich.document).encode()).hexdigest()
    assert docs["modern"][0].case_key == "c1" and docs["modern"][0].item_key == "c1"
    assert (rich.input_set_key, rich.position, rich.challenge_key) == ("modern", 2, "sum")


@pytest.mark.parametrize(
    "payload",
    [
        {"schema_version": 1, "question": "2+2?"},  # read back as an envelope: "question" unknown
        {"schema_version": 1},  # read back as an envelope: the payload was lost
        {"schema_version": True, "q": 1},
        {"schema_version": 2, "q": 1},  # upstream's import reads any non-zero integer so
    ],
)
def test_a_payload_only_case_whose_payload_has_a_schema_version_is_stored_as_an_envelope(payload):
    doc = base_pack()
    doc["input_sets"][0]["cases"][0]["payload"] = payload
    (stored,) = check(doc).case_documents()["default"]
    assert stored.document == {"schema_version": 1, "case_key": "a", "payload": payload}
    assert not stored.legacy
    assert stored_case("sum", "a", stored.document).payload == payload


@pytest.mark.parametrize("payload", [{"schema_version": 0, "q": 1}, {"schema_version": "1"}, {"v": 1}])
def test_other_payload_only_cases_are_still_stored_bare(payload):
    doc = base_pack()
    doc["input_sets"][0]["cases"][0]["payload"] = payload
    (stored,) = check(doc).case_documents()["default"]
    assert stored.document == payload and stored.legacy
    assert stored_case("sum", "a", stored.document).payload == payload


def test_the_same_bytes_give_the_same_manifest_and_hashes():
    first, second = check(items_pack()), check(items_pack())
    assert first.manifest == second.manifest
    assert first.case_documents() == second.case_documents()


def test_manifest_shape_and_defaults():
    doc = items_pack()
    doc["version"]["sandbox"] = {"sandbox_template_id": " tpl-1 "}
    doc["version"]["deployment_defaults"] = {"aliases": {}, "lineups": {}}
    doc["pack"]["family"] = " Reasoning "
    doc["challenges"][0]["instructions"] = "  Add them.  "
    spec_of(doc)["llm_judges"] = [
        {"key": "j", "mode": "rubric", "model": "gpt-4.1", "rubric": "r", "samples": 0}
    ]
    spec_of(doc)["judge_mode"] = "hybrid"
    spec_of(doc)["scorecard"] = {
        "pass_threshold": 1,
        "dimensions": ["correctness", {"key": "q", "source": "llm_judge", "judge_key": "j"}],
    }
    report = check(doc)
    assert report.valid, report.to_body()
    manifest = report.manifest
    assert set(manifest) == {
        "schema_version",
        "pack",
        "version",
        "tool_policy",
        "filesystem",
        "evaluation_spec",
        "challenges",
        "input_sets",
        "sandbox",
    }
    assert manifest["schema_version"] == 1
    assert manifest["pack"] == {"slug": "demo", "name": "Demo", "family": "reasoning"}
    assert manifest["version"] == {
        "number": 1,
        "assets": [],
        "execution_mode": "native",
        "sandbox_template_id": "tpl-1",
    }
    challenge = manifest["challenges"][0]
    assert challenge["instructions"] == "Add them."
    assert challenge["definition"] == {"instructions": "Add them."}
    spec = manifest["evaluation_spec"]
    assert spec["llm_judges"][0]["samples"] == 3
    assert spec["scorecard"]["strategy"] == "weighted"
    assert spec["scorecard"]["dimensions"][0] == {
        "key": "correctness",
        "source": "validators",
        "better_direction": "higher",
        "weight": 1.0,
        "gate": False,
    }


def test_an_existing_definition_instructions_is_kept():
    doc = base_pack()
    doc["challenges"][0]["definition"] = {"instructions": "from definition", "extra": [1, None]}
    report = check(doc)
    assert report.manifest["challenges"][0]["definition"] == {
        "instructions": "from definition",
        "extra": [1, None],
    }


def test_case_defs_and_grade_contexts_for_the_engine():
    doc = items_pack()
    doc["version"]["assets"] = [{"key": "gold", "path": "/data/gold.json", "media_type": "application/json"}]
    doc["challenges"][0]["instructions"] = "Compute {{z}} and {{q}}."
    doc["challenges"][0]["artifact_refs"] = [{"key": "gold"}]
    doc["input_sets"][1]["cases"][2]["artifacts"] = [{"key": "gold"}]
    doc["input_sets"][1]["cases"][2]["expectations"].append(
        {"key": "src", "kind": "text", "source": "input:q"}
    )
    report = check(doc)
    assert report.valid, report.to_body()
    rich = report.case_defs("modern")[2]
    assert (rich.challenge_key, rich.case_key, rich.payload) == ("sum", "rich", {"z": 3})
    assert rich.inputs[0].value == "2+2"
    assert rich.expectations[1].value is MISSING and rich.expectations[1].source == "input:q"
    assert rich.artifact_keys == ["gold"]
    assert rich.content_hash == report.case_documents()["modern"][2].content_hash
    context = report.grade_context(rich)
    assert context.rendered_instructions == "Compute 3 and 2+2."
    assert context.challenge_instructions == "Compute {{z}} and {{q}}."
    assert context.pack_slug == "demo" and context.pack_version == 1
    assert list(context.version_assets) == ["gold"] and not context.version_assets["gold"].has_file
    assert context.challenge_artifact_keys == ["gold"]
    assert context.asset_loader(context.version_assets["gold"]) is None
    empty = report.case_defs(None)
    assert [(c.challenge_key, c.case_key, c.payload, c.empty_case) for c in empty] == [
        ("sum", "sum", {}, True)
    ]
    pairs = report.grading_cases("legacy")
    assert [c.case_key for c, _ in pairs] == ["q1", "q2"]


def test_the_cases_of_a_challenge_share_its_context_and_interned_names():
    """A runs worker keeps thousands of cases: what does not vary per case is one object."""
    doc = items_pack()
    doc["version"]["assets"] = [{"key": "gold", "path": "/data/gold.json", "media_type": "application/json"}]
    doc["challenges"][0]["instructions"] = "Compute {{zed}}."
    # names built at run time: distinct string objects per case, as JSON parsing gives them
    doc["input_sets"][1]["cases"] = [
        {
            "challenge_key": "".join(["s", "um"]),
            "case_key": f"k{z}",
            "payload": {"".join(["ze", "d"]): z},
            "expectations": [{"key": "".join(["ans", "wer"]), "kind": "number", "value": z + 1}],
        }
        for z in (1, 2)
    ]
    report = check(doc)
    assert report.valid, report.to_body()
    first, second = report.case_defs("modern")
    a, b = report.grade_context(first), report.grade_context(second)
    assert a.rendered_instructions == "Compute 1." and b.rendered_instructions == "Compute 2."
    assert a.version_assets is b.version_assets and a.tool_policy is b.tool_policy
    assert a.asset_loader is b.asset_loader and a.challenge_assets is b.challenge_assets
    # the same case again is an equal context, not the shared template itself
    assert report.grade_context(first) == a and report.grade_context(first) is not a
    # names every case repeats are one string object
    assert first.challenge_key is second.challenge_key
    (k1,), (k2,) = first.payload.keys(), second.payload.keys()
    assert k1 is k2
    assert first.expectations[0].key is second.expectations[0].key


def test_an_invalid_report_has_no_manifest():
    doc = base_pack()
    del doc["pack"]
    report = check(doc)
    assert not report.valid
    assert report.manifest is None and report.bundle is None and report.pack is None
    assert report.to_body()["valid"] is False


def test_trimmed_fields_and_defaults_of_section_5():
    doc = base_pack()
    doc["challenges"][0]["difficulty"] = " easy "
    doc["version"]["execution_mode"] = " multi_turn "
    doc["version"]["deployment_defaults"] = {
        "aliases": {" fast ": " gpt-4.1-mini "},
        "lineups": {"default ": [" fast "]},
    }
    doc["input_sets"][0]["cases"][0]["user_simulator"] = {
        "schema_version": 1,
        "kind": "hybrid",
        "phases": [{"id": "p", "actor": " human ", "trigger": ""}],
    }
    report = check(doc)
    assert report.to_body() == {"valid": True, "errors": [], "warnings": []}
    manifest = report.manifest
    assert manifest["challenges"][0]["difficulty"] == "easy"
    assert manifest["version"]["execution_mode"] == "multi_turn"
    assert manifest["version"]["deployment_defaults"] == {
        "aliases": {"fast": "gpt-4.1-mini"},
        "lineups": {"default": ["fast"]},
    }
    phase = manifest["input_sets"][0]["cases"][0]["user_simulator"]["phases"][0]
    assert (phase["actor"], phase["trigger"]) == ("human", "always")

    import jsonschema

    from packs.bundle.schema import pack_json_schema

    jsonschema.Draft202012Validator(pack_json_schema()).validate(doc)
