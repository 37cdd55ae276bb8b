"""Content hashes of Kafka records, identical in the ledger, the scrub and producer delivery reports.

BLAKE2b with a 16-byte digest (``hashlib``, no extra dependency): fast on short inputs, and 128 bits
make an accidental match of an altered record (2^-128) and a key collision that would wrongly justify
a compaction negligible at trillions of records. It is not a MAC: the audit detects loss and
corruption, not a forger who can also rewrite the ledger.

Key, value and headers are hashed separately so a finding says *what* changed, and so the key hash
can justify compaction (a later record with the same key). ``None`` (null key, tombstone, no
headers) hashes to ``None``, distinct from an empty byte string.
"""

from __future__ import annotations

from collections.abc import Sequence
from hashlib import blake2b

DIGEST_SIZE = 16

Headers = Sequence[tuple[str, bytes | None]] | None


def hash_bytes(data: bytes | None) -> bytes | None:
    if data is None:
        return None
    return blake2b(data, digest_size=DIGEST_SIZE).digest()


def hash_headers(headers: Headers) -> bytes | None:
    """Order-sensitive hash of the header list: length-prefixed names and values (``None`` != ``b""``)."""
    if not headers:
        return None
    h = blake2b(digest_size=DIGEST_SIZE)
    for name, value in headers:
        raw = name.encode("utf-8") if isinstance(name, str) else bytes(name)
        h.update(len(raw).to_bytes(4, "big"))
        h.update(raw)
        if value is None:
            h.update(b"\xff\xff\xff\xff")
        else:
            h.update(len(value).to_bytes(4, "big"))
            h.update(value)
    return h.digest()


def record_hashes(key: bytes | None, value: bytes | None, headers: Headers) -> tuple[bytes | None, ...]:
    """``(key_hash, value_hash, headers_hash)`` of one record."""
    return hash_bytes(key), hash_bytes(value), hash_headers(headers)
