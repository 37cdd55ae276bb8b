"""The driver's ``schema_plan`` answers (no registry server: every schema is preloaded)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from strongroom.errors import PipelineError
from strongroom.rules import EncryptionRules
from strongroom.schemas.registry import RegisteredSchema, RegistrySettings
from strongroom.spark.schema_plans import SchemaPlans
from strongroom.testing.schema_formats import AVRO_SCHEMA, JSON_SCHEMA, PROTO_SCHEMA

TAGGED_INT = {
    **AVRO_SCHEMA,
    "fields": [*AVRO_SCHEMA["fields"], {"name": "ssn", "type": "long", "confluent:tags": ["PII"]}],
}


def _plans(**rule: Any) -> SchemaPlans:
    rules = EncryptionRules.parse_obj_or_fail({"rules": [{"topic": "events", "mode": "schema", **rule},
                                                         {"topic": "plain"}]})  # fmt: skip
    plans = SchemaPlans(rules, RegistrySettings(url="http://127.0.0.1:9/never-asked"))
    assert plans.registry is not None
    plans.registry.preload(1, RegisteredSchema("AVRO", json.dumps(AVRO_SCHEMA)))
    plans.registry.preload(2, RegisteredSchema("JSON", json.dumps(JSON_SCHEMA)))
    plans.registry.preload(3, RegisteredSchema("AVRO", json.dumps(TAGGED_INT)))
    return plans


def test_an_avro_id_gets_its_schema_and_the_tagged_fields_in_order() -> None:
    answer = _plans().answer({"topic": "events", "schema_id": 1})
    assert answer["type"] == "AVRO"
    assert json.loads(answer["schema"]) == AVRO_SCHEMA
    assert answer["targets"] == [
        {"path": "$.email", "steps": [["field", "email", None]], "kind": "string", "nullable": False},
        {"path": "$.name", "steps": [["field", "name", None]], "kind": "string", "nullable": True},
    ]


def test_explicit_paths_and_other_tags_select_too() -> None:
    answer = _plans(tags=[], fields=["$.sku"]).answer({"topic": "events", "schema_id": 1})
    assert [t["path"] for t in answer["targets"]] == ["$.sku"]


def test_a_json_schema_id_gets_its_schema_and_the_tagged_fields_for_the_jvm_engine() -> None:
    answer = _plans().answer({"topic": "events", "schema_id": 2})
    assert answer["type"] == "JSON"
    assert json.loads(answer["schema"]) == JSON_SCHEMA
    assert [(t["path"], t["nullable"]) for t in answer["targets"]] == [("$.email", False), ("$.name", True)]


def test_a_protobuf_id_gets_its_compiled_descriptors_and_each_messages_targets() -> None:
    from google.protobuf import descriptor_pb2

    plans = _plans()
    assert plans.registry is not None
    plans.registry.preload(4, RegisteredSchema("PROTOBUF", PROTO_SCHEMA))
    answer = plans.answer({"topic": "events", "schema_id": 4})
    assert answer["type"] == "PROTOBUF"
    files = descriptor_pb2.FileDescriptorSet.FromString(base64.b64decode(answer["descriptors"])).file
    assert answer["file"] in [f.name for f in files]
    assert "confluent/meta.proto" in [f.name for f in files], "its imports come with it"
    assert [t["path"] for t in answer["messages"]["0"]["targets"]] == ["$.email", "$.name"]


def test_a_rule_that_cannot_apply_is_the_records_refusal_with_the_python_error_name() -> None:
    refused = _plans().answer({"topic": "events", "schema_id": 3})["refused"]
    assert refused["kind"] == "TaggedFieldType"
    assert "field $.ssn of schema id 3 is tagged PII but is of type long" in refused["problem"]
    assert refused["hint"]


@pytest.mark.parametrize(
    "args",
    [{"topic": "events"}, {"topic": "events", "schema_id": "1"}, {"topic": "events", "schema_id": True}, {}],
)
def test_a_malformed_request_is_refused(args: dict[str, Any]) -> None:
    with pytest.raises(PipelineError, match="schema_plan"):
        _plans().answer(args)


def test_a_topic_whose_rule_is_not_in_schema_mode_is_refused() -> None:
    with pytest.raises(PipelineError, match="not in schema mode"):
        _plans().answer({"topic": "plain", "schema_id": 1})
