"""CachingKms, RetryingKms and MeteredKms over a real (local) KMS."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import pytest

from strongroom.kms.api import Edek, Kms
from strongroom.kms.caching import CachingKms, TtlLru
from strongroom.kms.errors import KekNotFound, KmsAccessDenied, KmsUnavailable
from strongroom.kms.local import LocalKeyringAdmin, LocalKms
from strongroom.kms.metered import MeteredKms
from strongroom.kms.retrying import RetryingKms
from strongroom.kms.wrapper import KmsWrapper


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Outage(KmsWrapper):
    """Makes a real KMS fail the first ``failures`` calls with ``error`` (a scripted outage)."""

    def __init__(self, inner: Kms, failures: int, error: Callable[[], Exception]) -> None:
        super().__init__(inner)
        self.failures = failures
        self.error = error
        self.calls = 0

    def _maybe_fail(self) -> None:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error()

    def unwrap(self, edek: Edek) -> bytes:
        self._maybe_fail()
        return self.inner.unwrap(edek)

    def resolve_alias(self, alias: str) -> str:
        self._maybe_fail()
        return self.inner.resolve_alias(alias)

    def unwrap_many(self, edeks: list[Edek]) -> list[bytes | Exception]:  # type: ignore[override]
        self._maybe_fail()
        return self.inner.unwrap_many(edeks)  # type: ignore[return-value]


@pytest.fixture
def local(tmp_path: Path) -> tuple[LocalKms, str]:
    kms = LocalKms.from_config({"path": tmp_path / "k.json", "create": True})
    return kms, LocalKeyringAdmin(kms.keyring).create_kek("orders")


def test_cache_hits_misses_and_metrics_below_it(local: tuple[LocalKms, str]) -> None:
    kms, kek = local
    metered = MeteredKms(kms)
    cached = CachingKms(metered)
    pairs = [kms.generate_dek(kek) for _ in range(3)]
    for _ in range(5):
        for pair in pairs:
            assert cached.unwrap(pair.edek) == pair.dek
    assert metered.snapshot()["operations"]["unwrap"]["outcomes"] == {"ok": 3}
    assert cached.stats()["hits"] == 12
    assert cached.stats()["misses"] == 3


def test_generated_and_wrapped_keys_are_cached_for_read_back(local: tuple[LocalKms, str]) -> None:
    kms, kek = local
    metered = MeteredKms(kms)
    cached = CachingKms(metered)
    pair = cached.generate_dek(kek)
    edek = cached.wrap(kek, b"k" * 32)
    assert cached.unwrap(pair.edek) == pair.dek
    assert cached.unwrap(edek) == b"k" * 32
    assert "unwrap" not in metered.snapshot()["operations"]


def test_cache_ttl_expires_after_fetch_not_after_use(local: tuple[LocalKms, str]) -> None:
    kms, kek = local
    clock = Clock()
    metered = MeteredKms(kms)
    cached = CachingKms(metered, ttl_seconds=10, clock=clock)
    pair = kms.generate_dek(kek)
    for second in range(0, 10, 2):
        clock.now = second
        cached.unwrap(pair.edek)
    clock.now = 10
    cached.unwrap(pair.edek)
    assert metered.calls == 2
    assert cached.stats()["expirations"] == 1


def test_cache_is_bounded_lru(local: tuple[LocalKms, str]) -> None:
    kms, kek = local
    metered = MeteredKms(kms)
    cached = CachingKms(metered, max_entries=2)
    a, b, c = (kms.generate_dek(kek) for _ in range(3))
    cached.unwrap(a.edek)
    cached.unwrap(b.edek)
    cached.unwrap(a.edek)  # a is now the most recent
    cached.unwrap(c.edek)  # evicts b
    assert cached.stats()["evictions"] == 1
    cached.unwrap(a.edek)
    assert metered.calls == 3
    cached.unwrap(b.edek)
    assert metered.calls == 4


def test_cache_invalidation(local: tuple[LocalKms, str]) -> None:
    kms, kek = local
    metered = MeteredKms(kms)
    cached = CachingKms(metered)
    pair = kms.generate_dek(kek)
    cached.unwrap(pair.edek)
    cached.invalidate(pair.edek)
    cached.unwrap(pair.edek)
    assert cached.invalidate_kek(kek) == 1
    cached.unwrap(pair.edek)
    cached.clear()
    assert cached.stats()["size"] == 0
    assert metered.calls == 3
    LocalKeyringAdmin(kms.keyring).delete_kek(kek)
    with pytest.raises(KekNotFound):
        cached.unwrap(pair.edek)  # nothing cached any more: the loss shows at once


def test_cache_unwrap_many_fetches_only_misses(local: tuple[LocalKms, str]) -> None:
    kms, kek = local
    metered = MeteredKms(kms)
    cached = CachingKms(metered)
    pairs = [kms.generate_dek(kek) for _ in range(4)]
    cached.unwrap(pairs[0].edek)
    missing = Edek("local", "no-such-kek", pairs[0].edek.ciphertext)
    results = cached.unwrap_many([p.edek for p in pairs] + [missing])
    assert results[:4] == [p.dek for p in pairs]
    assert isinstance(results[4], KekNotFound)
    assert metered.snapshot()["operations"]["unwrap_many"]["items"] == 4
    assert cached.unwrap_many([p.edek for p in pairs]) == [p.dek for p in pairs]
    assert metered.calls == 2


def test_cache_aliases(local: tuple[LocalKms, str]) -> None:
    kms, kek = local
    metered = MeteredKms(kms)
    cached = CachingKms(metered)
    assert cached.resolve_alias("orders") == cached.resolve_alias("orders") == kek
    assert metered.calls == 1


def test_ttl_lru_validates() -> None:
    with pytest.raises(ValueError, match="max_entries"):
        TtlLru(0, 1.0, Clock())


def test_retry_recovers_from_a_short_outage(local: tuple[LocalKms, str]) -> None:
    kms, kek = local
    pair = kms.generate_dek(kek)
    sleeps: list[float] = []
    outage = Outage(kms, failures=3, error=lambda: KmsUnavailable("down"))
    retrying = RetryingKms(outage, max_attempts=5, base_delay_seconds=0.1, sleep=sleeps.append, rng=random.Random(1))
    assert retrying.unwrap(pair.edek) == pair.dek
    assert outage.calls == 4
    assert len(sleeps) == 3
    assert all(0 <= s <= cap for s, cap in zip(sleeps, (0.1, 0.2, 0.4), strict=True))  # full jitter


def test_retry_gives_up_after_max_attempts(local: tuple[LocalKms, str]) -> None:
    kms, _ = local
    outage = Outage(kms, failures=99, error=lambda: KmsUnavailable("down"))
    retrying = RetryingKms(outage, max_attempts=3, sleep=lambda s: None)
    with pytest.raises(KmsUnavailable, match=r"after 3 attempt\(s\).*down"):
        retrying.resolve_alias("orders")
    assert outage.calls == 3


def test_retry_respects_the_deadline(local: tuple[LocalKms, str]) -> None:
    kms, _ = local
    clock = Clock()

    def sleep(seconds: float) -> None:
        clock.now += seconds

    outage = Outage(kms, failures=99, error=lambda: KmsUnavailable("down"))
    retrying = RetryingKms(
        outage,
        max_attempts=1000,
        base_delay_seconds=1,
        max_delay_seconds=1,
        deadline_seconds=5,
        sleep=sleep,
        clock=clock,
    )
    with pytest.raises(KmsUnavailable):
        retrying.resolve_alias("orders")
    assert clock.now < 5


@pytest.mark.parametrize("error", [lambda: KmsAccessDenied("no"), lambda: KekNotFound("gone")])
def test_retry_never_retries_answers(local: tuple[LocalKms, str], error: Callable[[], Exception]) -> None:
    kms, _ = local
    outage = Outage(kms, failures=1, error=error)
    with pytest.raises(type(error())):
        RetryingKms(outage, sleep=lambda s: None).resolve_alias("orders")
    assert outage.calls == 1


def test_retry_unwrap_many_retries_unavailable_items(local: tuple[LocalKms, str]) -> None:
    kms, kek = local
    pairs = [kms.generate_dek(kek) for _ in range(2)]

    class ItemOutage(KmsWrapper):
        calls = 0

        def unwrap_many(self, edeks):  # type: ignore[no-untyped-def]
            self.calls += 1
            results = self.inner.unwrap_many(edeks)
            return [KmsUnavailable("blip") if self.calls == 1 and i == 1 else r for i, r in enumerate(results)]

    flaky = ItemOutage(kms)
    assert RetryingKms(flaky, sleep=lambda s: None).unwrap_many([p.edek for p in pairs]) == [p.dek for p in pairs]
    assert flaky.calls == 2


def test_metered_counts_outcomes_and_latency(local: tuple[LocalKms, str]) -> None:
    kms, kek = local
    metered = MeteredKms(kms)
    pair = metered.generate_dek(kek)
    metered.unwrap(pair.edek)
    with pytest.raises(KekNotFound):
        metered.unwrap(Edek("local", "gone", pair.edek.ciphertext))
    metered.describe_kek(kek)
    snapshot = metered.snapshot()
    assert snapshot["calls"] == 4
    assert snapshot["operations"]["unwrap"]["outcomes"] == {"ok": 1, "KekNotFound": 1}
    latency = snapshot["operations"]["unwrap"]["latency"]
    assert latency["count"] == 2
    assert 0 < latency["max_seconds"] <= latency["sum_seconds"]
    metered.reset()
    assert metered.snapshot() == {"calls": 0, "operations": {}}


def test_wrappers_stack_and_unwrap_to_the_provider(local: tuple[LocalKms, str]) -> None:
    kms, _ = local
    stack = CachingKms(RetryingKms(MeteredKms(kms)))
    assert stack.name == "local"
    assert stack.unwrapped() is kms
