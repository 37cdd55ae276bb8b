"""strongroom's one Kafka transport against a real broker: reading what has arrived without waiting for more."""

from __future__ import annotations

import time
from collections.abc import Callable

from confluent_kafka import TopicPartition

from strongroom.kafka.config import ClientConfig
from strongroom.kafka.transport import consume_ready, new_consumer, new_producer
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
