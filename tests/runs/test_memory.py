"""runs.memory: glibc's arena cap and malloc_trim where glibc is, no-ops elsewhere."""

from __future__ import annotations

import platform
import sys

import pytest

from runs import memory


@pytest.fixture(autouse=True)
def _fresh_lookup():
    memory._glibc.cache_clear()
    yield
    memory._glibc.cache_clear()


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc", reason="glibc only"
)
def test_on_glibc_both_calls_apply():
    assert memory.limit_malloc_arenas() is True
    blocks = [bytearray(64 * 1024) for _ in range(2000)]  # ~128 MiB through malloc
    del blocks
    assert isinstance(memory.release_free_memory(), bool)


def test_elsewhere_they_do_nothing(monkeypatch):
    monkeypatch.setattr(memory.sys, "platform", "darwin")
    assert memory.limit_malloc_arenas() is False
    assert memory.release_free_memory() is False
