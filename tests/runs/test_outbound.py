"""The outbound client: address guard, pinning, redirects, body cap, timeouts, errors.

Traffic goes to loopback only. Guard tests for private, link-local and metadata
addresses check the decision with ``loopback_only()`` active, so any real connection
attempt to such an address fails the test before a packet leaves.
"""

from __future__ import annotations

import asyncio
import gzip
import socket
import time
import zlib

import pytest
from aiohttp import web

from agentclash_site.lib import outbound
from agentclash_site.lib.outbound import (
    BlockedAddress,
    ConnectionFailed,
    InvalidURL,
    OutboundClient,
    RedirectChangesMethod,
    ResponseTooLarge,
    Timeout,
    TooManyRedirects,
    UndecodableBody,
    address_refusal,
    check_url,
)
from tests.fakes.agent_server import FakeAgent, MiB, hang, huge, ok, raw, redirect, wire
from tests.fakes.network import loopback_only
from tests.processes import free_port


def run(coro):
    return asyncio.run(coro)


def fake_dns(answers: dict[str, list[str]], calls: list[str] | None = None):
    """An injected getaddrinfo: no DNS traffic, answers from the table."""

    async def getaddrinfo(host: str, port: int):
        if calls is not None:
            calls.append(host)
        out = []
        for ip in answers[host]:
            family = socket.AF_INET6 if ":" in ip else socket.AF_INET
            addr = (ip, port, 0, 0) if family == socket.AF_INET6 else (ip, port)
            out.append((family, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", addr))
        return out

    return getaddrinfo


@pytest.fixture
def agent():
    with FakeAgent() as fake:
        yield fake


# --- the decision ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "ip",
    [
        "10.0.0.1",
        "172.16.5.4",
        "192.168.1.10",
        "127.0.0.1",
        "127.8.9.10",
        "::1",
        "fc00::1",
        "fd12:3456::1",
        "169.254.1.1",
        "fe80::1",
        "100.64.0.1",
        "100.127.255.254",
        "192.0.2.1",  # documentation: not globally routable
        "::ffff:10.0.0.1",  # IPv4-mapped
        "2002:0a00:0001::1",  # 6to4 around 10.0.0.1
        "64:ff9b::7f00:1",  # NAT64 around 127.0.0.1
    ],
)
def test_private_addresses_are_refused_unless_the_workspace_allows_them(ip):
    assert address_refusal(ip, allow_private=False) is not None
    assert address_refusal(ip, allow_private=True) is None


@pytest.mark.parametrize(
    "ip",
    [
        "169.254.169.254",
        "fd00:ec2::254",
        "169.254.170.2",
        "::ffff:169.254.169.254",
        "0.0.0.0",
        "::",
        "224.0.0.1",
        "ff02::1",
        "240.0.0.1",
        "255.255.255.255",
    ],
)
def test_metadata_unspecified_multicast_and_reserved_addresses_are_always_refused(ip):
    assert address_refusal(ip, allow_private=False) is not None
    assert address_refusal(ip, allow_private=True) is not None


@pytest.mark.parametrize("ip", ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "100.128.0.1"])
def test_public_addresses_are_allowed(ip):
    assert address_refusal(ip, allow_private=False) is None


@pytest.mark.parametrize(
    "url", ["ftp://example.com/", "file:///etc/passwd", "example.com/path", "http:///nohost"]
)
def test_only_absolute_http_and_https_urls_are_accepted(url):
    with pytest.raises(InvalidURL):
        check_url(url, allow_private=True)


@pytest.mark.parametrize("host", ["metadata.google.internal", "METADATA.google.internal.", "metadata.goog"])
def test_metadata_host_names_are_refused_before_any_lookup(host):
    with pytest.raises(BlockedAddress):
        check_url(f"http://{host}/computeMetadata/v1/", allow_private=True)


def test_a_url_that_passed_is_remembered_and_a_refused_one_is_refused_every_time():
    url = "http://127.0.0.1:8080/v1/chat/completions"
    first = check_url(url, allow_private=True)
    assert check_url(url, allow_private=True) is first  # no second parse
    for _ in range(3):  # the allowance is part of the key: never the cached pass
        with pytest.raises(BlockedAddress):
            check_url(url, allow_private=False)
    with pytest.raises(BlockedAddress):
        check_url("http://metadata.google.internal/x", allow_private=True)
    assert ("http://metadata.google.internal/x", True) not in outbound._CHECKED


