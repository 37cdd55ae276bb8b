"""The pipelines under operational faults: KMS outage, broker kill, rolling restart, two brokers down.

Each scenario checks the same two things at the end: no plaintext where ciphertext was promised, and
every input record exactly once in the output (read_committed).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from strongroom.demo.data import customer_events
from strongroom.kafka.config import ClientConfig
from strongroom.kafka.transport import build_producer
from strongroom.keys.topic import create_keys_topic
from strongroom.kms.admin.local import LocalKekAdmin
from strongroom.kms.admin.vault import VaultKekAdmin
from strongroom.kms.local import LocalKms
from strongroom.rules import EncryptionRules
from strongroom.spark.jobs.common import PipelineSettings
from strongroom.spark.jobs.decrypt import DecryptJob
from strongroom.spark.jobs.encrypt import EncryptJob
from strongroom.testing.kafka_cluster import KafkaCluster
from strongroom.testing.openbao import OpenBaoServer
from strongroom.testing.topic_reader import read_to_end

pytestmark = pytest.mark.slow
FIELDS = {"mode": "fields", "fields": ["$.name", "$.email", "$.address"]}


def test_kms_down_for_30s_the_pipelines_wait_and_resume(spark: SparkSession, pipeline_env: Any, tmp_path: Path) -> None:
    env = pipeline_env
    bao = OpenBaoServer(persistent_dir=tmp_path / "bao").start()
    try:
        VaultKekAdmin(bao.client()).create_kek("strongroom-subjects")
        kms = {"provider": "vault", "address": bao.address, "token": bao.token, "retry": {"max_attempts": 2}}
        topic = env.new_topic(partitions=2)
        events = env.produce_events(topic, 200, customers=20)
        rules = EncryptionRules.single([topic], **FIELDS)
        settings = PipelineSettings(env.bootstrap, rules, kms, str(tmp_path / "enc"), keys_topic=env.keys_topic)

        bao.stop()  # the KMS is down before the first key is made
        restart = threading.Timer(30.0, bao.start)  # same port, same raft data: the KEK survives
        restart.start()
        started = time.monotonic()
        job = EncryptJob(spark, settings)
        try:
            result = job.run()
        finally:
            job.close()
        restart.join()
        assert time.monotonic() - started >= 30, "the job waited for the KMS"
        assert result.records == {"ok": 200}
        out = env.read(f"{topic}.enc")
        assert len(out) == 200
        assert not any(b"@example.com" in m.value() for m in out)

        # A cold reader needs the KMS to unwrap the wrapping key: it waits too.
        bao.stop()
        restart = threading.Timer(20.0, bao.start)
        restart.start()
        dec_rules = EncryptionRules.single([f"{topic}.enc"], **FIELDS)
        dsettings = PipelineSettings(env.bootstrap, dec_rules, kms, str(tmp_path / "dec"), keys_topic=env.keys_topic)
        dec = DecryptJob(spark, dsettings)
        try:
            dresult = dec.run()
        finally:
            dec.close()
        restart.join()
        assert dresult.records == {"ok": 200}
        docs = {json.loads(m.value())["event_id"]: json.loads(m.value()) for m in env.read(f"{topic}.decrypted")}
        assert docs == {e["event_id"]: e for e in events}
    finally:
        bao.stop()


def test_broker_faults_during_the_stream_lose_and_duplicate_nothing(
    spark: SparkSession, kafka_cluster3: KafkaCluster, unique_name: Callable[[str], str], tmp_path: Path
) -> None:
    """kill -9 a broker; a rolling restart of all three; two brokers down at once (NOT_ENOUGH_REPLICAS)."""
    cluster = kafka_cluster3
    client = ClientConfig(cluster.bootstrap_servers)
    topic = cluster.create_topic(unique_name("events"), 3, 3, {"min.insync.replicas": 2})
    cluster.create_topic(f"{topic}.enc", 3, 3, {"min.insync.replicas": 2})
    keys_topic = unique_name("keys")
    create_keys_topic(client, keys_topic, partitions=3)
    keyring = tmp_path / "kms.json"
    LocalKekAdmin(LocalKms.from_config({"path": str(keyring), "create": True})).create_kek("strongroom-subjects")
    rules = EncryptionRules.single([topic], **FIELDS)
    settings = PipelineSettings(
        cluster.bootstrap_servers, rules, {"provider": "local", "path": str(keyring)}, str(tmp_path / "chk"),
        keys_topic=keys_topic, trigger_seconds=1.0, max_offsets_per_trigger=300,
    )  # fmt: skip

    total = 3000
    produced: list[str] = []

    def produce() -> None:
        producer = build_producer(client.producer())
        for i, (key, value) in enumerate(customer_events(total, 50)):
            producer.produce(topic, key=key, value=value)
            produced.append(json.loads(value)["event_id"])
            if i % 100 == 99:
                producer.flush(300)
                time.sleep(0.3)
        assert producer.flush(300) == 0

    writer = threading.Thread(target=produce)
    job = EncryptJob(spark, settings)
    query = job.start()
    writer.start()
    try:
        time.sleep(15)
        victim = cluster.partition_leader(topic, 0)
        cluster.kill_broker(victim)  # kill -9 mid-stream
        time.sleep(10)
        cluster.start_broker(victim)
        for broker in cluster.broker_ids:  # rolling restart, one at a time, as managed Kafka does
            cluster.stop_broker(broker)
            time.sleep(3)
            cluster.start_broker(broker)
            time.sleep(5)
        down = cluster.broker_ids[:2]  # two brokers down: writes get NOT_ENOUGH_REPLICAS
        for broker in down:
            cluster.kill_broker(broker)
        time.sleep(20)
        assert query.isActive, "the pipeline waits; it does not fail"
        for broker in down:
            cluster.start_broker(broker)
        writer.join(600)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and job.counters.written < total:
            assert query.isActive, f"the pipeline stopped: {job.error or query.exception()}"
            time.sleep(2)
    finally:
        query.stop()
        job.close()
    assert job.error is None
    assert len(produced) == total
    ids: list[str] = []
    for msg in read_to_end(client, f"{topic}.enc", 3, idle=5):
        doc = json.loads(msg.value())
        assert doc["email"].startswith("sr1:")
        ids.append(doc["event_id"])
    assert len(ids) == total, f"{len(ids) - len(set(ids))} duplicates, {len(set(produced) - set(ids))} missing"
    assert set(ids) == set(produced)
