"""``pack.slug``: any non-empty text of at most 200 characters, as upstream accepts it
(pack-format §1: the URL-safe rule was not one of the listed improvements). Every route that
takes a slug reaches such a pack, percent-encoded; download names are sanitized."""

from __future__ import annotations

import json
import re
from urllib.parse import quote

import jsonschema
import pytest
import yaml
from django.test import Client
from django.urls import reverse

from packs.bundle import pack_json_schema
from packs.bundle.models import SLUG_JSON_PATTERN, SLUG_MESSAGE
from packs.models import Pack, PackVersion
from tests.packs.bundle_helpers import base_pack, check, dump, errors, line_of
from tests.packs.publish_fixtures import mental_math

BASE = "/api/v1/workspaces/acme"
ODD_SLUGS = [
    "team/math",
    "..",
    ".hidden",
    "-x",
    "_x",
    "Mental Math!!",
    "café",
    "数学 pack",
    "a%2Fb",
    "100%",
    "a?b#c",
    'say "hi"',
    "back\\slash",
    "validate",
    "x/versions/1",
    "a/",
    "/a",
    "line\nbreak",
    "a" * 200,
]
PLAIN_SLUGS = ["mental-math", "Mental-Math", "v1.2_beta", "a", "7"]


def with_slug(slug: object) -> str:
    doc = base_pack()
    doc["pack"]["slug"] = slug
    return dump(doc)


@pytest.mark.parametrize("slug", [*ODD_SLUGS, *PLAIN_SLUGS, 2024, "  padded  "])
def test_any_non_empty_slug_validates_and_is_trimmed(slug):
    report = check(with_slug(slug))
    assert report.valid, report.to_body()
    assert report.pack.slug == str(slug).strip()


@pytest.mark.parametrize("slug", ["a" * 201, "é" * 201, "数" * 201])
def test_a_slug_longer_than_its_column_is_a_field_error_at_its_value(slug):
    text = with_slug(slug)
    report = check(text)
    assert errors(report) == [("pack.slug", "must be at most 200 characters")]
    issue = report.errors[0]
    assert (issue.line, issue.column) == (line_of(text, "slug:"), len("  slug: ") + 1)  # the value


def test_the_length_is_counted_after_trimming():
    assert check(with_slug("  " + "a" * 200 + "  ")).valid


def test_the_message_is_the_column_limit_message():
    assert SLUG_MESSAGE == "must be at most 200 characters"


@pytest.mark.parametrize("slug", ["", "  ", "\t", "\u3000"])
def test_a_blank_slug_is_still_required(slug):
    assert errors(check(with_slug(slug))) == [("pack.slug", "is required")]


@pytest.mark.parametrize("slug", [*ODD_SLUGS, *PLAIN_SLUGS, "  padded  ", "", "  ", "\u3000", "\ufeff"])
def test_the_json_schema_states_the_same_rule_but_the_length(slug):
    validator = jsonschema.Draft202012Validator(pack_json_schema())
    document = yaml.safe_load(with_slug(slug))
    assert validator.is_valid(document) == check(with_slug(slug)).valid


def test_the_json_schema_is_never_stricter_than_the_validator_on_length():
    validator = jsonschema.Draft202012Validator(pack_json_schema())
    assert validator.is_valid(yaml.safe_load(with_slug("a" * 201)))


def test_the_schema_pattern_treats_exactly_what_the_validator_trims_as_blank():
    """The character class is spelled out (not ``\\s``), so a JSON Schema validator with
    ECMA-262 regexes (whose ``\\s`` also holds U+FEFF) agrees with ``str.strip``."""
    pattern = re.compile(SLUG_JSON_PATTERN)
    for code in range(0x110000):
        char = chr(code)
        if 0xD800 <= code <= 0xDFFF:
            continue
        assert bool(pattern.search(char)) == (not char.isspace()), hex(code)
    assert "\\s" not in SLUG_JSON_PATTERN


@pytest.mark.django_db
@pytest.mark.parametrize("slug", ["a" * 201, "  "])
def test_publish_refuses_a_slug_that_is_too_long_or_blank(personas, slug):
    text = mental_math(slug=json.dumps(slug))
    response = personas.api(personas.owner).generic(
        "POST", f"{BASE}/packs", text.encode(), content_type="application/yaml"
    )
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid_challenge_pack"
    message = SLUG_MESSAGE if slug.strip() else "is required"
    assert [(e["field"], e["message"], e["line"]) for e in body["errors"]] == [("pack.slug", message, 3)]
    assert not Pack.objects.exists()


def publish(client, slug: str) -> None:
    text = mental_math(slug=json.dumps(slug))
    response = client.generic("POST", f"{BASE}/packs", text.encode(), content_type="application/yaml")
    assert response.status_code == 201, response.content
    assert response.json()["slug"] == slug


