"""A bounded subject → key cache in front of a :class:`~strongroom.keys.manager.KeyManager`.

Encryptors meet the same subjects again and again; asking the manager every time costs store queries
and an unwrap per subject. This cache answers known subjects from memory and sends only the misses
to the manager, in one batch. It does not outlive an erasure: it listens to the key table, which
tells it about every erasure marker, key tombstone and lost marker right after applying them (in the
table's reader thread), and drops those subjects' keys (and their ciphers) at once — an idle encrypt
driver holds no erased key either. Every entry expires after ``ttl_s`` anyway. (A record sealed under
a key that was erased a moment earlier is unreadable once the erasure completes: erasure still wins
the race.)

:func:`retry_while_kms_unavailable` is how every long-running component waits out a KMS outage.
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from strongroom.crypto.aead import CIPHERS
from strongroom.keys.erasure_feed import ErasureNotice
from strongroom.keys.manager import KeyManager, KeyOrDecision
from strongroom.keys.table import SubjectKey
from strongroom.kms.errors import KmsUnavailable
from strongroom.runtime import untracked

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

    def __init__(
        self, manager: KeyManager, *, capacity: int = 100_000, ttl_s: float = 30.0, listen: bool = True
    ) -> None:
        self.manager = manager
        self.capacity = max(0, capacity)
        self.ttl_s = ttl_s
        self._entries: OrderedDict[str, tuple[KeyOrDecision, float]] = OrderedDict()
        #: key id → subject of every cached stored key (a key tombstone names the key, not the subject).
        self._subject_of: dict[bytes, str] = {}
        self._lock = threading.Lock()
        self.counters = {"hits": 0, "misses": 0, "manager_calls": 0, "erased_dropped": 0}
        #: Erasure notices received so far: keys fetched while one arrived are used once, not cached.
        self._notices = 0
        self._prefetcher: ThreadPoolExecutor | None = None
        self._prefetched: Future[dict[str, KeyOrDecision]] | None = None
        if listen:  # else the owner forwards the table's notices to on_erasure (a KeyRouter does)
            manager.table.add_erasure_listener(self.on_erasure)

    def prefetch(self, subjects: Iterable[str], *, kms_wait_s: float = 0.0) -> Future[dict[str, KeyOrDecision]]:
        """Resolve (and create) the keys of the *next* batch in the background while the current batch is
        sealed and written: its :meth:`get_or_create` then answers from memory. At most one prefetch
        runs at a time (a second one queues behind it). Charges no seals (the batch's own
        :meth:`get_or_create` does). A failed prefetch is only logged: the next :meth:`get_or_create` of
        those subjects asks again and raises the error itself."""
        wanted = list(dict.fromkeys(subjects))
        with self._lock:
            if self._prefetcher is None:
                self._prefetcher = ThreadPoolExecutor(1, thread_name_prefix="strongroom-key-prefetch")
            future = self._prefetcher.submit(self._prefetch, wanted, kms_wait_s)
            self._prefetched = future
        return future

    def _prefetch(self, wanted: list[str], kms_wait_s: float) -> dict[str, KeyOrDecision]:
        try:
            return self._resolve(wanted, kms_wait_s)
        except Exception as exc:
            log.debug("prefetching keys of %d subjects failed: %s", len(wanted), exc)
            raise

    def close(self) -> None:
        """Stop the prefetch thread (waiting for a prefetch under way)."""
        with self._lock:
            prefetcher, self._prefetcher = self._prefetcher, None
        if prefetcher is not None:
            prefetcher.shutdown(wait=True)

    def get_or_create(
        self, subjects: Iterable[str], *, seals: Mapping[str, int] | None = None, kms_wait_s: float = 0.0
    ) -> dict[str, KeyOrDecision]:
        """Keys to seal ``seals[subject]`` records of each subject with (one record each when ``seals``
        is not given): cached ones from memory, the rest from the manager in one batch (retrying a KMS
        outage for up to ``kms_wait_s``); the seals are charged to the keys' usage limits, which may
        rotate a subject to a new key (:meth:`KeyManager.charge`). Waits for a prefetch under way first.
        """
        pending = self._prefetched
        if pending is not None:
            with contextlib.suppress(Exception):  # logged by _prefetch; asked again below if still missing
                pending.result()
        wanted = list(dict.fromkeys(subjects))
        keys = self._resolve(wanted, kms_wait_s)
        notices = self._notices
        charged = retry_while_kms_unavailable(
            lambda: self.manager.charge(keys, seals if seals is not None else dict.fromkeys(wanted, 1)),
            kms_wait_s,
            what="the KMS (rotating subject keys)",
        )
        rotated = {s: k for s, k in charged.items() if k is not keys.get(s)}
        if rotated:
            self._store(rotated, notices)
        return {subject: charged[subject] for subject in wanted}

    def _resolve(self, wanted: list[str], kms_wait_s: float) -> dict[str, KeyOrDecision]:
        """Cached keys from memory, the missing ones from the manager (no seals charged)."""
        self.manager.table.follower.check_alive()  # a table that stopped reading cannot vouch for cached keys
        found, missing = self._lookup(wanted)
        if missing:
            self.counters["manager_calls"] += 1
            notices = self._notices
            fetched = retry_while_kms_unavailable(
                lambda: self.manager.get_or_create(missing), kms_wait_s, what="the KMS (creating subject keys)"
            )
            self._store(fetched, notices)
            found.update(fetched)
        return {subject: found[subject] for subject in wanted}

    def stats(self) -> dict[str, Any]:
        return {**self.manager.stats(), "cache_hits": self.counters["hits"], "cache_misses": self.counters["misses"],
                "cache_size": len(self), "cache_erased_dropped": self.counters["erased_dropped"]}  # fmt: skip

    def cached(self, subject: str) -> KeyOrDecision | None:
        """What the cache holds for ``subject`` (no manager call, no TTL check): for inspection and tests."""
        with self._lock:
            entry = self._entries.get(subject)
        return None if entry is None else entry[0]

    def clear(self) -> None:
        with self._lock:
            for subject in list(self._entries):
                self._drop(subject)

    def __len__(self) -> int:
        return len(self._entries)

    # ------------------------------------------------------------------ internals
    def on_erasure(self, notice: ErasureNotice) -> None:
        """The key table applied an erasure: drop the erased subjects' keys now (the table's listener)."""
        with self._lock:
            self._notices += 1
            if notice.everything:
                doomed = set(self._entries)
            else:
                doomed = {*notice.subjects, *(self._subject_of[k] for k in notice.key_ids if k in self._subject_of)}
            dropped = sum(self._drop(subject) for subject in doomed)
            self.counters["erased_dropped"] += dropped

    def _drop(self, subject: str) -> bool:
        """Remove one entry and its cipher (the caller holds the lock)."""
        entry = self._entries.pop(subject, None)
        if entry is None:
            return False
        key = entry[0]
        if isinstance(key, SubjectKey):
            self._subject_of.pop(key.key_id, None)
            CIPHERS.forget(key.key)
        return True

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

    def _store(self, keys: Mapping[str, KeyOrDecision], notices: int) -> None:
        """Cache ``keys`` — unless an erasure notice arrived since they were fetched (``notices`` then
        differs): one of them may be the erased key, which must not come back into the cache."""
        if not self.capacity:
            return
        expiry = time.monotonic() + self.ttl_s
        with self._lock:
            if notices != self._notices:
                return
            for subject, key in keys.items():
                old = self._entries.pop(subject, None)
                if old is not None and isinstance(old[0], SubjectKey):
                    self._subject_of.pop(old[0].key_id, None)
                    if not isinstance(key, SubjectKey) or key.key_id != old[0].key_id:
                        CIPHERS.forget(old[0].key)
                self._entries[subject] = untracked((untracked(key) if isinstance(key, SubjectKey) else key, expiry))
                if isinstance(key, SubjectKey):
                    self._subject_of[key.key_id] = subject
            while len(self._entries) > self.capacity:
                self._drop(next(iter(self._entries)))
            # Nothing here is part of a reference cycle: the collector need not walk the entries (an insert of a
            # trackable entry tracks the mapping again; every store takes it out).
            untracked(self._entries)
