"""Restored keys heal by themselves: CachingKms remembers a lost KEK briefly, then asks again.

(The edit lives in ``strongroom.kms.caching``; these tests pin the behaviour recovery documents.)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from strongroom.kms.api import KekState
from strongroom.kms.caching import CachingKms
from strongroom.kms.errors import KekDisabled, KekNotFound, KekPendingDeletion, KmsUnavailable
from strongroom.kms.local import LocalKeyringAdmin, LocalKms
from strongroom.kms.metered import MeteredKms
from strongroom.kms.registry import kms_from_config
from strongroom.kms.vault import VaultKms


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def setup(tmp_path: Path) -> tuple[LocalKms, LocalKeyringAdmin, str]:
    kms = LocalKms.from_config({"path": tmp_path / "k.json", "create": True})
    admin = LocalKeyringAdmin(kms.keyring)
    return kms, admin, admin.create_kek("orders")


@pytest.mark.parametrize(
    ("lose", "error"),
    [(KekState.PENDING_DELETION, KekPendingDeletion), (KekState.DISABLED, KekDisabled)],
)
def test_a_restored_kek_reads_again_within_the_negative_ttl(
    setup: tuple[LocalKms, LocalKeyringAdmin, str], lose: KekState, error: type[Exception]
) -> None:
    kms, admin, kek = setup
    pair = kms.generate_dek(kek)
    clock, metered = Clock(), MeteredKms(kms)
    cached = CachingKms(metered, negative_ttl_seconds=30, clock=clock)
    admin.set_state(kek, lose)
    for second in range(0, 30, 3):  # a reader retrying every 3 s while the KEK is gone
        clock.now = second
        with pytest.raises(error):
            cached.unwrap(pair.edek)
    assert metered.calls == 1  # one KMS call for ten attempts
    admin.set_state(kek, KekState.ENABLED)  # deletion cancelled / key enabled at t=29
    clock.now = 29.5
    with pytest.raises(error, match=r"scheduled for deletion|disabled"):
        cached.unwrap(pair.edek)  # still the remembered answer...
    clock.now = 30.0
    assert cached.unwrap(pair.edek) == pair.dek  # ...healed at most negative_ttl_seconds later
    assert metered.calls == 2
    assert cached.stats()["lost_hits"] == 10


def test_unwrap_many_remembers_per_edek_and_heals(setup: tuple[LocalKms, LocalKeyringAdmin, str]) -> None:
    kms, admin, kek = setup
    other = admin.create_kek("other")
    lost_pair, ok_pair = kms.generate_dek(kek), kms.generate_dek(other)
    clock, metered = Clock(), MeteredKms(kms)
    cached = CachingKms(metered, negative_ttl_seconds=5, clock=clock)
    admin.set_state(kek, KekState.DISABLED)
    first = cached.unwrap_many([lost_pair.edek, ok_pair.edek])
    assert isinstance(first[0], KekDisabled)
    assert first[1] == ok_pair.dek
    again = cached.unwrap_many([lost_pair.edek, ok_pair.edek])
    assert isinstance(again[0], KekDisabled)
    assert again[0] is not first[0]  # a fresh exception each time
    assert metered.calls == 1
    admin.set_state(kek, KekState.ENABLED)
    clock.now = 5
    assert cached.unwrap_many([lost_pair.edek]) == [lost_pair.dek]


def test_invalidate_kek_heals_at_once(setup: tuple[LocalKms, LocalKeyringAdmin, str]) -> None:
    kms, admin, kek = setup
    pair = kms.generate_dek(kek)
    cached = CachingKms(kms, negative_ttl_seconds=3600, clock=Clock())
    admin.set_state(kek, KekState.PENDING_DELETION)
    with pytest.raises(KekNotFound):
        cached.unwrap(pair.edek)
    admin.set_state(kek, KekState.ENABLED)
    assert cached.invalidate_kek(kek) == 1
    assert cached.unwrap(pair.edek) == pair.dek


def test_zero_ttl_turns_negative_caching_off(setup: tuple[LocalKms, LocalKeyringAdmin, str]) -> None:
    kms, admin, kek = setup
    pair = kms.generate_dek(kek)
    metered = MeteredKms(kms)
    cached = CachingKms(metered, negative_ttl_seconds=0)
    admin.delete_kek(kek)
    for _ in range(3):
        with pytest.raises(KekNotFound):
            cached.unwrap(pair.edek)
    assert metered.calls == 3
    with pytest.raises(ValueError, match="negative_ttl_seconds"):
        CachingKms(kms, negative_ttl_seconds=-1)


def test_outages_are_never_remembered() -> None:
    """A real Vault client at a closed port: every call really tries again."""
    vault = VaultKms.from_config({"address": "http://127.0.0.1:9", "token": "t", "timeout_seconds": 1})
    metered = MeteredKms(vault)
    cached = CachingKms(metered, negative_ttl_seconds=3600)
    from strongroom.kms.api import Edek

    edek = Edek("vault", "orders", b"vault:v1:QUJD")
    for _ in range(2):
        with pytest.raises(KmsUnavailable):
            cached.unwrap(edek)
    assert metered.calls == 2


def test_the_registry_passes_the_negative_ttl(tmp_path: Path) -> None:
    kms = kms_from_config(
        {"provider": "local", "path": str(tmp_path / "k.json"), "create": True, "cache": {"negative_ttl_seconds": 2}}
    )
    assert isinstance(kms, CachingKms)
    assert kms.negative_ttl_seconds == 2