def pack_url(slug: str) -> str:
    return f"{BASE}/packs/{quote(slug, safe='')}"


@pytest.mark.django_db
@pytest.mark.parametrize("slug", ODD_SLUGS)
def test_every_slug_route_reaches_a_pack_with_an_odd_slug_and_outsiders_get_404(personas, slug):
    client = personas.api(personas.owner)
    publish(client, slug)
    assert client.get(pack_url(slug)).json()["slug"] == slug
    version = client.get(f"{pack_url(slug)}/versions/1")
    assert version.status_code == 200, version.content
    assert version.json()["pack"]["slug"] == slug
    bundle = client.get(f"{pack_url(slug)}/versions/1/bundle")
    assert bundle.status_code == 200
    assert bytes(bundle.content) == bytes(PackVersion.objects.get(pack__slug=slug).source)
    outsider = personas.api(personas.outsider)
    for url in (pack_url(slug), f"{pack_url(slug)}/versions/1", f"{pack_url(slug)}/versions/1/bundle"):
        assert outsider.get(url).status_code == 404, url
    assert client.get(f"{pack_url(slug)}/versions/2").status_code == 404


@pytest.mark.django_db
@pytest.mark.parametrize("slug", ["team/math", "Mental Math!!", "café", "100%", "a?b#c", "x/versions/1"])
def test_reverse_builds_urls_that_reach_the_pack(personas, slug):
    client = personas.api(personas.owner)
    publish(client, slug)
    kwargs = {"ws": "acme", "slug": slug}
    assert client.get(reverse("api-pack-detail", kwargs=kwargs)).json()["slug"] == slug
    kwargs["number"] = 1
    assert client.get(reverse("api-pack-version-detail", kwargs=kwargs)).json()["number"] == 1
    assert client.get(reverse("api-pack-version-bundle", kwargs=kwargs)).status_code == 200


@pytest.mark.django_db
def test_a_slug_named_like_the_validate_route_is_still_a_pack_and_validate_still_validates(personas):
    client = personas.api(personas.owner)
    assert client.get(f"{BASE}/packs/validate").status_code == 404
    publish(client, "validate")
    assert client.get(f"{BASE}/packs/validate").json()["slug"] == "validate"
    assert personas.api(personas.outsider).get(f"{BASE}/packs/validate").status_code == 404
    checked = client.generic(
        "POST", f"{BASE}/packs/validate", mental_math().encode(), content_type="application/yaml"
    )
    assert checked.status_code == 200 and checked.json()["valid"] is True


@pytest.mark.django_db
def test_a_slug_that_ends_like_a_version_route_prefers_the_version_of_the_shorter_slug(personas):
    client = personas.api(personas.owner)
    publish(client, "x")
    publish(client, "x/versions/1")
    # /packs/x/versions/1 is version 1 of "x"; "x/versions/1" is reached by its own versions.
    assert client.get(f"{BASE}/packs/x/versions/1").json()["pack"]["slug"] == "x"
    assert client.get(f"{BASE}/packs/x/versions/1/versions/1").json()["pack"]["slug"] == "x/versions/1"


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("slug", "disposition"),
    [
        ("Mental.Math_v2", 'attachment; filename="Mental.Math_v2-v1.yaml"'),
        ("team/math", 'attachment; filename="team_math-v1.yaml"'),
        ('say "hi"; x=1', 'attachment; filename="say_hi_x_1-v1.yaml"'),
        ("back\\slash\r\n", 'attachment; filename="back_slash-v1.yaml"'),
        ("..", 'attachment; filename="pack-v1.yaml"'),
        (".hidden", 'attachment; filename="hidden-v1.yaml"'),
        ("café", "attachment; filename*=utf-8''caf%C3%A9-v1.yaml"),
    ],
)
def test_download_names_built_from_the_slug_are_sanitized(personas, slug, disposition):
    client = personas.api(personas.owner)
    publish(client, slug.strip())
    slug = slug.strip()
    assert client.get(f"{pack_url(slug)}/versions/1/bundle")["Content-Disposition"] == disposition
    page = Client()
    page.force_login(personas.owner)
    version = PackVersion.objects.get(pack__slug=slug)
    ui = page.get(reverse("version-bundle", args=[version.public_id]))
    assert ui["Content-Disposition"] == disposition


@pytest.mark.django_db
def test_the_version_page_names_the_sanitized_download_and_shows_the_slug_escaped(personas):
    publish(personas.api(personas.owner), 'team/<b>"math"</b>')
    version = PackVersion.objects.get()
    page = Client()
    page.force_login(personas.owner)
    html = page.get(reverse("version-detail", args=[version.public_id])).content.decode()
    assert "Download team_b_math_b-v1.yaml" in html
    assert "team/&lt;b&gt;&quot;math&quot;&lt;/b&gt;" in html
    assert "<b>" not in html
