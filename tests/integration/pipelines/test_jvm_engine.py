"""The JVM engine of the encrypt pipeline (``engine=jvm``) against the Python engine, on a real cluster.

* Records the JVM engine seals are opened by the Python decrypt pipeline (the client library's codec),
  with the marker header first, the other headers, keys and timestamps kept.
* The two engines continue each other's checkpoint and app id mid-stream: nothing lost, nothing twice,
  and a replay from a lost checkpoint skips what the other engine committed.
* Bad input takes the same outcome, status counts and reasons on both engines (dead letter, and fail),
  sealing and opening; the JVM engine opens what either engine sealed.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from typing import Any

import pytest
from pyspark.sql import SparkSession

from strongroom.errors import PipelineError
from strongroom.kafka.transport import build_producer
from strongroom.keys.erasure import erase
from strongroom.policies import Engine
from strongroom.spark.jobs.decrypt import DecryptJob
from strongroom.spark.jobs.encrypt import EncryptJob

pytestmark = pytest.mark.integration


def _decrypted_ids(env: Any, spark: SparkSession, enc_topic: str, name: str) -> list[str]:
    dec = DecryptJob(spark, env.settings({"rules": [{"topic": enc_topic}]}, name))
    try:
        result = dec.run()
    finally:
        dec.close()
    assert set(result.records) == {"ok"}, result.records
    return [json.loads(m.value())["event_id"] for m in env.read(f"{enc_topic.removesuffix('.enc')}.decrypted")]


def test_records_the_jvm_engine_seals_are_opened_by_the_python_engine(spark: SparkSession, pipeline_env: Any) -> None:
    env = pipeline_env
    topic = env.new_topic(partitions=2)
    events = env.produce_events(topic, 80, customers=7)
    source = {(m.key(), m.value()): m.timestamp() for m in env.read(topic)}
    job = EncryptJob(spark, env.settings({"rules": [{"topic": topic}]}, "enc", engine=Engine.JVM))
    try:
        result = job.run()
    finally:
        job.close()
    assert result.records == {"ok": 80}
    assert result.written == 80
    assert result.keys["created"] == 7
    encrypted = env.read(f"{topic}.enc")
    assert len(encrypted) == 80
    plaintexts = {value for _, value in source}
    for msg in encrypted:
        assert msg.headers()[0] == ("strongroom.enc", b"\x01\x01"), "the marker header comes first"
        assert ("source", b"test") in msg.headers()
        assert msg.value()[:4] == b"\xf5\x01\x01\x01"
        assert msg.value() not in plaintexts
        assert msg.key() is not None
    ids = _decrypted_ids(env, spark, f"{topic}.enc", "dec")
    assert sorted(ids) == sorted(e["event_id"] for e in events)
    for msg in env.read(f"{topic}.decrypted"):
        assert source[(msg.key(), msg.value())] == msg.timestamp(), "key, value and timestamp survive the round trip"


def test_engines_continue_each_other_mid_stream_without_loss_or_duplicates(
    spark: SparkSession, pipeline_env: Any
) -> None:
    env = pipeline_env
    topic = env.new_topic(partitions=3)
    rules = {"rules": [{"topic": topic}]}
    produced: list[str] = []
    for step, engine in enumerate([Engine.PYTHON, Engine.JVM, Engine.PYTHON, Engine.JVM]):
        produced += [e["event_id"] for e in env.produce_events(topic, 45, customers=5)]
        job = EncryptJob(spark, env.settings(rules, "switch", app_id="switch", engine=engine))
        try:
            result = job.run()
        finally:
            job.close()
        assert result.written == 45, (step, engine, result)
    # A lost checkpoint: the query restarts from the earliest offsets, and the JVM engine skips everything
    # the two engines committed (the group's offsets inside their transactions), writing nothing again.
    shutil.rmtree(env.workdir / "chk-switch")
    job = EncryptJob(spark, env.settings(rules, "switch", app_id="switch", engine=Engine.JVM))
    try:
        replay = job.run()
    finally:
        job.close()
    assert replay.written == 0
    assert replay.replayed_skipped == 180
    assert len(env.read(f"{topic}.enc")) == 180
    ids = _decrypted_ids(env, spark, f"{topic}.enc", "switch-dec")
    assert Counter(ids) == Counter(produced)
    assert len(ids) == 180


#: The one part of a reason the engines word differently: a JSON parser's own diagnosis of text that is not
#: JSON (CPython's ``json`` versus Jackson), after this prefix. Everything before it, and every other reason,
#: is the same text on both engines.
PARSER_DIAGNOSIS = "value is not JSON: "


def _comparable(dead: list[tuple[Any, Any, Any]]) -> list[tuple[Any, Any, Any]]:
    """Dead letters with the parser's diagnosis cut from their reason (see :data:`PARSER_DIAGNOSIS`)."""
    out = []
    for key, value, headers in dead:
        kept = []
        for name, raw in headers or []:
            text = raw.decode() if name == "strongroom.dead-letter.reason" else None
            if text is not None and PARSER_DIAGNOSIS in text:
                raw = text[: text.index(PARSER_DIAGNOSIS) + len(PARSER_DIAGNOSIS)].encode()
            kept.append((name, raw))
        out.append((key, value, kept))
    return out


