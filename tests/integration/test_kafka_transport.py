"""strongroom's one Kafka transport against a real broker: reading what has arrived without waiting for more, and
topics it creates ready for their first write."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import OffsetSpec

from strongroom.kafka.config import ClientConfig
from strongroom.kafka.topics import create_topics, wait_until_writable
from strongroom.kafka.transport import consume_ready, new_admin, new_consumer, new_producer
from strongroom.testing.kafka_cluster import KafkaCluster


def test_consume_ready_returns_what_arrived_without_waiting_out_its_wait(
    kafka_cluster: KafkaCluster, unique_name: Callable[[str], str]
) -> None:
    client = ClientConfig(kafka_cluster.bootstrap_servers, extra={"log_level": 0})
    topic = unique_name("ready")
    kafka_cluster.create_topic(topic, partitions=1)
    producer = new_producer(client)
    for i in range(5):
        producer.produce(topic, key=b"k", value=f"v{i}".encode())
    assert producer.flush(30) == 0
    consumer = new_consumer(client, unique_name("g"), {"enable.partition.eof": True})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        # ``consumer.consume(1000, 60)`` would hold these five records for the whole minute
        started = time.monotonic()
        values: list[bytes] = []
        while len(values) < 5:
            batch = consume_ready(consumer, 1000, 60.0)
            assert batch, "nothing came within a minute"
            values += [msg.value() for msg in batch if msg.error() is None]
        assert time.monotonic() - started < 30
        assert values == [f"v{i}".encode() for i in range(5)]
        # nothing more: it waits its ``wait`` and returns what there is (the end-of-partition event, then nothing)
        rest = consume_ready(consumer, 1000, 0.5) + consume_ready(consumer, 1000, 0.5)
        assert all(msg.error() is not None for msg in rest)
    finally:
        consumer.close()


def test_created_topics_answer_from_every_partition_leader_at_once(
    kafka_cluster: KafkaCluster, unique_name: Callable[[str], str]
) -> None:
    """The metadata names a new partition's leader before that broker hosts it; a write in between fails and
    a later one can overtake it. strongroom returns a topic it created only once every leader hosts it."""
    client = ClientConfig(kafka_cluster.bootstrap_servers, extra={"log_level": 0})
    topics = [unique_name("fresh") for _ in range(8)]
    assert set(create_topics(client, topics, partitions=4).values()) == {"created"}
    admin = new_admin(client)
    latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
    asked = {TopicPartition(topic, p): latest for topic in topics for p in range(4)}
    # the first ask, no retry: a partition not hosted yet would answer NOT_LEADER_OR_FOLLOWER
    answers = {tp: future.result(10).offset for tp, future in admin.list_offsets(asked, request_timeout=10).items()}
    assert set(answers.values()) == {0}
    assert len(answers) == 32


def test_waiting_for_a_topic_that_never_appears_gives_up_and_says_so(
    kafka_cluster: KafkaCluster, unique_name: Callable[[str], str], caplog: pytest.LogCaptureFixture
) -> None:
    admin = new_admin(ClientConfig(kafka_cluster.bootstrap_servers, extra={"log_level": 0}))
    topic = unique_name("never")
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="strongroom.kafka.topics"):
        assert wait_until_writable(admin, topic, timeout=1.0) is False
    assert 1.0 <= time.monotonic() - started < 15
    assert f"topic {topic}: partitions all have no leader that answers after 1s" in caplog.text
