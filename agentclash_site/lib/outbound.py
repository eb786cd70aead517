"""Safe outbound HTTP: the one async client for calls to agents and judges.

Why it exists (ARCHITECTURE.md "Safe by default", "Measured facts"):

- **Address guard.** The client resolves every host itself and refuses private (RFC 1918,
  fc00::/7, site-local fec0::/10), loopback, link-local, CGNAT (100.64/10) and other
  non-global addresses unless the caller passes ``allow_private=True`` (the workspace's ``allow_private_endpoints``).
  Cloud metadata addresses and names, unspecified, multicast and reserved addresses are
  refused *always*: no local agent lives there. IPv4 embedded in IPv6 (mapped, 6to4,
  NAT64) is checked as the IPv4 address it carries.
- **No DNS rebinding.** The check happens inside a custom aiohttp resolver, so the
  connector connects to exactly the addresses that were checked; a second lookup that
  could answer differently never happens. The DNS cache is off, and requests with and
  without ``allow_private`` use separate connection pools, so a pooled connection opened
  under one policy is never reused under the other.
- **Redirects** are followed here (at most ``max_redirects``, default 5), and every hop
  goes through the same checks. Credentials are dropped when a redirect changes origin.
  A 301, 302 or 303 answer to a request with a body raises :class:`RedirectChangesMethod`
  instead of following it as a GET without the body (307 and 308 keep method and body).
- **Bounded bodies.** A 2xx response bigger than ``max_body_bytes`` (default 10 MiB) raises
  :class:`ResponseTooLarge` as soon as the declared length or the bytes read so far pass
  the cap; the rest is never read. Of an error status only the first ``ERROR_BODY_BYTES``
  are read, so its status, not its size, says what happened. Compression is not negotiated (``Accept-Encoding:
  identity``); a gzip or deflate body a server sends anyway is decoded within the cap (a
  small compressed body cannot inflate past it), any other encoding is an
  :class:`UndecodableBody`.
- **Typed errors** (:class:`BlockedAddress`, :class:`ResponseTooLarge`, :class:`Timeout`,
  :class:`ConnectionFailed`, ...) so executors map them to attempt categories; one that
  came after the final response's status line carries that ``status`` and the start of the
  ``body`` as far as it was read.

aiohttp was chosen by measurement (bench/http_clients.py and bench/README.md): on a
loopback stub with 16 requests in flight it moved several times more requests per second
than httpx. One :class:`OutboundClient` serves many concurrent requests; use
:func:`client_for_loop` to share one per event loop, and :func:`close_loop_client` (or
``async with OutboundClient()``) before the loop ends.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import re
import socket
import time
import weakref
import zlib
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

log = logging.getLogger(__name__)

DEFAULT_MAX_BODY_BYTES = 10 * 1024 * 1024
DEFAULT_TIMEOUT = 120.0
DEFAULT_CONNECT_TIMEOUT = 10.0
DEFAULT_MAX_REDIRECTS = 5
# What is read of a response that is neither 2xx nor a redirect (an error page): callers keep
# an excerpt of it, so a huge page is cut here, not refused as too large.
ERROR_BODY_BYTES = 64 * 1024
USER_AGENT = "AgentClash/1 (outbound)"

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
# Dropped when a redirect leaves the origin, as browsers and requests do.
CREDENTIAL_HEADERS = ("authorization", "proxy-authorization", "cookie")

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# Refused even with allow_private: nothing a workspace runs lives here.
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean instance metadata
        "169.254.170.2",  # AWS ECS task metadata
        "169.254.170.23",  # AWS EKS Pod Identity agent (hands out the pod's credentials)
        "fd00:ec2::254",  # AWS IMDS over IPv6
        "fd00:ec2::23",  # AWS EKS Pod Identity agent over IPv6
        "fd20:ce::254",  # GCP metadata server over IPv6
        "100.100.100.200",  # Alibaba Cloud metadata
        "168.63.129.16",  # Azure wire server
    )
)
METADATA_HOSTNAMES = frozenset(
    {"metadata.google.internal", "metadata.goog", "metadata", "instance-data", "instance-data.ec2.internal"}
)
_ALWAYS_BLOCKED = tuple(
    (ipaddress.ip_network(net), reason)
    for net, reason in (
        ("0.0.0.0/8", "an unspecified address"),
        ("::/128", "an unspecified address"),
        ("224.0.0.0/4", "a multicast address"),
        ("ff00::/8", "a multicast address"),
        ("240.0.0.0/4", "a reserved address"),
    )
)
# Refused unless allow_private; everything else that is not globally routable joins them.
_PRIVATE = tuple(
    (ipaddress.ip_network(net), reason)
    for net, reason in (
        ("127.0.0.0/8", "a loopback address"),
        ("::1/128", "a loopback address"),
        ("10.0.0.0/8", "a private address"),
        ("172.16.0.0/12", "a private address"),
        ("192.168.0.0/16", "a private address"),
        ("fc00::/7", "a private address"),
        ("169.254.0.0/16", "a link-local address"),
        ("fe80::/10", "a link-local address"),
        # Deprecated (RFC 3879) but still routed inside some networks; Python's is_global
        # calls it global, so it is named here.
        ("fec0::/10", "a site-local address"),
        ("100.64.0.0/10", "a shared (CGNAT) address"),
    )
)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")  # RFC 8215, read with the /96 layout
_IPV4_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")  # SIIT
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")  # deprecated; :: and ::1 are themselves
# What ``inet_aton`` (and so ``socket``) reads as an IPv4 address besides the dotted quad:
# 2130706433, 0x7f.1, 127.1, 0177.0.0.1 all mean 127.0.0.1.
_NUMERIC_HOST = re.compile(r"(?:0x[0-9a-f]*|[0-9]+)(?:\.(?:0x[0-9a-f]*|[0-9]+)){0,3}\.?", re.IGNORECASE)


def url_with_path(base_url: str, path: str) -> str:
    """``base_url`` with ``path`` appended to its path, before its query: an API base URL may
    carry one (Azure OpenAI's ``?api-version=``), and appending to the whole URL put the path
    inside the query. A fragment is never sent, so it is dropped."""
    head = base_url.partition("#")[0]
    head, mark, query = head.partition("?")
    return head.rstrip("/") + path + mark + query


def url_path_endswith(base_url: str, suffix: str) -> bool:
    """Whether the path of ``base_url`` (its query and fragment aside) ends with ``suffix``."""
    return base_url.partition("#")[0].partition("?")[0].rstrip("/").endswith(suffix)


# --- errors --------------------------------------------------------------------------------


class OutboundError(Exception):
    """Base of every failure of an outbound request; ``code`` is stable snake_case."""

    code = "outbound_error"

    def __init__(self, message: str, *, url: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.url = url
        # Set when the failure came after the final response's status line (a body too large,
        # undecodable, cut off or too slow): that status, and the start of what was read of
        # the body (at most ERROR_BODY_BYTES), which callers store like any answer's.
        self.status: int | None = None
        self.body = b""


class InvalidURL(OutboundError):
    """Not an absolute http(s) URL with a host."""

    code = "invalid_url"


class BlockedAddress(OutboundError):
    """The host is, or resolves to, an address the guard refuses."""

    code = "blocked_address"


class TooManyRedirects(OutboundError):
    code = "too_many_redirects"


class RedirectChangesMethod(OutboundError):
    """A 301, 302 or 303 answered a request with a body: following it (as a browser does,
    with a GET) would drop the body, so the call could only ever reach the wrong handler."""

    code = "redirect_changes_method"


class ResponseTooLarge(OutboundError):
    code = "response_too_large"


class UndecodableBody(OutboundError):
    """The body's Content-Encoding is not one the client reads, or it does not decode."""

    code = "undecodable_body"


class Timeout(OutboundError):
    code = "timeout"


class ConnectionFailed(OutboundError):
    """DNS failure, refused or reset connection, TLS failure, malformed HTTP."""

    code = "connection_failed"


class HostNotFound(OutboundError):
    """The name does not exist (the resolver's NXDOMAIN answer): a typo in the URL, not a
    failure that passes, so it is not retried. A resolver that cannot answer now (EAI_AGAIN)
    is a ConnectionFailed."""

    code = "host_not_found"


# getaddrinfo's "no such name" answers (EAI_NODATA: the name exists without an address).
_NO_SUCH_HOST = {socket.EAI_NONAME, getattr(socket, "EAI_NODATA", socket.EAI_NONAME)}


# --- the address guard -------------------------------------------------------------------


def _embedded_ipv4(ip: IPAddress) -> ipaddress.IPv4Address | None:
    if not isinstance(ip, ipaddress.IPv6Address):
        return None
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in _NAT64 or ip in _NAT64_LOCAL or ip in _IPV4_TRANSLATED:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip in _IPV4_COMPATIBLE and int(ip) > 1:
        return ipaddress.IPv4Address(int(ip))
    return None


def address_refusal(ip: IPAddress | str, *, allow_private: bool) -> str | None:
    """Why the guard refuses to connect to ``ip``, or None when it may.

    The single decision used for IP literals in URLs and for every resolved address.
    """
    if isinstance(ip, str):
        ip = ipaddress.ip_address(ip.split("%", 1)[0])
    embedded = _embedded_ipv4(ip)
    if embedded is not None:
        reason = address_refusal(embedded, allow_private=allow_private)
        return f"{reason} (embedded in {ip})" if reason else None
    if ip in METADATA_ADDRESSES:
        return "a cloud metadata address"
    for net, reason in _ALWAYS_BLOCKED:
        if ip in net:
            return reason
    if allow_private:
        return None
    for net, reason in _PRIVATE:
        if ip in net:
            return reason
    if not ip.is_global:
        return "not a globally routable address"
    return None


def hostname_refusal(host: str) -> str | None:
    """Names refused before any lookup (cloud metadata services)."""
    if host.lower().rstrip(".") in METADATA_HOSTNAMES:
        return "a cloud metadata host name"
    return None


def _parse_ip(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return None


def check_url(url: str | URL, *, allow_private: bool) -> URL:
    """Validate scheme and host, and check a literal IP or a refused name, before any I/O.

    Host names that need DNS are checked by the resolver at connect time. The check is a
    pure function of the URL text, so the URLs that passed are remembered (a run calls one
    endpoint thousands of times); a refused URL is checked again every time.
    """
    if isinstance(url, str):
        key = (url, allow_private)
        passed = _CHECKED.get(key)
        if passed is None:
            passed = _check_url(url, allow_private=allow_private)
            if len(_CHECKED) >= _CHECKED_SIZE:
                _CHECKED.clear()
            _CHECKED[key] = passed
        return passed
    return _check_url(url, allow_private=allow_private)


_CHECKED: dict[tuple[str, bool], URL] = {}
_CHECKED_SIZE = 256


def _check_url(url: str | URL, *, allow_private: bool) -> URL:
    try:
        parsed = url if isinstance(url, URL) else URL(url)
    except (ValueError, TypeError) as exc:
        raise InvalidURL(f"not a valid URL: {exc}", url=str(url)) from None
    if parsed.scheme not in ("http", "https"):
        raise InvalidURL(f"only http and https URLs are allowed, not {parsed.scheme or 'no scheme'!r}")
    host = parsed.raw_host
    if not host:
        raise InvalidURL("the URL has no host", url=str(parsed))
    reason = hostname_refusal(host)
    if reason is not None:
        raise BlockedAddress(_blocked_message(host, reason), url=_safe_url(parsed))
    ip = _parse_ip(host)
    if ip is None and _NUMERIC_HOST.fullmatch(host):
        # The socket layer would read it as an IPv4 address the guard never saw; older
        # aiohttp even skips the resolver (and so the guard) for an all-numeric host.
        raise InvalidURL(
            f"{host!r} is not a canonical IPv4 address: write it as four decimal numbers (a.b.c.d)",
            url=_safe_url(parsed),
        )
    if ip is not None:
        reason = address_refusal(ip, allow_private=allow_private)
        if reason is not None:
            raise BlockedAddress(_blocked_message(host, reason, ip), url=_safe_url(parsed))
    return parsed


def _blocked_message(host: str, reason: str, ip: IPAddress | str | None = None) -> str:
    """The refusal, with a hint when the workspace setting would have allowed it."""
    hint = ""
    if ip is not None and address_refusal(ip, allow_private=True) is None:
        hint = (
            " (the workspace does not allow private endpoints; an administrator allows them with"
            " `python manage.py workspace create <slug> --allow-private-endpoints`)"
        )
    return f"refused to connect to {host}: {reason}{hint}"


# Names that reach loopback however the machine's resolver is set up (RFC 6761 §6.3).
LOOPBACK_HOSTNAMES = frozenset({"localhost"})


@dataclass(frozen=True, slots=True)
class KnownRefusal:
    """Why the guard will refuse every call to a URL, read from the URL's text alone."""

    host: str
    what: str  # a predicate of the host: "is a loopback address", "resolves to ..."
    private: bool  # refused only because the workspace does not allow private endpoints


def known_refusal(url: str, *, allow_private: bool) -> KnownRefusal | None:
    """The guard's verdict on ``url`` when its host alone decides it: an IP literal in any
    spelling the socket layer reads, a cloud metadata name, ``localhost``. None otherwise.

    For warnings shown before any call (the deployment pages); :func:`check_url` and the
    resolver are what refuse. Other names are not looked up here: a lookup is slow (seconds
    when DNS is slow) and may answer differently at call time, and the guard checks the
    addresses the call itself resolves. A URL that :func:`check_url` refuses for another
    reason than its host (scheme, no host) gives None: saving refuses those already.
    """
    try:
        parsed = URL(url)
    except (ValueError, TypeError):
        return None
    host = parsed.raw_host
    if parsed.scheme not in ("http", "https") or not host:
        return None
    reason = hostname_refusal(host)
    if reason is not None:
        return KnownRefusal(host, f"is {reason}", private=False)
    ip = _parse_ip(host)
    if ip is not None:
        ips, verb = [ip], "is"
    elif host.rstrip(".") in LOOPBACK_HOSTNAMES:  # raw_host is lowercase
        # What getaddrinfo answers for it; the resolver checks each with address_refusal.
        ips, verb = [ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1")], "resolves to"
    elif _NUMERIC_HOST.fullmatch(host):  # check_url's InvalidURL, whatever the workspace
        what = "is not a canonical IPv4 address: write it as four decimal numbers (a.b.c.d)"
        return KnownRefusal(host, what, private=False)
    else:
        return None
    for ip in ips:
        reason = address_refusal(ip, allow_private=allow_private)
        if reason is not None:
            private = address_refusal(ip, allow_private=True) is None
            embedded = _embedded_ipv4(ip)
            if embedded is not None:  # the guard judges the IPv4 address it carries
                reason = address_refusal(embedded, allow_private=allow_private)
                return KnownRefusal(host, f"carries {embedded}, {reason}", private=private)
            return KnownRefusal(host, f"{verb} {reason}", private=private)
    return None


def _safe_url(url: URL) -> str:
    """The URL without query, fragment or credentials: safe for logs and messages."""
    return str(url.with_query(None).with_fragment(None).with_user(None))


GetAddrInfo = Callable[[str, int], Awaitable[list[tuple[Any, ...]]]]


class GuardedResolver(AbstractResolver):
    """Resolves with getaddrinfo and refuses the host if any address is refused.

    aiohttp connects to exactly the addresses returned here, which is what defeats DNS
    rebinding: the checked answer is the one used. ``getaddrinfo`` can be injected by tests.
    """

    def __init__(self, *, allow_private: bool, getaddrinfo: GetAddrInfo | None = None) -> None:
        self.allow_private = allow_private
        self._getaddrinfo = getaddrinfo

    async def _lookup(self, host: str, port: int, family: socket.AddressFamily) -> list[tuple[Any, ...]]:
        try:
            if self._getaddrinfo is not None:
                return list(await self._getaddrinfo(host, port))
            loop = asyncio.get_running_loop()
            return await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, family=family)
        except socket.gaierror as exc:
            if exc.errno in _NO_SUCH_HOST:
                raise HostNotFound(
                    f"{host} does not resolve (no such host): check the URL's host name"
                ) from None
            raise

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        reason = hostname_refusal(host)
        if reason is not None:
            raise BlockedAddress(_blocked_message(host, reason))
        infos = await self._lookup(host, port, family)
        results: list[ResolveResult] = []
        for fam, _, proto, _, address in infos:
            if fam == socket.AF_INET6 and len(address) > 3 and address[3]:
                # A scoped (link-local) IPv6 address: only reachable with allow_private.
                ip_text = f"{address[0].split('%', 1)[0]}%{address[3]}"
            else:
                ip_text = address[0]
            reason = address_refusal(ip_text, allow_private=self.allow_private)
            if reason is not None:
                # Refuse the whole name, not just this address: a name that mixes public
                # and private answers is exactly what a rebinding attack looks like.
                raise BlockedAddress(_blocked_message(host, f"resolves to {ip_text}, {reason}", ip_text))
            results.append(
                {
                    "hostname": host,
                    "host": ip_text,
                    "port": address[1] if len(address) > 1 else port,
                    "family": fam,
                    "proto": proto,
                    "flags": socket.AI_NUMERICHOST | socket.AI_NUMERICSERV,
                }
            )
        if not results:
            raise ConnectionFailed(f"could not resolve {host}")
        return results

    async def close(self) -> None:
        return None


# --- responses -------------------------------------------------------------------------


@dataclass(slots=True)
class OutboundResponse:
    status: int
    headers: CIMultiDictProxy[str]
    body: bytes
    url: str  # the final URL, without query or credentials
    history: list[str] = field(default_factory=list)  # redirect hops before it, same form
    elapsed_ms: float = 0.0

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def content_type(self) -> str:
        return self.headers.get("Content-Type", "").split(";", 1)[0].strip().lower()

    def text(self, errors: str = "replace") -> str:
        return self.body.decode("utf-8", errors=errors)

    def json(self) -> Any:
        """The body as JSON; raises ``ValueError`` when it is not, when it is not UTF-8 text
        (``json.loads`` of bytes also guesses UTF-16 and UTF-32; JSON between systems is UTF-8,
        RFC 8259 §8.1, a byte order mark ignored), or when it is nested too deeply to parse
        (``json`` raises ``RecursionError`` then: one such agent reply took down a whole lane
        dispatcher)."""
        try:
            return json.loads(self.body.decode("utf-8-sig"))
        except RecursionError:
            raise ValueError("the body's JSON is nested too deeply to read") from None


# --- the client ---------------------------------------------------------------------------


class OutboundClient:
    """An aiohttp-based client with the guard, the redirect loop and the body cap.

    Safe to share between any number of concurrent requests on one event loop.
    """

    def __init__(
        self,
        *,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        max_redirects: int = DEFAULT_MAX_REDIRECTS,
        pool_limit: int = 256,
        user_agent: str = USER_AGENT,
        getaddrinfo: GetAddrInfo | None = None,
    ) -> None:
        self.connect_timeout = connect_timeout
        self.max_body_bytes = max_body_bytes
        self.max_redirects = max_redirects
        self.pool_limit = pool_limit
        self.user_agent = user_agent
        self._getaddrinfo = getaddrinfo
        self._sessions: dict[bool, aiohttp.ClientSession] = {}
        self._closed = False

    async def __aenter__(self) -> OutboundClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def closed(self) -> bool:
        return self._closed

    async def close(self) -> None:
        self._closed = True
        sessions, self._sessions = list(self._sessions.values()), {}
        for session in sessions:
            await session.close()

    def _session(self, allow_private: bool) -> aiohttp.ClientSession:
        if self._closed:
            raise RuntimeError("this OutboundClient is closed")
        session = self._sessions.get(allow_private)
        if session is None:
            connector = aiohttp.TCPConnector(
                resolver=GuardedResolver(allow_private=allow_private, getaddrinfo=self._getaddrinfo),
                use_dns_cache=False,
                limit=self.pool_limit,
                limit_per_host=0,
            )
            session = aiohttp.ClientSession(
                connector=connector,
                auto_decompress=False,
                trust_env=False,  # never route through an environment proxy: it would bypass the guard
                cookie_jar=aiohttp.DummyCookieJar(),
                headers={"User-Agent": self.user_agent, "Accept-Encoding": "identity"},
            )
            self._sessions[allow_private] = session
        return session

    async def request(
        self,
        method: str,
        url: str,
        *,
        body: bytes | None = None,
        json_body: Any = None,
        headers: Mapping[str, str] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        connect_timeout: float | None = None,
        read_timeout: float | None = None,
        allow_private: bool = False,
        max_body_bytes: int | None = None,
        sensitive_headers: Iterable[str] = (),
    ) -> OutboundResponse:
        """Send one request, following redirects; returns the final response.

        ``timeout`` bounds the whole exchange (every hop and the body); ``connect_timeout``
        each TCP/TLS connect; ``read_timeout`` (default: none beyond ``timeout``) the gap
        between two reads. ``sensitive_headers`` are dropped, like ``Authorization``, when
        a redirect leaves the origin. Raises an :class:`OutboundError` subclass.
        """
        if json_body is not None:
            if body is not None:
                raise ValueError("pass body or json_body, not both")
            body = json.dumps(json_body).encode()
        send_headers = CIMultiDict(headers or {})
        if json_body is not None:
            send_headers.setdefault("Content-Type", "application/json")
        cap = self.max_body_bytes if max_body_bytes is None else max_body_bytes
        started = time.perf_counter()
        reading = _Reading()
        try:
            async with asyncio.timeout(timeout):
                response = await self._follow(
                    method.upper(),
                    url,
                    body=body,
                    headers=send_headers,
                    allow_private=allow_private,
                    cap=cap,
                    connect_timeout=connect_timeout or self.connect_timeout,
                    read_timeout=read_timeout,
                    sensitive={h.lower() for h in sensitive_headers} | set(CREDENTIAL_HEADERS),
                    reading=reading,
                )
        except TimeoutError:
            exc = Timeout(f"no complete response within {timeout:g}s", url=_loggable(url))
            raise reading.mark(exc) from None
        except OutboundError as exc:
            reading.mark(exc)
            raise
        response.elapsed_ms = (time.perf_counter() - started) * 1000.0
        return response

    async def post_json(self, url: str, payload: Any, **kwargs: Any) -> OutboundResponse:
        return await self.request("POST", url, json_body=payload, **kwargs)

    async def _follow(
        self,
        method: str,
        url: str,
        *,
        body: bytes | None,
        headers: CIMultiDict[str],
        allow_private: bool,
        cap: int,
        connect_timeout: float,
        read_timeout: float | None,
        sensitive: set[str],
        reading: _Reading,
    ) -> OutboundResponse:
        session = self._session(allow_private)
        client_timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=connect_timeout, sock_read=read_timeout
        )
        history: list[str] = []
        current = check_url(url, allow_private=allow_private)
        for _hop in range(self.max_redirects + 1):
            if log.isEnabledFor(logging.DEBUG):
                log.debug("outbound %s %s", method, _safe_url(current))
            try:
                async with session.request(
                    method,
                    current,
                    data=body,
                    headers=headers,
                    allow_redirects=False,
                    timeout=client_timeout,
                ) as resp:
                    location = resp.headers.get("Location")
                    if resp.status in REDIRECT_STATUSES and location:
                        resp.close()  # do not read (or drain) a redirect's body
                    else:
                        reading.status = resp.status
                        if 200 <= resp.status < 300:
                            payload = await _read_capped(resp, cap, current, buf=reading.body)
                        else:  # an error page: its start says why, and its size is no fault of the call
                            payload = await _read_capped(
                                resp, min(cap, ERROR_BODY_BYTES), current, cut=True, buf=reading.body
                            )
                        return OutboundResponse(
                            status=resp.status,
                            headers=CIMultiDictProxy(CIMultiDict(resp.headers)),
                            body=payload,
                            url=_safe_url(current),
                            history=history,
                        )
            except OutboundError:
                raise
            except aiohttp.ConnectionTimeoutError:
                raise Timeout(
                    f"could not connect to {current.raw_host} within {connect_timeout:g}s",
                    url=_safe_url(current),
                ) from None
            except aiohttp.SocketTimeoutError:
                raise Timeout(
                    f"{current.raw_host} sent nothing for {read_timeout:g}s", url=_safe_url(current)
                ) from None
            except TimeoutError:
                raise
            except aiohttp.InvalidURL as exc:
                raise InvalidURL(f"invalid URL: {exc}", url=_safe_url(current)) from None
            except aiohttp.ClientConnectorDNSError:
                raise ConnectionFailed(
                    f"could not resolve {current.raw_host}", url=_safe_url(current)
                ) from None
            except aiohttp.ClientError as exc:
                raise ConnectionFailed(_describe(exc, current), url=_safe_url(current)) from None
            except OSError as exc:
                raise ConnectionFailed(f"{current.raw_host}: {exc}", url=_safe_url(current)) from None

            history.append(_safe_url(current))
            try:
                target = current.join(URL(location))
            except ValueError:
                raise InvalidURL(f"redirect to an invalid URL {location!r}", url=_safe_url(current)) from None
            target = check_url(target, allow_private=allow_private)
            if body is not None and resp.status in (301, 302, 303):
                raise RedirectChangesMethod(
                    f"{_safe_url(current)} answered {method} with {resp.status} to {_safe_url(target)}; "
                    "following it would turn the request into a GET without its body: "
                    f"use {_safe_url(target)} as the URL",
                    url=history[0],
                )
            if resp.status == 303:
                method = "GET"
            if target.origin() != current.origin():
                for name in list(headers.keys()):
                    if name.lower() in sensitive:
                        headers.popall(name, None)
            current = target
        raise TooManyRedirects(
            f"more than {self.max_redirects} redirects (last to {_safe_url(current)})", url=history[0]
        )


# Content-Encoding -> zlib window bits: 31 reads gzip, 47 a zlib stream or gzip (servers
# label either as deflate).
_DECODERS = {"gzip": 31, "x-gzip": 31, "deflate": 47}


@dataclass(slots=True)
class _Reading:
    """The final response as far as it came: its status once its head is in, and its body
    as read so far (the buffer ``_read_capped`` fills). A redirect's hop never sets them."""

    status: int | None = None
    body: bytearray = field(default_factory=bytearray)

    def mark(self, exc: OutboundError) -> OutboundError:
        """``exc`` with the status and the start of the body, when it came after the head."""
        if self.status is not None and exc.status is None:
            exc.status = self.status
            exc.body = bytes(self.body[:ERROR_BODY_BYTES])
        return exc


async def _read_capped(
    resp: aiohttp.ClientResponse, cap: int, url: URL, *, cut: bool = False, buf: bytearray | None = None
) -> bytes:
    """The body, decoded; over ``cap`` bytes :class:`ResponseTooLarge`, or with ``cut`` its
    first ``cap`` bytes (the rest is never read). ``buf`` receives the bytes as they are read
    (what the caller shows of a body that fails on the way)."""
    declared = resp.content_length
    if declared is not None and declared > cap and not cut:
        resp.close()
        raise ResponseTooLarge(
            f"the response declares {declared} bytes, over the {cap}-byte limit", url=_safe_url(url)
        )
    encoding = resp.headers.get("Content-Encoding", "").strip().lower()
    if buf is None:
        buf = bytearray()
    try:
        decoder = _decoder(encoding) if encoding not in ("", "identity") else None
        async for chunk in resp.content.iter_chunked(64 * 1024):
            if decoder is None:
                buf += chunk
            else:
                _inflate(decoder, chunk, buf, cap)
            if len(buf) > cap:
                raise ResponseTooLarge(f"the response is over the {cap}-byte limit", url=_safe_url(url))
        if decoder is not None:
            _inflate(decoder, decoder.flush(), buf, cap)
            if not decoder.eof:
                raise zlib.error("the stream ends early")
    except (OutboundError, zlib.error) as exc:
        resp.close()  # drops the connection: the rest of the body is never read
        if cut:  # an error page cut at the limit, or as far as it decodes
            return bytes(buf[:cap])
        if isinstance(exc, zlib.error):
            message = f"the {encoding}-encoded response is not valid {encoding}: {exc}"
            raise UndecodableBody(message, url=_safe_url(url)) from None
        exc.url = _safe_url(url)
        raise
    return bytes(buf)


def _decoder(encoding: str) -> Any:
    """A decoder for a body compressed though the client asked for ``identity`` (a proxy
    that compresses anyway), or :class:`UndecodableBody` for an encoding it cannot read."""
    if encoding not in _DECODERS:
        raise UndecodableBody(
            f"the response has Content-Encoding {encoding}, which AgentClash does not decode "
            "(it asks for identity, and reads gzip or deflate)"
        )
    return zlib.decompressobj(wbits=_DECODERS[encoding])


def _inflate(decoder: Any, data: bytes, buf: bytearray, cap: int) -> None:
    """Decode ``data`` into ``buf``, never past ``cap`` + 1 bytes (a small compressed body
    can inflate a thousandfold)."""
    while data:
        buf += decoder.decompress(data, cap + 1 - len(buf))
        if len(buf) > cap:
            raise ResponseTooLarge(f"the response is over the {cap}-byte limit once decompressed")
        data = decoder.unconsumed_tail


def _describe(exc: aiohttp.ClientError, url: URL) -> str:
    """The failure in words, for a stored attempt: never the URL's query (aiohttp's own
    messages carry the whole URL) nor aiohttp's internal 400 for a reply it cannot parse."""
    if isinstance(exc, aiohttp.ClientConnectorError):
        return f"cannot connect to {url.raw_host}:{url.port}: {exc.os_error.strerror or exc.os_error}"
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return f"{url.raw_host} closed the connection without a response"
    if isinstance(exc, aiohttp.ClientPayloadError):
        # aiohttp's parser error (Content-Length or chunking not satisfied) is the cause.
        reason = getattr(exc.__cause__, "message", None) or exc
        return f"the response from {url.raw_host} was cut off: {_short(reason)}"
    if isinstance(exc, aiohttp.ClientResponseError):  # never a status: raise_for_status is not used
        return f"{url.raw_host} did not answer with valid HTTP: {_short(exc.message)}"
    return _short(f"{type(exc).__name__}: {exc}".replace(str(url), _safe_url(url)))


def _short(text: object, limit: int = 160) -> str:
    """One line of at most ``limit`` characters."""
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _loggable(url: str) -> str:
    try:
        return _safe_url(URL(url))
    except (ValueError, TypeError):
        return "<invalid URL>"


# --- one client per event loop -------------------------------------------------------------

_loop_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, OutboundClient] = (
    weakref.WeakKeyDictionary()
)


def client_for_loop(**options: Any) -> OutboundClient:
    """The shared client of the running event loop (created on first use).

    ``options`` apply only when the client is created. Await :func:`close_loop_client`
    before the loop ends (``asyncio.run`` does not close it for you).
    """
    loop = asyncio.get_running_loop()
    client = _loop_clients.get(loop)
    if client is None or client.closed:
        client = OutboundClient(**options)
        _loop_clients[loop] = client
    return client


async def close_loop_client() -> None:
    client = _loop_clients.pop(asyncio.get_running_loop(), None)
    if client is not None:
        await client.close()


T = TypeVar("T")


def run_with_client(fn: Callable[[OutboundClient], Awaitable[T]], **options: Any) -> T:
    """Run ``fn(client)`` to completion from synchronous code (a view, a command).

    A dedicated client is opened and closed around the call, whatever loop runs it.
    """
    from asgiref.sync import async_to_sync

    async def runner() -> T:
        async with OutboundClient(**options) as client:
            return await fn(client)

    return async_to_sync(runner)()
