"""The key table's local store: SQLite (stdlib) holding what the keys topic says, minus erased keys.

Why a store at all: 10M subjects must not need 10M unwrapped keys in RAM. The store keeps the
*wrapped* subject keys (wrapped by a wrapping key, never plaintext), the wrapping keys' EDEKs (wrapped
by the KMS), the erasure markers and the ids of erased keys; the key table keeps only an LRU of
unwrapped keys in memory.

Erased keys must not linger on disk, so the database runs with ``secure_delete=ON`` (deleted rows are
overwritten with zeros, not left in free pages), ``journal_mode=MEMORY`` (no rollback journal or WAL
file that would keep the old page content after a delete) and ``temp_store=MEMORY``. What remains is
outside SQLite's reach: copy-on-write filesystems and SSD wear levelling may keep old blocks; the
store is therefore a temporary directory removed at close by default, and even a leaked store holds
only wrapped keys (a KMS call away from usable, and only while the KMS still holds the KEK).

A persistent store (``path=`` given) resumes from the offsets it stored with the data in the same
transaction. A crash in the middle of a transaction (no on-disk journal) can damage it; it is then
detected at open (``quick_check``) and rebuilt from the keys topic.

Apply semantics (records must be applied in partition order):
- subject key → stored, unless an erasure marker of its subject at a higher offset is already applied
  (so re-applying old records can never resurrect an erased subject's key; the key table also never
  applies an offset twice, since offsets are stored in the same transaction as the data);
- subject-key tombstone → the key is deleted and its id remembered as erased;
- erasure marker at offset m → every stored key of the subject with offset < m is deleted and its id
  remembered as erased; the marker is kept (later keys are a new generation, see the policies);
- lost marker → the wrapping key is remembered as declared lost (its subject keys stay stored: the
  marker can be undone); its tombstone forgets that. Marker and tombstone live in the WK's partition,
  so the later one wins.

Schema 2 added lost markers. A schema-1 store was written by a strongroom that skipped lost markers
as unknown records, so it is rebuilt from the keys topic once (like a damaged store).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sqlite3
import tempfile
import threading
import time
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path
from typing import Any, Final, NamedTuple

from strongroom.keys.errors import KeysConfigError
from strongroom.keys.records import (
    ErasureMarker,
    KeysRecord,
    LayoutRecord,
    LostMarker,
    LostMarkerTombstone,
    SealLease,
    SealLeases,
    SealSlot,
    SubjectKeyRecord,
    SubjectKeyRow,
    SubjectKeyTombstone,
    WrappingKeyRecord,
    WrappingKeyTombstone,
    wk_edek_context,
)
from strongroom.kms.api import Edek
from strongroom.runtime import pid_alive, release_free_heap, untracked

SCHEMA_VERSION: Final = "7"
TEMP_PREFIX: Final = "strongroom-keytable-"
_TEMP_DIR_RE: Final = re.compile(rf"^{TEMP_PREFIX}(\d+)-")

_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS offsets (partition INTEGER PRIMARY KEY, next_offset INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS wrapping_keys (
    wk_id BLOB PRIMARY KEY, provider TEXT NOT NULL, kek_id TEXT NOT NULL, ciphertext BLOB NOT NULL,
    created INTEGER NOT NULL, partition INTEGER NOT NULL, offset INTEGER NOT NULL, bound INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS subject_keys (
    key_id BLOB PRIMARY KEY NOT NULL, subject TEXT NOT NULL, wk_id BLOB NOT NULL, wrapped BLOB NOT NULL,
    partition INTEGER NOT NULL, offset INTEGER NOT NULL, created INTEGER NOT NULL, kek_ref TEXT NOT NULL,
    exhausted INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS subject_keys_by_subject ON subject_keys (subject, offset);
CREATE TABLE IF NOT EXISTS seal_counts (key_id BLOB PRIMARY KEY, sealed INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS seal_slots (
    partition INTEGER NOT NULL, offset INTEGER NOT NULL, PRIMARY KEY (partition, offset)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS markers (
    subject TEXT PRIMARY KEY, partition INTEGER NOT NULL, offset INTEGER NOT NULL,
    request_id TEXT NOT NULL, requested_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS erased_keys (key_id BLOB PRIMARY KEY, subject TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS lost_wrapping_keys (
    wk_id BLOB PRIMARY KEY, partition INTEGER NOT NULL, offset INTEGER NOT NULL, kek_ref TEXT NOT NULL,
    reason TEXT NOT NULL, plan_id TEXT NOT NULL, declared_by TEXT NOT NULL, declared_at INTEGER NOT NULL
) WITHOUT ROWID;
"""
_TABLES: Final = ("offsets", "wrapping_keys", "subject_keys", "seal_counts", "seal_slots", "markers",
                   "erased_keys", "lost_wrapping_keys")  # fmt: skip

