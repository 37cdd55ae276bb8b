"""Records written by the Kroxylicious record-encryption filter (encryption version 2).

Facts from ``docs/reference`` (kroxylicious-record-encryption-format.md): header
``kroxylicious.io/encryption`` = one byte ``0x02``; value = wrapper V2::

    cipher id (00 = AES-256-GCM) | uvarint EDEK length | EDEK | AAD id (00) | IV(12) | ciphertext‖tag

and the plaintext is a parcel V1 (zig-zag varint value length + value, header count or −2 "absent").
The EDEK layout depends on the KMS, which the record does not name — the operator says which
(``--kms vault|aws|inmemory``):

* Vault Transit: uvarint length + key name, then the ``vault:vN:<base64>`` ciphertext string.
* AWS KMS: ``00`` | uvarint length + KeyId | CiphertextBlob.
* in-memory (Kroxylicious's test KMS): tag bits (``80``) | IV length (``0C``) | IV | 16-byte KEK
  UUID | AES-GCM wrapped DEK.

Key prefix = cipher id + EDEK length + EDEK. Vault and AWS EDEKs map onto strongroom's own
:class:`~strongroom.kms.api.Edek` exactly as strongroom's Vault/AWS providers write them, so those
providers unwrap them unchanged; the in-memory KMS is :class:`KroxyliciousInMemoryKms`.
"""

from __future__ import annotations

import base64
import binascii
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from strongroom.kms.api import DekPair, Edek, KekState, Kms
from strongroom.kms.errors import EdekInvalid, KekNotFound, UnknownAlias
from strongroom.recovery.dependency import KeyDependency, RecordKeys, RecordKind
from strongroom.recovery.errors import UnknownRecordFormat
from strongroom.recovery.formats.base import (
    MIN_BODY,
    Headers,
    MalformedPrefix,
    RecordFormat,
    byte_at,
    first_header,
    sql_byte,
    sql_marker_stages,
)

MARKER_HEADER: Final = "kroxylicious.io/encryption"
ENCRYPTION_V2: Final = 0x02
CIPHER_AES_256_GCM: Final = 0x00
AAD_NONE: Final = 0x00
MAX_EDEK: Final = 32767
KmsKind = Literal["vault", "aws", "inmemory"]
KMS_KINDS: Final = ("vault", "aws", "inmemory")
_VAULT_VERSION: Final = re.compile(rb"^vault:v(\d+):")
_INMEMORY_TAG_BITS: Final = 0x80
_IV: Final = 12


# ---------------------------------------------------------------------------------------- varints
def read_uvarint(data: bytes, pos: int) -> tuple[int, int]:
    """Unsigned LEB128 at ``pos`` → (value, next position); :class:`MalformedPrefix` when cut or too long."""
    result = shift = 0
    for i in range(5):
        if pos + i >= len(data):
            raise MalformedPrefix("varint runs past the end")
        byte = data[pos + i]
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos + i + 1
        shift += 7
    raise MalformedPrefix("varint longer than 5 bytes")


def write_uvarint(value: int) -> bytes:
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def read_zvarint(data: bytes, pos: int) -> tuple[int, int]:
    """Kafka signed varint (zig-zag): 01 → −1, 03 → −2."""
    raw, pos = read_uvarint(data, pos)
    return (raw >> 1) ^ -(raw & 1), pos


def write_zvarint(value: int) -> bytes:
    return write_uvarint((value << 1) ^ (value >> 63))


def _edek_length_prefix(value: bytes) -> tuple[int, int]:
    """(EDEK length, varint size) the way the SQL side reads them (at most 3 varint bytes, 0 past the end)."""
    b0, b1, b2 = byte_at(value, 1), byte_at(value, 2), byte_at(value, 3)
    if b0 < 0x80:
        return b0, 1
    if b1 < 0x80:
        return (b0 & 0x7F) | (b1 << 7), 2
    return (b0 & 0x7F) | ((b1 & 0x7F) << 7) | (b2 << 14), 3


