"""Schema-aware rules in the Spark pipelines against a real registry (Apicurio) and a real cluster.

* Avro, JSON Schema and Protobuf on the JVM engine (the default): records produced with confluent-kafka's
  serializer come out with their tagged fields sealed in place, the same schema id, still readable with it;
  the Python engine (the client library's codec) opens what the JVM sealed and the JVM opens what Python
  sealed; an erased subject's fields read as the post-erasure policy says (null where the type allows, else
  empty); ``decrypt_dataframe`` reads the same.
* Bad input (no magic byte, unknown schema id, a payload that does not read or that its JSON Schema refuses,
  a tagged int field) gets the same outcome and reason on both engines: dead letters as the records came,
  or the job stops and writes nothing; nothing reaches the encrypted topic in plaintext.
* A registry that is down is waited out, then the job stops; nothing is written, nothing guessed.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from pyspark.sql import SparkSession

from strongroom.errors import PipelineError
from strongroom.keys.erasure import erase
from strongroom.keys.table import KeyTable
from strongroom.kms.registry import kms_from_config
from strongroom.policies import Engine
from strongroom.schemas.registry import RegistrySettings
from strongroom.spark.dataframes import decrypt_dataframe
from strongroom.spark.jobs.decrypt import DecryptJob
from strongroom.spark.jobs.encrypt import EncryptJob
from strongroom.testing.forwarder import TcpForwarder
from strongroom.testing.schema_formats import Format, bad_schema_records, customer_events, make_format, registry_client
from strongroom.testing.schema_registry import SchemaRegistryServer
from strongroom.testing.spark_kafka import read_topic

pytestmark = pytest.mark.integration

SCHEMA_MARKER = ("strongroom.enc", b"\x01\x03")
REASON = "strongroom.dead-letter.reason"
#: The parts of a reason the engines word differently: the Avro library's own exception name (fastavro's
#: ``EOFError``, Apache Avro's ``EOFException``) for a payload that does not read, and the JSON parser's own
#: words (json's, Jackson's) before the place it names, each after this text.
READER_DIAGNOSIS = re.compile(r"(payload does not read as Avro schema id \d+: )\w+")
PARSER_DIAGNOSIS = re.compile(r"(is not usable JSON: value is not JSON: ).*?( at line \d+ column \d+)")


def _comparable(dead: list[tuple[bytes, str]]) -> list[tuple[bytes, str]]:
    def same_words(reason: str) -> str:
        reason = READER_DIAGNOSIS.sub(r"\1<reader's diagnosis>", reason)
        return PARSER_DIAGNOSIS.sub(r"\1<parser's diagnosis>\2", reason)

    return [(value, same_words(reason)) for value, reason in dead]


def _rules(topic: str, **extra: Any) -> dict[str, Any]:
    return {"rules": [{"topic": topic, "mode": "schema", **extra}]}


def _produce(env: Any, topic: str, serde: Format, events: list[dict[str, Any]]) -> None:
    env.produce_raw(topic, [(e["customer_id"].encode(), serde.serialize(e)) for e in events])


def _encrypt(spark: SparkSession, env: Any, rules: dict[str, Any], name: str, registry: str, **kw: Any) -> Any:
    settings = env.settings(rules, name, schema_registry=RegistrySettings(url=registry), **kw)
    return env.run(EncryptJob(spark, settings))


def _decrypt(spark: SparkSession, env: Any, rules: dict[str, Any], name: str, registry: str, **kw: Any) -> Any:
    job_options = {k: kw.pop(k) for k in ("erased", "output_topic", "on_failure", "encrypted_only") if k in kw}
    settings = env.settings(rules, name, schema_registry=RegistrySettings(url=registry), **kw)
    return env.run(DecryptJob(spark, settings, **job_options))


def _check_sealed(wire: list[Any], serde: Format, events: list[dict[str, Any]], schema_prefix: bytes) -> None:
    originals = {e["sku"]: e for e in events}
    assert len(wire) == len(events)
    for msg in wire:
        value = msg.value()
        assert value[:5] == schema_prefix, "same magic byte and schema id"
        assert msg.headers()[0] == SCHEMA_MARKER
        assert b"@example.com" not in value
        assert b"Customer " not in value
        record = serde.deserialize(value)  # still reads with its schema
        original = originals[record["sku"]]
        assert record["email"].startswith("sr1:")
        assert record["name"].startswith("sr1:")
        assert {k: record[k] for k in ("customer_id", "sku", "qty")} == {
            k: original[k] for k in ("customer_id", "sku", "qty")
        }


@pytest.mark.parametrize("fmt", ["avro", "json", "protobuf"])
def test_fields_sealed_by_either_engine_open_on_the_other_and_erase_by_policy(
    spark: SparkSession, pipeline_env: Any, schema_registry: SchemaRegistryServer, fmt: str
) -> None:
    env = pipeline_env
    url = schema_registry.url
    topic = env.new_topic(partitions=2)
    serde = make_format(fmt, registry_client(url), topic)
    events = customer_events(40, 5)
    _produce(env, topic, serde, events)
    prefix = env.read(topic)[0].value()[:5]
    # the subject from a field of the record (read with its schema)
    by_field = _rules(topic, subject={"source": "json", "path": "$.customer_id"})

    jvm = _encrypt(spark, env, by_field, "enc-jvm", url, engine=Engine.JVM)
    assert jvm.records == {"ok": 40}, jvm.records
    _check_sealed(env.read(f"{topic}.enc"), serde, events, prefix)

    # the Python engine (the client library's codec) opens what the JVM sealed
    opened = _decrypt(spark, env, _rules(f"{topic}.enc", subject={"source": "json", "path": "$.customer_id"}),
                      "dec-py", url, engine=Engine.PYTHON)  # fmt: skip
    assert opened.records == {"ok": 40}, opened.records
    decrypted = [serde.deserialize(m.value()) for m in env.read(f"{topic}.decrypted")]
    assert sorted(decrypted, key=lambda r: r["qty"]) == events

    # and the reverse: the Python engine seals (subject from the key), the JVM engine opens
    other = env.new_topic(partitions=2)
    other_serde = make_format(fmt, registry_client(url), other)
    _produce(env, other, other_serde, events)
    py = _encrypt(spark, env, _rules(other), "enc-py", url, engine=Engine.PYTHON)
    assert py.records == {"ok": 40}, py.records
    _check_sealed(env.read(f"{other}.enc"), other_serde, events, env.read(other)[0].value()[:5])
    back = _decrypt(spark, env, _rules(f"{other}.enc"), "dec-jvm", url, engine=Engine.JVM)
    assert back.records == {"ok": 40}, back.records
    decrypted = [other_serde.deserialize(m.value()) for m in env.read(f"{other}.decrypted")]
    assert sorted(decrypted, key=lambda r: r["qty"]) == events

    # erasure: the subject's tagged fields read as the policy says; the rest of the record is intact
    victim = "cust-1"
    erase(env.client, [victim], reason="GDPR art. 17", topic=env.keys_topic)
    after = _decrypt(spark, env, _rules(f"{topic}.enc", subject={"source": "json", "path": "$.customer_id"}),
                     "dec-erased", url, engine=Engine.JVM, output_topic=f"{topic}.after")  # fmt: skip
    assert after.records == {"ok": 40}, after.records
    _check_erased([serde.deserialize(m.value()) for m in env.read(f"{topic}.after")], events, victim)

    # decrypt_dataframe reads the same records in any Spark job, with the same outcome
    frame = read_topic(spark, env.bootstrap, f"{topic}.enc")
    with KeyTable(env.client, kms_from_config(env.kms_config), topic=env.keys_topic).open() as table:
        enc_rules = _rules(f"{topic}.enc", subject={"source": "json", "path": "$.customer_id"})
        rows = decrypt_dataframe(frame, enc_rules, keys=table, schema_registry=RegistrySettings(url=url)).collect()
    assert {r["status"] for r in rows} == {"ok"}
    _check_erased([serde.deserialize(bytes(r["value"])) for r in rows], events, victim)


def _check_erased(records: list[dict[str, Any]], events: list[dict[str, Any]], victim: str) -> None:
    """The victim's tagged fields read as the policy says, everything else exactly as produced."""
    originals = {e["sku"]: e for e in events}
    assert sorted(r["sku"] for r in records) == sorted(originals)
    for record in records:
        original = originals[record["sku"]]
        if original["customer_id"] == victim:
            assert record["email"] == "", "a plain string field reads as empty"
            assert record.get("name") is None, "a nullable field reads as null (proto3 optional: unset)"
            assert record["qty"] == original["qty"]
        else:
            assert record == original


