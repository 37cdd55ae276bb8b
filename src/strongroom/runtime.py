"""Small facts about now, here and who: wall-clock milliseconds, ISO-8601 renderings, the operator's
name, whether a process lives; and handing freed heap back to the OS. One definition each, for every area
(audit records, receipts, stores)."""

from __future__ import annotations

import ctypes
import functools
import getpass
import os
import socket
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


def now_ms() -> int:
    """Wall-clock epoch milliseconds (Kafka's unit for timestamps)."""
    return int(time.time() * 1000)


def iso_utc(ms: int, *, timespec: str = "seconds", zulu: bool = False) -> str:
    """``ms`` as ISO-8601 UTC (``…+00:00``; ``zulu``: ``…Z``, as erasure receipts print it)."""
    text = datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec=timespec)
    return text.replace("+00:00", "Z") if zulu else text


def user_name() -> str:
    """The login name, or ``unknown`` (some containers have none)."""
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 - KeyError/OSError when the uid has no passwd entry, and the like
        return "unknown"


def operator_name() -> str:
    """``user@host`` of whoever runs the command (recorded with operations and lost-key declarations)."""
    return f"{user_name()}@{socket.gethostname()}"


def pid_alive(pid: int) -> bool:
    """Whether a process with this id runs (one owned by another user counts; a zombie does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie still answers kill(0); read its state to tell.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][:1]
    except (OSError, IndexError):
        return True
    return state != "Z"


@functools.cache
def _malloc_trim() -> Any:
    try:
        return ctypes.CDLL(None).malloc_trim  # glibc
    except (OSError, AttributeError):
        return None  # another C library: nothing to do


def release_free_heap() -> None:
    """Give the pages of freed heap memory back to the OS (glibc's ``malloc_trim``; a no-op elsewhere).

    glibc keeps what a thread freed in that thread's arena, so a background thread that allocates a lot
    for a moment (SQLite's in-memory journal during a large transaction) keeps the peak resident for good.
    """
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
