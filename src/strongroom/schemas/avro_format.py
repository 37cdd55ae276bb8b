"""Avro records (fastavro): the schema's fields with their ``confluent:tags``, and the payload codec.

Named types are resolved through fastavro's parsed schema (a recursive type is walked once per path).
A record read from a union of several record types comes back as ``(record name, record)`` and is
written back the same way, so the writer never picks a different branch than the one the producer
wrote. A payload must be consumed exactly: trailing bytes are :class:`PayloadMismatch`.
"""

from __future__ import annotations

import io
import json
from typing import Any

from strongroom.schemas.errors import PayloadMismatch, UnsupportedSchema
from strongroom.schemas.fields import LeafKind, SchemaField, Step

_PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}


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
        try:
            self.parsed: Any = fastavro.parse_schema(json.loads(text))
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

    # ------------------------------------------------------------------ payloads
    def decode(self, payload: bytes) -> Any:
        buffer = io.BytesIO(payload)
        try:
            datum = self._fastavro.schemaless_reader(
                buffer, self.parsed, None, return_record_name=True, return_record_name_override=True
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
            self._fastavro.schemaless_writer(out, self.parsed, datum)
        except Exception as exc:  # noqa: BLE001
            raise PayloadMismatch(f"record cannot be written back as {self.where}: {type(exc).__name__}") from None
        return out.getvalue()
