"""Models: database invariants, immutability, and every read pinned by its query count."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction

from packs import selectors, services
from packs.models import Artifact, Asset, Case, Draft, ImmutableError, InputSet, Pack, PackVersion
from tests.packs.publish_fixtures import mental_math

pytestmark = pytest.mark.django_db


def publish(personas, text: str, workspace=None):
    return services.pack_version_publish(
        workspace=workspace or personas.workspace, data=text.encode(), user=personas.owner
    )


@pytest.fixture
def two_versions(personas):
    publish(personas, mental_math())
    return publish(personas, mental_math(number=2, extra_case=True))


# --- invariants ----------------------------------------------------------------------------


def test_a_version_number_is_unique_per_pack_in_the_database(personas, two_versions):
    version = two_versions.version
    with pytest.raises(IntegrityError, match="packs_packversion_number_unique"), transaction.atomic():
        PackVersion.objects.create(
            pack=version.pack, number=2, manifest={}, source=b"", content_hash="0" * 64
        )


def test_a_version_number_must_be_positive(personas, two_versions):
    with pytest.raises(IntegrityError, match="packs_packversion_number_positive"), transaction.atomic():
        PackVersion.objects.create(
            pack=two_versions.pack, number=0, manifest={}, source=b"", content_hash="0" * 64
        )


def test_a_slug_is_unique_per_workspace(personas, two_versions):
    with pytest.raises(IntegrityError, match="packs_pack_slug_unique"), transaction.atomic():
        Pack.objects.create(workspace=personas.workspace, slug="mental-math", name="x", family="y")
    Pack.objects.create(workspace=personas.other_workspace, slug="mental-math", name="x", family="y")


def test_the_same_bytes_are_one_artifact_per_workspace(personas):
    a = services.artifact_store(workspace=personas.workspace, data=b"same", filename="a.txt")
    b = services.artifact_store(workspace=personas.workspace, data=b"same", filename="b.txt")
    c = services.artifact_store(workspace=personas.other_workspace, data=b"same", filename="a.txt")
    assert a.created and not b.created and c.created
    assert a.artifact.pk == b.artifact.pk != c.artifact.pk
    with pytest.raises(IntegrityError, match="packs_artifact_sha256_unique"), transaction.atomic():
        Artifact.objects.create(
            workspace=personas.workspace, sha256=a.artifact.sha256, size=4, file=a.artifact.file.name
        )


def test_an_asset_scope_must_match_its_owner(personas, two_versions):
    with pytest.raises(IntegrityError, match="packs_asset_scope_owner"), transaction.atomic():
        Asset.objects.create(version=two_versions.version, scope="case", key="k", path="p")


def test_version_asset_keys_are_unique_per_version(personas, two_versions):
    Asset.objects.create(version=two_versions.version, scope="version", key="k", path="p")
    with pytest.raises(IntegrityError, match="packs_asset_version_key_unique"), transaction.atomic():
        Asset.objects.create(version=two_versions.version, scope="version", key="k", path="q")


def test_published_rows_refuse_updates(personas, two_versions):
    for obj in (
        two_versions.version,
        two_versions.version.challenges.first(),
        InputSet.objects.first(),
        Case.objects.first(),
    ):
        with pytest.raises(ImmutableError):
            obj.save()


# --- reads, each pinned by its query count ------------------------------------------------------


def test_pack_for_list_is_two_queries(personas, two_versions, django_assert_num_queries):
    publish(personas, mental_math(slug="second"))
    with django_assert_num_queries(2):
        packs = list(Pack.objects.for_list(personas.workspace))
        numbers = {p.slug: [v.number for v in p.versions.all()] for p in packs}
    assert numbers == {"mental-math": [2, 1], "second": [1]}
    assert {p.slug: (p.version_count, p.latest_number) for p in packs} == {
        "mental-math": (2, 2),
        "second": (1, 1),
    }


def test_pack_for_detail_is_two_queries(personas, two_versions, django_assert_num_queries):
    with django_assert_num_queries(2):
        pack = Pack.objects.for_detail().get(pk=two_versions.pack.pk)
        rows = [(v.number, v.published_by.username, pack.workspace.slug) for v in pack.versions.all()]
    assert rows == [(2, "olive", "acme"), (1, "olive", "acme")]


def test_version_for_detail_is_four_queries(personas, two_versions, django_assert_num_queries):
    with django_assert_num_queries(4):
        version = PackVersion.objects.for_detail().get(pk=two_versions.version.pk)
        _ = (version.pack.workspace.slug, version.published_by.username)
        sets = [(s.key, s.case_count) for s in version.input_sets.all()]
        keys = [c.key for c in version.challenges.all()]
        assets = list(version.version_assets)
    assert sets == [("smoke", 3)] and keys == ["word-problem"] and assets == []


def test_version_for_history_is_one_query(personas, two_versions, django_assert_num_queries):
    with django_assert_num_queries(1):
        rows = [
            (v.number, v.published_by.username) for v in PackVersion.objects.for_history(two_versions.pack)
        ]
    assert rows == [(2, "olive"), (1, "olive")]


def test_version_for_source_is_one_query(personas, two_versions, django_assert_num_queries):
    with django_assert_num_queries(1):
        version = PackVersion.objects.for_source().get(pk=two_versions.version.pk)
        assert version.pack.workspace.slug == "acme" and bytes(version.source)


def test_cases_for_version_and_input_set_are_one_query_each(
    personas, two_versions, django_assert_num_queries
):
    version = two_versions.version
    smoke = version.input_sets.get()
    with django_assert_num_queries(1):
        rows = [(c.input_set.key, c.challenge.key, c.case_key) for c in Case.objects.for_version(version)]
    assert [r[2] for r in rows] == ["crates", "train", "apples"]
    with django_assert_num_queries(1):
        keys = [(c.challenge.key, c.case_key) for c in Case.objects.for_input_set(smoke)]
    assert len(keys) == 3


def test_drafts_for_list_and_for_editor_are_one_query(personas, two_versions, django_assert_num_queries):
    draft = services.draft_from_version(version=two_versions.version, user=personas.owner)
    with django_assert_num_queries(1):
        rows = [
            (d.name, d.based_on.pack.slug, d.created_by.username)
            for d in Draft.objects.for_list(personas.workspace)
        ]
    assert rows == [(draft.name, "mental-math", "olive")]
    with django_assert_num_queries(1):
        loaded = Draft.objects.for_editor().get(pk=draft.pk)
        assert (loaded.workspace.slug, loaded.based_on.pack.slug) == ("acme", "mental-math")


def test_artifacts_for_workspace_is_one_query(personas, django_assert_num_queries):
    services.artifact_store(workspace=personas.workspace, data=b"a", filename="a")
    services.artifact_store(workspace=personas.other_workspace, data=b"b", filename="b")
    with django_assert_num_queries(1):
        assert len(list(Artifact.objects.for_workspace(personas.workspace))) == 1


def test_the_version_summary_does_not_grow_with_the_version(personas, django_assert_num_queries):
    small = publish(personas, mental_math()).version
    large = publish(personas, mental_math(number=2, extra_case=True)).version
    for version in (small, large):
        with django_assert_num_queries(5):
            loaded = PackVersion.objects.for_detail().get(pk=version.pk)
            summary = selectors.version_summary(loaded)
        assert len(summary["cases"]) == loaded.input_sets.all()[0].case_count
