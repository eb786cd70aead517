"""Make any non-loopback connection attempt fail the test.

The tests of the outbound address guard check the guard's *decision*: they must never
send a packet to a private, link-local or metadata address, not even by accident when
the guard has a bug. Inside ``loopback_only()`` every connect (asyncio's ``sock_connect``,
which aiohttp uses through aiohappyeyeballs, and plain ``socket.connect``) to an address
that is not 127.0.0.0/8 or ::1 is refused with an ``AssertionError`` before any packet
leaves, and recorded in the yielded list, so the test can also assert it stayed empty.

    with loopback_only() as attempts:
        ...
    assert attempts == []
"""

from __future__ import annotations

import ipaddress
import socket
from asyncio import selector_events
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock


def _is_loopback(address: Any) -> bool:
    if isinstance(address, tuple) and address:
        try:
            return ipaddress.ip_address(str(address[0]).split("%", 1)[0]).is_loopback
        except ValueError:
            return False
    return isinstance(address, (str, bytes))  # AF_UNIX paths are local


@contextmanager
def loopback_only() -> Iterator[list[Any]]:
    attempts: list[Any] = []
    real_sock_connect = selector_events.BaseSelectorEventLoop.sock_connect
    real_connect = socket.socket.connect

    async def sock_connect(self: Any, sock: socket.socket, address: Any) -> Any:
        if not _is_loopback(address):
            attempts.append(address)
            raise AssertionError(f"test tried to connect to non-loopback {address!r}")
        return await real_sock_connect(self, sock, address)

    def connect(self: socket.socket, address: Any) -> Any:
        if not _is_loopback(address):
            attempts.append(address)
            raise AssertionError(f"test tried to connect to non-loopback {address!r}")
        return real_connect(self, address)

    with (
        mock.patch.object(selector_events.BaseSelectorEventLoop, "sock_connect", sock_connect),
        mock.patch.object(socket.socket, "connect", connect),
    ):
        yield attempts