# ---------------------------------------------------------------------------------------- format
class KroxyliciousFormat(RecordFormat):
    """Key dependencies of Kroxylicious-encrypted records whose EDEKs come from ``kms_kind``."""

    name = "kroxylicious"
    marker_header = MARKER_HEADER

    def __init__(self, kms_kind: str, provider_name: str | None = None) -> None:
        if kms_kind not in KMS_KINDS:
            raise UnknownRecordFormat(
                f"Kroxylicious records need the KMS that wrote them; {kms_kind!r} is not one of {', '.join(KMS_KINDS)}",
                hint="pass --kms vault, --kms aws or --kms inmemory (the record does not say which KMS wrote it)",
            )
        self.kms_kind = kms_kind
        #: The name of the strongroom KMS that will unwrap (Edek.provider must equal it).
        self.provider_name = provider_name or kms_kind

    def describe(self) -> dict[str, str]:
        return {"format": self.name, "kms": self.kms_kind}

    # ------------------------------------------------------------------ Python side
    def record_keys(self, headers: Headers, value: bytes | None) -> RecordKeys:
        found, marker = first_header(headers, MARKER_HEADER)
        if not found:
            return RecordKeys.plain(value)
        if marker is None or len(marker) != 1:
            return RecordKeys.malformed(f"header {MARKER_HEADER!r} must be exactly 1 byte")
        if marker[0] != ENCRYPTION_V2:
            why = "V1 wrappers (Kroxylicious 0.4) are unsupported" if marker[0] == 1 else "unknown version"
            return RecordKeys.malformed(f"header {MARKER_HEADER!r} is encryption version 0x{marker[0]:02x}: {why}")
        if value is None:
            return RecordKeys.malformed(f"record has a {MARKER_HEADER!r} header but a null value")
        edek_len, varint_len = _edek_length_prefix(value)
        length = 1 + varint_len + edek_len
        if len(value) < length + MIN_BODY:
            return RecordKeys.malformed(f"wrapper of {len(value)} bytes is truncated")
        return RecordKeys(RecordKind.ENCRYPTED, (value[:length],))

    def dependency(self, prefix: bytes) -> KeyDependency:
        if not prefix or prefix[0] != CIPHER_AES_256_GCM:
            cipher = f"0x{prefix[0]:02x}" if prefix else "nothing"
            raise MalformedPrefix(f"wrapper cipher id {cipher} is not AES-256-GCM (0x00)")
        edek_len, pos = read_uvarint(prefix, 1)
        if edek_len == 0 or edek_len > MAX_EDEK or len(prefix) != pos + edek_len:
            raise MalformedPrefix(f"wrapper EDEK length {edek_len} is out of range")
        edek_bytes = prefix[pos:]
        kek_id, version, ciphertext = self._parse_edek(edek_bytes)
        edek = Edek(self.provider_name, kek_id, ciphertext)
        return KeyDependency(kek=edek.kek_ref, kek_id=kek_id, provider=self.provider_name, version=version, edek=edek)

    def _parse_edek(self, edek: bytes) -> tuple[str, str | None, bytes]:
        """(KEK id, version, provider ciphertext) of a Kroxylicious EDEK for this KMS kind."""
        if self.kms_kind == "vault":
            name_len, pos = read_uvarint(edek, 0)
            name, rest = _utf8(edek[pos : pos + name_len], "Vault key name"), edek[pos + name_len :]
            match = _VAULT_VERSION.match(rest)
            if pos + name_len > len(edek) or not name or match is None:
                raise MalformedPrefix("Vault EDEK is not 'key name + vault:vN:...'")
            return name, f"v{match.group(1).decode()}", rest
        if self.kms_kind == "aws":
            if not edek or edek[0] != 0x00:
                raise MalformedPrefix("AWS EDEK does not start with version 0x00")
            id_len, pos = read_uvarint(edek, 1)
            key_id, blob = _utf8(edek[pos : pos + id_len], "AWS KeyId"), edek[pos + id_len :]
            if not key_id or not blob:
                raise MalformedPrefix("AWS EDEK has no KeyId or no CiphertextBlob")
            return key_id, None, blob
        # in-memory: tag bits | iv length | iv | 16-byte KEK UUID | wrapped DEK
        if len(edek) < 2 or edek[0] != _INMEMORY_TAG_BITS or edek[1] != _IV or len(edek) < 2 + _IV + 16 + 17:
            raise MalformedPrefix("in-memory EDEK is not 'tag bits 0x80, IV length 12, IV, KEK UUID, wrapped DEK'")
        kek_uuid = uuid.UUID(bytes=edek[2 + _IV : 2 + _IV + 16])
        return str(kek_uuid), None, edek[: 2 + _IV] + edek[2 + _IV + 16 :]

    # ------------------------------------------------------------------ Spark side
    def spark_stages(self, *, full: bool = True) -> list[tuple[str, str]]:
        b0, b1, b2 = sql_byte("value", 2), sql_byte("value", 3), sql_byte("value", 4)
        return [
            *sql_marker_stages(MARKER_HEADER),
            ("_b0", b0),
            ("_b1", b1),
            ("_b2", b2),
            ("_len", "1 + CASE WHEN _b0 < 128 THEN 1 + _b0 WHEN _b1 < 128 THEN 2 + (_b0 - 128) + _b1 * 128 "
                     "ELSE 3 + (_b0 - 128) + (_b1 - 128) * 128 + _b2 * 16384 END"),
            ("kind", "CASE WHEN _mpos = 0 THEN (CASE WHEN value IS NULL THEN 'tombstone' ELSE 'plain' END) "
                     f"WHEN _marker IS NULL OR length(_marker) != 1 OR {sql_byte('_marker', 1)} != {ENCRYPTION_V2} "
                     "OR value IS NULL THEN 'malformed' "
                     f"WHEN length(value) < _len + {MIN_BODY} THEN 'malformed' ELSE 'encrypted' END"),
            ("prefixes", "CASE WHEN kind = 'encrypted' THEN array(substring(value, 1, _len)) END"),
        ]  # fmt: skip


