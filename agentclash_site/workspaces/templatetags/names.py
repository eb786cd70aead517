"""``|bdi``: a user-supplied name (workspace, pack, draft, deployment, run, member) shown
inline, isolated from the text around it. Without it an Arabic or Hebrew name reorders the
punctuation next to it ("Cancel <name>?" shows the question mark on the wrong side,
breadcrumb slashes move). A builtin of the site's templates (settings ``TEMPLATES``); not
for ``<title>``, whose text cannot hold tags."""

from __future__ import annotations

from typing import Any

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString

register = template.Library()


@register.filter
def bdi(value: Any) -> SafeString:
    return format_html("<bdi>{}</bdi>", value)
