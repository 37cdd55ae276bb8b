"""Sealing and opening the selected fields of a schema-registry record in place.

A selected string field holds ``"sr1:" + base64(envelope)`` whose plaintext is the string's UTF-8 bytes;
a selected bytes field holds the raw envelope whose plaintext is the bytes. Both stay valid for the
field's type, so the record keeps its schema id and still deserializes with it. The AAD binds topic,
subject and the field's canonical path, as in JSON field mode (:mod:`strongroom.envelope.json_fields`);
the envelope codec is the same (:func:`strongroom.envelope.codec.seal`).

Both directions are all or nothing: an error leaves nothing half-sealed or half-opened. Opening insists
that every present selected value is sealed (a plaintext value where the schema's tags promise ciphertext
is :class:`UnencryptedField`). A null (an optional field that is absent) is left as it is. A field of an
erased subject reads as null where its type allows null, else as the empty string or empty bytes, and
the caller is told (``erased``).
"""

from __future__ import annotations

import base64
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from strongroom.crypto.limits import DekUsage
from strongroom.envelope.aad import RecordContext
from strongroom.envelope.codec import KeyLookup, open_envelope, parse, seal
from strongroom.envelope.errors import MalformedEnvelope, UnencryptedField, UnverifiedEnvelope
from strongroom.envelope.ids import FIELD_PREFIX
from strongroom.envelope.keyref import KeyRef
from strongroom.envelope.sealed_text import sealed_envelope
from strongroom.errors import EnvelopeError
from strongroom.schemas.avro_format import AvroFormat
from strongroom.schemas.errors import (
    PayloadMismatch,
    SchemaRecordError,
    TaggedFieldType,
    UnknownSchemaId,
    UnsupportedSchema,
)
from strongroom.schemas.fields import (
    FieldTarget,
    SchemaField,
    Selection,
    Slot,
    get_value,
    select,
    set_value,
    target_slots,
)
from strongroom.schemas.json_format import JsonSchemaFormat
from strongroom.schemas.protobuf_format import ProtobufFormat
from strongroom.schemas.registry import SchemaRegistry
from strongroom.schemas.wire import frame, unframe

_PREFIX_LEN: Final = len(FIELD_PREFIX)
_MAX_PLANS: Final = 4096


@dataclass
class Decoded:
    """A record read with its schema: the mutable datum, its targets and how to write it back."""

    datum: Any
    targets: tuple[FieldTarget, ...]
    write: Callable[[], bytes]


class SchemaPlan:
    """One schema id: how to read and write its payloads and which fields the selection seals."""

    def __init__(
        self, schema_id: int, registry: SchemaRegistry, selection: Selection, subject_path: str | None
    ) -> None:
        self.schema_id = schema_id
        self.where = f"schema id {schema_id}"
        self.selection = selection
        self.subject_path = subject_path
        registered = registry.schema(schema_id)
        self.schema_type = registered.schema_type
        self.avro: AvroFormat | None = None
        self._json: JsonSchemaFormat | None = None
        self._proto: ProtobufFormat | None = None
        self._targets: dict[tuple[int, ...], tuple[FieldTarget, ...]] = {}
        if registered.schema_type == "AVRO":
            self.avro = AvroFormat(registered.text, f"Avro {self.where}")
            self._targets[()] = self._select(self.avro.fields())
        elif registered.schema_type == "JSON":
            self._json = JsonSchemaFormat(registered.text, f"JSON Schema {self.where}")
            self._targets[()] = self._select(self._json.fields())
        else:
            self._proto = ProtobufFormat(registered, registry.version, f"Protobuf {self.where}")
        #: How many fields a record of this id has to seal at most, when the schema alone says (Avro and
        #: JSON Schema targets outside arrays and maps); None when it depends on the record.
        self.fixed_value_count: int | None = None
        if self._proto is None:
            targets = self._targets[()]
            if all(step.kind == "field" for target in targets for step in target.steps):
                self.fixed_value_count = len(targets)

    def _select(self, fields: list[SchemaField]) -> tuple[FieldTarget, ...]:
        targets = select(fields, self.selection, self.where)
        if self.subject_path is not None and any(t.path == self.subject_path for t in targets):
            raise TaggedFieldType(
                f"field {self.subject_path} of {self.where} holds the data subject but the rule seals it: "
                "readers could not find the subject"
            )
        return targets

    def targets(self) -> tuple[FieldTarget, ...]:
        """The fields the selection seals (Avro and JSON Schema: one set per schema id)."""
        if self._proto is not None:
            raise UnsupportedSchema(f"{self.where} is Protobuf: its targets depend on each record's message type")
        return self._targets[()]

    def protobuf_messages(self) -> tuple[bytes, dict[tuple[int, ...], tuple[FieldTarget, ...] | SchemaRecordError]]:
        """Protobuf: the compiled ``FileDescriptorSet`` and, per message (by its indexes), the fields the
        selection seals or why it cannot apply to that message (what the JVM engine needs)."""
        if self._proto is None:
            raise UnsupportedSchema(f"{self.where} is not Protobuf")
        messages: dict[tuple[int, ...], tuple[FieldTarget, ...] | SchemaRecordError] = {}
        for indexes in self._proto.every_message():
            try:
                messages[tuple(indexes)] = self._select(self._proto.message(indexes)[1])
            except SchemaRecordError as exc:
                messages[tuple(indexes)] = exc
        return self._proto.descriptor_set, messages

    def read(self, payload: bytes, *, validate: bool) -> Decoded:
        if self.avro is not None:
            avro = self.avro
            datum = avro.decode(payload)
            return Decoded(datum, self._targets[()], lambda: avro.encode(datum))
        if self._json is not None:
            json_format = self._json
            document = json_format.decode(payload)
            if validate:
                json_format.validate(document)
            return Decoded(document, self._targets[()], lambda: json_format.encode(document))
        assert self._proto is not None
        proto = self._proto
        message, fields, index_bytes = proto.decode(payload)
        key = tuple(index_bytes)
        targets = self._targets.get(key)
        if targets is None:
            targets = self._targets[key] = self._select(fields)
        return Decoded(message, targets, lambda: proto.encode(message, index_bytes))


