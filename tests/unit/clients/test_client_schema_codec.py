"""The client codec in schema mode: the rule, the registry hook, the marker and the failure outcomes."""

from __future__ import annotations

import io
import json
import os
from typing import Any

import fastavro
import pytest

from strongroom.clients.records import NoSubject
from strongroom.clients.sealing import Erased, Failed, Opened, Passthrough, Rejected, RuleCodec, seal_record
from strongroom.envelope import SubjectErased, SubjectKeyRef
from strongroom.errors import ConfigError
from strongroom.rules import EncryptionRules, TopicRule
from strongroom.schemas.registry import RegisteredSchema, SchemaRegistry
from strongroom.schemas.wire import frame

KEY_ID = bytes(range(16))
DEK = os.urandom(32)
SCHEMA = {
    "type": "record",
    "name": "Event",
    "fields": [
        {"name": "customer", "type": "string"},
        {"name": "email", "type": "string", "confluent:tags": ["PII"]},
        {"name": "card", "type": "string", "confluent:tags": ["PCI"]},
    ],
}
EVENT = {"customer": "cust-7", "email": "ann@example.com", "card": "4111"}


def registry() -> SchemaRegistry:
    client = SchemaRegistry("http://127.0.0.1:9/apis/ccompat/v7")  # never asked: the schema is preloaded
    client.preload(11, RegisteredSchema("AVRO", json.dumps(SCHEMA)))
    return client


def value_of(event: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(SCHEMA), event)
    return frame(11, out.getvalue())


def read(value: bytes) -> dict[str, Any]:
    return dict(fastavro.schemaless_reader(io.BytesIO(value[5:]), fastavro.parse_schema(SCHEMA), None))


def rule(**extra: Any) -> TopicRule:
    return TopicRule.model_validate({"topic": "events", "mode": "schema", **extra})


def available(ref: SubjectKeyRef, subject: str) -> bytes:
    return DEK


def test_schema_rules_validate_themselves() -> None:
    assert rule().selected_tags == {"PII"}
    assert rule(tags=["PCI", "PII"]).selected_tags == {"PCI", "PII"}
    with pytest.raises(ConfigError, match="names tags but mode is 'fields'"):
        EncryptionRules.parse_obj_or_fail(
            {"rules": [{"topic": "t", "mode": "fields", "fields": ["$.a"], "tags": ["PII"]}]}
        )
    with pytest.raises(ConfigError, match="selects no tags and no fields"):
        EncryptionRules.parse_obj_or_fail({"rules": [{"topic": "t", "mode": "schema", "tags": []}]})
    with pytest.raises(ConfigError, match="the Spark pipelines does not handle yet"):
        rule().require_not_schema("the Spark pipelines")


def test_a_schema_rule_without_a_registry_is_a_configuration_error() -> None:
    with pytest.raises(ConfigError, match="schema mode but no schema registry was given"):
        RuleCodec(rule())


def test_seal_then_open_with_the_schema_marker() -> None:
    codec = RuleCodec(rule(tags=["PII", "PCI"]), schema_registry=registry())
    sealed = seal_record(codec, value_of(EVENT), [("trace", b"1")], "events.enc", "cust-7", (KEY_ID, DEK), 1 << 20)
    assert not isinstance(sealed, Rejected)
    assert sealed is not None
    assert sealed.headers == [("strongroom.enc", b"\x01\x03"), ("trace", b"1")]
    record = read(sealed.value)
    assert record["customer"] == "cust-7"
    assert record["email"].startswith("sr1:")
    assert record["card"].startswith("sr1:")
    opened = RuleCodec(rule(tags=["PII", "PCI"]), schema_registry=registry(), encrypted_only=True).open(
        b"cust-7", sealed.value, sealed.headers, "events.enc", available
    )
    assert isinstance(opened, Opened)
    assert opened.value == value_of(EVENT)
    assert opened.headers == [("trace", b"1")]
    assert not opened.erased_fields


def test_a_schema_record_charges_one_seal_per_tagged_field() -> None:
    assert RuleCodec(rule(tags=["PII", "PCI"]), schema_registry=registry()).seal_count(value_of(EVENT)) == 2
    assert RuleCodec(rule(), schema_registry=registry()).seal_count(value_of(EVENT)) == 1
    # not schema-registry framed: rejected when sealed, so it counts one
    assert RuleCodec(rule(), schema_registry=registry()).seal_count(b"plain") == 1
    # tagged array items: counted in the record
    phones = {
        "type": "record",
        "name": "Contact",
        "fields": [{"name": "phones", "type": {"type": "array", "items": "string"}, "confluent:tags": ["PII"]}],
    }
    with_phones = registry()
    with_phones.preload(12, RegisteredSchema("AVRO", json.dumps(phones)))
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(phones), {"phones": ["1", "2", "3"]})
    codec = RuleCodec(rule(), schema_registry=with_phones)
    assert codec.seal_count(frame(12, out.getvalue())) == 3
    sealed = seal_record(codec, frame(12, out.getvalue()), [], "events.enc", "cust-7", (KEY_ID, DEK), 1 << 20)
    assert sealed is not None
    assert not isinstance(sealed, Rejected)
    written = fastavro.schemaless_reader(io.BytesIO(sealed.value[5:]), fastavro.parse_schema(phones), None)
    assert [p.startswith("sr1:") for p in written["phones"]] == [True] * 3  # type: ignore[index,union-attr]


def test_subject_from_a_field_of_the_record() -> None:
    codec = RuleCodec(rule(subject={"source": "json", "path": "$.customer"}), schema_registry=registry())
    assert codec.subject(None, value_of(EVENT), []) == "cust-7"
    missing = codec.subject(None, b"{}", [])
    assert isinstance(missing, NoSubject)
    assert "field path $.customer cannot be read" in missing.reason


def test_bad_values_are_rejected_and_failed_never_passed_on() -> None:
    codec = RuleCodec(rule(), schema_registry=registry())
    rejected = seal_record(codec, b'{"email": "x"}', [], "events.enc", "cust-7", (KEY_ID, DEK), 1 << 20)
    assert isinstance(rejected, Rejected)
    assert "magic byte" in rejected.reason
    assert "(schema mode)" in rejected.reason
    marker = [("strongroom.enc", b"\x01\x03")]
    plaintext = codec.open(b"cust-7", value_of(EVENT), marker, "events.enc", available)
    assert isinstance(plaintext, Failed)
    assert "should be encrypted but holds plaintext" in plaintext.reason
    unmarked = RuleCodec(rule(), schema_registry=registry(), encrypted_only=True)
    assert isinstance(unmarked.open(b"cust-7", value_of(EVENT), [], "events.enc", available), Failed)
    lenient = RuleCodec(rule(), schema_registry=registry(), encrypted_only=False)
    assert isinstance(lenient.open(b"cust-7", value_of(EVENT), [], "events.enc", available), Passthrough)


def test_an_erased_subject_reads_with_empty_fields_and_says_so() -> None:
    codec = RuleCodec(rule(), schema_registry=registry())
    sealed = seal_record(codec, value_of(EVENT), [], "events.enc", "cust-7", (KEY_ID, DEK), 1 << 20)
    assert sealed is not None
    assert not isinstance(sealed, Rejected)

    def erased(ref: SubjectKeyRef, subject: str) -> bytes:
        raise SubjectErased("erased")

    opened = codec.open(b"cust-7", sealed.value, sealed.headers, "events.enc", erased)
    assert isinstance(opened, Opened)
    assert not isinstance(opened, Erased)
    assert opened.erased_fields
    assert read(opened.value) == {**EVENT, "email": ""}
