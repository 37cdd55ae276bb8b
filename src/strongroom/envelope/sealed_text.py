"""The base64 of a sealed string (``"sr1:" + base64(envelope)``), read as strictly as strongroom writes it.

strongroom writes one spelling of an envelope: RFC 4648's standard alphabet, padded, the unused bits of the last
character zero (its canonical encoding, section 3.5). :func:`sealed_envelope` accepts that spelling and nothing
else. binascii's strict mode alone lets two other spellings of the same bytes through: excess padding after a
complete quantum (``QUJD=``, ``QUJD====``) and set unused bits (``QR==`` for ``QQ==``). No engine of strongroom
wrote either, so a string spelt that way was crafted, and the JVM data plane (``SealedText``) refuses it alike.
"""

from __future__ import annotations

import binascii
from typing import Final

_a2b: Final = binascii.a2b_base64
_b2a: Final = binascii.b2a_base64


def sealed_envelope(data: str | bytes) -> bytes:
    """The envelope bytes that ``data`` (what follows ``sr1:``) spells canonically; ``ValueError`` otherwise
    (``binascii.Error`` is one), including for a non-ASCII ``str``."""
    envelope = _a2b(data, strict_mode=True)
    spelt = data if isinstance(data, bytes) else data.encode("ascii")
    if _b2a(envelope, newline=False) != spelt:
        raise ValueError("not the canonical base64 of its bytes")
    return envelope
