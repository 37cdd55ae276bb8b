"""Bad input and failures in the pipelines: clear errors naming the record, dead letters, healing."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest
from pyspark.sql import SparkSession

from strongroom.errors import PipelineError
from strongroom.kafka.transport import build_producer
from strongroom.spark.jobs.decrypt import DecryptJob
from strongroom.spark.jobs.encrypt import EncryptJob
from strongroom.spark.jobs.results import DecryptResult, EncryptResult

FIELDS = {"mode": "fields", "fields": ["$.name", "$.email"]}


def encrypt(spark: SparkSession, env: Any, topic: str, **rule: Any) -> EncryptResult:
    job = EncryptJob(spark, env.settings({"rules": [{"topic": topic, **rule}]}, "enc"))
    try:
        return job.run()
    finally:
        job.close()


def decrypt(spark: SparkSession, env: Any, topic: str, name: str = "dec", settings: dict[str, Any] | None = None,
            **options: Any) -> DecryptResult:  # fmt: skip
    job = DecryptJob(spark, env.settings({"rules": [{"topic": topic, **FIELDS}]}, name, **(settings or {})), **options)
    try:
        return job.run()
    finally:
        job.close()


def test_encrypt_rejects_bad_records_clearly_and_dead_letters_them(spark: SparkSession, pipeline_env: Any) -> None:
    env = pipeline_env
    topic = env.new_topic()
    env.produce_raw(topic, [(b"alice", b'{"name": "Alice", "email": "a@x"}'), (b"bob", b"not json"), (None, b"{}")])
    with pytest.raises(PipelineError, match=rf"cannot encrypt record {topic}\[0\]@1: value is not JSON.*field mode"):
        encrypt(spark, env, topic, **FIELDS)
    assert env.read(f"{topic}.enc", idle=1) == [], "nothing is written when the batch stops"

    dlq = env.new_topic()
    job = EncryptJob(
        spark,
        env.settings(
            {"rules": [{"topic": topic, **FIELDS, "on_reject": "dead-letter"}]}, "enc-dlq", dead_letter_topic=dlq
        ),
    )
    try:
        result = job.run()
    finally:
        job.close()
    assert result.records == {"ok": 1, "rejected": 2}
    assert [m.key() for m in env.read(f"{topic}.enc")] == [b"alice"]
    dead = env.read(dlq)
    assert [m.value() for m in dead] == [b"not json", b"{}"]
    reasons = [dict(m.headers())["strongroom.dead-letter.reason"].decode() for m in dead]
    assert "value is not JSON" in reasons[0]
    assert "no subject" in reasons[1]


def test_decrypt_failures_fail_dead_letter_or_skip(spark: SparkSession, pipeline_env: Any) -> None:
    env = pipeline_env
    topic = env.new_topic()
    env.produce_raw(
        topic, [(b"alice", json.dumps({"name": "Alice", "email": "a@x", "n": i}).encode()) for i in range(3)]
    )
    encrypt(spark, env, topic, **FIELDS)
    enc = f"{topic}.enc"
    good = env.read(enc)[0]
    doc = json.loads(good.value())
    doc["name"] = doc["email"]  # a ciphertext moved to another field: the AAD binds the field path
    producer = build_producer(env.client.producer())
    producer.produce(enc, key=b"alice", value=json.dumps(doc).encode(), headers=[("strongroom.enc", b"\x01\x02")])
    producer.produce(enc, key=b"alice", value=good.value(), headers=[("strongroom.enc", b"\x07\x02")])
    producer.flush(10)

    # (offset 3 is the encrypt pipeline's transaction marker; the moved field is at 4)
    with pytest.raises(PipelineError, match=rf"cannot decrypt {enc}\[0\]@4: .*was altered") as err:
        decrypt(spark, env, enc, "fail")
    assert "quarantine" in err.value.hint

    dlq = env.new_topic()
    result = decrypt(spark, env, enc, "dlq", settings={"dead_letter_topic": dlq}, on_failure="dead-letter")
    assert result.records == {"ok": 3, "failed": 2}
    dead = env.read(dlq)
    assert len(dead) == 2
    reason = dict(dead[1].headers())["strongroom.dead-letter.reason"].decode()
    assert "format version 0x07" in reason, reason
    assert dead[1].value() == good.value(), "dead letters carry the ciphertext unchanged"

    result = decrypt(spark, env, enc, "skip", on_failure="skip")
    assert result.records == {"ok": 3, "failed": 2}


def test_lost_kek_stops_clearly_and_a_restored_kek_heals_the_running_job(
    spark: SparkSession, pipeline_env: Any
) -> None:
    env = pipeline_env
    topic = env.new_topic()
    env.produce_raw(topic, [(f"s{i}".encode(), json.dumps({"name": f"N{i}", "email": "e"}).encode()) for i in range(4)])
    encrypt(spark, env, topic, **FIELDS)
    enc = f"{topic}.enc"

    env.kek_admin.disable_kek(env.kek_id)
    with pytest.raises(PipelineError, match=rf"cannot decrypt {enc}\[0\]@0: subject key .* cannot be unwrapped"):
        decrypt(spark, env, enc, "lost", lost_kek_wait_s=0)

    # The same situation, but the KEK comes back while the pipeline is waiting: it continues by itself.
    restore = threading.Timer(6.0, env.kek_admin.enable_kek, args=(env.kek_id,))
    restore.start()
    started = time.monotonic()
    result = decrypt(spark, env, enc, "heal", lost_kek_wait_s=120, kek_recheck_s=2)
    restore.join()
    assert result.records == {"ok": 4}
    assert 5 < time.monotonic() - started < 120
    assert len(env.read(f"{topic}.decrypted")) == 4


def test_records_before_their_keys_wait_and_leave_in_subject_order(spark: SparkSession, pipeline_env: Any) -> None:
    """A mirror where data arrives before keys: the decrypt pipeline buffers, then releases in order."""

    from strongroom.keys.topic import create_keys_topic

    env = pipeline_env
    topic = env.new_topic()
    records = [
        (f"c{i % 3}".encode(), json.dumps({"name": f"N{i}", "email": "e", "seq": i}).encode()) for i in range(12)
    ]
    env.produce_raw(topic, records)
    encrypt(spark, env, topic, **FIELDS)
    enc = f"{topic}.enc"
    lagging_keys = f"{env.keys_topic}-mirror"
    create_keys_topic(env.client, lagging_keys, partitions=3)

    first = decrypt(spark, env, enc, "mirror", settings={"keys_topic": lagging_keys})
    assert first.records.get("pending") == 12
    assert first.pending.held == 12
    assert env.read(f"{topic}.decrypted", idle=1) == []

    # The keys arrive (mirror the keys topic record by record, same partitions).
    producer = build_producer(env.client.producer())
    for msg in env.read(env.keys_topic, 3, idle=2):
        producer.produce(lagging_keys, key=msg.key(), value=msg.value(), partition=msg.partition())
    producer.flush(10)

    second = decrypt(spark, env, enc, "mirror", settings={"keys_topic": lagging_keys})
    assert second.pending.released == 12
    assert second.pending.held == 0
    out = [json.loads(m.value()) for m in env.read(f"{topic}.decrypted")]
    assert sorted(d["seq"] for d in out) == list(range(12))
    by_subject: dict[int, list[int]] = {}
    for d in out:
        by_subject.setdefault(d["seq"] % 3, []).append(d["seq"])
    assert all(seqs == sorted(seqs) for seqs in by_subject.values()), "each subject's records keep their order"
