"""The key table: what every reader (and every key creator) knows about subject keys, kept fresh.

Built from the keys topic (all partitions, from the log start, or from where a persistent store left
off) by a background consumer thread that never stops reading, so erasure markers reach running
readers within a poll interval. Memory is bounded: an LRU of unwrapped subject keys in RAM, everything
else in the local SQLite store (wrapped keys only, see :mod:`strongroom.keys.store`). Wrapping keys are
unwrapped once each through the KMS and kept in memory: a cold reader makes one KMS call per wrapping
key, not per subject.

Lookups answer three ways, and never confuse them:

- the key (bytes);
- erased: :class:`~strongroom.envelope.SubjectErased` — its tombstone or its subject's erasure marker
  was applied, or it is unknown, its subject has a marker, and the table has read the subject's
  partition to its current end (so the key will never arrive: a never-stored post-erasure key);
- not arrived yet: ``None`` from :meth:`KeyTable.lookup` (or :class:`KeyNotYetAvailable` from
  :meth:`KeyTable.key_lookup`) — buffer the record and retry.

Any KMS failure (KEK disabled, deleted, KMS down) propagates: a lost KEK is never reported as erasure
by itself. Only when an operator has *declared* a wrapping key lost (a lost marker in the keys topic,
``strongroom recover mark-lost``) *and* the KMS confirms that the KEK no longer unwraps it
(:mod:`strongroom.keys.lost_check`; a marker the KMS does not confirm is logged, counted and not
applied) do its subject keys answer :class:`SubjectKeyLost` — a subclass of ``SubjectErased``, so
readers skip those records deliberately, without a KMS call per key — until the marker is tombstoned
(``recover unmark-lost``, after the KEK was restored).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, NamedTuple

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from strongroom.crypto.aead import CIPHERS
from strongroom.envelope.codec import KeyLookup
from strongroom.envelope.errors import SubjectErased, subject_fingerprint
from strongroom.envelope.keyref import KeyRef, SubjectKeyRef
from strongroom.errors import StrongroomError
from strongroom.kafka.config import ClientConfig
from strongroom.keys.erasure_feed import ErasureNotice
from strongroom.keys.errors import (
    KeyNotYetAvailable,
    KeysConfigError,
    KeyTableClosed,
    KeyTableTimeout,
    SubjectKeyLost,
    WrappingKeyUnavailable,
)
from strongroom.keys.follower import KeysFollower
from strongroom.keys.heartbeat import ReaderHeartbeats, new_reader_id
from strongroom.keys.lost_check import RECHECK_SECONDS, LostMarkerCheck, RefusedLostMarker
from strongroom.keys.murmur2 import subject_partition, subject_partitions
from strongroom.keys.store import ApplyEffects, KeyStore, StoredKey, StoredLost, StoredMarker
from strongroom.keys.topic import KeysTopic
from strongroom.keys.topic_config import KEYS_TOPIC_DEFAULT, READERS_TOPIC_DEFAULT
from strongroom.keys.wrapping import WrappingKeyCache, unwrap_subject_key
from strongroom.kms.api import Edek, Kms
from strongroom.kms.errors import KmsConfigError
from strongroom.metrics import KeyTableSample
from strongroom.runtime import untracked

log = logging.getLogger(__name__)

DEFAULT_CACHE_SIZE: Final = 100_000
#: Seal-lease entries whose outcomes the table keeps for the writers waiting on them (one byte each).
_LEASE_OUTCOMES: Final = 4_000_000


@dataclass(frozen=True)
class SubjectKey:
    """An unwrapped subject key, ready to seal with. ``stored=False`` marks a never-stored key."""

    subject: str
    key_id: bytes
    key: bytes = field(repr=False)
    wk_id: bytes | None = None
    partition: int | None = None
    offset: int | None = None
    stored: bool = True
    #: When its record was written (the key age limit of :mod:`strongroom.keys.usage` counts from here).
    created_ms: int | None = None

    @property
    def ref(self) -> SubjectKeyRef:
        return SubjectKeyRef(self.key_id)

    def __repr__(self) -> str:
        where = f"{self.partition}@{self.offset}" if self.stored else "never stored"
        return f"SubjectKey(key_id={self.key_id.hex()}, key=<redacted>, {where})"


_new_object: Final = object.__new__


def stored_subject_key(
    subject: str, key_id: bytes, key: bytes, wk_id: bytes, partition: int, offset: int, created_ms: int
) -> SubjectKey:
    """``SubjectKey(subject, key_id, key, wk_id, partition, offset, created_ms=created_ms)``, equal to what the
    constructor builds, through the instance's ``__dict__``: a frozen dataclass's ``__init__`` costs about a
    microsecond more, and key creation and warm lookups build one per subject."""
    made: SubjectKey = _new_object(SubjectKey)
    made.__dict__.update(
        {
            "subject": subject,
            "key_id": key_id,
            "key": key,
            "wk_id": wk_id,
            "partition": partition,
            "offset": offset,
            "stored": True,
            "created_ms": created_ms,
        }
    )
    return made


@dataclass(frozen=True)
class ErasureInfo:
    partition: int
    offset: int
    request_id: str
    requested_at_ms: int


class KeyInfo(NamedTuple):
    """One live key of a subject, as :class:`SubjectState` lists it. Named tuples (this one and
    :class:`SubjectState`), not frozen dataclasses: a batch of subject states builds them per subject, at a
    quarter of the cost."""

    key_id: bytes
    offset: int
    wk_id: bytes
    created_ms: int
    kek_ref: str
    #: The plan that declared this key's wrapping key lost (None: not declared lost).
    lost_by_plan: str | None = None
    #: Its seal leases reached their bound (:mod:`strongroom.keys.usage`): it seals nothing more.
    exhausted: bool = False

    @property
    def lost(self) -> bool:
        return self.lost_by_plan is not None

    @property
    def usable(self) -> bool:
        """May seal new records: not declared lost, not exhausted (age is the writer's check)."""
        return self.lost_by_plan is None and not self.exhausted


@dataclass(frozen=True)
class KeyChainLink:
    """Where a subject key hangs: KEK (``edek.kek_ref``) → wrapping key ``wk_id`` → subject key ``key_id``."""

    key_id: bytes
    subject: str
    wk_id: bytes
    edek: Edek | None
    #: Set when the wrapping key was declared lost (``recover mark-lost``): no KMS call needed to know.
    lost: StoredLost | None = None

    @property
    def kek_ref(self) -> str | None:
        return None if self.edek is None else self.edek.kek_ref


class SubjectState(NamedTuple):
    """What the table knows about a subject: its live keys in partition order and its erasure marker."""

    subject: str
    partition: int
    keys: tuple[KeyInfo, ...]
    erasure: ErasureInfo | None

    @property
    def current_key(self) -> KeyInfo | None:
        """First key in partition order wins — among keys not declared lost and not exhausted: the key
        every creator uses."""
        return next((k for k in self.keys if k.usable), None)

    def current_key_within(self, max_age_ms: int, now_ms: int, *, other_keks: Collection[bytes] = ()) -> KeyInfo | None:
        """:attr:`current_key` among keys younger than ``max_age_ms`` too (a writer's key age limit) and
        not wrapped by one of ``other_keks``: the wrapping keys known to be under a KEK other than the
        writer's (a KEK per topic). A key whose wrapping key the table has not applied yet counts: another
        writer of the same KEK may have just made it, and every writer must agree on the current key."""
        return next(
            (k for k in self.keys if k.usable and now_ms - k.created_ms < max_age_ms and k.wk_id not in other_keks),
            None,
        )

    @property
    def current_key_id(self) -> bytes | None:
        current = self.current_key
        return current.key_id if current is not None else None

    @property
    def erased(self) -> bool:
        return self.erasure is not None

    def to_dict(self) -> dict[str, Any]:
        return {
            "subject": self.subject,
            "partition": self.partition,
            "current_key_id": self.current_key_id.hex() if self.current_key_id else None,
            "keys": [
                {
                    "key_id": k.key_id.hex(),
                    "offset": k.offset,
                    "wrapping_key": k.wk_id.hex(),
                    "kek_ref": k.kek_ref,
                    "declared_lost_by_plan": k.lost_by_plan,
                    "exhausted": k.exhausted,
                }
                for k in self.keys
            ],
            "erasure": None
            if self.erasure is None
            else {
                "offset": self.erasure.offset,
                "request_id": self.erasure.request_id,
                "requested_at_ms": self.erasure.requested_at_ms,
            },
        }


class _Lru:
    """key id → (subject, unwrapped key), least recently used out first."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise KeysConfigError(f"the key cache needs room for at least one key, got {capacity}")
        self.capacity = capacity
        self.entries: OrderedDict[bytes, tuple[str, bytes]] = OrderedDict()
        self.hits = self.misses = 0

    def get(self, key_id: bytes) -> bytes | None:
        entry = self.entries.get(key_id)
        if entry is None:
            self.misses += 1
            return None
        self.entries.move_to_end(key_id)
        self.hits += 1
        return entry[1]

    def owner(self, key_id: bytes) -> str | None:
        entry = self.entries.get(key_id)
        return None if entry is None else entry[0]

    def put(self, key_id: bytes, subject: str, key: bytes) -> None:
        self.entries[key_id] = (subject, key)
        self.entries.move_to_end(key_id)
        untracked(self.entries)  # bytes and text only: no reference cycle for the collector to walk
        while len(self.entries) > self.capacity:
            _, (_, evicted) = self.entries.popitem(last=False)
            CIPHERS.forget(evicted)

    def drop(self, key_id: bytes) -> None:
        entry = self.entries.pop(key_id, None)
        if entry is not None:
            CIPHERS.forget(entry[1])

    def clear(self) -> None:
        for _, key in self.entries.values():
            CIPHERS.forget(key)
        self.entries.clear()


class KeyTable:
    """A continuously refreshed view of the keys topic. Thread-safe; start it once, share it.

    ``kms`` unwraps wrapping keys: one KMS, or a mapping provider name → KMS. ``store_path`` makes
    the store persistent (resumes after a restart); by default it is a temporary directory removed at
    :meth:`close`. ``register=False`` skips the readers registry (only for tools that hold no keys).
    ``seal_usage=False`` passes the seal leases over (for a table that only opens records; a writer's
    :class:`~strongroom.keys.manager.KeyManager` refuses it), with a temporary store only.
    """

    def __init__(
        self,
        client: ClientConfig,
        kms: Kms | Mapping[str, Kms] | None,
        *,
        topic: str = KEYS_TOPIC_DEFAULT,
        store_path: Path | None = None,
        temp_dir: Path | None = None,
        cache_size: int = DEFAULT_CACHE_SIZE,
        readers_topic: str = READERS_TOPIC_DEFAULT,
        reader_id: str | None = None,
        heartbeat_interval: float = 5.0,
        register: bool = True,
        absent_wait: float = 5.0,
        poll_timeout: float = 0.1,
        seal_usage: bool = True,
    ) -> None:
        """Settings only: :meth:`open` (or ``with``) connects, opens the store and starts following."""
        self.client = client
        self.topic = topic
        self._kms: dict[str, Kms] = {} if kms is None else dict(kms) if isinstance(kms, Mapping) else {kms.name: kms}
        self._store_path = store_path
        self._temp_dir = temp_dir
        #: Whether this table adds up seal leases. Only a table that backs a writer (a KeyManager) needs them;
        #: a reader's table passes them over, which makes its catch-up cheaper by every lease ever written.
        #: A persistent store always adds them up, so that a writer may open it later.
        self.seal_usage = seal_usage or store_path is not None
        self.reader_id = reader_id or new_reader_id()
        self.heartbeats = ReaderHeartbeats(
            client,
            readers_topic=readers_topic,
            keys_topic=topic,
            reader_id=self.reader_id,
            interval=heartbeat_interval,
            enabled=register,
        )
        self.absent_wait = absent_wait
        self.poll_timeout = poll_timeout
        self._lru = _Lru(cache_size)
        #: How many times the applier evicted erased keys (or everything): :meth:`_warm_stored` re-checks
        #: the keys it read when this moved meanwhile.
        self._evictions = 0
        self._wks = WrappingKeyCache()
        self._lock = threading.Lock()
        #: Wrapping keys declared lost (few: one per WK, not per subject), checked before any unwrap.
        self._lost: dict[bytes, StoredLost] = {}
        #: Lost markers in the store that the KMS did not confirm (:mod:`strongroom.keys.lost_check`): not applied.
        self._refused_lost: dict[bytes, RefusedLostMarker] = {}
        self._lost_checked_at = 0.0
        self._confirmed_erased: OrderedDict[bytes, str] = OrderedDict()
        self._store: KeyStore | None = None
        self._follower: KeysFollower | None = None
        self._closed = False
        self.stats_counters = {"markers": 0, "lost_markers": 0, "lost_lookups": 0, "lost_markers_not_applied": 0}
        self._erasure_listeners: list[Callable[[ErasureNotice], None]] = []
        #: Outcomes of recently applied seal-leases records (lease id → one byte per entry, 1 granted), for
        #: the writers waiting on them; at most _LEASE_OUTCOMES entries in all.
        self._lease_outcomes: OrderedDict[bytes, bytes] = OrderedDict()
        self._lease_outcome_entries = 0

    # ------------------------------------------------------------------ life cycle
    def open(self) -> KeyTable:
        """Check the keys topic, open the store and start following the topic (once)."""
        if self._follower is not None:
            return self
        partitions = KeysTopic(self.client, self.topic).partitions  # KeysTopicMissing here, not in the thread
        self._store = KeyStore(self._store_path, topic=self.topic, temp_base=self._temp_dir)
        self._lost, self._refused_lost = self._lost_check().judge(self._store.lost_wrapping_keys())
        self._follower = KeysFollower(
            self.client,
            self.topic,
            self._store,
            partitions,
            on_effects=self._on_effects,
            on_reset=self._on_reset,
            on_tick=self._on_tick,
            poll_timeout=self.poll_timeout,
            skip_leases=not self.seal_usage,
        )
        # Registered before it can serve a key: erasure verification must never miss a running reader
        # because its first heartbeat was still in flight.
        self._follower.start(on_ready=lambda: self._heartbeat(flush=True))
        return self

    @property
    def store(self) -> KeyStore:
        if self._store is None:
            raise KeyTableClosed(f"the key table of {self.topic!r} is not open", hint="call open() or use `with`")
        return self._store

    @property
    def follower(self) -> KeysFollower:
        if self._follower is None:
            raise KeyTableClosed(f"the key table of {self.topic!r} is not open", hint="call open() or use `with`")
        return self._follower

    @property
    def partitions(self) -> int:
        return self.follower.partitions

    @property
    def readers_topic(self) -> str:
        return self.heartbeats.readers_topic

    @property
    def heartbeat_error(self) -> str | None:
        return self.heartbeats.error

    def close(self) -> None:
        """Stop reading, say goodbye to the registry, drop every key from memory, remove a temporary store."""
        if self._closed:
            return
        self._closed = True
        if self._follower is None:
            return
        self._follower.stop()
        try:
            self._heartbeat(closed=True, flush=True)
        finally:
            with self._lock:
                self._lru.clear()
            self._wks.clear()
            self.store.close()

    def __enter__(self) -> KeyTable:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ waiting
    def applied_offsets(self) -> dict[int, int]:
        """Next offset to apply per keys partition (everything below it is applied)."""
        return self.follower.applied_offsets()

    def wait_for_offsets(self, targets: Mapping[int, int], timeout: float = 60.0) -> None:
        """Block until every partition ``p`` in ``targets`` is applied up to (excluding) ``targets[p]``
        (``timeout`` bounds the time without progress: :meth:`KeysFollower.wait_for_offsets`)."""
        self._check_alive()
        self.follower.wait_for_offsets(targets, timeout)

    def wait_caught_up(self, timeout: float = 60.0) -> None:
        """Block until the table has applied everything written to the keys topic before this call."""
        self._check_alive()
        self.follower.wait_caught_up(timeout)

    def check_alive(self) -> None:
        """Raise when the table is closed or stopped reading: a cache in front of it must not answer then."""
        self._check_alive()

    def _check_alive(self) -> None:
        if self._closed:
            raise KeyTableClosed(f"the key table of {self.topic!r} is closed")
        self.follower.check_alive()

    # ------------------------------------------------------------------ lookups
    def owner(self, key_id: bytes) -> str | None:
        """The subject a (live) subject key belongs to, None when the table does not know the key."""
        with self._lock:
            cached = self._lru.owner(key_id)
        if cached is not None:
            return cached
        stored = self.store.key(key_id)
        return None if stored is None else stored.subject

    def lookup(self, key_id: bytes | SubjectKeyRef, subject: str | bytes | None = None) -> bytes | None:
        """The subject key, ``None`` if it has not arrived yet; :class:`SubjectErased` if it was erased.

        :class:`SubjectKeyLost` (a ``SubjectErased``) if its wrapping key was declared lost: answered
        from the table alone, without asking the KMS.

        Pass the record's ``subject`` when known: an unknown key of a subject with an erasure marker
        is then reported erased once the table has read that partition to its end.
        """
        follower = self._follower
        if self._closed or follower is None or follower.failure is not None:
            self._check_alive()  # raises
        kid = key_id.key_id if isinstance(key_id, SubjectKeyRef) else key_id
        with self._lock:
            hit = self._lru.get(kid)
        if hit is not None:
            return hit
        key = self._load(kid)
        if key is not None:
            return key
        erased_subject = self.store.erased_subject_of(kid) or self._confirmed_erased.get(kid)
        if erased_subject is not None:
            raise SubjectErased(
                f"subject key {kid.hex()} of subject {subject_fingerprint(erased_subject.encode())} was erased"
            )
        if subject is None:
            return None
        subject_text = subject.decode("utf-8", "surrogateescape") if isinstance(subject, bytes) else subject
        if self.store.marker(subject_text) is None:
            return None
        # The subject was erased and the key is unknown: either it will never exist (a never-stored
        # post-erasure key) or it is a new-generation key still on its way. Read to the end to know.
        if not self._reached_current_end(subject_partition(subject_text, self.partitions)):
            return None
        key = self._load(kid)
        if key is not None:
            return key
        with self._lock:
            self._confirmed_erased[kid] = subject_text
            while len(self._confirmed_erased) > self._lru.capacity:
                self._confirmed_erased.popitem(last=False)
        raise SubjectErased(
            f"subject key {kid.hex()} of erased subject {subject_fingerprint(subject_text.encode())} "
            "does not exist (written after the erasure under the never-stored-key policy)"
        )

    def lookup_many(
        self, key_ids: Sequence[bytes], subjects: Sequence[str | bytes | None] | None = None
    ) -> list[bytes | None]:
        """:meth:`lookup` for a batch of records' key ids (and subjects): one lock and one liveness check
        for the cached ones, the rest one by one (an erased one raises :class:`SubjectErased`)."""
        self._check_alive()
        entries = self._lru.entries
        with self._lock:
            got = list(map(entries.get, key_ids))
            if None not in got:  # the usual case: every key cached; refresh them all in C loops
                deque(map(entries.move_to_end, key_ids), maxlen=0)
                self._lru.hits += len(got)
                return [entry[1] for entry in got]  # type: ignore[index]
            found: list[bytes | None] = [None if entry is None else entry[1] for entry in got]
            for key_id, entry in zip(key_ids, got, strict=True):
                if entry is not None:
                    entries.move_to_end(key_id)
            self._lru.hits += len(found) - found.count(None)
        for index, key in enumerate(found):
            if key is None:
                found[index] = self.lookup(key_ids[index], None if subjects is None else subjects[index])
        return found

    def warm(self, key_ids: Iterable[bytes]) -> int:
        """Load many keys into the cache in few store queries (a batch's keys before per-key lookups).

        Only keys the store holds and can unwrap are loaded; anything else (absent, erased, declared
        lost, wrapping key unavailable) is left for :meth:`lookup` to report. Returns how many loaded.
        """
        self._check_alive()
        with self._lock:
            missing = [k for k in dict.fromkeys(key_ids) if k not in self._lru.entries]
            seen = self._evictions
        if not missing:
            return 0
        return self._warm_stored(self.store.keys_many(missing).values(), seen)

    def _warm_stored(self, rows: Iterable[StoredKey], seen: int) -> int:
        """Unwrap and cache stored keys read after the eviction count was ``seen``. A key erased since
        then must not come back: if any eviction happened meanwhile, the keys still stored are read
        again first (the applier commits an erasure before it evicts, under this lock)."""
        unwrapped: list[tuple[StoredKey, bytes]] = []
        for stored in rows:
            if stored.wk_id in self._lost or stored.key_id in self._lru.entries:
                continue
            try:
                key = self._unwrap(stored)
            except StrongroomError:  # lookup() reports it, with its own error
                continue
            if key is not None:
                unwrapped.append((stored, key))
        while unwrapped:
            with self._lock:
                if self._evictions == seen:
                    loaded = [(stored, key) for stored, key in unwrapped if stored.wk_id not in self._lost]
                    for stored, key in loaded:
                        self._lru.put(stored.key_id, stored.subject, key)
                    return len(loaded)
                seen = self._evictions
            still = self.store.keys_many([stored.key_id for stored, _ in unwrapped])
            unwrapped = [(stored, key) for stored, key in unwrapped if stored.key_id in still]
        return 0

    def _reached_current_end(self, partition: int) -> bool:
        ((_, high),) = self.follower.watermarks([partition]).values()
        try:
            self.wait_for_offsets({partition: high}, self.absent_wait)
        except KeyTableTimeout:
            return False
        return True

    def _load(self, key_id: bytes) -> bytes | None:
        stored = self.store.key(key_id)
        if stored is None:
            return None
        lost = self._lost.get(stored.wk_id)
        if lost is not None:
            self.stats_counters["lost_lookups"] += 1
            raise lost_error(key_id, stored.subject, lost)
        key = self._unwrap(stored)
        if key is None:
            return None
        with self._lock:
            # Only cache it if no erasure or lost marker removed it meanwhile (the applier evicts under this lock).
            if self.store.key(key_id) is not None and stored.wk_id not in self._lost:
                self._lru.put(key_id, stored.subject, key)
        return key

    def declared_lost(self, key_id: bytes | SubjectKeyRef) -> StoredLost | None:
        """The lost marker that covers a subject key (through its wrapping key), or None.

        Lets a reader that got ``SubjectErased`` from the envelope (whose key lookups answer ``None`` for
        both) tell a declared-lost key from an erased one, e.g. to count them apart.
        """
        kid = key_id.key_id if isinstance(key_id, SubjectKeyRef) else key_id
        stored = self.store.key(kid)
        return None if stored is None else self._lost.get(stored.wk_id)

    def lost_wrapping_keys(self) -> dict[bytes, StoredLost]:
        """Every wrapping key declared lost (and not undone) whose loss the KMS confirmed, with its marker."""
        with self._lock:
            return dict(self._lost)

    def refused_lost_markers(self) -> dict[bytes, RefusedLostMarker]:
        """Lost markers in the keys topic this table did not apply (the KMS did not confirm the loss)."""
        with self._lock:
            return dict(self._refused_lost)

    def _lost_check(self) -> LostMarkerCheck:
        return LostMarkerCheck(self._kms, self.store, self.topic)

    def _unwrap(self, stored: StoredKey) -> bytes | None:
        cipher = self._wrapping_key(stored.wk_id)
        if cipher is None:
            return None
        return unwrap_subject_key(cipher, stored.wrapped, stored.subject.encode("utf-8"), stored.key_id, stored.wk_id)

    def _wrapping_key(self, wk_id: bytes) -> AESGCM | None:
        cipher = self._wks.get(wk_id)
        if cipher is not None:
            return cipher
        stored = self.store.wrapping_key(wk_id)
        if stored is None:
            if wk_id in self.follower.corrupt_wks:
                raise WrappingKeyUnavailable(f"wrapping key {wk_id.hex()} has a corrupt record in {self.topic!r}")
            return None
        kms = self._kms.get(stored.edek.provider)
        if kms is None:
            raise KmsConfigError(
                f"wrapping key {wk_id.hex()} is wrapped by KEK {stored.edek.kek_ref!r} of KMS "
                f"{stored.edek.provider!r}, which this reader has no configuration for (it has {sorted(self._kms)})"
            )
        return self._wks.get_or_fetch(wk_id, lambda: kms.unwrap(stored.edek))

    def remember_wrapping_key(self, wk_id: bytes, wk: bytes) -> None:
        """Seed the wrapping-key cache with a WK this process just made (saves its KMS unwrap)."""
        self._wks.put(wk_id, wk)

    def key_lookup(self, key_ref: KeyRef) -> bytes | None:
        """A ``KeyLookup`` for the envelope: key, ``None`` for erased, :class:`KeyNotYetAvailable` otherwise.

        Use as ``kms_key_lookup(kms, subject_keys=table.key_lookup)``. Prefer :meth:`key_lookup_for`
        when the record's subject is known.
        """
        return self._envelope_lookup(key_ref, None)

    def key_lookup_for(self, subject: str | bytes) -> KeyLookup:
        """A ``KeyLookup`` for records of one subject (applies the erased-subject rule)."""
        return lambda key_ref: self._envelope_lookup(key_ref, subject)

    def _envelope_lookup(self, key_ref: KeyRef, subject: str | bytes | None) -> bytes | None:
        if not isinstance(key_ref, SubjectKeyRef):
            raise KmsConfigError(f"the key table only holds subject keys, not {key_ref!r}")
        try:
            key = self.lookup(key_ref, subject)
        except SubjectErased:
            return None
        if key is None:
            raise KeyNotYetAvailable(f"subject key {key_ref.key_id.hex()} has not arrived in {self.topic!r} yet")
        return key

    def subject_state(self, subject: str) -> SubjectState:
        return self.subject_states([subject])[subject]

    def subject_states(
        self, subjects: Iterable[str], *, warm: Callable[[SubjectState], KeyInfo | None] | None = None
    ) -> dict[str, SubjectState]:
        """:meth:`subject_state` for many subjects at once (a few store queries per 500 subjects); ``warm``
        picks a key of each state that has keys to unwrap into the cache from the rows just read (:meth:`warm`
        without reading them again)."""
        self._check_alive()
        wanted = list(dict.fromkeys(subjects))
        with self._lock:
            seen = self._evictions
        keys = self.store.live_keys_many(wanted)
        return self._states(wanted, keys, self.store.markers_many(wanted), seen, warm)

    def _states(
        self,
        wanted: list[str],
        keys: Mapping[str, list[StoredKey]],
        markers: Mapping[str, StoredMarker],
        seen: int,
        warm: Callable[[SubjectState], KeyInfo | None] | None,
    ) -> dict[str, SubjectState]:
        """:meth:`subject_states` from the rows and markers read after the eviction count was ``seen``."""
        states: dict[str, SubjectState] = {}
        lost = self._lost
        keyless = [subject for subject in wanted if not keys[subject]]
        placed = dict(
            zip(keyless, subject_partitions([s.encode("utf-8") for s in keyless], self.partitions), strict=True)
        )
        for subject in wanted:
            marker = markers.get(subject)
            erasure = None
            if marker is not None:
                erasure = ErasureInfo(marker.partition, marker.offset, marker.request_id, marker.requested_at_ms)
            found = keys[subject]
            if not found:  # a new subject (most of a creating batch): no key to describe
                states[subject] = SubjectState(subject, placed[subject], (), erasure)
                continue
            infos = tuple(
                KeyInfo(
                    k.key_id, k.offset, k.wk_id, k.created_ms, k.kek_ref, _plan_of(lost.get(k.wk_id)), bool(k.exhausted)
                )
                for k in found
            )
            states[subject] = SubjectState(subject, found[0].partition, infos, erasure)
        if warm is not None:  # a state without keys has none to warm
            chosen = {info.key_id for state in states.values() if state.keys and (info := warm(state)) is not None}
            rows = (stored for subject in wanted for stored in keys[subject] if stored.key_id in chosen)
            self._warm_stored(rows, seen)
        return states

    def current_keys(
        self,
        subjects: Sequence[str],
        pick: Callable[[Sequence[StoredKey]], StoredKey | None],
        *,
        warm: Callable[[SubjectState], KeyInfo | None] | None = None,
    ) -> tuple[dict[str, SubjectKey], dict[str, SubjectState]]:
        """The current key of each subject the table alone can answer for, unwrapped: a writer meeting subjects
        that already have keys (a pipeline's first batches) without a :class:`SubjectState` per subject.

        A subject is answered when it has no erasure marker, ``pick`` chooses one of its live keys (their rows in
        partition order, without keys declared lost; the writer's own rule for its current key) and that key's
        wrapping key is known. Every other subject (no key, an erasure marker, no key ``pick`` accepts, a wrapping
        key not applied yet or that does not open it) is returned, in order, with its state as
        :meth:`subject_states` gives it (from the same rows; ``warm`` as there), for the writer's general path,
        which says what happens to it. No key erased or declared lost while the rows were
        read is answered: the same check as :meth:`_warm_stored` (the applier commits an erasure, then evicts
        under this table's lock), and then :meth:`lookup`'s.
        """
        self._check_alive()
        wanted = list(dict.fromkeys(subjects))
        with self._lock:
            seen = self._evictions
        keys = self.store.live_keys_many(wanted)
        markers = self.store.markers_many(wanted)
        chosen: list[tuple[str, StoredKey, bytes]] = []
        rest: list[str] = []
        lost = self._lost
        for subject in wanted:
            rows = keys[subject]
            if lost and rows:
                rows = [row for row in rows if row.wk_id not in lost]
            stored = pick(rows) if rows and subject not in markers else None
            try:
                key = None if stored is None else self._unwrap(stored)
            except StrongroomError:  # the general path reports it with its own error
                key = None
            if stored is None or key is None:
                rest.append(subject)
            else:
                chosen.append((subject, stored, key))
        found: dict[str, SubjectKey] = {}
        with self._lock:
            raced = self._evictions != seen
            lost = self._lost  # and a lost marker the table applied meanwhile
            for subject, stored, key in [] if raced else chosen:
                if stored.wk_id in lost:
                    rest.append(subject)
                else:
                    found[subject] = stored_subject_key(
                        subject, stored.key_id, key, stored.wk_id, stored.partition, stored.offset, stored.created_ms
                    )
        if raced:  # an erasure was applied meanwhile: the general path looks again, at rows read again
            return {}, self.subject_states(wanted, warm=warm)
        return found, self._states(rest, keys, markers, seen, warm)

    def current_key(self, subject: str) -> SubjectKey | None:
        """The subject's current key (its first live key in partition order that is not declared lost
        and not exhausted), unwrapped; None if none."""
        self._check_alive()
        for stored in self.store.live_keys(subject):
            if stored.wk_id in self._lost or stored.exhausted:
                continue
            key = self._load(stored.key_id)
            if key is not None:
                return SubjectKey(
                    subject, stored.key_id, key, stored.wk_id, stored.partition, stored.offset,
                    created_ms=stored.created_ms,
                )  # fmt: skip
            return None
        return None

    # ------------------------------------------------------------------ the chain KEK → WK → SK
    def wrapping_keys(self) -> list[dict[str, Any]]:
        """Every wrapping key with its KEK and how many live subject keys it wraps."""
        counts = self.store.keys_per_wrapping_key()
        refused = self.refused_lost_markers()
        return [
            {
                "wk_id": wk.wk_id.hex(),
                "kek_ref": wk.edek.kek_ref,
                "created_ms": wk.created_ms,
                "subject_keys": counts.get(wk.wk_id, 0),
                "declared_lost_by_plan": _plan_of(self._lost.get(wk.wk_id)),
                "lost_marker_refused": None if wk.wk_id not in refused else refused[wk.wk_id].reason,
            }
            for wk in self.store.wrapping_keys()
        ]

    def subjects_under_kek(self, kek_ref: str) -> Iterator[str]:
        """Subjects whose keys become unreadable if ``kek_ref`` (``provider:kek-id``) is lost."""
        wk_ids = [wk.wk_id for wk in self.store.wrapping_keys() if wk.edek.kek_ref == kek_ref]
        return self.store.subjects_under(wk_ids)

    def chain_of(self, key_ids: Iterable[bytes]) -> dict[bytes, KeyChainLink]:
        """For each known (live) key id: its subject, wrapping key and that WK's EDEK (None if missing).

        No KMS call: recovery and inventory use this to follow SK → WK → KEK.
        """
        links: dict[bytes, KeyChainLink] = {}
        for key_id in dict.fromkeys(key_ids):
            stored = self.store.key(key_id)
            if stored is None:
                continue
            wk = self.store.wrapping_key(stored.wk_id)
            links[key_id] = KeyChainLink(
                key_id, stored.subject, stored.wk_id, None if wk is None else wk.edek, self._lost.get(stored.wk_id)
            )
        return links

    def kek_of_key(self, key_id: bytes) -> str | None:
        """The KEK a subject key depends on today (through its wrapping key)."""
        stored = self.store.key(key_id)
        if stored is None:
            return None
        wk = self.store.wrapping_key(stored.wk_id)
        return wk.edek.kek_ref if wk is not None else None

    def stats(self) -> dict[str, Any]:
        follower = self.follower
        with self._lock:
            lru = {"size": len(self._lru.entries), "hits": self._lru.hits, "misses": self._lru.misses}
        return {
            "reader_id": self.reader_id,
            "topic": self.topic,
            "applied": self.applied_offsets(),
            "lru": lru,
            "wrapping_keys_unwrapped": len(self._wks),
            "wrapping_keys_declared_lost": len(self._lost),
            "lost_markers_refused": [refused.to_dict() for refused in self.refused_lost_markers().values()],
            "kms_unwraps": self._wks.kms_unwraps,
            "store": {"path": str(self.store.path), "persistent": self.store.persistent, **self.store.counts()},
            "problems": list(follower.problems),
            "heartbeat_error": self.heartbeats.error,
            "heartbeat_errors": self.heartbeats.errors,
            **follower.counters,
            **self.stats_counters,
        }

    def metric_sample(self) -> KeyTableSample:
        """The figures for Prometheus (:mod:`strongroom.metrics`); the lag asks the keys topic for its ends."""
        with self._lock:
            cached, hits, misses = len(self._lru.entries), self._lru.hits, self._lru.misses
        lag: int | None = None
        try:
            applied = self.applied_offsets()
            lag = sum(max(0, high - applied.get(p, 0)) for p, (_, high) in self.follower.watermarks().items())
        except Exception as exc:  # noqa: BLE001 - the topic's end is unknown now: no lag figure, no failed scrape
            log.debug("keys topic lag unknown: %s", type(exc).__name__)
        return KeyTableSample(
            cached=cached,
            lookups=hits + misses,
            cache_hits=hits,
            erasures_applied=self.stats_counters["markers"],
            lag_records=lag,
        )

    # ------------------------------------------------------------------ erasure listeners
    def add_erasure_listener(self, listener: Callable[[ErasureNotice], None]) -> None:
        """Call ``listener`` (in the reader thread, right after the store applied it) with what each batch
        erased: key caches outside the table (the encrypt driver's, the executors' through an
        :class:`~strongroom.keys.erasure_feed.ErasureFeed`) drop those keys without waiting for a request."""
        self._erasure_listeners.append(listener)

    def _tell_listeners(self, notice: ErasureNotice) -> None:
        """A listener that fails stops the reader thread: every lookup then fails closed (no erased key
        is served by a cache that missed its notice)."""
        if not notice:
            return
        for listener in list(self._erasure_listeners):
            listener(notice)

    # ------------------------------------------------------------------ what the follower tells
    def slots_between(self, partition: int, after: int, upto: int) -> int:
        """How many seal slots (:mod:`strongroom.keys.usage`) of ``partition`` this table applied after offset
        ``after`` and at or before ``upto``."""
        return self.store.slots_between(partition, after, upto)

    def slot_offsets(self, partitions: Iterable[int]) -> dict[int, tuple[int, ...]]:
        """The offsets of the seal slots this table applied in each of ``partitions``, in order: what
        :meth:`slots_between` counts, for many keys at once (``store.slots_within``)."""
        return self.store.slot_offsets(partitions)

    def lease_outcomes(self, lease_ids: Iterable[bytes]) -> dict[bytes, bytes]:
        """Which entries of each seal-leases record were granted (one byte per entry, 1 granted), for
        records applied recently (absent: not applied yet, or long forgotten)."""
        if not self.seal_usage:
            raise KeysConfigError(
                "this key table passes seal leases over (seal_usage=False): it cannot back a writer",
                hint="give the writer a key table opened with seal_usage=True (the default)",
            )
        with self._lock:
            return {lease: self._lease_outcomes[lease] for lease in lease_ids if lease in self._lease_outcomes}

    def _on_effects(self, effects: ApplyEffects) -> None:
        """A batch was applied to the store: evict what it erased from memory, follow lost markers,
        keep the seal-lease outcomes, tell the erasure listeners."""
        if effects.lease_sets:
            with self._lock:
                for lease_id, grants in effects.lease_sets.items():
                    self._lease_outcomes[lease_id] = grants
                    self._lease_outcome_entries += len(grants)
                while self._lease_outcome_entries > _LEASE_OUTCOMES:
                    self._lease_outcome_entries -= len(self._lease_outcomes.popitem(last=False)[1])
        if effects.erased_key_ids or effects.wrapping_keys_removed:
            with self._lock:
                self._evictions += 1
                for key_id in effects.erased_key_ids:
                    self._lru.drop(key_id)
            for wk_id in effects.wrapping_keys_removed:
                self._wks.forget(wk_id)
        newly_lost = self._apply_lost(effects.lost, effects.found) if effects.lost or effects.found else False
        self.stats_counters["markers"] += len(effects.erased_subjects)
        self._tell_listeners(
            ErasureNotice(
                tuple(effects.erased_key_ids),
                tuple(effects.erased_subjects),
                everything=newly_lost or bool(effects.wrapping_keys_removed),
            )
        )
        if effects.erased_subjects:
            self._heartbeat()  # let `erasure status` see the marker applied without waiting an interval

    def _on_reset(self) -> None:
        with self._lock:
            self._lost = {}
            self._refused_lost = {}
            self._evictions += 1
            self._lru.clear()
        self._tell_listeners(ErasureNotice(everything=True))

    def _on_tick(self) -> None:
        if self.heartbeats.due():
            self._heartbeat()
        recheck = self._refused_lost and time.monotonic() - self._lost_checked_at > RECHECK_SECONDS
        if recheck and self._apply_lost([], []):  # a KEK deleted after its marker was written: honoured now
            self._tell_listeners(ErasureNotice(everything=True))

    def _apply_lost(self, lost: list[StoredLost], found: list[bytes]) -> bool:
        """Follow lost markers (and their undo) in memory: evict every unwrapped key under a lost WK.
        True when a marker made keys unreadable (listeners then drop every key they hold)."""
        in_store = {marker.wk_id: marker for marker in self.store.lost_wrapping_keys()}  # the store has the truth
        # Markers already honoured stay honoured; every other one is put to the KMS (lost_check).
        kept = {wk_id: m for wk_id, m in in_store.items() if self._lost.get(wk_id) == m}
        fresh = (m for wk_id, m in in_store.items() if wk_id not in kept)
        confirmed, refused = self._lost_check().judge(fresh, self._refused_lost)
        self._lost_checked_at = time.monotonic()
        current = {**kept, **confirmed}
        newly_lost = [marker for marker in confirmed.values() if marker.wk_id not in self._lost]
        with self._lock:
            self._lost = current
            self._refused_lost = refused
            if newly_lost:
                # Rare (an operator's decision): dropping every cached key is simpler than finding those of the WK.
                self._lru.clear()
        for marker in newly_lost:
            self._wks.forget(marker.wk_id)
            log.warning(
                "wrapping key %s declared lost by plan %s (KEK %s): its subject keys now read as lost",
                marker.wk_id.hex(), marker.plan_id, marker.kek_ref,
            )  # fmt: skip
        for wk_id in found:
            if wk_id not in current:
                log.warning("wrapping key %s is no longer declared lost: its subject keys are read again", wk_id.hex())
        self.stats_counters["lost_markers"] += len(lost)
        self.stats_counters["lost_markers_not_applied"] += len([m for m in lost if m.wk_id in refused])
        return bool(newly_lost)

    def _heartbeat(self, *, closed: bool = False, flush: bool = False) -> None:
        follower = self.follower
        self.heartbeats.send(
            store=str(self.store.path),
            persistent=self.store.persistent,
            applied=follower.applied_offsets(),
            caught_up=follower.caught_up(),
            closed=closed,
            flush=flush,
        )


def _plan_of(lost: StoredLost | None) -> str | None:
    return None if lost is None else lost.plan_id


def lost_error(key_id: bytes, subject: str, lost: StoredLost) -> SubjectKeyLost:
    """The error for a subject key under a wrapping key declared lost (names the plan, never the subject)."""
    return SubjectKeyLost(
        f"subject key {key_id.hex()} of subject {subject_fingerprint(subject.encode('utf-8'))} was declared lost "
        f"by plan {lost.plan_id}: its wrapping key {lost.wk_id.hex()} depends on KEK {lost.kek_ref or '(unknown)'}, "
        f"which is lost ({lost.reason})",
        key_id=key_id,
        wk_id=lost.wk_id,
        plan_id=lost.plan_id,
    )
