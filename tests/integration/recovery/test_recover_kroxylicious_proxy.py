"""The real Kroxylicious proxy writes the records; strongroom inventories and scans them.

Records are produced *through* the proxy (record encryption, Vault KMS on OpenBao, KEK selected by
``TemplateKekSelector``) while its template names KEK A, then the proxy is restarted with a template
naming KEK B (how an operator moves a topic to a new KEK) and more records go through. After KEK A
is deleted, strongroom — reading the topic directly from Kafka — must find the boundary exactly.
Skipped when no Java 21+ or no Maven is available.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import TopicPartition
from kroxylicious_proxy import KroxyliciousProxy, java21
from recovery_stack import run_cli

from strongroom.kafka.transport import build_consumer, build_producer

pytestmark = pytest.mark.integration


def _produce(bootstrap: str, topic: str, first: int, count: int) -> None:
    producer = build_producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(first, first + count):
        producer.produce(topic, key=b"k%d" % i, value=b"order %d" % i, partition=0)
    assert producer.flush(60) == 0


def _read_through(bootstrap: str, topic: str, start: int, count: int) -> list[bytes]:
    consumer = build_consumer({"bootstrap.servers": bootstrap, "group.id": "krox-reader", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, start)])
    values: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while len(values) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error() and msg.value() is not None:
                values.append(msg.value())  # type: ignore[arg-type]
    finally:
        consumer.close()
    return values


def test_real_proxy_records_inventory_and_scan(
    kafka_cluster: Any, openbao: Any, spark: Any, new_topic: Any, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    java = java21()
    if java is None or shutil.which("mvn") is None:
        pytest.skip("the Kroxylicious proxy needs Java 21+ and Maven (to fetch its jars from Maven Central)")
    monkeypatch.setenv("VAULT_TOKEN", openbao.token)
    topic = new_topic(partitions=1)
    transit = openbao.client().secrets.transit
    transit.create_key(name=f"A-{topic}", key_type="aes256-gcm96")
    transit.create_key(name=f"B-{topic}", key_type="aes256-gcm96")
    bootstrap = kafka_cluster.bootstrap_servers
    for template, first in (("A-$(topicName)", 0), ("B-$(topicName)", 25)):
        workdir = tmp_path / template[0]
        workdir.mkdir()
        proxy = KroxyliciousProxy(java, workdir, bootstrap, kafka_cluster.broker_ids, openbao, template).start()
        try:
            _produce(proxy.bootstrap_servers, topic, first, 25)
            assert _read_through(proxy.bootstrap_servers, topic, first, 25) == [
                b"order %d" % i for i in range(first, first + 25)
            ]
        finally:
            proxy.stop()

    common = ["-b", bootstrap, "--topic", topic, "--format", "kroxylicious", "--kms", "vault",
              "--vault-address", openbao.address, "--kms-attempts", "2"]  # fmt: skip
    code, report, err = run_cli(capsys, ["kek", "inventory", *common, "--kek", f"A-{topic}"])
    assert code == 4, err  # KEK A is still needed
    deps = {d["label"]: d for d in report["topics"][0]["partitions"][0]["dependencies"]}
    assert (deps[f"vault:A-{topic}@v1"]["first"], deps[f"vault:A-{topic}@v1"]["last"]) == (0, 24)
    assert (deps[f"vault:B-{topic}@v1"]["first"], deps[f"vault:B-{topic}@v1"]["last"]) == (25, 49)

    transit.update_key_configuration(name=f"A-{topic}", deletion_allowed=True)
    transit.delete_key(name=f"A-{topic}")
    code, plan, err = run_cli(capsys, ["recover", "scan", *common, "--plan-out", str(tmp_path / "plan.json")])
    assert code == 4, err
    [part] = plan["partitions"]
    assert (part["boundary"], part["lost"], part["shape"], part["stragglers"]) == (25, 25, "prefix", 0)
    assert {k["kek"]: k["state"] for k in plan["keks"]} == {
        f"vault:A-{topic}": "missing",
        f"vault:B-{topic}": "enabled",
    }
