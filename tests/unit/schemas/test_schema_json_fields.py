"""JSON Schema records: tagged properties sealed in place; constrained strings refused at rule validation."""

from __future__ import annotations

import json
from typing import Any

import pytest
from schema_kit import Keys, fields_for, frame, registry_with

from strongroom.schemas.errors import PayloadMismatch, TaggedFieldType, UnsupportedSchema

SCHEMA: dict[str, Any] = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "email": {"type": "string", "confluent:tags": ["PII"]},
        "name": {"type": ["string", "null"], "confluent:tags": ["PII"]},
        "aliases": {"type": "array", "items": {"type": "string"}, "confluent:tags": ["PII"]},
        "address": {"$ref": "#/definitions/Address"},
        "score": {"type": "number"},
    },
    "required": ["id", "email"],
    "additionalProperties": False,
    "definitions": {
        "Address": {
            "type": "object",
            "properties": {"street": {"type": "string", "confluent:tags": ["PII"]}, "city": {"type": "string"}},
        }
    },
}
DOC = {"id": "c-1", "email": "ann@example.com", "name": None, "aliases": ["annie"],
       "address": {"street": "1 Main St", "city": "Springfield"}, "score": 1.5}  # fmt: skip


def value_of(doc: dict[str, Any]) -> bytes:
    return frame(3, json.dumps(doc, separators=(",", ":")).encode())


def test_round_trip_seals_tagged_properties_only() -> None:
    keys = Keys()
    fields = fields_for(registry_with({3: ("JSON", SCHEMA)}))
    sealed = fields.seal(value_of(DOC), keys.dek, keys.ref, keys.ctx)
    doc = json.loads(sealed[5:])
    assert doc["email"].startswith("sr1:")
    assert doc["aliases"][0].startswith("sr1:")
    assert doc["address"]["street"].startswith("sr1:")
    assert doc["name"] is None  # null stays null: nothing to protect
    assert (doc["id"], doc["address"]["city"], doc["score"]) == ("c-1", "Springfield", 1.5)
    assert fields.open(sealed, keys.lookup, keys.ctx) == (value_of(DOC), False)
    erased, was_erased = fields.open(sealed, lambda ref: None, keys.ctx)
    assert was_erased
    assert json.loads(erased[5:])["email"] == ""


def test_a_payload_that_does_not_match_the_schema_is_refused_before_sealing() -> None:
    keys = Keys()
    fields = fields_for(registry_with({3: ("JSON", SCHEMA)}))
    with pytest.raises(PayloadMismatch, match=r"at \$\.score: type failed"):
        fields.seal(value_of({**DOC, "score": "high"}), keys.dek, keys.ref, keys.ctx)
    with pytest.raises(PayloadMismatch, match="not usable JSON"):
        fields.seal(frame(3, b"{not json"), keys.dek, keys.ref, keys.ctx)


@pytest.mark.parametrize(
    ("prop", "problem"),
    [
        ({"type": "integer", "confluent:tags": ["PII"]}, "of type integer"),
        ({"type": "string", "format": "email", "confluent:tags": ["PII"]}, "of type string with format"),
        ({"type": "string", "maxLength": 20, "confluent:tags": ["PII"]}, "string with maxLength"),
    ],
)
def test_tagged_properties_that_could_not_stay_valid_are_refused(prop: dict[str, Any], problem: str) -> None:
    schema = json.loads(json.dumps(SCHEMA))
    schema["properties"]["secret"] = prop
    with pytest.raises(TaggedFieldType, match=rf"field \$\.secret .*{problem}"):
        fields_for(registry_with({3: ("JSON", schema)})).plan(3)


def test_a_meta_schema_that_is_no_known_draft_is_refused_not_guessed() -> None:
    keys = Keys()
    custom = {**SCHEMA, "$schema": "https://example.com/our-own-dialect"}
    fields = fields_for(
        registry_with({4: ("JSON", custom), 5: ("JSON", {k: v for k, v in SCHEMA.items() if k != "$schema"})})
    )
    with pytest.raises(UnsupportedSchema, match=r"names the meta-schema 'https://example.com/our-own-dialect'"):
        fields.seal(frame(4, value_of(DOC)[5:]), keys.dek, keys.ref, keys.ctx)
    # no $schema at all: draft 7, as the registry's serializers assume
    sealed = fields.seal(frame(5, value_of(DOC)[5:]), keys.dek, keys.ref, keys.ctx)
    assert json.loads(sealed[5:])["email"].startswith("sr1:")