def _bad_records(limit: int) -> list[tuple[bytes | None, bytes | None]]:
    return [
        (b"alice", b"fine"),
        (None, b"no key at all"),
        (b"", b"empty key"),
        (b"\xff\xfe", b"key is not UTF-8"),
        (b"\xed\xa0\x80", b"key is a lone surrogate in UTF-8 form"),
        (b"s" * 4097, b"subject longer than a subject may be"),
        (b"bob", b"x" * (limit + 1)),  # too large before sealing
        (b"carol", b"y" * (limit - 10)),  # fits, but not once sealed
        (b"dave", None),  # a tombstone passes through
        (b"erin", b"fine too"),
    ]


def _run_engine(env: Any, spark: SparkSession, topic: str, out: str, dlq: str, engine: Engine, on_reject: str) -> Any:
    rules = {"rules": [{"topic": topic, "output_topic": out, "on_reject": on_reject}]}
    settings = env.settings(rules, f"bad-{engine}-{on_reject}", app_id=f"bad-{engine}-{on_reject}",
                            dead_letter_topic=dlq, engine=engine)  # fmt: skip
    job = EncryptJob(spark, settings)
    try:
        return job.run()
    finally:
        job.close()


def test_bad_input_takes_the_same_outcome_on_both_engines(spark: SparkSession, pipeline_env: Any) -> None:
    env = pipeline_env
    topic = env.new_topic(partitions=1)
    limit = 4000 - 1024  # the output topics' max.message.bytes minus the record headroom
    env.produce_raw(topic, _bad_records(limit))
    seen: dict[Engine, tuple[Any, list[tuple[Any, ...]], list[tuple[Any, ...]]]] = {}
    for engine in (Engine.PYTHON, Engine.JVM):
        out = env.new_topic(partitions=1, config={"max.message.bytes": "4000"})
        dlq = env.new_topic(partitions=1)
        result = _run_engine(env, spark, topic, out, dlq, engine, "dead-letter")
        dead = [(m.key(), m.value(), dict(m.headers())) for m in env.read(dlq)]
        written = [(m.key(), m.value() is None, m.headers()[0] if m.headers() else None) for m in env.read(out)]
        seen[engine] = (result.records, dead, written)
    python, jvm = seen[Engine.PYTHON], seen[Engine.JVM]
    assert python[0] == jvm[0] == {"ok": 2, "passthrough": 1, "rejected": 7}
    assert python[1] == jvm[1], "the same records reach the dead-letter topic, with the same reasons"
    reasons = [headers["strongroom.dead-letter.reason"].decode() for _, _, headers in jvm[1]]
    assert reasons == [
        "no subject (record key is missing or empty)",
        "no subject (record key is missing or empty)",
        "no subject (record key is not UTF-8 text)",
        "no subject (record key is not UTF-8 text)",
        "no subject (record key is 4097 bytes, more than 4096)",
        f"value too large to encrypt (> {limit} bytes)",
        f"encrypted value would be {limit - 10 + 49} bytes, above the output topic's limit of {limit} bytes",
    ]
    assert [h["strongroom.dead-letter.source"] for _, _, h in jvm[1]] == [
        f"{topic}/0/{offset}".encode() for offset in (1, 2, 3, 4, 5, 6, 7)
    ]
    assert (
        python[2]
        == jvm[2]
        == [
            (b"alice", False, ("strongroom.enc", b"\x01\x01")),
            (b"dave", True, None),
            (b"erin", False, ("strongroom.enc", b"\x01\x01")),
        ]
    )


