"""The DataFrame API on a real cluster: encrypt_dataframe → Spark's Kafka sink → decrypt_dataframe, the
client library reading what it wrote, erasure, tampering and rejected records failing closed."""

from __future__ import annotations

import base64
import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import TopicPartition
from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession

from strongroom.clients.consumer import DecryptingConsumer
from strongroom.envelope.codec import parse
from strongroom.envelope.keyref import SubjectKeyRef
from strongroom.errors import PipelineError
from strongroom.kafka.transport import build_producer
from strongroom.keys.cache import KeyCache
from strongroom.keys.erasure import erase
from strongroom.keys.errors import KeysConfigError
from strongroom.keys.manager import KeyManager
from strongroom.keys.table import KeyTable
from strongroom.keys.usage import SubjectKeyLimits
from strongroom.kms.api import Kms
from strongroom.kms.registry import kms_from_config
from strongroom.rules import EncryptionRules
from strongroom.spark.dataframes import decrypt_dataframe, encrypt_dataframe
from strongroom.testing.spark_kafka import read_topic

FIELDS = ["$.name", "$.email", "$.address"]
SparkFailure = (PySparkException, Py4JJavaError)


@pytest.fixture
def kms(pipeline_env: Any) -> Kms:
    return kms_from_config(pipeline_env.kms_config)


@pytest.fixture
def manager(pipeline_env: Any, kms: Kms) -> Iterator[KeyManager]:
    mgr = KeyManager(pipeline_env.client, kms, topic=pipeline_env.keys_topic)
    yield mgr
    mgr.close()


@pytest.fixture
def table(pipeline_env: Any, kms: Kms) -> Iterator[KeyTable]:
    t = KeyTable(pipeline_env.client, kms, topic=pipeline_env.keys_topic).open()
    yield t
    t.close()


def write_topic(df: DataFrame, bootstrap: str) -> None:
    df.write.format("kafka").option("kafka.bootstrap.servers", bootstrap).save()


def test_fields_roundtrip_through_spark_kafka_sink_and_client_library(
    spark: SparkSession, pipeline_env: Any, manager: KeyManager, table: KeyTable
) -> None:
    env = pipeline_env
    topic = env.new_topic(partitions=2)
    events = env.produce_events(topic, 40, customers=5)
    env.cluster.create_topic(f"{topic}.enc", 2, 1, None)
    rules = {"rules": [{"topic": topic, "mode": "fields", "fields": FIELDS}]}

    encrypted = encrypt_dataframe(read_topic(spark, env.bootstrap, topic), rules, keys=KeyCache(manager))
    # Keys exist in the keys topic before the frame is computed; the frame names its output topic.
    assert manager.counters["created"] == 5
    write_topic(encrypted, env.bootstrap)

    stored = env.read(f"{topic}.enc")
    assert len(stored) == 40
    for msg in stored:
        assert "@example.com" not in msg.value().decode()
        assert json.loads(msg.value())["email"].startswith("sr1:")
        assert dict(msg.headers())["strongroom.enc"] == b"\x01\x02"
        assert dict(msg.headers())["source"] == b"test"

    # The client library opens what the DataFrame API sealed (byte-compatible by construction).
    dec_rules = EncryptionRules.parse_obj_or_fail(
        {"rules": [{"topic": f"{topic}.enc", "mode": "fields", "fields": FIELDS}]}
    )
    consumer = DecryptingConsumer(env.client, dec_rules, table, group_id=f"{topic}-client")
    try:
        consumer.assign([TopicPartition(f"{topic}.enc", p, 0) for p in range(2)])
        seen: list[dict[str, Any]] = []
        while len(seen) < 40:
            msg = consumer.poll(10)
            assert msg is not None, f"only {len(seen)} records came back"
            seen.append(json.loads(msg.value or b""))
    finally:
        consumer.close()
    by_event = {e["event_id"]: e for e in events}
    assert all(doc == by_event[doc["event_id"]] for doc in seen)

    victim = events[0]["customer_id"]
    erase(env.client, [victim], reason="GDPR art. 17 request", topic=env.keys_topic)
    table.wait_caught_up()
    opened = decrypt_dataframe(read_topic(spark, env.bootstrap, f"{topic}.enc"), dec_rules, keys=table).collect()
    assert len(opened) == 40
    assert {r["status"] for r in opened} == {"ok"}
    for row in opened:
        doc = json.loads(row["value"])
        original = by_event[doc["event_id"]]
        assert doc["order"] == original["order"]
        assert "strongroom.enc" not in [h["key"] for h in row["headers"]]
        if doc["customer_id"] == victim:
            assert doc["name"] is None
            assert doc["email"] is None
            assert doc["address"] is None
        else:
            assert doc == original


