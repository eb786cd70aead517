"""Test clients of the HTML pages."""

from __future__ import annotations

from django.test import Client


def logged_in(user: object) -> Client:
    """A browser-like client with ``user`` logged in."""
    client = Client()
    client.force_login(user)
    return client
