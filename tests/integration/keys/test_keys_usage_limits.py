"""Subject-key usage limits on a real Kafka: concurrent writers rotate a busy subject at its seal bound."""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from strongroom.envelope import RecordContext, decrypt_value, seal
from strongroom.kafka.config import ClientConfig
from strongroom.keys import KeyManager, KeyTable, SubjectKey, WrappingKeyPolicy
from strongroom.keys.cache import KeyCache
from strongroom.keys.errors import KeysConfigError
from strongroom.keys.usage import SubjectKeyLimits
from strongroom.kms.metered import MeteredKms

LIMITS = SubjectKeyLimits(max_seals=300, lease_seals=40, creator_seals=40, slot_window=0)  # leases only
#: The same with seal slots: two writer starts after a key's record seal up to 40 each with it.
SLOT_LIMITS = SubjectKeyLimits(max_seals=300, lease_seals=40, creator_seals=40, slot_window=2)
SUBJECTS = ["tenant-a", "tenant-b", "tenant-c"]


@pytest.mark.parametrize("limits", [LIMITS, SLOT_LIMITS], ids=["leases", "slots"])
def test_concurrent_writers_rotate_at_the_seal_bound_and_every_record_opens(
    client: ClientConfig, keys_topic: str, readers_topic: str, kms: MeteredKms, limits: SubjectKeyLimits
) -> None:
    options = {"readers_topic": readers_topic}
    sealed: list[tuple[str, bytes, bytes, bytes]] = []  # subject, key id, plaintext, envelope
    lock = threading.Lock()
    errors: list[BaseException] = []

    def writer(cache: KeyCache, name: str) -> None:
        try:
            for n in range(40):
                keys = cache.get_or_create(SUBJECTS, seals=dict.fromkeys(SUBJECTS, 5))
                for subject, key in keys.items():
                    assert isinstance(key, SubjectKey)
                    for i in range(5):
                        text = f"{name}/{n}/{i} {subject}".encode()
                        envelope = seal(text, key.key, key.ref, RecordContext("t", subject.encode()))
                        with lock:
                            sealed.append((subject, key.key_id, text, envelope))
        except BaseException as exc:  # noqa: BLE001 - reported by the test thread
            errors.append(exc)

    # Two writers (separate managers, tables and caches: like two pipelines), three threads each.
    managers = [KeyManager(client, kms, topic=keys_topic, limits=limits, table_options=options) for _ in range(2)]
    try:
        caches = [KeyCache(manager) for manager in managers]
        threads = [
            threading.Thread(target=writer, args=(cache, f"w{w}t{t}"))
            for w, cache in enumerate(caches)
            for t in range(3)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(300)
        assert not errors, errors
        stats = [manager.stats()["seals"] for manager in managers]
    finally:
        for manager in managers:
            manager.close()

    assert len(sealed) == 2 * 3 * 40 * 5 * len(SUBJECTS)
    per_key = Counter(key_id for _, key_id, _, _ in sealed)
    assert max(per_key.values()) <= limits.bound, f"a key sealed {max(per_key.values())} records"
    keys_of = {subject: {key_id for s, key_id, _, _ in sealed if s == subject} for subject in SUBJECTS}
    # 1200 seals per subject under a bound of 340 (420 with slots): rotated at least three (two) times each
    assert all(len(ids) >= -(-1200 // limits.bound) for ids in keys_of.values()), {
        s: len(ids) for s, ids in keys_of.items()
    }
    assert sum(s["leases_denied"] for s in stats) >= 1
    assert sum(s["rotated"] for s in stats) >= 3
    if limits.slot_window:  # each subject's first key was made by one writer: the other sealed under its slot
        assert sum(s["slot_credits"] for s in stats) >= len(SUBJECTS)
    else:
        assert sum(s["slots_claimed"] for s in stats) == 0

    with KeyTable(client, kms, topic=keys_topic, readers_topic=readers_topic) as reader:
        reader.wait_caught_up(60)
        for subject, _, text, envelope in sealed:  # every record opens, under whichever key sealed it
            assert decrypt_value(envelope, reader.key_lookup_for(subject), RecordContext("t", subject.encode())) == text
        for subject in SUBJECTS:
            state = reader.subject_state(subject)
            assert {k.key_id for k in state.keys} >= keys_of[subject]  # rotation keeps the old keys
            assert sum(k.exhausted for k in state.keys) >= len(keys_of[subject]) - 1


def test_a_key_older_than_the_age_limit_is_rotated(
    client: ClientConfig, keys_topic: str, readers_topic: str, kms: MeteredKms
) -> None:
    now = [time.time()]  # key records carry the wall-clock time they were written at
    policy = WrappingKeyPolicy(clock=lambda: now[0])
    limits = SubjectKeyLimits(max_age_seconds=3600)
    options = {"readers_topic": readers_topic}
    with KeyManager(client, kms, topic=keys_topic, wrapping=policy, limits=limits, table_options=options) as manager:
        cache = KeyCache(manager)
        first = cache.get_or_create(["old"])["old"]
        assert isinstance(first, SubjectKey)
        assert first.created_ms is not None
        now[0] = first.created_ms / 1000 + 3599
        assert cache.get_or_create(["old"])["old"] == first
        # exactly the age limit: the first key is too old, a key written after it (real time moved on) is not
        now[0] = first.created_ms / 1000 + 3600.0005  # (half a millisecond against float rounding)
        second = cache.get_or_create(["old"])["old"]
        assert isinstance(second, SubjectKey)
        assert second.key_id != first.key_id
        assert manager.get_or_create(["old"])["old"] == second  # the new key is the subject's current key


def test_a_prefetched_batch_is_answered_from_memory(
    client: ClientConfig, keys_topic: str, readers_topic: str, kms: MeteredKms
) -> None:
    options = {"readers_topic": readers_topic}
    with KeyManager(client, kms, topic=keys_topic, table_options=options) as manager:
        cache = KeyCache(manager)
        try:
            future = cache.prefetch(f"next-{i}" for i in range(500))
            current = cache.get_or_create(["now"])  # waits for the prefetch under way, then its own batch
            assert future.done()
            calls = cache.counters["manager_calls"]
            prefetched = future.result()
            assert cache.get_or_create(prefetched) == prefetched
            assert cache.counters["manager_calls"] == calls  # no manager call: every key came from memory
            assert isinstance(current["now"], SubjectKey)
        finally:
            cache.close()


def test_a_readers_key_table_passes_seal_leases_over_and_cannot_back_a_writer(
    client: ClientConfig, keys_topic: str, readers_topic: str, kms: MeteredKms, tmp_path: Path
) -> None:
    """Only a writer's key table adds up seal leases; a reader's skips them (a cheaper catch-up), still
    opens every record, and is refused as a writer's table. A persistent store always adds them up."""
    options = {"readers_topic": readers_topic}
    with KeyManager(client, kms, topic=keys_topic, limits=LIMITS, table_options=options) as manager:
        cache = KeyCache(manager)
        key = cache.get_or_create(["leased"], seals={"leased": 100})["leased"]  # past creator_seals: leased
        assert isinstance(key, SubjectKey)
        assert manager.stats()["seals"]["leases_granted"] >= 1
    envelope = seal(b"text", key.key, key.ref, RecordContext("t", b"leased"))

    with KeyTable(client, kms, topic=keys_topic, readers_topic=readers_topic, seal_usage=False) as reader:
        reader.wait_caught_up(60)
        assert reader.stats()["leases_skipped"] >= 1
        assert decrypt_value(envelope, reader.key_lookup_for("leased"), RecordContext("t", b"leased")) == b"text"
        with pytest.raises(KeysConfigError, match="passes seal leases over"):
            reader.lease_outcomes([b"\0" * 8])
        with pytest.raises(KeysConfigError, match="must add up seal leases"):
            KeyManager(client, kms, topic=keys_topic, limits=LIMITS, table=reader)
    with pytest.raises(KeysConfigError, match="must add up seal leases"):
        KeyManager(client, kms, topic=keys_topic, table_options={**options, "seal_usage": False})

    with KeyTable(client, kms, topic=keys_topic, readers_topic=readers_topic) as writers_view:
        writers_view.wait_caught_up(60)
        assert writers_view.stats()["leases_skipped"] == 0
        assert writers_view.lease_outcomes([b"\0" * 8]) == {}  # (no such lease)
    persistent = KeyTable(client, kms, topic=keys_topic, readers_topic=readers_topic, store_path=tmp_path / "keys",
                          seal_usage=False)  # fmt: skip
    assert persistent.seal_usage  # a writer may open this store later


def test_a_writer_start_claims_a_slot_per_partition_instead_of_a_lease_per_key_until_the_window_is_full(
    client: ClientConfig, keys_topic: str, readers_topic: str, kms: MeteredKms
) -> None:
    """A new writer over existing keys writes one seal slot per partition, not a lease per key; the first
    ``slot_window`` starts after a key seal under their slots, later ones (and batches bigger than a slot's
    share) lease as before; no key rotates, and every writer's table counts the same slots."""
    limits = SubjectKeyLimits(max_seals=10_000, lease_seals=50, creator_seals=10, slot_window=2)
    subjects = [f"s{i}" for i in range(30)]
    options = {"readers_topic": readers_topic}

    def start(seals: int) -> tuple[dict[str, int], dict[str, SubjectKey]]:
        with KeyManager(client, kms, topic=keys_topic, limits=limits, table_options=options) as manager:
            keys = KeyCache(manager).get_or_create(subjects, seals=dict.fromkeys(subjects, seals))
            assert all(isinstance(key, SubjectKey) for key in keys.values())
            return manager.stats()["seals"], keys  # type: ignore[return-value]

    first, keys = start(20)  # creates every key: its creator share (10) is too small, so it leases
    assert (first["slots_claimed"], first["slot_credits"], first["leases_granted"]) == (0, 0, len(subjects))
    partitions = {key.partition for key in keys.values()}
    assert len(partitions) == 3
    for _ in range(2):  # the window's two starts: one slot per partition, no lease
        stats, again = start(20)
        assert again == keys  # the same keys: nothing rotated
        assert (stats["slots_claimed"], stats["slot_credits"], stats["leases_granted"]) == (3, len(subjects), 0)
    stats, again = start(20)  # the third slot after every key: outside the window, so leases again
    assert again == keys
    assert (stats["slots_claimed"], stats["slot_credits"], stats["leases_granted"]) == (3, 0, len(subjects))
    stats, again = start(60)  # more than a slot's share: no slot claimed, leases
    assert again == keys
    assert (stats["slots_claimed"], stats["slot_credits"], stats["leases_granted"]) == (0, 0, len(subjects))

    with KeyTable(client, kms, topic=keys_topic, readers_topic=readers_topic) as table:
        table.wait_caught_up(60)
        for partition in partitions:  # every writer's table counts the same three slots after each key
            assert table.slots_between(partition, -1, 10**9) == 3
        for key in keys.values():
            assert key.offset is not None
            assert table.slots_between(key.partition or 0, key.offset, 10**9) == 3
