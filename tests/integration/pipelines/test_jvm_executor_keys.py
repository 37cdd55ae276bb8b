"""The JVM executor's keys (``ExecutorKeys``): held across chunks and batches, dropped when erased.

A JVM task asks the driver's key service only for the keys its executor does not hold yet; every
request still carries the executor's erasure generation, and the answer's erasures are applied before
any held key is used. Real cluster, real key table and key service, the JVM engine in Spark; what the
driver was asked is recorded at the job's key-service handler. Also here: what a chunk is charged for
its keys' usage limits (one seal per sealed value), on both engines.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from typing import Any

import pytest
from pyspark.sql import SparkSession

from strongroom.keys.erasure import erase
from strongroom.policies import Engine
from strongroom.spark import jvm_sink
from strongroom.spark.jobs.decrypt import DecryptJob
from strongroom.spark.jobs.encrypt import EncryptJob

pytestmark = pytest.mark.integration

SUBJECTS = (b"alice", b"bob", b"carol")
#: ``EncryptRecords.SEAL_ALLOWANCE``: seals charged per key asked for, the rest held for later chunks.
SEAL_ALLOWANCE = 1024


def _records(batch: int) -> list[tuple[bytes | None, bytes | None]]:
    return [(s, json.dumps({"batch": batch, "n": n, "who": s.decode()}).encode()) for s in SUBJECTS for n in range(4)]


def _record_asks(monkeypatch: pytest.MonkeyPatch, job_class: Any, op: str) -> list[dict[str, Any]]:
    """What the driver's key service is asked for ``op``: each request's args, in order."""
    asked: list[dict[str, Any]] = []
    serve = job_class._serve_keys

    def recording(self: Any, called: str, args: dict[str, Any]) -> Any:
        if called == op:
            asked.append(json.loads(json.dumps(args)))
        return serve(self, called, args)

    monkeypatch.setattr(job_class, "_serve_keys", recording)
    return asked


def _erase_and_wait(env: Any, job: Any, subject: str) -> None:
    before = job.erasures.generation
    erase(env.client, [subject], reason="executor keys test", topic=env.keys_topic)
    deadline = time.monotonic() + 30
    while job.erasures.generation == before:
        assert time.monotonic() < deadline, "the job's key table did not apply the erasure"
        time.sleep(0.05)


def test_sealing_keys_are_held_across_batches_and_an_erased_one_is_never_used_again(
    spark: SparkSession, pipeline_env: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = pipeline_env
    topic = env.new_topic(partitions=2)
    asked = _record_asks(monkeypatch, EncryptJob, "encrypt_keys")
    job = EncryptJob(spark, env.settings({"rules": [{"topic": topic}]}, "held-seal", engine=Engine.JVM))
    try:
        env.produce_raw(topic, _records(1))
        assert job.run().written == 12  # a job's counts add up over its runs
        first = Counter(s for args in asked for s in args["subjects"])
        assert first == Counter(s.decode() for s in SUBJECTS), "each subject's key is asked for once"
        seals = [n for args in asked for n in args["seals"]]
        assert seals
        assert min(seals) >= SEAL_ALLOWANCE, "a key is asked for with an allowance for later chunks"

        _erase_and_wait(env, job, "alice")
        asked.clear()
        env.produce_raw(topic, _records(2))
        assert job.run().written == 24
        second = Counter(s for args in asked for s in args["subjects"])
        assert second == Counter({"alice": 1}), "only the erased subject is asked for again"
        assert asked, "every batch still asks the driver (its answer carries the erasures)"
    finally:
        job.close()

    by_subject: dict[bytes, list[tuple[int, bytes]]] = {}
    for msg in env.read(f"{topic}.enc"):
        by_subject.setdefault(msg.key(), []).append((msg.offset(), msg.value()[4:20]))
    for subject, sealed in by_subject.items():
        key_ids = [key_id for _, key_id in sorted(sealed)]
        assert len(key_ids) == 8
        if subject == b"alice":  # the unreadable policy: a throwaway key, never the erased one
            assert alice_changed(key_ids)
        else:
            assert len(set(key_ids)) == 1, f"{subject!r} kept its key across both batches"


def alice_changed(key_ids: list[bytes]) -> bool:
    before, after = key_ids[:4], key_ids[4:]
    return len(set(before)) == 1 and before[0] not in after


def test_opening_keys_are_held_across_batches_and_an_erased_one_is_not_used_again(
    spark: SparkSession, pipeline_env: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = pipeline_env
    topic = env.new_topic(partitions=2)
    rules = {"rules": [{"topic": topic}]}
    env.produce_raw(topic, _records(1))
    env.run(EncryptJob(spark, env.settings(rules, "held-open-enc", engine=Engine.JVM)))
    asked = _record_asks(monkeypatch, DecryptJob, "decrypt_keys")
    job = DecryptJob(spark, env.settings({"rules": [{"topic": f"{topic}.enc"}]}, "held-open", engine=Engine.JVM))
    try:
        assert job.run().records == {"ok": 12}
        first = Counter(subject for args in asked for _, subject in args["pairs"])
        assert first == Counter(s.decode() for s in SUBJECTS), "each (key, subject) is asked for once"

        # a second batch sealed under the same keys, read only after alice is erased
        env.produce_raw(topic, _records(2))
        env.run(EncryptJob(spark, env.settings(rules, "held-open-enc", engine=Engine.JVM)))
        _erase_and_wait(env, job, "alice")
        asked.clear()
        second = job.run()  # a job's counts add up over its runs
        assert second.records == {"ok": 20, "erased": 4}, "alice's records are not opened with the held key"
        again = Counter(subject for args in asked for _, subject in args["pairs"])
        assert again == Counter({"alice": 1}), "bob's and carol's keys come from the executor, alice's is asked again"
    finally:
        job.close()
    opened = [json.loads(m.value()) for m in env.read(f"{topic}.decrypted")]
    assert Counter((o["batch"], o["who"]) for o in opened) == Counter(
        {(1, "alice"): 4, (1, "bob"): 4, (1, "carol"): 4, (2, "bob"): 4, (2, "carol"): 4}
    )


@pytest.mark.parametrize("engine", [Engine.JVM, Engine.PYTHON])
def test_a_field_mode_chunk_charges_one_seal_per_sealed_value(
    spark: SparkSession, pipeline_env: Any, monkeypatch: pytest.MonkeyPatch, engine: Engine
) -> None:
    """Each sealed field takes its own nonce, so a chunk (an Arrow batch on the Python engine) asks its key
    for a seal per value, not per record."""
    env = pipeline_env
    topic = env.new_topic(partitions=1)
    asked = _record_asks(monkeypatch, EncryptJob, "encrypt_keys")
    rule = {"topic": topic, "mode": "fields", "fields": ["$.email", "$.cards[*]"]}
    job = EncryptJob(spark, env.settings({"rules": [rule]}, f"per-value-{engine}", engine=engine))
    events = [{"email": f"u{i}@example.com", "cards": ["4111", "5500"]} for i in range(600)]
    records = [(b"tenant-1", json.dumps(event).encode()) for event in events]
    try:
        env.produce_raw(topic, records)
        assert job.run().written == 600
    finally:
        job.close()
    # one chunk of 600 records, three values each: 1,800 seals (more than the 1,024 allowance)
    assert [args["seals"] for args in asked] == [[1800]]
    for msg in env.read(f"{topic}.enc"):
        document = json.loads(msg.value())
        assert [text.startswith("sr1:") for text in [document["email"], *document["cards"]]] == [True] * 3


def test_many_chunks_of_a_task_are_sealed_and_opened_in_order_each_key_asked_for_once(
    spark: SparkSession, pipeline_env: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With chunks of 4 records, a task seals 30 chunks one after the other. Every record comes out once, in order,
    under its subject's one key; every key is asked for once (the chunks after take it from the executor's keys,
    left there by the answer before theirs), and decrypting, chunked alike, gives back every value."""
    monkeypatch.setattr(jvm_sink, "CHUNK_ROWS", 4)
    env = pipeline_env
    topic = env.new_topic(partitions=1)
    subjects = [f"tenant-{n}".encode() for n in range(7)]
    records = [(subjects[n % 7], json.dumps({"n": n}).encode()) for n in range(120)]
    env.produce_raw(topic, records)
    asked = _record_asks(monkeypatch, EncryptJob, "encrypt_keys")
    rules = {"rules": [{"topic": topic}]}
    assert env.run(EncryptJob(spark, env.settings(rules, "chunks-enc", engine=Engine.JVM))).written == 120
    assert len(asked) == 30, "one request per chunk"
    assert Counter(s for args in asked for s in args["subjects"]) == Counter(s.decode() for s in subjects)
    sealed = env.read(f"{topic}.enc")
    assert [m.key() for m in sealed] == [key for key, _ in records], "every record once, in source order"
    key_ids: dict[bytes, set[bytes]] = {}
    for msg in sealed:
        key_ids.setdefault(msg.key(), set()).add(msg.value()[4:20])
    assert all(len(ids) == 1 for ids in key_ids.values()), "one key per subject across the chunks"

    opening = _record_asks(monkeypatch, DecryptJob, "decrypt_keys")
    job = DecryptJob(spark, env.settings({"rules": [{"topic": f"{topic}.enc"}]}, "chunks-dec", engine=Engine.JVM))
    assert env.run(job).records == {"ok": 120}
    assert Counter(subject for args in opening for _, subject in args["pairs"]) == Counter(s.decode() for s in subjects)
    assert [m.value() for m in env.read(f"{topic}.decrypted")] == [value for _, value in records]
