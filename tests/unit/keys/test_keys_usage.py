"""Subject-key usage limits: the writer's ledger, seal-lease records, and how every key table grants leases."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from strongroom.keys import records
from strongroom.keys import store as store_module
from strongroom.keys.errors import CorruptKeyRecord, KeysConfigError
from strongroom.keys.records import (
    MAX_LEASE_ENTRIES,
    ErasureMarker,
    KeysRecord,
    SealLease,
    SealLeases,
    SubjectKeyRecord,
    SubjectKeyTombstone,
)
from strongroom.keys.store import KeyStore, LeaseRun
from strongroom.keys.usage import HARD_MAX_SEALS, Charge, SealLedger, SubjectKeyLimits, new_lease_id

WK = b"w" * 16
K1, K2 = b"\x01" * 16, b"\x02" * 16


def key(subject: str, key_id: bytes) -> SubjectKeyRecord:
    return SubjectKeyRecord(subject, key_id, WK, os.urandom(60), 1, "local:kek")


def lease(key_id: bytes, seals: int, bound: int) -> SealLease:
    return SealLease(key_id, new_lease_id(), seals, bound, 5)


def leases(*entries: tuple[bytes, int], bound: int = 100) -> SealLeases:
    return SealLeases(new_lease_id(), tuple(entries), bound, 5)


@pytest.fixture
def store(tmp_path: Path) -> KeyStore:
    return KeyStore(None, topic="keys", temp_base=tmp_path)


def apply(store: KeyStore, start: int, *items: KeysRecord, partition: int = 0) -> dict[bytes, bool | bytes]:
    """The outcomes of the leases among ``items``: granted (single leases), or a byte per entry (seal-leases)."""
    effects = store.apply(
        [(partition, start + i, item) for i, item in enumerate(items)], {partition: start + len(items)}
    )
    return {**effects.leases, **effects.lease_sets}


# ---------------------------------------------------------------------------- limits
def test_limits_never_let_one_key_pass_two_to_the_32_seals() -> None:
    assert SubjectKeyLimits().bound <= HARD_MAX_SEALS
    with pytest.raises(KeysConfigError, match="2\\*\\*32"):
        SubjectKeyLimits(max_seals=HARD_MAX_SEALS, creator_seals=1)
    with pytest.raises(KeysConfigError, match="lease_seals"):
        SubjectKeyLimits(max_seals=10, lease_seals=11, creator_seals=1)
    with pytest.raises(KeysConfigError, match="max_age_seconds"):
        SubjectKeyLimits(max_age_seconds=0)


# ---------------------------------------------------------------------------- the ledger
def test_the_creator_seals_its_share_then_needs_a_lease() -> None:
    ledger = SealLedger(SubjectKeyLimits(max_seals=100, lease_seals=10, creator_seals=5))
    assert ledger.charge(K1, None, 1) is Charge.LEASE  # an adopted key: nothing free
    ledger.created(K1)
    assert ledger.charge(K1, None, 3) is Charge.SEAL
    assert ledger.charge(K1, None, 3) is Charge.LEASE  # 2 left, 3 asked: not charged
    assert ledger.balance(K1) == 2
    ledger.granted(K1, ledger.lease_size(3))
    assert ledger.balance(K1) == 12
    assert ledger.charge(K1, None, 12) is Charge.SEAL
    assert ledger.lease_size(50) == 50  # a batch bigger than a lease asks for what it needs


def test_an_old_key_rotates_whatever_its_balance() -> None:
    now = [1000.0]
    ledger = SealLedger(SubjectKeyLimits(max_age_seconds=60), clock=lambda: now[0])
    ledger.created(K1)
    created_ms = 1_000_000
    assert ledger.charge(K1, created_ms, 1) is Charge.SEAL
    now[0] = 1060.0
    assert ledger.charge(K1, created_ms, 1) is Charge.ROTATE


def test_a_forgotten_balance_is_leased_again_never_granted_free() -> None:
    ledger = SealLedger(SubjectKeyLimits(max_seals=100, lease_seals=10, creator_seals=5), capacity=1)
    ledger.created(K1)
    ledger.created(K2)  # evicts K1's share
    assert ledger.charge(K1, None, 1) is Charge.LEASE
    assert ledger.charge(K2, None, 1) is Charge.SEAL


def test_a_batch_of_created_keys_is_credited_as_one_by_one_would() -> None:
    """``created_many`` (a creating batch's keys at once) leaves the ledger as ``created`` per key does: the
    same balances, the same oldest balances dropped at capacity, the same generation."""
    keys = [bytes([n]) * 16 for n in range(1, 6)]
    one_by_one = SealLedger(SubjectKeyLimits(max_seals=100, lease_seals=10, creator_seals=5), capacity=3)
    batched = SealLedger(SubjectKeyLimits(max_seals=100, lease_seals=10, creator_seals=5), capacity=3)
    for ledger in (one_by_one, batched):
        ledger.granted(keys[1], 7)  # already held: credited again, and now the newest
        ledger.granted(keys[4], 2)
    for key_id in keys[:4]:
        one_by_one.created(key_id)
    batched.created_many(keys[:4])
    assert [batched.balance(k) for k in keys] == [one_by_one.balance(k) for k in keys] == [0, 5, 5, 5, 0]
    assert batched.generation == one_by_one.generation == 2
    assert [batched.fresh(k) for k in keys] == [one_by_one.fresh(k) for k in keys] == [True, False, False, False, True]


def test_charging_a_batch_decides_and_charges_as_one_by_one_would() -> None:
    """``charge_many`` (a batch's keys, the clock read once) and ``slot_charge`` (a slot's credit and its charge in
    one step) leave the ledger as ``charge`` and ``slot_credit`` + ``charge`` per key do, on random batches."""
    rng = random.Random(13)
    limits = SubjectKeyLimits(max_seals=100, lease_seals=10, creator_seals=5, max_age_seconds=60)
    keys = [bytes([n]) * 16 for n in range(1, 30)]
    for _ in range(200):
        ledgers = [SealLedger(limits, capacity=20, clock=lambda: 1000.0) for _ in range(2)]
        for key_id in rng.sample(keys, 12):
            for ledger in ledgers:
                ledger.created(key_id)
        for key_id in rng.sample(keys, 6):
            granted = rng.randrange(1, 8)
            for ledger in ledgers:
                ledger.granted(key_id, granted)
        wanted = [(n, key_id, rng.choice([None, 990_000, 940_000, 1_000_000]), rng.randrange(0, 9))
                  for n, key_id in enumerate(rng.sample(keys, 15))]  # fmt: skip
        one_by_one, batched = ledgers
        verdicts = {n: one_by_one.charge(key_id, created, seals) for n, key_id, created, seals in wanted}
        lease, rotate = batched.charge_many(wanted)
        assert lease == [n for n, v in verdicts.items() if v is Charge.LEASE]
        assert rotate == [n for n, v in verdicts.items() if v is Charge.ROTATE]
        fresh = [key_id for key_id in keys if one_by_one.fresh(key_id)][:3]
        for key_id in fresh:
            seals = rng.randrange(0, 11)
            one_by_one.slot_credit(key_id)
            assert one_by_one.charge(key_id, None, seals) is Charge.SEAL
            batched.slot_charge(key_id, seals)
        assert [batched.balance(k) for k in keys] == [one_by_one.balance(k) for k in keys]
        assert [batched.fresh(k) for k in keys] == [one_by_one.fresh(k) for k in keys]
        assert batched.counters == one_by_one.counters
        assert batched.generation == one_by_one.generation


# ---------------------------------------------------------------------------- records
def test_a_lease_round_trips_and_names_no_subject() -> None:
    record = lease(K1, 10, 100)
    key_bytes, value = records.encode(record)
    assert b"subject" not in key_bytes
    assert records.decode(key_bytes, value) == record
    assert records.decode(key_bytes, None) == records.IgnoredRecord("lease")


@pytest.mark.parametrize(
    "mangle",
    [lambda k, v: (k[:-1], v), lambda k, v: (k, v[:-1]), lambda k, v: (k, b"\x02" + v[1:])],
    ids=["short key", "short value", "unknown version"],
)
def test_a_malformed_lease_is_corrupt(mangle: object) -> None:
    key_bytes, value = records.encode(lease(K1, 10, 100))
    bad_key, bad_value = mangle(key_bytes, value)  # type: ignore[operator]
    with pytest.raises(CorruptKeyRecord):
        records.decode(bad_key, bad_value)


def test_a_lease_asking_for_more_than_its_bound_is_corrupt() -> None:
    key_bytes, value = records.encode(lease(K1, 101, 100))
    with pytest.raises(CorruptKeyRecord, match="101 seals"):
        records.decode(key_bytes, value)


# ---------------------------------------------------------------------------- granting, in partition order
def test_leases_add_up_until_the_bound_then_the_key_is_exhausted(store: KeyStore) -> None:
    a, b, c, d = lease(K1, 40, 100), lease(K1, 40, 100), lease(K1, 40, 100), lease(K1, 10, 100)
    outcomes = apply(store, 0, key("s", K1), a, b, c, d)
    assert outcomes == {a.lease_id: True, b.lease_id: True, c.lease_id: False, d.lease_id: False}
    (stored,) = store.live_keys("s")
    assert stored.exhausted  # c did not fit: nobody seals with K1 again, not even d's 10


def test_a_lease_that_reaches_the_bound_exactly_is_granted_and_ends_the_key(store: KeyStore) -> None:
    a, b = lease(K1, 60, 100), lease(K1, 40, 100)
    assert apply(store, 0, key("s", K1), a, b) == {a.lease_id: True, b.lease_id: True}
    assert store.live_keys("s")[0].exhausted


def test_leases_of_unknown_misplaced_or_earlier_keys_are_denied(store: KeyStore) -> None:
    early = lease(K1, 1, 100)
    assert apply(store, 0, early, key("s", K1)) == {early.lease_id: False}  # before its key
    unknown = lease(K2, 1, 100)
    assert apply(store, 2, unknown) == {unknown.lease_id: False}
    elsewhere = lease(K1, 1, 100)
    assert apply(store, 0, elsewhere, partition=1) == {elsewhere.lease_id: False}  # not the key's partition
    assert not store.live_keys("s")[0].exhausted


def test_a_keys_seal_count_goes_with_the_key_and_outlives_a_repeated_key_record(store: KeyStore) -> None:
    k3 = b"\x03" * 16
    a, b, c = lease(K1, 30, 100), lease(K2, 30, 100), lease(k3, 30, 100)
    apply(store, 0, key("s", K1), key("t", K2), key("u", k3), a, b, c)
    assert store.seal_usage() == {K1: (30, 0), K2: (30, 0), k3: (30, 0)}
    again = lease(k3, 80, 100)
    assert apply(store, 6, key("u", k3), again) == {again.lease_id: False}  # the count is the key's, not its row's
    apply(store, 8, SubjectKeyTombstone("s", K1), ErasureMarker("t", "r", "t", "test", 1))
    assert store.seal_usage() == {k3: (30, 1)}
    assert store._db.execute("SELECT count(*) FROM seal_counts").fetchone()[0] == 1  # no count of a gone key


def test_the_lease_states_kept_from_reads_are_bounded_oldest_first(
    store: KeyStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    k3 = b"\x03" * 16
    monkeypatch.setattr(store_module, "_LEASE_STATES_MAX", 2)
    apply(store, 0, key("a", K1), key("b", K2), key("c", k3))
    store.live_keys_many(["a", "b", "c"])
    assert list(store._lease_states) == [K2, k3]
    first, second = lease(K1, 60, 100), lease(k3, 60, 100)  # one read from SQLite, one from the kept state
    assert apply(store, 3, first, second) == {first.lease_id: True, second.lease_id: True}
    assert store.seal_usage() == {K1: (60, 0), K2: (0, 0), k3: (60, 0)}


def test_a_transaction_that_fails_after_a_lease_leaves_no_count_behind(
    store: KeyStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    apply(store, 0, key("s", K1))
    store.live_keys_many(["s"])  # K1's state kept

    def crash(*args: object) -> None:
        raise OSError("disk gone mid-transaction")

    monkeypatch.setattr(KeyStore, "_apply_one", staticmethod(crash))
    first = lease(K1, 60, 100)
    with pytest.raises(OSError, match="disk gone"):
        apply(store, 1, first, SubjectKeyTombstone("s", K2))  # the lease is written back, then the crash
    monkeypatch.undo()
    assert store.seal_usage() == {K1: (0, 0)}
    again = lease(K1, 60, 100)
    assert apply(store, 1, again) == {again.lease_id: True}  # 60 of 100, not 120: nothing of the crash counts
    assert store.seal_usage() == {K1: (60, 0)}


def test_subject_key_rows_and_records_are_stored_alike(store: KeyStore) -> None:
    record = key("s", K1)
    key_bytes, value = records.encode(record)
    row = records.subject_key_row(key_bytes, value, 0, 7)
    assert row == (K1, "s", WK, record.wrapped_sk, 0, 7, 1, "local:kek")
    store.apply([row], {0: 8})
    assert store.key(K1) is not None


# ---------------------------------------------------------------------------- seal-leases records (a batch's leases)
def test_seal_leases_round_trip_and_name_no_subject() -> None:
    record = leases((K1, 10), (K2, 20), (K1, 5))
    key_bytes, value = records.encode(record)
    assert key_bytes == records.LEASES_PREFIX + record.lease_id
    assert value is not None
    assert len(value) == 21 + 3 * 24
    assert records.decode(key_bytes, value) == record
    assert records.decode(key_bytes, None) == records.IgnoredRecord("leases")


@pytest.mark.parametrize(
    "mangle",
    [
        lambda k, v: (k[:-1], v),
        lambda k, v: (k, v[:-1]),
        lambda k, v: (k, v + b"\x00"),
        lambda k, v: (k, b"\x02" + v[1:]),
        lambda k, v: (k, v[:17] + (0).to_bytes(4, "big")),
        lambda k, v: (k, v[:17] + (MAX_LEASE_ENTRIES + 1).to_bytes(4, "big") + v[21:]),
        lambda k, v: (k, v[:9]),
    ],
    ids=["short key", "short value", "trailing byte", "unknown version", "no entries", "too many entries", "no head"],
)
def test_a_malformed_seal_leases_record_is_corrupt(mangle: object) -> None:
    key_bytes, value = records.encode(leases((K1, 10), (K2, 20)))
    bad_key, bad_value = mangle(key_bytes, value)  # type: ignore[operator]
    with pytest.raises(CorruptKeyRecord):
        records.decode(bad_key, bad_value)


def test_a_seal_leases_entry_asking_for_more_than_its_bound_or_nothing_is_corrupt() -> None:
    for seals in (101, 0):
        key_bytes, value = records.encode(leases((K1, 10), (K2, seals)))
        with pytest.raises(CorruptKeyRecord, match=f"{seals} seals"):
            records.decode(key_bytes, value)


def test_a_writer_cannot_encode_an_oversized_or_empty_seal_leases_record() -> None:
    with pytest.raises(ValueError, match="entries"):
        records.encode(leases(*[(K1, 1)] * (MAX_LEASE_ENTRIES + 1)))
    with pytest.raises(ValueError, match="entries"):
        records.encode(leases())


def test_seal_leases_grant_each_entry_exactly_as_single_leases_would(tmp_path: Path) -> None:
    """Random batches over a few keys, with bounds reached and passed: one seal-leases record per batch
    and the same entries as single leases give the same grants (each depending on the sums before it) and
    leave the same keys exhausted."""
    rng = random.Random(13)
    key_ids = [bytes([i]) * 16 for i in range(1, 7)]
    for _ in range(20):
        bulk = KeyStore(None, topic="keys", temp_base=tmp_path)
        single = KeyStore(None, topic="keys", temp_base=tmp_path)
        subject_keys = [key(f"s{i}", k) for i, k in enumerate(key_ids[:5])]  # the sixth key is unknown
        apply(bulk, 0, *subject_keys)
        apply(single, 0, *subject_keys)
        offset = len(subject_keys)
        for _ in range(6):
            entries = [(rng.choice(key_ids), rng.randint(1, 40)) for _ in range(rng.randint(1, 8))]
            record = leases(*entries)
            grants = apply(bulk, offset, record)
            singles = [lease(k, n, 100) for k, n in entries]
            outcomes = apply(single, offset, *singles)
            offset += len(singles)
            assert bytes(grants[record.lease_id]) == bytes(int(outcomes[one.lease_id]) for one in singles)
        for i in range(5):
            (a,), (b,) = bulk.live_keys(f"s{i}"), single.live_keys(f"s{i}")
            assert a.exhausted == b.exhausted


def test_seal_leases_of_misplaced_or_later_keys_are_denied_and_add_to_single_leases(store: KeyStore) -> None:
    early = leases((K1, 1))
    assert apply(store, 0, early, key("s", K1)) == {early.lease_id: b"\x00"}  # before its key
    elsewhere = leases((K1, 1))
    assert apply(store, 0, elsewhere, partition=1) == {elsewhere.lease_id: b"\x00"}  # not the key's partition
    one, batch = lease(K1, 60, 100), leases((K1, 30), (K1, 20))
    store.apply([(0, 2, one)], {0: 3})
    assert apply(store, 3, batch) == {batch.lease_id: b"\x01\x00"}  # 60 + 30 fit, 20 more do not
    (stored,) = store.live_keys("s")
    assert stored.exhausted


@pytest.mark.parametrize("max_keys", [LeaseRun.MAX_KEYS, 3], ids=["default", "runs written back every 3 keys"])
def test_a_whole_catch_up_in_one_transaction_grants_exactly_as_record_by_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, max_keys: int
) -> None:
    """A transaction reads and writes a key's seal count once for a run of lease records
    (``LeaseRun``). Random histories over two partitions, with leases passing the bound, keys written
    again, erased by tombstone or marker and leased after, and runs broken by other records: applied in
    one transaction they give the same grants, counts and exhausted keys as one record per transaction, and
    as one record per transaction with the lease states that reads of the keys keep (``_lease_states``)."""
    monkeypatch.setattr(LeaseRun, "MAX_KEYS", max_keys)
    rng = random.Random(29)
    key_ids = [bytes([i]) * 16 for i in range(1, 9)]
    granted_any = exhausted_any = False
    for _ in range(25):
        drawn: list[tuple[int, KeysRecord]] = []
        for _ in range(40):
            partition, roll, key_id = rng.randint(0, 1), rng.random(), rng.choice(key_ids)
            subject = f"s{key_ids.index(key_id) % 4}"
            if roll < 0.15:
                drawn.append((partition, key(subject, key_id)))
            elif roll < 0.2:
                drawn.append((partition, SubjectKeyTombstone(subject, key_id)))
            elif roll < 0.23:
                drawn.append((partition, ErasureMarker(subject, "r", "t", "test", 1)))
            elif roll < 0.35:
                drawn.append((partition, lease(key_id, rng.randint(1, 60), 100)))
            else:
                entries = [(rng.choice(key_ids), rng.randint(1, 40)) for _ in range(rng.randint(1, 6))]
                drawn.append((partition, leases(*entries)))
        offsets = {0: 0, 1: 0}
        history: list[tuple[int, int, KeysRecord]] = []
        for partition, record in drawn:
            history.append((partition, offsets[partition], record))
            offsets[partition] += 1
        whole = KeyStore(None, topic="keys", temp_base=tmp_path)
        effects = whole.apply(history, dict(offsets))
        one_by_one = KeyStore(None, topic="keys", temp_base=tmp_path)
        grants: dict[bytes, bool | bytes] = {}
        for partition, offset, record in history:
            step = one_by_one.apply([(partition, offset, record)], {partition: offset + 1})
            grants |= {**step.leases, **step.lease_sets}
        assert {**effects.leases, **effects.lease_sets} == grants
        primed = KeyStore(None, topic="keys", temp_base=tmp_path)  # lease states kept from reads in between
        primed_grants: dict[bytes, bool | bytes] = {}
        for partition, offset, record in history:
            if rng.random() < 0.5:
                primed.live_keys_many([f"s{n}" for n in range(4)])
            step = primed.apply([(partition, offset, record)], {partition: offset + 1})
            primed_grants |= {**step.leases, **step.lease_sets}
        assert primed_grants == grants
        counts = [s.seal_usage() for s in (whole, one_by_one, primed)]
        assert counts[0] == counts[1] == counts[2]
        granted_any |= any(g is True or (isinstance(g, bytes) and any(g)) for g in grants.values())
        exhausted_any |= any(exhausted for _, exhausted in counts[0].values())
        whole.close()
        one_by_one.close()
        primed.close()
    assert granted_any, "the histories grant leases"
    assert exhausted_any, "the histories pass the bound"


# ---------------------------------------------------------------------------- seal slots
def slot(seals: int = 10, window: int = 2) -> records.SealSlot:
    return records.SealSlot(new_lease_id(), seals, window, 5)


def test_the_bound_counts_every_slot_a_key_may_seal_under() -> None:
    limits = SubjectKeyLimits(max_seals=100, lease_seals=10, creator_seals=5, slot_window=3)
    assert limits.bound == 100 + 5 + 3 * 10
    assert SubjectKeyLimits(max_seals=100, lease_seals=10, creator_seals=5, slot_window=0).bound == 105
    assert SubjectKeyLimits().bound == 2**30 + 2**20 + 1024 * 2**20
    with pytest.raises(KeysConfigError, match="slot_window"):
        SubjectKeyLimits(max_seals=2**31, lease_seals=2**20, slot_window=2048)
    with pytest.raises(KeysConfigError, match="slot_window"):
        SubjectKeyLimits(slot_window=-1)


def test_a_slot_round_trips_and_a_malformed_one_is_corrupt() -> None:
    record = slot(7, 3)
    key_bytes, value = records.encode(record)
    assert key_bytes[:2] == records.SLOT_PREFIX
    assert records.decode(key_bytes, value) == record
    assert records.decode(key_bytes, None) == records.IgnoredRecord("slot")
    for bad_key, bad_value in [(key_bytes[:-1], value), (key_bytes, value[:-1]), (key_bytes, b"\x02" + value[1:])]:
        with pytest.raises(CorruptKeyRecord):
            records.decode(bad_key, bad_value)
    zero_window = value[:9] + b"\x00\x00\x00\x00" + value[13:]
    with pytest.raises(CorruptKeyRecord, match="window of 0"):
        records.decode(key_bytes, zero_window)
    with pytest.raises(ValueError, match="slot"):
        records.encode(records.SealSlot(new_lease_id(), 0, 3, 5))


def test_every_table_counts_the_slots_after_a_key_alike_and_keeps_them(tmp_path: Path) -> None:
    path = tmp_path / "keys.sqlite"
    stored = KeyStore(path, topic="keys")
    apply(stored, 0, key("s", K1), slot(), slot(), key("t", K2), slot())
    apply(stored, 0, slot(), partition=1)
    assert stored.slots_between(0, 0, 4) == 3  # the slots at 1, 2, 4 follow K1 (at 0)
    assert stored.slots_between(0, 0, 2) == 2  # a writer's own slot at 2 is the second after K1
    assert stored.slots_between(0, 3, 4) == 1  # K2 (at 3) has one slot after it
    assert stored.slots_between(0, 4, 10) == 0
    assert stored.slots_between(1, -1, 0) == 1
    stored.close()
    reopened = KeyStore(path, topic="keys")  # a persistent store counts the same after a restart
    assert reopened.slots_between(0, 0, 4) == 3
    reopened.reset()
    assert reopened.slots_between(0, 0, 4) == 0
    reopened.close()


def test_a_failed_transaction_counts_no_slot(store: KeyStore, monkeypatch: pytest.MonkeyPatch) -> None:
    apply(store, 0, key("s", K1))

    def failing(*args: object, **kwargs: object) -> None:
        raise RuntimeError("disk full")

    monkeypatch.setattr(store_module, "_insert_keys", failing)
    with pytest.raises(RuntimeError):
        apply(store, 1, slot(), key("t", K2))
    assert store.slots_between(0, 0, 10) == 0


def test_a_slot_credits_a_key_once_and_a_dropped_balance_retires_the_slots() -> None:
    ledger = SealLedger(SubjectKeyLimits(max_seals=100, lease_seals=10, creator_seals=5, slot_window=2), capacity=2)
    assert ledger.fresh(K1)
    ledger.slot_credit(K1)
    assert not ledger.fresh(K1)
    assert ledger.charge(K1, None, 10) is Charge.SEAL
    assert ledger.charge(K1, None, 1) is Charge.LEASE  # its share is spent: a lease, not a second credit
    assert not ledger.fresh(K1)
    ledger.denied(K1)
    assert not ledger.fresh(K1)  # a denied key keeps its (empty) balance: no slot credits it again
    generation = ledger.generation
    ledger.created(K2)
    ledger.created(b"\x03" * 16)  # capacity 2: K1's balance is dropped
    assert ledger.fresh(K1)
    assert ledger.generation == generation + 1  # so the writer's slots credit nothing more
    ledger.forget(K2)
    assert ledger.generation == generation + 2
    ledger.forget(K2)  # nothing held: nothing changes
    assert ledger.generation == generation + 2


def test_a_repeated_key_record_keeps_the_keys_first_offset_so_its_slots_still_count(store: KeyStore) -> None:
    """A keys-topic writer that writes a key's record again (strongroom never does) cannot reopen the key's
    slot window: slots count from the key's first record, and a spent key stays spent."""
    spend = lease(K1, 100, 100)
    apply(store, 0, key("s", K1), slot(), slot(), spend, key("s", K1))
    (stored,) = store.live_keys("s")
    assert stored.offset == 0
    assert stored.exhausted
    assert store.slots_between(0, stored.offset, 10) == 2
    apply(store, 5, key("t", K2), slot(), key("t", K2), key("t", K2))  # twice in one transaction, too
    (stored,) = store.live_keys("t")
    assert (stored.offset, store.slots_between(0, stored.offset, 10)) == (5, 1)
