"""``pack_version_publish``: pack-format §12, atomic, idempotent on the same bytes."""

from __future__ import annotations

import hashlib
import uuid

import pytest

from packs import services
from packs.models import Artifact, Asset, Case, Challenge, InputSet, Pack, PackVersion
from packs.services import publish as publish_module
from tests.packs.publish_fixtures import (
    INVALID_PACK,
    INVOICE_PACK,
    INVOICES_JSON,
    MALFORMED_YAML,
    invoice_zip,
    make_zip,
    mental_math,
)

pytestmark = pytest.mark.django_db


def publish(personas, text: str | bytes, **kwargs):
    data = text.encode() if isinstance(text, str) else text
    return services.pack_version_publish(
        workspace=personas.workspace, data=data, user=personas.owner, **kwargs
    )


def row_counts() -> dict[str, int]:
    return {
        model.__name__: model.objects.count()
        for model in (Pack, PackVersion, Challenge, InputSet, Case, Asset)
    }


def test_it_publishes_a_version_with_its_challenges_sets_and_cases(personas):
    result = publish(personas, mental_math())
    assert result.created and not result.already_published
    version = result.version
    assert version.number == 1
    assert version.pack.slug == "mental-math"
    assert version.pack.workspace == personas.workspace
    assert version.published_by == personas.owner
    assert bytes(version.source) == mental_math().encode()
    assert version.source_media_type == "application/yaml"
    assert version.content_hash == hashlib.sha256(mental_math().encode()).hexdigest()
    assert version.manifest["schema_version"] == 1
    assert "items" not in version.manifest["input_sets"][0]
    assert [c.key for c in version.challenges.all()] == ["word-problem"]
    smoke = version.input_sets.get()
    assert smoke.key == "smoke" and smoke.challenge_key == "word-problem"
    cases = list(Case.objects.for_input_set(smoke))
    assert [c.case_key for c in cases] == ["crates", "train"]
    assert cases[0].document["schema_version"] == 1
    assert cases[0].document["case_key"] == "crates"
    assert len(cases[0].content_hash) == 64
    assert cases[0].content_hash != cases[1].content_hash


def test_the_result_is_the_interfaces_document(personas):
    result = publish(personas, mental_math())
    doc = result.to_dict()
    smoke = InputSet.objects.get()
    assert doc == {
        "pack_id": str(result.pack.public_id),
        "pack_version_id": str(result.version.public_id),
        "slug": "mental-math",
        "number": 1,
        "input_set_ids": {"smoke": str(smoke.public_id)},
        "warnings": [],
        "already_published": False,
    }


def test_the_same_bytes_twice_is_a_success_that_writes_nothing(personas):
    first = publish(personas, mental_math())
    before = row_counts()
    again = publish(personas, mental_math())
    assert again.already_published
    assert again.version.pk == first.version.pk
    assert again.to_dict()["input_set_ids"] == first.to_dict()["input_set_ids"]
    assert row_counts() == before


def test_different_bytes_under_a_published_number_are_a_409(personas):
    publish(personas, mental_math())
    before = row_counts()
    with pytest.raises(services.PublishConflict) as info:
        publish(personas, mental_math(extra_case=True))
    assert info.value.status_code == 409
    assert info.value.body()["error"]["code"] == "challenge_pack_version_exists"
    assert row_counts() == before


def test_a_new_number_adds_a_version_to_the_same_pack(personas):
    publish(personas, mental_math())
    second = publish(personas, mental_math(number=2, extra_case=True))
    assert second.created
    assert Pack.objects.count() == 1
    assert list(PackVersion.objects.for_history(second.pack).values_list("number", flat=True)) == [2, 1]
    assert second.version.input_sets.get().cases.count() == 3


@pytest.mark.parametrize("change", [{"name": "Mental Maths"}, {"family": "math"}])
def test_a_different_name_or_family_for_the_slug_is_a_metadata_conflict(personas, change):
    publish(personas, mental_math())
    before = row_counts()
    with pytest.raises(services.PublishConflict) as info:
        publish(personas, mental_math(number=2, **change))
    assert info.value.body()["error"]["code"] == "challenge_pack_metadata_conflict"
    assert row_counts() == before


def test_a_different_description_does_not_conflict(personas):
    publish(personas, mental_math(description="first"))
    result = publish(personas, mental_math(number=2, description="second"))
    assert result.created
    assert Pack.objects.get().description == "second"