def test_a_record_the_rule_says_stop_on_stops_both_engines_with_the_same_error(
    spark: SparkSession, pipeline_env: Any
) -> None:
    env = pipeline_env
    topic = env.new_topic(partitions=1)
    env.produce_raw(topic, [(b"alice", b"fine"), (None, b"no subject"), (b"bob", b"never reached")])
    errors: dict[Engine, str] = {}
    for engine in (Engine.PYTHON, Engine.JVM):
        out = env.new_topic(partitions=1)
        with pytest.raises(PipelineError) as caught:
            _run_engine(env, spark, topic, out, env.new_topic(), engine, "fail")
        errors[engine] = caught.value.problem
        assert env.read(out) == [], "nothing of the stopped partition is committed"
    assert errors[Engine.PYTHON] == errors[Engine.JVM]
    assert errors[Engine.JVM] == (f"cannot encrypt record {topic}[0]@1: no subject (record key is missing or empty)")


JSON_SUBJECTS: list[bytes] = [
    b'{"c":{"id":"alice"},"email":"a@example.com"}',  # a string
    b'{"c":{"id":42},"email":"b@example.com"}',  # an integer
    b'{"c":{"id":1.5e10},"email":"c@example.com"}',  # a float, printed as Java prints a double
    # a float JDK 17's Double.toString prints with more digits (7.6938918569999995E18): the shortest digits, on both
    b'{"c":{"id":7.693891857e18},"email":"l@example.com"}',
    b'{"c":{"id":true},"email":"d@example.com"}',  # a boolean
    b'{"c":{"id":null},"email":"e@example.com"}',  # null
    b'{"c":{"id":{"x":1}},"email":"f@example.com"}',  # an object
    b'{"c":{"id":[1]},"email":"g@example.com"}',  # an array
    b'{"c":{"id":""},"email":"h@example.com"}',  # empty
    b'{"c":{},"email":"i@example.com"}',  # missing
    b'{"c":"flat","email":"j@example.com"}',  # the path runs into a string
    b'{"c":{"id":"' + b"s" * 4097 + b'"},"email":"k@example.com"}',  # too long
    b"not json at all",  # not JSON
]


def test_json_path_subjects_are_read_alike_by_both_engines(spark: SparkSession, pipeline_env: Any) -> None:
    env = pipeline_env
    topic = env.new_topic(partitions=1)
    env.produce_raw(topic, [(b"k", value) for value in JSON_SUBJECTS])
    seen: dict[Engine, Any] = {}
    for engine in (Engine.PYTHON, Engine.JVM):
        out, dlq = env.new_topic(partitions=1), env.new_topic(partitions=1)
        rule = {"topic": topic, "output_topic": out, "on_reject": "dead-letter", "mode": "fields",
                "fields": ["$.email"], "subject": {"source": "json", "path": "$.c.id"}}  # fmt: skip
        name = f"json-subject-{engine}"
        job = EncryptJob(
            spark, env.settings({"rules": [rule]}, name, app_id=name, dead_letter_topic=dlq, engine=engine)
        )
        try:
            result = job.run()
        finally:
            job.close()
        dead = _comparable([(m.key(), m.value(), m.headers()) for m in env.read(dlq)])
        seen[engine] = (result.records, dead, result.keys["created"])
    python, jvm = seen[Engine.PYTHON], seen[Engine.JVM]
    assert python[0] == jvm[0] == {"ok": 5, "rejected": 8}
    assert python[1] == jvm[1], "the same records are rejected, with the same reasons"
    assert jvm[2] == 0, "the Python engine created the five subjects' keys; the JVM engine found them"
    assert python[2] == 5


def _decrypt(env: Any, spark: SparkSession, topic: str, engine: Engine, **options: Any) -> Any:
    name = f"dec-{engine}-{options.get('output_topic', 'default')}"
    dlq = options.pop("dead_letter_topic", None)
    settings = env.settings({"rules": [{"topic": topic}]}, name, app_id=name, engine=engine, dead_letter_topic=dlq)
    job = DecryptJob(spark, settings, **options)
    try:
        return job.run()
    finally:
        job.close()


