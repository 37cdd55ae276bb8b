"""Helpers of the client-library tests: an environment that tracks and closes every client it opens."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import TopicPartition

from strongroom.clients.consumer import DecryptingConsumer
from strongroom.clients.producer import EncryptingProducer
from strongroom.kafka.config import ClientConfig
from strongroom.kafka.transport import build_consumer, build_producer
from strongroom.keys.manager import KeyManager
from strongroom.keys.table import KeyTable
from strongroom.keys.topic import create_keys_topic
from strongroom.kms.admin.local import LocalKekAdmin
from strongroom.kms.api import Kms
from strongroom.kms.local import LocalKms
from strongroom.rules import EncryptionRules
from strongroom.testing.kafka_cluster import KafkaCluster

KEYS_PARTITIONS = 3


@dataclass
class ClientEnv:
    cluster: KafkaCluster
    workdir: Path
    kms: LocalKms
    kms_config: dict[str, Any]
    kek_admin: LocalKekAdmin
    kek_id: str
    keys_topic: str
    new_topic: Callable[..., str]
    unique_name: Callable[[str], str]
    _closers: list[Callable[[], None]] = field(default_factory=list)

    @property
    def client(self) -> ClientConfig:
        return ClientConfig(self.cluster.bootstrap_servers)

    def new_keys_topic(self) -> str:
        topic = self.unique_name("keys")
        create_keys_topic(self.client, topic, partitions=KEYS_PARTITIONS)
        return topic

    def key_manager(self, topic: str | None = None, kms: Kms | None = None, **kwargs: Any) -> KeyManager:
        manager = KeyManager(self.client, kms or self.kms, topic=topic or self.keys_topic, **kwargs)
        self._closers.append(manager.close)
        return manager

    def key_table(self, topic: str | None = None, kms: Kms | None = None) -> KeyTable:
        table = KeyTable(self.client, kms or self.kms, topic=topic or self.keys_topic).open()
        self._closers.append(table.close)
        return table

    def producer(
        self, rules: EncryptionRules | dict[str, Any], manager: KeyManager | None = None, **kwargs: Any
    ) -> EncryptingProducer:
        producer = EncryptingProducer(self.client, as_rules(rules), manager or self.key_manager(), **kwargs)
        self._closers.append(producer.close)
        return producer

    def consumer(
        self, rules: EncryptionRules | dict[str, Any], table: KeyTable | None = None, **kwargs: Any
    ) -> DecryptingConsumer:
        kwargs.setdefault("group_id", self.unique_name("group"))
        consumer = DecryptingConsumer(self.client, as_rules(rules), table or self.key_table(), **kwargs)
        self._closers.append(consumer.close)
        return consumer

    def produce_raw(self, topic: str, records: list[tuple[bytes | None, bytes | None, list[Any]]]) -> None:
        producer = build_producer(self.client.producer())
        for key, value, headers in records:
            producer.produce(topic, key=key, value=value, headers=headers)
        assert producer.flush(30) == 0

    def read_raw(self, topic: str, expect: int, timeout: float = 30.0) -> list[Any]:
        """The topic's committed records in partition/offset order (waits for ``expect`` of them)."""
        consumer = build_consumer(self.client.consumer(self.unique_name("raw")))
        try:
            partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
            consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
            out: list[Any] = []
            deadline = time.monotonic() + timeout
            while len(out) < expect and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is not None and msg.error() is None:
                    out.append(msg)
            # anything beyond what was expected is a bug too: look a little longer
            extra_until = time.monotonic() + 1.0
            while time.monotonic() < extra_until:
                msg = consumer.poll(0.2)
                if msg is not None and msg.error() is None:
                    out.append(msg)
        finally:
            consumer.close()
        return sorted(out, key=lambda m: (m.partition(), m.offset()))

    def close_all(self) -> None:
        while self._closers:
            try:
                self._closers.pop()()
            except Exception:  # noqa: BLE001, S112 - teardown: close everything else too
                continue


def as_rules(rules: EncryptionRules | dict[str, Any]) -> EncryptionRules:
    return rules if isinstance(rules, EncryptionRules) else EncryptionRules.parse_obj_or_fail(rules)


def poll_until(
    consumer: DecryptingConsumer, done: Callable[[dict[str, Any]], bool], timeout: float = 30.0
) -> list[Any]:
    """Poll until ``done(consumer.metrics())`` (asserted within the timeout); every message returned meanwhile."""
    out: list[Any] = []
    deadline = time.monotonic() + timeout
    while not done(consumer.metrics()):
        assert time.monotonic() < deadline, f"not done after {timeout}s: {consumer.metrics()}"
        msg = consumer.poll(0.2)
        if msg is not None:
            out.append(msg)
    return out


def poll_all(consumer: DecryptingConsumer, expect: int, timeout: float = 30.0) -> list[Any]:
    """Poll until ``expect`` messages arrived (or the timeout passed); every message in arrival order."""
    out: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(out) < expect and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None:
            out.append(msg)
    return out
