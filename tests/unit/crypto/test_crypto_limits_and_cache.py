"""DEK usage limits and the per-DEK cipher cache."""

from __future__ import annotations

import pytest

from strongroom.crypto import (
    CIPHERS,
    DEFAULT_MAX_ENCRYPTIONS,
    CipherCache,
    DekExhausted,
    DekUsage,
    DekUsagePolicy,
    InvalidDek,
    generate_dek,
)
from strongroom.envelope import RecordContext, SubjectKeyRef, seal


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_default_policy_stays_far_below_the_random_nonce_bound() -> None:
    assert DekUsagePolicy().max_encryptions == DEFAULT_MAX_ENCRYPTIONS == 2**28


@pytest.mark.parametrize("bad", [0, -1, 2**32 + 1])
def test_policy_refuses_unsafe_counts(bad: int) -> None:
    with pytest.raises(ValueError, match="max_encryptions"):
        DekUsagePolicy(max_encryptions=bad)


def test_policy_refuses_non_positive_age() -> None:
    with pytest.raises(ValueError, match="max_age_seconds"):
        DekUsagePolicy(max_age_seconds=0)


def test_count_limit_raises_before_the_extra_encryption() -> None:
    usage = DekUsage(DekUsagePolicy(max_encryptions=3, max_age_seconds=None), label="DEK of orders")
    for _ in range(3):
        assert not usage.exhausted
        usage.charge()
    assert usage.exhausted
    with pytest.raises(DekExhausted, match="DEK of orders reached its limit of 3"):
        usage.charge()
    assert usage.count == 3


def test_batch_charge_is_all_or_nothing() -> None:
    usage = DekUsage(DekUsagePolicy(max_encryptions=10, max_age_seconds=None))
    usage.charge(8)
    with pytest.raises(DekExhausted):
        usage.charge(3)
    assert usage.count == 8


def test_age_limit() -> None:
    clock = FakeClock()
    usage = DekUsage(DekUsagePolicy(max_age_seconds=60), clock=clock)
    usage.charge()
    clock.now += 59
    usage.charge()
    assert not usage.exhausted
    clock.now += 1
    assert usage.exhausted
    with pytest.raises(DekExhausted, match="older than its limit of 60 seconds"):
        usage.charge()


def test_seal_charges_usage_and_stops_at_the_limit() -> None:
    usage = DekUsage(DekUsagePolicy(max_encryptions=2, max_age_seconds=None))
    ref, ctx, dek = SubjectKeyRef(bytes(16)), RecordContext("t", b"s"), generate_dek()
    seal(b"a", dek, ref, ctx, usage=usage)
    seal(b"b", dek, ref, ctx, usage=usage)
    with pytest.raises(DekExhausted):
        seal(b"c", dek, ref, ctx, usage=usage)


def test_cipher_cache_is_bounded_and_forgets() -> None:
    cache = CipherCache(max_entries=2)
    first, second, third = generate_dek(), generate_dek(), generate_dek()
    cipher = cache.get(first)
    assert cache.get(first) is cipher
    cache.get(second)
    cache.get(third)
    assert len(cache) == 2
    assert cache.peek(first) is None
    cache.forget(third)
    assert cache.peek(third) is None
    cache.clear()
    assert len(cache) == 0
    assert "entries=0" in repr(cache)


def test_cipher_cache_refuses_bad_keys_without_showing_them() -> None:
    with pytest.raises(InvalidDek, match="got 16"):
        CIPHERS.get(bytes(16))
    with pytest.raises(InvalidDek, match="got str"):
        CIPHERS.get("k" * 32)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_entries"):
        CipherCache(max_entries=0)
