"""Protobuf records: descriptors compiled from the registry's ``.proto`` text, tags from ``confluent.field_meta``.

Why this way: a Confluent-API registry returns Protobuf schemas as ``.proto`` text (Apicurio does not
serve ``?format=serialized`` descriptors; it answers HTTP 500), and the ``protobuf`` runtime cannot parse
text. strongroom compiles the text (and its references, fetched from the registry by subject and version)
with ``protoc`` from the ``grpcio-tools`` wheel into a ``FileDescriptorSet`` once per schema id, loads it
into a private ``DescriptorPool`` and reads payloads with the runtime's dynamic message classes.
``confluent/meta.proto`` and ``google/protobuf/descriptor.proto`` come from the installed runtimes'
own descriptors (``--descriptor_set_in``), the other well-known types from the wheel's include directory.

A payload starts with the Confluent message indexes (a zigzag-varint count, then that many indexes; a
single ``0`` means the first message of the file); they are kept byte for byte. A payload with fields
the schema does not declare (unknown fields) is :class:`PayloadMismatch`: the writer's schema is exact,
and an unknown field could carry personal data past the seal.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from strongroom.schemas.errors import PayloadMismatch, UnsupportedSchema
from strongroom.schemas.fields import LeafKind, SchemaField, Step
from strongroom.schemas.registry import RegisteredSchema

_TYPE_STRING = 9
_TYPE_BYTES = 12
MAIN_FILE = "strongroom_schema.proto"


def _builtin_descriptor_set() -> bytes:
    from google.protobuf import descriptor_pb2

    files = descriptor_pb2.FileDescriptorSet()
    for module in _builtin_modules():
        module.DESCRIPTOR.CopyToProto(files.file.add())
    return bytes(files.SerializeToString())


def _builtin_modules() -> list[Any]:
    from google.protobuf import descriptor_pb2

    try:
        from confluent_kafka.schema_registry.confluent import meta_pb2
    except ImportError:
        raise UnsupportedSchema(
            "Protobuf schemas need confluent-kafka's schema-registry extra (for confluent/meta.proto)",
            hint="pip install 'strongroom[schemas]'",
        ) from None
    return [descriptor_pb2, meta_pb2]


def _field_meta() -> Any:
    from confluent_kafka.schema_registry.confluent import meta_pb2

    return meta_pb2.field_meta  # type: ignore[attr-defined]


def compile_proto(files: dict[str, str], main: str) -> Any:
    """``FileDescriptorSet`` of ``main`` and its imports, compiled with protoc from ``files`` (name → text)."""
    try:
        import grpc_tools
    except ImportError:
        raise UnsupportedSchema(
            "Protobuf schemas need protoc from the grpcio-tools wheel", hint="pip install 'strongroom[schemas]'"
        ) from None
    from google.protobuf import descriptor_pb2

    include = Path(grpc_tools.__file__).parent / "_proto"
    with tempfile.TemporaryDirectory(prefix="strongroom-proto-") as tmp:
        root = Path(tmp)
        for name, text in files.items():
            target = root / "src" / name
            if ".." in Path(name).parts or Path(name).is_absolute():
                raise UnsupportedSchema(f"Protobuf reference name {name!r} is not a relative path")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        (root / "builtin.pb").write_bytes(_builtin_descriptor_set())
        cmd = [
            sys.executable, "-m", "grpc_tools.protoc", f"--descriptor_set_in={root / 'builtin.pb'}",
            f"-I{root / 'src'}", f"-I{include}", "--include_imports",
            f"--descriptor_set_out={root / 'out.pb'}", main,
        ]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=root / "src",
                              env={**os.environ, "PYTHONWARNINGS": "ignore"})  # fmt: skip
        if proc.returncode != 0:
            detail = proc.stderr.strip().replace(str(root / "src") + "/", "")[-800:]
            raise UnsupportedSchema(f"protoc cannot compile the schema: {detail}")
        return descriptor_pb2.FileDescriptorSet.FromString((root / "out.pb").read_bytes())


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise PayloadMismatch("Protobuf payload ends inside its message indexes")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), pos


def split_indexes(payload: bytes) -> tuple[list[int], int]:
    """The message indexes at the start of ``payload`` and where the message bytes begin."""
    count, pos = _read_varint(payload, 0)
    if count < 0 or count > 100:
        raise PayloadMismatch(f"Protobuf payload names {count} message indexes")
    indexes = []
    for _ in range(count):
        index, pos = _read_varint(payload, pos)
        if index < 0:
            raise PayloadMismatch(f"Protobuf payload names the negative message index {index}")
        indexes.append(index)
    return indexes or [0], pos


class ProtobufFormat:
    """One Protobuf schema (a .proto file): messages by their indexes, fields, and payload codec."""

    def __init__(self, schema: RegisteredSchema, fetch: Callable[[str, int], RegisteredSchema], where: str) -> None:
        from google.protobuf import descriptor_pool

        self.where = where
        files = {MAIN_FILE: schema.text}
        self._collect(schema, fetch, files)
        compiled = compile_proto(files, MAIN_FILE)
        self.descriptor_set: bytes = compiled.SerializeToString()
        self.pool = descriptor_pool.DescriptorPool()
        for file_proto in compiled.file:
            self.pool.Add(file_proto)
        self.file = self.pool.FindFileByName(MAIN_FILE)
        self._classes: dict[tuple[int, ...], tuple[Any, list[SchemaField]]] = {}

    @staticmethod
    def _collect(
        schema: RegisteredSchema, fetch: Callable[[str, int], RegisteredSchema], files: dict[str, str]
    ) -> None:
        for ref in schema.references:
            if ref.name in files:
                continue
            referenced = fetch(ref.subject, ref.version)
            files[ref.name] = referenced.text
            ProtobufFormat._collect(referenced, fetch, files)

    def message(self, indexes: list[int]) -> tuple[Any, list[SchemaField]]:
        """The message class the indexes name and its fields (cached)."""
        key = tuple(indexes)
        cached = self._classes.get(key)
        if cached is None:
            from google.protobuf import message_factory

            types = self.file.message_types_by_name
            try:
                descriptor = list(types.values())[indexes[0]]
                for index in indexes[1:]:
                    descriptor = descriptor.nested_types[index]
            except IndexError:
                raise PayloadMismatch(f"Protobuf message indexes {indexes} name no message of {self.where}") from None
            fields: list[SchemaField] = []
            self._walk(descriptor, (), fields, ())
            cached = self._classes[key] = (message_factory.GetMessageClass(descriptor), fields)
        return cached

    def every_message(self) -> list[list[int]]:
        """The message indexes of every message the schema's file defines, nested ones (map entries too: they
        are nested types, so indexes count them) included."""
        found: list[list[int]] = []

        def visit(descriptor: Any, indexes: list[int]) -> None:
            found.append(indexes)
            for index, nested in enumerate(descriptor.nested_types):
                visit(nested, [*indexes, index])

        for index, descriptor in enumerate(self.file.message_types_by_name.values()):
            visit(descriptor, [index])
        return found

    def _walk(self, descriptor: Any, steps: tuple[Step, ...], out: list[SchemaField], stack: tuple[str, ...]) -> None:
        if descriptor.full_name in stack:
            return
        stack = (*stack, descriptor.full_name)
        meta = _field_meta()
        for field in descriptor.fields:
            step_path = (*steps, Step("field", field.name))
            tags = frozenset(field.GetOptions().Extensions[meta].tags)
            entry = field.message_type
            is_map = entry is not None and entry.GetOptions().map_entry
            if field.is_repeated:
                child = entry.fields_by_name["value"] if is_map else field
                inner = (*step_path, Step("values" if is_map else "items"))
                leaf = _leaf(child)
                if leaf != "other":  # repeated / map of strings or bytes: the items carry the field's tags
                    out.append(SchemaField(step_path, "container", _type_name(field), tags))
                    out.append(SchemaField(inner, leaf, _type_name(child), tags))
                else:
                    out.append(SchemaField(step_path, "other", _type_name(field), tags))
                if child.message_type is not None:
                    self._walk(child.message_type, inner, out, stack)
                continue
            out.append(SchemaField(step_path, _leaf(field), _type_name(field), tags, bool(field.has_presence)))
            if entry is not None:
                self._walk(entry, step_path, out, stack)

    def decode(self, payload: bytes) -> tuple[Any, list[SchemaField], bytes]:
        """(message, its fields, the index bytes to write back)."""
        indexes, start = split_indexes(payload)
        cls, fields = self.message(indexes)
        message = cls()
        try:
            message.ParseFromString(payload[start:])
        except Exception as exc:  # noqa: BLE001 - DecodeError and friends
            raise PayloadMismatch(f"payload does not read as {self.where}: {type(exc).__name__}") from None
        before = message.SerializeToString(deterministic=True)
        message.DiscardUnknownFields()
        if message.SerializeToString(deterministic=True) != before:
            raise PayloadMismatch(f"payload has fields {self.where} does not declare (unknown fields)")
        return message, fields, payload[:start]

    @staticmethod
    def encode(message: Any, index_bytes: bytes) -> bytes:
        """Deterministic: map entries in upb's sorted order (``fields._written_order``), which the JVM engine
        writes too, so both engines write the same bytes."""
        return index_bytes + bytes(message.SerializeToString(deterministic=True))


def _leaf(field: Any) -> LeafKind:
    if field.type == _TYPE_STRING:
        return "string"
    if field.type == _TYPE_BYTES:
        return "bytes"
    return "other"


def _type_name(field: Any) -> str:
    entry = field.message_type
    if entry is not None and entry.GetOptions().map_entry:
        return f"map<{_type_name(entry.fields_by_name['key'])}, {_type_name(entry.fields_by_name['value'])}>"
    base = entry.full_name if entry is not None else (field.enum_type.full_name if field.enum_type else "")
    if not base:
        from google.protobuf.descriptor import FieldDescriptor

        names = {v: k.removeprefix("TYPE_").lower() for k, v in vars(FieldDescriptor).items() if k.startswith("TYPE_")}
        base = names.get(field.type, str(field.type))
    return (
        f"repeated {base}" if field.is_repeated and not (entry is not None and entry.GetOptions().map_entry) else base
    )