# --- the decision inside real requests (transport patched) ------------------------------------


def test_an_endpoint_on_10_0_0_1_is_refused_without_allow_private_and_nothing_connects():
    async def go():
        async with OutboundClient() as client:
            await client.request("POST", "http://10.0.0.1:8080/agent", body=b"{}")

    with loopback_only() as attempts, pytest.raises(BlockedAddress) as info:
        run(go())
    assert "10.0.0.1" in info.value.message
    assert "does not allow private endpoints" in info.value.message
    # the refusal says how to lift it, not only what refused it (the deployment page's Test
    # connection and every failed item show this message)
    assert "manage.py workspace create <slug> --allow-private-endpoints" in info.value.message
    assert attempts == []


def test_a_name_that_resolves_to_a_private_address_is_refused_at_resolution():
    lookups: list[str] = []

    async def go():
        async with OutboundClient(
            getaddrinfo=fake_dns({"agent.example.com": ["10.1.2.3"]}, lookups)
        ) as client:
            await client.request("GET", "http://agent.example.com/")

    with loopback_only() as attempts, pytest.raises(BlockedAddress) as info:
        run(go())
    assert "resolves to 10.1.2.3" in info.value.message
    assert lookups == ["agent.example.com"]
    assert attempts == []


def test_a_name_with_one_private_answer_among_public_ones_is_refused_whole():
    dns = fake_dns({"mixed.example.com": ["8.8.8.8", "169.254.169.254"]})

    async def go():
        async with OutboundClient(getaddrinfo=dns) as client:
            await client.request("GET", "http://mixed.example.com/", allow_private=True)

    with loopback_only() as attempts, pytest.raises(BlockedAddress):
        run(go())
    assert attempts == []


def test_the_client_connects_to_the_address_it_checked_so_rebinding_cannot_switch_it():
    # A rebinding resolver answers a public address first and loopback afterwards. The
    # client must look up once and connect to the checked (public) answer; the patched
    # transport refuses that connect before any packet, which is what we observe.
    answers = iter([["8.8.8.8"], ["127.0.0.1"], ["127.0.0.1"]])
    lookups: list[str] = []

    async def rebinding(host: str, port: int):
        lookups.append(host)
        return await fake_dns({host: next(answers)})(host, port)

    async def go():
        async with OutboundClient(getaddrinfo=rebinding) as client:
            await client.request("GET", "http://rebind.example.com:9/", timeout=5)

    with loopback_only() as attempts, pytest.raises(AssertionError):
        run(go())
    assert lookups == ["rebind.example.com"]
    assert [a[0] for a in attempts] == ["8.8.8.8"]


def test_a_checked_name_is_reached_at_its_resolved_address(agent):
    dns = fake_dns({"local-agent.test": ["127.0.0.1"]})

    async def go(allow_private):
        async with OutboundClient(getaddrinfo=dns) as client:
            return await client.request(
                "GET", f"http://local-agent.test:{agent.port}/agent", allow_private=allow_private
            )

    with loopback_only() as attempts:
        assert run(go(True)).status == 200
        with pytest.raises(BlockedAddress):
            run(go(False))
    assert attempts == []
    assert agent.requests[0].headers["Host"] == f"local-agent.test:{agent.port}"


def test_loopback_is_refused_without_allow_private_and_allowed_with_it(agent):
    async def go(allow_private):
        async with OutboundClient() as client:
            return await client.request("GET", agent.url, allow_private=allow_private)

    with pytest.raises(BlockedAddress):
        run(go(False))
    assert agent.calls == 0
    assert run(go(True)).status == 200
    assert agent.calls == 1


