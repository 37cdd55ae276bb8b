"""Shared set-up for pipeline tests: a local KMS keyring with the subjects KEK, a keys topic, helpers."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from strongroom.demo.data import customer_events
from strongroom.kafka.config import ClientConfig
from strongroom.kafka.transport import build_producer
from strongroom.keys.topic import create_keys_topic
from strongroom.kms.admin.local import LocalKekAdmin
from strongroom.kms.local import LocalKms
from strongroom.rules import EncryptionRules
from strongroom.spark.jobs.common import PipelineSettings, ResultT, StreamingJob
from strongroom.testing.kafka_cluster import KafkaCluster
from strongroom.testing.topic_reader import read_to_end


@dataclass
class PipelineEnv:
    cluster: KafkaCluster
    workdir: Path
    kms_config: dict[str, Any]
    keys_topic: str
    kek_admin: LocalKekAdmin
    kek_id: str
    new_topic: Callable[..., str]

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap_servers

    @property
    def client(self) -> ClientConfig:
        return ClientConfig(self.bootstrap)

    def settings(self, rules: EncryptionRules | dict[str, Any], name: str, **overrides: Any) -> PipelineSettings:
        if isinstance(rules, dict):
            rules = EncryptionRules.parse_obj_or_fail(rules)
        options = {"keys_topic": self.keys_topic, **overrides}
        kms = options.pop("kms", self.kms_config)
        return PipelineSettings(self.bootstrap, rules, kms, str(self.workdir / f"chk-{name}"), **options)

    def produce_events(self, topic: str, n: int, customers: int = 5) -> list[dict[str, Any]]:
        producer = build_producer(self.client.producer())
        events = []
        for key, value in customer_events(n, customers):
            producer.produce(topic, key=key, value=value, headers=[("source", b"test")])
            events.append(json.loads(value))
        assert producer.flush(30) == 0
        return events

    def produce_raw(self, topic: str, records: list[tuple[bytes | None, bytes | None]]) -> None:
        producer = build_producer(self.client.producer())
        for key, value in records:
            producer.produce(topic, key=key, value=value)
        assert producer.flush(30) == 0

    @staticmethod
    def run(job: StreamingJob[ResultT]) -> ResultT:
        """Run a pipeline job to the end of what is there now, and close it."""
        try:
            return job.run()
        finally:
            job.close()

    def read(
        self, topic: str, partitions: int | None = None, idle: float = 3.0, *, uncommitted: bool = False
    ) -> list[Any]:
        """:func:`~strongroom.testing.topic_reader.read_to_end` of ``topic`` on this cluster."""
        return read_to_end(self.client, topic, partitions, idle, uncommitted=uncommitted)


@pytest.fixture
def pipeline_env(
    kafka_cluster: KafkaCluster, tmp_path: Path, unique_name: Callable[[str], str], new_topic: Callable[..., str]
) -> PipelineEnv:
    path = tmp_path / "kms.json"
    kms = LocalKms.from_config({"path": str(path), "create": True})
    admin = LocalKekAdmin(kms)
    kek_id = admin.create_kek("strongroom-subjects")
    keys_topic = unique_name("keys")
    create_keys_topic(ClientConfig(kafka_cluster.bootstrap_servers), keys_topic, partitions=3)
    return PipelineEnv(
        kafka_cluster, tmp_path, {"provider": "local", "path": str(path)}, keys_topic, admin, kek_id, new_topic
    )
