"""Workspace scoping, roles, API tokens and CSRF."""

from __future__ import annotations

import re

import pytest
import yaml
from django.test import Client
from django.urls import reverse

from agentclash_site.workspaces.models import ApiToken, hash_token
from agentclash_site.workspaces.services import token_create, token_revoke

pytestmark = pytest.mark.django_db


def test_an_outsider_gets_404_for_another_workspace_over_the_api(personas):
    response = personas.api(personas.outsider).get("/api/v1/workspaces/acme")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_a_member_sees_their_workspace_and_role(personas):
    response = personas.api(personas.viewer).get("/api/v1/workspaces/acme")
    assert response.status_code == 200
    assert response.json()["role"] == "viewer"


def test_the_workspace_list_only_shows_memberships(personas):
    response = personas.api(personas.owner).get("/api/v1/workspaces")
    assert [w["slug"] for w in response.json()["results"]] == ["acme"]


def test_a_viewer_gets_403_on_writes(personas):
    response = personas.api(personas.viewer).patch(
        "/api/v1/workspaces/acme", {"name": "Hacked"}, format="json"
    )
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "permission_denied"
    personas.workspace.refresh_from_db()
    assert personas.workspace.name == "Acme"


def test_an_editor_can_write(personas):
    response = personas.api(personas.editor).patch(
        "/api/v1/workspaces/acme", {"name": "Acme Labs"}, format="json"
    )
    assert response.status_code == 200
    assert response.json()["name"] == "Acme Labs"


def test_a_workspace_update_refuses_an_unknown_field_by_name(personas):
    # Like every other JSON body of the API (ClosedInput): a typo is named, never dropped.
    response = personas.api(personas.owner).patch(
        "/api/v1/workspaces/acme", {"name": "Acme Labs", "allow_private_endpoint": True}, format="json"
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["code"], error["field"]) == ("invalid", "allow_private_endpoint")
    assert "unknown field" in error["message"]
    personas.workspace.refresh_from_db()
    assert personas.workspace.name == "Acme"


def test_an_outsider_gets_404_on_writes_too(personas):
    response = personas.api(personas.outsider).patch("/api/v1/workspaces/acme", {"name": "x"}, format="json")
    assert response.status_code == 404


def test_the_api_requires_authentication(personas):
    response = personas.api(None).get("/api/v1/workspaces")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "not_authenticated"


def test_a_revoked_token_no_longer_authenticates(personas):
    from rest_framework.test import APIClient

    issued = token_create(user=personas.owner)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {issued.secret}")
    assert client.get("/api/v1/workspaces").status_code == 200
    token_revoke(token=issued.token)
    assert client.get("/api/v1/workspaces").status_code == 401


def test_tokens_are_stored_hashed(personas):
    issued = token_create(user=personas.owner)
    stored = ApiToken.objects.get(pk=issued.token.pk)
    assert issued.secret not in (stored.digest, stored.hint)
    assert len(stored.digest) == 64


def test_a_token_limited_to_one_workspace_sees_only_it(personas):
    from agentclash_site.workspaces.models import Role
    from agentclash_site.workspaces.services import membership_set_role

    membership_set_role(workspace=personas.other_workspace, user=personas.owner, role=Role.OWNER)
    client = personas.api(personas.owner, workspace=personas.other_workspace)
    assert client.get("/api/v1/workspaces/acme").status_code == 404
    assert client.get("/api/v1/workspaces/globex").status_code == 200
    assert [w["slug"] for w in client.get("/api/v1/workspaces").json()["results"]] == ["globex"]


def test_html_posts_enforce_csrf(personas):
    client = Client(enforce_csrf_checks=True)
    client.force_login(personas.owner)
    response = client.post(reverse("workspace-switch"), {"workspace": "acme"})
    assert response.status_code == 403


def test_switching_to_a_foreign_workspace_is_404(personas):
    client = Client()
    client.force_login(personas.owner)
    assert client.post(reverse("workspace-switch"), {"workspace": "globex"}).status_code == 404


def test_the_login_page_logs_a_user_in(personas):
    client = Client()
    page = client.get(reverse("login"))
    assert page.status_code == 200
    assert b'name="username"' in page.content
    response = client.post(reverse("login"), {"username": "olive", "password": "pw-olive-123"})
    assert response.status_code == 302
    home = client.get(reverse("home"))
    assert home.status_code == 200
    assert b"Acme" in home.content


def test_pages_require_login(db):
    response = Client().get(reverse("home"))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_the_token_page_shows_a_new_secret_once(personas):
    client = Client()
    client.force_login(personas.owner)
    response = client.post(reverse("token-new"), {"name": "ci", "workspace": "acme"}, follow=True)
    token = ApiToken.objects.get(user=personas.owner, name="ci")
    assert token.workspace == personas.workspace
    assert b"acl_" in response.content
    again = client.get(reverse("token-list"))
    assert token.hint.encode() in again.content
    assert again.content.count(b"acl_") == response.content.count(b"acl_") - 1