@pytest.mark.parametrize("fmt", ["avro", "json"])
def test_bad_input_takes_the_same_outcome_on_both_engines_and_nothing_is_sealed_half(
    spark: SparkSession, pipeline_env: Any, schema_registry: SchemaRegistryServer, fmt: str
) -> None:
    env = pipeline_env
    url = schema_registry.url
    topic = env.new_topic()
    bad = bad_schema_records(url, topic, fmt)
    serde = make_format(fmt, registry_client(url), topic)
    good = customer_events(3, 3)
    env.produce_raw(topic, [(b"cust-0", value) for value in bad.values()])
    _produce(env, topic, serde, good)

    dead: dict[Engine, list[tuple[bytes, str]]] = {}
    for engine in (Engine.JVM, Engine.PYTHON):
        dlq = env.new_topic()
        out = f"{topic}.{engine}"
        rules = _rules(topic, on_reject="dead-letter", output_topic=out)
        result = _encrypt(spark, env, rules, f"dlq-{engine}", url, engine=engine, dead_letter_topic=dlq)
        assert result.records == {"rejected": len(bad), "ok": len(good)}, (engine, result.records)
        dead[engine] = [(m.value(), dict(m.headers())[REASON].decode()) for m in env.read(dlq)]
        assert [value for value, _ in dead[engine]] == list(bad.values()), "dead letters are the records as they came"
        for (_, reason), problem in zip(dead[engine], bad, strict=True):
            assert problem in reason, (engine, reason)
            assert reason.endswith("(schema mode)"), (engine, reason)
        _check_sealed(env.read(out), serde, good, env.read(topic)[-1].value()[:5])
    assert _comparable(dead[Engine.JVM]) == _comparable(dead[Engine.PYTHON]), "the same reasons on both engines"

    for engine in (Engine.JVM, Engine.PYTHON):
        out = f"{topic}.fail-{engine}"
        with pytest.raises(PipelineError, match="not the Confluent magic byte"):
            _encrypt(spark, env, _rules(topic, output_topic=out), f"fail-{engine}", url, engine=engine)
        assert env.read(out, idle=1.0) == [], "a failed write commits nothing"