def _utf8(data: bytes, what: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise MalformedPrefix(f"{what} is not UTF-8") from None


# ---------------------------------------------------------------------------------------- in-memory KMS
class KroxyliciousInMemoryKms(Kms):
    """Kroxylicious's in-memory test KMS, read-only: fixed KEKs by UUID (to read its test records).

    ``Edek.ciphertext`` = tag bits | IV length | IV | wrapped DEK (the KEK UUID is the ``kek_id``).
    """

    def __init__(self, keks: Mapping[str, bytes], name: str = "inmemory") -> None:
        self.name = name
        self._keks = {str(uuid.UUID(k)): bytes(v) for k, v in keks.items()}
        for kek_id, key in self._keks.items():
            if len(key) != 32:
                raise EdekInvalid(f"in-memory KEK {kek_id} must be 32 bytes (AES-256), got {len(key)}")

    @classmethod
    def from_json(cls, data: Mapping[str, str], name: str = "inmemory") -> KroxyliciousInMemoryKms:
        """``{"<kek uuid>": "<base64 AES-256 key>"}`` as in kroxylicious-vectors.json."""
        try:
            return cls({k: base64.b64decode(v, validate=True) for k, v in data.items()}, name=name)
        except (binascii.Error, ValueError, TypeError):
            raise EdekInvalid(
                "in-memory KEK file must map KEK UUIDs to base64 AES-256 keys",
                hint='write {"<uuid>": "<base64 key>"}',
            ) from None

    def resolve_alias(self, alias: str) -> str:
        if alias in self._keks:
            return alias
        raise UnknownAlias(f"in-memory KMS has no KEK {alias!r}")

    def generate_dek(self, kek_id: str) -> DekPair:
        raise EdekInvalid("the Kroxylicious in-memory KMS is read-only here (recovery reads, never writes)")

    def wrap(self, kek_id: str, plaintext: bytes, context: bytes = b"") -> Edek:
        raise EdekInvalid("the Kroxylicious in-memory KMS is read-only here (recovery reads, never writes)")

    def unwrap(self, edek: Edek) -> bytes:
        self.check_provider(edek)
        kek = self._keks.get(edek.kek_id)
        if kek is None:
            raise KekNotFound(f"KEK {edek.kek_ref} is not among the in-memory KEKs given")
        data = edek.ciphertext
        if len(data) < 2 + _IV + 17 or data[1] != _IV:
            raise EdekInvalid(f"in-memory EDEK of KEK {edek.kek_ref} is truncated")
        try:
            return AESGCM(kek).decrypt(data[2 : 2 + _IV], data[2 + _IV :], None)
        except InvalidTag:
            raise EdekInvalid(f"in-memory EDEK does not open under KEK {edek.kek_ref}") from None

    def describe_kek(self, kek_id: str) -> KekState:
        return KekState.ENABLED if kek_id in self._keks else KekState.MISSING


# ---------------------------------------------------------------------------------------- full decrypt
@dataclass(frozen=True)
class DecryptedRecord:
    """A Kroxylicious record after decryption: the original value and headers."""

    value: bytes | None
    headers: list[tuple[str, bytes | None]]


def decrypt_record(headers: Headers, value: bytes | None, fmt: KroxyliciousFormat, kms: Kms) -> DecryptedRecord:
    """Decrypt one Kroxylicious record the way the proxy does on fetch (wrapper V2 + parcel V1).

    Recovery itself only checks key availability; this full path exists for the compatibility
    test and for operators who want to look at a record the scan flagged.
    """
    keys = fmt.record_keys(headers, value)
    if keys.kind is not RecordKind.ENCRYPTED:
        if keys.kind is RecordKind.MALFORMED:
            raise MalformedPrefix(keys.problem or "malformed record")
        return DecryptedRecord(value, list(headers or ()))
    assert value is not None
    prefix = keys.prefixes[0]
    dependency = fmt.dependency(prefix)
    assert dependency.edek is not None
    dek = kms.unwrap(dependency.edek)
    pos = len(prefix)
    if value[pos] != AAD_NONE:
        raise MalformedPrefix(f"wrapper AAD id 0x{value[pos]:02x} is not 'none' (0x00)")
    iv = value[pos + 1 : pos + 1 + _IV]
    try:
        parcel = AESGCM(dek).decrypt(iv, value[pos + 1 + _IV :], b"")
    except InvalidTag:
        raise MalformedPrefix("wrapper ciphertext does not authenticate under its DEK") from None
    return _read_parcel(parcel, headers, value)


def _read_parcel(parcel: bytes, headers: Headers, own_value: bytes) -> DecryptedRecord:
    length, pos = read_zvarint(parcel, 0)
    value: bytes | None
    if length == -1:
        value = None
    elif length == -2:
        value = own_value
    else:
        value, pos = parcel[pos : pos + length], pos + length
    count, pos = read_zvarint(parcel, pos)
    if count == -2:  # absent: the record's own headers minus the marker when it comes first
        own = list(headers or ())
        if own and own[0][0] == MARKER_HEADER:
            own = own[1:]
        return DecryptedRecord(value, own)
    out: list[tuple[str, bytes | None]] = []
    for _ in range(max(count, 0)):
        key_len, pos = read_uvarint(parcel, pos)
        key, pos = _utf8(parcel[pos : pos + key_len], "header key"), pos + key_len
        value_len, pos = read_zvarint(parcel, pos)
        if value_len < 0:
            out.append((key, None))
        else:
            out.append((key, parcel[pos : pos + value_len]))
            pos += value_len
    return DecryptedRecord(value, out)


def encode_record(plaintext: bytes, dek: bytes, edek: bytes, iv: bytes) -> tuple[list[tuple[str, bytes | None]], bytes]:
    """Encrypt like the proxy: (headers, value) for ``plaintext`` under a DEK and its Kroxylicious EDEK.

    Used to build test topics to the specification (the proxy itself is Java); writes the full value
    and "absent" headers in the parcel, as the proxy does.
    """
    parcel = write_zvarint(len(plaintext)) + plaintext + write_zvarint(-2)
    body = AESGCM(dek).encrypt(iv, parcel, b"")
    value = bytes((CIPHER_AES_256_GCM,)) + write_uvarint(len(edek)) + edek + bytes((AAD_NONE,)) + iv + body
    return [(MARKER_HEADER, bytes((ENCRYPTION_V2,)))], value


def vault_edek(key_name: str, vault_ciphertext: str) -> bytes:
    """A Kroxylicious Vault EDEK: uvarint length + key name, then the ``vault:vN:`` string."""
    name = key_name.encode("utf-8")
    return write_uvarint(len(name)) + name + vault_ciphertext.encode("ascii")


def aws_edek(key_id: str, blob: bytes) -> bytes:
    """A Kroxylicious AWS EDEK: ``00`` | uvarint length + KeyId | CiphertextBlob."""
    kid = key_id.encode("utf-8")
    return b"\x00" + write_uvarint(len(kid)) + kid + blob
