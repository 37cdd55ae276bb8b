"""Avro records: tagged fields sealed in place, the record still valid for its schema id, opened back."""

from __future__ import annotations

import base64
import copy
import io
from typing import Any

import fastavro
import pytest
from schema_kit import CUSTOMER, CUSTOMER_AVRO, Keys, avro_bytes, avro_read, fields_for, frame, registry_with

from strongroom.envelope.codec import parse
from strongroom.envelope.errors import IntegrityError, UnencryptedField
from strongroom.schemas.errors import PayloadMismatch, TaggedFieldType, UnknownFieldPath

SCHEMA_ID = 7


def sealed_customer(keys: Keys, tags: set[str] | None = None, paths: tuple[str, ...] = ()) -> tuple[bytes, bytes]:
    fields = fields_for(registry_with({SCHEMA_ID: ("AVRO", CUSTOMER_AVRO)}), tags, paths)
    value = frame(SCHEMA_ID, avro_bytes(CUSTOMER_AVRO, CUSTOMER))
    return value, fields.seal(value, keys.dek, keys.ref, keys.ctx)


def test_tagged_fields_are_sealed_the_rest_untouched_and_the_schema_id_kept() -> None:
    keys = Keys()
    _, sealed = sealed_customer(keys)
    assert sealed[:5] == frame(SCHEMA_ID, b"")
    record = avro_read(CUSTOMER_AVRO, sealed)  # still reads with the same schema
    for name in ("email", "name"):
        assert record[name].startswith("sr1:")
        assert parse(base64.b64decode(record[name][4:])).key_ref == keys.ref
    assert all(p.startswith("sr1:") for p in record["phones"])  # a tagged array of strings: every item
    assert record["address"]["street"].startswith("sr1:")
    assert parse(record["photo"]).key_ref == keys.ref  # bytes hold the raw envelope
    untouched = {k: record[k] for k in ("id", "notes", "age")} | {"city": record["address"]["city"]}
    assert untouched == {"id": "c-1", "notes": {"vip": "yes"}, "age": 41, "city": "Springfield"}
    assert b"ann@example.com" not in sealed
    assert b"1 Main St" not in sealed
    assert b"\x89PNG" not in sealed


def test_open_gives_back_the_exact_record() -> None:
    keys = Keys()
    value, sealed = sealed_customer(keys)
    fields = fields_for(registry_with({SCHEMA_ID: ("AVRO", CUSTOMER_AVRO)}))
    assert fields.open(sealed, keys.lookup, keys.ctx) == (value, False)


def test_erased_fields_read_as_null_where_the_type_allows_else_empty() -> None:
    keys = Keys()
    _, sealed = sealed_customer(keys)
    fields = fields_for(registry_with({SCHEMA_ID: ("AVRO", CUSTOMER_AVRO)}))
    opened, erased = fields.open(sealed, lambda ref: None, keys.ctx)
    assert erased
    record = avro_read(CUSTOMER_AVRO, opened)
    assert (record["email"], record["name"], record["photo"], record["phones"]) == ("", None, b"", ["", ""])
    assert record["address"] == {"street": "", "city": "Springfield"}
    assert record["id"] == "c-1"


def test_another_tag_set_and_explicit_paths() -> None:
    keys = Keys()
    _, sealed = sealed_customer(keys, tags={"SECRET"}, paths=("$.id",))
    record = avro_read(CUSTOMER_AVRO, sealed)
    assert record["notes"]["vip"].startswith("sr1:")
    assert record["id"].startswith("sr1:")
    assert record["email"] == "ann@example.com"


def test_the_field_path_is_bound_moving_an_envelope_to_another_field_fails() -> None:
    keys = Keys()
    _, sealed = sealed_customer(keys)
    record = avro_read(CUSTOMER_AVRO, sealed)
    record["name"] = record["email"]
    moved = frame(SCHEMA_ID, avro_bytes(CUSTOMER_AVRO, record))
    fields = fields_for(registry_with({SCHEMA_ID: ("AVRO", CUSTOMER_AVRO)}))
    with pytest.raises(IntegrityError, match=r"field \$\.name"):
        fields.open(moved, keys.lookup, keys.ctx)


def test_a_tagged_field_holding_plaintext_is_refused_when_opening() -> None:
    keys = Keys()
    fields = fields_for(registry_with({SCHEMA_ID: ("AVRO", CUSTOMER_AVRO)}))
    with pytest.raises(UnencryptedField, match=r"field \$\.email should be encrypted"):
        fields.open(frame(SCHEMA_ID, avro_bytes(CUSTOMER_AVRO, CUSTOMER)), keys.lookup, keys.ctx)