class SchemaFields:
    """Seals and opens the selected fields of records in the Confluent wire format (one rule's selection).

    Plans are built once per schema id (a schema id never changes its schema). A schema the selection
    cannot be applied to (a tagged int field) is remembered as that error, so every record of it fails
    fast with the same message.
    """

    def __init__(self, registry: SchemaRegistry, selection: Selection, *, subject_path: str | None = None) -> None:
        self.registry = registry
        self.selection = selection
        self.subject_path = subject_path
        self._plans: dict[int, SchemaPlan | SchemaRecordError] = {}
        self._lock = threading.Lock()

    def plan(self, schema_id: int) -> SchemaPlan:
        found = self._plans.get(schema_id)
        if found is None:
            try:
                found = SchemaPlan(schema_id, self.registry, self.selection, self.subject_path)
            except UnknownSchemaId:
                raise  # not remembered: a registry may learn the id later (a restored backup)
            except SchemaRecordError as exc:
                found = exc
            with self._lock:
                if len(self._plans) >= _MAX_PLANS:
                    self._plans.clear()
                self._plans[schema_id] = found
        if isinstance(found, SchemaRecordError):
            raise type(found)(found.problem, hint=found.hint)
        return found

    def read(self, value: bytes, *, validate: bool) -> tuple[int, Decoded]:
        framed = unframe(value)
        return framed.schema_id, self.plan(framed.schema_id).read(framed.payload, validate=validate)

    # ------------------------------------------------------------------ sealing
    def value_count(self, value: bytes) -> int:
        """How many fields sealing ``value`` seals at most (present targets, sealed or not): from the schema
        alone when it says (:attr:`SchemaPlan.fixed_value_count`), else from the record."""
        framed = unframe(value)
        plan = self.plan(framed.schema_id)
        if plan.fixed_value_count is not None:
            return plan.fixed_value_count
        decoded = plan.read(framed.payload, validate=False)
        return len(target_slots(decoded.datum, decoded.targets))

    def seal(
        self, value: bytes, dek: bytes, key_ref: KeyRef, ctx: RecordContext, *, usage: DekUsage | None = None
    ) -> bytes:
        """``value`` with every present selected field sealed; unchanged when the record has none."""
        schema_id, decoded = self.read(value, validate=True)
        slots = target_slots(decoded.datum, decoded.targets)
        changed = False
        for slot in slots:
            current = get_value(slot)
            if current is None:
                continue
            path = slot.target.path
            if isinstance(current, str):
                if current.startswith(FIELD_PREFIX):
                    _verify_presealed(current, dek, ctx, path)
                    continue
                envelope = seal(current.encode("utf-8"), dek, key_ref, ctx, path, usage=usage)
                set_value(slot, FIELD_PREFIX + base64.b64encode(envelope).decode("ascii"))
            elif isinstance(current, bytes | bytearray):
                set_value(slot, seal(bytes(current), dek, key_ref, ctx, path, usage=usage))
            else:
                raise PayloadMismatch(f"field {path} holds a {type(current).__name__}, not a string or bytes")
            changed = True
        return frame(schema_id, decoded.write()) if changed else value

    # ------------------------------------------------------------------ opening
    def open(self, value: bytes, key_lookup: KeyLookup, ctx: RecordContext) -> tuple[bytes, bool]:
        """``value`` with every selected field opened, and whether some belonged to an erased key."""
        schema_id, decoded = self.read(value, validate=False)
        slots = target_slots(decoded.datum, decoded.targets)
        keys: dict[bytes, bytes | None] = {}
        replacements: list[tuple[Slot, Any]] = []
        erased = False
        for slot in slots:
            current = get_value(slot)
            if current is None:
                continue
            parsed = parse(_envelope_of(current, slot.target))
            dek = (
                keys[parsed.header]
                if parsed.header in keys
                else keys.setdefault(parsed.header, key_lookup(parsed.key_ref))
            )
            if dek is None:
                erased = True
                replacements.append((slot, _erased_value(slot.target)))
                continue
            plain = open_envelope(parsed, dek, ctx, slot.target.path)
            replacements.append((slot, _typed(plain, slot.target)))
        if not replacements:
            return value, False
        for slot, plain in replacements:
            set_value(slot, plain)
        return frame(schema_id, decoded.write()), erased

    def key_refs(self, value: bytes, *, sealed_only: bool = False) -> list[KeyRef]:
        """Every key the selected fields of ``value`` are sealed under, without opening them (the errors of
        :meth:`open` for a field that is not sealed; ``sealed_only``: such a field is passed over)."""
        _, decoded = self.read(value, validate=False)
        refs: list[KeyRef] = []
        for slot in target_slots(decoded.datum, decoded.targets):
            current = get_value(slot)
            if current is None or (sealed_only and not _looks_sealed(current)):
                continue
            refs.append(parse(_envelope_of(current, slot.target)).key_ref)
        return refs

    def holds_envelopes(self, value: bytes) -> bool:
        """True when a selected field of ``value`` holds something sealed-looking (unmarked records)."""
        _, decoded = self.read(value, validate=False)
        return any(_looks_sealed(get_value(slot)) for slot in target_slots(decoded.datum, decoded.targets))

    def subject(self, value: bytes, path: str) -> str | None:
        """The text of the scalar at the dotted ``path`` of the record (None when absent, not a scalar, or of an
        Avro type with a logical type)."""
        framed = unframe(value)
        plan = self.plan(framed.schema_id)
        decoded = plan.read(framed.payload, validate=False)
        names = path[2:].split(".")
        if plan.avro is not None and plan.avro.holds_logical_type(decoded.datum, names):
            return None
        node: Any = decoded.datum
        for name in names:
            if isinstance(node, tuple):
                node = node[1]
            if isinstance(node, dict):
                node = node.get(name)
            elif hasattr(node, "DESCRIPTOR") and name in node.DESCRIPTOR.fields_by_name:
                node = getattr(node, name)
            else:
                return None
        if isinstance(node, bool) or node is None:
            return None
        if isinstance(node, str | int):
            return str(node)
        return None


