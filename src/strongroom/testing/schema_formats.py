"""The three schema formats as a producer meets them: confluent-kafka's serializer and deserializer around
strongroom, the same customer-event schema in each, with ``email`` and ``name`` tagged PII. Shared by the
client-library and pipeline tests, the demo and the benchmark."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from confluent_kafka.schema_registry import SchemaRegistryClient, topic_subject_name_strategy
from confluent_kafka.serialization import MessageField, SerializationContext

if TYPE_CHECKING:
    from strongroom.schemas.registry import SchemaType

AVRO_SCHEMA = {
    "type": "record",
    "name": "CustomerEvent",
    "namespace": "shop",
    "fields": [
        {"name": "customer_id", "type": "string"},
        {"name": "email", "type": "string", "confluent:tags": ["PII"]},
        {"name": "name", "type": ["null", "string"], "default": None, "confluent:tags": ["PII"]},
        {"name": "sku", "type": "string"},
        {"name": "qty", "type": "int"},
    ],
}
JSON_SCHEMA: dict[str, Any] = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "CustomerEvent",
    "type": "object",
    "properties": {
        "customer_id": {"type": "string"},
        "email": {"type": "string", "confluent:tags": ["PII"]},
        "name": {"type": ["string", "null"], "confluent:tags": ["PII"]},
        "sku": {"type": "string"},
        "qty": {"type": "integer"},
    },
    "required": ["customer_id", "email", "sku", "qty"],
}
PROTO_SCHEMA = """syntax = "proto3";
package shop;
import "confluent/meta.proto";

message CustomerEvent {
  string customer_id = 1;
  string email = 2 [(confluent.field_meta).tags = "PII"];
  optional string name = 3 [(confluent.field_meta).tags = "PII"];
  string sku = 4;
  int32 qty = 5;
}
"""


def customer_events(n: int, customers: int) -> list[dict[str, Any]]:
    return [
        {
            "customer_id": f"cust-{i % customers}",
            "email": f"c{i}@example.com",
            "name": f"Customer {i}",
            "sku": f"SKU-{i}",
            "qty": i,
        }
        for i in range(n)
    ]


REQUEST_TIMEOUT_S = 30
"""confluent-kafka's registry client waits forever by default; a stalled request must fail the test instead."""
SERIALIZER_CONF = {"subject.name.strategy": topic_subject_name_strategy}
"""``{topic}-value`` subjects, as strongroom's docs assume. confluent-kafka 2.16's default strategy first asks
the registry for subject associations, a Confluent-only API that Apicurio does not serve."""


def avro_payload(schema: dict[str, Any], record: dict[str, Any]) -> bytes:
    """Avro payload bytes without a registry (for records the serializer would refuse to write)."""
    import io

    import fastavro

    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


def bad_schema_records(registry_url: str, topic: str, fmt: str = "avro") -> dict[str, bytes]:
    """One value per kind of bad input to a schema-mode rule (``fmt``: ``avro`` or ``json``, the format of the
    records that are not framed wrongly), each keyed by what a reader should be told."""
    from confluent_kafka.schema_registry import Schema

    from strongroom.schemas.wire import frame

    client = registry_client(registry_url)
    event = customer_events(1, 1)[0]
    good = make_format(fmt, client, topic).serialize(event)
    common = {
        "not the Confluent magic byte": json.dumps({"email": "c0@example.com"}).encode(),
        "does not know schema id 987654": frame(987654, good[5:]),
    }
    if fmt == "json":
        ssn = {"type": "integer", "confluent:tags": ["PII"]}
        properties: dict[str, Any] = {**JSON_SCHEMA["properties"], "ssn": ssn}
        with_tagged_int: dict[str, Any] = {**JSON_SCHEMA, "properties": properties}
        tagged_id = int(client.register_schema(f"{topic}-bad-value", Schema(json.dumps(with_tagged_int), "JSON")))
        return common | {
            "is not usable JSON": good[:5] + b'{"customer_id": ',
            "payload does not match JSON Schema schema id": good[:5] + json.dumps({**event, "qty": "two"}).encode(),
            "at $.email: type failed": good[:5] + json.dumps({**event, "email": 42}).encode(),
            "field $.ssn of schema id": frame(tagged_id, json.dumps({**event, "ssn": 123456789}).encode()),
        }
    tagged_int: dict[str, Any] = {**AVRO_SCHEMA, "name": "WithTaggedInt"}
    tagged_int["fields"] = [*AVRO_SCHEMA["fields"], {"name": "ssn", "type": "long", "confluent:tags": ["PII"]}]
    tagged_id = int(client.register_schema(f"{topic}-bad-value", Schema(json.dumps(tagged_int), "AVRO")))
    return common | {
        "does not read as Avro schema id": good[:5] + b"\x02",
        "field $.ssn of schema id": frame(
            tagged_id, avro_payload(tagged_int, {**event, "name": None, "ssn": 123456789})
        ),
    }


