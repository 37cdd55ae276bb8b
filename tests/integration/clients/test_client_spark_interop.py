"""Byte-for-byte interoperability with the Spark pipelines, both directions, both modes, one rules file.

Spark's ``EncryptJob`` output is read by the ``DecryptingConsumer``; the ``EncryptingProducer``'s output is
read by Spark's ``DecryptJob``. Values, keys, headers (marker removed) and timestamps must come back as
they went in.
"""

from __future__ import annotations

import time

import pytest
from client_kit import ClientEnv, poll_all
from pyspark.sql import SparkSession

from strongroom.clients.records import MessageStatus
from strongroom.demo.data import PII_PATHS, customer_events
from strongroom.kafka.transport import build_producer
from strongroom.rules import EncryptionRules
from strongroom.spark.jobs.common import PipelineSettings
from strongroom.spark.jobs.decrypt import DecryptJob
from strongroom.spark.jobs.encrypt import EncryptJob

pytestmark = pytest.mark.spark


def two_topic_rules(value_topic: str, fields_topic: str) -> EncryptionRules:
    return EncryptionRules.parse_obj_or_fail(
        {"rules": [{"topic": value_topic}, {"topic": fields_topic, "mode": "fields", "fields": PII_PATHS}]}
    )


def events_for(n: int) -> list[tuple[bytes, bytes, int]]:
    base = int(time.time() * 1000) - 60_000
    return [(key, value, base + i) for i, (key, value) in enumerate(customer_events(n, 4))]


def settings(env: ClientEnv, rules: EncryptionRules, name: str) -> PipelineSettings:
    return PipelineSettings(
        env.cluster.bootstrap_servers,
        rules,
        env.kms_config,
        str(env.workdir / f"chk-{name}"),
        keys_topic=env.keys_topic,
    )


def test_spark_encrypts_client_decrypts(spark: SparkSession, client_env: ClientEnv) -> None:
    env = client_env
    value_topic, fields_topic = env.new_topic(partitions=2), env.new_topic(partitions=2)
    rules = two_topic_rules(value_topic, fields_topic)
    sent: dict[str, list[tuple[bytes, bytes, int]]] = {}
    producer = build_producer(env.client.producer())
    for topic in (value_topic, fields_topic):
        sent[topic] = events_for(16)
        for key, value, ts in sent[topic]:
            producer.produce(topic, key=key, value=value, timestamp=ts, headers=[("source", b"spark-test")])
    assert producer.flush(30) == 0

    job = EncryptJob(spark, settings(env, rules, "enc"))
    try:
        assert job.run().records == {"ok": 32}
    finally:
        job.close()

    consumer = env.consumer(rules)  # the encrypt-side rules: the consumer finds them through the output template
    consumer.subscribe([f"{value_topic}.enc", f"{fields_topic}.enc"])
    got = poll_all(consumer, 32, timeout=60)
    assert len(got) == 32
    for topic in (value_topic, fields_topic):
        mine = [m for m in got if m.topic == f"{topic}.enc"]
        expected = {value: (key, ts) for key, value, ts in sent[topic]}
        assert sorted(m.value for m in mine) == sorted(expected)
        for m in mine:
            assert m.status is MessageStatus.DECRYPTED
            assert (m.key, m.timestamp) == expected[m.value]
            assert m.headers == [("source", b"spark-test")]
    assert consumer.metrics()["failed"] == 0


def test_client_encrypts_spark_decrypts(spark: SparkSession, client_env: ClientEnv) -> None:
    env = client_env
    value_topic, fields_topic = env.new_topic(partitions=2), env.new_topic(partitions=2)
    rules = two_topic_rules(value_topic, fields_topic)
    producer = env.producer(rules)
    sent: dict[str, list[tuple[bytes, bytes, int]]] = {}
    for topic in (value_topic, fields_topic):
        sent[topic] = events_for(16)
        for key, value, ts in sent[topic]:
            producer.produce(topic, value, key=key, timestamp=ts, headers=[("source", b"client-test")])
    assert producer.flush(30) == 0

    decrypt_rules = EncryptionRules.parse_obj_or_fail(
        {
            "rules": [
                {"topic": f"{value_topic}.enc"},
                {"topic": f"{fields_topic}.enc", "mode": "fields", "fields": PII_PATHS},
            ]
        }
    )
    job = DecryptJob(spark, settings(env, decrypt_rules, "dec"))
    try:
        assert job.run().records == {"ok": 32}
    finally:
        job.close()

    for topic in (value_topic, fields_topic):
        out = env.read_raw(f"{topic}.decrypted", expect=16)
        expected = {value: (key, ts) for key, value, ts in sent[topic]}
        assert sorted(m.value() for m in out) == sorted(expected)
        for m in out:
            assert (m.key(), m.timestamp()[1]) == expected[m.value()]
            assert m.headers() == [("source", b"client-test")]
