"""Lost markers: the record codec, the store's apply semantics, subject states and the reader's error."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from strongroom.envelope import SubjectErased
from strongroom.keys import records
from strongroom.keys.errors import CorruptKeyRecord, SubjectKeyLost
from strongroom.keys.records import (
    KeysRecord,
    LostMarker,
    LostMarkerTombstone,
    SubjectKeyRecord,
    WrappingKeyRecord,
)
from strongroom.keys.store import KeyStore, StoredLost
from strongroom.keys.table import KeyInfo, SubjectState, lost_error
from strongroom.kms.api import Edek

WK = bytes(range(16))
OTHER_WK = bytes(range(16, 32))
PLAN = "sha256:" + "ab" * 32


def marker(wk_id: bytes = WK, plan_id: str = PLAN, at: int = 1_700_000_000_000) -> LostMarker:
    return LostMarker(wk_id, "vault:kek-a", "KEK deleted by mistake, ticket 7", plan_id, "ops@host", at)


def key(subject: str, n: int, wk_id: bytes = WK) -> SubjectKeyRecord:
    return SubjectKeyRecord(subject, bytes([n]) * 16, wk_id, os.urandom(60), 1, "vault:kek-a")


def apply(store: KeyStore, *items: tuple[int, KeysRecord], partition: int = 0) -> None:
    store.apply([(partition, offset, record) for offset, record in items], {partition: items[-1][0] + 1})


@pytest.fixture
def store(tmp_path: Path) -> KeyStore:
    return KeyStore(None, topic="keys", temp_base=tmp_path)


# ------------------------------------------------------------------------------------------ codec
def test_marker_round_trip_and_layout() -> None:
    key_bytes, value = records.encode(marker())
    assert key_bytes == b"x\x00" + WK  # one marker per wrapping key: compaction keeps the latest
    assert value is not None
    document = json.loads(value)
    assert document == {
        "v": 1,
        "type": "lost",
        "wk_id": WK.hex(),
        "kek_ref": "vault:kek-a",
        "reason": "KEK deleted by mistake, ticket 7",
        "plan_id": PLAN,
        "declared_by": "ops@host",
        "declared_at": 1_700_000_000_000,
    }
    assert records.decode(key_bytes, value) == marker()


def test_undo_is_a_tombstone_of_the_marker() -> None:
    key_bytes, value = records.encode(LostMarkerTombstone(WK))
    assert (key_bytes, value) == (b"x\x00" + WK, None)
    assert records.decode(key_bytes, None) == LostMarkerTombstone(WK)
    assert records.encode(marker(plan_id="sha256:other"))[0] == key_bytes  # a newer marker replaces the older


@pytest.mark.parametrize(
    ("value", "match"),
    [
        (b"not json", "not UTF-8 JSON"),
        (b'{"v": 2, "type": "lost"}', "version 2"),
        (b'{"v": 1, "type": "erasure"}', "type 'erasure' under a lost"),
        (
            json.dumps(
                {
                    "v": 1,
                    "type": "lost",
                    "wk_id": OTHER_WK.hex(),
                    "kek_ref": "k",
                    "reason": "r",
                    "plan_id": "p",
                    "declared_by": "d",
                    "declared_at": 1,
                }
            ).encode(),
            "another wrapping key",
        ),
        (
            json.dumps(
                {
                    "v": 1,
                    "type": "lost",
                    "wk_id": WK.hex(),
                    "kek_ref": "k",
                    "reason": "r",
                    "plan_id": "",
                    "declared_by": "d",
                    "declared_at": 1,
                }
            ).encode(),
            "empty plan_id",
        ),
        (
            json.dumps(
                {
                    "v": 1,
                    "type": "lost",
                    "wk_id": WK.hex(),
                    "kek_ref": "k",
                    "reason": "r",
                    "plan_id": "p",
                    "declared_by": "d",
                    "declared_at": -1,
                }
            ).encode(),
            "non-negative",
        ),
    ],
)
def test_an_unreadable_marker_is_corrupt_never_applied(value: bytes, match: str) -> None:
    # Unlike an erasure marker: a lost marker only silences failures, so a damaged one must not count.
    with pytest.raises(CorruptKeyRecord, match=match):
        records.decode(b"x\x00" + WK, value)


def test_a_malformed_marker_key_is_corrupt() -> None:
    with pytest.raises(CorruptKeyRecord, match="lost-marker message key of 5 bytes"):
        records.decode(b"x\x00abc", None)


# ------------------------------------------------------------------------------------------ store
def test_store_applies_marker_and_keeps_the_subject_keys(store: KeyStore) -> None:
    apply(store, (0, key("a", 1)), (1, key("b", 2, OTHER_WK)), (2, marker()))
    [lost] = store.lost_wrapping_keys()
    assert lost == StoredLost(WK, 0, 2, "vault:kek-a", "KEK deleted by mistake, ticket 7", PLAN, "ops@host",
                              1_700_000_000_000)  # fmt: skip
    assert store.live_keys("a"), "the marker can be undone: the wrapped key stays"
    assert store.erased_subject_of(bytes([1]) * 16) is None, "lost is not erased"
    assert store.counts()["lost_wrapping_keys"] == 1


def test_the_latest_marker_or_its_tombstone_wins(store: KeyStore) -> None:
    apply(store, (0, marker(plan_id="sha256:first")), (1, marker(plan_id="sha256:second")))
    assert [m.plan_id for m in store.lost_wrapping_keys()] == ["sha256:second"]
    apply(store, (2, LostMarkerTombstone(WK)))
    assert store.lost_wrapping_keys() == []
    apply(store, (3, marker(plan_id="sha256:third")))
    assert [(m.plan_id, m.offset) for m in store.lost_wrapping_keys()] == [("sha256:third", 3)]


def test_apply_effects_name_lost_and_found_wrapping_keys(store: KeyStore) -> None:
    effects = store.apply([(1, 5, marker()), (1, 6, LostMarkerTombstone(OTHER_WK))], {1: 7})
    assert [m.wk_id for m in effects.lost] == [WK]
    assert effects.found == [OTHER_WK]


def test_persistent_store_keeps_markers(tmp_path: Path) -> None:
    path = tmp_path / "keys.sqlite"
    first = KeyStore(path, topic="keys")
    apply(first, (0, marker()))
    first.close()
    again = KeyStore(path, topic="keys")
    assert [m.wk_id for m in again.lost_wrapping_keys()] == [WK]
    assert not again.rebuilt
    again.close()


def test_a_schema_1_store_is_rebuilt_because_it_skipped_lost_markers(tmp_path: Path) -> None:
    path = tmp_path / "keys.sqlite"
    old = KeyStore(path, topic="keys")
    apply(old, (0, WrappingKeyRecord(WK, Edek("vault", "kek-a", b"c" * 40), 1)), (1, key("a", 1)))
    old.close()
    db = sqlite3.connect(path)
    db.execute("UPDATE meta SET v = '1' WHERE k = 'schema'")  # as written by the previous version
    db.commit()
    db.close()
    upgraded = KeyStore(path, topic="keys")
    assert upgraded.rebuilt
    assert upgraded.next_offsets() == {}, "read the keys topic again from the start"
    assert upgraded.live_keys("a") == []
    upgraded.close()
    assert not KeyStore(path, topic="keys").rebuilt  # once


# ------------------------------------------------------------------------------------------ states and errors
def test_first_key_not_declared_lost_is_current() -> None:
    lost = KeyInfo(b"\x01" * 16, 3, WK, 1, "vault:kek-a", lost_by_plan=PLAN)
    fresh = KeyInfo(b"\x02" * 16, 9, OTHER_WK, 2, "vault:kek-b")
    state = SubjectState("alice", 0, (lost, fresh), None)
    assert state.current_key_id == b"\x02" * 16  # creators converge on the new generation
    assert state.to_dict()["keys"][0]["declared_lost_by_plan"] == PLAN
    only_lost = SubjectState("alice", 0, (lost,), None)
    assert only_lost.current_key is None  # a key manager makes a new key: the subject is not erased
    assert SubjectState("alice", 0, (fresh, lost), None).current_key_id == b"\x02" * 16


def test_the_lost_error_is_an_erasure_for_readers_but_says_lost_and_names_the_plan() -> None:
    stored = StoredLost(WK, 2, 14, "vault:kek-a", "KEK deleted", PLAN, "ops@host", 1)
    error = lost_error(b"\x07" * 16, "alice@example.com", stored)
    assert isinstance(error, SubjectErased)  # every reader's erased path handles it
    assert isinstance(error, SubjectKeyLost)
    assert f"declared lost by plan {PLAN}" in error.problem
    assert "erased" not in error.problem
    assert "alice" not in str(error)  # subjects are personal data: fingerprint only
    assert "sha256:" in error.problem
    assert (error.key_id, error.wk_id, error.plan_id) == (b"\x07" * 16, WK, PLAN)
    assert "unmark-lost" in error.hint
