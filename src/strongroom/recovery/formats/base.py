"""The interface every record format implements for recovery, and the SQL helpers its Spark side uses.

A format answers three questions:

* :meth:`RecordFormat.record_keys` — for one record (headers + value), its kind and key prefixes;
* :meth:`RecordFormat.dependency` — for one key prefix, which KEK (and version) it needs and the EDEK
  to unwrap to prove that KEK is still there;
* :meth:`RecordFormat.spark_stages` — the same cut as a chain of Spark SQL expressions over the Kafka
  source's ``headers`` and ``value`` columns (each stage a named column the next ones may use, so a
  byte is decoded once per record), so a scan over millions of records runs in the JVM and only
  distinct prefixes reach Python.

The Python cut and the SQL cut follow the same rules byte for byte (missing bytes read as 0, then
one length check); an integration test feeds both the same records, garbage included.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Final

from strongroom.recovery.dependency import KeyDependency, RecordKeys

Headers = Sequence[tuple[str, bytes | None]] | None

#: GCM nonce (12) and tag (16): every envelope and Kroxylicious wrapper has at least these after the
#: key prefix (plus one AAD/profile byte).
MIN_BODY: Final = 1 + 12 + 16


class MalformedPrefix(ValueError):
    """A key prefix that does not parse; the message names the bad byte (never key material)."""


class RecordFormat(ABC):
    """A record encryption format whose key dependencies recovery can read."""

    #: ``strongroom`` or ``kroxylicious``.
    name: str
    #: Name of the record header that marks an encrypted record.
    marker_header: str

    @abstractmethod
    def record_keys(self, headers: Headers, value: bytes | None) -> RecordKeys:
        """Kind and key prefixes of one record (never raises for bad bytes: MALFORMED instead)."""

    @abstractmethod
    def dependency(self, prefix: bytes) -> KeyDependency:
        """The KEK a key prefix depends on; :class:`MalformedPrefix` if the bytes do not parse."""

    @abstractmethod
    def spark_stages(self, *, full: bool = True) -> list[tuple[str, str]]:
        """Ordered ``(column, SQL expression)`` stages over ``headers``/``value`` ending with ``kind``
        ('plain', 'tombstone', 'encrypted', 'malformed') and ``prefixes`` (array<binary>, null unless
        encrypted). Helper columns start with ``_``.

        With ``full=False`` a format may leave records that need Spark's higher-order functions
        (lambdas: interpreted row by row, and they take the whole projection out of code generation)
        as kind ``'deferred'``; the caller then reruns with ``full=True`` only if any were found."""

    def describe(self) -> dict[str, str]:
        """What to write into plans and reports about this format (no secrets)."""
        return {"format": self.name}


def first_header(headers: Headers, name: str) -> tuple[bool, bytes | None]:
    """``(found, value)`` of the first header called ``name`` (the first one wins in both formats)."""
    for key, value in headers or ():
        if key == name:
            return True, value
    return False, None


def byte_at(data: bytes, index: int) -> int:
    """The byte at a 0-based index, or 0 past the end (the rule the SQL side follows too)."""
    return data[index] if 0 <= index < len(data) else 0


# ---------------------------------------------------------------------------------------- SQL helpers
def sql_string(text: str) -> str:
    """A Spark SQL string literal (single quotes doubled; only ASCII names are ever passed)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def sql_marker_stages(name: str) -> list[tuple[str, str]]:
    """``_mpos`` (1-based position of the first header called ``name``, 0 if none) and ``_marker`` (its value).

    ``headers.key`` / ``headers.value`` are plain field extractions: no lambda, which Spark would
    interpret row by row instead of compiling.
    """
    return [
        ("_mpos", f"coalesce(array_position(headers.key, {sql_string(name)}), 0)"),
        ("_marker", "CASE WHEN _mpos > 0 THEN element_at(headers.value, cast(_mpos AS INT)) END"),
    ]


def sql_byte(column: str, position: str | int) -> str:
    """Unsigned byte at a 1-based position of a binary column; 0 past the end."""
    return f"coalesce(cast(conv(hex(substring({column}, {position}, 1)), 16, 10) as int), 0)"


def sql_u16(column: str, position: str | int) -> str:
    """Big-endian unsigned 16-bit integer at a 1-based position; missing bytes read as 0."""
    return f"({sql_byte(column, position)} * 256 + {sql_byte(column, f'({position}) + 1')})"
