"""The KMS contract: a small interface every provider implements, and the value types it returns.

Modelled on Kroxylicious's KMS module: generate a DEK pair, unwrap an EDEK, resolve an alias to a
KEK id, plus ``wrap`` (for key hierarchies and rewrapping), a batched unwrap, and ``describe_kek``
(for recovery and doctor). Only strongroom types cross this boundary; each provider maps its
client's exceptions onto :mod:`strongroom.kms.errors`.
"""

from __future__ import annotations

import base64
import binascii
import enum
import struct
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Final, Self

from strongroom.errors import KmsError
from strongroom.kms.errors import EdekInvalid, KekCreationRefused, KmsAccessDenied, KmsUnavailable

_EDEK_FORMAT: Final = 0x01


class KekState(enum.Enum):
    """What the KMS says about a KEK, normalised across providers."""

    ENABLED = "enabled"
    DISABLED = "disabled"
    PENDING_DELETION = "pending_deletion"
    MISSING = "missing"


@dataclass(frozen=True, slots=True)
class Edek:
    """A DEK wrapped by a KEK: the provider that wrapped it, the KEK id, and the provider's bytes.

    ``ciphertext`` is opaque outside the provider (Vault: the ``vault:vN:…`` string as UTF-8; AWS:
    the CiphertextBlob; local: strongroom's own layout).

    ``context`` is what the EDEK is *bound to* (authenticated, not secret): the KMS wrapped it with
    this context (Vault/OpenBao transit ``associated_data``, AWS ``EncryptionContext``, local AAD) and
    unwraps it only with the same one. It is never serialized with the EDEK: whoever stores the EDEK
    derives it again from where the EDEK lives (a wrapping key's id, :mod:`strongroom.keys.wrapping`),
    so an EDEK copied to another place does not unwrap there. Empty: not bound (every EDEK made before
    binding existed, and the envelope's per-record DEKs).
    """

    provider: str
    kek_id: str
    ciphertext: bytes
    context: bytes = field(default=b"", repr=False)

    def __post_init__(self) -> None:
        if not self.provider or ":" in self.provider or len(self.provider.encode("utf-8")) > 0xFF:
            raise EdekInvalid(f"EDEK provider name {self.provider!r} must be 1-255 bytes without ':'")
        if not self.kek_id or len(self.kek_id.encode("utf-8")) > 0xFFFF:
            raise EdekInvalid(f"EDEK KEK id of {len(self.kek_id)} characters must be 1-65535 bytes")
        if not self.ciphertext:
            raise EdekInvalid(f"EDEK of KEK {self.kek_ref!r} has no ciphertext")

    @property
    def kek_ref(self) -> str:
        """The provider-qualified KEK reference carried in envelopes, e.g. ``vault:orders-kek``."""
        return f"{self.provider}:{self.kek_id}"

    @classmethod
    def from_kek_ref(cls, kek_ref: str, ciphertext: bytes) -> Edek:
        """Rebuild an EDEK from an envelope's KEK reference and EDEK bytes."""
        provider, sep, kek_id = kek_ref.partition(":")
        if not sep:
            raise EdekInvalid(f"KEK reference {kek_ref!r} is not 'provider:kek-id'")
        return cls(provider, kek_id, ciphertext)

    def to_bytes(self) -> bytes:
        """``0x01 ‖ u8 len + provider ‖ u16be len + KEK id ‖ ciphertext`` (to the end)."""
        provider = self.provider.encode("utf-8")
        kek_id = self.kek_id.encode("utf-8")
        return b"".join(
            (
                bytes((_EDEK_FORMAT, len(provider))),
                provider,
                struct.pack(">H", len(kek_id)),
                kek_id,
                self.ciphertext,
            )
        )

    @classmethod
    def from_bytes(cls, data: bytes) -> Edek:
        """Inverse of :meth:`to_bytes`; :class:`EdekInvalid` for anything else."""
        try:
            if data[0] != _EDEK_FORMAT:
                raise EdekInvalid(f"serialized EDEK has format byte 0x{data[0]:02x}, expected 0x01")
            provider_end = 2 + data[1]
            provider = data[2:provider_end].decode("utf-8")
            (kek_len,) = struct.unpack_from(">H", data, provider_end)
            kek_end = provider_end + 2 + kek_len
            if len(data) <= kek_end:
                raise EdekInvalid(f"serialized EDEK of {len(data)} bytes is truncated")
            kek_id = data[provider_end + 2 : kek_end].decode("utf-8")
        except (IndexError, struct.error, UnicodeDecodeError):
            raise EdekInvalid(f"serialized EDEK of {len(data)} bytes is truncated or garbled") from None
        return cls(provider, kek_id, data[kek_end:])

    def to_dict(self) -> dict[str, str]:
        """A JSON-safe form (ciphertext in standard base64)."""
        return {
            "provider": self.provider,
            "kek_id": self.kek_id,
            "ciphertext": base64.b64encode(self.ciphertext).decode("ascii"),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Edek:
        try:
            ciphertext = base64.b64decode(data["ciphertext"], validate=True)
            return cls(str(data["provider"]), str(data["kek_id"]), ciphertext)
        except (KeyError, TypeError, binascii.Error, ValueError) as exc:
            if isinstance(exc, EdekInvalid):
                raise
            raise EdekInvalid(f"EDEK dict is missing or garbles a field ({type(exc).__name__})") from None

    def __repr__(self) -> str:
        return f"Edek(kek_ref={self.kek_ref!r}, ciphertext=<{len(self.ciphertext)} bytes>)"


@dataclass(frozen=True, slots=True)
class DekPair:
    """A fresh DEK and its EDEK. The repr never shows the DEK."""

    dek: bytes
    edek: Edek

    def __repr__(self) -> str:
        return f"DekPair(dek=<redacted {len(self.dek)} bytes>, edek={self.edek!r})"


#: Errors that concern the whole call, not one EDEK: ``unwrap_many`` raises them instead of
#: reporting them per item.
CALL_WIDE_ERRORS: Final = (KmsUnavailable, KmsAccessDenied)


class Kms(ABC):
    """A key management service holding KEKs. Implementations are thread-safe.

    ``name`` is the provider name written into every EDEK and envelope KEK reference
    (``vault:orders-kek``); an instance refuses EDEKs of another provider.
    """

    name: str

    @abstractmethod
    def resolve_alias(self, alias: str) -> str:
        """The KEK id an alias names; :class:`UnknownAlias` when it names nothing."""

    @abstractmethod
    def generate_dek(self, kek_id: str) -> DekPair:
        """A new random AES-256 DEK and the same DEK wrapped by ``kek_id``."""

    @abstractmethod
    def wrap(self, kek_id: str, plaintext: bytes, context: bytes = b"") -> Edek:
        """Wrap caller-provided key material (intermediate keys of a hierarchy, rewrapping), bound to
        ``context`` when it is not empty (see :class:`Edek`)."""

    @abstractmethod
    def unwrap(self, edek: Edek) -> bytes:
        """The plaintext of an EDEK (with ``edek.context``: a wrong context fails like a wrong key)."""

    def unwrap_many(self, edeks: Sequence[Edek]) -> list[bytes | KmsError]:
        """Unwrap several EDEKs; per-EDEK failures come back in place, call-wide ones are raised.

        Providers with a batch API (Vault's ``batch_input``) override this.
        """
        results: list[bytes | KmsError] = []
        for edek in edeks:
            try:
                results.append(self.unwrap(edek))
            except CALL_WIDE_ERRORS:
                raise
            except KmsError as exc:
                results.append(exc)
        return results

    @abstractmethod
    def describe_kek(self, kek_id: str) -> KekState:
        """The KEK's state; MISSING rather than an error when it does not exist."""

    def create_kek(self, alias: str) -> str:
        """Create a KEK reachable as ``alias`` and return its KEK id (a rule's ``missing_kek: create``).

        Providers that can create keys with the credentials strongroom runs with override this; the
        default refuses, naming what to do instead."""
        raise KekCreationRefused(
            f"KMS {self.name!r} ({type(self).__name__}) does not create KEKs, so alias {alias!r} cannot be created"
        )

    def close(self) -> None:  # noqa: B027 - optional hook, most providers hold nothing to close
        """Release connections. The instance must not be used afterwards."""

    def check_provider(self, edek: Edek) -> None:
        """Refuse an EDEK written by another provider (so a typo'd config fails clearly)."""
        if edek.provider != self.name:
            raise EdekInvalid(
                f"EDEK of {edek.kek_ref!r} was wrapped by KMS provider {edek.provider!r}, but this KMS is {self.name!r}"
            )

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
