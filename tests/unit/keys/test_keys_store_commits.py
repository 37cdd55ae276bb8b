"""The key store's applies share one transaction: committed by size, by age, at once for an erasure, and
each apply all or nothing on its own."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from strongroom.keys import store as store_module
from strongroom.keys.records import ErasureMarker, KeysRecord, SubjectKeyRecord
from strongroom.keys.store import KeyStore

WK = b"w" * 16


def key(subject: str, n: int) -> SubjectKeyRecord:
    return SubjectKeyRecord(subject, n.to_bytes(16, "big"), WK, os.urandom(60), 1, "local:kek")


def apply(store: KeyStore, *items: tuple[int, KeysRecord]) -> None:
    store.apply([(0, offset, record) for offset, record in items], {0: items[-1][0] + 1})


def on_disk(store: KeyStore) -> tuple[int, dict[int, int]]:
    """What another connection sees in the store's file: the committed keys and offsets."""
    other = sqlite3.connect(f"file:{store.path}?mode=ro", uri=True)
    try:
        keys = other.execute("SELECT count(*) FROM subject_keys").fetchone()[0]
        return keys, dict(other.execute("SELECT partition, next_offset FROM offsets").fetchall())
    finally:
        other.close()


@pytest.fixture
def store(tmp_path: Path) -> KeyStore:
    return KeyStore(None, topic="keys", temp_base=tmp_path)


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
    apply(store, (2, ErasureMarker("a", "req", "dpo", "why", 5)))
    assert on_disk(store) == (1, {0: 3})


def test_a_failing_apply_leaves_the_applies_before_it_in_the_open_transaction(store: KeyStore) -> None:
    apply(store, (0, key("a", 1)))
    broken = ((9).to_bytes(16, "big"), object(), WK, b"x", 0, 1, 1, "local:kek")  # a row SQLite cannot bind
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
