"""murmur2 and the partition choice, against Kafka's own test vectors (clients UtilsTest.testMurmur2)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from strongroom.keys.murmur2 import murmur2, partition_for, subject_partition, subject_partitions, to_positive

# From Apache Kafka's clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java
KAFKA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize(("data", "expected"), list(KAFKA_VECTORS.items()))
def test_murmur2_matches_kafka(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


def test_to_positive_clears_the_sign_bit_like_kafka() -> None:
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(-(2**31)) == 0  # Java's abs(MIN_VALUE) would stay negative; Kafka masks
    assert to_positive(5) == 5


def test_partition_for_uses_to_positive_then_modulo() -> None:
    assert partition_for(b"foobar", 7) == (-790332482 & 0x7FFFFFFF) % 7
    assert subject_partition("foobar", 7) == partition_for(b"foobar", 7)
    with pytest.raises(ValueError, match="at least one partition"):
        partition_for(b"x", 0)


def test_empty_and_non_ascii_subjects_hash_their_utf8_bytes() -> None:
    assert murmur2(b"") == murmur2(b"")
    assert subject_partition("zoë", 12) == partition_for("zoë".encode(), 12)


@given(st.binary(max_size=64), st.integers(min_value=1, max_value=1000))
def test_partition_is_in_range_and_murmur2_is_a_signed_int32(data: bytes, partitions: int) -> None:
    value = murmur2(data)
    assert -(2**31) <= value < 2**31
    assert 0 <= partition_for(data, partitions) < partitions


@given(st.lists(st.binary(min_size=0, max_size=40), max_size=60), st.integers(min_value=1, max_value=50))
def test_the_vectorized_partitions_equal_kafkas_one_by_one(subjects: list[bytes], partitions: int) -> None:
    assert subject_partitions(subjects, partitions) == [partition_for(s, partitions) for s in subjects]


def test_the_vectorized_hash_matches_kafkas_vectors() -> None:
    data = list(KAFKA_VECTORS)
    assert subject_partitions(data, 2**31 - 1) == [to_positive(v) % (2**31 - 1) for v in KAFKA_VECTORS.values()]
