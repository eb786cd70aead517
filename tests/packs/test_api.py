"""The pack API of spec/interfaces.md §7: every route, outsiders 404, viewers 403 on writes."""

from __future__ import annotations

import uuid

import pytest

from packs import services
from packs.models import Artifact, Draft, Pack, PackVersion
from tests.packs.bundle_helpers import base_pack, dump
from tests.packs.publish_fixtures import INVALID_PACK, MALFORMED_YAML, invoice_zip, mental_math

pytestmark = pytest.mark.django_db

BASE = "/api/v1/workspaces/acme"


def post_yaml(client, url: str, text: str | bytes, content_type: str = "application/yaml"):
    data = text.encode() if isinstance(text, str) else text
    return client.generic("POST", url, data, content_type=content_type)


@pytest.fixture
def published(personas):
    return services.pack_version_publish(
        workspace=personas.workspace, data=mental_math().encode(), user=personas.owner
    )


# --- schema -----------------------------------------------------------------------------------


def test_the_schema_is_served_without_auth_with_an_etag(personas):
    client = personas.api(None)
    response = client.get("/api/v1/schemas/challenge-pack.v1.json")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/schema+json")
    schema = response.json()
    assert "2020-12" in schema["$schema"]
    etag = response["ETag"]
    again = client.get("/api/v1/schemas/challenge-pack.v1.json", HTTP_IF_NONE_MATCH=etag)
    assert again.status_code == 304
    assert again["ETag"] == etag


# --- validate -----------------------------------------------------------------------------------


def test_validate_answers_200_for_a_valid_pack(personas):
    response = post_yaml(personas.api(personas.viewer), f"{BASE}/packs/validate", mental_math())
    assert response.status_code == 200
    assert response.json() == {"valid": True, "errors": [], "warnings": []}


def test_validate_answers_400_with_field_errors(personas):
    response = post_yaml(personas.api(personas.owner), f"{BASE}/packs/validate", INVALID_PACK)
    assert response.status_code == 400
    body = response.json()
    assert set(body) == {"valid", "errors", "warnings"}
    assert body["valid"] is False
    assert all({"field", "message", "line", "column"} <= set(e) for e in body["errors"])


def test_validate_carries_the_detail_of_an_undeclared_challenge(personas):
    doc = base_pack()
    doc["input_sets"][0]["cases"][0]["challenge_key"] = "summ"
    response = post_yaml(personas.api(personas.owner), f"{BASE}/packs/validate", dump(doc))
    assert response.status_code == 400
    (error,) = response.json()["errors"]
    assert error["field"] == "input_sets[0].cases[0].challenge_key"
    assert error["message"] == "must reference a declared challenge"
    assert error["detail"] == 'declared: "sum"; did you mean "sum"?'


def test_malformed_yaml_is_400_never_500(personas):
    response = post_yaml(personas.api(personas.owner), f"{BASE}/packs/validate", MALFORMED_YAML)
    assert response.status_code == 400
    error = response.json()["errors"][0]
    assert error["field"] == "bundle"
    assert error["line"] is not None


def test_validate_strict_turns_warnings_into_errors(personas):
    text = mental_math().replace("input_sets:\n", "stray: 1\ninput_sets:\n")
    client = personas.api(personas.owner)
    relaxed = post_yaml(client, f"{BASE}/packs/validate", text)
    assert relaxed.status_code == 200
    assert [w["rule"] for w in relaxed.json()["warnings"]] == ["unknown_key"]
    strict = post_yaml(client, f"{BASE}/packs/validate?strict=true", text)
    assert strict.status_code == 400
    assert strict.json()["warnings"] == []
    assert strict.json()["errors"][0]["rule"] == "unknown_key"


