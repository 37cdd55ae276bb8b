"""strongroom's one Kafka transport against a real broker: reading what has arrived without waiting for more, and
topics it creates ready for their first write."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import OffsetSpec

from strongroom.errors import KafkaError
from strongroom.kafka.config import ClientConfig
from strongroom.kafka.topics import create_topics, ensure_topic, wait_until_writable
from strongroom.kafka.transport import consume_ready, new_admin, new_consumer, new_producer
from strongroom.keys.topic import effective_topic_config
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


def test_strongrooms_own_topics_are_created_once_replicated_and_writable(
    kafka_cluster3: KafkaCluster, unique_name: Callable[[str], str]
) -> None:
    """The keys, operations-log, alerts and pending topics go through ``ensure_topic``: replication min(3,
    brokers), ``min.insync.replicas`` one less unless the topic's config sets it, an existing topic left
    alone, and a topic the cluster refuses named in the error."""
    admin = new_admin(ClientConfig(kafka_cluster3.bootstrap_servers, extra={"log_level": 0}))
    topic = unique_name("own")
    ensured = ensure_topic(admin, topic, partitions=2, config={"retention.ms": "-1"})
    assert (ensured.created, ensured.replication_factor, ensured.writable) == (True, 3, True)
    config = effective_topic_config(admin, topic)
    assert (config["min.insync.replicas"], config["retention.ms"]) == ("2", "-1")
    replicas = admin.list_topics(topic, timeout=10).topics[topic].partitions
    assert sorted(len(p.replicas) for p in replicas.values()) == [3, 3]

    again = ensure_topic(admin, topic, partitions=6, config={"retention.ms": "1000", "min.insync.replicas": "1"})
    assert again.created is False
    assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 2
    assert effective_topic_config(admin, topic)["retention.ms"] == "-1"
    assert effective_topic_config(admin, topic)["min.insync.replicas"] == "2"

    two = unique_name("own-two")
    assert ensure_topic(admin, two, replication_factor=2).replication_factor == 2
    assert effective_topic_config(admin, two)["min.insync.replicas"] == "1"
    overridden = unique_name("own-override")
    ensure_topic(admin, overridden, config={"min.insync.replicas": "1"})
    assert effective_topic_config(admin, overridden)["min.insync.replicas"] == "1"

    refused = unique_name("own-refused")
    with pytest.raises(KafkaError, match=f"cannot create topic '{refused}'"):
        ensure_topic(admin, refused, replication_factor=5)
    assert refused not in admin.list_topics(timeout=10).topics