@pytest.mark.parametrize("sealed_by", [Engine.PYTHON, Engine.JVM])
def test_the_jvm_engine_opens_what_either_engine_sealed(
    spark: SparkSession, pipeline_env: Any, sealed_by: Engine
) -> None:
    env = pipeline_env
    topic = env.new_topic(partitions=2)
    events = env.produce_events(topic, 60, customers=6)
    job = EncryptJob(spark, env.settings({"rules": [{"topic": topic}]}, "enc", engine=sealed_by))
    try:
        assert job.run().records == {"ok": 60}
    finally:
        job.close()
    result = _decrypt(env, spark, f"{topic}.enc", Engine.JVM)
    assert result.records == {"ok": 60}
    opened = env.read(f"{topic}.decrypted")
    assert sorted(json.loads(m.value())["event_id"] for m in opened) == sorted(e["event_id"] for e in events)
    for msg in opened:
        assert ("source", b"test") in msg.headers()
        assert all(name != "strongroom.enc" for name, _ in msg.headers()), "the marker is removed"


def _hostile_encrypted(env: Any, spark: SparkSession) -> tuple[str, str]:
    """An encrypted topic with good records, an erased subject's and every kind of bad one; returns it and
    the topic its ciphertext is bound to (the records are copies: the decrypt maps one to the other)."""
    source = env.new_topic(partitions=1)
    env.produce_raw(source, [(b"alice", b"a1"), (b"bob", b"b1"), (b"carol", b"c1"), (b"alice", b"a2")])
    job = EncryptJob(spark, env.settings({"rules": [{"topic": source}]}, "hostile-enc"))
    try:
        job.run()
    finally:
        job.close()
    sealed = env.read(f"{source}.enc")
    alice, bob, carol = sealed[0], sealed[1], sealed[2]
    marker = ("strongroom.enc", b"\x01\x01")
    tampered = bytearray(bob.value())
    tampered[-1] ^= 0x01
    unknown_key = bob.value()[:4] + b"\x42" * 16 + bob.value()[20:]
    target = env.new_topic(partitions=1)
    producer = build_producer(env.client.producer())
    records: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]] = [
        (alice.key(), alice.value(), [marker]),  # opens
        (b"mallory", alice.value(), [marker]),  # alice's key claimed by another subject: foreign or integrity
        (bob.key(), bytes(tampered), [marker]),  # altered
        (bob.key(), unknown_key, [marker]),  # a key id nobody has: pending
        (carol.key(), carol.value(), [marker]),  # carol is erased below
        (b"dave", b"plaintext without the marker", []),  # encrypted-only refuses it
        (b"dave", b"marked as fields", [("strongroom.enc", b"\x01\x02")]),  # the other mode
        (b"dave", b"bad marker", [("strongroom.enc", b"\x01\x01\x01")]),  # not 2 bytes
        (None, alice.value(), [marker]),  # no subject
        (b"\xff", alice.value(), [marker]),  # subject not UTF-8
        (bob.key(), b"\xf5\x01\x01\x01short", [marker]),  # truncated envelope
        (bob.key(), None, [marker]),  # tombstone
        (bob.key(), bob.value(), [marker, ("kept", b"yes")]),  # opens, other headers kept
    ]
    for key, value, headers in records:
        producer.produce(target, key=key, value=value, headers=headers)
    assert producer.flush(30) == 0
    erase(env.client, ["carol"], reason="test", topic=env.keys_topic)
    return target, f"{source}.enc"


