"""The ``strongroom.enc`` record header: the authoritative marker of an encrypted record.

Its value is two bytes, ``format version ‖ value mode``. A reader decides from this header alone
whether a record is encrypted and how; the value's own magic byte is a consistency check, not the
marker. Null values (tombstones) are never encrypted and never get the header, so log compaction
keeps working.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from strongroom.envelope.errors import MalformedEnvelope, UnknownValueMode, UnsupportedFormatVersion
from strongroom.envelope.ids import RECORD_HEADER_NAME, FormatVersion, ValueMode


class RecordMarker(NamedTuple):
    """The decoded ``strongroom.enc`` header."""

    version: FormatVersion
    mode: ValueMode

    def to_bytes(self) -> bytes:
        return bytes((self.version, self.mode))


def marker_header(mode: ValueMode) -> tuple[str, bytes]:
    """The ``(name, value)`` header to put on a record encrypted in ``mode`` (current version)."""
    return RECORD_HEADER_NAME, bytes((FormatVersion.V1, mode))


def parse_marker(value: bytes | None) -> RecordMarker:
    """Decode a ``strongroom.enc`` header value; raise the precise error for each bad byte."""
    if value is None or len(value) != 2:
        size = "null" if value is None else f"{len(value)} bytes"
        raise MalformedEnvelope(f"header {RECORD_HEADER_NAME!r} must be exactly 2 bytes (version, mode), got {size}")
    version, mode = value[0], value[1]
    if version != FormatVersion.V1:
        raise UnsupportedFormatVersion(
            f"header {RECORD_HEADER_NAME!r} has format version 0x{version:02x}; this strongroom reads 0x01"
        )
    try:
        value_mode = ValueMode(mode)
    except ValueError:
        raise UnknownValueMode(f"header {RECORD_HEADER_NAME!r} has unknown value mode 0x{mode:02x}") from None
    return RecordMarker(FormatVersion.V1, value_mode)


def find_marker(headers: Iterable[tuple[str, bytes | None]] | None) -> RecordMarker | None:
    """The marker among a record's headers, or None for a plain record. The first one wins."""
    if not headers:
        return None
    for name, value in headers:
        if name == RECORD_HEADER_NAME:
            return parse_marker(value)
    return None
