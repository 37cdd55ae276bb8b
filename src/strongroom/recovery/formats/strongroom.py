"""strongroom's own records: the ``strongroom.enc`` header and envelope v1 key references.

Key prefix = the envelope's first bytes through the end of its key reference::

    magic F5 | version 01 | cipher 01 | kind | key ref
    kind 01 SUBJECT_KEY:  16-byte subject key id                       (prefix: 20 bytes)
    kind 02 WRAPPED_DEK:  u16 len + "provider:kek-id" | u16 len + EDEK  (prefix: 8 + both lengths)

Whole-value records have one prefix; JSON-field records one per encrypted field (``"sr1:<base64
envelope>"`` strings, found textually — the same regular expression on both the Python and the Spark
side; a ``\\/`` JSON escape inside the base64 is undone).

Schema-registry records (value mode 0x03: Avro, JSON Schema, Protobuf) carry their sealed string fields
as ``sr1:<base64 envelope>`` inside a binary payload, without quotes and with no length the cut could
trust without the schema: the prefix comes from the first 28 base64 characters (21 bytes: a subject-key
envelope's 20-byte prefix and its profile byte). strongroom seals schema fields with subject keys only;
an ``sr1:`` run that decodes to anything else is malformed.

Sealed **bytes** fields (Avro, Protobuf) hold raw envelopes. Every field of a record is sealed under the
record's one subject key, so a record with a sealed string field needs nothing more. A record without one
is searched for raw subject-key envelopes, without the schema: the bytes ``F5 01 01 01``, a known AAD
profile byte 20 bytes on, and just before them a length field that states a length an envelope can have
(≥ 49 bytes, within the value): Avro's zigzag varint ``2L`` or Protobuf's varint ``L`` (the smallest such
``L`` wins). The search resumes after each envelope found, so bytes inside one are never read as another.
Plaintext that mimics this (an unsealed bytes field holding an envelope-like run, or a copy of a real
envelope) reads as a dependency on the subject key it names (docs/schema-aware.md, "Recovery").

A WRAPPED_DEK prefix names its KEK directly. A SUBJECT_KEY prefix names a per-subject key, whose
KEK is found through the keys topic chain (subject key → wrapping key → KMS KEK); the checker does
that, not the format.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from typing import Final

from strongroom.envelope.ids import (
    FIELD_PREFIX,
    MAGIC,
    RECORD_HEADER_NAME,
    SUBJECT_KEY_ID_SIZE,
    AadProfile,
    Cipher,
    FormatVersion,
    KeyRefKind,
    ValueMode,
)
from strongroom.kms.api import Edek
from strongroom.kms.errors import EdekInvalid
from strongroom.recovery.dependency import KeyDependency, RecordKeys, RecordKind
from strongroom.recovery.formats.base import (
    MIN_BODY,
    Headers,
    MalformedPrefix,
    RecordFormat,
    byte_at,
    first_header,
    sql_byte,
    sql_marker_stages,
    sql_u16,
)

_SUBJECT: Final = int(KeyRefKind.SUBJECT_KEY)
_WRAPPED: Final = int(KeyRefKind.WRAPPED_DEK)
_SUBJECT_PREFIX_LEN: Final = 4 + SUBJECT_KEY_ID_SIZE
_FIELD_RE: Final = re.compile(r'"' + re.escape(FIELD_PREFIX) + r'([A-Za-z0-9+/=\\]*)"')
#: A sealed string field of a schema-registry record: the first 28 base64 characters of its envelope.
_SCHEMA_FIELD_RE: Final = re.compile(r"sr1:([A-Za-z0-9+/]{28})")
_SCHEMA_FIELD_SQL_RE: Final = "sr1:([A-Za-z0-9+/]{28})"
_SUBJECT_MAGIC: Final = bytes((MAGIC, FormatVersion.V1, Cipher.AES_256_GCM, _SUBJECT))
#: The shortest subject-key envelope (empty plaintext) and the AAD profiles a raw one may name.
_SUBJECT_MIN_ENVELOPE: Final = _SUBJECT_PREFIX_LEN + MIN_BODY
_PROFILES: Final = tuple(int(profile) for profile in AadProfile)
#: A length field before a raw envelope: a varint of at most 5 bytes (a 32-bit length).
_VARINT_MAX: Final = 5
_VAULT_VERSION: Final = re.compile(rb"^vault:v(\d+):")
#: The Spark twin of ``_FIELD_RE`` (a Java regex inside a SQL string literal: backslashes doubled twice).
_FIELD_SQL_RE: Final = '"sr1:([A-Za-z0-9+/=\\\\\\\\]*)"'

#: Default mapping of a KEK reference's provider name to the KMS kind that wrote its EDEK.
DEFAULT_KMS_KINDS: Final = {"vault": "vault", "local": "local", "aws": "aws"}


def prefix_length(envelope: bytes) -> int:
    """Length of the key prefix of an envelope (missing bytes read as 0; the caller checks the length)."""
    kind = byte_at(envelope, 3)
    if kind == _SUBJECT:
        return _SUBJECT_PREFIX_LEN
    if kind == _WRAPPED:
        kek_len = byte_at(envelope, 4) * 256 + byte_at(envelope, 5)
        edek_len = byte_at(envelope, 6 + kek_len) * 256 + byte_at(envelope, 7 + kek_len)
        return 8 + kek_len + edek_len
    return 4


def _envelope_prefix(envelope: bytes) -> bytes | None:
    """The key prefix, or None when the envelope is too short to hold it plus a nonce and tag."""
    length = prefix_length(envelope)
    if len(envelope) < length + MIN_BODY:
        return None
    return envelope[:length]


def length_before(value: bytes, at: int) -> int | None:
    """The smallest envelope length a varint ending just before ``at`` states (Avro ``2L`` or Protobuf ``L``),
    among those a subject-key envelope starting at ``at`` can have; None when no reading fits."""
    room = len(value) - at
    best: int | None = None
    stated = 0
    for width in range(1, _VARINT_MAX + 1):
        index = at - width
        if index < 0:
            break
        byte = value[index]
        if (width == 1) == (byte >= 0x80):  # the last byte has the high bit clear, the others set
            break
        stated = byte if width == 1 else stated * 128 + byte - 0x80
        for length in (stated, stated // 2 if stated % 2 == 0 else -1):
            if _SUBJECT_MIN_ENVELOPE <= length <= room and (best is None or length < best):
                best = length
    return best


def raw_envelope_prefixes(value: bytes) -> list[bytes]:
    """Key prefixes of the raw subject-key envelopes in a schema record's sealed bytes fields (module doc)."""
    prefixes: list[bytes] = []
    at = value.find(_SUBJECT_MAGIC, 1)
    while at != -1:
        length = length_before(value, at)
        if length is not None and value[at + _SUBJECT_PREFIX_LEN] in _PROFILES:
            prefixes.append(value[at : at + _SUBJECT_PREFIX_LEN])
            at = value.find(_SUBJECT_MAGIC, at + length)
        else:
            at = value.find(_SUBJECT_MAGIC, at + 1)
    return prefixes


