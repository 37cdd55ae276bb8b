"""The decrypting consumer when things go wrong: lost KEK, tampering, unknown versions, late keys, KMS outage."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from client_kit import ClientEnv, poll_all, poll_until
from confluent_kafka import TopicPartition

from strongroom.clients.errors import DecryptFailed
from strongroom.envelope import IntegrityError, UnsupportedFormatVersion
from strongroom.kafka.transport import build_consumer, build_producer
from strongroom.kms.errors import KekDisabled
from strongroom.testing.forwarder import TcpForwarder


def value_rules(topic: str) -> dict[str, Any]:
    return {"rules": [{"topic": topic}]}


def produce_encrypted(env: ClientEnv, topic: str, n: int, **producer_kwargs: Any) -> None:
    producer = env.producer(value_rules(topic), **producer_kwargs)
    for i in range(n):
        producer.produce(topic, f"record {i}".encode(), key=f"cust-{i % 2}".encode())
    assert producer.flush(30) == 0


def test_lost_kek_fails_with_coordinates_then_heals_without_restart(client_env: ClientEnv) -> None:
    env = client_env
    topic = env.new_topic()
    produce_encrypted(env, topic, 4)
    env.kek_admin.disable_kek(env.kek_id)

    consumer = env.consumer(value_rules(topic))  # a cold key table: it must ask the KMS
    consumer.subscribe([f"{topic}.enc"])
    deadline = time.monotonic() + 30
    error: DecryptFailed | None = None
    while error is None and time.monotonic() < deadline:
        try:
            assert consumer.poll(0.5) is None, "nothing may be delivered while the KEK is disabled"
        except DecryptFailed as exc:
            error = exc
    assert error is not None
    assert (error.topic, error.partition, error.offset) == (f"{topic}.enc", 0, 0)
    assert error.kek_ref == f"local:{env.kek_id}"
    assert isinstance(error.cause, KekDisabled)
    assert f"cannot decrypt {topic}.enc[0]@0: subject key " in str(error)
    assert f"under KEK local:{env.kek_id}" in str(error)
    assert "enable the KEK" in error.hint

    # the application retries: the same record again, still failing, nothing skipped
    with pytest.raises(DecryptFailed) as again:
        consumer.poll(10)
    assert again.value.offset == 0
    consumer.commit()  # commits nothing past the failing record

    env.kek_admin.enable_kek(env.kek_id)
    got = poll_all(consumer, 4)
    assert [m.value for m in got] == [f"record {i}".encode() for i in range(4)]
    consumer.commit()
    metrics = consumer.metrics()
    assert metrics["failures_raised"] >= 2
    assert metrics["failures_by_cause"]["KekDisabled"] >= 2


def test_deleted_kek_dead_letter_and_skip_policies(client_env: ClientEnv) -> None:
    env = client_env
    topic = env.new_topic()
    dlq = env.unique_name("dlq")
    produce_encrypted(env, topic, 3)
    env.kek_admin.delete_kek(env.kek_id)

    dead = env.consumer(value_rules(topic), on_failure="dead-letter", dead_letter_topic=dlq)
    dead.subscribe([f"{topic}.enc"])
    assert poll_until(dead, lambda m: m["dead_lettered"] == 3) == []
    assert dead.metrics()["dead_lettered"] == 3
    assert dead.metrics()["failures_by_cause"] == {"KekNotFound": 3}
    dead.commit()
    original = env.read_raw(f"{topic}.enc", expect=3)
    letters = env.read_raw(dlq, expect=3)
    assert [m.value() for m in letters] == [m.value() for m in original], "ciphertext kept unchanged"
    for letter, source in zip(letters, original, strict=True):
        headers = dict(letter.headers())
        assert headers["strongroom.enc"] == b"\x01\x01"
        assert headers["strongroom.dead-letter.source"] == f"{topic}.enc/0/{source.offset()}".encode()
        assert f"under KEK local:{env.kek_id}".encode() in headers["strongroom.dead-letter.reason"]

    skipping = env.consumer(value_rules(topic), on_failure="skip")
    skipping.subscribe([f"{topic}.enc"])
    assert poll_until(skipping, lambda m: m["skipped"] == 3) == []


def test_tampered_and_unknown_version_records_name_their_coordinates(client_env: ClientEnv) -> None:
    env = client_env
    topic = env.new_topic()
    produce_encrypted(env, topic, 1)
    (good,) = env.read_raw(f"{topic}.enc", expect=1)
    value = good.value()
    tampered = value[:-1] + bytes([value[-1] ^ 0x01])
    newer = value[:1] + b"\x02" + value[2:]
    env.produce_raw(
        f"{topic}.enc",
        [
            (good.key(), tampered, good.headers()),  # offset 1
            (good.key(), newer, good.headers()),  # offset 2
            (good.key(), value, [("strongroom.enc", b"\x07\x01")]),  # offset 3: a marker from the future
        ],
    )
    consumer = env.consumer(value_rules(topic))
    consumer.subscribe([f"{topic}.enc"])
    batch = consumer.consume(5, timeout=20)  # the finished record is handed over, the failure comes next
    assert [m.value for m in batch] == [b"record 0"]
    with pytest.raises(DecryptFailed, match=rf"cannot decrypt {topic}\.enc\[0\]@1: IntegrityError: ") as info:
        consumer.consume(5, timeout=10)
    assert isinstance(info.value.cause, IntegrityError)
    assert info.value.kek_ref is None
    assert "quarantine" in info.value.hint

    skipping = env.consumer(value_rules(topic), on_failure="skip")
    skipping.subscribe([f"{topic}.enc"])
    assert [m.offset for m in poll_until(skipping, lambda m: m["skipped"] == 3)] == [0]
    assert skipping.metrics()["failures_by_cause"] == {"IntegrityError": 1, "UnsupportedFormatVersion": 2}

    strict = env.consumer(value_rules(topic))
    strict.assign([TopicPartition(f"{topic}.enc", 0, 2)])
    with pytest.raises(DecryptFailed, match=r"@2: UnsupportedFormatVersion: envelope format version 0x02") as info:
        strict.poll(10)
    assert isinstance(info.value.cause, UnsupportedFormatVersion)
    assert "upgrade strongroom" in info.value.hint


def test_records_ahead_of_their_keys_wait_and_arrive_in_order(client_env: ClientEnv) -> None:
    """Data replicated before its keys: the consumer's key table reads a keys topic filled only later."""
    env = client_env
    topic = env.new_topic(partitions=2)
    produce_encrypted(env, topic, 10)
    late_keys = env.new_keys_topic()
    consumer = env.consumer(value_rules(topic), table=env.key_table(late_keys))
    consumer.subscribe([f"{topic}.enc"])
    assert consumer.poll(3.0) is None, "records wait for their keys instead of failing"
    held = consumer.held_partitions()
    assert held, "the partitions are paused at their first record"
    assert set(held.values()) == {0}
    consumer.commit()
    probe = build_consumer(env.client.consumer(consumer.config["group.id"]))
    committed = probe.committed([TopicPartition(f"{topic}.enc", p) for p in (0, 1)], timeout=10)
    probe.close()
    assert all(tp.offset < 0 for tp in committed), "nothing is committed past a waiting record"

    impatient = env.consumer(value_rules(topic), table=consumer.table, pending_timeout_s=1.0)
    impatient.subscribe([f"{topic}.enc"])
    with pytest.raises(DecryptFailed, match=rf"subject key [0-9a-f]{{32}} has not arrived in keys topic '{late_keys}'"):
        poll_all(impatient, 1, timeout=20)
    assert impatient.metrics()["failures_by_cause"] == {"KeyNotArrived": 1}

    copier = threading.Thread(target=copy_topic, args=(env, env.keys_topic, late_keys), daemon=True)
    copier.start()
    got = poll_all(consumer, 10, timeout=60)
    copier.join(30)
    assert sorted(m.value for m in got) == sorted(f"record {i}".encode() for i in range(10))
    for partition in (0, 1):
        offsets = [m.offset for m in got if m.partition == partition]
        assert offsets == list(range(len(offsets))), "per-partition order is kept"
    metrics = consumer.metrics()
    assert metrics["held"] >= 1
    assert metrics["failed"] == 0


