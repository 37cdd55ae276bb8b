"""The batch paths on a real broker: batches in and out, order and offsets kept, erasure not outrun by a cache."""

from __future__ import annotations

import time
from typing import Any

from client_kit import ClientEnv
from confluent_kafka import TopicPartition

from strongroom.clients.producer import ProduceOutcome, ProducerRecord
from strongroom.clients.records import MessageStatus
from strongroom.keys.erasure import erase


def rules(topic: str) -> dict[str, Any]:
    return {"rules": [{"topic": topic}]}


def consume_all(consumer: Any, expect: int, timeout: float = 30.0) -> list[Any]:
    out: list[Any] = []
    while len(out) < expect:
        batch = consumer.consume(expect - len(out), timeout=timeout)
        assert batch, f"stalled at {len(out)} of {expect}: {consumer.metrics()}"
        out.extend(batch)
    return out


def test_batches_round_trip_in_order_and_a_plaintext_record_in_the_middle_is_judged_alone(
    client_env: ClientEnv,
) -> None:
    env = client_env
    topic = env.new_topic(partitions=1)
    producer = env.producer(rules(topic))
    first = [ProducerRecord(topic, f"order {i}".encode(), key=f"cust-{i % 7}".encode()) for i in range(300)]
    assert producer.produce_batch(first) == [ProduceOutcome.ENCRYPTED] * 300
    assert producer.flush(30) == 0
    env.produce_raw(f"{topic}.enc", [(b"cust-1", b"not encrypted", [])])  # offset 300: no marker
    second = [ProducerRecord(topic, f"order {i}".encode(), key=f"cust-{i % 7}".encode()) for i in range(300, 400)]
    producer.produce_batch(second)
    assert producer.flush(30) == 0
    assert producer.stats()["encrypted"] == 400

    consumer = env.consumer(rules(topic), on_failure="skip")
    consumer.assign([TopicPartition(f"{topic}.enc", 0, 0)])
    got = consume_all(consumer, 400)
    assert [m.offset for m in got] == [*range(300), *range(301, 401)]
    assert [m.value for m in got] == [f"order {i}".encode() for i in range(400)]
    assert all(m.status is MessageStatus.DECRYPTED and m.headers == [] for m in got)
    assert consumer.metrics()["decrypted"] == 400
    assert consumer.metrics()["skipped"] == 1
    consumer.commit()
    (committed,) = consumer._consumer.committed([TopicPartition(f"{topic}.enc", 0)], timeout=10)
    assert committed.offset == 401


def test_an_erased_subject_is_not_opened_from_the_shared_cipher_cache(client_env: ClientEnv) -> None:
    env = client_env
    topic = env.new_topic(partitions=1)
    producer = env.producer(rules(topic))
    producer.produce_batch([ProducerRecord(topic, f"v{i}".encode(), key=f"c{i % 2}".encode()) for i in range(10)])
    assert producer.flush(30) == 0
    table = env.key_table()
    warm = env.consumer(rules(topic), table=table)
    warm.assign([TopicPartition(f"{topic}.enc", 0, 0)])
    assert len(consume_all(warm, 10)) == 10  # both subjects' ciphers are now ready in the table's cache

    erase(env.client, ["c1"], reason="request", topic=env.keys_topic)
    table.wait_caught_up(30)
    after = env.consumer(rules(topic), table=table, erased="drop")
    after.assign([TopicPartition(f"{topic}.enc", 0, 0)])
    kept = consume_all(after, 5)
    assert [m.value for m in kept] == [b"v0", b"v2", b"v4", b"v6", b"v8"]
    assert after.consume(5, timeout=2.0) == []
    assert after.metrics()["erased_dropped"] == 5

    # the producer's prepared sealer of c1 went with the erasure: its next c1 record is not under the old key
    deadline = time.monotonic() + 15
    while producer._sealers.counters["erasure_clears"] < 1:
        assert time.monotonic() < deadline, "the producer never heard of the erasure"
        time.sleep(0.1)
    producer.produce_batch([ProducerRecord(topic, b"again", key=b"c1")])
    assert producer.flush(30) == 0
    raw = env.read_raw(f"{topic}.enc", expect=11)
    old_c1 = {m.value()[4:20] for m in raw[:10] if m.key() == b"c1"}
    assert len(old_c1) == 1
    assert raw[10].value()[4:20] not in old_c1