class StrongroomFormat(RecordFormat):
    """Key dependencies of strongroom envelopes (whole-value and JSON-field mode)."""

    name = "strongroom"
    marker_header = RECORD_HEADER_NAME

    def __init__(self, kms_kinds: Mapping[str, str] | None = None) -> None:
        #: provider name in KEK references → KMS kind ("vault", "local", "aws"), for reading versions.
        self.kms_kinds = dict(DEFAULT_KMS_KINDS if kms_kinds is None else kms_kinds)

    # ------------------------------------------------------------------ Python side
    def record_keys(self, headers: Headers, value: bytes | None) -> RecordKeys:
        found, marker = first_header(headers, RECORD_HEADER_NAME)
        if not found:
            return RecordKeys.plain(value)
        if marker is None or len(marker) != 2 or marker[0] != FormatVersion.V1:
            return RecordKeys.malformed(f"header {RECORD_HEADER_NAME!r} is not a version-1 marker")
        if value is None:
            return RecordKeys.malformed(f"record has a {RECORD_HEADER_NAME!r} header but a null value")
        if marker[1] == ValueMode.WHOLE_VALUE:
            prefix = _envelope_prefix(value)
            if prefix is None:
                return RecordKeys.malformed(f"envelope of {len(value)} bytes is truncated")
            return RecordKeys(RecordKind.ENCRYPTED, (prefix,))
        if marker[1] == ValueMode.JSON_FIELDS:
            return self._json_keys(value)
        if marker[1] == ValueMode.SCHEMA_FIELDS:
            return self._schema_keys(value)
        return RecordKeys.malformed(f"header {RECORD_HEADER_NAME!r} has unknown value mode 0x{marker[1]:02x}")

    def _json_keys(self, value: bytes) -> RecordKeys:
        prefixes: list[bytes] = []
        for match in _FIELD_RE.finditer(value.decode("utf-8", errors="replace")):
            try:
                envelope = base64.b64decode(match.group(1).replace("\\", ""), validate=True)
            except (binascii.Error, ValueError):
                return RecordKeys.malformed(f"an encrypted field is not base64 after {FIELD_PREFIX!r}")
            prefix = _envelope_prefix(envelope)
            if prefix is None:
                return RecordKeys.malformed(f"an encrypted field's envelope of {len(envelope)} bytes is truncated")
            prefixes.append(prefix)
        return RecordKeys(RecordKind.ENCRYPTED, tuple(prefixes))

    @staticmethod
    def _schema_keys(value: bytes) -> RecordKeys:
        prefixes: list[bytes] = []
        for match in _SCHEMA_FIELD_RE.finditer(value.decode("utf-8", errors="replace")):
            head = base64.b64decode(match.group(1))
            if head[:4] != _SUBJECT_MAGIC:
                return RecordKeys.malformed("a sealed field of a schema record does not hold a subject-key envelope")
            prefixes.append(head[:_SUBJECT_PREFIX_LEN])
        if not prefixes:
            prefixes = raw_envelope_prefixes(value)
        return RecordKeys(RecordKind.ENCRYPTED, tuple(prefixes))

    def dependency(self, prefix: bytes) -> KeyDependency:
        if len(prefix) < 4 or prefix[0] != MAGIC:
            raise MalformedPrefix("envelope does not start with the magic byte 0xF5")
        if prefix[1] != FormatVersion.V1:
            raise MalformedPrefix(f"envelope format version 0x{prefix[1]:02x} is not 0x01")
        if prefix[2] != Cipher.AES_256_GCM:
            raise MalformedPrefix(f"envelope cipher id 0x{prefix[2]:02x} is not known")
        kind = prefix[3]
        if kind == _SUBJECT:
            if len(prefix) != _SUBJECT_PREFIX_LEN:
                raise MalformedPrefix("subject key reference is not 16 bytes")
            key_id = prefix[4:]
            return KeyDependency(
                kek="(subject key)", kek_id="", provider="", version=None, edek=None, subject_key_id=key_id
            )
        if kind != _WRAPPED:
            raise MalformedPrefix(f"envelope key-reference kind 0x{kind:02x} is not known")
        kek_len = int.from_bytes(prefix[4:6], "big")
        edek_start = 8 + kek_len
        if kek_len == 0 or len(prefix) <= edek_start:
            raise MalformedPrefix(f"bad KEK reference length {kek_len}")
        try:
            kek_ref = prefix[6 : 6 + kek_len].decode("utf-8")
            edek = Edek.from_kek_ref(kek_ref, prefix[edek_start:])
        except UnicodeDecodeError:
            raise MalformedPrefix("KEK reference is not UTF-8") from None
        except EdekInvalid:
            raise MalformedPrefix("KEK reference is not 'provider:kek-id'") from None
        return KeyDependency(
            kek=edek.kek_ref,
            kek_id=edek.kek_id,
            provider=edek.provider,
            version=self.edek_version(edek),
            edek=edek,
        )

    def edek_version(self, edek: Edek) -> str | None:
        """The KEK version an EDEK was wrapped with, when its provider's format says (Vault, local)."""
        kind = self.kms_kinds.get(edek.provider)
        if kind == "vault":
            match = _VAULT_VERSION.match(edek.ciphertext)
            return f"v{match.group(1).decode()}" if match else None
        if kind == "local" and len(edek.ciphertext) >= 5 and edek.ciphertext[0] == 0x01:
            return f"v{int.from_bytes(edek.ciphertext[1:5], 'big')}"
        return None

    # ------------------------------------------------------------------ Spark side
    @staticmethod
    def _sql_prefix_length(v: str) -> str:
        kek_len = sql_u16(v, 5)
        edek_len = sql_u16(v, f"7 + {kek_len}")
        return (
            f"(CASE {sql_byte(v, 4)} WHEN {_SUBJECT} THEN {_SUBJECT_PREFIX_LEN} "
            f"WHEN {_WRAPPED} THEN 8 + {kek_len} + {edek_len} ELSE 4 END)"
        )

    @staticmethod
    def _sql_raw_envelope_stages(when: str) -> list[tuple[str, str]]:
        """The SQL twin of :func:`raw_envelope_prefixes` for the records ``when`` selects: ``_bpos`` (0-based
        positions of ``F5 01 01 01``, from the pieces a split around it leaves; the value read as ISO-8859-1,
        one character per byte), ``_bbytes`` (the 5 bytes before each, -1 before the start), ``_bcand`` (the
        length field's smallest fitting length, or null) and ``_braw`` (the prefixes, resuming after each)."""
        magic = "".join(f"\\\\x{b:02X}" for b in _SUBJECT_MAGIC)
        parts = f"split(decode(value, 'ISO-8859-1'), '{magic}', -1)"
        stated = ["cast(element_at(c.b, 1) AS BIGINT)"]
        valid = ["element_at(c.b, 1) BETWEEN 0 AND 127"]
        for width in range(2, _VARINT_MAX + 1):
            stated.append(f"({stated[-1]} * 128 + element_at(c.b, {width}) - 128)")
            valid.append(f"{valid[-1]} AND element_at(c.b, {width}) >= 128")
        readings = []
        for ok, length in zip(valid, stated, strict=True):
            readings += [f"CASE WHEN {ok} THEN {length} END"]  # Protobuf: L
            readings += [f"CASE WHEN {ok} AND {length} % 2 = 0 THEN {length} div 2 END"]  # Avro: zigzag 2L
        fits = f"x -> x >= {_SUBJECT_MIN_ENVELOPE} AND x <= length(value) - c.p"
        profiles = ", ".join(str(profile) for profile in _PROFILES)
        return [
            ("_bpos", f"CASE WHEN {when} THEN aggregate(slice({parts}, 1, size({parts}) - 1), "
                      "named_struct('at', 0, 'ps', cast(array() AS ARRAY<INT>)), (acc, part) -> named_struct("
                      "'at', acc.at + length(part) + 4, 'ps', concat(acc.ps, array(acc.at + length(part)))), "
                      "acc -> acc.ps) END"),
            ("_bbytes", f"transform(_bpos, p -> named_struct('p', p, 'b', transform(sequence(1, {_VARINT_MAX}), "
                        f"w -> CASE WHEN p >= w THEN {sql_byte('value', 'p - w + 1')} ELSE -1 END)))"),
            ("_bcand", f"transform(_bbytes, c -> named_struct('p', c.p, 'len', "
                       f"array_min(filter(array({', '.join(readings)}), {fits}))))"),
            ("_braw", "aggregate(_bcand, named_struct('skip', cast(0 AS BIGINT), "
                      "'out', cast(array() AS ARRAY<BINARY>)), (acc, c) -> "
                      "CASE WHEN c.p >= acc.skip AND c.len IS NOT NULL AND "
                      f"{sql_byte('value', f'c.p + {_SUBJECT_PREFIX_LEN + 1}')} IN ({profiles}) THEN named_struct("
                      "'skip', c.p + c.len, 'out', concat(acc.out, array(substring(value, c.p + 1, "
                      f"{_SUBJECT_PREFIX_LEN})))) ELSE acc END, acc -> acc.out)"),
        ]  # fmt: skip

    def spark_stages(self, *, full: bool = True) -> list[tuple[str, str]]:
        whole, fields, schema = int(ValueMode.WHOLE_VALUE), int(ValueMode.JSON_FIELDS), int(ValueMode.SCHEMA_FIELDS)
        decode = (
            f"transform(regexp_extract_all(cast(value AS STRING), '{_FIELD_SQL_RE}', 1), "
            f"s -> try_to_binary(replace(s, '\\\\', ''), 'base64'))"
        )
        too_short = f"length(e) < {self._sql_prefix_length('e')} + {MIN_BODY}"
        stages = [
            *sql_marker_stages(RECORD_HEADER_NAME),
            ("_mode", f"CASE WHEN _marker IS NOT NULL AND length(_marker) = 2 AND {sql_byte('_marker', 1)} = "
                      f"{int(FormatVersion.V1)} THEN {sql_byte('_marker', 2)} ELSE -1 END"),
            # Whole values: each length decoded once (a stage each), then the prefix length.
            ("_kek_len", sql_u16("value", 5)),
            ("_edek_len", sql_u16("value", "7 + _kek_len")),
            ("_plen", f"CASE {sql_byte('value', 4)} WHEN {_SUBJECT} THEN {_SUBJECT_PREFIX_LEN} "
                      f"WHEN {_WRAPPED} THEN 8 + _kek_len + _edek_len ELSE 4 END"),
        ]  # fmt: skip
        common = (
            "CASE WHEN _mpos = 0 THEN (CASE WHEN value IS NULL THEN 'tombstone' ELSE 'plain' END) "
            f"WHEN value IS NULL OR _mode NOT IN ({whole}, {fields}, {schema}) THEN 'malformed' "
            f"WHEN _mode = {whole} THEN (CASE WHEN length(value) < _plen + {MIN_BODY} THEN 'malformed' "
            "ELSE 'encrypted' END) "
        )
        whole_prefix = f"CASE WHEN kind = 'encrypted' AND _mode = {whole} THEN array(substring(value, 1, _plen)) END"
        if not full:  # JSON-field and schema records need lambdas: leave them for a second, full pass
            return [*stages, ("kind", common + "ELSE 'deferred' END"), ("prefixes", whole_prefix)]
        return [
            *stages,
            # JSON fields: one envelope per "sr1:" string.
            ("_fields", f"CASE WHEN _mode = {fields} AND value IS NOT NULL THEN {decode} END"),
            # Schema records: the first 28 base64 characters of each sealed string field.
            ("_sfields", f"CASE WHEN _mode = {schema} AND value IS NOT NULL THEN transform(regexp_extract_all("
                         f"cast(value AS STRING), '{_SCHEMA_FIELD_SQL_RE}', 1), s -> unbase64(s)) END"),
            # ... and, without one, the raw envelopes of sealed bytes fields.
            *self._sql_raw_envelope_stages(f"_mode = {schema} AND value IS NOT NULL AND size(_sfields) = 0"),
            ("kind", common + f"WHEN _mode = {schema} THEN (CASE WHEN exists(_sfields, e -> substring(e, 1, 4) != "
                     f"X'{_SUBJECT_MAGIC.hex().upper()}') THEN 'malformed' ELSE 'encrypted' END) "
                     f"WHEN exists(_fields, e -> e IS NULL OR {too_short}) THEN 'malformed' ELSE 'encrypted' END"),
            ("prefixes", f"CASE WHEN kind = 'encrypted' THEN (CASE WHEN _mode = {whole} "
                         "THEN array(substring(value, 1, _plen)) "
                         f"WHEN _mode = {schema} THEN coalesce(_braw, "
                         f"transform(_sfields, e -> substring(e, 1, {_SUBJECT_PREFIX_LEN}))) "
                         f"ELSE transform(_fields, e -> substring(e, 1, {self._sql_prefix_length('e')})) END) END"),
        ]  # fmt: skip
