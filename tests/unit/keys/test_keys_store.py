"""The key table's SQLite store: apply semantics of keys, tombstones and markers; no lingering key bytes."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from strongroom.keys import store as store_module
from strongroom.keys.errors import KeysConfigError
from strongroom.keys.records import (
    ErasureMarker,
    KeysRecord,
    LayoutRecord,
    SubjectKeyRecord,
    SubjectKeyTombstone,
    WrappingKeyRecord,
)
from strongroom.keys.store import TEMP_PREFIX, KeyStore, remove_orphaned_temp_stores
from strongroom.kms.api import Edek

WK = b"w" * 16


def key(subject: str, n: int, wrapped: bytes | None = None) -> SubjectKeyRecord:
    return SubjectKeyRecord(subject, bytes([n]) * 16, WK, wrapped or os.urandom(60), 1, "local:kek")


def marker(subject: str) -> ErasureMarker:
    return ErasureMarker(subject, "req", "dpo", "why", 5)


def apply(store: KeyStore, *items: tuple[int, KeysRecord], partition: int = 0) -> None:
    store.apply([(partition, offset, record) for offset, record in items], {partition: items[-1][0] + 1})


@pytest.fixture
def store(tmp_path: Path) -> KeyStore:
    return KeyStore(None, topic="keys", temp_base=tmp_path)


def test_keys_are_kept_in_partition_order(store: KeyStore) -> None:
    apply(store, (0, WrappingKeyRecord(WK, Edek("local", "kek", b"x" * 40), 1)), (1, key("a", 2)), (2, key("a", 1)))
    assert [k.key_id[0] for k in store.live_keys("a")] == [2, 1]  # first key in partition order first
    assert store.next_offsets() == {0: 3}
    assert store.wrapping_key(WK) is not None


def test_a_marker_erases_every_earlier_key_and_only_those(store: KeyStore) -> None:
    apply(store, (0, key("a", 1)), (1, key("a", 2)), (2, key("b", 3)), (3, marker("a")), (4, key("a", 4)))
    assert [k.key_id[0] for k in store.live_keys("a")] == [4]  # a new generation after the marker
    assert store.erased_subject_of(bytes([1]) * 16) == "a"
    assert store.erased_subject_of(bytes([2]) * 16) == "a"
    assert store.live_keys("b")
    stored = store.marker("a")
    assert stored is not None
    assert stored.offset == 3


def test_reapplying_an_old_key_cannot_resurrect_it(store: KeyStore) -> None:
    apply(store, (0, key("a", 1)), (1, marker("a")))
    apply(store, (0, key("a", 1)))  # e.g. a replay from an older offset
    assert store.live_keys("a") == []


def test_an_old_key_cannot_come_back_in_a_batch_after_its_marker_nor_after_a_reopen(tmp_path: Path) -> None:
    """A store without any erasure marker skips the marker lookups (new keys, batches of subject states); the
    first marker, applied in the middle of a batch, and a reopened store that holds one, bring them back."""
    path = tmp_path / "keys.sqlite"
    store = KeyStore(path, topic="keys")
    assert store.markers_many(["a", "b"]) == {}
    # one transaction: a's key, then her marker, then (a replay) her old key again and b's key
    apply(store, (0, key("a", 1)), (1, marker("a")), (0, key("a", 1)), (2, key("b", 2)))
    assert store.live_keys("a") == []
    assert [k.key_id[0] for k in store.live_keys("b")] == [2]
    assert set(store.markers_many(["a", "b"])) == {"a"}
    store.close()
    again = KeyStore(path, topic="keys")
    apply(again, (0, key("a", 1)))  # the marker is on disk: the old key stays erased
    assert again.live_keys("a") == []
    assert set(again.markers_many(["a"])) == {"a"}
    again.reset()
    assert again.markers_many(["a"]) == {}
    again.close()


def test_a_tombstone_erases_one_key(store: KeyStore) -> None:
    apply(store, (0, key("a", 1)), (1, key("a", 2)), (2, SubjectKeyTombstone("a", bytes([1]) * 16)))
    assert [k.key_id[0] for k in store.live_keys("a")] == [2]
    assert store.erased_subject_of(bytes([1]) * 16) == "a"


def test_secure_delete_and_no_on_disk_journal(store: KeyStore) -> None:
    assert store.pragma("secure_delete") == 1
    assert store.pragma("journal_mode") == "memory"


def test_an_erased_wrapped_key_does_not_linger_in_the_database_file(store: KeyStore) -> None:
    secret = b"WRAPPED-KEY-BYTES-" + os.urandom(21) + b"-END"
    apply(store, *[(i, key(f"s{i}", i % 250 + 1)) for i in range(200)])
    apply(store, (200, key("victim", 251, wrapped=secret)))
    store.commit()  # applies of keys share a transaction: on disk now, not only in the open one
    assert secret in store.path.read_bytes()
    apply(store, (201, marker("victim")))  # committed at once: an erasure does not wait in an open transaction
    assert secret not in store.path.read_bytes()


def test_temporary_store_is_removed_at_close(store: KeyStore) -> None:
    directory = store.path.parent
    assert directory.name.startswith(TEMP_PREFIX)
    store.close()
    assert not directory.exists()


def test_persistent_store_resumes_and_refuses_another_topic(tmp_path: Path) -> None:
    path = tmp_path / "keys.sqlite"
    first = KeyStore(path, topic="keys")
    apply(first, (0, key("a", 1)), (1, LayoutRecord(3, 1)))
    first.close()
    again = KeyStore(path, topic="keys")
    assert again.persistent
    assert again.next_offsets() == {0: 2}
    assert again.layout_partitions() == 3
    assert [k.key_id[0] for k in again.live_keys("a")] == [1]
    again.close()
    assert path.exists()
    with pytest.raises(KeysConfigError, match="belongs to keys topic 'keys'"):
        KeyStore(path, topic="other")


def test_a_damaged_persistent_store_is_rebuilt(tmp_path: Path) -> None:
    path = tmp_path / "keys.sqlite"
    first = KeyStore(path, topic="keys")
    apply(first, *[(i, key(f"s{i}", i % 250 + 1)) for i in range(300)])
    first.close()
    data = bytearray(path.read_bytes())
    data[5000:9000] = os.urandom(4000)
    path.write_bytes(bytes(data))
    rebuilt = KeyStore(path, topic="keys")
    assert rebuilt.rebuilt
    assert rebuilt.next_offsets() == {}
    rebuilt.close()


def test_orphaned_temp_stores_of_dead_processes_are_removed(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    orphan = tmp_path / f"{TEMP_PREFIX}{int(dead.stdout)}-abc"
    orphan.mkdir()
    alive = tmp_path / f"{TEMP_PREFIX}{os.getpid()}-def"
    alive.mkdir()
    assert remove_orphaned_temp_stores(tmp_path) == [orphan]
    assert alive.exists()


def test_keys_many_finds_stored_keys_in_chunks_and_leaves_out_absent_and_erased_ones(store: KeyStore) -> None:
    subjects = [f"s{i}" for i in range(1200)]
    records = [
        (i, SubjectKeyRecord(s, i.to_bytes(16, "big"), WK, b"w" * 60, 1, "local:kek")) for i, s in enumerate(subjects)
    ]
    apply(store, *records, (1200, marker("s7")))
    wanted = [i_to(i) for i in range(1300)]  # 100 ids that were never stored
    found = store.keys_many(wanted)
    assert len(found) == 1199  # s7's key was erased by its marker
    assert i_to(7) not in found
    assert found[i_to(1199)].subject == "s1199"
    assert found[i_to(0)] == store.key(i_to(0))


def i_to(n: int) -> bytes:
    return n.to_bytes(16, "big")


# Applies share one transaction: committed by size, by age, at once for an erasure; each apply all or nothing.


def on_disk(store: KeyStore) -> tuple[int, dict[int, int]]:
    """What another connection sees in the store's file: the committed keys and offsets."""
    other = sqlite3.connect(f"file:{store.path}?mode=ro", uri=True)
    try:
        keys = other.execute("SELECT count(*) FROM subject_keys").fetchone()[0]
        return keys, dict(other.execute("SELECT partition, next_offset FROM offsets").fetchall())
    finally:
        other.close()