@pytest.mark.parametrize("route", ["packs/validate", "packs"])
def test_a_strict_value_that_is_neither_true_nor_false_is_a_400_naming_it(personas, route):
    from packs.models import PackVersion

    response = post_yaml(personas.api(personas.owner), f"{BASE}/{route}?strict=ture", mental_math())
    assert response.status_code == 400
    assert response.json()["error"] == {
        "code": "invalid_input",
        "message": "strict must be true or false (1/0, yes/no, on/off), not 'ture'",
        "field": "strict",
    }
    assert not PackVersion.objects.exists()
    relaxed = post_yaml(personas.api(personas.owner), f"{BASE}/packs/validate?strict=off", mental_math())
    assert relaxed.status_code == 200


def test_validate_reads_a_zip_by_content_type(personas):
    response = post_yaml(
        personas.api(personas.owner), f"{BASE}/packs/validate", invoice_zip(), "application/zip"
    )
    assert response.status_code == 200, response.json()


def test_a_zip_content_type_with_other_bytes_is_a_bundle_error(personas):
    response = post_yaml(
        personas.api(personas.owner), f"{BASE}/packs/validate", mental_math(), "application/zip"
    )
    assert response.status_code == 400
    assert response.json()["errors"][0] == {
        "field": "bundle",
        "message": "must be a valid zip archive",
        "line": None,
        "column": None,
    }


def test_validate_accepts_a_multipart_upload(personas):
    from django.core.files.uploadedfile import SimpleUploadedFile

    upload = SimpleUploadedFile("pack.yaml", mental_math().encode(), content_type="application/yaml")
    response = personas.api(personas.owner).post(
        f"{BASE}/packs/validate", {"bundle": upload}, format="multipart"
    )
    assert response.status_code == 200


def _yaml_upload(name: str = "pack.yaml"):
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile(name, mental_math().encode(), content_type="application/yaml")


@pytest.mark.parametrize("route", ["packs/validate", "packs"])
def test_a_multipart_field_the_api_would_ignore_is_a_400(personas, route):
    # -F strict=true was ignored: the pack was validated (or published) without --strict.
    client = personas.api(personas.owner)
    response = client.post(
        f"{BASE}/{route}", {"bundle": _yaml_upload(), "strict": "true"}, format="multipart"
    )
    assert response.status_code == 400
    body = response.json()["error"]
    assert (body["code"], body["field"]) == ("unknown_field", "strict")
    assert "?strict=true" in body["message"]
    response = client.post(
        f"{BASE}/{route}", {"bundle": _yaml_upload(), "pack": _yaml_upload()}, format="multipart"
    )
    assert response.status_code == 400
    assert (response.json()["error"]["code"], response.json()["error"]["field"]) == ("unknown_field", "pack")
    assert not Pack.objects.exists()


