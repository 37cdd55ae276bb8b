"""CachingKms: keep unwrapped DEKs (and alias resolutions) in memory so KMS calls stay rare.

Keys are the serialized EDEK (provider, KEK id and ciphertext), values the plaintext DEK. Entries
expire a fixed time after they were *fetched* (not after last use): a DEK in constant use is still
re-fetched every ``ttl_seconds``, which bounds how long a KEK that was disabled or deleted in the
KMS keeps working in a running process. The cache is bounded (least recently used entries go
first) and lives only in this process's memory — it is never written anywhere and never logged.
Call :meth:`invalidate` / :meth:`invalidate_kek` / :meth:`clear` after erasure or KEK changes.

Lost keys are remembered too, briefly: a :class:`~strongroom.kms.errors.KekNotFound` (deleted,
pending deletion, soft-deleted) or :class:`~strongroom.kms.errors.KekDisabled` answer for an EDEK is
replayed from memory for ``negative_ttl_seconds`` (default 30 s) and then asked again. A reader that
retries a record whose KEK is gone therefore costs the KMS one call per EDEK per TTL, not one per
attempt — and once the KEK is back (deletion cancelled, soft-delete restored, key re-enabled), every
running reader opens the record again within ``negative_ttl_seconds``, without a restart (the
Kroxylicious proxy has to be restarted). :meth:`invalidate_kek` heals at once. Transient failures
(``KmsUnavailable``) are never remembered.

Concurrent misses for the same EDEK may each call the KMS once; that is accepted for simplicity.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from strongroom.errors import KmsError
from strongroom.kms.api import DekPair, Edek, Kms
from strongroom.kms.errors import KekDisabled, KekNotFound
from strongroom.kms.wrapper import KmsWrapper

#: Answers that mean "this KEK cannot open data now" and may be replayed for a short while.
_LOST_ANSWERS = (KekNotFound, KekDisabled)


def _replay(error: KmsError) -> KmsError:
    """A fresh exception with the remembered answer (never re-raise one object: tracebacks pile up)."""
    return type(error)(error.problem, hint=error.hint)


K = TypeVar("K")
V = TypeVar("V")


class TtlLru(Generic[K, V]):
    """A bounded LRU map whose entries expire ``ttl`` seconds after insertion. Thread-safe."""

    def __init__(self, max_entries: int, ttl: float, clock: Callable[[], float]) -> None:
        if max_entries < 1 or ttl <= 0:
            raise ValueError("max_entries must be >= 1 and ttl > 0")
        self.max_entries = max_entries
        self.ttl = ttl
        self._clock = clock
        self._entries: OrderedDict[K, tuple[float, V]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = self.evictions = self.expirations = 0

    def get(self, key: K) -> V | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                self.misses += 1
                return None
            if entry[0] <= self._clock():
                del self._entries[key]
                self.expirations += 1
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return entry[1]

    def put(self, key: K, value: V) -> None:
        with self._lock:
            self._entries[key] = (self._clock() + self.ttl, value)
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
                self.evictions += 1

    def remove_if(self, predicate: Callable[[K], bool]) -> int:
        with self._lock:
            doomed = [key for key in self._entries if predicate(key)]
            for key in doomed:
                del self._entries[key]
            return len(doomed)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)


#: What the cache is keyed by: the serialized EDEK *and* its binding, so that a bound EDEK copied under
#: another binding is a miss that the KMS refuses, never a hit.
_EdekKey = tuple[bytes, bytes]


def _key(edek: Edek) -> _EdekKey:
    return (edek.to_bytes(), edek.context)


class CachingKms(KmsWrapper):
    """Caches unwrapped DEKs by serialized EDEK, alias → KEK id resolutions, and (briefly) lost-key answers."""

    def __init__(
        self,
        inner: Kms,
        *,
        max_entries: int = 10_000,
        ttl_seconds: float = 3600.0,
        alias_ttl_seconds: float = 300.0,
        negative_ttl_seconds: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(inner)
        self._deks: TtlLru[_EdekKey, bytes] = TtlLru(max_entries, ttl_seconds, clock)
        self._aliases: TtlLru[str, str] = TtlLru(1024, alias_ttl_seconds, clock)
        if negative_ttl_seconds < 0:
            raise ValueError("negative_ttl_seconds must be >= 0 (0 turns negative caching off)")
        #: The bound on how long a restored KEK stays "lost" for this process.
        self.negative_ttl_seconds = negative_ttl_seconds
        self._lost: TtlLru[_EdekKey, KmsError] | None = (
            TtlLru(max_entries, negative_ttl_seconds, clock) if negative_ttl_seconds > 0 else None
        )

    def resolve_alias(self, alias: str) -> str:
        kek_id = self._aliases.get(alias)
        if kek_id is None:
            kek_id = self.inner.resolve_alias(alias)
            self._aliases.put(alias, kek_id)
        return kek_id

    def generate_dek(self, kek_id: str) -> DekPair:
        pair = self.inner.generate_dek(kek_id)
        self._deks.put(_key(pair.edek), pair.dek)  # the producer's own records read back free
        return pair

    def wrap(self, kek_id: str, plaintext: bytes, context: bytes = b"") -> Edek:
        edek = self.inner.wrap(kek_id, plaintext, context)
        self._deks.put(_key(edek), plaintext)
        return edek

    def unwrap(self, edek: Edek) -> bytes:
        key = _key(edek)
        dek = self._deks.get(key)
        if dek is None:
            remembered = self._lost.get(key) if self._lost is not None else None
            if remembered is not None:
                raise _replay(remembered)
            try:
                dek = self.inner.unwrap(edek)
            except _LOST_ANSWERS as exc:
                if self._lost is not None:
                    self._lost.put(key, exc)
                raise
            self._deks.put(key, dek)
        return dek

    def unwrap_many(self, edeks: Sequence[Edek]) -> list[bytes | KmsError]:
        keys = [_key(edek) for edek in edeks]
        results: list[bytes | KmsError | None] = [self._deks.get(key) for key in keys]
        if self._lost is not None:
            for i, key in enumerate(keys):
                remembered = self._lost.get(key) if results[i] is None else None
                if remembered is not None:
                    results[i] = _replay(remembered)
        missing = [i for i, result in enumerate(results) if result is None]
        if missing:
            fetched = self.inner.unwrap_many([edeks[i] for i in missing])
            for index, outcome in zip(missing, fetched, strict=True):
                results[index] = outcome
                if isinstance(outcome, bytes):
                    self._deks.put(keys[index], outcome)
                elif isinstance(outcome, _LOST_ANSWERS) and self._lost is not None:
                    self._lost.put(keys[index], outcome)
        return [r if r is not None else KmsError("internal: no result") for r in results]

    def invalidate(self, edek: Edek) -> None:
        """Forget one cached DEK."""
        key = _key(edek)
        self._deks.remove_if(lambda cached: cached == key)
        if self._lost is not None:
            self._lost.remove_if(lambda cached: cached == key)

    def invalidate_kek(self, kek_id: str) -> int:
        """Forget every cached DEK and lost-key answer under ``kek_id``, and every alias (e.g. after a restore)."""
        removed = self._deks.remove_if(lambda cached: Edek.from_bytes(cached[0]).kek_id == kek_id)
        if self._lost is not None:
            removed += self._lost.remove_if(lambda cached: Edek.from_bytes(cached[0]).kek_id == kek_id)
        self._aliases.clear()
        return removed

    def clear(self) -> None:
        """Forget everything (after an erasure, a KEK incident, or before shutdown)."""
        self._deks.clear()
        self._aliases.clear()
        if self._lost is not None:
            self._lost.clear()

    def stats(self) -> dict[str, int]:
        """Cache counters: hits, misses, evictions, expirations and current size."""
        deks = self._deks
        return {
            "hits": deks.hits,
            "misses": deks.misses,
            "evictions": deks.evictions,
            "expirations": deks.expirations,
            "size": len(deks),
            "alias_hits": self._aliases.hits,
            "alias_misses": self._aliases.misses,
            "lost_hits": self._lost.hits if self._lost is not None else 0,
            "lost_size": len(self._lost) if self._lost is not None else 0,
        }

    def close(self) -> None:
        self.clear()
        super().close()
