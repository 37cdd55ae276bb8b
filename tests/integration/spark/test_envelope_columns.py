"""The JVM envelope expressions are byte-compatible with the Python codec, in both directions."""

from __future__ import annotations

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from strongroom.envelope import AadProfile, RecordContext, SubjectKeyRef, decrypt_value, parse, seal
from strongroom.spark import envelope_columns as ec

DEK = bytes(range(32))
OTHER_DEK = bytes(range(1, 33))
KEY_ID = bytes(range(100, 116))


def test_jvm_seal_opens_in_python_for_both_profiles(spark: SparkSession) -> None:
    rows = [(f"cust-{i}".encode(), f'{{"n":{i}}}'.encode(), "orders.enc") for i in range(10)]
    df = spark.createDataFrame(rows, "subject binary, value binary, topic string")
    for profile in (AadProfile.TOPIC, AadProfile.PORTABLE):
        sealed = df.select(
            "subject",
            "value",
            ec.seal_whole_value(
                F.col("value"), F.lit(DEK), F.lit(KEY_ID), F.col("topic"), F.col("subject"), profile
            ).alias("env"),
        ).collect()
        for row in sealed:
            env = bytes(row["env"])
            parsed = parse(env)
            assert parsed.key_ref == SubjectKeyRef(KEY_ID)
            assert parsed.aad_profile == profile
            ctx = RecordContext("orders.enc", bytes(row["subject"]))
            assert decrypt_value(env, lambda _ref: DEK, ctx) == bytes(row["value"])
        # the same envelopes under another topic only open when the profile is PORTABLE
        moved = RecordContext("elsewhere", bytes(sealed[0]["subject"]))
        opened_elsewhere = True
        try:
            decrypt_value(bytes(sealed[0]["env"]), lambda _ref: DEK, moved)
        except Exception:  # noqa: BLE001 - IntegrityError expected for TOPIC
            opened_elsewhere = False
        assert opened_elsewhere is (profile == AadProfile.PORTABLE)


def test_python_seal_opens_in_jvm_and_failures_are_null(spark: SparkSession) -> None:
    ref = SubjectKeyRef(KEY_ID)
    rows = []
    for i in range(10):
        subject = f"cust-{i}".encode()
        env = seal(f"value-{i}".encode(), DEK, ref, RecordContext("orders.enc", subject))
        rows.append((subject, env, "orders.enc"))
    rows.append((b"cust-x", b"not an envelope", "orders.enc"))
    tampered = bytearray(rows[0][1])
    tampered[-1] ^= 1
    rows.append((rows[0][0], bytes(tampered), "orders.enc"))
    df = spark.createDataFrame(rows, "subject binary, env binary, topic string")
    out = df.select(
        ec.is_subject_key_envelope(F.col("env")).alias("is_env"),
        ec.envelope_key_id(F.col("env")).alias("key_id"),
        ec.open_whole_value(F.col("env"), F.lit(DEK), F.col("topic"), F.col("subject")).alias("plain"),
        ec.open_whole_value(F.col("env"), F.lit(OTHER_DEK), F.col("topic"), F.col("subject")).alias("wrong_key"),
        ec.open_whole_value(F.col("env"), F.lit(DEK), F.lit("other-topic"), F.col("subject")).alias("moved_topic"),
        ec.open_whole_value(F.col("env"), F.lit(DEK), F.col("topic"), F.lit(b"cust-999")).alias("moved_subject"),
    ).collect()
    good = out[:10]
    assert [bytes(r["plain"]) for r in good] == [f"value-{i}".encode() for i in range(10)]
    assert all(bytes(r["key_id"]) == KEY_ID and r["is_env"] for r in good)
    assert all(r["wrong_key"] is None and r["moved_topic"] is None and r["moved_subject"] is None for r in good)
    garbage, tampered_row = out[10], out[11]
    assert garbage["is_env"] is False
    assert garbage["plain"] is None
    assert tampered_row["plain"] is None, "a tampered envelope never yields plaintext"


def test_marker_header_first_and_unique(spark: SparkSession) -> None:
    df = spark.createDataFrame(
        [([("trace", b"t1"), ("strongroom.enc", b"\x01\x02")],), (None,)],
        "headers array<struct<key:string,value:binary>>",
    )
    from strongroom.envelope import ValueMode

    rows = df.select(ec.with_marker(F.col("headers"), ValueMode.WHOLE_VALUE).alias("h")).collect()
    assert [(h["key"], bytes(h["value"])) for h in rows[0]["h"]] == [("strongroom.enc", b"\x01\x01"), ("trace", b"t1")]
    assert [(h["key"], bytes(h["value"])) for h in rows[1]["h"]] == [("strongroom.enc", b"\x01\x01")]
