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


ONEOF_PROTO = """
syntax = "proto3";
package demo;
import "confluent/meta.proto";

message Contact {
  string id = 1;
  optional string name = 2 [(confluent.field_meta).tags = "PII"];
  oneof reach {
    string phone = 3 [(confluent.field_meta).tags = "PII"];
    int32 extension = 4;
  }
}
"""


def test_an_unset_optional_field_or_oneof_member_is_left_unset_and_the_set_member_kept() -> None:
    keys = Keys()
    fields = fields_for(registry_with({6: ("PROTOBUF", ONEOF_PROTO)}))
    cls, _ = fields.plan(6)._proto.message([0])  # type: ignore[union-attr]
    message = cls(id="c-1", extension=42)
    value = frame(6, b"\x00" + message.SerializeToString())
    assert fields.value_count(value) == 0, "nothing present to seal"
    sealed = fields.seal(value, keys.dek, keys.ref, keys.ctx)
    out = cls()
    out.ParseFromString(sealed[6:])
    assert out.WhichOneof("reach") == "extension", "sealing the unset phone would have cleared the extension"
    assert out.extension == 42
    assert not out.HasField("name"), "an unset optional field stays unset"
    opened, _ = fields.open(sealed, keys.lookup, keys.ctx)
    back = cls()
    back.ParseFromString(opened[6:])
    assert back == message

    with_phone = cls(id="c-2", name="Ann", phone="+41 79 000")
    sealed = fields.seal(frame(6, b"\x00" + with_phone.SerializeToString()), keys.dek, keys.ref, keys.ctx)
    out = cls()
    out.ParseFromString(sealed[6:])
    assert out.phone.startswith("sr1:")
    assert out.name.startswith("sr1:")
    back = cls()
    back.ParseFromString(fields.open(sealed, keys.lookup, keys.ctx)[0][6:])
    assert back == with_phone
