"""``Authorization: Bearer <token>`` for the REST API."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone
from rest_framework import authentication, exceptions

from agentclash_site.workspaces.models import ApiToken, hash_token


class BearerTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request):  # type: ignore[no-untyped-def]
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].lower() != self.keyword.lower().encode():
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Authorization header must be 'Bearer <token>'.")
        try:
            raw = header[1].decode()
        except UnicodeError:
            raise exceptions.AuthenticationFailed("Token contains invalid characters.") from None
        token = (
            ApiToken.objects.active()
            .select_related("user", "workspace")
            .filter(digest=hash_token(raw))
            .first()
        )
        if token is None or not token.user.is_active:
            raise exceptions.AuthenticationFailed("Invalid or revoked token.")
        now = timezone.now()
        # Record use at most once a minute so busy CI jobs do not write on every request.
        if token.last_used_at is None or now - token.last_used_at > timedelta(minutes=1):
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        return (token.user, token)

    def authenticate_header(self, request):  # type: ignore[no-untyped-def]
        return self.keyword
