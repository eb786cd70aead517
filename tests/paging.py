"""Helpers for the keyset-paged tables of the HTML pages (templates/_more_rows.html): follow
a table's "more" row as htmx does, or as a browser without JavaScript does."""

from __future__ import annotations

import html
import re
from collections.abc import Callable

from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

HTMX = {"HTTP_HX_REQUEST": "true"}


def more_row(body: str, more_id: str) -> dict[str, str] | None:
    """The link of the table's "more" row (``href``, ``hx-get``, its text), or None."""
    row = re.search(rf'<tr id="{more_id}">(.*?)</tr>', body, re.S)
    if row is None:
        return None
    link = re.search(r'<a href="([^"]*)" hx-get="([^"]*)"[^>]*rel="next">([^<]*)</a>', row.group(1))
    assert link is not None, row.group(0)
    return {
        "href": html.unescape(link.group(1)),
        "hx-get": html.unescape(link.group(2)),
        "text": link.group(3),
    }


def follow_more(
    client: Client, path: str, more_id: str, rows: Callable[[str], list[str]], *, htmx: bool = True
) -> list[list[str]]:
    """Every page of one table from ``path``'s first page on, as lists of what ``rows`` finds
    in each answer. With htmx, each loaded batch gives its first row the focus (autofocus, once)."""
    body = client.get(path).content.decode()
    pages = [rows(body)]
    while (link := more_row(body, more_id)) is not None:
        assert len(pages) < 100
        if htmx:
            response = client.get(path.split("?")[0] + link["hx-get"], **HTMX)
            body = response.content.decode()
            assert response.status_code == 200
            assert body.count(" autofocus") == 1, body
            assert "<html" not in body  # the rows alone
        else:
            response = client.get(path.split("?")[0] + link["href"])
            body = response.content.decode()
            assert response.status_code == 200 and "<html" in body
        pages.append(rows(body))
    return pages


def count_queries(client: Client, path: str, **extra: str) -> int:
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(path, **extra)
    assert response.status_code == 200, response.content[:500]
    return len(ctx.captured_queries)
