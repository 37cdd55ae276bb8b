"""The pure decrypt transform: every status, and the round trip with the encrypt transform."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from strongroom.rules import EncryptionRules, TopicRule
from strongroom.spark.transforms import (
    DECRYPT_KEYS_SCHEMA,
    ENCRYPT_KEYS_SCHEMA,
    ERASED,
    FAILED,
    KEY_AVAILABLE,
    KEY_ERASED,
    KEY_LOST,
    OK,
    PASSTHROUGH,
    PENDING,
    decrypt_frame,
    encrypt_frame,
    with_key_ids,
    with_subject,
)

TS = datetime(2026, 11, 1, tzinfo=UTC)
KAFKA_SCHEMA = (
    "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, timestampType int, "
    "headers array<struct<key:string,value:binary>>"
)
SUBJECTS = ["alice", "bob", "carol", "dave", "erin"]
KEY_IDS = {s: s[0].upper().encode() * 16 for s in SUBJECTS}
DEKS = {s: bytes([i]) * 32 for i, s in enumerate(SUBJECTS, start=1)}


def encrypted_topic(spark: SparkSession, rule: TopicRule, values: list[bytes]) -> DataFrame:
    rows = [
        (s.encode(), v, "events", 0, i, TS, 0, [("h", b"1")])
        for i, (s, v) in enumerate(zip(SUBJECTS, values, strict=True))
    ]
    rows.append((b"frank", None, "events", 0, len(rows), TS, 0, None))  # a tombstone
    plain = spark.createDataFrame(rows, KAFKA_SCHEMA)
    keys = spark.createDataFrame([(s, KEY_IDS[s], DEKS[s], True) for s in SUBJECTS], ENCRYPT_KEYS_SCHEMA)
    sealed = encrypt_frame(with_subject(plain, rule), keys, rule, max_value_bytes=10_000)
    # What the encrypted topic holds, as Spark's Kafka source would read it back:
    return sealed.select(
        "key", "value", F.col("topic"), F.col("src_partition").alias("partition"), F.col("src_offset").alias("offset"),
        F.lit(TS).alias("timestamp"), F.lit(0).alias("timestampType"), "headers",
    )  # fmt: skip


def decrypt_keys(spark: SparkSession) -> DataFrame:
    states = {
        "alice": (DEKS["alice"], KEY_AVAILABLE, None),
        "bob": (None, KEY_ERASED, None),
        "carol": (None, KEY_LOST, "KEK 'vault:subjects' is lost (deleted in the KMS)"),
        "erin": (DEKS["dave"], KEY_AVAILABLE, None),  # wrong key: looks like tampering
    }  # dave: no row at all -> pending
    return spark.createDataFrame([(KEY_IDS[s], d, st, r) for s, (d, st, r) in states.items()], DECRYPT_KEYS_SCHEMA)


def test_whole_value_statuses(spark: SparkSession) -> None:
    rule = EncryptionRules.single(["events"]).rule_for("events")
    values = [f"secret of {s}".encode() for s in SUBJECTS]
    enc = encrypted_topic(spark, rule, values)
    out = decrypt_frame(
        with_key_ids(enc, rule),
        decrypt_keys(spark),
        rule,
        logical_topic=F.col("topic"),
        output_topic=F.lit("events.clear"),
    )
    rows = {r["src_offset"]: r for r in out.collect()}
    assert [rows[i]["status"] for i in range(6)] == [OK, ERASED, FAILED, PENDING, FAILED, PASSTHROUGH]
    assert bytes(rows[0]["value"]) == b"secret of alice"
    assert [(h["key"], bytes(h["value"])) for h in rows[0]["headers"]] == [("h", b"1")]
    assert "KEK 'vault:subjects' is lost" in rows[2]["reason"]
    assert "integrity check failed" in rows[4]["reason"]
    for i in (1, 2, 3, 4):
        assert rows[i]["value"] is None, "no plaintext for a record that did not open"
        assert rows[i]["emit"] is False
    assert rows[5]["emit"] is True
    assert rows[5]["value"] is None


def test_moved_to_another_topic_fails(spark: SparkSession) -> None:
    rule = EncryptionRules.single(["events"]).rule_for("events")
    enc = encrypted_topic(spark, rule, [b"x"] * 5)
    out = decrypt_frame(
        with_key_ids(enc, rule), decrypt_keys(spark), rule, logical_topic=F.lit("copied"), output_topic=F.lit("o")
    )
    alice = out.filter("src_offset = 0").collect()[0]
    assert alice["status"] == FAILED
    assert "bound to topic copied" in alice["reason"]


def test_field_mode_erased_fields_become_null(spark: SparkSession) -> None:
    rule = EncryptionRules.parse_obj_or_fail(
        {"rules": [{"topic": "events", "mode": "fields", "fields": ["$.name"]}]}
    ).rule_for("events")
    values = [json.dumps({"name": s.title(), "total": i}).encode() for i, s in enumerate(SUBJECTS)]
    enc = encrypted_topic(spark, rule, values)
    out = decrypt_frame(
        with_key_ids(enc, rule), decrypt_keys(spark), rule, logical_topic=F.col("topic"), output_topic=F.lit("o")
    )
    rows = {r["src_offset"]: r for r in out.collect()}
    assert rows[0]["status"] == OK
    assert json.loads(bytes(rows[0]["value"])) == {"name": "Alice", "total": 0}
    assert rows[1]["status"] == OK, "field mode: an erased subject's record stays, minus its PII"
    assert json.loads(bytes(rows[1]["value"])) == {"name": None, "total": 1}
    assert rows[2]["status"] == FAILED
    assert rows[3]["status"] == PENDING
    assert rows[4]["status"] == FAILED


def test_field_mode_record_without_rule_fields_passes_unchanged(spark: SparkSession) -> None:
    rule = EncryptionRules.parse_obj_or_fail(
        {"rules": [{"topic": "events", "mode": "fields", "fields": ["$.name"]}]}
    ).rule_for("events")
    marker = [("strongroom.enc", b"\x01\x02")]
    rows = [
        (b"alice", b'{"total": 3}', "events", 0, 0, TS, 0, marker),  # no $.name: nothing was sealed
        (b"alice", b'{"name": "Alice"}', "events", 0, 1, TS, 0, marker),  # plaintext where a seal belongs
    ]
    enc = spark.createDataFrame(rows, KAFKA_SCHEMA)
    out = decrypt_frame(
        with_key_ids(enc, rule), decrypt_keys(spark), rule, logical_topic=F.col("topic"), output_topic=F.lit("o")
    )
    got = {r["src_offset"]: r for r in out.collect()}
    assert got[0]["status"] == OK
    assert bytes(got[0]["value"]) == b'{"total": 3}'
    assert got[1]["status"] == FAILED, "a plaintext value at an encrypted path is a downgrade, not data"
    assert got[1]["value"] is None
