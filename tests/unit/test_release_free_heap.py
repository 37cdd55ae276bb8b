"""A thread's freed heap goes back to the OS (keys/store.py: the in-memory journal of a large transaction)."""

from __future__ import annotations

import ctypes
import threading

import pytest

from strongroom.runtime import _malloc_trim, release_free_heap


def rss_mib() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@pytest.mark.skipif(_malloc_trim() is None, reason="not glibc: nothing to release")
def test_what_a_thread_freed_leaves_the_resident_set() -> None:
    def churn() -> None:
        # 120 MiB of page-sized blocks from the thread's own arena (under malloc's mmap threshold), then freed
        libc = ctypes.CDLL(None)
        libc.malloc.restype = ctypes.c_void_p
        blocks = [libc.malloc(4096) for _ in range(30_720)]
        for block in blocks:
            ctypes.memset(block, 1, 4096)
        # one block at each end stays allocated, so free() alone cannot shrink the arena
        for block in blocks[1:-1]:
            libc.free(ctypes.c_void_p(block))
        churn.kept = blocks[0], blocks[-1]  # type: ignore[attr-defined]

    worker = threading.Thread(target=churn)
    worker.start()
    worker.join()
    held = rss_mib()
    release_free_heap()
    released = held - rss_mib()
    libc = ctypes.CDLL(None)
    for block in churn.kept:  # type: ignore[attr-defined]
        libc.free(ctypes.c_void_p(block))
    assert released > 80, f"only {released:.1f} MiB of the 120 MiB freed went back to the OS"
