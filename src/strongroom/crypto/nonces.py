"""Where nonces come from: ``os.urandom(12)`` per encryption, always.

Random 96-bit nonces need no coordination between processes (the encrypting pipelines run as many
Spark tasks and producers at once), at the price of a birthday bound that the DEK usage limits in
:mod:`strongroom.crypto.limits` keep far away.

The only exception is :func:`fixed_nonces_for_vectors`, an internal override that makes encryption
deterministic so frozen test vectors can be regenerated and re-checked byte for byte. It is global,
not thread-safe, and must never be used outside tests and vector generation: a repeated nonce under
one key breaks AES-GCM completely.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from strongroom.crypto.aead import NONCE_SIZE

#: Set only by :func:`fixed_nonces_for_vectors`; read on the hot path by the envelope codec.
override: Iterator[bytes] | None = None


def new_nonce() -> bytes:
    """A fresh 12-byte nonce (random, unless a test override is active)."""
    if override is None:
        return os.urandom(NONCE_SIZE)
    return _next_override()


def _next_override() -> bytes:
    assert override is not None
    nonce = next(override, None)
    if nonce is None or len(nonce) != NONCE_SIZE:
        raise RuntimeError("fixed_nonces_for_vectors ran out of 12-byte nonces")
    return nonce


@contextmanager
def fixed_nonces_for_vectors(nonces: Iterable[bytes]) -> Iterator[None]:
    """Use ``nonces`` (in order) instead of random ones inside the block. Tests and vectors only."""
    global override
    previous = override
    override = iter(list(nonces))
    try:
        yield
    finally:
        override = previous
