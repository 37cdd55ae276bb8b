"""Helpers of the schema-aware unit tests: schemas, a registry client that knows them, framed payloads."""

from __future__ import annotations

import io
import json
import os
from typing import Any

import fastavro

from strongroom.envelope.aad import RecordContext
from strongroom.envelope.keyref import SubjectKeyRef
from strongroom.schemas.fields import Selection
from strongroom.schemas.registry import RegisteredSchema, SchemaRegistry
from strongroom.schemas.sealing import SchemaFields
from strongroom.schemas.wire import frame

#: Nothing listens here: a registry client that must never be asked (every schema is preloaded).
UNREACHABLE = "http://127.0.0.1:9/apis/ccompat/v7"

CUSTOMER_AVRO: dict[str, Any] = {
    "type": "record",
    "name": "Customer",
    "namespace": "demo",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "email", "type": "string", "confluent:tags": ["PII"]},
        {"name": "name", "type": ["null", "string"], "default": None, "confluent:tags": ["PII"]},
        {"name": "photo", "type": "bytes", "confluent:tags": ["PII"]},
        {"name": "phones", "type": {"type": "array", "items": "string"}, "confluent:tags": ["PII"]},
        {"name": "notes", "type": {"type": "map", "values": "string"}, "confluent:tags": ["SECRET"]},
        {
            "name": "address",
            "type": [
                "null",
                {
                    "type": "record",
                    "name": "Address",
                    "fields": [
                        {"name": "street", "type": "string", "confluent:tags": ["PII"]},
                        {"name": "city", "type": "string"},
                    ],
                },
            ],
            "default": None,
        },
        {"name": "age", "type": "int"},
    ],
}

CUSTOMER = {
    "id": "c-1",
    "email": "ann@example.com",
    "name": "Ann",
    "photo": b"\x89PNG",
    "phones": ["+1 555", "+1 556"],
    "notes": {"vip": "yes"},
    "address": {"street": "1 Main St", "city": "Springfield"},
    "age": 41,
}


def avro_bytes(schema: dict[str, Any], record: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


def avro_read(schema: dict[str, Any], value: bytes) -> Any:
    return fastavro.schemaless_reader(io.BytesIO(value[5:]), fastavro.parse_schema(schema), None)


def registry_with(schemas: dict[int, tuple[str, Any]]) -> SchemaRegistry:
    registry = SchemaRegistry(UNREACHABLE)
    for schema_id, (kind, text) in schemas.items():
        registry.preload(schema_id, RegisteredSchema(kind, text if isinstance(text, str) else json.dumps(text)))  # type: ignore[arg-type]
    return registry


def fields_for(registry: SchemaRegistry, tags: set[str] | None = None, paths: tuple[str, ...] = (),
               subject_path: str | None = None) -> SchemaFields:  # fmt: skip
    return SchemaFields(
        registry, Selection(frozenset({"PII"} if tags is None else tags), paths), subject_path=subject_path
    )


class Keys:
    """A subject key and its context: what the producer seals with and the consumer opens with."""

    def __init__(self, topic: str = "customers.enc", subject: bytes = b"c-1") -> None:
        self.dek = os.urandom(32)
        self.ref = SubjectKeyRef(os.urandom(16))
        self.ctx = RecordContext(topic, subject)

    def lookup(self, ref: Any) -> bytes:
        assert ref == self.ref
        return self.dek


__all__ = ["frame"]
