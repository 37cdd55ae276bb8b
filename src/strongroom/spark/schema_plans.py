"""The driver's answers to ``schema_plan``: what the JVM engine needs to seal a schema id's fields.

Schema-aware rules (docs/schema-aware.md) select fields from a record's schema. Which fields, under which
canonical paths, is decided in one place for every engine: :class:`strongroom.schemas.sealing.SchemaFields`
on the driver, with the one registry client (its cache by schema id, its outage wait, its credentials).
An executor task of the JVM engine asks the driver's key service once per (source topic, schema id) it
meets (``{"op": "schema_plan", "args": {"topic", "schema_id"}}``) and gets back either

* ``{"type": "AVRO" | "JSON", "schema": text, "targets": [{"path", "steps": [[kind, name, record]...], "kind",
  "nullable"}...]}``: the Avro schema or JSON Schema to read, validate and write payloads with and the fields
  to seal or open;
* ``{"type": "PROTOBUF", "descriptors": base64 of the compiled ``FileDescriptorSet``, "file": the schema's
  file in it, "messages": {"0.1": {"targets": [...]} | {"refused": {...}}}}``: per message, by its dotted
  Confluent message indexes, the fields to seal or open or why the rule cannot apply to its records;
* ``{"refused": {"kind", "problem", "hint"}}``: the rule cannot be applied to records of this id (an
  unknown id, a tagged ``int`` field, a path the schema lacks); every such record is rejected or failed
  per the rule's policy, with the same reason the Python engine and the client library give.

A registry that stays unreachable past its outage wait raises :class:`RegistryUnavailable`, which the key
service sends back as an error: the task stops, nothing is written, no schema is guessed.
"""

from __future__ import annotations

import base64
import threading
from typing import Any

from strongroom.errors import ConfigError, PipelineError
from strongroom.rules import EncryptionRules, TopicRule
from strongroom.schemas.errors import SchemaRecordError
from strongroom.schemas.fields import FieldTarget, Selection
from strongroom.schemas.protobuf_format import MAIN_FILE as PROTO_MAIN_FILE
from strongroom.schemas.registry import RegistrySettings, SchemaRegistry
from strongroom.schemas.sealing import SchemaFields


def require_registry(rules: EncryptionRules, registry: RegistrySettings | None) -> None:
    """Refuse schema-mode rules without a registry, before anything is read."""
    for rule in rules.rules:
        if rule.mode == "schema" and registry is None:
            raise ConfigError(
                f"the rule for {rule.topic!r} is in schema mode but no schema registry was given",
                hint="pass --schema-registry URL (the Confluent-API registry the producers use)",
            )


class SchemaPlans:
    """Answers ``schema_plan`` requests from one registry, with one :class:`SchemaFields` per rule."""

    def __init__(self, rules: EncryptionRules, settings: RegistrySettings | None) -> None:
        require_registry(rules, settings)
        self.rules = rules
        self.registry = SchemaRegistry(settings) if settings is not None else None
        self._fields: dict[int, SchemaFields] = {}
        self._lock = threading.Lock()

    def answer(self, args: dict[str, Any]) -> dict[str, Any]:
        topic, schema_id = args.get("topic"), args.get("schema_id")
        if not isinstance(topic, str) or not isinstance(schema_id, int) or isinstance(schema_id, bool):
            raise PipelineError("the key service's schema_plan request needs a topic and an integer schema_id")
        rule = self.rules.rule_for(topic)
        fields = self.fields_for(rule)
        try:
            plan = fields.plan(schema_id)
        except SchemaRecordError as exc:
            return _refused(exc)
        if plan.schema_type == "PROTOBUF":
            descriptors, messages = plan.protobuf_messages()
            return {
                "type": "PROTOBUF",
                "descriptors": base64.b64encode(descriptors).decode("ascii"),
                "file": PROTO_MAIN_FILE,
                "messages": {".".join(map(str, key)): _message(found) for key, found in messages.items()},
            }
        assert self.registry is not None
        return {
            "type": plan.schema_type,
            "schema": self.registry.schema(schema_id).text,
            "targets": [_target(t) for t in plan.targets()],
        }

    def fields_for(self, rule: TopicRule) -> SchemaFields:
        index = self.rules.rules.index(rule)
        with self._lock:
            found = self._fields.get(index)
            if found is None:
                if rule.mode != "schema" or self.registry is None:
                    raise PipelineError(f"schema_plan names a topic whose rule ({rule.topic!r}) is not in schema mode")
                subject_path = rule.subject.path if rule.subject.source == "json" else None
                found = self._fields[index] = SchemaFields(
                    self.registry, Selection(rule.selected_tags, rule.fields), subject_path=subject_path
                )
            return found


def _refused(exc: SchemaRecordError) -> dict[str, Any]:
    return {"refused": {"kind": type(exc).__name__, "problem": exc.problem, "hint": exc.hint}}


def _message(found: tuple[FieldTarget, ...] | SchemaRecordError) -> dict[str, Any]:
    return _refused(found) if isinstance(found, SchemaRecordError) else {"targets": [_target(t) for t in found]}


def _target(target: FieldTarget) -> dict[str, Any]:
    return {
        "path": target.path,
        "steps": [[step.kind, step.name, step.record] for step in target.steps],
        "kind": target.kind,
        "nullable": target.nullable,
    }
