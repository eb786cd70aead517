"""Fail-fast guards (grading.md §5.5): ``rules.allowed_tools`` and ``rules.allowed_hosts``.

Guards see every call, failed ones included. A violation is one FAILED expectation that
fails the case whatever else passed; without the tool_calls channel a guard is UNAVAILABLE.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import re
from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import unquote, urlsplit

from .rules import rule_result
from .types import Evidence, ExpectationResult, OutcomeClass, ResultKind, Status, ToolCall
from .validators.common import clip

logger = logging.getLogger(__name__)

NETWORK_TOOLS = frozenset(
    {
        "http_request",
        "fetch",
        "WebFetch",
        "web_fetch",
        "http_get",
        "http_post",
        "browser_navigate",
        "navigate",
        "curl",
        "WebSearch",
        "web_search",
        "download",
    }
)
_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s\"'<>`]+")


def tool_allowed(name: str, allowed: Sequence[str]) -> bool:
    for entry in allowed:
        if entry.endswith("*"):
            if name.startswith(entry[:-1]):
                return True
        elif name == entry:
            return True
    return False


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


# Argument keys of a network tool that name its destination; their values count even without a
# scheme (`example.com/path`, `host:8080`), as the tool contacts them all the same.
_DEST_KEYS = frozenset(
    {"url", "urls", "uri", "href", "link", "host", "hostname", "domain", "address", "endpoint", "destination"}
)


def _is_dest_key(key: str) -> bool:
    k = key.lower()
    return k in _DEST_KEYS or k.endswith(("_url", "_uri", "_host", "_urls"))


def _dest_strings(value: Any) -> Iterator[str]:
    """Strings under destination keys, at any depth."""
    if isinstance(value, dict):
        for k, v in value.items():
            if isinstance(k, str) and _is_dest_key(k):
                yield from _strings(v)
            else:
                yield from _dest_strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _dest_strings(v)


def canonical_host(host: str) -> str:
    """One spelling per host: percent-decoded (fetchers decode the host), lower case, without
    the trailing dot of a fully qualified name, internationalised names in their ASCII (IDNA)
    form, so `bücher.de` and `xn--bcher-kva.de` are one host."""
    h = unquote(host).strip().rstrip(".").lower()
    if not h.isascii():
        with contextlib.suppress(UnicodeError):  # not a valid IDNA name: compared as written
            h = h.encode("idna").decode("ascii")
    return h


def _host_of(text: str) -> str | None:
    """The host of a URL, with or without a scheme: `https://h/p`, `h/p`, `h:8080`, `[::1]:80`, `::1`."""
    t = text.strip()
    if not t or any(c.isspace() for c in t):
        return None
    if "://" not in t:
        if t.startswith(("/", ".", "?", "#")):
            return None  # a local path or a relative reference names no host
        try:
            return str(ipaddress.ip_address(t))  # a bare IPv6 literal
        except ValueError:
            t = "//" + t
    try:
        host = urlsplit(t).hostname
    except ValueError:
        return None
    return (canonical_host(host) or None) if host else None


def _hosts_of(text: str) -> list[str]:
    """Every host a fetcher may read from the text: as RFC 3986 parsers (``urlsplit``,
    urllib3) read it, and as WHATWG parsers (browsers, fetch()) do, which take `\\` for `/`:
    `https://evil.io\\@docs.python.org/` is docs.python.org to the first and evil.io to the
    second, so both are checked."""
    first = _host_of(text)
    hosts = [first] if first else []
    if "\\" in text:
        other = _host_of(text.replace("\\", "/"))
        if other and other not in hosts:
            hosts.append(other)
    return hosts


def destinations(call: ToolCall) -> list[str]:
    hosts: list[str] = []
    if call.name in NETWORK_TOOLS:
        for s in _strings(call.args):
            for m in _URL.finditer(s):
                hosts += _hosts_of(m.group(0))
        for s in _dest_strings(call.args):
            if "://" not in s:  # a URL with a scheme was found above
                hosts += _hosts_of(s)
    net = call.attributes.get("network") if call.attributes else None
    if net is not None:
        items = net if isinstance(net, list) else [net]
        for item in items:
            if isinstance(item, dict):
                for k in ("host", "hostname", "url", "address", "destination"):
                    if isinstance(item.get(k), str):
                        hosts += _hosts_of(item[k])
            elif isinstance(item, str):
                hosts += _hosts_of(item)
    return hosts


def host_allowed(host: str, allowed: Sequence[str]) -> bool:
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        ip = None
    for entry in allowed:
        e = entry.strip().lower()
        if e == "*" or e == host:
            return True
        if e.startswith("*."):
            if ip is None and host.endswith("." + canonical_host(e[2:])):
                return True
            continue
        if "/" not in e and canonical_host(e) == host:
            return True
        if ip is not None and "/" in e:
            try:
                if ip in ipaddress.ip_network(e, strict=False):
                    return True
            except ValueError:
                continue
        if ip is not None and "/" not in e:
            try:
                if ip == ipaddress.ip_address(e):
                    return True
            except ValueError:
                continue
    return False


def _call_ref(c: ToolCall) -> str:
    return f"tool_call:{c.index}" + (f" (id {c.id})" if c.id else "")


def _unavailable(key: str, text: str) -> ExpectationResult:
    return rule_result(
        key,
        text,
        Status.UNAVAILABLE,
        OutcomeClass.UNAVAILABLE,
        "UNAVAILABLE: lane reports no tool calls (black_box), the guard cannot be checked",
        None,
        "channel_unavailable",
        True,
        ResultKind.GUARD,
    )


def _verdict(key: str, text: str, offenders: list[str], ok_text: str) -> ExpectationResult:
    if offenders:
        ev = (
            "violation: "
            + "; ".join(offenders[:20])
            + (f"; ... {len(offenders)} in all" if len(offenders) > 20 else "")
        )
        return rule_result(
            key, text, Status.FAILED, OutcomeClass.FAIL, clip(ev), 0.0, None, True, ResultKind.GUARD
        )
    return rule_result(
        key, text, Status.PASSED, OutcomeClass.PASS, clip(ok_text), 1.0, None, True, ResultKind.GUARD
    )


def _tools_text(allowed: Sequence[str]) -> str:
    return "only allowed tools are called: " + (", ".join(allowed) if allowed else "(none)")


def _hosts_text(allowed: Sequence[str]) -> str:
    return "only allowed hosts are contacted: " + (", ".join(allowed) if allowed else "(none)")


def check_allowed_tools(allowed: Sequence[str], evidence: Evidence) -> ExpectationResult:
    key = "rules.allowed_tools"
    text = _tools_text(allowed)
    if not evidence.channels.tool_calls:
        return _unavailable(key, text)
    offenders = [
        f"{_call_ref(c)} {c.name!r} is not allowed"
        for c in evidence.tool_calls
        if not tool_allowed(c.name, allowed)
    ]
    return _verdict(key, text, offenders, f"{len(evidence.tool_calls)} calls, all allowed")


def check_allowed_hosts(allowed: Sequence[str], evidence: Evidence) -> ExpectationResult:
    key = "rules.allowed_hosts"
    text = _hosts_text(allowed)
    if not evidence.channels.tool_calls:
        return _unavailable(key, text)
    offenders = []
    seen = 0
    for c in evidence.tool_calls:
        for h in destinations(c):
            seen += 1
            if not host_allowed(h, allowed):
                offenders.append(f"{_call_ref(c)} {c.name!r} contacted host {h!r}")
    return _verdict(key, text, offenders, f"{seen} network destinations, all allowed")


def run_guard(key: str, allowed: Sequence[str], evidence: Evidence) -> ExpectationResult:
    """Guard ``key`` (``rules.allowed_tools`` or ``rules.allowed_hosts``), whose crash costs
    that guard only, as a validator's or a rule's does: ERROR / evaluator_error, reason
    ``exception`` (grading.md §2), still gating (§5.5), so the case has no verdict unless
    something else failed it, and every other check is graded as usual."""
    tools = key == "rules.allowed_tools"
    try:
        return (check_allowed_tools if tools else check_allowed_hosts)(allowed, evidence)
    except Exception as exc:
        logger.warning("guard %s crashed", key, exc_info=True)
        return rule_result(
            key,
            (_tools_text if tools else _hosts_text)(allowed),
            Status.ERROR,
            OutcomeClass.EVALUATOR_ERROR,
            clip(f"ERROR: guard crashed: {type(exc).__name__}: {exc}"),
            None,
            "exception",
            True,
            ResultKind.GUARD,
        )