def with_field(field: dict[str, Any]) -> dict[str, Any]:
    schema = copy.deepcopy(CUSTOMER_AVRO)
    schema["fields"].append(field)
    return schema


@pytest.mark.parametrize(
    ("field", "problem"),
    [
        (
            {"name": "ssn", "type": "long", "confluent:tags": ["PII"]},
            r"field \$\.ssn .* is tagged PII but is of type long",
        ),
        (
            {"name": "id2", "type": {"type": "string", "logicalType": "uuid"}, "confluent:tags": ["PII"]},
            r"field \$\.id2 .* string \(uuid\)",
        ),
        (
            {"name": "kind", "type": {"type": "enum", "name": "K", "symbols": ["A"]}, "confluent:tags": ["PII"]},
            r"field \$\.kind .* enum demo\.K",
        ),
    ],
)
def test_a_tagged_field_that_cannot_hold_an_envelope_is_a_clear_error(field: dict[str, Any], problem: str) -> None:
    schema = with_field(field)
    fields = fields_for(registry_with({SCHEMA_ID: ("AVRO", schema)}))
    with pytest.raises(TaggedFieldType, match=problem):
        fields.plan(SCHEMA_ID)


def test_an_explicit_path_the_schema_lacks_is_refused() -> None:
    fields = fields_for(registry_with({SCHEMA_ID: ("AVRO", CUSTOMER_AVRO)}), paths=("$.emial",))
    with pytest.raises(UnknownFieldPath, match=r"\$\.emial"):
        fields.plan(SCHEMA_ID)


def test_sealing_the_subject_field_is_refused() -> None:
    fields = fields_for(registry_with({SCHEMA_ID: ("AVRO", CUSTOMER_AVRO)}), subject_path="$.email")
    with pytest.raises(TaggedFieldType, match="holds the data subject"):
        fields.plan(SCHEMA_ID)


def test_a_payload_that_does_not_match_its_schema_is_refused() -> None:
    keys = Keys()
    fields = fields_for(registry_with({SCHEMA_ID: ("AVRO", CUSTOMER_AVRO)}))
    good = avro_bytes(CUSTOMER_AVRO, CUSTOMER)
    for payload in (good[:-3], good + b"\x00\x00", b"\x02"):
        with pytest.raises(PayloadMismatch, match=f"schema id {SCHEMA_ID}"):
            fields.seal(frame(SCHEMA_ID, payload), keys.dek, keys.ref, keys.ctx)


UNION_OF_RECORDS: dict[str, Any] = {
    "type": "record",
    "name": "Event",
    "fields": [
        {
            "name": "contact",
            "type": [
                {
                    "type": "record",
                    "name": "Email",
                    "fields": [{"name": "value", "type": "string", "confluent:tags": ["PII"]}],
                },
                {"type": "record", "name": "Counter", "fields": [{"name": "value", "type": "string"}]},
            ],
        },
        {"name": "next", "type": ["null", "Event"], "default": None},
    ],
}


def test_unions_of_records_seal_only_the_tagged_branch_and_recursive_types_are_walked() -> None:
    keys = Keys()
    fields = fields_for(registry_with({1: ("AVRO", UNION_OF_RECORDS)}))
    event = {"contact": ("Email", {"value": "a@b"}), "next": {"contact": ("Counter", {"value": "7"}), "next": None}}
    parsed = fastavro.parse_schema(UNION_OF_RECORDS)
    out = io.BytesIO()
    fastavro.schemaless_writer(out, parsed, event)
    value = frame(1, out.getvalue())
    sealed = fields.seal(value, keys.dek, keys.ref, keys.ctx)
    record = fastavro.schemaless_reader(
        io.BytesIO(sealed[5:]), parsed, None, return_record_name=True, return_record_name_override=True
    )
    assert record["contact"][0] == "Email"
    assert record["contact"][1]["value"].startswith("sr1:")
    assert record["next"]["contact"] == ("Counter", {"value": "7"})
    assert fields.open(sealed, keys.lookup, keys.ctx) == (value, False)


def test_a_record_with_no_tagged_value_present_is_returned_unchanged() -> None:
    schema = {
        "type": "record",
        "name": "R",
        "fields": [{"name": "n", "type": ["null", "string"], "confluent:tags": ["PII"]}],
    }
    keys = Keys()
    fields = fields_for(registry_with({1: ("AVRO", schema)}))
    value = frame(1, avro_bytes(schema, {"n": None}))
    assert fields.seal(value, keys.dek, keys.ref, keys.ctx) is value
