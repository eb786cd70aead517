"""Worker memory hygiene on glibc (Linux): fewer malloc arenas, free heap returned to the OS.

A dispatcher process runs three threads (the dispatcher, its event loop, the writer); glibc
gives each thread that allocates its own malloc arena (up to 8 per core), and memory freed in
an arena mostly stays in the process (RSS) as fragments. ``limit_malloc_arenas`` (at worker
process start, before those threads exist) caps the arenas; ``release_free_memory`` (after a
dispatch slice, after scoring) hands the free heap back with ``malloc_trim``. Elsewhere (musl,
macOS) both do nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import sys
from functools import cache

logger = logging.getLogger(__name__)

M_ARENA_MAX = -8  # glibc malloc.h
M_MMAP_THRESHOLD = -3
ARENAS = 2
# Blocks from this size up are mmap'ed and unmapped on free. Setting it also stops glibc
# raising the threshold (up to 32 MiB) after large frees, which put the writer's multi-MB JSON
# batches on the heap, where they fragment it.
MMAP_THRESHOLD = 256 * 1024


@cache
def _glibc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    name = ctypes.util.find_library("c") or "libc.so.6"
    try:
        libc = ctypes.CDLL(name)
    except OSError:
        return None
    if not (hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim")):
        return None  # not glibc
    return libc


def limit_malloc_arenas(arenas: int = ARENAS) -> bool:
    """Cap glibc's malloc arenas for this process; True when applied."""
    libc = _glibc()
    if libc is None:
        return False
    ok = bool(libc.mallopt(M_ARENA_MAX, arenas))
    if not ok:
        logger.warning("mallopt(M_ARENA_MAX, %d) was refused", arenas)
    if not libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD):
        logger.warning("mallopt(M_MMAP_THRESHOLD, %d) was refused", MMAP_THRESHOLD)
        ok = False
    return ok


def release_free_memory() -> bool:
    """Return the free heap to the OS (``malloc_trim(0)``); True when memory was released."""
    libc = _glibc()
    if libc is None:
        return False
    return bool(libc.malloc_trim(0))
