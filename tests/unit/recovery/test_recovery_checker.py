"""The readability check against the real local KMS (every KEK state) and a real unreachable Vault."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import pytest
from recovery_records import local_kms, subject_key_record, wrapped_dek_records

from strongroom.kms.api import Edek
from strongroom.kms.metered import MeteredKms
from strongroom.kms.retrying import RetryingKms
from strongroom.kms.vault import VaultKms
from strongroom.recovery.checker import AvailabilityChecker
from strongroom.recovery.dependency import KeyStatus, RecordKind
from strongroom.recovery.errors import ScanAborted
from strongroom.recovery.formats import StrongroomFormat
from strongroom.recovery.formats.kroxylicious import KroxyliciousFormat, encode_record, vault_edek
from strongroom.testing.process import free_port

FMT = StrongroomFormat()


def test_one_kms_call_per_distinct_edek(tmp_path: Path) -> None:
    kms, admin = local_kms(tmp_path)
    kek = admin.create_kek("orders")
    records = wrapped_dek_records(kms, kek, 500, per_dek=100)  # 5 DEKs
    metered = MeteredKms(kms)
    checker = AvailabilityChecker(FMT, metered)
    assert all(checker.check_record(h, v).readable for h, v in records)
    assert metered.snapshot()["calls"] <= 5
    assert checker.stats.edeks_unwrapped == 5
    assert checker.stats.cache_hits == 495


@pytest.mark.parametrize("state", ["deleted", "disabled", "pending_deletion", "version_deleted"])
def test_every_lost_state_is_lost(tmp_path: Path, state: str) -> None:
    kms, admin = local_kms(tmp_path)
    kek = admin.create_kek("orders")
    [(headers, value)] = wrapped_dek_records(kms, kek, 1)
    if state == "deleted":
        admin.delete_kek(kek)
    elif state == "version_deleted":
        admin.delete_kek(kek)
        kek2 = admin.create_kek("other")  # a different KEK exists, the record's does not
        assert kek2 != kek
    else:
        from strongroom.kms.api import KekState

        admin.set_state(kek, KekState(state))
    verdict = AvailabilityChecker(FMT, kms).check_record(headers, value)
    assert verdict.lost
    assert not verdict.readable
    assert f"local:{kek}" in verdict.reason()


def test_assumed_lost_keks_are_lost_without_asking_the_kms(tmp_path: Path) -> None:
    kms, admin = local_kms(tmp_path)
    a, b = admin.create_kek("a"), admin.create_kek("b")
    ra, rb = wrapped_dek_records(kms, a, 1)[0], wrapped_dek_records(kms, b, 1)[0]
    metered = MeteredKms(kms)
    checker = AvailabilityChecker(FMT, metered, assumed_lost=[f"local:{a}"])
    assert checker.check_record(*ra).lost
    assert checker.check_record(*rb).readable
    assert "assumed lost" in checker.check_record(*ra).reason()
    assert AvailabilityChecker(FMT, kms, assumed_lost=[a]).check_record(*ra).lost  # bare KEK id works too


def test_corrupt_edek_is_corrupt_not_lost(tmp_path: Path) -> None:
    kms, admin = local_kms(tmp_path)
    kek = admin.create_kek("orders")
    [(headers, value)] = wrapped_dek_records(kms, kek, 1)
    tampered = bytearray(value)
    edek_start = 8 + len(f"local:{kek}")
    tampered[edek_start + 20] ^= 0xFF  # flip a byte inside the wrapped DEK
    verdict = AvailabilityChecker(FMT, kms).check_record(headers, bytes(tampered))
    assert not verdict.readable
    assert not verdict.lost
    assert verdict.verdicts[0].status is KeyStatus.CORRUPT


def test_plain_tombstone_and_malformed_records(tmp_path: Path) -> None:
    kms, _ = local_kms(tmp_path)
    checker = AvailabilityChecker(FMT, kms)
    assert checker.check_record(None, b"x").readable
    assert checker.check_record(None, None).kind is RecordKind.TOMBSTONE
    bad = checker.check_record([("strongroom.enc", b"\x09\x09")], b"x")
    assert bad.kind is RecordKind.MALFORMED
    assert not bad.readable
    assert not bad.lost


def test_records_of_another_kms_abort_instead_of_counting_as_lost(tmp_path: Path) -> None:
    kms, admin = local_kms(tmp_path)
    [(headers, value)] = wrapped_dek_records(kms, admin.create_kek("x"), 1)
    vault = VaultKms.from_config({"address": "http://127.0.0.1:1", "token": "t"})
    with pytest.raises(ScanAborted, match="KMS 'local'"):
        AvailabilityChecker(FMT, vault).check_record(headers, value)


def test_subject_keys_need_the_keys_topic(tmp_path: Path) -> None:
    kms, _ = local_kms(tmp_path)
    with pytest.raises(ScanAborted, match="keys topic"):
        AvailabilityChecker(FMT, kms).check_record(*subject_key_record(bytes(16), b"\x01" * 32))


def test_kms_outage_is_retried_then_aborts_never_lost() -> None:
    """A real Vault client against a port nobody listens on: connection refused on every attempt."""
    vault = VaultKms.from_config({"address": f"http://127.0.0.1:{free_port()}", "token": "t", "timeout_seconds": 1})
    metered = MeteredKms(vault)
    kms = RetryingKms(metered, max_attempts=3, base_delay_seconds=0.01, deadline_seconds=5)
    fmt = KroxyliciousFormat("vault")
    headers, value = encode_record(b"v", bytes(32), vault_edek("KEK-orders", "vault:v1:QUJD"), bytes(12))
    checker = AvailabilityChecker(fmt, kms)
    with pytest.raises(ScanAborted) as info:
        checker.check_record(headers, value)
    message = str(info.value)
    assert "unavailable" in message
    assert "not a lost key" in message
    assert "after 3 attempt(s)" in message
    assert metered.snapshot()["calls"] == 3
    assert checker.stats.by_status == {}  # nothing was concluded


class Link(NamedTuple):
    """The fields of ``strongroom.keys.KeyChainLink`` the checker reads."""

    key_id: bytes
    subject: str
    wk_id: bytes
    edek: Edek | None


class DictChain:
    """The keys table's ``chain_of`` contract over a dict (the real KeyTable is tested in integration)."""

    def __init__(self, links: dict[bytes, object]) -> None:
        self.links = links
        self.calls = 0

    def chain_of(self, key_ids: object) -> dict[bytes, object]:
        self.calls += 1
        return {k: v for k, v in self.links.items() if k in set(key_ids)}  # type: ignore[call-overload]


