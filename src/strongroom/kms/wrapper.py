"""Base of the KMS wrappers: every operation goes through one hook, :meth:`KmsWrapper._around`.

A wrapper that treats every operation alike (metrics, retries) overrides the hook only, so a new KMS
operation is routed through every such wrapper by adding it here once; a wrapper that treats one
operation specially (the cache) overrides that operation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from strongroom.errors import KmsError
from strongroom.kms.api import DekPair, Edek, KekState, Kms

T = TypeVar("T")


class KmsWrapper(Kms):
    """A KMS that forwards to ``inner``. Wrappers stack: ``CachingKms(RetryingKms(MeteredKms(vault)))``."""

    def __init__(self, inner: Kms) -> None:
        self.inner = inner
        self.name = inner.name

    def _around(self, operation: str, call: Callable[[], T], items: int = 1) -> T:
        """Run one call to the inner KMS (``items``: the EDEKs it carries); here, just run it."""
        return call()

    def resolve_alias(self, alias: str) -> str:
        return self._around("resolve_alias", lambda: self.inner.resolve_alias(alias))

    def generate_dek(self, kek_id: str) -> DekPair:
        return self._around("generate_dek", lambda: self.inner.generate_dek(kek_id))

    def wrap(self, kek_id: str, plaintext: bytes, context: bytes = b"") -> Edek:
        return self._around("wrap", lambda: self.inner.wrap(kek_id, plaintext, context))

    def unwrap(self, edek: Edek) -> bytes:
        return self._around("unwrap", lambda: self.inner.unwrap(edek))

    def unwrap_many(self, edeks: Sequence[Edek]) -> list[bytes | KmsError]:
        return self._around("unwrap_many", lambda: self.inner.unwrap_many(edeks), items=len(edeks))

    def describe_kek(self, kek_id: str) -> KekState:
        return self._around("describe_kek", lambda: self.inner.describe_kek(kek_id))

    def create_kek(self, alias: str) -> str:
        return self._around("create_kek", lambda: self.inner.create_kek(alias))

    def close(self) -> None:
        self.inner.close()

    def unwrapped(self) -> Kms:
        """The innermost provider under every wrapper."""
        inner = self.inner
        return inner.unwrapped() if isinstance(inner, KmsWrapper) else inner
