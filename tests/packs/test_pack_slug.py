"""``pack.slug`` is URL-safe: it names the pack in API routes, CLI arguments and file names."""

from __future__ import annotations

import json

import jsonschema
import pytest
import yaml

from packs.bundle import pack_json_schema
from packs.bundle.models import SLUG_MESSAGE
from packs.models import Pack
from tests.packs.bundle_helpers import base_pack, check, dump, errors, line_of
from tests.packs.publish_fixtures import mental_math

BASE = "/api/v1/workspaces/acme"
BAD_SLUGS = ["team/math", "..", ".hidden", "-x", "_x", "Mental Math!!", "a" * 201, "café", "a%2Fb", "a?b"]
GOOD_SLUGS = ["mental-math", "Mental-Math", "v1.2_beta", "a", "7", "a" * 200]


def with_slug(slug: object) -> str:
    doc = base_pack()
    doc["pack"]["slug"] = slug
    return dump(doc)


@pytest.mark.parametrize("slug", BAD_SLUGS)
def test_a_slug_that_is_not_url_safe_is_a_field_error_at_its_value(slug):
    text = with_slug(slug)
    report = check(text)
    assert errors(report) == [("pack.slug", SLUG_MESSAGE)]
    issue = report.errors[0]
    assert (issue.line, issue.column) == (line_of(text, "slug:"), len("  slug: ") + 1)  # the value


def test_the_message_says_what_is_allowed_and_gives_an_example():
    assert SLUG_MESSAGE == (
        'must be a URL-safe slug (letters, digits, ".", "_", "-"; starting with a letter or digit; '
        "at most 200 characters), e.g. mental-math"
    )


@pytest.mark.parametrize("slug", [*GOOD_SLUGS, 2024, "  padded  "])
def test_url_safe_slugs_validate(slug):
    report = check(with_slug(slug))
    assert report.valid, report.to_body()
    assert report.pack.slug == str(slug).strip()


def test_a_blank_slug_is_still_required():
    assert errors(check(with_slug("  "))) == [("pack.slug", "is required")]


@pytest.mark.parametrize("slug", BAD_SLUGS + GOOD_SLUGS + ["  padded  "])
def test_the_json_schema_states_the_same_slug_rule(slug):
    validator = jsonschema.Draft202012Validator(pack_json_schema())
    document = yaml.safe_load(with_slug(slug))
    assert validator.is_valid(document) == check(with_slug(slug)).valid


@pytest.mark.django_db
@pytest.mark.parametrize("slug", ["team/math", "..", "a" * 500])
def test_publish_refuses_a_slug_that_is_not_url_safe(personas, slug):
    text = mental_math(slug=json.dumps(slug))
    response = personas.api(personas.owner).generic(
        "POST", f"{BASE}/packs", text.encode(), content_type="application/yaml"
    )
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid_challenge_pack"
    assert [(e["field"], e["message"], e["line"], e["column"]) for e in body["errors"]] == [
        ("pack.slug", SLUG_MESSAGE, 3, 9)
    ]
    assert not Pack.objects.exists()


@pytest.mark.django_db
def test_a_published_slug_with_dots_and_capitals_is_reachable_through_every_pack_route(personas):
    client = personas.api(personas.owner)
    published = client.generic(
        "POST", f"{BASE}/packs", mental_math(slug="Mental.Math_v2").encode(), content_type="application/yaml"
    )
    assert published.status_code == 201, published.content
    pack_url = f"{BASE}/packs/Mental.Math_v2"
    assert client.get(pack_url).json()["slug"] == "Mental.Math_v2"
    assert client.get(f"{pack_url}/versions/1").status_code == 200
    bundle = client.get(f"{pack_url}/versions/1/bundle")
    assert bundle.status_code == 200
    assert bundle["Content-Disposition"] == 'attachment; filename="Mental.Math_v2-v1.yaml"'
