"""The pure encrypt transform on Kafka-shaped DataFrames: what is sealed, passed, dropped, rejected."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from strongroom.envelope import RecordContext, decrypt_json_fields, decrypt_value, find_marker
from strongroom.envelope.ids import ValueMode
from strongroom.rules import EncryptionRules
from strongroom.spark.transforms import (
    DROPPED,
    ENCRYPT_KEYS_SCHEMA,
    OK,
    PASSTHROUGH,
    REJECTED,
    encrypt_frame,
    with_subject,
)

KEYS = {"alice": (b"A" * 16, bytes(range(32)), True), "bob": (b"B" * 16, bytes(range(1, 33)), True)}
KEYS["carol"] = (b"C" * 16, bytes(range(2, 34)), False)  # post-erasure policy 'drop'
TS = datetime(2026, 11, 1, tzinfo=UTC)
KAFKA_SCHEMA = (
    "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, timestampType int, "
    "headers array<struct<key:string,value:binary>>"
)


def kafka_frame(spark: SparkSession, records: list[tuple[bytes | None, bytes | None]]) -> DataFrame:
    rows = [(k, v, "events", 0, i, TS, 0, [("trace", b"t")]) for i, (k, v) in enumerate(records)]
    return spark.createDataFrame(rows, KAFKA_SCHEMA)


def keys_frame(spark: SparkSession) -> DataFrame:
    return spark.createDataFrame([(s, k, d, e) for s, (k, d, e) in KEYS.items()], ENCRYPT_KEYS_SCHEMA)


def lookup(ref) -> bytes:  # type: ignore[no-untyped-def]
    return next(d for k, d, _ in KEYS.values() if k == ref.key_id)


def test_whole_value_mode(spark: SparkSession) -> None:
    rule = EncryptionRules.single(["events"]).rule_for("events")
    records = [
        (b"alice", b"secret-1"),
        (b"bob", b"secret-2"),
        (None, b"no subject"),
        (b"alice", None),
        (b"carol", b"late"),
    ]
    out = encrypt_frame(with_subject(kafka_frame(spark, records), rule), keys_frame(spark), rule, max_value_bytes=1000)
    rows = out.orderBy("src_offset").collect()
    assert [r["status"] for r in rows] == [OK, OK, REJECTED, PASSTHROUGH, DROPPED]
    assert [r["emit"] for r in rows] == [True, True, False, True, False]
    assert all(r["topic"] == "events.enc" for r in rows)
    for row, (subject, plain) in zip(rows[:2], records[:2], strict=True):
        assert plain not in bytes(row["value"])
        headers = [(h["key"], bytes(h["value"])) for h in row["headers"]]
        assert find_marker(headers).mode == ValueMode.WHOLE_VALUE
        assert headers[1] == ("trace", b"t")
        ctx = RecordContext("events.enc", subject)
        assert decrypt_value(bytes(row["value"]), lookup, ctx) == plain
    assert "no subject (record key is missing or empty)" in rows[2]["reason"]
    assert rows[3]["value"] is None  # tombstones stay tombstones
    assert rows[3]["timestamp_ms"] == int(TS.timestamp() * 1000)


def test_field_mode(spark: SparkSession) -> None:
    rule = EncryptionRules.parse_obj_or_fail(
        {"rules": [{"topic": "events", "mode": "fields", "fields": ["$.email", "$.address"]}]}
    ).rule_for("events")
    doc = {"email": "a@example.com", "address": {"city": "Porto"}, "total": 12.5}
    records = [(b"alice", json.dumps(doc).encode()), (b"bob", b"not json at all"), (b"bob", b"[1, 2]")]
    out = encrypt_frame(with_subject(kafka_frame(spark, records), rule), keys_frame(spark), rule, max_value_bytes=1000)
    rows = out.orderBy("src_offset").collect()
    assert [r["status"] for r in rows] == [OK, REJECTED, REJECTED]
    sealed = json.loads(bytes(rows[0]["value"]))
    assert sealed["total"] == 12.5
    assert sealed["email"].startswith("sr1:")
    assert isinstance(sealed["address"], str)
    assert b"Porto" not in bytes(rows[0]["value"])
    opened = decrypt_json_fields(bytes(rows[0]["value"]), lookup, RecordContext("events.enc", b"alice"))
    assert json.loads(opened) == doc
    assert "not a JSON object" in rows[1]["reason"]
    assert rows[1]["emit"] is False


def test_oversized_value_is_rejected(spark: SparkSession) -> None:
    rule = EncryptionRules.single(["events"]).rule_for("events")
    out = encrypt_frame(
        with_subject(kafka_frame(spark, [(b"alice", b"x" * 200)]), rule), keys_frame(spark), rule, max_value_bytes=100
    )
    row = out.collect()[0]
    assert row["status"] == REJECTED
    assert "encrypted value would be" in row["reason"]
    assert F is not None