def registry_client(url: str) -> SchemaRegistryClient:
    """confluent-kafka's registry client for a test, with a request timeout."""
    return SchemaRegistryClient({"url": url, "timeout": REQUEST_TIMEOUT_S})


@dataclass
class Format:
    """One format: serialize a dict to the Confluent wire format and read it back (with the registry)."""

    name: str
    serialize: Callable[[dict[str, Any]], bytes]
    deserialize: Callable[[bytes], dict[str, Any]]


def make_format(name: str, client: SchemaRegistryClient, topic: str) -> Format:
    ctx = SerializationContext(topic, MessageField.VALUE)
    if name == "avro":
        from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer

        avro_out = AvroSerializer(client, json.dumps(AVRO_SCHEMA), conf=SERIALIZER_CONF)
        avro_in = AvroDeserializer(client)
        return Format(name, lambda d: bytes(avro_out(d, ctx)), lambda b: dict(avro_in(b, ctx)))
    if name == "json":
        from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer

        json_out = JSONSerializer(json.dumps(JSON_SCHEMA), client, conf=SERIALIZER_CONF)
        json_in = JSONDeserializer(json.dumps(JSON_SCHEMA))
        return Format(name, lambda d: bytes(json_out(d, ctx)), lambda b: dict(json_in(b, ctx)))
    return _protobuf(client, ctx)


def _protobuf(client: SchemaRegistryClient, ctx: SerializationContext) -> Format:
    """Protobuf: the message class compiled from the same .proto text (protoc, as strongroom does).

    Reading back parses the payload after the frame and message indexes with that class: confluent-kafka's
    ProtobufDeserializer asks the registry for ``?format=serialized``, which Apicurio does not serve."""
    from confluent_kafka.schema_registry import Schema
    from google.protobuf import descriptor_pool, json_format, message_factory

    from strongroom.schemas.protobuf_format import compile_proto, split_indexes
    from strongroom.schemas.wire import frame, unframe

    compiled = compile_proto({"customer.proto": PROTO_SCHEMA}, "customer.proto")
    pool = descriptor_pool.DescriptorPool()
    for file_proto in compiled.file:
        pool.Add(file_proto)
    cls = message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.CustomerEvent"))
    schema_id = client.register_schema(f"{ctx.topic}-value", Schema(PROTO_SCHEMA, "PROTOBUF"))

    def serialize(d: dict[str, Any]) -> bytes:
        return frame(schema_id, b"\x00" + cls(**d).SerializeToString())

    def deserialize(b: bytes) -> dict[str, Any]:
        framed = unframe(b)
        assert framed.schema_id == schema_id
        _, start = split_indexes(framed.payload)
        message = cls()
        message.ParseFromString(framed.payload[start:])
        out: dict[str, Any] = json_format.MessageToDict(
            message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
        )
        out["qty"] = int(out.get("qty", 0))
        return out

    return Format("protobuf", serialize, deserialize)


