"""Avro records (fastavro): the schema's fields with their ``confluent:tags``, and the payload codec.

Named types are resolved through fastavro's parsed schema (a recursive type is walked once per path).
A record read from a union of several record types comes back as ``(record name, record)`` and is
written back the same way, so the writer never picks a different branch than the one the producer
wrote. A payload must be consumed exactly: trailing bytes are :class:`PayloadMismatch`.

Payloads are read and written in the schema's *codec form* (:func:`codec_form`), as the JVM data plane
(``AvroFormat.java``) reads them, so that a field nothing seals comes back exactly as the producer wrote it:

* logical types are left out (a ``uuid`` is its string, a ``decimal`` its bytes, a timestamp its long). Read as
  a UUID object, an upper-case UUID would be written back in lower case, and a string the producer's library did
  not check as a UUID would stop the record;
* a boolean is one byte, 0 or 1, and any other byte is :class:`PayloadMismatch`. fastavro reads any byte but 0 as
  true and Apache Avro any byte but 1 as false, so the two engines would write such a byte back as different
  booleans. The codec form reads a boolean as a one-byte ``fixed`` with a logical type of strongroom's
  (:data:`STRICT_BOOLEAN`) that turns 0 and 1 into ``False`` and ``True`` and refuses the rest;
* a float is its four bytes (:class:`Float32`, a four-byte ``fixed`` of :data:`RAW_FLOAT`): a Python float is a
  double, and the conversion would quiet a signalling NaN, changing its bits.

Each such ``fixed`` is named apart, and its writer takes only its own kind of value (a bool, a :class:`Float32`),
so that writing a union never takes its ``bytes`` branch for it, nor it for a ``bytes`` value.
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import count
from typing import Any, Final

from strongroom.schemas.errors import PayloadMismatch, UnsupportedSchema
from strongroom.schemas.fields import LeafKind, SchemaField, Step

_PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}
#: The logical type of the codec form's booleans (a one-byte ``fixed``): fastavro's key for its reader and writer.
STRICT_BOOLEAN: Final = "strongroom-strict-boolean"
#: The logical type of the codec form's floats (a four-byte ``fixed``).
RAW_FLOAT: Final = "strongroom-raw-float"
_BOOLEAN_BYTES: Final = {b"\x00": False, b"\x01": True}


@dataclass(frozen=True, slots=True)
class Float32:
    """An Avro float as its four bytes (little-endian IEEE 754), written back bit for bit."""

    bits: bytes


class AvroFormat:
    """One Avro schema: its fields and a reader/writer for payloads written with it."""

    def __init__(self, text: str, where: str) -> None:
        self.where = where
        try:
            import fastavro
        except ImportError:
            raise UnsupportedSchema(
                f"{where} is Avro, which needs fastavro", hint="pip install 'strongroom[schemas]'"
            ) from None
        self._fastavro = fastavro
        _register_codec_types(fastavro)
        try:
            declared = json.loads(text)
            self.parsed: Any = fastavro.parse_schema(declared)
            self._codec_schema: Any = fastavro.parse_schema(codec_form(declared))
        except Exception as exc:  # noqa: BLE001 - any parse failure is one clear message
            raise UnsupportedSchema(f"{where} is not an Avro schema fastavro can read: {exc}") from None
        self.named: dict[str, Any] = self.parsed.get("__named_schemas", {}) if isinstance(self.parsed, dict) else {}

    # ------------------------------------------------------------------ schema
    def fields(self) -> list[SchemaField]:
        out: list[SchemaField] = []
        self._walk(self.parsed, (), out, (), None, frozenset())
        return out

    def _resolve(self, schema: Any) -> Any:
        if isinstance(schema, str) and schema not in _PRIMITIVES:
            return self.named.get(schema, schema)
        return schema

    def _walk(self, schema: Any, steps: tuple[Step, ...], out: list[SchemaField], stack: tuple[str, ...],
              record: str | None, tags: frozenset[str]) -> None:  # fmt: skip
        """Every field below ``schema``; ``tags`` are those of the array/map field whose items this is."""
        schema = self._resolve(schema)
        if isinstance(schema, list):
            branches = [self._resolve(b) for b in schema if b != "null"]
            records = [b for b in branches if isinstance(b, dict) and b.get("type") == "record"]
            for branch in branches:
                name = branch["name"] if len(records) > 1 and branch in records else None
                self._walk(branch, steps, out, stack, name, tags)
            return
        if not isinstance(schema, dict):
            return
        kind = schema.get("type")
        if kind == "record":
            name = schema["name"]
            if name in stack:
                return  # recursive type: its fields were listed where it first appeared on this path
            for field in schema["fields"]:
                step_path = (*steps, Step("field", field["name"], record))
                leaf, nullable = self._leaf(field["type"])
                field_tags = frozenset(field.get("confluent:tags") or ())
                out.append(SchemaField(step_path, leaf, self._type_name(field["type"]), field_tags, nullable))
                self._walk(field["type"], step_path, out, (*stack, name), None, field_tags)
        elif kind in ("array", "map"):
            inner = schema["items"] if kind == "array" else schema["values"]
            inner_steps = (*steps, Step("items" if kind == "array" else "values"))
            leaf, nullable = self._leaf(inner)
            if leaf in ("string", "bytes"):
                out.append(SchemaField(inner_steps, leaf, self._type_name(inner), tags, nullable))
            self._walk(inner, inner_steps, out, stack, None, frozenset())

    def _leaf(self, schema: Any) -> tuple[LeafKind, bool]:
        schema = self._resolve(schema)
        branches = schema if isinstance(schema, list) else [schema]
        nullable = "null" in branches
        kinds = {self._plain(self._resolve(b)) for b in branches if b != "null"}
        if kinds in ({"string"}, {"bytes"}):
            return kinds.pop(), nullable  # type: ignore[return-value]
        if len(branches) - nullable == 1:
            inner = self._resolve(next(b for b in branches if b != "null"))
            if isinstance(inner, dict) and inner.get("type") in ("array", "map"):
                items = inner["items"] if inner["type"] == "array" else inner["values"]
                if self._leaf(items)[0] in ("string", "bytes"):
                    return "container", nullable
        return "other", nullable

    @staticmethod
    def _plain(schema: Any) -> str:
        if isinstance(schema, dict):
            if schema.get("logicalType"):
                return "other"  # read as a UUID, a Decimal ...: not a plain string or bytes
            schema = schema.get("type")
        return schema if schema in ("string", "bytes") else "other"

    def _type_name(self, schema: Any) -> str:
        schema = self._resolve(schema)
        if isinstance(schema, list):
            return "union<" + ",".join(self._type_name(b) for b in schema) + ">"
        if isinstance(schema, dict):
            kind = schema.get("type")
            if kind in ("record", "enum", "fixed"):
                return f"{kind} {schema.get('name')}"
            if kind == "array":
                return f"array<{self._type_name(schema['items'])}>"
            if kind == "map":
                return f"map<{self._type_name(schema['values'])}>"
            logical = schema.get("logicalType")
            return f"{kind} ({logical})" if logical else str(kind)
        return str(schema)

    def holds_logical_type(self, datum: Any, names: Sequence[str]) -> bool:
        """Whether the value at the record path ``names`` of ``datum`` (read in the codec form) is of a type with a
        logical type. Such a value is no data subject, as the JVM engine decides (``AvroFormat.subjectText``), and as
        fastavro's typed reading decided when it gave a UUID, a date or a decimal there."""
        schema: Any = self.parsed
        node = datum
        for name in names:
            record = self._record_of(schema, node)
            node = node[1] if isinstance(node, tuple) else node
            if record is None or not isinstance(node, dict):
                return False
            field = next((f for f in record["fields"] if f["name"] == name), None)
            if field is None:
                return False
            schema, node = field["type"], node.get(name)
        branches = self._branches_for(schema, node)
        return any(isinstance(branch, dict) and branch.get("logicalType") for branch in branches)

    def _record_of(self, schema: Any, node: Any) -> Any:
        """The record type ``node`` was read as: the schema itself, the union's only record, or the record a
        ``(name, record)`` pair names."""
        schema = self._resolve(schema)
        if isinstance(schema, dict) and schema.get("type") == "record":
            return schema
        if isinstance(schema, list):
            if isinstance(node, tuple):
                return self._resolve(node[0])
            records = [b for b in map(self._resolve, schema) if isinstance(b, dict) and b.get("type") == "record"]
            return records[0] if len(records) == 1 else None
        return None

    def _branches_for(self, schema: Any, value: Any) -> list[Any]:
        """The types of ``schema`` (a union's branches) a scalar ``value`` of the codec form may have been read as."""
        schema = self._resolve(schema)
        if isinstance(value, str):
            kinds = {"string", "enum"}
        elif isinstance(value, int) and not isinstance(value, bool):
            kinds = {"int", "long"}
        else:
            return []
        branches = [self._resolve(b) for b in (schema if isinstance(schema, list) else [schema])]
        return [b for b in branches if (b.get("type") if isinstance(b, dict) else b) in kinds]

    # ------------------------------------------------------------------ payloads
    def decode(self, payload: bytes) -> Any:
        buffer = io.BytesIO(payload)
        try:
            datum = self._fastavro.schemaless_reader(
                buffer, self._codec_schema, None, return_record_name=True, return_record_name_override=True
            )
        except Exception as exc:  # noqa: BLE001 - whatever fastavro raises, the payload is not of this schema
            raise PayloadMismatch(f"payload does not read as {self.where}: {type(exc).__name__}") from None
        if buffer.tell() != len(payload):
            raise PayloadMismatch(
                f"payload does not read as {self.where}: {len(payload) - buffer.tell()} bytes left over"
            )
        return datum

    def encode(self, datum: Any) -> bytes:
        out = io.BytesIO()
        try:
            self._fastavro.schemaless_writer(out, self._codec_schema, datum)
        except Exception as exc:  # noqa: BLE001
            raise PayloadMismatch(f"record cannot be written back as {self.where}: {type(exc).__name__}") from None
        return out.getvalue()