def test_mirrored_topic_reads_with_a_topic_map(client_env: ClientEnv) -> None:
    env = client_env
    topic = env.new_topic()
    produce_encrypted(env, topic, 2)
    mirror = env.new_topic()  # a replicated copy under another name (MirrorMaker, cluster linking)
    env.produce_raw(mirror, [(m.key(), m.value(), m.headers()) for m in env.read_raw(f"{topic}.enc", expect=2)])
    mirror_rules = {"rules": [{"topic": mirror}]}

    unmapped = env.consumer(mirror_rules)
    unmapped.subscribe([mirror])
    with pytest.raises(DecryptFailed, match=rf"{mirror}\[0\]@0: IntegrityError: record does not belong to topic"):
        poll_all(unmapped, 1, timeout=20)

    mapped = env.consumer(mirror_rules, topic_map={mirror: f"{topic}.enc"})
    mapped.subscribe([mirror])
    assert [m.value for m in poll_all(mapped, 2)] == [b"record 0", b"record 1"]


def copy_topic(env: ClientEnv, source: str, target: str) -> None:
    """Copy every record of ``source`` into the same partition of ``target`` (except the layout record)."""
    time.sleep(1.0)
    reader = build_consumer(env.client.consumer(env.unique_name("copy"), {"enable.partition.eof": True}))
    partitions = reader.list_topics(source, timeout=10).topics[source].partitions
    reader.assign([TopicPartition(source, p, 0) for p in partitions])
    writer = build_producer(env.client.producer())
    at_end: set[int] = set()
    while len(at_end) < len(partitions):
        msg = reader.poll(1.0)
        if msg is None:
            continue
        if msg.error() is not None:
            at_end.add(msg.partition())
            continue
        if msg.key() and msg.key().startswith(b"m\x00"):
            continue
        writer.produce(target, key=msg.key(), value=msg.value(), headers=msg.headers(), partition=msg.partition())
    writer.flush(30)
    reader.close()


