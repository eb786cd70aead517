"""runs.packdata: cases built from the stored rows, per claimed batch, in a bounded cache.

The reference is the conversion the offline ``grade`` command uses: the stored source
validated again (``validate_bundle(...).grading_cases(key)``). Every case, context, spec and
grade read from the stored rows must equal it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agentclash_site.lib.signing import verify_asset_token
from grading.engine import grade_case
from grading.engine.types import Evidence
from packs.bundle import validate_bundle
from packs.models import Asset, Case
from packs.services import pack_version_publish
from runs import packdata
from runs.packdata import PackDataError, version_data
from tests.packs.publish_fixtures import make_zip
from tests.runs.runfactory import pack_yaml, publish

ROOT = Path(__file__).resolve().parents[2]

_CHALLENGE = {"title": "Sum", "category": "math", "difficulty": "easy"}


def _rich_zip() -> bytes:
    """Stored forms of a case: version, challenge and case assets bound to zip files (two
    challenges whose cases share a key and an asset key), inputs with and without a value,
    a null expectation value, a source expectation, artifacts, a timeout, a legacy items
    set, and a second challenge without instructions."""
    doc: dict[str, Any] = {
        "pack": {"slug": "rich", "name": "Rich", "family": "test"},
        "version": {
            "number": 1,
            "execution_mode": "native",
            "tool_policy": {"allowed_tool_kinds": ["file"], "max_tool_calls": 4},
            "filesystem": {"working_directory": "/work"},
            "assets": [
                {"key": "gold", "path": "data/gold.json", "media_type": "application/json"},
                {"key": "remote", "path": "/abs/remote.txt"},
            ],
            "evaluation_spec": {
                "name": "rich-v1",
                "version_number": 1,
                "judge_mode": "deterministic",
                "validators": [
                    {
                        "key": "answer",
                        "type": "contains",
                        "target": "final_output",
                        "expected_from": "case.expectations.answer",
                    },
                    {
                        "key": "shape",
                        "type": "regex_match",
                        "target": "final_output",
                        "expected_from": "literal:\\d+",
                    },
                ],
                "scorecard": {"pass_threshold": 0.5, "dimensions": ["correctness"]},
            },
        },
        "challenges": [
            {
                "key": "sum",
                **_CHALLENGE,
                "instructions": "Add {{a}} and {{b}}; see {{question}}.",
                "assets": [{"key": "notes", "path": "data/notes.txt", "media_type": "text/plain"}],
                "artifact_refs": [{"key": "gold"}],
            },
            {"key": "twin", "title": "Twin", "category": "math", "difficulty": "hard"},
        ],
        "input_sets": [
            {
                "key": "modern",
                "name": "Modern",
                "cases": [
                    {
                        "challenge_key": "sum",
                        "case_key": "rich",
                        "payload": {"a": 1, "b": 2},
                        "inputs": [
                            {"key": "question", "kind": "text", "value": "1+2"},
                            {"key": "sheet", "kind": "file", "artifact_key": "gold", "path": "in/gold.json"},
                        ],
                        "expectations": [
                            {"key": "answer", "kind": "text", "value": "3"},
                            {"key": "nothing", "kind": "text", "value": None},
                            {"key": "echo", "kind": "text", "source": "input:question"},
                        ],
                        "artifacts": [{"key": "gold"}],
                        "assets": [{"key": "img", "path": "data/rich.png", "media_type": "image/png"}],
                        "case_timeout_seconds": 30,
                    },
                    {
                        "challenge_key": "sum",
                        "case_key": "chat",
                        "payload": {"a": 5, "b": 6},
                        "expectations": [{"key": "answer", "kind": "text", "value": "11"}],
                    },
                    {"challenge_key": "sum", "item_key": "plain", "payload": {"a": 0, "b": 0}},
                ],
            },
            {
                "key": "twins",
                "name": "Twins",
                "cases": [
                    {
                        "challenge_key": "twin",
                        "case_key": "rich",
                        "payload": {"t": 1},
                        "expectations": [{"key": "answer", "kind": "text", "value": "1"}],
                        "assets": [{"key": "img", "path": "data/twin.png", "media_type": "image/png"}],
                    }
                ],
            },
            {
                "key": "legacy",
                "name": "Legacy",
                "items": [
                    {"challenge_key": "sum", "item_key": "q1", "payload": {"a": 7, "b": 8, "question": "?"}},
                    {"challenge_key": "sum", "item_key": "q2"},
                ],
            },
        ],
    }
    return make_zip(
        {
            "pack.yaml": yaml.safe_dump(doc, sort_keys=False),
            "data/gold.json": b'{"answer": 3}',
            "data/notes.txt": b"notes",
            "data/rich.png": b"\x89PNG rich",
            "data/twin.png": b"\x89PNG twin",
            "unused/extra.txt": b"not bound",
        }
    )


def _multi_turn_yaml() -> bytes:
    """A multi_turn pack: every case has a user simulator."""
    doc = yaml.safe_load(pack_yaml(slug="chat", cases=2, mode="multi_turn"))
    for case in doc["input_sets"][0]["cases"]:
        case["user_simulator"] = {
            "schema_version": 1,
            "kind": "hybrid",
            "max_turns": 3,
            "phases": [{"id": "open", "actor": "scripted", "turns": [{"message": "hi"}]}],
        }
    return yaml.safe_dump(doc, sort_keys=False).encode()


def _versions(personas: Any) -> list[Any]:
    workspace = personas.workspace
    versions = [
        pack_version_publish(workspace=workspace, data=d).version for d in (_rich_zip(), _multi_turn_yaml())
    ]
    for path in sorted((ROOT / "examples" / "packs").glob("*/pack.yaml")):
        versions.append(pack_version_publish(workspace=workspace, data=path.read_bytes()).version)
    # The zip's pack.yaml differs from the directory's: another workspace.
    zipped = (ROOT / "examples/packs/invoice-totals.zip").read_bytes()
    versions.append(pack_version_publish(workspace=personas.other_workspace, data=zipped).version)
    return versions


def _context_fields(context: Any) -> dict[str, Any]:
    fields = {
        f.name: getattr(context, f.name) for f in dataclasses.fields(context) if f.name != "asset_loader"
    }
    assets = [*context.version_assets.values(), *context.challenge_assets.values()]
    fields["loaded"] = [context.asset_loader(a) for a in assets]
    return fields


def _evidence(text: str) -> Evidence:
    return Evidence(final_output=text)


def _grade(grade: Any) -> dict[str, Any]:
    """The grade without its timing (the grader's clock). An expectation's text lists its
    validator's config in the config's key order, which PostgreSQL's jsonb does not keep
    (the stored manifest): the listed ``k=v`` parts are compared as a set."""
    doc = {k: v for k, v in grade.to_dict().items() if k != "timing"}
    for expectation in doc.get("expectations") or []:
        head, sep, listed = expectation["text"].partition(" (")
        if sep and listed.endswith(")"):
            expectation["text"] = (head, sorted(listed[:-1].split(", ")))
    return doc


@pytest.fixture(autouse=True)
def _fresh_cache():
    packdata.clear_cache()
    yield
    packdata.clear_cache()


def test_cases_contexts_spec_and_grades_equal_the_validated_source(personas):
    compared = 0
    for version in _versions(personas):
        report = validate_bundle(bytes(version.source), filename=version.source_filename)
        assert report.valid
        for key in [*report.input_set_keys(), None]:
            expected = report.grading_cases(key)
            data = version_data(version, key)
            streamed = list(data.iter_cases())
            assert [c for c, _ in streamed] == [c for c, _ in expected]
            assert data.spec.dimensions == report.evaluation_spec.dimensions
            assert data.spec.validators == report.evaluation_spec.validators
            assert data.execution_mode == report.bundle.version.execution_mode
            packdata.clear_cache()
            data = version_data(version, key)
            data.load((c.challenge_key, c.case_key) for c, _ in expected)
            for (case, context), (_s_case, s_context) in zip(expected, streamed, strict=True):
                got_case, got_context = data.case(case.challenge_key, case.case_key)
                assert got_case == case
                assert _context_fields(got_context) == _context_fields(context) == _context_fields(s_context)
                assert data.challenge_info(got_case, got_context) == data.challenge_info(case, context)
                for text in ("3", "answer-1 12", "Harbor Tools Ltd", ""):
                    old = _grade(grade_case(_evidence(text), case, report.evaluation_spec, context=context))
                    assert (
                        _grade(grade_case(_evidence(text), got_case, data.spec, context=got_context)) == old
                    )
                compared += 1
    assert compared >= 12


def test_case_assets_link_their_own_rows(personas, settings):
    settings.PUBLIC_BASE_URL = "https://clash.example"
    version = pack_version_publish(workspace=personas.workspace, data=_rich_zip()).version
    ids = {
        (a.case.challenge.key, a.case.case_key, a.key): str(a.public_id)
        for a in Asset.objects.filter(version=version, scope=Asset.Scope.CASE).select_related(
            "case__challenge"
        )
    }
    assert len(ids) == 2  # sum/rich/img and twin/rich/img: one key, two rows
    gold = str(Asset.objects.get(version=version, scope=Asset.Scope.VERSION, key="gold").public_id)
    for set_key, challenge in (("modern", "sum"), ("twins", "twin")):
        data = version_data(version, set_key)
        case, context = data.case(challenge, "rich")
        links = {link.key: link for link in data.case_info(case, context).assets}
        assert _asset_id(links["img"].url) == ids[(challenge, "rich", "img")]
        assert links["img"].path == f"data/{challenge.replace('sum', 'rich')}.png"
        if challenge == "sum":
            # The declared path and media type (it sent the key as the path, and no type).
            assert _asset_id(links["gold"].url) == gold
            assert (links["gold"].path, links["gold"].media_type) == ("data/gold.json", "application/json")
            assert (links["notes"].path, links["notes"].media_type) == ("data/notes.txt", "text/plain")
            assert list(links) == ["img", "notes", "gold"]  # the case's, the challenge's, then named ones
        else:
            assert list(links) == ["img"]


def test_a_case_gets_the_version_assets_its_challenge_and_inputs_name_but_not_its_expectations(personas):
    # The challenge's artifact_refs and an input's artifact_key never reached the agent (the
    # invoice-totals example's instructions name data/invoices.json, a challenge artifact_ref).
    doc = yaml.safe_load(pack_yaml(cases=1))
    doc["version"]["assets"] = [
        {"key": key, "path": f"{key}.txt", "artifact_id": str(artifact.public_id)}
        for key, artifact in (
            ("brief", _artifact(personas, b"brief")),
            ("sheet", _artifact(personas, b"sheet")),
            ("answer", _artifact(personas, b"42")),
            ("unused", _artifact(personas, b"unused")),
        )
    ]
    doc["challenges"][0]["artifact_refs"] = [{"key": "brief"}]
    case = doc["input_sets"][0]["cases"][0]
    case["inputs"] = [{"key": "data", "kind": "file", "artifact_key": "sheet"}]
    case["expectations"].append({"key": "gold", "kind": "text", "source": "artifact:answer"})
    version = pack_version_publish(workspace=personas.workspace, data=yaml.safe_dump(doc).encode()).version
    data = version_data(version, "set0")
    case_def, context = data.case("echo", "c0")
    links = {link.key: link for link in data.case_info(case_def, context).assets}
    assert list(links) == ["brief", "sheet"]
    assert all(link.url and link.media_type == "text/plain" for link in links.values())
    assert links["sheet"].path == "sheet.txt"


def _artifact(personas, content: bytes):
    from packs.services import artifact_store

    return artifact_store(workspace=personas.workspace, data=content, filename="x.txt").artifact


def _asset_id(url: str) -> str:
    prefix = "https://clash.example/assets/signed/"
    assert url.startswith(prefix), url
    return verify_asset_token(url.removeprefix(prefix))


def test_a_claimed_batch_is_one_query_and_cached_cases_none(personas):
    version = publish(personas.workspace, cases=40)
    data = version_data(version, "set0")
    keys = [("echo", f"c{i}") for i in range(0, 40, 2)]
    with CaptureQueriesContext(connection) as first:
        data.load(keys)
    assert len(first) == 1  # the cases (this pack has no case assets)
    with CaptureQueriesContext(connection) as again:
        data.load(keys)
        pairs = [data.case(*k) for k in keys]
    assert len(again) == 0
    assert [c.case_key for c, _ in pairs] == [k for _, k in keys]
    assert packdata.cached_case_count() == len(keys)  # only the claimed cases are built


def test_the_case_cache_is_bounded_whatever_the_pack_size(personas, monkeypatch):
    monkeypatch.setattr(packdata, "CASE_CACHE_SIZE", 8)
    version = publish(personas.workspace, cases=30)
    data = version_data(version, "set0")
    for i in range(30):
        data.load([("echo", f"c{i}")])
        assert packdata.cached_case_count() <= 8
    assert sum(1 for _ in data.iter_cases()) == 30  # streamed, not cached
    assert packdata.cached_case_count() == 8
    # An evicted case is fetched again (one row) and equals the first build.
    case, context = data.case("echo", "c0")
    assert case.payload == {"word": "answer-0"} and context.rendered_instructions == "Say answer-0"
    assert packdata.cached_case_count() == 8


def test_an_unknown_case_or_input_set_names_it(personas):
    version = publish(personas.workspace, cases=2)
    data = version_data(version, "set0")
    with pytest.raises(PackDataError, match="echo/nope"):
        data.case("echo", "nope")
    with pytest.raises(PackDataError, match="'absent'"):
        version_data(version, "absent")
    empty = version_data(version, None)
    case, context = empty.case("echo", "echo")
    assert case.empty_case and context.rendered_instructions == "Say {{word}}"  # unresolved: kept
    with pytest.raises(PackDataError, match="echo/c0"):
        empty.case("echo", "c0")


def test_a_corrupt_stored_case_names_the_case(personas):
    version = publish(personas.workspace, cases=2)
    Case.objects.filter(input_set__version=version, case_key="c1").update(
        document={"schema_version": 1, "case_key": "c1", "payload": "not an object"}
    )
    data = version_data(version, "set0")
    data.case("echo", "c0")
    with pytest.raises(PackDataError, match="echo/c1"):
        data.case("echo", "c1")
