"""Set-up for the client-library tests: a local KMS keyring with the subjects KEK and a keys topic.

Every client a test opens through :class:`client_kit.ClientEnv` is closed after the test, in reverse order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from client_kit import KEYS_PARTITIONS, ClientEnv

from strongroom.kafka.config import ClientConfig
from strongroom.keys.topic import create_keys_topic
from strongroom.kms.admin.local import LocalKekAdmin
from strongroom.kms.local import LocalKms
from strongroom.testing.kafka_cluster import KafkaCluster


@pytest.fixture
def client_env(
    kafka_cluster: KafkaCluster,
    tmp_path: Path,
    unique_name: Callable[[str], str],
    new_topic: Callable[..., str],
) -> Iterator[ClientEnv]:
    path = tmp_path / "kms.json"
    kms = LocalKms.from_config({"path": str(path), "create": True})
    admin = LocalKekAdmin(kms)
    kek_id = admin.create_kek("strongroom-subjects")
    keys_topic = unique_name("keys")
    create_keys_topic(ClientConfig(kafka_cluster.bootstrap_servers), keys_topic, partitions=KEYS_PARTITIONS)
    env = ClientEnv(
        kafka_cluster, tmp_path, kms, {"provider": "local", "path": str(path)}, admin, kek_id, keys_topic,
        new_topic, unique_name,
    )  # fmt: skip
    try:
        yield env
    finally:
        env.close_all()
