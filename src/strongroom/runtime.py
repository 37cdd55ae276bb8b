"""Small facts about now, here and who: wall-clock milliseconds, ISO-8601 renderings, the operator's
name, whether a process lives; handing freed heap back to the OS, and the garbage collector of a process
that holds a large heap or long-lived caches. One definition each, for every area (audit records, receipts,
stores, pipelines)."""

from __future__ import annotations

import ctypes
import functools
import gc
import getpass
import os
import socket
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

try:  # built by `make` from _collector.c; without it cache entries stay in the collector's passes
    from strongroom._collector import untrack as _untrack
except ImportError:  # pragma: no cover - an install without the project's build

    def _untrack(obj: Any) -> Any:
        return obj


T = TypeVar("T")


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


#: The collector's thresholds while a large heap is held: a young pass every 50,000 allocations instead of
#: 700, and older passes as rarely as the defaults' proportions allow (:class:`LargeHeapCollector`).
LARGE_HEAP_GC_THRESHOLDS = (50_000, 20, 100)


class LargeHeapCollector:
    """Python's cyclic garbage collector, made cheap while a process holds a large, long-lived heap.

    A pipeline's driver holds Spark's and py4j's objects, a key table and a key cache of up to 100,000
    subjects, and answers the executors' key requests by allocating a few objects per subject. With
    the default thresholds (700, 10, 10) the collector runs a young pass every 700 allocations and, as the
    heap grows, full passes over all of it: about a third of the key service's time when a pipeline
    starts on 100,000 subjects (docs/benchmarks.md, "The encrypt side: three A/B measurements").

    :meth:`hold` collects once, freezes what is alive then (the collector no longer walks it) and raises
    the thresholds; releasing the :class:`HeapHold` it returns puts the thresholds back and unfreezes, so
    what the process frees afterwards is collected as before. Holds nest (several jobs in one process):
    the first applies, the last release restores. Reference counting frees every object without a cycle
    as soon as it is unused either way; only cyclic garbage waits longer.
    """

    _lock = threading.Lock()
    _holders = 0
    _previous: tuple[int, int, int] | None = None

    @classmethod
    def hold(cls) -> HeapHold:
        with cls._lock:
            cls._holders += 1
            if cls._holders == 1:
                cls._apply()
        return HeapHold()

    @classmethod
    def _apply(cls) -> None:
        previous = gc.get_threshold()
        cls._previous = (previous[0], previous[1], previous[2])
        gc.collect()  # what is garbage now is not frozen for good
        gc.freeze()
        gc.set_threshold(*(max(old, new) for old, new in zip(cls._previous, LARGE_HEAP_GC_THRESHOLDS, strict=True)))

    @classmethod
    def _release(cls) -> None:
        with cls._lock:
            if cls._holders == 0:
                return
            cls._holders -= 1
            if cls._holders or cls._previous is None:
                return
            gc.set_threshold(*cls._previous)
            cls._previous = None
            gc.unfreeze()


def untracked(obj: T) -> T:
    """``obj``, which the cyclic garbage collector no longer walks (reference counting still frees it).

    For the long-lived caches of the client library and the key table, a few entries per active subject: a
    producer over 100,000 subjects held about 400,000 of them, and each full pass of the collector walked them
    all, and every entry of the caches' mappings, for about 165 ms in the middle of a batch (docs/benchmarks.md,
    "Client library"). CPython untracks exact tuples and dicts of atomic values by itself; this does it for an
    entry, or a cache's mapping, that keeps the same promise: it is never part of a reference cycle (immutable,
    holding only strings, bytes, numbers, None and objects that keep the promise too). An untracked cycle would
    never be freed; nothing worse. CPython tracks a mapping again when an object it may track is inserted, so a
    cache untracks its mapping again after filling it.
    """
    return _untrack(obj)  # type: ignore[no-any-return]


class CollectorPause:
    """Python's cyclic garbage collector off while a batch is built, on again when the last batch is done.

    A batch of keys work (creating 50,000 subject keys, applying a fetch of 20,000 key records) allocates
    several objects per item that all stay alive until the batch ends: tuples, rows, keys, callbacks.
    The collector, run every 700 allocations and more and more often over all of the heap as those
    survivors pile up, walks them again and again without ever finding garbage among them: a quarter of
    a key creation's time and up to a tenth of a cold key table's catch-up, measured (docs/benchmarks.md,
    "The collector paused during keys batches"). Paused, it walks them once, at its next pass after the batch.

    The same idea as Mercurial's ``nogc`` around its large parses. Pauses nest and may come from several
    threads at once (a writer's batch and its key table's reader): the first turns the collector off,
    the last puts back what it found (a process that had turned it off keeps it off). Reference counting
    frees every object without a cycle as soon as it is unused either way; only cyclic garbage waits,
    for the length of a batch (a batch that waits, for its read-back while a broker is down say, keeps
    the collector off that long: garbage piles up, nothing is lost).
    """

    _lock = threading.Lock()
    _pauses = 0
    _was_enabled = False

    def __enter__(self) -> None:
        cls = CollectorPause
        with cls._lock:
            cls._pauses += 1
            if cls._pauses == 1:
                cls._was_enabled = gc.isenabled()
                gc.disable()

    def __exit__(self, *exc: object) -> None:
        cls = CollectorPause
        with cls._lock:
            cls._pauses -= 1
            if cls._pauses == 0 and cls._was_enabled:
                gc.enable()


#: ``with collector_paused:`` around a batch (:class:`CollectorPause`; one shared instance, it holds no state).
collector_paused = CollectorPause()


class HeapHold:
    """One :meth:`LargeHeapCollector.hold`; :meth:`release` ends it (once: a second call does nothing)."""

    def __init__(self) -> None:
        self._held = True

    def release(self) -> None:
        if self._held:
            self._held = False
            LargeHeapCollector._release()
