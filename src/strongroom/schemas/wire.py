"""The Confluent wire format around a schema-registry serialized value.

``0x00`` (magic) ‖ ``u32be`` schema id ‖ payload. Protobuf payloads start with the message indexes
(zigzag varints, see :mod:`strongroom.schemas.protobuf_format`). strongroom never changes the frame:
an encrypted record keeps its magic byte and schema id, so it still reads with the same schema.
"""

from __future__ import annotations

import struct
from typing import Final, NamedTuple

from strongroom.schemas.errors import NotFramed

MAGIC: Final = 0
HEADER_SIZE: Final = 5
_ID: Final = struct.Struct(">I")


class Framed(NamedTuple):
    schema_id: int
    payload: bytes


def unframe(value: bytes) -> Framed:
    """The schema id and payload of ``value``; :class:`NotFramed` naming what is wrong."""
    if len(value) < HEADER_SIZE:
        raise NotFramed(f"value of {len(value)} bytes is too short for the Confluent wire format (5-byte header)")
    if value[0] != MAGIC:
        raise NotFramed(f"value starts with byte 0x{value[0]:02x}, not the Confluent magic byte 0x00")
    return Framed(_ID.unpack_from(value, 1)[0], value[HEADER_SIZE:])


def frame(schema_id: int, payload: bytes) -> bytes:
    return bytes((MAGIC,)) + _ID.pack(schema_id) + payload