#: A key record written again under a live key's id (strongroom never does; a keys-topic writer could)
#: takes the new record's values but keeps the key's first offset and its exhausted flag: the seal slots
#: after a key count from its first record (:mod:`strongroom.keys.usage`), so a repeated record cannot
#: open a key's slot window again.
_ON_REPEATED_KEY: Final = """
ON CONFLICT (key_id) DO UPDATE SET subject = excluded.subject, wk_id = excluded.wk_id, wrapped = excluded.wrapped,
    partition = excluded.partition, offset = min(offset, excluded.offset), created = excluded.created,
    kek_ref = excluded.kek_ref
"""
_INSERT_KEY: Final = f"""
INSERT INTO subject_keys (key_id, subject, wk_id, wrapped, partition, offset, created, kek_ref)
SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8
WHERE NOT EXISTS (SELECT 1 FROM markers m WHERE m.subject = ?2 AND m.offset > ?6)
{_ON_REPEATED_KEY}"""  # noqa: S608 - constant clauses, values bound


_INSERT_NEW_KEY: Final = f"""
INSERT INTO subject_keys (key_id, subject, wk_id, wrapped, partition, offset, created, kek_ref)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
{_ON_REPEATED_KEY}"""  # noqa: S608 - constant clauses, values bound
_KEY_COLUMNS = "key_id, subject, wk_id, wrapped, partition, offset, created, kek_ref, exhausted"
#: Page cache of the store's connection. A catch-up appends its subject keys to the table and inserts at
#: random places of two indexes (key id, subject); with their inner pages cached, each insert touches about
#: one leaf page per index. A bound, not a share of the store: the same at one million subjects and at ten.
_CACHE_KIB: Final = 65536
#: A transaction this large keeps the original of every page it changes in SQLite's in-memory journal
#: (journal_mode=MEMORY: no copy of a key on disk): tens of MiB for 20,000 new keys (87 MiB at 1M subjects
#: while the table itself was ordered by key id, store schema 6). Freed at commit, but glibc keeps it in the
#: applying thread's arena, so the peak would stay resident and grow with the store; after such a transaction
#: the freed heap goes back to the OS, at most once per _TRIM_INTERVAL_S (giving it back and faulting it in
#: again costs a few ms).
_TRIM_AFTER_RECORDS: Final = 1000
_TRIM_INTERVAL_S: Final = 1.0
#: Applies share one transaction until it holds this many records or is this old (or an apply holds anything
#: but keys, leases and slots: see :meth:`KeyStore.apply`). A commit writes every page the transaction changed,
#: and new keys land on random pages of two indexes: a writer's read-back of a few hundred keys at a time,
#: committed each time, wrote about a page per key (20–22 µs a key against 11–13 in transactions of 20,000;
#: docs/benchmarks.md). The same bound as a catch-up's fetch, so the in-memory journal stays as large as before.
_COMMIT_RECORDS: Final = 20_000
_COMMIT_AFTER_S: Final = 0.5

#: What :meth:`KeyStore.apply` takes: a record at its place, or a decoded subject-key row.
ApplyItem = tuple[int, int, KeysRecord] | SubjectKeyRow
#: What a lease decides on, per key: ``(partition, offset, seals counted, exhausted)``.
LeaseState = tuple[int, int, int, int]


def _row_of(record: SubjectKeyRecord, partition: int, offset: int) -> SubjectKeyRow:
    return (record.key_id, record.subject, record.wk_id, record.wrapped_sk, partition, offset, record.created_ms,
            record.kek_ref)  # fmt: skip


def _insert_keys(
    db: sqlite3.Connection, rows: list[SubjectKeyRow], lease_states: dict[bytes, LeaseState], any_marker: bool
) -> None:
    """Insert subject keys; those of subjects with an erasure marker only if no later marker erased them
    (the marker check per row costs a third of the insert, and nearly no subject has a marker). With no
    marker in the store at all (``any_marker`` False) there is nothing to look up."""
    rows.sort(key=itemgetter(0))  # stable: two records of one key id keep their order (the later wins)
    if lease_states:
        for row in rows:
            lease_states.pop(row[0], None)
    marked: set[str] = set()
    subjects = list({row[1] for row in rows}) if any_marker else []
    for start in range(0, len(subjects), 500):
        chunk = subjects[start : start + 500]
        query = f"SELECT subject FROM markers WHERE subject IN ({','.join('?' * len(chunk))})"  # noqa: S608
        marked.update(subject for (subject,) in db.execute(query, chunk))
    if not marked:
        db.executemany(_INSERT_NEW_KEY, rows)
        return
    db.executemany(_INSERT_NEW_KEY, [row for row in rows if row[1] not in marked])
    db.executemany(_INSERT_KEY, [row for row in rows if row[1] in marked])


class StoredKey(NamedTuple):
    """A subject key as stored: still wrapped by its wrapping key. A named tuple, not a frozen dataclass: it is
    built for every row a lookup reads (about 0.5 µs against 1.5–2 µs)."""

    key_id: bytes
    subject: str
    wk_id: bytes
    wrapped: bytes
    partition: int
    offset: int
    created_ms: int
    kek_ref: str
    #: A seal lease was denied or reached the bound (:mod:`strongroom.keys.usage`): never a current key again.
    exhausted: int = 0

    def __repr__(self) -> str:
        return f"StoredKey(key_id={self.key_id.hex()}, partition={self.partition}, offset={self.offset})"