def test_applies_of_keys_share_a_transaction_that_commits_when_due(
    store: KeyStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    apply(store, (0, key("a", 1)))
    apply(store, (1, key("b", 2)))
    # Reads share the connection: both applies are there at once; the file has neither yet.
    assert [k.subject for k in store.live_keys("b")] == ["b"]
    assert store.next_offsets() == {0: 2}
    assert on_disk(store) == (0, {})
    store.commit_if_due()  # not old enough
    assert on_disk(store) == (0, {})
    monkeypatch.setattr(store_module, "_COMMIT_AFTER_S", 0.0)
    store.commit_if_due()
    assert on_disk(store) == (2, {0: 2})  # the keys with their offsets, never one without the other


def test_a_transaction_commits_once_it_holds_enough_records(store: KeyStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_module, "_COMMIT_RECORDS", 3)
    apply(store, (0, key("a", 1)), (1, key("b", 2)))
    assert on_disk(store) == (0, {})
    apply(store, (2, key("c", 3)))
    assert on_disk(store) == (3, {0: 3})


def test_an_erasure_is_committed_at_once_with_the_applies_before_it(store: KeyStore) -> None:
    apply(store, (0, key("a", 1)), (1, key("b", 2)))
    apply(store, (2, marker("a")))
    assert on_disk(store) == (1, {0: 3})


def test_a_failing_apply_leaves_the_applies_before_it_in_the_open_transaction(store: KeyStore) -> None:
    apply(store, (0, key("a", 1)))
    broken = (bytes([9]) * 16, object(), WK, b"x", 0, 1, 1, "local:kek")  # a row SQLite cannot bind
    with pytest.raises(sqlite3.Error):
        store.apply([(0, 1, key("b", 2)), broken], {0: 2})  # type: ignore[list-item]
    assert store.live_keys("b") == []  # the failing apply left nothing
    assert [k.subject for k in store.live_keys("a")] == ["a"]  # the one before it is still there
    assert store.next_offsets() == {0: 1}
    store.commit()
    assert on_disk(store) == (1, {0: 1})


def test_closing_commits_what_is_open(tmp_path: Path) -> None:
    path = tmp_path / "keys.db"
    store = KeyStore(path, topic="keys")
    apply(store, (0, key("a", 1)), (1, key("b", 2)))
    store.close()
    again = KeyStore(path, topic="keys")
    try:
        assert again.next_offsets() == {0: 2}
        assert [k.subject for k in again.live_keys("b")] == ["b"]
    finally:
        again.close()


def test_a_transaction_sqlite_rolled_back_itself_is_reported_and_the_store_goes_on(store: KeyStore) -> None:
    """Disk full (or an I/O error) makes SQLite roll the whole transaction back: the error is the one raised,
    the applies before it are gone with their offsets, and the next apply starts a transaction of its own."""
    apply(store, (0, key("a", 1)))
    pages = store._db.execute("PRAGMA page_count").fetchone()[0]
    store._db.execute(f"PRAGMA max_page_count={pages + 2}")
    many = [(1 + i, SubjectKeyRecord(f"s{i}", i_to(i + 100), WK, os.urandom(60), 1, "local:kek")) for i in range(2000)]
    with pytest.raises(sqlite3.OperationalError, match="full"):
        apply(store, *many)
    assert store.next_offsets() == {}  # what the file holds: nothing was committed yet
    assert store.live_keys("a") == []
    store._db.execute("PRAGMA max_page_count=1073741823")
    apply(store, (0, key("a", 1)), (1, key("b", 2)))
    store.commit()
    assert on_disk(store) == (2, {0: 2})
