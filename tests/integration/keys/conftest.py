"""Fixtures of the keys integration tests: a fast-compacting keys topic, a local KMS, clients."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from strongroom.kafka.config import ClientConfig
from strongroom.keys.topic import create_keys_topic
from strongroom.kms.local import LocalKeyringAdmin, LocalKms
from strongroom.kms.metered import MeteredKms
from strongroom.testing.kafka_cluster import KafkaCluster

#: Compaction within seconds (the test brokers check every 2 s and back the cleaner off 1 s).
FAST_COMPACTION = {
    "segment.ms": "1000",
    "max.compaction.lag.ms": "1000",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": "1000",
}


@pytest.fixture
def fast_compaction() -> dict[str, str]:
    return dict(FAST_COMPACTION)


@pytest.fixture
def client(kafka_cluster: KafkaCluster) -> ClientConfig:
    return ClientConfig(kafka_cluster.bootstrap_servers, extra={"log_level": 0})


@pytest.fixture
def keys_topic(client: ClientConfig, unique_name: Callable[[str], str]) -> str:
    name = unique_name("keys")
    create_keys_topic(client, name, partitions=3, config_overrides=FAST_COMPACTION)
    return name


@pytest.fixture
def readers_topic(unique_name: Callable[[str], str]) -> str:
    return unique_name("key-readers")


@pytest.fixture
def keyring(tmp_path: Path) -> Path:
    path = tmp_path / "keyring.json"
    kms = LocalKms.from_config({"path": path, "create": True})
    LocalKeyringAdmin(kms.keyring).create_kek("strongroom-subjects")
    return path


@pytest.fixture
def kms(keyring: Path) -> Iterator[MeteredKms]:
    metered = MeteredKms(LocalKms.from_config({"path": keyring}))
    yield metered
    metered.close()