@dataclass(frozen=True, slots=True)
class StoredMarker:
    subject: str
    partition: int
    offset: int
    request_id: str
    requested_at_ms: int


@dataclass(frozen=True, slots=True)
class StoredWrappingKey:
    wk_id: bytes
    edek: Edek
    created_ms: int
    partition: int
    offset: int


@dataclass(frozen=True, slots=True)
class StoredLost:
    """A wrapping key declared lost, as its applied lost marker says."""

    wk_id: bytes
    partition: int
    offset: int
    kek_ref: str
    reason: str
    plan_id: str
    declared_by: str
    declared_at_ms: int


@dataclass
class ApplyEffects:
    """What a batch changed that in-memory caches must follow."""

    erased_key_ids: list[bytes] = field(default_factory=list)
    erased_subjects: list[str] = field(default_factory=list)
    wrapping_keys_removed: list[bytes] = field(default_factory=list)
    #: Lost markers applied (the latest per WK) and WKs whose marker was tombstoned, in apply order.
    lost: list[StoredLost] = field(default_factory=list)
    found: list[bytes] = field(default_factory=list)
    layout: LayoutRecord | None = None
    #: Seal leases applied: lease id → granted.
    leases: dict[bytes, bool] = field(default_factory=dict)
    #: Seal-leases records applied: lease id → one byte per entry, 1 granted, 0 denied.
    lease_sets: dict[bytes, bytes] = field(default_factory=dict)


def remove_orphaned_temp_stores(base: Path | None = None) -> list[Path]:
    """Remove temporary stores left by key tables of processes that died without closing (kill -9)."""
    base = base or Path(tempfile.gettempdir())
    removed: list[Path] = []
    with contextlib.suppress(OSError):
        for entry in base.iterdir():
            match = _TEMP_DIR_RE.match(entry.name)
            if match and entry.is_dir() and not pid_alive(int(match.group(1))):
                shutil.rmtree(entry, ignore_errors=True)
                removed.append(entry)
    return removed