def codec_form(schema: Any) -> Any:
    """The schema (its JSON form) payloads are read and written with: every ``logicalType`` left out, every
    boolean a one-byte ``fixed`` of :data:`STRICT_BOOLEAN`, every float a four-byte ``fixed`` of :data:`RAW_FLOAT`,
    and no field defaults (a payload holds every field)."""
    return _codec_type(schema, count())


#: The primitive types the codec form reads as a ``fixed`` of its own: (size, logical type).
_AS_FIXED: Final = {"boolean": (1, STRICT_BOOLEAN), "float": (4, RAW_FLOAT)}


def _codec_type(schema: Any, numbers: Any) -> Any:
    primitive = schema.get("type") if isinstance(schema, dict) else schema
    if isinstance(primitive, str) and primitive in _AS_FIXED:
        size, logical = _AS_FIXED[primitive]
        name = f"{primitive.capitalize()}{next(numbers)}"  # each its own name: a union may hold one, a record several
        return {"type": "fixed", "name": name, "namespace": "strongroom.codec", "size": size, "logicalType": logical}
    if isinstance(schema, list):
        return [_codec_type(branch, numbers) for branch in schema]
    if not isinstance(schema, dict):
        return schema  # a primitive or a named type's name
    out = {key: value for key, value in schema.items() if key != "logicalType"}
    kind = schema.get("type")
    if kind in ("record", "error"):
        out["fields"] = [
            {**{k: v for k, v in field.items() if k != "default"}, "type": _codec_type(field["type"], numbers)}
            for field in schema.get("fields", [])
        ]
    elif kind == "array":
        out["items"] = _codec_type(schema["items"], numbers)
    elif kind == "map":
        out["values"] = _codec_type(schema["values"], numbers)
    elif isinstance(kind, dict | list):
        out["type"] = _codec_type(kind, numbers)
    return out


