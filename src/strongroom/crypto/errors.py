"""Errors of the crypto layer (AEAD suites, DEK handling and usage limits).

They derive from :class:`~strongroom.errors.EnvelopeError`, the area root for everything that happens
while sealing or opening an envelope. Messages never contain key material.
"""

from __future__ import annotations

from strongroom.errors import EnvelopeError


class InvalidDek(EnvelopeError):
    """A data encryption key has the wrong type or length (AES-256 needs exactly 32 bytes)."""

    default_hint = "the key source returned something that is not a 32-byte AES-256 key; check it"


class DekExhausted(EnvelopeError):
    """A DEK reached its encryption-count or age limit; its owner must switch to a fresh DEK.

    Raised *before* the encryption that would exceed the limit, so no record is ever sealed
    past the bound.
    """

    default_hint = "generate a new DEK (rotate) and retry the encryption"
