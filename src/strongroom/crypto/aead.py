"""AES-256-GCM, the one AEAD suite of envelope v1, and the per-DEK cipher cache.

Building an ``AESGCM`` object runs the AES key schedule and allocates an OpenSSL context, which
costs more than encrypting a small record. Records of one subject (or one wrapped DEK) arrive in
bursts, so the codec keeps the cipher object per DEK in :data:`CIPHERS`, a bounded cache.

The cache holds key material in process memory only (as dictionary keys and inside the cipher
objects). It is never serialised or logged. Call :meth:`CipherCache.forget` when a DEK is erased
so its cipher object does not outlive the erasure in this process.
"""

from __future__ import annotations

import threading

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from strongroom.crypto.errors import InvalidDek

KEY_SIZE = 32
NONCE_SIZE = 12
TAG_SIZE = 16


class CipherCache:
    """Bounded map DEK → ready ``AESGCM``; first-in first-out eviction.

    FIFO (rather than strict LRU) keeps a hit to one dictionary lookup with no reordering and no
    lock; a hot DEK that gets evicted is simply rebuilt on its next use.
    """

    def __init__(self, max_entries: int = 65536) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self._max_entries = max_entries
        self._ciphers: dict[bytes, AESGCM] = {}
        self._lock = threading.Lock()
        #: ``dict.get`` of the cache, for hot paths: returns None on a miss (then call :meth:`get`).
        self.peek = self._ciphers.get

    def get(self, dek: bytes) -> AESGCM:
        """The cipher for ``dek``, built on first use. Raises :class:`InvalidDek` for a bad key."""
        return self._ciphers.get(dek) or self._build(dek)

    def _build(self, dek: bytes) -> AESGCM:
        if not isinstance(dek, bytes) or len(dek) != KEY_SIZE:
            size = len(dek) if isinstance(dek, bytes | bytearray | memoryview) else type(dek).__name__
            raise InvalidDek(f"a DEK must be {KEY_SIZE} bytes of type bytes, got {size}")
        cipher = AESGCM(dek)
        with self._lock:
            while len(self._ciphers) >= self._max_entries:
                self._ciphers.pop(next(iter(self._ciphers)))
            self._ciphers[dek] = cipher
        return cipher

    def forget(self, dek: bytes) -> None:
        """Drop the cipher built for ``dek`` (after erasure or rotation)."""
        with self._lock:
            self._ciphers.pop(dek, None)

    def clear(self) -> None:
        """Drop every cached cipher."""
        with self._lock:
            self._ciphers.clear()

    def __len__(self) -> int:
        return len(self._ciphers)

    def __repr__(self) -> str:
        return f"CipherCache(entries={len(self._ciphers)}, max_entries={self._max_entries})"


#: The process-wide cache used by the envelope codec.
CIPHERS = CipherCache()


def generate_dek() -> bytes:
    """A fresh random AES-256 key, for keys made outside a KMS (per-subject keys, tests)."""
    return AESGCM.generate_key(bit_length=256)
