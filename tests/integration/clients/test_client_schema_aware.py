"""Schema-aware encryption through the client library against a real registry (Apicurio) and a real broker.

For Avro, JSON Schema and Protobuf: records produced with confluent-kafka's serializers are encrypted by
the EncryptingProducer (tagged fields sealed, the rest untouched, same schema id), still read with that
schema id, come back exact from the DecryptingConsumer, and an erased subject's fields read as the
post-erasure policy says. Bad input (no magic byte, unknown schema id, payload not matching its schema, a
tagged non-string field, the registry down mid-stream) gets a clear outcome under each failure policy and
never reaches the encrypted topic in plaintext.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from client_kit import ClientEnv, poll_all
from confluent_kafka.schema_registry import Schema

from strongroom.clients.errors import DecryptFailed, RecordRejected
from strongroom.clients.producer import ProduceOutcome, ProducerRecord
from strongroom.clients.records import MessageStatus
from strongroom.keys.erasure import erase
from strongroom.schemas.errors import RegistryUnavailable
from strongroom.schemas.registry import RegistrySettings, SchemaRegistry
from strongroom.schemas.wire import frame
from strongroom.testing.forwarder import TcpForwarder
from strongroom.testing.schema_formats import (
    AVRO_SCHEMA,
    avro_payload,
    bad_schema_records,
    customer_events,
    make_format,
    registry_client,
)
from strongroom.testing.schema_registry import SchemaRegistryServer

SCHEMA_MARKER = ("strongroom.enc", b"\x01\x03")


def schema_rule(topic: str, **extra: Any) -> dict[str, Any]:
    return {"rules": [{"topic": topic, "mode": "schema", **extra}]}


@pytest.mark.parametrize("fmt", ["avro", "json", "protobuf"])
def test_tagged_fields_sealed_in_place_read_back_exact_and_erased_by_policy(
    client_env: ClientEnv, schema_registry: SchemaRegistryServer, fmt: str
) -> None:
    env = client_env
    topic = env.new_topic(partitions=2)
    serde = make_format(fmt, registry_client(schema_registry.url), topic)
    registry = SchemaRegistry(schema_registry.url)
    # Avro takes the subject from a field of the record; the others from the key
    subject = {"subject": {"source": "json", "path": "$.customer_id"}} if fmt == "avro" else {}
    rules = schema_rule(topic, **subject)
    events = customer_events(12, 4)
    values = [serde.serialize(e) for e in events]
    producer = env.producer(rules, schema_registry=registry)
    outcomes = producer.produce_batch(
        [ProducerRecord(topic, v, key=e["customer_id"].encode()) for e, v in zip(events, values, strict=True)]
    )
    assert outcomes == [ProduceOutcome.ENCRYPTED] * 12
    producer.flush(30)

    wire = env.read_raw(f"{topic}.enc", expect=12)
    assert len(wire) == 12
    originals = {e["sku"]: e for e in events}
    schema_ids = {v[:5] for v in values}
    for msg in wire:
        value = msg.value()
        assert value[:5] in schema_ids, "same magic byte and schema id"
        assert msg.headers()[0] == SCHEMA_MARKER
        record = serde.deserialize(value)  # still reads with its schema
        original = originals[record["sku"]]
        assert record["email"].startswith("sr1:")
        assert record["name"].startswith("sr1:")
        assert b"@example.com" not in value
        assert b"Customer " not in value
        assert {k: record[k] for k in ("customer_id", "sku", "qty")} == {
            k: original[k] for k in ("customer_id", "sku", "qty")
        }

    consumer = env.consumer(rules, schema_registry=registry)
    consumer.subscribe([f"{topic}.enc"])
    got = poll_all(consumer, 12)
    assert len(got) == 12
    for msg in got:
        assert msg.status is MessageStatus.DECRYPTED
        assert serde.deserialize(msg.value) == originals[serde.deserialize(msg.value)["sku"]]

    victim = "cust-1"
    erase(env.client, [victim], reason="GDPR art. 17", topic=env.keys_topic)
    after = env.consumer(rules, schema_registry=registry)
    after.subscribe([f"{topic}.enc"])
    got = poll_all(after, 12)
    assert len(got) == 12
    for msg in got:
        record = serde.deserialize(msg.value)
        original = originals[record["sku"]]
        if original["customer_id"] == victim:
            assert msg.erased_fields
            # email is a plain string: empty; name allows null (Avro union, JSON type list, proto3 optional)
            assert record["email"] == ""
            assert record.get("name") is None
            assert record["qty"] == original["qty"]
        else:
            assert record == original
            assert not msg.erased_fields
    assert after.metrics()["erased_fields"] == 3


def test_bad_input_is_rejected_by_the_producer_fail_or_dead_letter_never_sealed_half(
    client_env: ClientEnv, schema_registry: SchemaRegistryServer
) -> None:
    env = client_env
    topic = env.new_topic()
    bad = bad_schema_records(schema_registry.url, topic)
    registry = SchemaRegistry(schema_registry.url)
    failing = env.producer(schema_rule(topic), schema_registry=registry)
    for problem, value in bad.items():
        with pytest.raises(RecordRejected, match=re.escape(problem)):
            failing.produce(topic, value, key=b"cust-0")

    dlq = env.unique_name("dlq")
    diverting = env.producer(
        schema_rule(topic, on_reject="dead-letter"), schema_registry=registry, dead_letter_topic=dlq
    )
    outcomes = [diverting.produce(topic, value, key=b"cust-0") for value in bad.values()]
    assert outcomes == [ProduceOutcome.DEAD_LETTERED] * len(bad)
    diverting.flush(30)
    dead = env.read_raw(dlq, expect=len(bad))
    assert [m.value() for m in dead] == list(bad.values()), "dead letters are the records as they came"
    for msg, problem in zip(dead, bad, strict=True):
        assert problem in dict(msg.headers())["strongroom.dead-letter.reason"].decode()
    assert env.read_raw(f"{topic}.enc", expect=0) == [], "nothing reached the encrypted topic"


def test_bad_records_in_an_encrypted_topic_fail_dead_letter_or_skip_and_are_never_delivered(
    client_env: ClientEnv, schema_registry: SchemaRegistryServer
) -> None:
    env = client_env
    topic = env.new_topic()
    encrypted = env.new_topic(prefix="enc")
    bad = bad_schema_records(schema_registry.url, topic)
    plaintext = make_format("avro", registry_client(schema_registry.url), topic).serialize(customer_events(1, 1)[0])
    bad["field $.email should be encrypted but holds plaintext"] = plaintext
    env.produce_raw(encrypted, [(b"cust-0", value, [SCHEMA_MARKER]) for value in bad.values()])
    rules = schema_rule(encrypted)
    registry = SchemaRegistry(schema_registry.url)

    failing = env.consumer(rules, schema_registry=registry)
    failing.subscribe([encrypted])
    first = next(iter(bad))
    for _ in range(2):  # the record is not skipped: the next poll fails on it again
        with pytest.raises(DecryptFailed, match=re.escape(first)) as caught:
            failing.poll(30)
        assert caught.value.offset == 0

    dlq = env.unique_name("dlq")
    diverting = env.consumer(rules, schema_registry=registry, on_failure="dead-letter", dead_letter_topic=dlq)
    diverting.subscribe([encrypted])
    assert diverting.poll(5) is None
    diverting.commit()
    dead = env.read_raw(dlq, expect=len(bad))
    assert [m.value() for m in dead] == list(bad.values())
    for msg, problem in zip(dead, bad, strict=True):
        assert problem in dict(msg.headers())["strongroom.dead-letter.reason"].decode()

    skipping = env.consumer(rules, schema_registry=registry, on_failure="skip")
    skipping.subscribe([encrypted])
    assert skipping.poll(5) is None
    assert skipping.metrics()["skipped"] == len(bad)
    assert skipping.metrics()["decrypted"] == 0


def test_registry_down_mid_stream_waits_then_stops_and_never_skips_or_guesses(
    client_env: ClientEnv, schema_registry: SchemaRegistryServer
) -> None:
    env = client_env
    topic = env.new_topic()
    client = registry_client(schema_registry.url)
    first_schema = make_format("avro", client, topic)
    event = customer_events(1, 1)[0]
    value_a = first_schema.serialize(event)
    other = {**AVRO_SCHEMA, "name": "CustomerEventV2"}
    other_id = int(client.register_schema(f"{topic}-v2-value", Schema(json.dumps(other), "AVRO")))

    value_b = frame(other_id, avro_payload(other, event))

    link = TcpForwarder(schema_registry.port)
    link.start()
    url = f"http://127.0.0.1:{link.port}/apis/ccompat/v7"
    producer = env.producer(
        schema_rule(topic), schema_registry=SchemaRegistry(RegistrySettings(url=url, outage_wait_s=2))
    )
    assert producer.produce(topic, value_a, key=b"cust-0") is ProduceOutcome.ENCRYPTED
    link.stop()  # the registry goes away mid-stream
    assert producer.produce(topic, value_a, key=b"cust-0") is ProduceOutcome.ENCRYPTED, "a known schema id is cached"
    with pytest.raises(RegistryUnavailable, match=r"unreachable for \ds while reading schema id"):
        producer.produce(topic, value_b, key=b"cust-0")
    producer.flush(30)
    wire = env.read_raw(f"{topic}.enc", expect=2)
    assert len(wire) == 2
    assert all(b"@example.com" not in m.value() for m in wire)

    down = TcpForwarder(schema_registry.port)  # refuses connections until started
    url = f"http://127.0.0.1:{down.port}/apis/ccompat/v7"
    consumer = env.consumer(
        schema_rule(topic),
        schema_registry=SchemaRegistry(RegistrySettings(url=url, outage_wait_s=1)),
        on_failure="skip",
    )
    consumer.subscribe([f"{topic}.enc"])
    with pytest.raises(RegistryUnavailable):
        consumer.poll(30)
    down.start()  # the registry is back: the same record comes, nothing was skipped
    got = poll_all(consumer, 2)
    assert [m.status for m in got] == [MessageStatus.DECRYPTED] * 2
    assert all(first_schema.deserialize(m.value) == event for m in got)
    assert consumer.metrics()["skipped"] == 0
    down.stop()
