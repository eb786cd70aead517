"""Outbound guard gaps found by the security sweep (no traffic: the decision and a fake resolver)."""

from __future__ import annotations

import asyncio
import socket

import pytest

from agentclash_site.lib.outbound import (
    BlockedAddress,
    GuardedResolver,
    address_refusal,
    check_url,
    known_refusal,
)


@pytest.mark.parametrize("ip", ["fec0::1", "fed0:1234::5", "feff:ffff::1"])
def test_a_deprecated_site_local_ipv6_address_is_private(ip):
    # fec0::/10 (RFC 3879 deprecated it, networks still route it internally) is not in
    # Python's list of private networks, so ``is_global`` said True and the guard let it by.
    assert address_refusal(ip, allow_private=False) == "a site-local address"
    assert address_refusal(ip, allow_private=True) is None
    with pytest.raises(BlockedAddress):
        check_url(f"http://[{ip}]:8080/agent", allow_private=False)
    refusal = known_refusal(f"http://[{ip}]/agent", allow_private=False)
    assert refusal is not None and refusal.private


def test_a_name_that_resolves_to_a_site_local_address_is_refused_at_resolution():
    async def fake_getaddrinfo(host: str, port: int) -> list[tuple]:
        return [(socket.AF_INET6, socket.SOCK_STREAM, 6, "", ("fec0::7", port, 0, 0))]

    resolver = GuardedResolver(allow_private=False, getaddrinfo=fake_getaddrinfo)
    with pytest.raises(BlockedAddress, match="site-local"):
        asyncio.run(resolver.resolve("agent.example.com", 443))


@pytest.mark.parametrize("ip", ["fd20:ce::254", "169.254.170.23", "fd00:ec2::23", "::ffff:169.254.170.23"])
def test_other_cloud_credential_endpoints_are_refused_even_with_allow_private(ip):
    # GCP's IPv6 metadata server and the EKS Pod Identity agent hand out credentials as the
    # listed metadata addresses do; as unique-local / link-local addresses they passed once a
    # workspace allowed private endpoints.
    assert address_refusal(ip, allow_private=True) is not None
    assert "cloud metadata" in address_refusal(ip, allow_private=True)
