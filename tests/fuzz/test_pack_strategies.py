"""Generated packs, built field by field (not mutated from a handful of seeds).

``tests/packs/test_bundle_fuzz.py`` mutates the example packs and random bytes; this adds a
structural strategy for *valid* packs (any number of challenges, input sets and cases; a
mix of validator types with well-formed configs and references; YAML or a zip bundle) and
checks that each one validates, that its cases come back in order, and that mutating any
one field of it never makes the validator raise and always yields issues with a field and a
message.
"""

from __future__ import annotations

import io
import os
import zipfile

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from packs.bundle import validate_bundle
from tests.packs.test_bundle_fuzz import assert_well_formed, paths, replace, values

FUZZ = settings(
    max_examples=int(os.environ.get("FUZZ_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
)

keys = st.from_regex(r"[a-z][a-z0-9_-]{0,11}", fullmatch=True)
slugs = st.from_regex(r"[a-z][a-z0-9-]{0,20}[a-z0-9]", fullmatch=True)
words = st.text(
    st.characters(codec="utf-8", exclude_categories=["Cs", "Cc"]), min_size=1, max_size=30
).filter(lambda s: s.strip() == s and s.strip())

# (validator, the expectation value each case must carry under the validator's key, if any)
VALIDATORS = [
    ({"type": "exact_match", "target": "final_output", "expected_from": "case.expectations.{key}"}, "text"),
    (
        {
            "type": "contains",
            "target": "final_output",
            "expected_from": "case.expectations.{key}",
            "config": {"case_insensitive": True},
        },
        "text",
    ),
    ({"type": "regex_match", "target": "final_output", "expected_from": r"literal:\d+"}, None),
    (
        {
            "type": "numeric_match",
            "target": "final_output",
            "expected_from": "case.expectations.{key}",
            "config": {"extract_number": True, "absolute_tolerance": 0.5},
        },
        "number",
    ),
    (
        {"type": "json_path_match", "target": "final_output", "expected_from": "case.expectations.{key}"},
        "path",
    ),
    (
        {
            "type": "fuzzy_match",
            "target": "final_output",
            "expected_from": "case.expectations.{key}",
            "config": {"threshold": 0.7},
        },
        "text",
    ),
    ({"type": "token_f1", "target": "final_output", "expected_from": "case.expectations.{key}"}, "text"),
    (
        {
            "type": "tool_call_assertion",
            "target": "tool_calls",
            "config": {"tool_name": "search", "min_count": 1},
        },
        None,
    ),
]


def _expectation(kind: str, key: str, draw) -> dict:  # type: ignore[no-untyped-def]
    if kind == "number":
        return {"key": key, "kind": "number", "value": draw(st.integers(-(10**6), 10**6))}
    if kind == "path":
        return {"key": key, "kind": "json", "value": {"path": "$.answer", "value": draw(st.integers(0, 99))}}
    return {"key": key, "kind": "text", "value": draw(words)}


@st.composite
def valid_packs(draw) -> tuple[dict, dict[str, list[str]]]:  # type: ignore[no-untyped-def]
    picks = draw(st.lists(st.integers(0, len(VALIDATORS) - 1), min_size=1, max_size=4))
    validators, needs = [], []
    for i, index in enumerate(picks):
        template, kind = VALIDATORS[index]
        key = f"v{i}"
        validator = {
            "key": key,
            **{k: (v.format(key=key) if isinstance(v, str) else v) for k, v in template.items()},
        }
        validators.append(validator)
        if kind:
            needs.append((key, kind))
    challenge_keys = draw(st.lists(keys, min_size=1, max_size=3, unique=True))
    challenges = [
        {
            "key": k,
            "title": draw(words),
            "category": draw(st.sampled_from(["arithmetic", "tool-use", "writing"])),
            "difficulty": draw(st.sampled_from(["easy", "medium", "hard"])),
            "instructions": "{{question}}",
        }
        for k in challenge_keys
    ]
    set_keys = draw(st.lists(keys, min_size=1, max_size=3, unique=True))
    input_sets, expected_order = [], {}
    for set_key in set_keys:
        case_keys = draw(st.lists(keys, min_size=1, max_size=5, unique=True))
        challenge_key = draw(st.sampled_from(challenge_keys))  # one challenge per input set
        cases = []
        for case_key in case_keys:
            cases.append(
                {
                    "challenge_key": challenge_key,
                    "case_key": case_key,
                    "payload": {"question": draw(words)},
                    "expectations": [_expectation(kind, key, draw) for key, kind in needs],
                }
            )
        input_sets.append({"key": set_key, "name": draw(words), "cases": cases})
        expected_order[set_key] = case_keys
    pack = {
        "pack": {
            "slug": draw(slugs),
            "name": draw(words),
            "family": draw(st.sampled_from(["reasoning", "tool-use"])),
        },
        "version": {
            "number": draw(st.integers(1, 10**6)),
            "execution_mode": "prompt_eval",
            "evaluation_spec": {
                "name": "generated",
                "version_number": 1,
                "judge_mode": "deterministic",
                "validators": validators,
                "scorecard": {
                    "pass_threshold": draw(st.sampled_from([0.5, 1])),
                    "dimensions": ["correctness"],
                },
            },
        },
        "challenges": challenges,
        "input_sets": input_sets,
    }
    return pack, expected_order


def _encode(pack: dict, as_zip: bool) -> tuple[bytes, str]:
    text = yaml.safe_dump(pack, allow_unicode=True, sort_keys=False).encode()
    if not as_zip:
        return text, "pack.yaml"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("pack.yaml", text)
    return buffer.getvalue(), "pack.zip"


@FUZZ
@given(generated=valid_packs(), as_zip=st.booleans())
def test_generated_packs_validate_and_keep_their_cases_in_order(generated, as_zip):
    pack, order = generated
    data, filename = _encode(pack, as_zip)
    report = validate_bundle(data, filename=filename)
    assert_well_formed(report)
    assert report.valid, report.to_body()["errors"]
    documents = report.case_documents()
    assert {k: [d.case_key for d in docs] for k, docs in documents.items()} == order


@FUZZ
@given(
    generated=valid_packs(),
    pick=st.integers(min_value=0),
    value=values,
    mode=st.sampled_from(["set", "delete", "add"]),
)
def test_one_mutated_field_of_a_generated_pack_never_raises(generated, pick, value, mode):
    pack, _ = generated
    targets = paths(pack)[1:]
    path = targets[pick % len(targets)]
    mutated = replace(pack, path, value, mode)
    try:
        data = yaml.safe_dump(mutated, allow_unicode=True).encode()
    except yaml.YAMLError:
        return  # the mutation is not representable as YAML; nothing to feed the validator
    assert_well_formed(validate_bundle(data, filename="pack.yaml"))
