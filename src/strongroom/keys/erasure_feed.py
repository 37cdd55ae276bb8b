"""What a key table has erased, as a numbered feed: how keys in other memories follow an erasure.

A key table applies erasure markers, key tombstones and lost markers within a poll interval and drops
the keys from its own memory at once. Keys also live elsewhere: the encrypt driver's
:class:`~strongroom.keys.cache.KeyCache`, and — the copies this module is for — the executor processes
of a Spark pipeline, whose reused Python workers keep raw keys (and their ciphers) across batches.

A :class:`KeyTable` tells its listeners about every applied batch (:class:`ErasureNotice`).
:class:`ErasureFeed` turns that into a *generation* (one more per notice) and a bounded log of the key
ids erased at each generation. A consumer that remembers the generation it last saw asks
:meth:`ErasureFeed.since` and gets the key ids erased after it, or ``reset=True`` when they can no
longer be listed (the log was trimmed, a lost marker dropped keys by wrapping key, or the store was
rebuilt): it then drops every key it holds.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass
from typing import Final

#: How many erased key ids the feed keeps for executors that are behind (older ones: ``reset``).
DEFAULT_FEED_KEYS: Final = 100_000


@dataclass(frozen=True)
class ErasureNotice:
    """What one applied batch of the keys topic removed. ``everything``: drop all keys (not listable)."""

    key_ids: tuple[bytes, ...] = ()
    subjects: tuple[str, ...] = ()
    everything: bool = False

    def __bool__(self) -> bool:
        return bool(self.key_ids or self.subjects or self.everything)


@dataclass(frozen=True)
class ErasureDelta:
    """The answer to "what was erased since generation g?": forget ``key_ids``, or all keys if ``reset``."""

    generation: int
    key_ids: tuple[bytes, ...] = ()
    reset: bool = False


class ErasureFeed:
    """Numbered erasures of one key table (register it with :meth:`KeyTable.add_erasure_listener`).

    Thread-safe: the key table's reader thread appends, key-service threads read. Generations are
    only comparable within one feed: a consumer keeps one generation per feed it talks to.
    """

    def __init__(self, *, max_keys: int = DEFAULT_FEED_KEYS) -> None:
        self.max_keys = max(1, max_keys)
        self._lock = threading.Lock()
        self._generation = 0
        self._log: deque[tuple[int, tuple[bytes, ...]]] = deque()
        self._logged_keys = 0
        #: Consumers at or below this generation missed something that cannot be listed.
        self._reset_at = 0

    @property
    def generation(self) -> int:
        with self._lock:
            return self._generation

    def __call__(self, notice: ErasureNotice) -> None:
        """Record one notice (the key table's listener)."""
        if not notice:
            return
        with self._lock:
            self._generation += 1
            if notice.everything:
                self._reset_at = self._generation
                self._log.clear()
                self._logged_keys = 0
                return
            self._log.append((self._generation, notice.key_ids))
            self._logged_keys += len(notice.key_ids)
            while self._logged_keys > self.max_keys and self._log:
                trimmed, ids = self._log.popleft()
                self._logged_keys -= len(ids)
                self._reset_at = max(self._reset_at, trimmed)

    def since(self, generation: int | None) -> ErasureDelta:
        """Key ids erased after ``generation`` (None: a consumer that holds nothing yet from this feed)."""
        with self._lock:
            current = self._generation
            if generation is None or generation == current:
                return ErasureDelta(current)
            if generation > current or generation < self._reset_at:
                return ErasureDelta(current, reset=True)
            erased = tuple(key_id for at, ids in self._log if at > generation for key_id in ids)
            return ErasureDelta(current, erased)