def test_the_pack_keeps_its_highest_versions_description(personas):
    """Publishing an older number after a newer one (back-filling version 2 after 3) put the
    older version's description on the pack: the last publish won, not the highest version."""
    publish(personas, mental_math(number=1, description="one"))
    publish(personas, mental_math(number=3, description="three"))
    publish(personas, mental_math(number=2, description="two"))
    assert Pack.objects.get().description == "three"
    publish(personas, mental_math(number=4, description="four"))
    assert Pack.objects.get().description == "four"


def test_the_same_slug_in_another_workspace_is_another_pack(personas):
    publish(personas, mental_math())
    other = services.pack_version_publish(
        workspace=personas.other_workspace, data=mental_math(extra_case=True).encode(), user=personas.outsider
    )
    assert other.created
    assert Pack.objects.count() == 2


def test_an_invalid_pack_is_refused_with_the_validate_body(personas):
    with pytest.raises(services.PackInvalid) as info:
        publish(personas, INVALID_PACK)
    body = info.value.body()
    assert body["code"] == "invalid_challenge_pack"
    assert body["valid"] is False
    assert set(body) == {"valid", "errors", "warnings", "code"}
    assert ("pack.family", "is required") in [(e["field"], e["message"]) for e in body["errors"]]
    assert row_counts()["Pack"] == 0


def test_malformed_yaml_is_a_field_error_not_a_crash(personas):
    with pytest.raises(services.PackInvalid) as info:
        publish(personas, MALFORMED_YAML)
    errors = info.value.body()["errors"]
    assert errors and errors[0]["field"] == "bundle"
    assert errors[0]["line"] is not None


def test_a_payload_number_beyond_the_double_range_is_a_400_and_stores_nothing(personas):
    # It validated before, then the case's canonical JSON raised at publish (a 500).
    text = mental_math().replace("value: 168}", "value: 0x" + "f" * 4000 + "}")
    with pytest.raises(services.PackInvalid) as info:
        publish(personas, text)
    assert [(e["field"], e["message"]) for e in info.value.body()["errors"]] == [
        ("input_sets[0].cases[0].expectations[0].value", "must be a finite number")
    ]
    assert row_counts() == {name: 0 for name in row_counts()}


def test_strict_refuses_a_pack_with_warnings(personas):
    text = mental_math().replace("input_sets:\n", "stray: 1\ninput_sets:\n")
    relaxed = publish(personas, text)
    assert [w["rule"] for w in relaxed.warnings] == ["unknown_key"]
    with pytest.raises(services.PackInvalid):
        publish(personas, text.replace("number: 1", "number: 2"), strict=True)


def test_a_zip_bundle_stores_its_files_as_content_addressed_artifacts(personas):
    result = publish(personas, invoice_zip())
    version = result.version
    assert version.source_media_type == "application/zip"
    asset = Asset.objects.get(version=version)
    assert asset.scope == "version" and asset.key == "invoices" and asset.path == "data/invoices.json"
    assert asset.artifact.workspace == personas.workspace
    with asset.file.open("rb") as handle:
        stored = handle.read()
    assert asset.sha256 == hashlib.sha256(stored).hexdigest() == asset.artifact.sha256
    # The same file in a second version is the same artifact.
    v2 = make_zip(
        {"pack.yaml": INVOICE_PACK.replace("number: 1", "number: 2"), "data/invoices.json": INVOICES_JSON}
    )
    assert publish(personas, v2).created
    assert Artifact.objects.filter(workspace=personas.workspace).count() == 1


def test_an_artifact_id_of_this_workspace_is_linked(personas):
    artifact = services.artifact_store(
        workspace=personas.workspace, data=b'{"a": 1}', filename="answers.json"
    ).artifact
    result = publish(personas, mental_math(asset_artifact_id=str(artifact.public_id)))
    asset = Asset.objects.get(version=result.version)
    assert asset.artifact == artifact
    assert asset.size == artifact.size and asset.sha256 == artifact.sha256


@pytest.mark.parametrize("whose", ["unknown", "foreign"])
def test_unknown_and_foreign_artifact_ids_get_the_same_field_error(personas, whose):
    if whose == "foreign":
        artifact_id = str(
            services.artifact_store(
                workspace=personas.other_workspace, data=b"secret", filename="x"
            ).artifact.public_id
        )
    else:
        artifact_id = str(uuid.uuid4())
    with pytest.raises(services.PackInvalid) as info:
        publish(personas, mental_math(asset_artifact_id=artifact_id))
    body = info.value.body()
    assert info.value.status_code == 400
    assert body["code"] == "invalid_challenge_pack"
    assert [(e["field"], e["message"]) for e in body["errors"]] == [
        ("version.assets[0].artifact_id", "must reference an artifact in this workspace")
    ]
    assert row_counts()["PackVersion"] == 0


