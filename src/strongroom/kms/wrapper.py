"""Base of the KMS wrappers: delegate everything to an inner KMS unless overridden."""

from __future__ import annotations

from collections.abc import Sequence

from strongroom.errors import KmsError
from strongroom.kms.api import DekPair, Edek, KekState, Kms


class KmsWrapper(Kms):
    """A KMS that forwards to ``inner``. Wrappers stack: ``CachingKms(RetryingKms(MeteredKms(vault)))``."""

    def __init__(self, inner: Kms) -> None:
        self.inner = inner
        self.name = inner.name

    def resolve_alias(self, alias: str) -> str:
        return self.inner.resolve_alias(alias)

    def generate_dek(self, kek_id: str) -> DekPair:
        return self.inner.generate_dek(kek_id)

    def wrap(self, kek_id: str, plaintext: bytes, context: bytes = b"") -> Edek:
        return self.inner.wrap(kek_id, plaintext, context)

    def unwrap(self, edek: Edek) -> bytes:
        return self.inner.unwrap(edek)

    def unwrap_many(self, edeks: Sequence[Edek]) -> list[bytes | KmsError]:
        return self.inner.unwrap_many(edeks)

    def describe_kek(self, kek_id: str) -> KekState:
        return self.inner.describe_kek(kek_id)

    def close(self) -> None:
        self.inner.close()

    def unwrapped(self) -> Kms:
        """The innermost provider under every wrapper."""
        inner = self.inner
        return inner.unwrapped() if isinstance(inner, KmsWrapper) else inner