def test_kms_outage_is_waited_out_never_reported_as_a_lost_key(client_env: ClientEnv, openbao: Any) -> None:
    from strongroom.kms.admin.vault import VaultKekAdmin
    from strongroom.kms.vault import VaultKms

    env = client_env
    alias = env.unique_name("kek")
    VaultKekAdmin(openbao.client()).create_kek(alias)
    direct = VaultKms.from_config({"address": openbao.address, "token": openbao.token})
    topic = env.new_topic()
    manager = env.key_manager(topic=env.keys_topic, kms=direct, kek_alias=alias)
    produce_encrypted(env, topic, 3, manager=manager)

    forwarder = TcpForwarder(int(openbao.address.rsplit(":", 1)[1]))  # refuses connections until started
    flaky = VaultKms.from_config(
        {"address": f"http://127.0.0.1:{forwarder.port}", "token": openbao.token, "timeout_seconds": 2}
    )
    consumer = env.consumer(value_rules(topic), table=env.key_table(kms=flaky))
    consumer.subscribe([f"{topic}.enc"])
    try:
        assert consumer.poll(4.0) is None, "held while the KMS is down"
        assert consumer.metrics()["kms_retries"] >= 1
        assert set(consumer.held_partitions().values()) <= {0}, "held at the first record, or about to retry it"
        forwarder.start()
        got = poll_all(consumer, 3, timeout=60)
    finally:
        forwarder.stop()
    assert [m.value for m in got] == [b"record 0", b"record 1", b"record 2"]
    assert consumer.metrics()["failed"] == 0
    assert consumer.metrics()["failures_by_cause"] == {}
