"""Protobuf records: descriptors compiled from the registry's .proto text, (confluent.field_meta).tags honoured."""

from __future__ import annotations

import pytest
from schema_kit import Keys, fields_for, frame, registry_with

from strongroom.schemas.errors import PayloadMismatch, TaggedFieldType, UnsupportedSchema

PROTO = """
syntax = "proto3";
package demo;
import "confluent/meta.proto";
import "google/protobuf/timestamp.proto";

message Customer {
  string id = 1;
  string email = 2 [(confluent.field_meta).tags = "PII"];
  repeated Address addresses = 3;
  map<string, string> notes = 4 [(confluent.field_meta) = {tags: ["PII"]}];
  bytes photo = 5 [(confluent.field_meta).tags = "PII"];
  google.protobuf.Timestamp seen = 6;
  Address billing = 7;
  int32 age = 8;
}
message Address {
  string street = 1 [(confluent.field_meta).tags = "PII"];
  string city = 2;
}
"""


def test_round_trip_keeps_indexes_and_untagged_fields() -> None:
    keys = Keys()
    fields = fields_for(registry_with({5: ("PROTOBUF", PROTO)}))
    cls, _ = fields.plan(5)._proto.message([0])  # type: ignore[union-attr]
    message = cls(id="c-1", email="ann@example.com", photo=b"\x89PNG", age=41)
    message.addresses.add(street="1 Main St", city="Springfield")
    message.notes["vip"] = "yes"
    value = frame(5, b"\x00" + message.SerializeToString())
    sealed = fields.seal(value, keys.dek, keys.ref, keys.ctx)
    assert sealed[:6] == value[:6]
    out = cls()
    out.ParseFromString(sealed[6:])
    assert out.email.startswith("sr1:")
    assert out.addresses[0].street.startswith("sr1:")
    assert out.notes["vip"].startswith("sr1:")
    assert out.photo[:1] == b"\xf5"
    assert (out.id, out.addresses[0].city, out.age) == ("c-1", "Springfield", 41)
    assert not out.HasField("billing"), "an unset message stays unset"
    opened, erased = fields.open(sealed, keys.lookup, keys.ctx)
    back = cls()
    back.ParseFromString(opened[6:])
    assert back == message
    assert not erased


def test_a_tagged_int_field_is_named() -> None:
    bad = PROTO.replace("int32 age = 8;", 'int32 age = 8 [(confluent.field_meta).tags = "PII"];')
    with pytest.raises(TaggedFieldType, match=r"field \$\.age .* of type int32"):
        fields_for(registry_with({5: ("PROTOBUF", bad)})).plan(5).read(b"\x00", validate=False)


def test_unknown_fields_and_broken_schemas_are_refused() -> None:
    keys = Keys()
    fields = fields_for(registry_with({5: ("PROTOBUF", PROTO), 6: ("PROTOBUF", "syntax = 'proto3'; message {")}))
    unknown_field_99 = b"\x00" + b"\x9a\x06\x03abc"  # field 99, length-delimited
    with pytest.raises(PayloadMismatch, match="unknown fields"):
        fields.seal(frame(5, unknown_field_99), keys.dek, keys.ref, keys.ctx)
    with pytest.raises(UnsupportedSchema, match="protoc cannot compile"):
        fields.plan(6)
