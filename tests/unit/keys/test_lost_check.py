"""Lost markers against a real (local) KMS: applied only when the KEK no longer unwraps the wrapping key."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from strongroom.keys.lost_check import LostMarkerCheck
from strongroom.keys.records import WrappingKeyRecord, wk_edek_context
from strongroom.keys.store import KeyStore, StoredLost
from strongroom.kms.api import KekState
from strongroom.kms.local import LocalKeyringAdmin, LocalKms

WK_A, WK_GONE = b"A" * 16, b"G" * 16


def marker(wk_id: bytes) -> StoredLost:
    return StoredLost(wk_id, 0, 9, "local:kek", "KEK deleted", "sha256:" + "0" * 64, "ops", 1)


@pytest.fixture
def setup(tmp_path: Path) -> tuple[LocalKms, LocalKeyringAdmin, str, KeyStore]:
    kms = LocalKms.from_config({"path": tmp_path / "keyring.json", "create": True})
    admin = LocalKeyringAdmin(kms.keyring)
    kek_id = admin.create_kek("kek")
    store = KeyStore(tmp_path / "store.sqlite", topic="keys")
    store.apply([(0, 0, WrappingKeyRecord(WK_A, kms.wrap(kek_id, b"\x01" * 32, wk_edek_context(WK_A)), 1))], {0: 1})
    return kms, admin, kek_id, store


def test_a_marker_is_applied_only_when_the_kms_refuses_the_kek(
    setup: tuple[LocalKms, LocalKeyringAdmin, str, KeyStore], caplog: pytest.LogCaptureFixture
) -> None:
    kms, admin, kek_id, store = setup
    check = LostMarkerCheck({"local": kms}, store, "keys")
    with caplog.at_level(logging.ERROR, logger="strongroom.keys.lost_check"):
        confirmed, refused = check.judge([marker(WK_A), marker(WK_GONE)])
    assert list(confirmed) == [WK_GONE]  # no wrapping-key record: nothing to unwrap, nothing to protect
    assert refused[WK_A].kek_present
    assert "still unwraps" in refused[WK_A].reason
    assert [r.levelno for r in caplog.records] == [logging.ERROR]
    caplog.clear()
    with caplog.at_level(logging.ERROR, logger="strongroom.keys.lost_check"):
        check.judge([marker(WK_A)], refused)  # the same refusal again: not logged again
    assert not caplog.records

    _, unconfigured = LostMarkerCheck({}, store, "keys").judge([marker(WK_A)])
    assert not unconfigured[WK_A].kek_present
    assert "no KMS of provider 'local'" in unconfigured[WK_A].reason

    admin.set_state(kek_id, KekState.DISABLED)
    confirmed, refused = check.judge([marker(WK_A)])
    assert list(confirmed) == [WK_A]
    assert not refused
    store.close()