class KeyStore:
    """One SQLite database; every method is safe to call from any thread (one connection, one lock)."""

    def __init__(self, path: Path | None, *, topic: str, temp_base: Path | None = None) -> None:
        self.topic = topic
        self.persistent = path is not None
        self.rebuilt = False
        if path is None:
            remove_orphaned_temp_stores(temp_base)
            self._dir: Path | None = Path(tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}{os.getpid()}-", dir=temp_base))
            self.path = self._dir / "keys.sqlite"
        else:
            self._dir = None
            self.path = Path(path)
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._trimmed = 0.0
        #: The open transaction that applies share (:meth:`apply`): when it began and how many records it holds.
        self._open_since: float | None = None
        self._open_records = 0
        #: key id → (partition, offset, seals counted, exhausted) as applied, from reads of live keys: the
        #: lease records that follow those reads (a writer leases the keys it just looked up) find them here
        #: instead of in SQLite. Every change of a key's row or count removes its entry (see LeaseRun).
        self._lease_states: OrderedDict[bytes, LeaseState] = OrderedDict()
        self._db = self._open()
        #: Whether the store holds an erasure marker (markers are only ever added, until a reset): without one,
        #: new keys and batches of subject states need no marker lookup. Set before a marker is applied.
        self._any_marker = self._db.execute("SELECT 1 FROM markers LIMIT 1").fetchone() is not None
        #: partition → offsets of its seal slots, ascending (a few per writer start: kept in memory)
        self._slots = self._stored_slots()
        self._closed = False

    # ------------------------------------------------------------------ opening
    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        db.execute("PRAGMA secure_delete=ON")
        db.execute("PRAGMA journal_mode=MEMORY")
        db.execute("PRAGMA synchronous=OFF")
        db.execute("PRAGMA temp_store=MEMORY")
        db.execute(f"PRAGMA cache_size=-{_CACHE_KIB}")
        return db

    def _open(self) -> sqlite3.Connection:
        existed = self.path.exists() and self.path.stat().st_size > 0
        db = self._connect()
        if existed:
            healthy = False
            with contextlib.suppress(sqlite3.DatabaseError):
                healthy = db.execute("PRAGMA quick_check").fetchone()[0] == "ok"
            if not healthy:
                db.close()
                self._wipe_file()
                self.rebuilt = True
                db = self._connect()
        db.executescript(_SCHEMA)
        row = db.execute("SELECT v FROM meta WHERE k = 'topic'").fetchone()
        if row is None:
            db.execute("INSERT INTO meta VALUES ('topic', ?), ('schema', ?)", (self.topic, SCHEMA_VERSION))
        elif row[0] != self.topic:
            db.close()
            raise KeysConfigError(
                f"key store {self.path} belongs to keys topic {row[0]!r}, not {self.topic!r}",
                hint="give each keys topic its own store path",
            )
        else:
            schema = db.execute("SELECT v FROM meta WHERE k = 'schema'").fetchone()
            if schema is None or schema[0] != SCHEMA_VERSION:
                # An older store skipped record kinds it did not know (lost markers) or lacks columns
                # (EDEK bindings): new tables, read everything again.
                for table in _TABLES:
                    db.execute(f"DROP TABLE IF EXISTS {table}")  # fixed table names
                db.executescript(_SCHEMA)
                db.execute("INSERT OR REPLACE INTO meta VALUES ('schema', ?)", (SCHEMA_VERSION,))
                self.rebuilt = True
        if os.name == "posix":
            with contextlib.suppress(OSError):
                os.chmod(self.path, 0o600)
        return db

    def _stored_slots(self) -> dict[int, list[int]]:
        slots: dict[int, list[int]] = {}
        for partition, offset in self._db.execute("SELECT partition, offset FROM seal_slots ORDER BY 1, 2"):
            slots.setdefault(partition, []).append(offset)
        return slots

    def _wipe_file(self) -> None:
        for suffix in ("", "-journal", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                Path(str(self.path) + suffix).unlink()

    def reset(self) -> None:
        """Forget everything (the keys topic was recreated): the next read starts from the beginning."""
        with self._lock:
            self._commit()
            self._clear(self._db)
            self._any_marker = False
            self._lease_states.clear()
            self._slots.clear()
            self.rebuilt = True

    @staticmethod
    def _clear(db: sqlite3.Connection) -> None:
        db.execute("BEGIN")
        for table in _TABLES:
            db.execute(f"DELETE FROM {table}")  # noqa: S608 - fixed table names
        db.execute("COMMIT")

    # ------------------------------------------------------------------ applying
    def next_offsets(self) -> dict[int, int]:
        with self._lock:
            return dict(self._db.execute("SELECT partition, next_offset FROM offsets").fetchall())

    def slots_between(self, partition: int, after: int, upto: int) -> int:
        """How many seal slots of ``partition`` lie after offset ``after`` and at or before ``upto``."""
        with self._lock:
            return slots_within(self._slots.get(partition, ()), after, upto)

    def slot_offsets(self, partitions: Iterable[int]) -> dict[int, tuple[int, ...]]:
        """The offsets of every seal slot applied in each of ``partitions``, in order (a copy, for
        :func:`slots_within` over many keys without a lock each)."""
        with self._lock:
            return {partition: tuple(self._slots.get(partition, ())) for partition in partitions}

    def apply(self, records: Sequence[ApplyItem], next_offsets: dict[int, int]) -> ApplyEffects:
        """Apply records in order, and store ``next_offsets``, all or nothing.

        Each item is ``(partition, offset, record)`` or a subject-key row as the follower decodes it
        (:func:`~strongroom.keys.records.subject_key_row`). Consecutive subject keys are inserted in one
        ``executemany``, sorted by key id (neighbouring pages of the key-id index, fewer page visits); their
        order among themselves does not matter, only their order against other records, which is kept.

        Applies share one transaction, committed once it holds :data:`_COMMIT_RECORDS` records or is
        :data:`_COMMIT_AFTER_S` old (:meth:`commit_if_due`, which the reader calls between fetches too), and at
        once after an apply that holds anything but subject keys, seal leases and seal slots (an erasure's
        deletions reach the file without delay). Each apply is a savepoint: a failing one leaves the
        applies before it as they were. Reads share the connection, so they see every apply at once; a
        crash loses at most the uncommitted applies, and their offsets with them, so the store resumes
        where its data ends.
        """
        effects = ApplyEffects()
        with self._lock:
            db = self._db
            if self._open_since is None:
                db.execute("BEGIN")
                self._open_since, self._open_records = time.monotonic(), 0
            db.execute("SAVEPOINT apply")
            prompt = False  # an erasure, a wrapping key, a layout: commit at once
            try:
                pending: list[SubjectKeyRow] = []
                leases: LeaseRun | None = None  # the seal counts a run of consecutive lease records changed
                slots: list[tuple[int, int]] = []
                for item in records:
                    record = item[2] if len(item) == 3 else None
                    if leases is not None and not isinstance(record, SealLease | SealLeases):
                        leases.write()  # every other record sees the counts first
                        leases = None
                    if len(item) == 8:
                        pending.append(item)
                        continue
                    partition, offset, record = item
                    if isinstance(record, SubjectKeyRecord):
                        pending.append(_row_of(record, partition, offset))
                        continue
                    if pending:
                        _insert_keys(db, pending, self._lease_states, self._any_marker)
                        pending = []
                    if isinstance(record, SealLease | SealLeases):
                        leases = leases or LeaseRun(db, self._lease_states)
                        _apply_lease_record(leases, partition, offset, record, effects)
                    elif isinstance(record, SealSlot):
                        slots.append((partition, offset))
                    else:
                        if isinstance(record, ErasureMarker):
                            self._any_marker = True
                        prompt = True
                        self._apply_one(db, partition, offset, record, effects, self._lease_states)
                if leases is not None:
                    leases.write()
                if pending:
                    _insert_keys(db, pending, self._lease_states, self._any_marker)
                db.executemany("INSERT OR IGNORE INTO seal_slots (partition, offset) VALUES (?, ?)", slots)
                db.executemany(
                    "INSERT OR REPLACE INTO offsets (partition, next_offset) VALUES (?, ?)", next_offsets.items()
                )
                db.execute("RELEASE apply")
                untracked(self._lease_states)  # key ids and counts: no reference cycle for the collector to walk
                for partition, offset in slots:  # in partition order, after every slot applied before
                    known = self._slots.setdefault(partition, [])
                    if not known or known[-1] < offset:
                        known.append(offset)
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK TO apply")
                    db.execute("RELEASE apply")
                    self._lease_states.clear()  # it may name keys whose changes were just undone
                else:  # SQLite rolled the whole transaction back itself (disk full, I/O error): so are the
                    self._transaction_lost()  # applies before this one; the error says why
                raise
            self._open_records += len(records)
            committed = self._commit() if prompt or self._open_records >= _COMMIT_RECORDS else self._commit_if_due()
        self._release_heap_after(committed)
        return effects

    def commit_if_due(self) -> None:
        """Commit the applies' open transaction once it is :data:`_COMMIT_AFTER_S` old."""
        self._release_heap_after(self._commit_if_due())

    def commit(self) -> None:
        """Commit the applies' open transaction, if there is one."""
        self._release_heap_after(self._commit())

    def _commit_if_due(self) -> int:
        with self._lock:
            if self._open_since is not None and time.monotonic() - self._open_since >= _COMMIT_AFTER_S:
                return self._commit()
            return 0

    def _commit(self) -> int:
        """Commit the open transaction; how many records it held (0: none was open)."""
        with self._lock:
            if self._open_since is None:
                return 0
            try:
                self._db.execute("COMMIT")
            except BaseException:
                if not self._db.in_transaction:
                    self._transaction_lost()
                raise
            self._open_since = None
            records, self._open_records = self._open_records, 0
            return records

    def _transaction_lost(self) -> None:
        """SQLite rolled the open transaction back on an error (``SQLITE_FULL``, ``SQLITE_IOERR``): every apply
        since the last commit is undone, offsets included. The next apply begins a new transaction; the reader,
        which saw the error, stops (the table fails closed) and a new one resumes from what the file holds."""
        self._open_since = None
        self._open_records = 0
        self._lease_states.clear()
        self._slots = self._stored_slots()

    def _release_heap_after(self, records: int) -> None:
        """After a large transaction, give the journal's freed heap back to the OS (outside the lock)."""
        if records >= _TRIM_AFTER_RECORDS and time.monotonic() - self._trimmed >= _TRIM_INTERVAL_S:
            release_free_heap()
            self._trimmed = time.monotonic()

    @staticmethod
    def _apply_one(
        db: sqlite3.Connection,
        partition: int,
        offset: int,
        record: KeysRecord,
        effects: ApplyEffects,
        lease_states: dict[bytes, LeaseState],
    ) -> None:
        if isinstance(record, SubjectKeyTombstone):
            db.execute("DELETE FROM subject_keys WHERE key_id = ?", (record.key_id,))
            db.execute("DELETE FROM seal_counts WHERE key_id = ?", (record.key_id,))
            lease_states.pop(record.key_id, None)
            db.execute("INSERT OR IGNORE INTO erased_keys VALUES (?, ?)", (record.key_id, record.subject))
            effects.erased_key_ids.append(record.key_id)
        elif isinstance(record, ErasureMarker):
            doomed = db.execute(
                "SELECT key_id FROM subject_keys WHERE subject = ? AND offset < ?", (record.subject, offset)
            ).fetchall()
            db.executemany("INSERT OR IGNORE INTO erased_keys VALUES (?, ?)", [(k, record.subject) for (k,) in doomed])
            db.execute("DELETE FROM subject_keys WHERE subject = ? AND offset < ?", (record.subject, offset))
            db.executemany("DELETE FROM seal_counts WHERE key_id = ?", doomed)
            for (key_id,) in doomed:
                lease_states.pop(bytes(key_id), None)
            db.execute(
                "INSERT INTO markers VALUES (?, ?, ?, ?, ?) ON CONFLICT (subject) DO UPDATE SET "
                "partition = excluded.partition, offset = excluded.offset, request_id = excluded.request_id, "
                "requested_at = excluded.requested_at WHERE excluded.offset > markers.offset",
                (record.subject, partition, offset, record.request_id, record.requested_at_ms),
            )
            effects.erased_key_ids.extend(k for (k,) in doomed)
            effects.erased_subjects.append(record.subject)
        elif isinstance(record, WrappingKeyRecord):
            edek = record.edek
            db.execute(
                "INSERT OR REPLACE INTO wrapping_keys VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (record.wk_id, edek.provider, edek.kek_id, edek.ciphertext, record.created_ms, partition, offset,
                 int(bool(edek.context))),
            )  # fmt: skip
        elif isinstance(record, WrappingKeyTombstone):
            db.execute("DELETE FROM wrapping_keys WHERE wk_id = ?", (record.wk_id,))
            effects.wrapping_keys_removed.append(record.wk_id)
        elif isinstance(record, LostMarker):
            lost = StoredLost(
                record.wk_id, partition, offset, record.kek_ref, record.reason, record.plan_id,
                record.declared_by, record.declared_at_ms,
            )  # fmt: skip
            db.execute(
                "INSERT OR REPLACE INTO lost_wrapping_keys VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (lost.wk_id, lost.partition, lost.offset, lost.kek_ref, lost.reason, lost.plan_id,
                 lost.declared_by, lost.declared_at_ms),
            )  # fmt: skip
            effects.lost.append(lost)
        elif isinstance(record, LostMarkerTombstone):
            db.execute("DELETE FROM lost_wrapping_keys WHERE wk_id = ?", (record.wk_id,))
            effects.found.append(record.wk_id)
        elif isinstance(record, LayoutRecord):
            db.execute("INSERT OR REPLACE INTO meta VALUES ('partitions', ?)", (str(record.partitions),))
            effects.layout = record

    # ------------------------------------------------------------------ queries
    def key(self, key_id: bytes) -> StoredKey | None:
        with self._lock:
            row = self._db.execute(
                f"SELECT {_KEY_COLUMNS} FROM subject_keys WHERE key_id = ?",  # noqa: S608 - constant columns
                (key_id,),
            ).fetchone()
        return StoredKey(*row) if row else None

    def _select_in(self, query: str, values: Sequence[Any], suffix: str = "") -> Iterator[tuple[Any, ...]]:
        """Rows of ``query WHERE … IN (values)`` in chunks of 500 values (SQLite's parameter limit)."""
        for placeholders, chunk in _in_chunks(values):
            with self._lock:
                rows = self._db.execute(f"{query} IN ({placeholders}){suffix}", chunk).fetchall()
            yield from rows

    def keys_many(self, key_ids: Sequence[bytes]) -> dict[bytes, StoredKey]:
        """:meth:`key` for many key ids in few queries (absent ids are left out)."""
        rows = self._select_in(f"SELECT {_KEY_COLUMNS} FROM subject_keys WHERE key_id", key_ids)  # noqa: S608
        return {bytes(row[0]): StoredKey(*row) for row in rows}

    def live_keys(self, subject: str) -> list[StoredKey]:
        """The subject's stored keys in partition order (the first is the current key)."""
        with self._lock:
            rows = self._db.execute(
                f"SELECT {_KEY_COLUMNS} FROM subject_keys WHERE subject = ? ORDER BY offset",  # noqa: S608
                (subject,),
            ).fetchall()
        return [StoredKey(*row) for row in rows]

    def live_keys_many(self, subjects: Sequence[str]) -> dict[str, list[StoredKey]]:
        """:meth:`live_keys` for many subjects in few queries (key creation checks a whole batch). Their lease
        states are kept for the seal leases that follow (``_lease_states``)."""
        found: dict[str, list[StoredKey]] = {s: [] for s in subjects}
        states = self._lease_states
        for placeholders, chunk in _in_chunks(subjects):
            with self._lock:  # read and kept in one hold: no record is applied in between
                rows = self._db.execute(f"{_LIVE_KEYS} ({placeholders}) ORDER BY k.subject, k.offset", chunk)
                for *columns, sealed in rows:
                    stored = StoredKey(*columns)
                    found[stored.subject].append(stored)
                    if len(states) >= _LEASE_STATES_MAX:
                        states.popitem(last=False)  # the oldest (a dict's first item costs a scan)
                    states[stored.key_id] = (stored.partition, stored.offset, sealed, stored.exhausted)
                untracked(states)  # key ids and counts: no reference cycle for the collector to walk
        return found

    def markers_many(self, subjects: Sequence[str]) -> dict[str, StoredMarker]:
        if not self._any_marker:
            return {}
        query = "SELECT subject, partition, offset, request_id, requested_at FROM markers WHERE subject"
        return {row[0]: StoredMarker(*row) for row in self._select_in(query, subjects)}

    def marker(self, subject: str) -> StoredMarker | None:
        with self._lock:
            row = self._db.execute(
                "SELECT subject, partition, offset, request_id, requested_at FROM markers WHERE subject = ?",
                (subject,),
            ).fetchone()
        return StoredMarker(*row) if row else None

    def erased_subject_of(self, key_id: bytes) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT subject FROM erased_keys WHERE key_id = ?", (key_id,)).fetchone()
        return row[0] if row else None

    def wrapping_key(self, wk_id: bytes) -> StoredWrappingKey | None:
        with self._lock:
            row = self._db.execute(
                "SELECT wk_id, provider, kek_id, ciphertext, created, partition, offset, bound "
                "FROM wrapping_keys WHERE wk_id = ?",
                (wk_id,),
            ).fetchone()
        return _wk(row) if row else None

    def wrapping_keys(self) -> list[StoredWrappingKey]:
        with self._lock:
            rows = self._db.execute(
                "SELECT wk_id, provider, kek_id, ciphertext, created, partition, offset, bound FROM wrapping_keys"
            ).fetchall()
        return [_wk(row) for row in rows]

    def wrapping_key_ids_elsewhere(self, provider: str, kek_id: str | None) -> set[bytes]:
        """The ids of the wrapping keys that a KEK other than ``provider:kek_id`` wraps now (after any
        rewrap); ``kek_id`` None: those of every other KMS."""
        with self._lock:
            if kek_id is None:
                query = "SELECT wk_id FROM wrapping_keys WHERE provider != ?"
                rows = self._db.execute(query, (provider,)).fetchall()
            else:
                query = "SELECT wk_id FROM wrapping_keys WHERE NOT (provider = ? AND kek_id = ?)"
                rows = self._db.execute(query, (provider, kek_id)).fetchall()
        return {bytes(row[0]) for row in rows}

    def has_wrapping_keys(self, provider: str) -> bool:
        """Whether any wrapping key of KMS ``provider`` is known."""
        with self._lock:
            row = self._db.execute("SELECT 1 FROM wrapping_keys WHERE provider = ? LIMIT 1", (provider,)).fetchone()
        return row is not None

    def subjects_under(self, wk_ids: Iterable[bytes]) -> Iterator[str]:
        """Distinct subjects with a live key wrapped by one of ``wk_ids``."""
        ids = list(wk_ids)
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            with self._lock:
                rows = self._db.execute(
                    f"SELECT DISTINCT subject FROM subject_keys WHERE wk_id IN ({marks})",  # noqa: S608
                    chunk,
                ).fetchall()
            yield from (row[0] for row in rows)

    def lost_wrapping_keys(self) -> list[StoredLost]:
        """Every wrapping key whose latest lost marker is applied and not tombstoned."""
        with self._lock:
            rows = self._db.execute(
                "SELECT wk_id, partition, offset, kek_ref, reason, plan_id, declared_by, declared_at "
                "FROM lost_wrapping_keys ORDER BY partition, offset"
            ).fetchall()
        return [StoredLost(*row) for row in rows]

    def keys_per_wrapping_key(self) -> dict[bytes, int]:
        with self._lock:
            return dict(self._db.execute("SELECT wk_id, count(*) FROM subject_keys GROUP BY wk_id").fetchall())

    def seal_usage(self) -> dict[bytes, tuple[int, int]]:
        """Each live key's seals leased so far and whether it is exhausted (1), as :class:`LeaseRun` left them."""
        with self._lock:
            rows = self._db.execute(f"SELECT k.key_id, {_COUNT}, k.exhausted FROM {_KEYS_COUNTED}").fetchall()  # noqa: S608
        return {bytes(key_id): (int(sealed), int(exhausted)) for key_id, sealed, exhausted in rows}

    def layout_partitions(self) -> int | None:
        with self._lock:
            row = self._db.execute("SELECT v FROM meta WHERE k = 'partitions'").fetchone()
        return int(row[0]) if row else None

    def counts(self) -> dict[str, int]:
        with self._lock:
            db = self._db
            return {
                "subject_keys": db.execute("SELECT count(*) FROM subject_keys").fetchone()[0],
                "wrapping_keys": db.execute("SELECT count(*) FROM wrapping_keys").fetchone()[0],
                "erasure_markers": db.execute("SELECT count(*) FROM markers").fetchone()[0],
                "erased_keys": db.execute("SELECT count(*) FROM erased_keys").fetchone()[0],
                "lost_wrapping_keys": db.execute("SELECT count(*) FROM lost_wrapping_keys").fetchone()[0],
            }

    def pragma(self, name: str) -> object:
        if not re.fullmatch(r"[a-z_]+", name):
            raise ValueError(f"not a pragma name: {name!r}")
        with self._lock:
            return self._db.execute(f"PRAGMA {name}").fetchone()[0]

    # ------------------------------------------------------------------ closing
    def close(self) -> None:
        """Close; a temporary store's directory is removed (a persistent one stays for the next start)."""
        with self._lock:
            if self._closed:
                return
            self._commit()
            self._closed = True
            self._db.close()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)


