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


HOSTILE_SUBJECTS = [None, b"", b"alice", b"\xff", b"\xed\xa0\x80", b"\xc0\xaf", b"\xe2\x82", b"a" * 4096, b"a" * 4097,
                    "é".encode() * 2049, b"\x00", "名🎉".encode()]  # fmt: skip
HOSTILE_DOCUMENTS = [
    b'{"c":{"id":"x"}}', b'{"c":{"id":"x","id":"y"}}', b'{"c":{"id":"\\ud800"}}', b'{"c":{"id":7.693891857e18}}',
    b'{"c":{"id":4.9e-324}}', b'{"c":{"id":"\xff"}}', b'{"c":{"id":"x"}} trailing', b"{'c':{'id':'q'}}",
    b'{"c":{"id":01}}', b'{"c":{"id":"' + b"s" * 4097 + b'"}}', b'{"c":{"id":1.0}}', b'{"c":{"id":true}}',
    b'{"c":{"id":-0}}', b'{"c":{"id":null}}', b'{"c":{"id":[1]}}', b'{"c":{"id":"\\u0000"}}', b"not json", None,
]  # fmt: skip


def test_the_dataframe_api_finds_the_subject_the_engines_and_the_client_library_find(spark: SparkSession) -> None:
    """Record key, header and JSON path, on hostile input: the same subject (so the same key, and what an erasure
    reaches) or the same reason for none as ``clients.records.subject_of``, which the engines follow. Spark's
    ``get_json_object`` took the first of two members, single quotes, trailing text, bytes that are not UTF-8 as
    U+FFFD and JDK 17's digits of a double; a cast key took bytes that are not UTF-8 and a subject too long."""
    from strongroom.clients.records import NoSubject, subject_of

    rows = [(k, b"{}", "events", 0, i, TS, 0, [("s", k)]) for i, k in enumerate(HOSTILE_SUBJECTS)]
    rows += [(b"k", v, "events", 0, 100 + i, TS, 0, []) for i, v in enumerate(HOSTILE_DOCUMENTS)]
    frame = spark.createDataFrame(rows, KAFKA_SCHEMA)
    sources = [{"source": "key"}, {"source": "header", "header": "s"}, {"source": "json", "path": "$.c.id"}]
    for source in sources:
        rule = EncryptionRules.parse_obj_or_fail(
            {"rules": [{"topic": "events", "mode": "fields", "fields": ["$.email"], "subject": source}]}
        ).rules[0]
        found = with_subject(frame, rule).orderBy("offset")
        for row in found.select("key", "value", "headers", "subject", "subject_reason").collect():
            headers = [(h["key"], h["value"]) for h in row["headers"]]
            expected = subject_of(rule, row["key"], row["value"], headers)
            assert (row["subject"], row["subject_reason"]) == (
                (None, expected.reason) if isinstance(expected, NoSubject) else (expected, None)
            ), (source, row["key"], row["value"])