def test_a_redirect_to_the_metadata_address_is_refused_even_with_allow_private(agent):
    agent.route("/agent", redirect("http://169.254.169.254/latest/meta-data/iam/"))

    async def go():
        async with OutboundClient() as client:
            await client.request("POST", agent.url, body=b"{}", allow_private=True)

    with loopback_only() as attempts, pytest.raises(BlockedAddress) as info:
        run(go())
    assert "169.254.169.254" in info.value.message
    assert "cloud metadata" in info.value.message
    assert "private endpoints" not in info.value.message  # the workspace setting would not help
    assert attempts == []
    assert agent.calls == 1


def test_a_redirect_to_a_metadata_host_name_is_refused(agent):
    agent.route("/agent", redirect("http://metadata.google.internal/computeMetadata/v1/"))

    async def go():
        async with OutboundClient(getaddrinfo=fake_dns({})) as client:
            await client.request("GET", agent.url, allow_private=True)

    with loopback_only() as attempts, pytest.raises(BlockedAddress):
        run(go())
    assert attempts == []


def test_an_ipv4_mapped_private_literal_is_refused():
    async def go():
        async with OutboundClient() as client:
            await client.request("GET", "http://[::ffff:192.168.0.1]/")

    with loopback_only() as attempts, pytest.raises(BlockedAddress):
        run(go())
    assert attempts == []


# --- redirects -------------------------------------------------------------------------------


def test_redirects_are_followed_and_recorded(agent):
    agent.route("/old", redirect(agent.url_for("/agent"), status=307))

    async def go():
        async with OutboundClient() as client:
            return await client.request("POST", agent.url_for("/old"), body=b'{"x": 1}', allow_private=True)

    response = run(go())
    assert response.status == 200
    assert response.history == [agent.url_for("/old")]
    assert agent.requests[-1].method == "POST"  # 307 keeps the method and the body
    assert agent.requests[-1].body == b'{"x": 1}'


@pytest.mark.parametrize("status", [301, 302, 303])
def test_a_redirect_that_would_turn_a_post_into_a_get_is_refused(agent, status):
    # Followed as a browser does, the agent got a GET without the body or the signature,
    # and its answer to that was graded.
    agent.route("/old", redirect(agent.url_for("/agent"), status=status))

    async def go():
        async with OutboundClient() as client:
            return await client.request(
                "POST",
                agent.url_for("/old"),
                body=b"{}",
                headers={"Content-Type": "application/json"},
                allow_private=True,
            )

    with pytest.raises(RedirectChangesMethod) as info:
        run(go())
    assert info.value.code == "redirect_changes_method"
    assert f"use {agent.url_for('/agent')} as the URL" in info.value.message
    assert [r.path for r in agent.requests] == ["/old"]


def test_a_303_turns_a_get_into_a_get(agent):
    agent.route("/old", redirect(agent.url_for("/agent"), status=303))

    async def go():
        async with OutboundClient() as client:
            return await client.request("GET", agent.url_for("/old"), allow_private=True)

    run(go())
    assert [(r.method, r.path) for r in agent.requests] == [("GET", "/old"), ("GET", "/agent")]


def test_credentials_are_dropped_when_a_redirect_changes_origin(agent):
    with FakeAgent() as other:
        agent.route("/same", redirect(agent.url_for("/agent"), status=307))
        agent.route("/away", redirect(other.url_for("/agent"), status=307))

        async def go(path):
            async with OutboundClient() as client:
                await client.request(
                    "POST",
                    agent.url_for(path),
                    body=b"{}",
                    headers={"Authorization": "Bearer s3cret", "X-Api-Key": "k"},
                    sensitive_headers=["X-Api-Key"],
                    allow_private=True,
                )

        run(go("/same"))
        assert agent.requests[-1].headers["Authorization"] == "Bearer s3cret"
        run(go("/away"))
        assert "Authorization" not in other.requests[-1].headers
        assert "X-Api-Key" not in other.requests[-1].headers


def test_more_than_five_redirects_is_an_error(agent):
    agent.route("/loop", redirect("/loop"))

    async def go():
        async with OutboundClient() as client:
            await client.request("GET", agent.url_for("/loop"), allow_private=True)

    with pytest.raises(TooManyRedirects):
        run(go())
    assert agent.calls == 6  # the request and five redirects


# --- bodies ---------------------------------------------------------------------------------


