"""The design's central assumption, checked against real Spark: the JVM pipelines can build and
open envelope v1 with built-in column expressions (``aes_encrypt`` / ``try_aes_decrypt`` with an
AAD), byte-compatible with the Python codec. Uses the shared ``spark`` fixture (marked ``spark``)."""

from __future__ import annotations

from typing import Any

from strongroom.envelope import AadProfile, RecordContext, SubjectKeyRef, aad_for, decrypt_value, seal

DEK = bytes(range(32))
REF = SubjectKeyRef(bytes(range(16)))


def test_spark_builds_envelopes_python_opens_and_vice_versa(spark: Any) -> None:
    from pyspark.sql import functions as F

    rows = [(f"customer-{i}".encode(), f'{{"n":{i}}}'.encode()) for i in range(20)]
    df = spark.createDataFrame(rows, "subject binary, value binary")
    header = REF.header(AadProfile.TOPIC)
    topic = "orders"
    # AAD = label ‖ header ‖ u16 len+topic ‖ u32 len+subject ‖ u16 len+path, all as column expressions
    u32_len = F.unhex(F.lpad(F.hex(F.length("subject")), 8, "0"))
    aad = F.concat(
        F.lit(b"strongroom/v1" + header + len(topic).to_bytes(2, "big") + topic.encode()),
        u32_len,
        F.col("subject"),
        F.lit(b"\x00\x00"),
    )
    sealed = df.withColumn("aad", aad).withColumn("dek", F.lit(DEK))
    sealed = sealed.withColumn(
        "envelope", F.concat(F.lit(header), F.expr("aes_encrypt(value, dek, 'GCM', 'DEFAULT', '', aad)"))
    )
    collected = sealed.collect()
    nonces = {bytes(row["envelope"])[len(header) : len(header) + 12] for row in collected}
    assert len(nonces) == len(rows)  # an empty iv makes Spark draw a random 12-byte IV per row
    for row in collected:
        ctx = RecordContext(topic, bytes(row["subject"]))
        assert bytes(row["aad"]) == aad_for(REF, ctx)
        assert decrypt_value(bytes(row["envelope"]), lambda ref: DEK, ctx) == bytes(row["value"])

    python_sealed = [(s, seal(v, DEK, REF, RecordContext(topic, s))) for s, v in rows]
    opened = (
        spark.createDataFrame(python_sealed, "subject binary, envelope binary")
        .withColumn("aad", aad)
        .withColumn("dek", F.lit(DEK))
        .withColumn("body", F.expr(f"substring(envelope, {len(header) + 1})"))
        .withColumn("plain", F.expr("try_aes_decrypt(body, dek, 'GCM', 'DEFAULT', aad)"))
        .withColumn("moved", F.expr("try_aes_decrypt(body, dek, 'GCM', 'DEFAULT', concat(aad, x'00'))"))
        .collect()
    )
    assert [bytes(r["plain"]) for r in opened] == [v for _, v in rows]
    assert all(r["moved"] is None for r in opened)  # wrong AAD: null, never partial plaintext