def test_a_registry_that_is_down_is_waited_out_then_the_job_stops_writing_nothing(
    spark: SparkSession, pipeline_env: Any, schema_registry: SchemaRegistryServer
) -> None:
    env = pipeline_env
    topic = env.new_topic()
    serde = make_format("avro", registry_client(schema_registry.url), topic)
    events = customer_events(5, 2)
    _produce(env, topic, serde, events)

    never = TcpForwarder(schema_registry.port)  # refuses connections: it is never started
    gone = RegistrySettings(url=f"http://127.0.0.1:{never.port}/apis/ccompat/v7", outage_wait_s=3.0, timeout_s=2.0)
    settings = env.settings(_rules(topic), "down", schema_registry=gone, engine=Engine.JVM)
    with pytest.raises(PipelineError, match="schema registry"):
        env.run(EncryptJob(spark, settings))
    assert env.read(f"{topic}.enc", idle=1.0) == [], "nothing written, nothing guessed"

    late = TcpForwarder(schema_registry.port)
    late.start_after(4.0)  # the registry comes back within the wait
    try:
        back = RegistrySettings(url=f"http://127.0.0.1:{late.port}/apis/ccompat/v7", outage_wait_s=120.0)
        # a new checkpoint: the failed run's never finished batch read the topic, and with no committed offsets
        # the exactly-once sink cannot tell a batch that wrote nothing from offsets that expired (it refuses)
        result = env.run(EncryptJob(spark, env.settings(_rules(topic), "back", schema_registry=back)))
    finally:
        late.stop()
    assert result.records == {"ok": 5}, result.records
    _check_sealed(env.read(f"{topic}.enc"), serde, events, env.read(topic)[0].value()[:5])


