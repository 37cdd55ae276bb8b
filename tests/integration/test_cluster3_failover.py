"""Failover on a real 3-broker cluster: kill -9 the leader, nothing acknowledged is lost."""

from __future__ import annotations

import time
from collections.abc import Callable

from confluent_kafka import TopicPartition

from strongroom.kafka.config import ClientConfig
from strongroom.kafka.transport import build_consumer, build_producer
from strongroom.testing.kafka_cluster import KafkaCluster


def read_with_epochs(bootstrap: str, topic: str, expected: int) -> list[tuple[bytes, int]]:
    consumer = build_consumer(ClientConfig(bootstrap).consumer())
    consumer.assign([TopicPartition(topic, 0, 0)])
    out: list[tuple[bytes, int]] = []
    deadline = time.monotonic() + 60
    try:
        while len(out) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                out.append((msg.value(), msg.leader_epoch()))
    finally:
        consumer.close()
    return out


def test_kill_leader_loses_no_acknowledged_record(kafka_cluster3: KafkaCluster, new_topic3: Callable[..., str]) -> None:
    bootstrap = kafka_cluster3.bootstrap_servers
    topic = new_topic3(partitions=1, replication_factor=3, config={"min.insync.replicas": 2})
    producer = build_producer(ClientConfig(bootstrap).producer({"linger.ms": 0}))
    acked: list[bytes] = []

    def send(values: range) -> None:
        for i in values:
            producer.produce(
                topic, value=f"r{i}".encode(),
                on_delivery=lambda err, msg: acked.append(msg.value()) if err is None else None,
            )  # fmt: skip
        assert producer.flush(120) == 0

    send(range(200))
    leader = kafka_cluster3.partition_leader(topic)
    kafka_cluster3.kill_broker(leader)

    deadline = time.monotonic() + 60
    new_leader = leader
    while time.monotonic() < deadline:
        try:
            new_leader = kafka_cluster3.partition_leader(topic)
        except Exception:  # noqa: BLE001 - metadata may be briefly unavailable during the election
            new_leader = -1
        if new_leader not in (leader, -1):
            break
        time.sleep(0.2)
    assert new_leader not in (leader, -1), "no new leader was elected"

    send(range(200, 400))  # acks=all with min ISR 2 still works with two brokers left
    records = read_with_epochs(bootstrap, topic, len(acked))
    values = [v for v, _ in records]
    assert len(acked) == 400
    assert sorted(values) == sorted(acked), "an acknowledged record is missing or duplicated"
    epochs_before = {e for v, e in records if int(v[1:]) < 200}
    epochs_after = {e for v, e in records if int(v[1:]) >= 200}
    assert max(epochs_after) > max(epochs_before), "the leader epoch did not increase after failover"