def test_whole_value_erased_tampered_and_missing_keys_by_policy(
    spark: SparkSession, pipeline_env: Any, manager: KeyManager, table: KeyTable
) -> None:
    env = pipeline_env
    topic = env.new_topic(partitions=1)
    events = env.produce_events(topic, 12, customers=4)
    env.cluster.create_topic(f"{topic}.enc", 1, 1, None)
    source = read_topic(spark, env.bootstrap, topic)
    write_topic(encrypt_dataframe(source, {"rules": [{"topic": topic}]}, keys=manager), env.bootstrap)
    victim = events[0]["customer_id"]
    erase(env.client, [victim], reason="request", topic=env.keys_topic)
    table.wait_caught_up()

    stored = env.read(f"{topic}.enc")
    tampered = bytearray(stored[3].value())
    tampered[-1] ^= 0x01
    orphan = bytearray(stored[5].value())  # an envelope whose key id no keys topic has
    orphan[4:20] = b"\xee" * 16  # magic, version, cipher, key-ref kind, then the 16-byte key id
    producer = build_producer(env.client.producer())
    for value, msg in ((bytes(tampered), stored[3]), (bytes(orphan), stored[5])):
        producer.produce(f"{topic}.enc", key=msg.key(), value=value, headers=msg.headers())
    assert producer.flush(30) == 0

    enc_rules = {"rules": [{"topic": f"{topic}.enc"}]}
    frame = read_topic(spark, env.bootstrap, f"{topic}.enc")
    with pytest.raises(SparkFailure, match=rf"cannot decrypt {topic}\.enc\[0\]@12: integrity check failed"):
        decrypt_dataframe(frame, enc_rules, keys=table).collect()

    kept = {r["offset"]: r for r in decrypt_dataframe(frame, enc_rules, keys=table, on_failure="keep").collect()}
    assert len(kept) == 14
    assert kept[12]["status"] == "failed"
    assert kept[12]["value"] is None
    assert "integrity check failed" in kept[12]["reason"]
    assert kept[13]["status"] == "missing-key"
    assert "no key for this record" in kept[13]["reason"]
    assert kept[13]["value"] is None
    erased = [r for r in kept.values() if r["status"] == "erased"]
    assert erased
    assert all(r["value"] is None for r in erased)
    by_event = {e["event_id"]: e for e in events}
    for r in kept.values():
        if r["status"] == "ok":
            doc = json.loads(r["value"])
            assert doc == by_event[doc["event_id"]]
            assert doc["customer_id"] != victim
    assert len(erased) == sum(1 for e in events if e["customer_id"] == victim)

    skipped = decrypt_dataframe(frame, enc_rules, keys=table, on_failure="skip", erased="drop").collect()
    assert {r["status"] for r in skipped} == {"ok"}
    assert len(skipped) == 12 - len(erased)


def test_rejected_records_fail_closed_or_are_dropped(
    spark: SparkSession, pipeline_env: Any, manager: KeyManager
) -> None:
    env = pipeline_env
    topic = env.new_topic(partitions=1)
    env.produce_raw(topic, [(b"alice", b'{"name": "Alice"}'), (None, b'{"name": "nobody"}'), (b"bob", b"[1, 2]")])
    source = read_topic(spark, env.bootstrap, topic)
    rules = {"rules": [{"topic": topic, "mode": "fields", "fields": ["$.name"]}]}

    frame = encrypt_dataframe(source, rules, keys=manager)
    with pytest.raises(SparkFailure, match=rf"cannot encrypt {topic}\[0\]@1: no subject"):
        frame.collect()
    kept = encrypt_dataframe(source, rules, keys=manager, on_reject="drop").collect()
    assert [bytes(r["key"]) for r in kept] == [b"alice"]
    assert b"Alice" not in bytes(kept[0]["value"])
    assert kept[0]["topic"] == f"{topic}.enc"

    too_small = encrypt_dataframe(
        source.filter("offset = 0"), rules, keys=manager, max_value_bytes={f"{topic}.enc": 40}
    )
    with pytest.raises(SparkFailure, match=r"above the output topic's limit of 40 bytes"):
        too_small.collect()