@pytest.mark.parametrize("declare_length", [True, False])
def test_a_50_mb_body_is_refused_without_reading_it_all(agent, declare_length):
    agent.default = huge(50 * MiB, declare_length=declare_length)

    async def go():
        async with OutboundClient() as client:
            await client.request("GET", agent.url, allow_private=True, timeout=30)

    started = time.monotonic()
    with pytest.raises(ResponseTooLarge) as info:
        run(go())
    assert "10485760-byte limit" in info.value.message
    agent.wait_idle(timeout=20)
    # The server stopped once the client hung up: far less than 50 MB ever left it.
    assert agent.bytes_sent < 25 * MiB
    assert time.monotonic() - started < 20


def test_the_body_cap_is_configurable(agent):
    agent.default = raw(b"x" * 2000)

    async def go(cap):
        async with OutboundClient(max_body_bytes=cap) as client:
            return await client.request("GET", agent.url, allow_private=True)

    with pytest.raises(ResponseTooLarge):
        run(go(1000))
    assert run(go(2000)).body == b"x" * 2000


def encoded(body: bytes, encoding: str):
    async def behaviour(request, recorded, agent):
        headers = {"Content-Type": "application/json", "Content-Encoding": encoding}
        return web.Response(body=body, headers=headers)

    return behaviour


def fetch(url: str, **options):
    async def go():
        async with OutboundClient(**options) as client:
            return await client.request("POST", url, body=b"{}", allow_private=True)

    return run(go())


@pytest.mark.parametrize(
    ("encoding", "compress"),
    [("gzip", gzip.compress), ("x-gzip", gzip.compress), ("deflate", zlib.compress), ("GZIP", gzip.compress)],
)
def test_a_body_compressed_though_identity_was_asked_for_is_decoded(agent, encoding, compress):
    # A proxy that compresses whatever the client asks: the JSON reply was read as binary
    # and stored as "the response body is not JSON", naming no cause.
    reply = b'{"final_output": "' + b"36 " * 1000 + b'"}'
    agent.default = encoded(compress(reply), encoding)
    response = fetch(agent.url)
    assert agent.requests[0].headers["Accept-Encoding"] == "identity"
    assert response.body == reply


def test_a_compressed_body_is_held_to_the_cap_once_decoded(agent):
    bomb = gzip.compress(b" " * (20 * MiB))  # about 20 kB on the wire
    assert len(bomb) < 100_000
    agent.default = encoded(bomb, "gzip")
    with pytest.raises(ResponseTooLarge) as info:
        fetch(agent.url, max_body_bytes=MiB)
    assert "decompressed" in info.value.message
    agent.default = encoded(gzip.compress(b" " * MiB), "gzip")
    assert len(fetch(agent.url, max_body_bytes=MiB).body) == MiB  # exactly the cap is fine


@pytest.mark.parametrize(
    ("encoding", "body", "says"),
    [
        ("br", b"\x0b\x02\x80{}\x03", "Content-Encoding br"),
        ("gzip, br", gzip.compress(b"{}"), "Content-Encoding gzip, br"),
        ("gzip", b"\x1f\x8b not really gzip", "is not valid gzip"),
        ("gzip", gzip.compress(b'{"final_output": "x"}')[:-12], "is not valid gzip"),
    ],
)
def test_a_body_that_cannot_be_decoded_says_why(agent, encoding, body, says):
    agent.default = encoded(body, encoding)
    with pytest.raises(UndecodableBody) as info:
        fetch(agent.url)
    assert says in info.value.message


# --- time and connection failures ------------------------------------------------------------


def test_a_silent_agent_times_out_within_the_timeout(agent):
    agent.default = hang()

    async def go():
        async with OutboundClient() as client:
            await client.request("GET", agent.url, allow_private=True, timeout=0.3)

    started = time.monotonic()
    with pytest.raises(Timeout):
        run(go())
    assert time.monotonic() - started < 5


def test_a_read_timeout_is_a_timeout(agent):
    agent.default = hang()

    async def go():
        async with OutboundClient() as client:
            await client.request("GET", agent.url, allow_private=True, timeout=10, read_timeout=0.2)

    with pytest.raises(Timeout):
        run(go())


