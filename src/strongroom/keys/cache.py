"""A bounded subject → key cache in front of a :class:`~strongroom.keys.manager.KeyManager`.

Encryptors meet the same subjects again and again; asking the manager every time costs store queries
and an unwrap per subject. This cache answers known subjects from memory and sends only the misses
to the manager, in one batch. It can never outlive an erasure by much: it is emptied whenever the key
table applies an erasure or lost marker, and every entry expires after ``ttl_s`` anyway. (A record
sealed under a key that was erased a moment earlier is unreadable once the erasure completes: erasure
still wins the race.)

:func:`retry_while_kms_unavailable` is how every long-running component waits out a KMS outage.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from strongroom.keys.manager import KeyManager, KeyOrDecision
from strongroom.kms.errors import KmsUnavailable

log = logging.getLogger(__name__)
T = TypeVar("T")


def retry_while_kms_unavailable(
    call: Callable[[], T], wait_s: float, *, what: str = "the KMS", max_delay_s: float = 10.0
) -> T:
    """Run ``call``; while it raises :class:`KmsUnavailable`, back off (jittered, up to ``max_delay_s``)
    and retry until ``wait_s`` has passed, then re-raise. An outage is never mistaken for a lost key."""
    deadline = time.monotonic() + wait_s
    delay = 0.25
    while True:
        try:
            return call()
        except KmsUnavailable as exc:
            if time.monotonic() + delay > deadline:
                raise
            log.warning(
                "%s is unavailable (%s); nothing is written meanwhile, retrying in %.1fs", what, exc.problem, delay
            )
            time.sleep(delay * (0.5 + random.random() / 2))
            delay = min(delay * 2, max_delay_s)


class KeyCache:
    """subject → key (or post-erasure decision), LRU-bounded, with a TTL. Thread-safe."""

    def __init__(self, manager: KeyManager, *, capacity: int = 100_000, ttl_s: float = 30.0) -> None:
        self.manager = manager
        self.capacity = max(0, capacity)
        self.ttl_s = ttl_s
        self._entries: OrderedDict[str, tuple[KeyOrDecision, float]] = OrderedDict()
        self._lock = threading.Lock()
        self._markers_seen = self._markers_applied()
        self.counters = {"hits": 0, "misses": 0, "manager_calls": 0}

    def get_or_create(self, subjects: Iterable[str], *, kms_wait_s: float = 0.0) -> dict[str, KeyOrDecision]:
        """Keys for ``subjects``: cached ones from memory, the rest from the manager in one batch
        (retrying a KMS outage for up to ``kms_wait_s``)."""
        wanted = list(dict.fromkeys(subjects))
        self._forget_if_markers_applied()
        found, missing = self._lookup(wanted)
        if missing:
            self.counters["manager_calls"] += 1
            fetched = retry_while_kms_unavailable(
                lambda: self.manager.get_or_create(missing), kms_wait_s, what="the KMS (creating subject keys)"
            )
            self._store(fetched)
            found.update(fetched)
        return {subject: found[subject] for subject in wanted}

    def stats(self) -> dict[str, Any]:
        return {**self.manager.stats(), "cache_hits": self.counters["hits"], "cache_misses": self.counters["misses"],
                "cache_size": len(self)}  # fmt: skip

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)

    # ------------------------------------------------------------------ internals
    def _markers_applied(self) -> int:
        counters = getattr(self.manager.table, "stats_counters", {})
        return int(counters.get("markers", 0)) + int(counters.get("lost_markers", 0))

    def _forget_if_markers_applied(self) -> None:
        markers = self._markers_applied()
        if markers != self._markers_seen:  # an erasure (or lost marker) reached the key table
            self._markers_seen = markers
            self.clear()

    def _lookup(self, subjects: Sequence[str]) -> tuple[dict[str, KeyOrDecision], list[str]]:
        now = time.monotonic()
        found: dict[str, KeyOrDecision] = {}
        missing: list[str] = []
        with self._lock:
            for subject in subjects:
                entry = self._entries.get(subject)
                if entry is not None and entry[1] > now:
                    self._entries.move_to_end(subject)
                    found[subject] = entry[0]
                else:
                    missing.append(subject)
            self.counters["hits"] += len(found)
            self.counters["misses"] += len(missing)
        return found, missing

    def _store(self, keys: Mapping[str, KeyOrDecision]) -> None:
        if not self.capacity:
            return
        expiry = time.monotonic() + self.ttl_s
        with self._lock:
            for subject, key in keys.items():
                self._entries[subject] = (key, expiry)
                self._entries.move_to_end(subject)
            while len(self._entries) > self.capacity:
                self._entries.popitem(last=False)