def test_bad_frames_get_clear_errors(spark: SparkSession, pipeline_env: Any, manager: KeyManager) -> None:
    env = pipeline_env
    topic = env.new_topic(partitions=1)
    env.produce_raw(topic, [(b"alice", b"x")])
    source = read_topic(spark, env.bootstrap, topic)
    with pytest.raises(PipelineError, match="lacks the Kafka source columns offset, timestamp"):
        encrypt_dataframe(
            source.select("key", "value", "topic", "partition"), {"rules": [{"topic": topic}]}, keys=manager
        )
    with pytest.raises(PipelineError, match=f"no rule matches the frame's topics {topic}"):
        encrypt_dataframe(source, {"rules": [{"topic": "another"}]}, keys=manager)
    with pytest.raises(PipelineError, match="on_reject='quarantine' is not one of fail, drop"):
        encrypt_dataframe(source, {"rules": [{"topic": topic}]}, keys=manager, on_reject="quarantine")  # type: ignore[arg-type]
    assert manager.counters["created"] == 0  # refused before any key was made


def key_ids_in(rows: list[Any], mode: str) -> Counter[bytes]:
    """How many values each subject key sealed in ``rows`` of an encrypted frame."""
    found: Counter[bytes] = Counter()
    for row in rows:
        envelopes = [bytes(row["value"])]
        if mode == "fields":
            document = json.loads(row["value"])
            texts = [document["email"], *document["cards"]]
            envelopes = [base64.b64decode(text.removeprefix("sr1:")) for text in texts]
        for envelope in envelopes:
            ref = parse(envelope).key_ref
            assert isinstance(ref, SubjectKeyRef)
            found[ref.key_id] += 1
    return found


@pytest.mark.parametrize(("mode", "records", "values_per_record"), [("value", 200, 1), ("fields", 80, 3)])
def test_each_frame_charges_its_keys_one_seal_per_sealed_value(
    spark: SparkSession, pipeline_env: Any, kms: Kms, mode: str, records: int, values_per_record: int
) -> None:
    """A busy subject (a tenant id as the record key) rotates at its key's seal bound across frames; a
    frame that alone needs more seals of one subject than a key may make is refused, naming the limit."""
    env = pipeline_env
    topic = env.new_topic(partitions=1)
    env.produce_raw(
        topic,
        [(b"tenant-1", json.dumps({"email": f"u{i}@example.com", "cards": ["4111", "5500"]}).encode())
         for i in range(records)],
    )  # fmt: skip
    rule = {"topic": topic, "mode": mode, **({"fields": ["$.email", "$.cards[*]"]} if mode == "fields" else {})}
    limits = SubjectKeyLimits(max_seals=300, lease_seals=40, creator_seals=40, slot_window=0)
    with KeyManager(env.client, kms, topic=env.keys_topic, limits=limits) as manager:
        source = read_topic(spark, env.bootstrap, topic)
        first = key_ids_in(encrypt_dataframe(source, {"rules": [rule]}, keys=KeyCache(manager)).collect(), mode)
        second = key_ids_in(encrypt_dataframe(source, {"rules": [rule]}, keys=manager).collect(), mode)
        assert sum(first.values()) == sum(second.values()) == records * values_per_record
        # each frame seals under one key per subject; two frames' seals pass the bound, so the second rotates
        assert len(first) == len(second) == 1
        assert set(first) != set(second)

        doubled = source.unionByName(source).unionByName(source)
        with pytest.raises(KeysConfigError, match="more than a key may seal"):
            encrypt_dataframe(doubled, {"rules": [rule]}, keys=manager)
