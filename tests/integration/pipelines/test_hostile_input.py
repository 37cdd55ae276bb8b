"""Hostile records through the real pipelines and the DataFrame API (issue 11, items 7 to 9).

One record must never stop a pipeline as if the brokers had failed, never be written in plaintext where
ciphertext was promised, and never be passed on because it merely looks encrypted.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

import pytest
from pyspark.sql import SparkSession

from strongroom.errors import ConfigError, PipelineError
from strongroom.kafka.transport import build_producer
from strongroom.keys.table import KeyTable
from strongroom.kms.registry import kms_from_config
from strongroom.spark.dataframes import decrypt_dataframe
from strongroom.spark.jobs.decrypt import DecryptJob
from strongroom.spark.jobs.encrypt import EncryptJob
from strongroom.spark.jobs.results import DecryptResult
from strongroom.testing.spark_kafka import read_topic

FIELDS = {"mode": "fields", "fields": ["$.name", "$.email"]}
MARKED = [("strongroom.enc", b"\x01\x02")]


def dead_letters(env: Any, topic: str) -> dict[bytes, str]:
    return {m.key(): dict(m.headers())["strongroom.dead-letter.reason"].decode() for m in env.read(topic)}


def test_hostile_records_are_rejected_by_policy_never_retried_never_written(
    spark: SparkSession, pipeline_env: Any
) -> None:
    env = pipeline_env
    topic = env.new_topic()
    good = json.dumps({"name": "Alice", "email": "alice@example.com"}).encode()
    env.produce_raw(topic, [(b"alice", good)])
    env.run(EncryptJob(spark, env.settings({"rules": [{"topic": topic, **FIELDS}]}, "seed")))
    sealed_email = json.loads(env.read(f"{topic}.enc")[0].value())["email"]
    hostile = {
        b"surrogate": b'{"name": "A", "note": "\\ud800"}',
        b"surrogate-in-field": b'{"name": "\\udc00", "email": "e"}',
        b"duplicate": ('{"email":"alice@example.com","email":"' + sealed_email + '"}').encode(),
        b"looks-sealed": b'{"name": "sr1:alice", "email": "e"}',
        b"copied-envelope": ('{"name": "Bob", "email": "' + sealed_email + '"}').encode(),
        b"stray": ('{"name": "B", "email": "e", "notes": "' + sealed_email + '"}').encode(),
        b"escaped": ('{"name": "B", "email": "\\u0073' + sealed_email[1:] + '"}').encode(),
        b"deep": b'{"name": ' + b"[" * 50_000 + b"]" * 50_000 + b"}",
    }
    source = env.new_topic()
    env.produce_raw(source, [(b"ok", good), *hostile.items()])

    # on_reject fail: the first hostile record stops the batch at once, named, and nothing is written
    started = time.monotonic()
    with pytest.raises(PipelineError, match=rf"cannot encrypt record {source}\[0\]@1: .*lone UTF-16 surrogate"):
        env.run(EncryptJob(spark, env.settings({"rules": [{"topic": source, **FIELDS}]}, "fail")))
    assert time.monotonic() - started < 120, "a bad record is not a broker outage: it is not retried"
    assert env.read(f"{source}.enc", idle=1) == []

    # dead-letter: each goes to the dead-letter topic, unchanged, with its reason; only the good one is sealed
    dlq = env.new_topic()
    rules = {"rules": [{"topic": source, **FIELDS, "on_reject": "dead-letter"}]}
    result = env.run(EncryptJob(spark, env.settings(rules, "dlq", dead_letter_topic=dlq)))
    assert result.records == {"ok": 1, "rejected": len(hostile)}
    [written] = env.read(f"{source}.enc")
    assert written.key() == b"ok"
    assert b"alice@example.com" not in written.value()
    reasons = dead_letters(env, dlq)
    assert set(reasons) == set(hostile)
    assert "lone UTF-16 surrogate" in reasons[b"surrogate"]
    assert "lone UTF-16 surrogate" in reasons[b"surrogate-in-field"]
    assert "names the member 'email' twice" in reasons[b"duplicate"]
    assert "does not open under this subject's key" in reasons[b"looks-sealed"]
    assert "does not open under this subject's key" in reasons[b"copied-envelope"]
    assert "not one of the rule's fields" in reasons[b"stray"]
    assert "JSON escapes" in reasons[b"escaped"]
    assert "nests too deeply" in reasons[b"deep"]
    assert [m.value() for m in env.read(dlq)] == list(hostile.values())


def test_decrypt_refuses_downgrades_and_disguises_in_both_reader_modes(spark: SparkSession, pipeline_env: Any) -> None:
    env = pipeline_env
    topic = env.new_topic()
    env.produce_raw(topic, [(b"alice", json.dumps({"name": "Alice", "email": "a@x", "n": 1}).encode())])
    env.run(EncryptJob(spark, env.settings({"rules": [{"topic": topic, **FIELDS}]}, "enc")))
    enc = f"{topic}.enc"
    sealed = env.read(enc)[0]
    doc = json.loads(sealed.value())
    escaped = json.dumps(doc).replace('"sr1:', '"\\u0073r1:').encode()
    producer = build_producer(env.client.producer())
    for key, value, headers in (
        (b"unmarked-plaintext", b'{"name": "Mallory", "email": "m@x"}', []),
        (b"marked-plaintext", b'{"name": "Mallory", "email": "m@x"}', MARKED),
        (b"escaped-marked", escaped, MARKED),
        (b"escaped-unmarked", escaped, []),
        (b"duplicate", ('{"email":"m@x","email":"' + doc["email"] + '"}').encode(), MARKED),
    ):
        producer.produce(enc, key=key, value=value, headers=headers)
    assert producer.flush(10) == 0
    dlq = env.new_topic()

    def decrypt(name: str, **options: Any) -> DecryptResult:
        settings = env.settings({"rules": [{"topic": enc, **FIELDS}]}, name, dead_letter_topic=dlq)
        return env.run(DecryptJob(spark, settings, on_failure="dead-letter", **options))

    strict = decrypt("strict")
    assert strict.records == {"ok": 1, "failed": 5}
    [out] = env.read(f"{topic}.decrypted")
    assert json.loads(out.value())["name"] == "Alice"
    reasons = dead_letters(env, dlq)
    assert "no strongroom.enc marker header" in reasons[b"unmarked-plaintext"]
    assert "should be encrypted but holds plaintext" in reasons[b"marked-plaintext"]
    assert "JSON escapes" in reasons[b"escaped-marked"]
    assert "no strongroom.enc marker header" in reasons[b"escaped-unmarked"]
    assert "twice" in reasons[b"duplicate"]

    # A reader that allows plaintext passes the unmarked plaintext record on, and nothing else.
    out_topic = env.new_topic()
    tolerant = decrypt("tolerant", encrypted_only=False, output_topic=out_topic)
    assert tolerant.records == {"ok": 1, "passthrough": 1, "failed": 4}
    assert sorted(m.key() for m in env.read(out_topic)) == [b"alice", b"unmarked-plaintext"]
    assert "JSON escapes" in dead_letters(env, dlq)[b"escaped-unmarked"]


def test_decrypt_dataframe_is_encrypted_only_by_default(spark: SparkSession, pipeline_env: Any) -> None:
    env = pipeline_env
    topic = env.new_topic()
    env.produce_raw(topic, [(b"alice", json.dumps({"name": "Alice", "email": "a@x"}).encode())])
    env.run(EncryptJob(spark, env.settings({"rules": [{"topic": topic, **FIELDS}]}, "enc")))
    enc = f"{topic}.enc"
    doc = json.loads(env.read(enc)[0].value())
    producer = build_producer(env.client.producer())
    producer.produce(enc, key=b"plain", value=b'{"name": "Mallory", "email": "m@x"}')
    escaped = json.dumps(doc).replace('"sr1:', '"\\u0073r1:').encode()
    producer.produce(enc, key=b"escaped", value=escaped)  # unmarked too, and no raw "sr1:" anywhere
    assert producer.flush(10) == 0
    frame = read_topic(spark, env.bootstrap, enc)
    rules = {"rules": [{"topic": enc, **FIELDS}]}
    with KeyTable(env.client, kms_from_config(env.kms_config), topic=env.keys_topic) as keys:
        strict = {
            bytes(r.key): (r.status, r.reason)
            for r in decrypt_dataframe(frame, rules, keys=keys, on_failure="keep")
            .select("key", "status", "reason")
            .collect()
        }
        tolerant = {
            bytes(r.key): (r.status, r.reason)
            for r in decrypt_dataframe(frame, rules, keys=keys, on_failure="keep", encrypted_only=False)
            .select("key", "status", "reason")
            .collect()
        }
    assert strict[b"alice"] == ("ok", None)
    assert strict[b"plain"][0] == "failed"
    assert "no strongroom.enc marker header" in strict[b"plain"][1]
    assert tolerant[b"plain"] == ("passthrough", None)
    assert tolerant[b"escaped"][0] == "failed"
    assert "JSON escapes" in tolerant[b"escaped"][1]


def test_rules_that_would_read_the_pipelines_own_output_stop_before_anything_is_written(
    spark: SparkSession, pipeline_env: Any, unique_name: Any
) -> None:
    """``orders-.*`` with the default ``$(topic).enc`` matches orders-eu.enc: the pattern subscription would read
    the sealed records back and seal them again into orders-eu.enc.enc, and so on, one new topic per round."""
    env = pipeline_env
    base = unique_name("loop")
    source = f"{base}-eu"
    env.cluster.create_topic(source, partitions=1)
    env.produce_raw(source, [(b"alice", b'{"name": "Alice"}')])
    rules = {"rules": [{"topic": f"{re.escape(base)}-.*", "pattern": True}]}
    with pytest.raises(ConfigError, match=rf"matches '{source}\.enc', the output topic of '{source}'"):
        env.run(EncryptJob(spark, env.settings(rules, "loop-encrypt")))
    with pytest.raises(ConfigError, match=rf"matches '{source}', the output topic of '{source}'"):
        env.run(
            DecryptJob(spark, env.settings({"rules": [{"topic": source}]}, "loop-decrypt"), output_topic="$(topic)")
        )
    topics = env.cluster.admin().list_topics(timeout=30).topics
    assert [t for t in topics if t.startswith(source) and t != source] == [], "nothing was created or written"