def _apply_lease_record(
    leases: LeaseRun, partition: int, offset: int, record: SealLease | SealLeases, effects: ApplyEffects
) -> None:
    if isinstance(record, SealLeases):
        effects.lease_sets[record.lease_id] = leases.apply(partition, offset, record)
        return
    # A single lease (earlier versions wrote one per key): a seal-leases record of one entry.
    one = SealLeases(record.lease_id, ((record.key_id, record.seals),), record.max_seals, record.requested_at_ms)
    effects.leases[record.lease_id] = leases.apply(partition, offset, one) == b"\x01"


def slots_within(offsets: Sequence[int], after: int, upto: int) -> int:
    """How many of the sorted slot ``offsets`` lie after ``after`` and at or before ``upto``."""
    return bisect_right(offsets, upto) - bisect_right(offsets, after)


def _in_chunks(values: Sequence[Any]) -> Iterator[tuple[str, list[Any]]]:
    """``values`` in chunks of 500 (SQLite's parameter limit), each with its ``?,?,…`` placeholders: the
    values are bound, never inlined."""
    for start in range(0, len(values), 500):
        chunk = list(values[start : start + 500])
        yield ",".join("?" * len(chunk)), chunk


class LeaseRun:
    """The seal counts of the keys that a run of consecutive seal-lease records names, inside one
    transaction: each key's row is read once and written back once (:meth:`write`), however many records
    of the run lease it.

    A cold key table applies every lease ever written, and every writer start leases each key it uses
    again, so the same keys come back record after record (a catch-up of 500,000 entries over 100,000
    keys: 12–14 s record by record, 7–9 s by runs; docs/benchmarks.md). The decisions are the same as
    record by record: each record sees the counts the records before it left. The caller writes the run
    back before any other record (a key, an erasure, ...) is applied, so nothing else sees stale counts.

    The counts live in their own narrow table (``seal_counts``: key id and count, 30-odd bytes a row), not in
    the key rows (150-odd bytes with the wrapped key, subject and KEK): writing a run back rewrites small rows
    on few pages, and a key row is rewritten only when its key is spent (``exhausted``, which lookups read).
    """

    #: Keys held (read, or found absent) before the run writes back and starts again (about 220 bytes each:
    #: 22 MB at most).
    MAX_KEYS: Final = 100_000

    def __init__(self, db: sqlite3.Connection, known: dict[bytes, LeaseState]) -> None:
        self._db = db
        #: The store's committed lease states from reads (never added to here: this transaction may roll back).
        self._known = known
        #: key id → [partition, offset, sealed, exhausted] of the keys read so far
        self._keys: dict[bytes, list[int]] = {}
        self._absent: set[bytes] = set()
        self._changed: set[bytes] = set()
        self._spent: list[bytes] = []  # keys this run exhausted

    def apply(self, partition: int, offset: int, leases: SealLeases) -> bytes:
        """Grant each entry, in order, if its key (live, in this partition, written before the record, not
        exhausted) stays within the record's bound with it; an entry that does not fit marks the key
        exhausted. Every reader decides the same. One byte per entry, 1 granted."""
        if len(self._keys) + len(self._absent) > self.MAX_KEYS:
            self.write()
        self._read(leases.entries)
        keys, changed = self._keys, self._changed
        granted = bytearray(len(leases.entries))
        bound = leases.max_seals
        for index, (key_id, seals) in enumerate(leases.entries):
            key = keys.get(key_id)
            if key is None or key[3] or key[0] != partition or key[1] >= offset:
                continue
            changed.add(key_id)
            sealed = key[2] + seals
            if sealed <= bound:
                granted[index] = 1
                key[2] = sealed
            if sealed >= bound:  # denied, or granted up to the bound exactly: the key is spent
                key[3] = 1
                self._spent.append(key_id)
        return bytes(granted)

    def write(self) -> None:
        """Write the changed counts back and forget what was read (the next record reads them again)."""
        keys = self._keys
        self._db.executemany(
            "INSERT OR REPLACE INTO seal_counts (key_id, sealed) VALUES (?, ?)",
            [(key_id, keys[key_id][2]) for key_id in self._changed],
        )
        self._db.executemany("UPDATE subject_keys SET exhausted = 1 WHERE key_id = ?", [(k,) for k in self._spent])
        known = self._known
        if known:
            for key_id in self._changed:
                known.pop(key_id, None)
        keys.clear()
        self._absent.clear()
        self._changed.clear()
        self._spent.clear()

    def _read(self, entries: Iterable[tuple[bytes, int]]) -> None:
        keys, absent = self._keys, self._absent
        named = dict.fromkeys(key_id for key_id, _ in entries)
        unread = [key_id for key_id in named if key_id not in keys and key_id not in absent]
        known = self._known
        if known:
            missed = []
            for key_id in unread:
                state = known.get(key_id)
                if state is None:
                    missed.append(key_id)
                else:
                    keys[key_id] = list(state)
            unread = missed
        for placeholders, chunk in _in_chunks(unread):
            rows = self._db.execute(f"{_LEASED_KEYS} ({placeholders})", chunk)
            for key_id, partition, offset, sealed, exhausted in rows:
                keys[bytes(key_id)] = [int(partition), int(offset), int(sealed), int(exhausted)]
        absent.update(key_id for key_id in unread if key_id not in keys)


