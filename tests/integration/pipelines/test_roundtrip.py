"""Encrypt and decrypt pipelines end to end on a real cluster: fields and whole values, erasure."""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql import SparkSession

from strongroom.keys.erasure import erase
from strongroom.spark.jobs.decrypt import DecryptJob
from strongroom.spark.jobs.encrypt import EncryptJob

FIELDS = ["$.name", "$.email", "$.address"]


def test_fields_roundtrip_erasure_keeps_non_pii(spark: SparkSession, pipeline_env: Any) -> None:
    env = pipeline_env
    topic = env.new_topic(partitions=2)
    events = env.produce_events(topic, 60, customers=6)
    rules = {"rules": [{"topic": topic, "mode": "fields", "fields": FIELDS}]}
    job = EncryptJob(spark, env.settings(rules, "enc"))
    try:
        result = job.run()
    finally:
        job.close()
    assert result.records == {"ok": 60}
    assert result.keys["created"] == 6
    encrypted = env.read(f"{topic}.enc")
    assert len(encrypted) == 60
    for msg in encrypted:
        doc = json.loads(msg.value())
        assert doc["email"].startswith("sr1:")
        assert "@example.com" not in msg.value().decode()
        assert dict(msg.headers())["strongroom.enc"] == b"\x01\x02"
        assert dict(msg.headers())["source"] == b"test"

    victim = events[0]["customer_id"]
    receipt = erase(env.client, [victim], reason="GDPR art. 17 request #1", topic=env.keys_topic)
    assert receipt.subjects[0].keys_tombstoned == 1

    dec_rules = {"rules": [{"topic": f"{topic}.enc", "mode": "fields", "fields": FIELDS}]}
    dec = DecryptJob(spark, env.settings(dec_rules, "dec"))
    try:
        out = dec.run()
    finally:
        dec.close()
    assert out.records == {"ok": 60}
    decrypted = [json.loads(m.value()) for m in env.read(f"{topic}.decrypted")]
    assert len(decrypted) == 60
    by_event = {e["event_id"]: e for e in events}
    for doc in decrypted:
        original = by_event[doc["event_id"]]
        assert doc["order"] == original["order"], "non-PII survives, erased or not"
        if doc["customer_id"] == victim:
            assert doc["name"] is None
            assert doc["email"] is None
            assert doc["address"] is None
        else:
            assert doc == original


def test_value_mode_erased_records_dropped(spark: SparkSession, pipeline_env: Any) -> None:
    env = pipeline_env
    topic = env.new_topic(partitions=1)
    events = env.produce_events(topic, 20, customers=4)
    rules = {"rules": [{"topic": topic}]}
    job = EncryptJob(spark, env.settings(rules, "enc"))
    try:
        job.run()
    finally:
        job.close()
    victim = events[1]["customer_id"]
    erase(env.client, [victim], reason="request", topic=env.keys_topic)
    dec_rules = {"rules": [{"topic": f"{topic}.enc"}]}
    dec = DecryptJob(spark, env.settings(dec_rules, "dec"))
    try:
        out = dec.run()
    finally:
        dec.close()
    victim_count = sum(1 for e in events if e["customer_id"] == victim)
    assert out.records == {"ok": 20 - victim_count, "erased": victim_count}
    docs = [json.loads(m.value()) for m in env.read(f"{topic}.decrypted")]
    assert len(docs) == 20 - victim_count
    assert all(d["customer_id"] != victim for d in docs)
