"""Kafka's default partitioner function, bit for bit: ``toPositive(murmur2(key)) % partitions``.

strongroom chooses the keys-topic partition of a subject itself (the message keys of a subject's
records differ - ``k\\0subject\\0key-id``, ``e\\0subject`` - so the client's partitioner would
scatter them). Using Kafka's own function keeps the choice reproducible by any Kafka client: a Java
``Utils.toPositive(Utils.murmur2(subject.getBytes(UTF_8))) % n`` or librdkafka's ``murmur2``
partitioner on the bare subject picks the same partition.
"""

from __future__ import annotations

from typing import Final

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