def _read_strict_boolean(data: bytes, writer_schema: Any = None, reader_schema: Any = None) -> bool:
    try:
        return _BOOLEAN_BYTES[data]
    except KeyError:
        raise ValueError(f"a boolean is the byte 0 or 1, not {data.hex()}") from None


def _write_strict_boolean(datum: Any, *_: Any) -> bytes | None:
    if datum is True or datum is False:
        return b"\x01" if datum else b"\x00"
    return None  # not a boolean: fastavro's union resolution then passes this branch over


def _read_raw_float(data: bytes, writer_schema: Any = None, reader_schema: Any = None) -> Float32:
    return Float32(data)


def _write_raw_float(datum: Any, *_: Any) -> bytes | None:
    return datum.bits if isinstance(datum, Float32) else None  # not a float of this form: never this branch


def _register_codec_types(fastavro: Any) -> None:
    """fastavro's readers and writers of the codec form's logical types (its registries are module-wide dicts)."""
    for logical, read, write in ((STRICT_BOOLEAN, _read_strict_boolean, _write_strict_boolean),
                                 (RAW_FLOAT, _read_raw_float, _write_raw_float)):  # fmt: skip
        fastavro.read.LOGICAL_READERS[f"fixed-{logical}"] = read
        fastavro.write.LOGICAL_WRITERS[f"fixed-{logical}"] = write