def test_a_tagged_field_holding_plaintext_fails_on_both_engines_and_is_never_held(
    spark: SparkSession, pipeline_env: Any, schema_registry: SchemaRegistryServer
) -> None:
    env = pipeline_env
    url = schema_registry.url
    topic = env.new_topic()
    serde = make_format("avro", registry_client(url), topic)
    events = customer_events(4, 2)
    _produce(env, topic, serde, events)
    # a producer whose rule seals email only: name stays plaintext although the schema tags it
    email_only = _rules(topic, tags=[], fields=["$.email"])
    assert _encrypt(spark, env, email_only, "email-only", url).records == {"ok": 4}
    plain = serde.serialize(events[0])
    env.produce_raw(f"{topic}.enc", [(b"cust-0", plain)])  # unmarked, nothing sealed: passed on as it is

    dead: dict[Engine, list[str]] = {}
    for engine in (Engine.JVM, Engine.PYTHON):
        dlq = env.new_topic()
        result = _decrypt(spark, env, _rules(f"{topic}.enc"), f"mixed-{engine}", url, engine=engine,
                          dead_letter_topic=dlq, on_failure="dead-letter", encrypted_only=False,
                          output_topic=f"{topic}.{engine}")  # fmt: skip
        assert result.records == {"failed": 4, "passthrough": 1}, (engine, result.records)
        dead[engine] = [dict(m.headers())[REASON].decode() for m in env.read(dlq)]
        assert all("field $.name should be encrypted but holds plaintext" in r for r in dead[engine]), dead
        assert [m.value() for m in env.read(f"{topic}.{engine}")] == [plain], "only the unmarked record passed on"
    assert dead[Engine.JVM] == dead[Engine.PYTHON]


#: Tagged values in and outside an array: what a record seals depends on the record.
CONTACT_SCHEMA = {
    "type": "record",
    "name": "Contact",
    "fields": [
        {"name": "email", "type": "string", "confluent:tags": ["PII"]},
        {"name": "phones", "type": {"type": "array", "items": "string"}, "confluent:tags": ["PII"]},
    ],
}


@pytest.mark.parametrize("engine", [Engine.JVM, Engine.PYTHON])
def test_a_schema_record_charges_its_key_one_seal_per_sealed_field(
    spark: SparkSession,
    pipeline_env: Any,
    schema_registry: SchemaRegistryServer,
    monkeypatch: pytest.MonkeyPatch,
    engine: Engine,
) -> None:
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from strongroom.testing.schema_formats import SERIALIZER_CONF

    env = pipeline_env
    topic = env.new_topic(partitions=1)
    client = registry_client(schema_registry.url)
    ctx = SerializationContext(topic, MessageField.VALUE)
    serialize = AvroSerializer(client, json.dumps(CONTACT_SCHEMA), conf=SERIALIZER_CONF)
    contacts = [{"email": f"u{i}@example.com", "phones": ["+351 1", "+351 2"]} for i in range(400)]
    env.produce_raw(topic, [(b"tenant-1", bytes(serialize(c, ctx))) for c in contacts])
    asked: list[list[int]] = []
    serve = EncryptJob._serve_keys

    def recording(self: Any, op: str, args: dict[str, Any]) -> Any:
        if op == "encrypt_keys":
            asked.append(list(args["seals"]))
        return serve(self, op, args)

    monkeypatch.setattr(EncryptJob, "_serve_keys", recording)
    result = _encrypt(spark, env, _rules(topic), f"per-field-{engine}", schema_registry.url, engine=engine)
    assert result.records == {"ok": 400}, result.records
    # one chunk (an Arrow batch on the Python engine) of 400 records, an email and two phones each
    assert asked == [[1200]]
    deserialize = AvroDeserializer(client)
    for msg in env.read(f"{topic}.enc"):
        contact = deserialize(msg.value(), SerializationContext(f"{topic}.enc", MessageField.VALUE))
        assert [v.startswith("sr1:") for v in [contact["email"], *contact["phones"]]] == [True] * 3
