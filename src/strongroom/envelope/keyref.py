"""Key references: how an envelope names the key that opens it.

``SubjectKeyRef`` points into the per-subject key table (crypto-shredding: erase the key, the
subject's data is gone). ``WrappedDekRef`` carries the wrapped DEK itself plus a provider-qualified
KEK reference, so a reader needs only the KMS.

Both pre-encode their wire bytes once, so sealing a record does not re-encode the reference.
"""

from __future__ import annotations

import struct
from typing import Final

from strongroom.envelope.errors import EncodingLimitExceeded, InvalidKeyRef
from strongroom.envelope.ids import (
    MAGIC,
    SUBJECT_KEY_ID_SIZE,
    AadProfile,
    Cipher,
    FormatVersion,
    KeyRefKind,
)

_U16: Final = struct.Struct(">H")
_MAX_U16: Final = 0xFFFF


def _fixed_prefix(kind: KeyRefKind) -> bytes:
    return bytes((MAGIC, FormatVersion.V1, Cipher.AES_256_GCM, kind))


def _headers_by_profile(prefix: bytes) -> tuple[bytes, ...]:
    """Headers indexed by profile id (a tuple: indexing by an IntEnum is a C-level lookup)."""
    return tuple(prefix + bytes((i,)) for i in range(max(AadProfile) + 1))


class SubjectKeyRef:
    """Reference to a per-subject key by its random 16-byte id."""

    __slots__ = ("_headers", "key_id", "seal_frames")
    kind: Final = KeyRefKind.SUBJECT_KEY

    def __init__(self, key_id: bytes) -> None:
        if not isinstance(key_id, bytes) or len(key_id) != SUBJECT_KEY_ID_SIZE:
            size = len(key_id) if isinstance(key_id, bytes) else type(key_id).__name__
            raise InvalidKeyRef(f"a subject key id is {SUBJECT_KEY_ID_SIZE} bytes, got {size}")
        self.key_id = key_id
        self._headers: tuple[bytes, ...] | None = None
        #: Codec-internal cache: (topic, profile, field path) → (header, AAD prefix, AAD suffix).
        self.seal_frames: dict[tuple[str, int, str], tuple[bytes, bytes, bytes]] = {}

    @classmethod
    def trusted(cls, key_id: bytes) -> SubjectKeyRef:
        """Build from bytes the parser already checked (skips validation on the decrypt hot path)."""
        ref = cls.__new__(cls)
        ref.key_id = key_id
        ref._headers = None
        ref.seal_frames = {}
        return ref

    def encode(self) -> bytes:
        """The key-ref bytes as they appear in the envelope."""
        return self.key_id

    def header(self, profile: AadProfile) -> bytes:
        """Every envelope byte before the nonce, for this key and AAD profile."""
        headers = self._headers
        if headers is None:
            headers = self._headers = _headers_by_profile(_fixed_prefix(self.kind) + self.key_id)
        return headers[profile]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SubjectKeyRef) and other.key_id == self.key_id

    def __hash__(self) -> int:
        return hash((KeyRefKind.SUBJECT_KEY, self.key_id))

    def __repr__(self) -> str:
        return f"SubjectKeyRef(key_id={self.key_id.hex()})"


class WrappedDekRef:
    """A provider-qualified KEK reference (``vault:orders-kek``) and the EDEK it wrapped."""

    __slots__ = ("_encoded", "_headers", "edek", "kek_ref", "seal_frames")
    kind: Final = KeyRefKind.WRAPPED_DEK

    def __init__(self, kek_ref: str, edek: bytes) -> None:
        if not isinstance(kek_ref, str):
            raise InvalidKeyRef(f"a KEK reference is a str, got {type(kek_ref).__name__}")
        provider, sep, kek_id = kek_ref.partition(":")
        if not sep or not provider or not kek_id:
            raise InvalidKeyRef(f"a KEK reference is 'provider:kek-id', got {kek_ref!r}")
        if not isinstance(edek, bytes) or not edek:
            raise InvalidKeyRef("an EDEK is a non-empty bytes value")
        kek_bytes = kek_ref.encode("utf-8")
        if len(kek_bytes) > _MAX_U16 or len(edek) > _MAX_U16:
            raise EncodingLimitExceeded(
                f"KEK reference ({len(kek_bytes)} bytes) and EDEK ({len(edek)} bytes) must each fit in {_MAX_U16} bytes"
            )
        self.kek_ref = kek_ref
        self.edek = edek
        self._encoded = _U16.pack(len(kek_bytes)) + kek_bytes + _U16.pack(len(edek)) + edek
        self._headers: tuple[bytes, ...] | None = None
        #: Codec-internal cache: (topic, profile, field path) → (header, AAD prefix, AAD suffix).
        self.seal_frames: dict[tuple[str, int, str], tuple[bytes, bytes, bytes]] = {}

    @property
    def provider(self) -> str:
        return self.kek_ref.partition(":")[0]

    @property
    def kek_id(self) -> str:
        return self.kek_ref.partition(":")[2]

    def encode(self) -> bytes:
        """The key-ref bytes as they appear in the envelope."""
        return self._encoded

    def header(self, profile: AadProfile) -> bytes:
        """Every envelope byte before the nonce, for this key and AAD profile."""
        headers = self._headers
        if headers is None:
            headers = self._headers = _headers_by_profile(_fixed_prefix(self.kind) + self._encoded)
        return headers[profile]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, WrappedDekRef) and other._encoded == self._encoded

    def __hash__(self) -> int:
        return hash((KeyRefKind.WRAPPED_DEK, self._encoded))

    def __repr__(self) -> str:
        return f"WrappedDekRef(kek_ref={self.kek_ref!r}, edek=<{len(self.edek)} bytes>)"


KeyRef = SubjectKeyRef | WrappedDekRef