def test_subject_keys_follow_the_chain_one_unwrap_per_wrapping_key(tmp_path: Path) -> None:
    from strongroom.kms.metered import MeteredKms

    kms, admin = local_kms(tmp_path)
    kek_a, kek_b = admin.create_kek("a"), admin.create_kek("b")
    wk_a, wk_b = kms.wrap(kek_a, b"\x01" * 32), kms.wrap(kek_b, b"\x02" * 32)
    links: dict[bytes, object] = {}
    records = []
    for i in range(40):
        key_id = i.to_bytes(16, "big")
        links[key_id] = Link(key_id, f"subject-{i}", b"A" * 16 if i % 2 else b"B" * 16, wk_a if i % 2 else wk_b)
        records.append(subject_key_record(key_id, b"\x09" * 32, f"subject-{i}".encode()))
    erased_id = bytes(range(16))
    records.append(subject_key_record(erased_id, b"\x09" * 32))
    admin.delete_kek(kek_a)
    metered = MeteredKms(kms)
    checker = AvailabilityChecker(FMT, metered, subject_keys=DictChain(links))
    verdicts = [checker.check_record(h, v) for h, v in records]
    assert [v.lost for v in verdicts[:40]] == [bool(i % 2) for i in range(40)]  # scattered: every other subject
    assert verdicts[1].verdicts[0].dependency is not None
    assert verdicts[1].verdicts[0].dependency.kek == f"local:{kek_a}"
    assert "via wrapping key" in verdicts[1].reason()
    assert verdicts[40].verdicts[0].status is KeyStatus.ERASED
    assert verdicts[40].readable  # erased on purpose: not a KEK loss
    assert checker.stats.edeks_unwrapped == 2  # two wrapping keys, forty subjects
    fingerprint, _wk = checker.subjects[(1).to_bytes(16, "big")]
    assert fingerprint.startswith("sha256:")
    assert "subject-1" not in fingerprint