def test_bad_encrypted_input_takes_the_same_outcome_on_both_engines(spark: SparkSession, pipeline_env: Any) -> None:
    env = pipeline_env
    topic, bound = _hostile_encrypted(env, spark)
    seen: dict[Engine, Any] = {}
    for engine in (Engine.PYTHON, Engine.JVM):
        out, dlq = env.new_topic(partitions=1), env.new_topic(partitions=1)
        result = _decrypt(env, spark, topic, engine, output_topic=out, on_failure="dead-letter", erased="mark",
                          dead_letter_topic=dlq, topic_map={topic: bound})  # fmt: skip
        written = [(m.key(), m.value(), m.headers()) for m in env.read(out)]
        dead = [(m.key(), m.value(), m.headers()) for m in env.read(dlq)]
        seen[engine] = (result.records, written, dead)
    python, jvm = seen[Engine.PYTHON], seen[Engine.JVM]
    assert python[0] == jvm[0], (python[0], jvm[0])
    assert python[1] == jvm[1], "the same records reach the output, opened alike"
    assert python[2] == jvm[2], "the same records reach the dead-letter topic, with the same reasons"
    assert {k: jvm[0][k] for k in ("ok", "erased", "passthrough", "pending")} == {
        "ok": 2, "erased": 1, "passthrough": 1, "pending": 1,
    }  # fmt: skip
    reasons = [dict(h)["strongroom.dead-letter.reason"].decode() for _, _, h in jvm[2]]
    assert len(reasons) == jvm[0]["failed"]
    assert any("IntegrityError" in r for r in reasons)
    assert any("marker header; this reader accepts encrypted records only" in r for r in reasons)
    assert any("cannot find the subject to decrypt with" in r for r in reasons)


FIELD_INPUTS: list[tuple[bytes | None, bytes | None]] = [
    (b"alice", b'{"email":"alice@example.com","order":1}'),  # sealed
    (b"alice", b'{"order":2}'),  # no rule field: written unchanged (marked)
    (b"bob", b"\xff\x00 garbage bytes"),  # not UTF-8, not JSON
    (b"bob", b'{"email":"\\ud800"}'),  # a lone surrogate escape
    (b"bob", b'{"email":"plain","email":"sr1:AAAA"}'),  # duplicate names (the disguise attack)
    (b"bob", b"[1,2,3]"),  # not an object
    (b"bob", b'{"note":"sr1:AAAA","email":"x"}'),  # an sr1: string outside the rule fields
    (b"bob", b'{"email":"sr1:AAAA"}'),  # looks sealed, does not open under bob's key
    (None, b'{"email":"nobody@example.com"}'),  # no subject
    (b"carol", b'{"email":"' + b"c" * 3000 + b'"}'),  # too large once sealed
    (b"carol", b'{"email":"carol@example.com","n":1.5e300}'),  # sealed (floats re-serialised alike)
]


def test_field_mode_bad_input_takes_the_same_outcome_on_both_engines(spark: SparkSession, pipeline_env: Any) -> None:
    env = pipeline_env
    topic = env.new_topic(partitions=1)
    env.produce_raw(topic, FIELD_INPUTS)
    seen: dict[Engine, Any] = {}
    for engine in (Engine.PYTHON, Engine.JVM):
        out = env.new_topic(partitions=1, config={"max.message.bytes": "4000"})
        dlq = env.new_topic(partitions=1)
        rule = {
            "topic": topic,
            "output_topic": out,
            "on_reject": "dead-letter",
            "mode": "fields",
            "fields": ["$.email"],
        }
        settings = env.settings({"rules": [rule]}, f"fields-{engine}", app_id=f"fields-{engine}",
                                dead_letter_topic=dlq, engine=engine)  # fmt: skip
        job = EncryptJob(spark, settings)
        try:
            result = job.run()
        finally:
            job.close()
        written = env.read(out)
        dead = _comparable([(m.key(), m.value(), m.headers()) for m in env.read(dlq)])
        shape = [(m.key(), m.headers()[0], b"sr1:" in m.value(), b"@example.com" in m.value()) for m in written]
        # Each engine opens what it sealed: the JVM engine's field-mode decrypt against the Python engine's.
        dec = DecryptJob(spark, env.settings({"rules": [{**rule, "topic": out}]}, f"fields-dec-{engine}",
                                             app_id=f"fields-dec-{engine}", engine=engine),
                         output_topic=f"{out}.plain")  # fmt: skip
        try:
            assert dec.run().records == {"ok": len(written)}
        finally:
            dec.close()
        opened = [(m.key(), json.loads(m.value())) for m in env.read(f"{out}.plain")]
        seen[engine] = (result.records, dead, shape, opened)
    python, jvm = seen[Engine.PYTHON], seen[Engine.JVM]
    assert python[0] == jvm[0] == {"ok": 3, "rejected": 8}
    assert python[1] == jvm[1], "the same records reach the dead-letter topic, with the same reasons"
    assert (
        python[2]
        == jvm[2]
        == [
            (b"alice", ("strongroom.enc", b"\x01\x02"), True, False),
            (b"alice", ("strongroom.enc", b"\x01\x02"), False, False),
            (b"carol", ("strongroom.enc", b"\x01\x02"), True, False),
        ]
    )
    assert python[3] == jvm[3], "the JVM-sealed fields open to what the Python-sealed ones open to"
    assert [doc.get("email") for _, doc in jvm[3]] == ["alice@example.com", None, "carol@example.com"]


