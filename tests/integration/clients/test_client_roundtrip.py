"""Encrypting producer → Kafka → decrypting consumer on a real broker: both modes, erasure, rejects, transactions."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from client_kit import ClientEnv, poll_all, poll_until

from strongroom.clients.errors import RecordRejected
from strongroom.clients.producer import ProduceOutcome, ProducerRecord
from strongroom.clients.records import MessageStatus
from strongroom.demo.data import PII_PATHS, customer_events
from strongroom.envelope import SubjectKeyRef, parse
from strongroom.keys.erasure import erase


def test_value_mode_round_trip_keeps_key_headers_timestamp_and_tombstones(client_env: ClientEnv) -> None:
    env = client_env
    topic = env.new_topic(partitions=2)
    manager = env.key_manager()
    producer = env.producer({"rules": [{"topic": topic}]}, manager)
    base = int(time.time() * 1000) - 3_600_000  # an hour ago: kept, and clearly not the broker's time
    sent = [(f"cust-{i % 3}".encode(), f"secret order {i}".encode(), base + i) for i in range(12)]
    for key, value, ts in sent:
        outcome = producer.produce(topic, value, key=key, headers=[("trace", b"abc"), ("n", None)], timestamp=ts)
        assert outcome is ProduceOutcome.ENCRYPTED
    assert producer.produce(topic, None, key=b"cust-0", headers={"why": "compaction"}) is ProduceOutcome.PASSTHROUGH
    assert producer.flush(30) == 0
    assert producer.stats()["delivered"] == 13

    # what is on the wire: ciphertext under each subject's key, marker first, other headers unchanged
    wire = env.read_raw(f"{topic}.enc", expect=13)
    assert len(wire) == 13
    keys = manager.get_or_create(["cust-0", "cust-1", "cust-2"])
    for msg in wire:
        if msg.value() is None:
            assert msg.headers() == [("why", b"compaction")]
            continue
        assert b"secret" not in msg.value()
        assert msg.headers() == [("strongroom.enc", b"\x01\x01"), ("trace", b"abc"), ("n", None)]
        subject_key = keys[msg.key().decode()]
        assert parse(msg.value()).key_ref == SubjectKeyRef(subject_key.key_id)  # type: ignore[union-attr]

    consumer = env.consumer({"rules": [{"topic": topic}]})
    consumer.subscribe([f"{topic}.enc"])
    got = poll_all(consumer, 13)
    assert len(got) == 13
    by_value = {m.value: m for m in got if m.value is not None}
    for key, value, ts in sent:
        msg = by_value[value]
        assert msg.key == key
        assert msg.status is MessageStatus.DECRYPTED
        assert msg.timestamp == ts
        assert msg.headers == [("trace", b"abc"), ("n", None)]
        assert msg.subject == key.decode()
    tombstones = [m for m in got if m.value is None]
    assert [t.status for t in tombstones] == [MessageStatus.PASSTHROUGH]
    for partition in (0, 1):
        offsets = [m.offset for m in got if m.partition == partition]
        assert offsets == sorted(offsets)
    consumer.commit()
    assert consumer.metrics()["decrypted"] == 12


def test_fields_mode_batch_then_erasure_nulls_only_that_customers_pii(client_env: ClientEnv) -> None:
    env = client_env
    topic = env.new_topic(partitions=2)
    rules = {"rules": [{"topic": topic, "mode": "fields", "fields": PII_PATHS}]}
    producer = env.producer(rules)
    events = list(customer_events(30, 5))
    outcomes = producer.produce_batch([ProducerRecord(topic, value, key=key) for key, value in events])
    assert outcomes == [ProduceOutcome.ENCRYPTED] * 30
    assert producer.stats()["key_batches"] == 1, "one key-manager round for every new subject of the batch"
    producer.flush(30)
    for msg in env.read_raw(f"{topic}.enc", expect=30):
        doc = json.loads(msg.value())
        assert doc["email"].startswith("sr1:")
        assert "@example.com" not in msg.value().decode()

    originals = {json.loads(v)["event_id"]: json.loads(v) for _, v in events}
    victim = json.loads(events[0][1])["customer_id"]
    receipt = erase(env.client, [victim], reason="GDPR art. 17", topic=env.keys_topic)
    assert receipt.subjects[0].keys_tombstoned == 1

    consumer = env.consumer(rules)
    consumer.subscribe([f"{topic}.enc"])
    got = poll_all(consumer, 30)
    assert len(got) == 30
    for msg in got:
        doc = json.loads(msg.value)
        original = originals[doc["event_id"]]
        assert doc["order"] == original["order"], "non-PII survives, erased or not"
        if doc["customer_id"] == victim:
            assert msg.erased_fields
            assert (doc["name"], doc["email"], doc["address"]) == (None, None, None)
        else:
            assert doc == original
            assert not msg.erased_fields
    victim_records = sum(1 for _, v in events if json.loads(v)["customer_id"] == victim)
    assert consumer.metrics()["erased_fields"] == victim_records


def test_value_mode_erased_subject_dropped_or_marked(client_env: ClientEnv) -> None:
    env = client_env
    topic = env.new_topic()
    rules = {"rules": [{"topic": topic}]}
    producer = env.producer(rules)
    for i in range(6):
        producer.produce(topic, f"v{i}".encode(), key=f"c{i % 2}".encode())
    producer.flush(30)
    erase(env.client, ["c1"], reason="request", topic=env.keys_topic)

    dropping = env.consumer(rules, erased="drop")
    dropping.subscribe([f"{topic}.enc"])
    kept = poll_all(dropping, 3)
    assert [m.value for m in kept] == [b"v0", b"v2", b"v4"]
    assert dropping.poll(2.0) is None
    assert dropping.metrics()["erased_dropped"] == 3

    marking = env.consumer(rules, erased="mark")
    marking.subscribe([f"{topic}.enc"])
    all_six = poll_all(marking, 6)
    marked = [m for m in all_six if m.status is MessageStatus.ERASED]
    assert [m.offset for m in marked] == [1, 3, 5]
    assert all(m.value is None and m.header("strongroom.erased") == b"1" for m in marked)
    assert all(m.header("strongroom.enc") is None for m in all_six)


def test_rejected_records_never_reach_the_encrypted_topic(client_env: ClientEnv) -> None:
    env = client_env
    topic = env.new_topic()
    dlq = env.unique_name("dlq")
    fail_rules = {"rules": [{"topic": topic, "mode": "fields", "fields": ["$.email"]}]}
    producer = env.producer(fail_rules)
    with pytest.raises(RecordRejected, match=rf"topic '{topic}' \(null key\): no subject \(record key") as info:
        producer.produce(topic, b'{"email": "a@b"}')
    assert info.value.reason.startswith("no subject")
    good = ProducerRecord(topic, b'{"email": "ok@example.com"}', key=b"c1")
    with pytest.raises(RecordRejected, match=r"record 2 of a batch of 2; none was produced\): value is not JSON"):
        producer.produce_batch([good, ProducerRecord(topic, b"plain text, not json", key=b"c1")])
    producer.flush(30)

    # a small output topic: the encrypted value would not fit
    small = env.new_topic()
    env.cluster.create_topic(f"{small}.enc", 1, 1, {"max.message.bytes": "3000"})
    small_producer = env.producer({"rules": [{"topic": small}]})
    with pytest.raises(RecordRejected, match=r"value too large to encrypt \(> 1976 bytes\)"):
        small_producer.produce(small, b"x" * 2500, key=b"c1")
    with pytest.raises(RecordRejected, match="encrypted value would be 2009 bytes, above the output topic's limit"):
        small_producer.produce(small, b"x" * 1960, key=b"c1")
    small_producer.flush(30)

    dl_rules = {"rules": [{"topic": topic, "mode": "fields", "fields": ["$.email"], "on_reject": "dead-letter"}]}
    dl_producer = env.producer(dl_rules, dead_letter_topic=dlq)
    outcomes = dl_producer.produce_batch(
        [good, ProducerRecord(topic, b"plain text, not json", key=b"c1", headers=[("h", b"1")])]
    )
    assert outcomes == [ProduceOutcome.ENCRYPTED, ProduceOutcome.DEAD_LETTERED]
    dl_producer.flush(30)

    encrypted = env.read_raw(f"{topic}.enc", expect=1)
    assert len(encrypted) == 1, "only the good record of the dead-letter run reached the encrypted topic"
    assert b"ok@example.com" not in encrypted[0].value()
    assert env.read_raw(f"{small}.enc", expect=0) == []
    (dead,) = env.read_raw(dlq, expect=1)
    assert dead.value() == b"plain text, not json"
    headers = dict(dead.headers())
    assert headers["h"] == b"1"
    assert headers["strongroom.dead-letter.reason"].startswith(b"value is not JSON")
    assert headers["strongroom.dead-letter.source"] == topic.encode()
    assert dl_producer.stats()["dead_lettered"] == 1


def test_transactions_abort_and_commit(client_env: ClientEnv) -> None:
    env = client_env
    topic = env.new_topic()
    rules: dict[str, Any] = {"rules": [{"topic": topic}]}
    producer = env.producer(rules, transactional_id=env.unique_name("txn"))
    producer.begin_transaction()
    producer.produce(topic, b"aborted", key=b"c1")
    producer.abort_transaction()
    producer.begin_transaction()
    producer.produce(topic, b"committed", key=b"c1")
    producer.commit_transaction()
    consumer = env.consumer(rules)
    consumer.subscribe([f"{topic}.enc"])
    got = poll_all(consumer, 1)
    assert [m.value for m in got] == [b"committed"]
    assert consumer.poll(1.5) is None


def test_producer_forgets_cached_keys_when_a_subject_is_erased(client_env: ClientEnv) -> None:
    env = client_env
    topic = env.new_topic()
    manager = env.key_manager(policy="drop")
    producer = env.producer({"rules": [{"topic": topic}]}, manager, key_cache_ttl_s=3600)
    assert producer.produce(topic, b"before", key=b"c1") is ProduceOutcome.ENCRYPTED
    assert producer.produce(topic, b"cached", key=b"c1") is ProduceOutcome.ENCRYPTED
    assert producer.stats()["key_cache_hits"] == 1
    erase(env.client, ["c1"], reason="request", topic=env.keys_topic)
    deadline = time.monotonic() + 15
    while manager.table.stats_counters["markers"] < 1:
        assert time.monotonic() < deadline, "the key manager's table never applied the erasure marker"
        time.sleep(0.1)
    assert producer.produce(topic, b"after", key=b"c1") is ProduceOutcome.DROPPED
    assert producer.produce(topic, b"other", key=b"c2") is ProduceOutcome.ENCRYPTED
    producer.flush(30)
    assert len(env.read_raw(f"{topic}.enc", expect=3)) == 3


def test_decrypting_consumer_is_encrypted_only_by_default(client_env: ClientEnv) -> None:
    """A plaintext record slipped into an encrypted topic (a downgrade) fails by policy; a reader that
    allows plaintext passes it on."""
    env = client_env
    topic = env.new_topic()
    rules = {"rules": [{"topic": topic}]}
    producer = env.producer(rules)
    for i in range(2):
        assert producer.produce(topic, f"secret {i}".encode(), key=b"cust-1") is ProduceOutcome.ENCRYPTED
    assert producer.flush(30) == 0
    env.produce_raw(f"{topic}.enc", [(b"cust-1", b"plaintext, no marker", [])])

    strict = env.consumer(rules, on_failure="skip")
    strict.subscribe([f"{topic}.enc"])
    got = poll_until(strict, lambda m: m["decrypted"] == 2 and m["skipped"] == 1)
    assert sorted(m.value for m in got) == [b"secret 0", b"secret 1"]
    assert strict.metrics()["passthrough"] == 0

    tolerant = env.consumer(rules, on_failure="skip", encrypted_only=False)
    tolerant.subscribe([f"{topic}.enc"])
    got = poll_until(tolerant, lambda m: m["decrypted"] == 2 and m["passthrough"] == 1)
    assert b"plaintext, no marker" in [m.value for m in got]
