"""Every page carries a Content-Security-Policy that allows scripts from our own origin only,
so text that ever escaped its escaping (a pack field, an agent's output, a judge's reason)
still cannot run; the pages themselves run no inline script, which the policy would block."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client

pytestmark = pytest.mark.django_db

TEMPLATES = Path(settings.BASE_DIR) / "templates"


def _policy(response) -> dict[str, list[str]]:
    header = response.get("Content-Security-Policy", "")
    out: dict[str, list[str]] = {}
    for part in header.split(";"):
        words = part.split()
        if words:
            out[words[0]] = words[1:]
    return out


@pytest.mark.parametrize(
    "url", ["/", "/packs/", "/runs/", "/deployments/", "/account/tokens/", "/api/v1/docs/"]
)
def test_pages_allow_scripts_from_our_origin_only(personas, url):
    client = Client()
    client.force_login(personas.owner)
    response = client.get(url)
    assert response.status_code == 200
    policy = _policy(response)
    assert policy.get("script-src") == ["'self'"], policy
    assert policy.get("object-src") == ["'none'"]
    assert policy.get("base-uri") == ["'self'"]
    assert policy.get("frame-ancestors") == ["'none'"]


def test_the_login_page_has_the_policy_too():
    assert _policy(Client().get("/login/")).get("script-src") == ["'self'"]


def test_no_template_runs_inline_script():
    offenders = []
    for path in TEMPLATES.rglob("*.html"):
        text = path.read_text()
        for m in re.finditer(r"<script\b[^>]*>", text):
            if "src=" not in m.group(0):
                offenders.append(f"{path.relative_to(TEMPLATES)}: {m.group(0)}")
        for m in re.finditer(r"\son[a-z]+\s*=\s*[\"']", text):
            offenders.append(f"{path.relative_to(TEMPLATES)}: {m.group(0).strip()}")
        if "javascript:" in text:
            offenders.append(f"{path.relative_to(TEMPLATES)}: javascript: URL")
    assert offenders == []


def test_the_api_docs_load_every_script_from_a_file(personas):
    client = Client()
    client.force_login(personas.owner)
    page = client.get("/api/v1/docs/").content.decode()
    tags = re.findall(r"<script\b[^>]*>", page)
    assert tags and all("src=" in tag for tag in tags), tags
