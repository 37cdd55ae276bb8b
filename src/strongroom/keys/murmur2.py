"""Kafka's default partitioner function, bit for bit: ``toPositive(murmur2(key)) % partitions``.

strongroom chooses the keys-topic partition of a subject itself (the message keys of a subject's
records differ - ``k\\0subject\\0key-id``, ``e\\0subject`` - so the client's partitioner would
scatter them). Using Kafka's own function keeps the choice reproducible by any Kafka client: a Java
``Utils.toPositive(Utils.murmur2(subject.getBytes(UTF_8))) % n`` or librdkafka's ``murmur2``
partitioner on the bare subject picks the same partition.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import numpy as np
import numpy.typing as npt

_SEED: Final = 0x9747B28C
_M: Final = 0x5BD1E995
_MASK: Final = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2``: MurmurHash2 (seed 0x9747b28c) as a signed 32-bit int."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    end = length - (length & 3)
    for i in range(0, end, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = (h * _M) & _MASK
        h ^= k
    tail = length & 3
    if tail == 3:
        h ^= data[end + 2] << 16
    if tail >= 2:
        h ^= data[end + 1] << 8
    if tail >= 1:
        h ^= data[end]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - 0x100000000 if h & 0x80000000 else h


def to_positive(value: int) -> int:
    """Kafka's ``Utils.toPositive``: clear the sign bit (not ``abs``: ``abs(MIN_INT)`` overflows in Java)."""
    return value & 0x7FFFFFFF


def partition_for(key: bytes, partitions: int) -> int:
    """The partition Kafka's default partitioner gives ``key`` among ``partitions``."""
    if partitions < 1:
        raise ValueError(f"a topic has at least one partition, got {partitions}")
    return to_positive(murmur2(key)) % partitions


def subject_partition(subject: str, partitions: int) -> int:
    """The keys-topic partition of every record of ``subject``."""
    return partition_for(subject.encode("utf-8"), partitions)


def subject_partitions(subjects: Sequence[bytes], partitions: int) -> list[int]:
    """:func:`partition_for` of many UTF-8 subjects at once (vectorized; a key batch or a fetch of records).

    The hash runs over numpy arrays, one group per subject length, so its cost per subject is a few
    array operations shared by the whole group instead of a Python loop per 4-byte word.
    """
    if partitions < 1:
        raise ValueError(f"a topic has at least one partition, got {partitions}")
    result = np.empty(len(subjects), dtype=np.int64)
    by_length: dict[int, list[int]] = {}
    for index, raw in enumerate(subjects):
        by_length.setdefault(len(raw), []).append(index)
    for length, indexes in by_length.items():
        rows = np.frombuffer(b"".join([subjects[i] for i in indexes]), dtype=np.uint8).reshape(len(indexes), length)
        result[indexes] = (_murmur2_rows(rows, length) & 0x7FFFFFFF) % partitions
    return result.tolist()


def _murmur2_rows(rows: npt.NDArray[np.uint8], length: int) -> npt.NDArray[np.uint64]:
    """:func:`murmur2` (unsigned) of each row of ``rows`` (all ``length`` bytes long)."""
    mask, m = np.uint64(_MASK), np.uint64(_M)
    h = np.full(rows.shape[0], (_SEED ^ length) & _MASK, dtype=np.uint64)
    end = length - (length & 3)
    if end:
        words = np.ascontiguousarray(rows[:, :end]).view("<u4").astype(np.uint64)
        for column in range(end // 4):
            k = (words[:, column] * m) & mask
            k ^= k >> np.uint64(24)
            k = (k * m) & mask
            h = (h * m) & mask
            h ^= k
    tail = length & 3
    if tail == 3:
        h ^= rows[:, end + 2].astype(np.uint64) << np.uint64(16)
    if tail >= 2:
        h ^= rows[:, end + 1].astype(np.uint64) << np.uint64(8)
    if tail >= 1:
        h ^= rows[:, end].astype(np.uint64)
        h = (h * m) & mask
    h ^= h >> np.uint64(13)
    h = (h * m) & mask
    h ^= h >> np.uint64(15)
    return h
