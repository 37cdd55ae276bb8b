"""``keys retire``: a retire record leaves every key it names exhausted in every key table, whatever that
table added up before, so the seal leases below it can be dropped and compacted away."""

from __future__ import annotations

import os
import random
from collections.abc import Sequence
from pathlib import Path

from strongroom.keys import records
from strongroom.keys.records import KeysRecord, SealLease, SealLeases, SubjectKeyRecord, SubjectKeyTombstone
from strongroom.keys.retire import _PartitionContents, _retire_record
from strongroom.keys.store import KeyStore
from strongroom.keys.topic import RawRecord
from strongroom.keys.usage import new_lease_id

WK = b"w" * 16


def key(subject: str, key_id: bytes) -> SubjectKeyRecord:
    return SubjectKeyRecord(subject, key_id, WK, os.urandom(60), 1, "local:kek")


def leases(*entries: tuple[bytes, int], bound: int = 100) -> SealLeases:
    return SealLeases(new_lease_id(), tuple(entries), bound, 5)


def outcomes(store: KeyStore, start: int, items: Sequence[KeysRecord]) -> list[bytes]:
    """Apply ``items`` at offsets ``start``... of partition 0; the grant bytes of each seal-leases record."""
    effects = store.apply([(0, start + i, item) for i, item in enumerate(items)], {0: start + len(items)})
    return [effects.lease_sets[item.lease_id] for item in items if isinstance(item, SealLeases)]


def usage(store: KeyStore, key_id: bytes) -> tuple[int, int]:
    return store.seal_usage()[key_id]


def test_a_retire_record_exhausts_every_key_it_names_whatever_was_added_up(tmp_path: Path) -> None:
    k1, k2, k3, k4 = (bytes([n]) * 16 for n in (1, 2, 3, 4))
    keys = [key("a", k1), key("b", k2), key("c", k3)]
    history = [leases((k1, 60)), leases((k3, 100))]  # k1 part-used, k2 never leased, k3 spent exactly
    live = KeyStore(None, topic="keys", temp_base=tmp_path)
    cold = KeyStore(None, topic="keys", temp_base=tmp_path)  # reads the topic after compaction
    assert outcomes(live, 0, [*keys, *history]) == [b"\x01", b"\x01"]
    outcomes(cold, 0, keys)
    retire = _retire_record([k1, k2, k3])
    assert outcomes(live, 10, [retire]) == [b"\x00\x01\x00"]  # k2 alone gets its (unused) seal
    assert outcomes(cold, 10, [retire]) == [b"\x01\x01\x01"]  # decided otherwise, the same end:
    for store in (live, cold):
        assert all(usage(store, k)[1] == 1 for k in (k1, k2, k3))  # every retired key is exhausted
        after = outcomes(store, 11, [key("a", k4), leases((k1, 1), (k2, 1), (k4, 30)), leases((k4, 30))])
        assert after == [b"\x00\x00\x01", b"\x01"]  # no seal under a retired key again; a new key leases
        assert usage(store, k4) == (60, 0)


def history(rng: random.Random, ids: list[bytes], made: list[bytes], n: int) -> list[KeysRecord]:
    """``n`` records: a new key now and then (from ``ids``, noted in ``made``), else leases of made keys."""
    out: list[KeysRecord] = []
    for _ in range(n):
        if rng.random() < 0.25 and len(made) < len(ids):
            made.append(ids[len(made)])
            out.append(key(f"s{len(made)}", made[-1]))
        elif made:
            chosen = rng.sample(made, rng.randint(1, len(made)))
            out.append(leases(*((k, rng.randint(1, 40)) for k in chosen), bound=rng.choice([50, 100, 200])))
    return out


def test_after_a_retire_a_table_that_missed_the_leases_below_it_decides_every_lease_alike(tmp_path: Path) -> None:
    """Random histories: a live table applies everything; a cold one applies the same topic after
    compaction (no lease below the scan's end). From the retire record on they grant exactly alike."""
    for seed in range(40):
        rng = random.Random(seed)
        ids = [os.urandom(16) for _ in range(12)]
        made: list[bytes] = []
        # below the scan's end; written between the scan and the retire record; after it
        below, window, later = (history(rng, ids, made, n) for n in (30, 8, 30))
        end = len(below)
        written = {r.key_id for r in below if isinstance(r, SubjectKeyRecord)}
        named = sorted({k for r in below if isinstance(r, SealLeases) for k, _ in r.entries} & written)
        retire = _retire_record(named)  # the keys the dropped leases name (`_PartitionContents.leased_keys`)
        live = KeyStore(None, topic="keys", temp_base=tmp_path)
        cold = KeyStore(None, topic="keys", temp_base=tmp_path)
        outcomes(live, 0, below)
        outcomes(cold, 0, [r for r in below if not isinstance(r, SealLeases)])
        outcomes(live, end, window)
        outcomes(cold, end, window)
        start = end + len(window)
        outcomes(live, start, [retire])
        outcomes(cold, start, [retire])
        assert outcomes(live, start + 1, later) == outcomes(cold, start + 1, later), seed
        for k in made:
            if k in named:
                assert usage(live, k)[1] == usage(cold, k)[1] == 1
            else:  # no dropped lease names it (never leased below the end, or written after it): no change
                assert usage(live, k) == usage(cold, k)
        live.close()
        cold.close()


def raw(offset: int, record: KeysRecord) -> RawRecord:
    key_bytes, value = records.encode(record)
    return RawRecord(0, offset, 0, key_bytes, value)


def test_a_partitions_contents_follow_tombstones_and_retire_only_leased_live_keys() -> None:
    k1, k2 = b"\x01" * 16, b"\x02" * 16
    single = SealLease(k1, new_lease_id(), 5, 100, 1)
    batch = leases((k1, 5), (k2, 5))
    contents = _PartitionContents()
    items = [raw(0, key("a", k1)), raw(1, key("b", k2)), raw(2, single), raw(3, batch)]
    items += [raw(4, SubjectKeyTombstone("b", k2)), RawRecord(0, 5, 0, records.LEASES_PREFIX + b"x", b"garbage")]
    items += [RawRecord(0, 6, 0, None, b"v"), raw(7, leases((k1, 1)))]
    tombstoned = items[-1].key
    items.append(RawRecord(0, 8, 0, tombstoned, None))  # a lease already dropped
    for item in items:
        contents.add(item)
    contents.add(raw(9, key("c", b"\x03" * 16)))  # never leased
    assert sorted(contents.keys) == [k1, b"\x03" * 16]
    assert contents.leases == {items[2].key: 1, items[3].key: 2}  # what a tombstone dropped is gone
    assert contents.leased_keys() == [k1]  # k2 is gone, the third key was never leased: nothing to retire
    record = _retire_record([k1])
    assert (record.max_seals, record.entries) == (1, ((k1, 1),))
