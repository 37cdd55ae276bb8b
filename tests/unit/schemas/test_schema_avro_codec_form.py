"""Avro payloads are read and written in the schema's codec form: what the rule does not seal comes back byte for
byte, and a boolean byte other than 0 or 1 is refused (``schemas.avro_format.codec_form``; the JVM reads alike)."""

from __future__ import annotations

import io
from typing import Any

import fastavro
import pytest
from schema_kit import Keys, fields_for, frame, registry_with

from strongroom.schemas.avro_format import codec_form
from strongroom.schemas.errors import PayloadMismatch

SCHEMA_ID = 9
EVENT: dict[str, Any] = {
    "type": "record",
    "name": "Event",
    "namespace": "shop",
    "fields": [
        {"name": "email", "type": "string", "confluent:tags": ["PII"]},
        {"name": "uid", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "vip", "type": "boolean", "default": False},
        {"name": "flag", "type": ["null", "boolean", "bytes"], "default": None},
        {"name": "flags", "type": {"type": "map", "values": "boolean"}},
        {"name": "tier", "type": ["null", {"type": "enum", "name": "Tier", "symbols": ["GOLD", "SILVER"]}]},
    ],
}
#: The same fields without logical types: what a producer whose library does not check them writes.
UNDERLYING: dict[str, Any] = {
    **EVENT,
    "fields": [
        {**field, "type": field["type"]["type"]} if isinstance(field["type"], dict) and "logicalType" in field["type"]
        else field
        for field in EVENT["fields"]
    ],
}  # fmt: skip


def _payload(**values: Any) -> bytes:
    record = {"email": "ann@example.com", "uid": "0b7a3f2e-9c1d-4e5f-8a6b-1c2d3e4f5a6b", "amount": b"\x30\x39",
              "at": 1_700_000_000_000, "vip": True, "flag": None, "flags": {"a": True, "b": False},
              "tier": "GOLD"}  # fmt: skip
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(UNDERLYING), record | values)
    return frame(SCHEMA_ID, out.getvalue())


def _untagged(value: bytes) -> bytes:
    """The payload after the sealed ``email`` (its first field): everything the rule leaves alone."""
    reader = io.BytesIO(value[5:])
    fastavro.schemaless_reader(reader, fastavro.parse_schema({"type": "record", "name": "E", "fields": [
        {"name": "email", "type": "string"}]}), None)  # fmt: skip
    return value[5 + reader.tell() :]


@pytest.mark.parametrize(
    "values",
    [
        {"uid": "0B7A3F2E-9C1D-4E5F-8A6B-1C2D3E4F5A6B"},  # read as a UUID, this came back in lower case
        {"uid": "not-a-uuid"},  # read as a UUID, this stopped the record
        {"amount": b"\x00\x00\x30\x39"},  # a decimal's bytes with leading zeros
        {"flag": b"\x01"},  # one byte in the bytes branch of a union that also holds a boolean
        {"flag": True, "vip": False, "flags": {}},
        {"tier": None},
    ],
)
def test_what_the_rule_does_not_seal_comes_back_byte_for_byte(values: dict[str, Any]) -> None:
    keys = Keys()
    fields = fields_for(registry_with({SCHEMA_ID: ("AVRO", EVENT)}))
    value = _payload(**values)
    sealed = fields.seal(value, keys.dek, keys.ref, keys.ctx)
    assert _untagged(sealed) == _untagged(value)
    assert b"ann@example.com" not in sealed
    assert fields.open(sealed, keys.lookup, keys.ctx) == (value, False)