#: Lease states kept from reads at most (about 200 bytes each, so 20 MB), the oldest forgotten first: a
#: writer leases the keys of a request right after reading them.
_LEASE_STATES_MAX: Final = 100_000
#: The key rows with their seal counts (a key no lease has reached yet counts 0).
_KEYS_COUNTED: Final = "subject_keys k LEFT JOIN seal_counts c ON c.key_id = k.key_id"
_COUNT: Final = "coalesce(c.sealed, 0)"
_LIVE_KEYS: Final = (
    "SELECT k.key_id, k.subject, k.wk_id, k.wrapped, k.partition, k.offset, k.created, k.kek_ref, k.exhausted,"  # noqa: S608
    f" {_COUNT} FROM {_KEYS_COUNTED} WHERE k.subject IN"
)
_LEASED_KEYS: Final = (
    f"SELECT k.key_id, k.partition, k.offset, {_COUNT}, k.exhausted FROM {_KEYS_COUNTED} WHERE k.key_id IN"  # noqa: S608
)


def _wk(row: tuple[bytes, str, str, bytes, int, int, int, int]) -> StoredWrappingKey:
    wk_id, provider, kek_id, ciphertext, created, partition, offset, bound = row
    context = wk_edek_context(wk_id) if bound else b""
    return StoredWrappingKey(wk_id, Edek(provider, kek_id, ciphertext, context), created, partition, offset)