def test_field_mode_bad_encrypted_input_takes_the_same_outcome_on_both_engines(
    spark: SparkSession, pipeline_env: Any
) -> None:
    env = pipeline_env
    source = env.new_topic(partitions=1)
    env.produce_raw(source, [(b"alice", b'{"email":"alice@example.com","n":1}'), (b"bob", b'{"email":"bob@x.org"}')])
    rule = {"topic": source, "mode": "fields", "fields": ["$.email"]}
    job = EncryptJob(spark, env.settings({"rules": [rule]}, "hostile-fields-enc"))
    try:
        job.run()
    finally:
        job.close()
    alice, bob = env.read(f"{source}.enc")
    sealed_alice = json.loads(alice.value())["email"]
    marker = ("strongroom.enc", b"\x01\x02")
    target = env.new_topic(partitions=1)
    producer = build_producer(env.client.producer())
    hostile: list[tuple[bytes | None, bytes, list[tuple[str, bytes]]]] = [
        (b"alice", alice.value(), [marker]),  # opens
        (b"bob", bob.value(), [marker]),  # bob is erased below: the field becomes null
        (b"alice", b'{"email":"plain@example.com"}', [marker]),  # marked, but the rule field is plaintext
        (b"alice", b'{"email":"\\u0073r1:' + sealed_alice[4:].encode() + b'"}', [marker]),  # escaped spelling
        (b"alice", b'{"email":"' + sealed_alice[:-3].encode() + b'AAA"}', [marker]),  # altered
        (b"mallory", alice.value(), [marker]),  # alice's key claimed by another subject
        (b"alice", b"\xff\x00 not json", [marker]),  # garbage
        (b"alice", b'{"email":"x","email":"y"}', [marker]),  # duplicate names
        (b"alice", b'{"note":"\\ud800","email":"' + sealed_alice.encode() + b'"}', [marker]),  # lone surrogate
        (b"alice", alice.value(), [("strongroom.enc", b"\x01\x01")]),  # the other mode's marker
        (b"alice", alice.value(), []),  # no marker: encrypted-only readers refuse it
        (b"carol", b'{"email":"sr1:' + b"A" * 64 + b'"}', [marker]),  # an envelope under a key nobody has
    ]
    for key, value, headers in hostile:
        producer.produce(target, key=key, value=value, headers=headers)
    assert producer.flush(30) == 0
    erase(env.client, ["bob"], reason="test", topic=env.keys_topic)
    seen: dict[Engine, Any] = {}
    for engine in (Engine.PYTHON, Engine.JVM):
        out, dlq = env.new_topic(partitions=1), env.new_topic(partitions=1)
        name = f"hostile-fields-dec-{engine}"
        settings = env.settings({"rules": [{**rule, "topic": target}]}, name, app_id=name, engine=engine,
                                dead_letter_topic=dlq)  # fmt: skip
        # The records are copies of what was sealed for {source}.enc: the decrypt binds them to it.
        dec = DecryptJob(
            spark, settings, output_topic=out, on_failure="dead-letter", topic_map={target: f"{source}.enc"}
        )
        try:
            result = dec.run()
        finally:
            dec.close()
        written = [(m.key(), m.value(), m.headers()) for m in env.read(out)]
        dead = _comparable([(m.key(), m.value(), m.headers()) for m in env.read(dlq)])
        seen[engine] = (result.records, written, dead)
    python, jvm = seen[Engine.PYTHON], seen[Engine.JVM]
    assert python[0] == jvm[0], (python[0], jvm[0])
    assert python[1] == jvm[1], "the same records reach the output, opened alike"
    assert python[2] == jvm[2], "the same records reach the dead-letter topic, with the same reasons"
    assert [json.loads(v) for _, v, _ in jvm[1]] == [{"email": "alice@example.com", "n": 1}, {"email": None}]
    assert jvm[0]["ok"] == 2
    assert jvm[0]["failed"] == len(jvm[2]) >= 8