@pytest.mark.parametrize("byte", [b"\x02", b"\xec", b"\xff"])
def test_a_boolean_byte_other_than_0_or_1_is_a_payload_mismatch(byte: bytes) -> None:
    keys = Keys()
    fields = fields_for(registry_with({SCHEMA_ID: ("AVRO", EVENT)}))
    good = _payload(vip=True, flag=None, flags={}, tier=None)
    assert good.count(b"\x01") == 1  # the vip byte: the only 0x01 of this payload
    bad = good.replace(b"\x01", byte)
    with pytest.raises(PayloadMismatch):
        fields.seal(bad, keys.dek, keys.ref, keys.ctx)
    sealed = fields.seal(good, keys.dek, keys.ref, keys.ctx)
    vip = sealed.rindex(b"\x01\x00\x00\x00")  # vip, the flag's null branch, an empty map, the tier's null branch
    with pytest.raises(PayloadMismatch):
        fields.open(sealed[:vip] + byte + sealed[vip + 1 :], keys.lookup, keys.ctx)


def test_a_value_of_a_logical_type_is_no_data_subject() -> None:
    fields = fields_for(registry_with({SCHEMA_ID: ("AVRO", EVENT)}), subject_path="$.uid")
    assert fields.subject(_payload(), "$.uid") is None  # as the JVM decides, and as fastavro's UUID was before
    assert fields.subject(_payload(uid="not-a-uuid"), "$.uid") is None
    assert fields.subject(_payload(), "$.at") is None
    assert fields.subject(_payload(tier="SILVER"), "$.tier") == "SILVER"  # an enum's symbol is one
    assert fields_for(registry_with({SCHEMA_ID: ("AVRO", UNDERLYING)})).subject(_payload(), "$.uid") == (
        "0b7a3f2e-9c1d-4e5f-8a6b-1c2d3e4f5a6b"
    )


def test_the_codec_form_names_each_boolean_apart_and_keeps_field_names() -> None:
    form = codec_form({"type": "record", "name": "R", "fields": [
        {"name": "boolean", "type": "boolean", "default": True},
        {"name": "u", "type": ["null", {"type": "boolean"}]},
        {"name": "a", "type": {"type": "array", "items": "boolean"}},
    ]})  # fmt: skip
    fields = form["fields"]
    assert [f["name"] for f in fields] == ["boolean", "u", "a"]
    assert "default" not in fields[0]
    names = [fields[0]["type"]["name"], fields[1]["type"][1]["name"], fields[2]["type"]["items"]["name"]]
    assert len(set(names)) == 3
    assert fields[1]["type"][0] == "null"
    fastavro.parse_schema(form)  # a schema fastavro reads


FLOATS: dict[str, Any] = {
    "type": "record",
    "name": "Reading",
    "fields": [
        {"name": "email", "type": "string", "confluent:tags": ["PII"]},
        {"name": "f", "type": "float"},
        {"name": "d", "type": "double"},
        {"name": "u", "type": ["null", "float", "bytes"]},
        {"name": "fs", "type": {"type": "array", "items": "float"}},
    ],
}


@pytest.mark.parametrize(
    "f",
    [b"\x01\x00\x80\x7f", b"\x01\x00\xc0\xff", b"\x00\x00\x00\x80", b"\x00\x00\x80\x3f"],  # signalling NaN, NaN, -0, 1
)
def test_a_float_comes_back_bit_for_bit(f: bytes) -> None:
    """A Python float is a double: read as one, a signalling NaN float came back quieted (0x7f800001 as
    0x7fc00001). The codec form keeps a float's four bytes, in a union too, and never takes a four-byte bytes value
    of the same union for one."""
    keys = Keys()
    fields = fields_for(registry_with({SCHEMA_ID: ("AVRO", FLOATS)}))
    d = b"\x01\x00\x00\x00\x00\x00\xf0\x7f"  # a signalling NaN double (a Python float holds it as it is)
    for union in (b"\x02" + f, b"\x04\x08" + f):  # the float branch, then four bytes in the bytes branch
        value = frame(SCHEMA_ID, b"\x06a@b" + f + d + union + b"\x04" + f + f + b"\x00")
        sealed = fields.seal(value, keys.dek, keys.ref, keys.ctx)
        assert sealed.endswith(value[5 + 4 :])
        assert fields.open(sealed, keys.lookup, keys.ctx) == (value, False)
