"""The local Kafka launcher: a real KRaft cluster, Kafka's own admin tools, broker restarts."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from confluent_kafka import TopicPartition

from strongroom.kafka.config import ClientConfig
from strongroom.kafka.transport import build_consumer, build_producer
from strongroom.testing.kafka_cluster import KafkaCluster


def produce(bootstrap: str, topic: str, n: int, **conf: object) -> list[int]:
    producer = build_producer({**ClientConfig(bootstrap).producer(), **conf})
    offsets: list[int] = []
    for i in range(n):
        producer.produce(
            topic, key=f"k{i}".encode(), value=f"v{i}".encode(),
            on_delivery=lambda err, msg: offsets.append(msg.offset()) if err is None else None,
        )  # fmt: skip
    assert producer.flush(30) == 0
    return offsets


def consume_all(bootstrap: str, topic: str, partitions: int = 1, timeout: float = 20.0) -> list[bytes]:
    consumer = build_consumer(ClientConfig(bootstrap).consumer())
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values: list[bytes] = []
    try:
        low_high = [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in range(partitions)]
        expected = sum(high - low for low, high in low_high)
        import time

        deadline = time.monotonic() + timeout
        while len(values) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                values.append(msg.value())
    finally:
        consumer.close()
    return values


def test_produce_consume_and_admin_tools(
    kafka_cluster: KafkaCluster, new_topic: Callable[..., str], new_group: str
) -> None:
    topic = new_topic(partitions=2)
    assert len(produce(kafka_cluster.bootstrap_servers, topic, 20)) == 20
    assert len(consume_all(kafka_cluster.bootstrap_servers, topic, 2)) == 20

    # Kafka's own kafka-delete-records, cross-checked with the watermarks a client sees.
    out = kafka_cluster.delete_records_tool({(topic, 0): 3})
    assert "low_watermark" in out or "partition" in out.lower()
    consumer = build_consumer(ClientConfig(kafka_cluster.bootstrap_servers).consumer(new_group))
    low, _high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    assert low == 3
    consumer.assign([TopicPartition(topic, 0, 3)])
    msg = None
    while msg is None:
        msg = consumer.poll(1)
    consumer.commit(message=msg, asynchronous=False)
    consumer.close()

    # Kafka's own kafka-consumer-groups sees the group strongroom's client committed.
    assert new_group in kafka_cluster.consumer_groups_tool("--list")
    described = kafka_cluster.consumer_groups_tool("--describe", "--group", new_group)
    assert topic in described


def test_broker_restart_keeps_data(kafka_cluster_factory: Callable[..., KafkaCluster]) -> None:
    # A cluster id may start with "-" (1 in 64 random ids): the storage tool must not read it as an option.
    cluster = kafka_cluster_factory(
        brokers=1, broker_config={"log.retention.hours": 1}, cluster_id="-" + uuid.uuid4().hex[:21]
    )
    topic = cluster.create_topic("restart-me", partitions=1, config={"cleanup.policy": "delete"})
    produce(cluster.bootstrap_servers, topic, 10)
    cluster.stop_broker(1)
    assert not cluster.broker_running(1)
    cluster.start_broker(1)
    assert sorted(consume_all(cluster.bootstrap_servers, topic)) == sorted(f"v{i}".encode() for i in range(10))
    # broker configuration reached the broker
    assert "log.retention.hours=1" in (cluster.base_dir / "node-1" / "server.properties").read_text()