def test_creating_a_token_redirects_so_a_reload_does_not_create_another(personas):
    # The secret was rendered in the POST's own answer: reloading that page (or going back
    # to it) posted the form again and issued a second token.
    client = Client()
    client.force_login(personas.owner)
    response = client.post(reverse("token-new"), {"name": "ci", "workspace": "acme"})
    assert response.status_code == 302 and response["Location"] == reverse("token-list")
    assert ApiToken.objects.filter(user=personas.owner).count() == 1
    # Until shown, the secret waits in the session encrypted, never as itself.
    stored = " ".join(str(value) for value in client.session.values())
    assert "acl_" not in stored
    shown = client.get(response["Location"]).content.decode()
    secret = re.search(r'<code id="new-token">(acl_[^<]+)</code>', shown).group(1)
    assert ApiToken.objects.get(user=personas.owner).digest == hash_token(secret)
    assert secret not in client.get(reverse("token-list")).content.decode()
    assert ApiToken.objects.filter(user=personas.owner).count() == 1


def test_the_schema_and_docs_are_served(personas):
    client = Client()
    client.force_login(personas.owner)
    assert client.get("/api/v1/schema/").status_code == 200
    assert client.get("/api/v1/docs/").status_code == 200


def test_the_api_docs_load_their_scripts_from_our_static_files_not_a_cdn(personas):
    client = Client()
    client.force_login(personas.owner)
    for url in ("/api/v1/docs/", "/api/v1/redoc/"):
        page = client.get(url).content.decode()
        sources = re.findall(r'(?:src|href)="([^"]+)"', page)
        assert sources, url
        assert all(not s.startswith(("http://", "https://", "//")) for s in sources), (url, sources)
        assert any("drf_spectacular_sidecar" in s for s in sources), (url, sources)


def test_the_openapi_schema_generates_without_warnings_and_validates(tmp_path):
    from django.core.management import call_command

    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yaml"))
    assert (tmp_path / "schema.yaml").stat().st_size > 10_000
    schema = yaml.safe_load((tmp_path / "schema.yaml").read_text())
    assert schema["components"]["securitySchemes"]["bearerAuth"] == {
        "type": "http",
        "scheme": "bearer",
        "description": "An API token: `manage.py token create`.",
    }


@pytest.mark.parametrize(
    "method,url",
    [
        ("patch", "/api/v1/workspaces/acme"),  # the default parsers
        ("post", "/api/v1/workspaces/acme/runs"),
        ("post", "/api/v1/workspaces/acme/drafts"),
    ],
)
@pytest.mark.parametrize(
    "body",
    ["{not json", '{"name": ' + "[" * 5000 + "]" * 5000 + "}"],  # json raises RecursionError on the second
    ids=["malformed", "nested-too-deeply"],
)
def test_a_body_that_is_not_usable_json_is_a_400_parse_error(personas, method, url, body):
    response = getattr(personas.api(personas.editor), method)(url, body, content_type="application/json")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "parse_error" and error["message"].startswith("JSON parse error")


@pytest.mark.parametrize(
    "method,url,body",
    [
        ("post", "/api/v1/workspaces/acme/runs", {"deployments": ["x"]}),  # pack missing
        ("post", "/api/v1/workspaces/acme/runs", {"pack": "p", "deployments": "x"}),  # not a list
        ("post", "/api/v1/workspaces/acme/runs", {"pack": "p", "deployments": ["x"], "deploymnets": []}),
        ("post", "/api/v1/workspaces/acme/deployments", {"name": "x", "kind": "carrier_pigeon"}),
        ("patch", "/api/v1/workspaces/acme", {"name": ""}),
        ("post", "/api/v1/workspaces/acme/drafts", {"name": 5}),
    ],
)
def test_a_validation_error_is_the_error_body_of_the_spec_exactly(personas, method, url, body):
    # interfaces.md §7: {"error": {"code", "message", "field"?, "choices"?}}; serializer errors
    # carried DRF's whole detail as an extra "fields" key, documented nowhere (the OpenAPI
    # error schema has the four keys).
    response = getattr(personas.api(personas.owner), method)(url, body, format="json")
    assert response.status_code == 400
    error = response.json()["error"]
    assert set(response.json()) == {"error"}
    assert set(error) <= {"code", "message", "field", "choices"}, error
    assert error["code"] == "invalid" and error["field"] and error["message"]


@pytest.mark.parametrize(
    "url", ["/api/v1/workspaces/acme/runs", "/api/v1/workspaces/acme/packs", "/api/v1/workspaces"]
)
def test_an_unknown_format_parameter_is_a_400_naming_it_not_a_404(personas, url):
    # DRF reads ?format= as the response's renderer and answered an unknown one (a script
    # asking the run list for ?format=csv, as the export route takes it) 404 "Not found.",
    # which reads as a missing workspace or run.
    response = personas.api(personas.owner).get(url, {"format": "csv"})
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["code"], error["field"]) == ("invalid_format", "format")
    assert error["choices"] == ["json", "api"]
    assert personas.api(personas.owner).get(url, {"format": "json"}).status_code == 200