def test_a_refused_connection_is_a_connection_failure():
    port = free_port()  # nothing listens there

    async def go():
        async with OutboundClient() as client:
            await client.request("GET", f"http://127.0.0.1:{port}/", allow_private=True, timeout=5)

    with pytest.raises(ConnectionFailed):
        run(go())


@pytest.mark.parametrize(
    ("reply", "says"),
    [
        (b"HTTP/1.1 abc OK\r\nContent-Length: 2\r\n\r\n{}", "did not answer with valid HTTP"),
        (b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 9000 + b"\r\n\r\n", "did not answer with valid HTTP"),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\nab\r\n",
            "did not answer with valid HTTP",
        ),
        (b'HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n{"final', "cut off"),
    ],
)
def test_a_malformed_reply_is_a_connection_failure_naming_the_cause_without_the_query(agent, reply, says):
    # It read "ClientResponseError: 400, message=..., url='http://...?code=...'": a 400 the
    # agent never sent, and the URL's query (an Azure Functions key, say) in a stored message.
    agent.default = wire(reply)

    async def go():
        async with OutboundClient() as client:
            await client.request("POST", agent.url + "?code=fn-key-123", body=b"{}", allow_private=True)

    with pytest.raises(ConnectionFailed) as caught:
        run(go())
    message = caught.value.message
    assert says in message
    assert "fn-key-123" not in message and "400" not in message
    assert len(message) < 300


# --- sharing -------------------------------------------------------------------------------


def test_one_client_serves_many_concurrent_requests(agent):
    agent.default = ok(lambda r: {"final_output": r.path})

    async def go():
        client = outbound.client_for_loop()
        assert outbound.client_for_loop() is client
        try:
            responses = await asyncio.gather(
                *(client.request("GET", agent.url_for(f"/a/{i}"), allow_private=True) for i in range(40))
            )
        finally:
            await outbound.close_loop_client()
        assert client.closed
        return responses

    responses = run(go())
    assert [r.json()["final_output"] for r in responses] == [f"/a/{i}" for i in range(40)]


def test_each_event_loop_gets_its_own_client():
    async def grab():
        client = outbound.client_for_loop()
        await outbound.close_loop_client()
        return client

    assert run(grab()) is not run(grab())


def test_run_with_client_drives_a_request_from_sync_code(agent):
    response = outbound.run_with_client(lambda c: c.request("GET", agent.url, allow_private=True))
    assert response.status == 200


# --- addresses that carry IPv4 in less common IPv6 forms, and legacy IPv4 spellings --------


@pytest.mark.parametrize(
    "ip",
    [
        "::7f00:1",  # IPv4-compatible (deprecated, ::/96) around 127.0.0.1
        "::10.0.0.1",  # the same form around 10.0.0.1
        "::ffff:0:7f00:1",  # IPv4-translated (SIIT, ::ffff:0:0:0/96) around 127.0.0.1
        "64:ff9b:1::7f00:1",  # local-use NAT64 (RFC 8215) around 127.0.0.1
    ],
)
def test_ipv4_carried_in_compatible_translated_and_local_nat64_forms_is_checked_as_ipv4(ip):
    assert address_refusal(ip, allow_private=False) is not None
    assert address_refusal(ip, allow_private=True) is None


@pytest.mark.parametrize("ip", ["::a9fe:a9fe", "::ffff:0:a9fe:a9fe", "64:ff9b:1::a9fe:a9fe"])
def test_the_metadata_address_inside_those_forms_is_always_refused(ip):
    assert address_refusal(ip, allow_private=True) is not None


@pytest.mark.parametrize(
    "host", ["2130706433", "017700000001", "127.1", "0x7f.1", "0x7f000001", "0177.0.0.1", "10.1"]
)
def test_a_legacy_numeric_ipv4_spelling_is_refused_before_any_lookup(host):
    """``socket`` reads ``2130706433`` or ``127.1`` as 127.0.0.1, and aiohttp (before 3.14)
    sends an all-numeric host straight to the socket without the guarded resolver."""
    for allow_private in (False, True):
        with pytest.raises(InvalidURL):
            check_url(f"http://{host}:8080/agent", allow_private=allow_private)