def _looks_sealed(current: Any) -> bool:
    """A selected value that holds (or pretends to hold) an envelope: an ``sr1:`` string, bytes starting 0xF5."""
    if isinstance(current, str):
        return current.startswith(FIELD_PREFIX)
    return isinstance(current, bytes) and current[:1] == b"\xf5"


def _envelope_of(current: Any, target: FieldTarget) -> bytes:
    path = target.path
    if isinstance(current, str):
        if not current.startswith(FIELD_PREFIX):
            raise UnencryptedField(f"field {path} should be encrypted but holds plaintext (a string)")
        try:
            return sealed_envelope(current[_PREFIX_LEN:])
        except ValueError:  # binascii.Error is one
            raise MalformedEnvelope(f"field {path}: not valid base64 after {FIELD_PREFIX!r}") from None
    if isinstance(current, bytes | bytearray):
        if current[:1] != b"\xf5":
            raise UnencryptedField(f"field {path} should be encrypted but holds plaintext (bytes)")
        return bytes(current)
    raise PayloadMismatch(f"field {path} holds a {type(current).__name__}, not a string or bytes")


def _typed(plain: bytes, target: FieldTarget) -> Any:
    if target.kind == "bytes":
        return plain
    try:
        return plain.decode("utf-8")
    except UnicodeDecodeError:
        raise MalformedEnvelope(
            f"field {target.path} decrypted to bytes that are not UTF-8; the producer is broken"
        ) from None


def _erased_value(target: FieldTarget) -> Any:
    if target.nullable:
        return None
    return b"" if target.kind == "bytes" else ""


def _verify_presealed(text: str, dek: bytes, ctx: RecordContext, path: str) -> None:
    try:
        envelope = sealed_envelope(text[_PREFIX_LEN:])
        open_envelope(parse(envelope), dek, ctx, path)
    except (ValueError, EnvelopeError) as exc:  # binascii.Error is a ValueError
        raise UnverifiedEnvelope(
            f"field {path} already holds an {FIELD_PREFIX!r} string that does not open under this subject's key "
            f"for this topic and field ({type(exc).__name__})"
        ) from None
