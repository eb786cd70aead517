"""Site-wide request middleware."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlencode, urlsplit

from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, QueryDict
from django.shortcuts import render, resolve_url

_FORMS = ("application/x-www-form-urlencoded", "multipart/form-data")


def field_with_nul(data: QueryDict) -> str | None:
    """The name of the first key holding a NUL character or having a value that does (NUL
    written as ``\\0``), or None."""
    for key, values in data.lists():
        if "\x00" in key or any("\x00" in value for value in values):
            return key.replace("\x00", "\\0")
    return None


class RejectNulMiddleware:
    """A query parameter or form field holding a NUL character is answered 400, naming it.

    PostgreSQL refuses NUL in text, so a filter or a field that passed one through to a query
    (the run list's ``deployment``, a case list's ``challenge`` or ``q``, an API token's name)
    answered 500. Django forms refuse NUL in what they read; these are read directly. The API
    is left to its own checks, which name their error codes (its JSON parser refuses NUL in a
    body; ``agentclash_site.lib.api.ApiView``, the base of every API view, refuses one in a
    query parameter with this module's ``field_with_nul`` before the handler runs)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path.startswith("/api/"):
            return self.get_response(request)
        where, name = "query parameter", field_with_nul(request.GET)
        if name is None and request.method == "POST" and request.content_type in _FORMS:
            where, name = "form field", field_with_nul(request.POST)
        if name is None:
            return self.get_response(request)
        message = f"{where} {name!r} must not contain NUL characters"
        return HttpResponseBadRequest(message, content_type="text/plain; charset=utf-8")


class ContentSecurityPolicyMiddleware:
    """Sends ``settings.CONTENT_SECURITY_POLICY`` on every response that has no policy of its
    own: scripts from this origin only (the templates run no inline script and no inline
    event handler), so user text that ever escaped its escaping still cannot run."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        self.policy = getattr(settings, "CONTENT_SECURITY_POLICY", "")

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if self.policy and "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = self.policy
        return response


class HtmxSessionEndedMiddleware:
    """An htmx request that ``login_required`` sends to the login page (the session ended:
    logged out in another tab, expired) is answered 401 with a note linking the login page.

    The browser follows a redirect inside the request, so htmx received the login page itself
    with a 200: it swapped the whole page into the fragment's place (the editor's report, a
    progress panel), and the editor said "Saved and validated." for a save that never
    happened. ``static/js/app.js`` shows the note above the page instead."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if not getattr(request, "htmx", False) or not _is_login_redirect(response):
            return response
        # Back to the page the request came from: the request's own URL may be POST-only.
        page = request.htmx.current_url_abs_path or "/"  # type: ignore[attr-defined]
        login_url = f"{resolve_url(settings.LOGIN_URL)}?{urlencode({'next': page}, safe='/')}"
        return render(request, "session_ended.html", {"login_url": login_url}, status=401)


def _is_login_redirect(response: HttpResponse) -> bool:
    if response.status_code != 302:
        return False
    return urlsplit(response.get("Location", "")).path == resolve_url(settings.LOGIN_URL)