def test_a_failure_after_some_rows_are_inserted_rolls_everything_back(personas, monkeypatch):
    def explode(**kwargs):
        assert Case.objects.count() == 2  # cases are in, inside the transaction
        raise RuntimeError("storage fell over")

    monkeypatch.setattr(publish_module, "_insert_assets", explode)
    with pytest.raises(RuntimeError):
        publish(personas, mental_math())
    assert row_counts() == {name: 0 for name in row_counts()}


def test_a_case_payload_with_its_own_schema_version_reads_back_from_its_row(personas):
    # Stored bare, the row read back as a v1 envelope: the run failed on "question".
    from packs.bundle.stored import stored_case

    text = (
        mental_math()
        .replace("        expectations: [{key: result, kind: number, value: 60}]\n", "")
        .replace('payload: {question: "A train', 'payload: {schema_version: 1, question: "A train')
    )
    version = publish(personas, text).version
    row = Case.objects.get(input_set__version=version, case_key="train")
    case = stored_case(row.challenge.key, row.case_key, row.document)
    assert case.payload == {
        "schema_version": 1,
        "question": "A train covers 90 km in 1.5 hours. What is its speed in km/h?",
    }


@pytest.mark.parametrize(
    "step", ["_bind_artifacts", "_insert_challenges", "_insert_sets_and_cases", "_insert_assets"]
)
@pytest.mark.parametrize("pack_exists", [False, True], ids=["new-pack", "new-version"])
def test_a_failure_after_any_insert_leaves_no_row_no_artifact_and_no_file(
    personas, monkeypatch, step, pack_exists
):
    from tests.packs.test_publish_artifact_cleanup import stored_files

    if pack_exists:
        publish(personas, mental_math(slug="invoice-totals", name="Invoice Totals", family="tool-use"))
    before, files_before = row_counts(), stored_files()
    pack_before = list(Pack.objects.values_list("pk", "description", "updated_at"))
    original = getattr(publish_module, step)

    def fail_after(**kwargs):
        original(**kwargs)  # its rows are in, inside the transaction
        raise RuntimeError(f"{step} fell over")

    monkeypatch.setattr(publish_module, step, fail_after)
    zipped = make_zip(
        {
            "pack.yaml": INVOICE_PACK.replace("number: 1", "number: 2").replace(
                "{slug: invoice-totals, name: Invoice Totals, family: tool-use}",
                "{slug: invoice-totals, name: Invoice Totals, family: tool-use, description: changed}",
            ),
            "data/invoices.json": INVOICES_JSON,
        }
    )
    with pytest.raises(RuntimeError, match="fell over"):
        publish(personas, zipped)
    assert row_counts() == before
    assert list(Pack.objects.values_list("pk", "description", "updated_at")) == pack_before
    assert not Artifact.objects.exists()
    assert stored_files() == files_before  # the zip's file was written, then removed


def test_a_published_version_refuses_changes(personas):
    from packs.models import ImmutableError

    version = publish(personas, mental_math()).version
    version.warnings = ["changed"]
    with pytest.raises(ImmutableError):
        version.save()
    case = Case.objects.first()
    with pytest.raises(ImmutableError):
        case.save()


def test_challenge_and_case_assets_bind_to_their_owners(personas):
    text = INVOICE_PACK.replace(
        "    artifact_refs: [{key: invoices}]\n",
        "    artifact_refs: [{key: invoices}]\n    assets: [{key: notes, path: ./docs/notes.md}]\n",
    ).replace(
        "        payload: {customer_id: C-104}\n",
        "        payload: {customer_id: C-104}\n        assets: [{key: extra, path: data/extra.txt}]\n",
    )
    data = make_zip(
        {
            "pack.yaml": text,
            "data/invoices.json": INVOICES_JSON,
            "docs/notes.md": b"# notes",
            "data/extra.txt": b"x",
        }
    )
    version = publish(personas, data).version
    assets = {
        a.key: a
        for a in Asset.objects.filter(version=version).select_related("challenge", "case", "artifact")
    }
    assert {k: a.scope for k, a in assets.items()} == {
        "invoices": "version",
        "notes": "challenge",
        "extra": "case",
    }
    assert assets["notes"].challenge.key == "sum-open-invoices" and assets["notes"].path == "./docs/notes.md"
    assert assets["extra"].case.case_key == "c-104"
    assert services.artifact_read(artifact=assets["notes"].artifact) == b"# notes"
    assert Artifact.objects.filter(workspace=personas.workspace).count() == 3
