"""Spark's ``xxhash64`` over fixed-width columns, vectorized with numpy.

The scrub compares per-chunk digests of the ledger (computed by Spark in the JVM with the SQL
function ``xxhash64``) with digests of the current log (computed in the executors' Python readers,
so only one row per chunk - not per record - crosses into the JVM). Both sides must produce the same
64-bit value per record, so this module re-implements Spark's ``XXH64`` (seed 42, each column's hash
seeding the next, ints as 4 bytes, longs as 8, binaries by bytes, little-endian) for exactly the
column types the digest uses: INT, BIGINT and 0- or 16-byte BINARY. An integration test checks it
against Spark on random rows.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

U64 = npt.NDArray[np.uint64]

P1 = np.uint64(0x9E3779B185EBCA87)
P2 = np.uint64(0xC2B2AE3D27D4EB4F)
P3 = np.uint64(0x165667B19E3779F9)
P4 = np.uint64(0x85EBCA77C2B2AE63)
P5 = np.uint64(0x27D4EB2F165667C5)
SPARK_SEED = 42


def _rotl(x: U64, r: int) -> U64:
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


def _fmix(h: U64) -> U64:
    h = h ^ (h >> np.uint64(33))
    h = h * P2
    h = h ^ (h >> np.uint64(29))
    h = h * P3
    return h ^ (h >> np.uint64(32))


def seed(n: int) -> U64:
    return np.full(n, SPARK_SEED, dtype=np.uint64)


def hash_int(values: npt.NDArray[np.int32], h: U64) -> U64:
    h = h + P5 + np.uint64(4)
    h = h ^ (values.astype(np.uint32).astype(np.uint64) * P1)
    h = _rotl(h, 23) * P2 + P3
    return _fmix(h)


def hash_long(values: npt.NDArray[np.int64], h: U64) -> U64:
    h = h + P5 + np.uint64(8)
    h = h ^ (_rotl(values.view(np.uint64) * P2, 31) * P1)
    h = _rotl(h, 27) * P1 + P4
    return _fmix(h)


def hash_bytes16(words: U64, h: U64) -> U64:
    """``words``: shape (n, 2), the 16 bytes of each value as two little-endian uint64 words."""
    h = h + P5 + np.uint64(16)
    for lane in (0, 1):
        h = h ^ (_rotl(words[:, lane] * P2, 31) * P1)
        h = _rotl(h, 27) * P1 + P4
    return _fmix(h)


def hash_empty(h: U64) -> U64:
    return _fmix(h + P5)


def hash_optional16(words: U64, present: npt.NDArray[np.bool_], h: U64) -> U64:
    """A 16-byte value where ``present``, else the empty binary (``coalesce(col, X'')``)."""
    return np.where(present, hash_bytes16(words, h), hash_empty(h))