def test_a_multipart_upload_of_two_bundles_is_a_400(personas):
    response = personas.api(personas.owner).post(
        f"{BASE}/packs", {"bundle": _yaml_upload(), "file": _yaml_upload("other.yaml")}, format="multipart"
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_upload"
    assert "this request has 2" in response.json()["error"]["message"]
    assert not Pack.objects.exists()


def test_publish_accepts_a_multipart_upload_with_strict_in_the_query(personas):
    response = personas.api(personas.owner).post(
        f"{BASE}/packs?strict=true", {"file": _yaml_upload()}, format="multipart"
    )
    assert response.status_code == 201, response.json()
    assert Pack.objects.count() == 1


def test_an_outsider_cannot_validate_in_the_workspace(personas):
    response = post_yaml(personas.api(personas.outsider), f"{BASE}/packs/validate", mental_math())
    assert response.status_code == 404


# --- publish and list -----------------------------------------------------------------------------


def test_publish_answers_201_then_200_for_the_same_bytes(personas):
    client = personas.api(personas.editor)
    first = post_yaml(client, f"{BASE}/packs", mental_math())
    assert first.status_code == 201
    body = first.json()
    assert body["already_published"] is False
    assert body["slug"] == "mental-math" and body["number"] == 1
    assert set(body) == {
        "pack_id",
        "pack_version_id",
        "slug",
        "number",
        "input_set_ids",
        "warnings",
        "already_published",
    }
    again = post_yaml(client, f"{BASE}/packs", mental_math())
    assert again.status_code == 200
    assert again.json() == {**body, "already_published": True}


def test_publish_an_invalid_pack_is_400_with_the_code(personas):
    response = post_yaml(personas.api(personas.owner), f"{BASE}/packs", INVALID_PACK)
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid_challenge_pack"
    assert body["valid"] is False and body["errors"]


def test_publish_malformed_yaml_is_400(personas):
    response = post_yaml(personas.api(personas.owner), f"{BASE}/packs", MALFORMED_YAML)
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_challenge_pack"


def test_publish_conflicts_are_409(personas, published):
    client = personas.api(personas.owner)
    exists = post_yaml(client, f"{BASE}/packs", mental_math(extra_case=True))
    assert exists.status_code == 409
    assert exists.json()["error"]["code"] == "challenge_pack_version_exists"
    renamed = post_yaml(client, f"{BASE}/packs", mental_math(number=2, name="Other Name"))
    assert renamed.status_code == 409
    assert renamed.json()["error"]["code"] == "challenge_pack_metadata_conflict"


def test_publish_over_60_mib_is_413(personas):
    too_big = b"#" * (60 * 1024 * 1024 + 1)
    response = post_yaml(personas.api(personas.owner), f"{BASE}/packs", too_big)
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "payload_too_large"
    assert Pack.objects.count() == 0


def test_a_viewer_cannot_publish(personas):
    response = post_yaml(personas.api(personas.viewer), f"{BASE}/packs", mental_math())
    assert response.status_code == 403
    assert Pack.objects.count() == 0


def test_an_outsider_cannot_publish(personas):
    response = post_yaml(personas.api(personas.outsider), f"{BASE}/packs", mental_math())
    assert response.status_code == 404


def test_publish_a_zip_bundle(personas):
    response = post_yaml(personas.api(personas.owner), f"{BASE}/packs", invoice_zip(), "application/zip")
    assert response.status_code == 201, response.json()
    assert PackVersion.objects.get().source_media_type == "application/zip"


def test_the_list_shows_the_workspace_packs_with_versions(personas, published):
    services.pack_version_publish(
        workspace=personas.other_workspace, data=mental_math(slug="hidden").encode(), user=personas.outsider
    )
    response = personas.api(personas.viewer).get(f"{BASE}/packs")
    assert response.status_code == 200
    results = response.json()["results"]
    assert [p["slug"] for p in results] == ["mental-math"]
    assert results[0]["versions"][0]["number"] == 1
    assert results[0]["latest_number"] == 1


def test_an_outsider_gets_404_for_the_list(personas, published):
    assert personas.api(personas.outsider).get(f"{BASE}/packs").status_code == 404


# --- pack, version, bundle -----------------------------------------------------------------------


def test_the_pack_detail_lists_its_versions(personas, published):
    services.pack_version_publish(
        workspace=personas.workspace,
        data=mental_math(number=2, extra_case=True).encode(),
        user=personas.owner,
    )
    response = personas.api(personas.viewer).get(f"{BASE}/packs/mental-math")
    assert response.status_code == 200
    body = response.json()
    assert body["id"] == str(published.pack.public_id)
    assert [v["number"] for v in body["versions"]] == [2, 1]


def test_the_version_summary(personas, published):
    response = personas.api(personas.viewer).get(f"{BASE}/packs/mental-math/versions/1")
    assert response.status_code == 200
    body = response.json()
    assert body["id"] == str(published.version.public_id)
    assert body["challenges"][0]["key"] == "word-problem"
    smoke = body["input_sets"][0]
    assert {k: smoke[k] for k in ("key", "name", "description", "case_count")} == {
        "key": "smoke",
        "name": "Smoke",
        "description": "",
        "case_count": 2,
    }
    assert smoke["id"] == published.input_set_ids["smoke"]
    assert [c["case_key"] for c in body["cases"]] == ["crates", "train"]


def test_the_bundle_route_returns_the_original_bytes(personas, published):
    response = personas.api(personas.viewer).get(f"{BASE}/packs/mental-math/versions/1/bundle")
    assert response.status_code == 200
    assert response.content == mental_math().encode()
    assert response["Content-Type"] == "application/yaml"
    assert 'filename="mental-math-v1.yaml"' in response["Content-Disposition"]


def test_a_zip_bundle_comes_back_as_a_zip(personas):
    services.pack_version_publish(workspace=personas.workspace, data=invoice_zip(), user=personas.owner)
    response = personas.api(personas.owner).get(f"{BASE}/packs/invoice-totals/versions/1/bundle")
    assert response.content == invoice_zip()
    assert response["Content-Type"] == "application/zip"
    assert 'filename="invoice-totals-v1.zip"' in response["Content-Disposition"]


@pytest.mark.parametrize(
    "path",
    ["/packs/mental-math", "/packs/mental-math/versions/1", "/packs/mental-math/versions/1/bundle"],
)
def test_an_outsider_gets_404_for_pack_routes(personas, published, path):
    assert personas.api(personas.outsider).get(BASE + path).status_code == 404
    # Even with the right workspace slug of their own, the pack of acme is not there.
    assert personas.api(personas.outsider).get("/api/v1/workspaces/globex" + path).status_code == 404


def test_unknown_packs_and_versions_are_404(personas, published):
    client = personas.api(personas.owner)
    assert client.get(f"{BASE}/packs/nope").status_code == 404
    assert client.get(f"{BASE}/packs/mental-math/versions/9").status_code == 404


# --- drafts ---------------------------------------------------------------------------------------


def test_drafts_can_be_created_read_changed_and_deleted(personas):
    client = personas.api(personas.editor)
    created = client.post(f"{BASE}/drafts", {"name": "Mine", "bundle": mental_math()}, format="json")
    assert created.status_code == 201
    draft_id = created.json()["id"]
    assert created.json()["bundle"] == mental_math()

    listed = client.get(f"{BASE}/drafts").json()["results"]
    assert [d["id"] for d in listed] == [draft_id]
    assert "bundle" not in listed[0]

    changed = client.put(f"{BASE}/drafts/{draft_id}", {"bundle": "pack: {}\n"}, format="json")
    assert changed.status_code == 200
    assert changed.json()["bundle"] == "pack: {}\n"
    assert changed.json()["name"] == "Mine"

    assert client.get(f"{BASE}/drafts/{draft_id}").json()["bundle"] == "pack: {}\n"
    assert client.delete(f"{BASE}/drafts/{draft_id}").status_code == 204
    assert not Draft.objects.exists()


def test_a_draft_can_name_files_of_this_workspace_only(personas):
    client = personas.api(personas.owner)
    mine = services.artifact_store(workspace=personas.workspace, data=b"x", filename="x").artifact
    theirs = services.artifact_store(workspace=personas.other_workspace, data=b"y", filename="y").artifact
    ok = client.post(f"{BASE}/drafts", {"files": {"data/x": str(mine.public_id)}}, format="json")
    assert ok.status_code == 201
    assert ok.json()["files"] == {"data/x": str(mine.public_id)}
    refused = client.post(f"{BASE}/drafts", {"files": {"data/y": str(theirs.public_id)}}, format="json")
    assert refused.status_code == 400
    assert refused.json()["error"]["code"] == "invalid_draft"


def test_viewers_read_drafts_but_cannot_write_them(personas):
    draft = services.draft_create(
        workspace=personas.workspace, user=personas.owner, name="D", bundle_text="a: 1\n"
    )
    client = personas.api(personas.viewer)
    url = f"{BASE}/drafts/{draft.public_id}"
    assert client.get(url).status_code == 200
    assert client.put(url, {"bundle": "b: 2\n"}, format="json").status_code == 403
    assert client.delete(url).status_code == 403
    assert client.post(f"{BASE}/drafts", {"name": "x"}, format="json").status_code == 403
    draft.refresh_from_db()
    assert draft.bundle_text == "a: 1\n"


def test_outsiders_get_404_for_drafts(personas):
    draft = services.draft_create(workspace=personas.workspace, user=personas.owner, name="D")
    client = personas.api(personas.outsider)
    assert client.get(f"{BASE}/drafts").status_code == 404
    for prefix in (BASE, "/api/v1/workspaces/globex"):
        url = f"{prefix}/drafts/{draft.public_id}"
        assert client.get(url).status_code == 404
        assert client.put(url, {"bundle": ""}, format="json").status_code == 404
        assert client.delete(url).status_code == 404
    assert Draft.objects.filter(pk=draft.pk).exists()


def test_an_unknown_draft_is_404(personas):
    assert personas.api(personas.owner).get(f"{BASE}/drafts/{uuid.uuid4()}").status_code == 404


# --- artifacts -------------------------------------------------------------------------------------


def test_uploading_the_same_bytes_gives_the_same_artifact(personas):
    from django.core.files.uploadedfile import SimpleUploadedFile

    client = personas.api(personas.editor)
    upload = SimpleUploadedFile("answers.json", b'{"a": 1}', content_type="application/json")
    first = client.post(f"{BASE}/artifacts", {"file": upload}, format="multipart")
    assert first.status_code == 201
    body = first.json()
    assert set(body) == {"id", "sha256", "size", "media_type"}
    assert body["size"] == 8 and body["media_type"] == "application/json"
    raw = client.generic(
        "POST", f"{BASE}/artifacts?filename=a.json", b'{"a": 1}', content_type="application/json"
    )
    assert raw.status_code == 200
    assert raw.json() == body
    assert Artifact.objects.count() == 1


def test_a_file_name_with_control_characters_is_a_clear_400_and_nothing_is_stored(personas):
    client = personas.api(personas.editor)
    for query, code in [("a%01b.json", "invalid_filename"), ("a%00b.json", "invalid_input")]:
        # NUL is refused in every query parameter of every route, before the view runs
        raw = client.generic(
            "POST", f"{BASE}/artifacts?filename={query}", b'{"a": 1}', content_type="application/json"
        )
        assert raw.status_code == 400
        assert raw.json()["error"]["code"] == code
        assert raw.json()["error"]["field"] == "filename"
    assert not Artifact.objects.exists()


def test_artifact_upload_is_refused_to_viewers_and_outsiders(personas):
    url = f"{BASE}/artifacts"
    viewer = personas.api(personas.viewer).generic("POST", url, b"x", content_type="text/plain")
    outsider = personas.api(personas.outsider).generic("POST", url, b"x", content_type="text/plain")
    assert (viewer.status_code, outsider.status_code) == (403, 404)
    assert not Artifact.objects.exists()


def test_the_openapi_schema_describes_the_pack_routes(personas):
    client = personas.api(personas.owner)
    schema = client.get("/api/v1/schema/?format=json").json()
    paths = schema["paths"]
    for path in (
        "/api/v1/schemas/challenge-pack.v1.json",
        "/api/v1/workspaces/{ws}/packs/validate",
        "/api/v1/workspaces/{ws}/packs",
        "/api/v1/workspaces/{ws}/packs/{slug}",
        "/api/v1/workspaces/{ws}/packs/{slug}/versions/{number}",
        "/api/v1/workspaces/{ws}/packs/{slug}/versions/{number}/bundle",
        "/api/v1/workspaces/{ws}/drafts",
        "/api/v1/workspaces/{ws}/drafts/{draft_id}",
        "/api/v1/workspaces/{ws}/artifacts",
    ):
        assert path in paths, path
    assert set(paths["/api/v1/workspaces/{ws}/packs"]["post"]["responses"]) >= {
        "200",
        "201",
        "400",
        "409",
        "413",
    }
