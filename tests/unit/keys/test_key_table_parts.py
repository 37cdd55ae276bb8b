"""The key table's three pieces tested alone (issue 14): the facade's constructor does no I/O, the
follower applies a batch to a real store and reports its effects, the heartbeat sender keeps time."""

from __future__ import annotations

import gc
import os
from pathlib import Path
from typing import Any

import pytest

from strongroom.kafka.config import ClientConfig
from strongroom.keys import records
from strongroom.keys.errors import KeyTableClosed
from strongroom.keys.follower import KeysFollower
from strongroom.keys.heartbeat import ReaderHeartbeats
from strongroom.keys.records import ErasureMarker, SubjectKeyRecord
from strongroom.keys.store import ApplyEffects, KeyStore
from strongroom.keys.table import KeyTable

NOWHERE = ClientConfig("127.0.0.1:1")  # nothing listens: any connection attempt would fail


class Message:
    """What confluent-kafka hands the follower for one record: the fields it reads."""

    def __init__(self, partition: int, offset: int, key: bytes | None, value: bytes | None) -> None:
        self._p, self._o, self._k, self._v = partition, offset, key, value

    def partition(self) -> int:
        return self._p

    def offset(self) -> int:
        return self._o

    def key(self) -> bytes | None:
        return self._k

    def value(self) -> bytes | None:
        return self._v

    def error(self) -> None:
        return None


def test_the_facade_constructor_touches_nothing() -> None:
    table = KeyTable(NOWHERE, None, topic="no-such-topic", reader_id="r1")
    assert table.reader_id == "r1"
    with pytest.raises(KeyTableClosed, match="not open"):
        _ = table.store
    table.close()  # closing a table that never opened is fine


def test_the_follower_applies_a_batch_and_reports_what_it_erased(tmp_path: Path) -> None:
    store = KeyStore(tmp_path / "store.sqlite", topic="keys")
    seen: list[ApplyEffects] = []
    follower = KeysFollower(NOWHERE, "keys", store, 2, on_effects=seen.append, on_reset=lambda: None,
                            on_tick=lambda: None)  # fmt: skip
    key = SubjectKeyRecord("bob", b"\x01" * 16, b"w" * 16, os.urandom(60), 1, "local:kek")
    # bob is placed in partition 0 of 2, as the keys topic's partitioner places him
    messages: list[Any] = [
        Message(0, 0, *records.encode(key)),
        Message(0, 1, b"\x00garbage", b"not a record"),
        Message(0, 2, *records.encode(ErasureMarker("bob", "req", "dpo", "GDPR", 5))),
    ]
    follower._apply(messages)
    assert follower.applied_offsets() == {0: 3, 1: 0}
    assert follower.counters == {"records": 3, "corrupt": 1, "tombstones": 0, "misplaced": 0, "leases_skipped": 0}
    assert len(follower.problems) == 1
    [effects] = seen
    assert effects.erased_subjects
    assert store.key(b"\x01" * 16) is None  # erased from the store: the marker came after the key
    follower._apply(messages)  # offsets already applied are never applied twice
    assert len(seen) == 1
    store.close()


def test_the_stores_lease_states_stay_out_of_the_collectors_passes(tmp_path: Path) -> None:
    """Key ids and counts, one entry per key a writer met: nothing for the cyclic collector to walk
    (``runtime.untracked``; the other caches: tests/unit/test_collector_untrack.py)."""
    store = KeyStore(tmp_path / "store.sqlite", topic="keys")
    follower = KeysFollower(NOWHERE, "keys", store, 2, on_effects=lambda _: None, on_reset=lambda: None,
                            on_tick=lambda: None)  # fmt: skip
    key = SubjectKeyRecord("bob", b"\x01" * 16, b"w" * 16, os.urandom(60), 1, "local:kek")
    follower._apply([Message(0, 0, *records.encode(key))])
    assert not gc.is_tracked(store._lease_states)
    assert [k.key_id for k in store.live_keys_many(["bob"])["bob"]] == [b"\x01" * 16]
    assert len(store._lease_states) == 1
    assert not gc.is_tracked(store._lease_states)
    store.close()


@pytest.mark.parametrize("skip_leases", [False, True])
def test_a_readers_follower_passes_seal_leases_over(tmp_path: Path, skip_leases: bool) -> None:
    """A reader's table (KeyTable seal_usage=False) reads past seal leases without decoding or applying
    them; its offsets still move on. A writer's applies them: the key's leased seals add up."""
    store = KeyStore(tmp_path / "store.sqlite", topic="keys")
    seen: list[ApplyEffects] = []
    follower = KeysFollower(NOWHERE, "keys", store, 2, on_effects=seen.append, on_reset=lambda: None,
                            on_tick=lambda: None, skip_leases=skip_leases)  # fmt: skip
    key_id = b"\x01" * 16
    key = SubjectKeyRecord("bob", key_id, b"w" * 16, os.urandom(60), 1, "local:kek")
    first, second = (records.SealLeases(lease_id, ((key_id, 70),), 100, 5) for lease_id in (b"1" * 8, b"2" * 8))
    follower._apply([Message(0, 0, *records.encode(key)), Message(0, 1, *records.encode(first)),
                     Message(0, 2, *records.encode(second))])  # fmt: skip
    assert follower.applied_offsets() == {0: 3, 1: 0}
    assert follower.counters["leases_skipped"] == (2 if skip_leases else 0)
    [effects] = seen
    # applied: the first lease fits the bound of 100, the second does not and spends the key
    assert effects.lease_sets == ({} if skip_leases else {b"1" * 8: b"\x01", b"2" * 8: b"\x00"})
    assert bool(store.key(key_id).exhausted) is not skip_leases  # type: ignore[union-attr]
    store.close()


def test_the_follower_ignores_and_counts_a_key_record_outside_its_subjects_partition(tmp_path: Path) -> None:
    store = KeyStore(tmp_path / "store.sqlite", topic="keys")
    follower = KeysFollower(NOWHERE, "keys", store, 2, on_effects=lambda effects: None, on_reset=lambda: None,
                            on_tick=lambda: None)  # fmt: skip
    right = SubjectKeyRecord("alice", b"\x01" * 16, b"w" * 16, os.urandom(60), 1, "local:kek")  # partition 1
    wrong = SubjectKeyRecord("alice", b"\x02" * 16, b"w" * 16, os.urandom(60), 1, "local:kek")
    follower._apply([Message(1, 0, *records.encode(right)), Message(0, 0, *records.encode(wrong))])
    assert store.key(b"\x01" * 16) is not None
    assert store.key(b"\x02" * 16) is None
    assert follower.counters["misplaced"] == 1
    assert "not in its subject's partition 1" in follower.problems[-1]
    store.close()


def test_heartbeats_are_due_by_interval_and_a_disabled_sender_never_connects() -> None:
    beats = ReaderHeartbeats(NOWHERE, readers_topic="r", keys_topic="k", reader_id="x", interval=3600, enabled=False)
    assert beats.due()
    beats.send(store="mem", persistent=False, applied={0: 1}, caught_up=True)
    assert not beats.due()
    assert (beats.error, beats.errors) == (None, 0)