def sealed_avro_record(
    key_id: bytes, dek: bytes, *, subject: bytes = b"cust-0", topic: str = "customers.enc", schema_id: int = 1
) -> tuple[list[tuple[str, bytes | None]], bytes]:
    """A customer event as strongroom's schema mode writes it (``email`` and ``name`` sealed under the subject
    key ``key_id``, the marker header 0x01 0x03), without a registry (the schema is preloaded)."""
    payload = avro_payload(AVRO_SCHEMA, customer_events(1, 1)[0])
    return _sealed("AVRO", json.dumps(AVRO_SCHEMA), schema_id, payload, key_id, dek, topic, subject)


def _sealed(
    schema_type: SchemaType,
    text: str,
    schema_id: int,
    payload: bytes,
    key_id: bytes,
    dek: bytes,
    topic: str,
    subject: bytes,
) -> tuple[list[tuple[str, bytes | None]], bytes]:
    """``payload`` framed with ``schema_id`` and its PII fields sealed by schema mode under the subject key
    ``key_id``, the schema preloaded into a registry that is never asked; with the marker header."""
    from strongroom.envelope import RecordContext, ValueMode, marker_header
    from strongroom.envelope.keyref import SubjectKeyRef
    from strongroom.schemas.fields import Selection
    from strongroom.schemas.registry import RegisteredSchema, SchemaRegistry
    from strongroom.schemas.sealing import SchemaFields
    from strongroom.schemas.wire import frame

    registry = SchemaRegistry("http://127.0.0.1:9/never-asked")
    registry.preload(schema_id, RegisteredSchema(schema_type, text))
    fields = SchemaFields(registry, Selection(frozenset({"PII"})))
    sealed = fields.seal(frame(schema_id, payload), dek, SubjectKeyRef(key_id), RecordContext(topic, subject))
    return [marker_header(ValueMode.SCHEMA_FIELDS)], sealed


#: A scan record whose only PII is binary: a tagged ``photo`` and ``thumb``, nothing tagged that is a string.
BYTES_AVRO_SCHEMA = {
    "type": "record",
    "name": "Scan",
    "namespace": "clinic",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "photo", "type": "bytes", "confluent:tags": ["PII"]},
        {"name": "n", "type": "long"},
        {"name": "thumb", "type": ["null", "bytes"], "default": None, "confluent:tags": ["PII"]},
    ],
}
BYTES_PROTO_SCHEMA = """syntax = "proto3";
package clinic;
import "confluent/meta.proto";

message Scan {
  string id = 1;
  bytes photo = 2 [(confluent.field_meta).tags = "PII"];
  int64 n = 3;
  bytes thumb = 4 [(confluent.field_meta).tags = "PII"];
}
"""


def _proto_field(number: int, data: bytes) -> bytes:
    """One length-delimited Protobuf field (wire type 2): tag, varint length, bytes."""
    from strongroom.recovery.formats.kroxylicious import write_uvarint

    return bytes(((number << 3) | 2,)) + write_uvarint(len(data)) + data


def sealed_bytes_record(
    schema_format: str,
    key_id: bytes,
    dek: bytes,
    *,
    photo: bytes,
    thumb: bytes,
    n: int = 7,
    schema_id: int = 2,
    topic: str = "scans.enc",
    subject: bytes = b"p-1",
) -> tuple[list[tuple[str, bytes | None]], bytes]:
    """A scan record (Avro or Protobuf) as schema mode writes it: ``photo`` and ``thumb`` sealed as raw
    envelopes under the subject key ``key_id``, no sealed string field; the schema is preloaded."""
    if schema_format == "avro":
        payload = avro_payload(BYTES_AVRO_SCHEMA, {"id": "scan-1", "photo": photo, "n": n, "thumb": thumb})
        return _sealed("AVRO", json.dumps(BYTES_AVRO_SCHEMA), schema_id, payload, key_id, dek, topic, subject)
    from strongroom.recovery.formats.kroxylicious import write_uvarint

    number = bytes((3 << 3,)) + write_uvarint(n)  # int64 n = 3 (varint)
    payload = b"\x00" + _proto_field(1, b"scan-1") + _proto_field(2, photo) + number + _proto_field(4, thumb)
    return _sealed("PROTOBUF", BYTES_PROTO_SCHEMA, schema_id, payload, key_id, dek, topic, subject)