@pytest.mark.parametrize("url,param", [("/runs/", "deployment"), ("/packs/", "q")])
def test_a_nul_in_a_query_parameter_is_a_400_naming_it(personas, url, param):
    """PostgreSQL refuses NUL in text: filters that passed one to a query answered 500."""
    client = Client()
    client.force_login(personas.owner)
    response = client.get(url, {param: "a\x00b"})
    assert response.status_code == 400
    assert f"query parameter '{param}' must not contain NUL characters" in response.content.decode()


def test_a_nul_in_an_api_query_parameter_that_reaches_the_database_is_a_400(personas):
    from runs.services.deployments import deployment_create
    from tests.runs.runfactory import create_run, publish

    version = publish(personas.workspace, cases=1)
    dep = deployment_create(workspace=personas.workspace, name="ci", kind="trace_import").deployment
    run = create_run(personas.workspace, version, [dep])
    url = f"/api/v1/workspaces/acme/runs/{run.pk}/cases"
    for param in ("challenge", "deployment"):
        response = personas.api(personas.viewer).get(url, {param: "a\x00b"})
        assert response.status_code == 400
        error = response.json()["error"]
        assert (error["code"], error["field"]) == ("invalid_input", param)
        assert error["message"] == f"query parameter '{param}' must not contain NUL characters"


def test_a_nul_in_a_form_field_is_a_400_naming_it(personas):
    client = Client()
    client.force_login(personas.owner)
    response = client.post("/account/tokens/new/", {"name": "ci\x00", "workspace": "acme"})
    assert response.status_code == 400
    assert "form field 'name' must not contain NUL characters" in response.content.decode()
    assert not ApiToken.objects.filter(user=personas.owner).exists()


def test_a_nul_anywhere_in_an_api_json_body_is_a_400_naming_where(personas):
    api = personas.api(personas.editor)
    for body, where in (
        ({"pack": "echo\x00", "deployments": ["ci"]}, "pack"),
        ({"pack": "echo", "deployments": ["ci", "x\x00"]}, "deployments[1]"),
        ({"pack": "echo", "deployments": ["ci"], "k\x00": 1}, "k\\0"),
    ):
        response = api.post("/api/v1/workspaces/acme/runs", body, format="json")
        assert response.status_code == 400
        error = response.json()["error"]
        assert error["code"] == "parse_error"
        assert error["message"] == f"JSON parse error - {where} must not contain NUL characters"


def test_the_page_showing_a_new_token_is_never_stored_by_a_cache(personas):
    client = Client()
    client.force_login(personas.owner)
    response = client.post(reverse("token-new"), {"name": "ci", "workspace": "acme"}, follow=True)
    assert b"acl_" in response.content
    assert "no-store" in response.get("Cache-Control", "")


def test_stored_files_are_never_served_past_the_workspace_scoped_views(personas, settings):
    """With DEBUG (the default) ``/media/`` served every stored file, artifacts of every
    workspace included, to anyone holding its path, logged in or not."""
    import importlib

    from django.urls import clear_url_caches

    import agentclash_site.urls as site_urls
    from packs.services.artifacts import artifact_store

    name = artifact_store(
        workspace=personas.workspace, data=b"secret bytes", filename="x.txt"
    ).artifact.file.name
    settings.DEBUG = True
    try:
        importlib.reload(site_urls)
        clear_url_caches()
        for client in (Client(), _logged_in(personas.outsider)):
            response = client.get(f"/{settings.MEDIA_URL.strip('/')}/{name}")
            assert response.status_code == 404
            assert b"secret bytes" not in b"".join(getattr(response, "streaming_content", [response.content]))
    finally:
        settings.DEBUG = False
        importlib.reload(site_urls)
        clear_url_caches()


def _logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_a_page_of_another_workspace_of_the_user_makes_it_current(personas):
    """The top bar, switcher and Members link named the session's workspace while the page
    showed a run of another workspace of the user (opened from a link or a bookmark)."""
    from agentclash_site.workspaces.middleware import SESSION_KEY
    from agentclash_site.workspaces.models import Role
    from agentclash_site.workspaces.services import membership_set_role
    from runs.services.deployments import deployment_create
    from tests.runs.runfactory import create_run, publish

    def trace_run(workspace):
        dep = deployment_create(workspace=workspace, name="ci", kind="trace_import").deployment
        return create_run(workspace, publish(workspace, cases=1), [dep])

    membership_set_role(workspace=personas.other_workspace, user=personas.owner, role=Role.VIEWER)
    run = trace_run(personas.other_workspace)
    client = Client()
    client.force_login(personas.owner)
    assert client.get(reverse("home")).status_code == 200
    assert client.session[SESSION_KEY] == personas.workspace.pk  # acme, first by slug
    page = client.get(reverse("run-detail", args=[run.pk]))
    assert page.status_code == 200
    assert page.context["current_workspace"] == personas.other_workspace
    assert client.session[SESSION_KEY] == personas.other_workspace.pk
    # an outsider's link still answers 404 and changes nothing
    foreign = trace_run(personas.workspace)
    client.force_login(personas.outsider)
    client.get(reverse("home"))
    before = client.session[SESSION_KEY]
    assert client.get(reverse("run-detail", args=[foreign.pk])).status_code == 404
    assert client.session[SESSION_KEY] == before == personas.other_workspace.pk
