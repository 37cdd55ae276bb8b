"""A wrapping key's EDEK is bound to its WK id (local KMS AAD here; OpenBao in the integration tests)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from strongroom.errors import KmsError
from strongroom.keys import records
from strongroom.keys.errors import CorruptKeyRecord
from strongroom.keys.records import WK_EDEK_BINDING, WrappingKeyRecord, wk_edek_context
from strongroom.keys.store import KeyStore
from strongroom.kms.caching import CachingKms
from strongroom.kms.errors import EdekInvalid
from strongroom.kms.local import LocalKeyringAdmin, LocalKms

WK_A, WK_B = b"A" * 16, b"B" * 16
WK = bytes(range(32))


@pytest.fixture
def kms(tmp_path: Path) -> LocalKms:
    local = LocalKms.from_config({"path": tmp_path / "keyring.json", "create": True})
    LocalKeyringAdmin(local.keyring).create_kek("kek")
    return local


def test_a_bound_edek_unwraps_only_under_its_own_wk_id(kms: LocalKms) -> None:
    edek = kms.wrap(kms.resolve_alias("kek"), WK, wk_edek_context(WK_A))
    assert kms.unwrap(edek) == WK
    with pytest.raises(EdekInvalid, match="with this binding"):
        kms.unwrap(dataclasses.replace(edek, context=wk_edek_context(WK_B)))
    with pytest.raises(EdekInvalid):
        kms.unwrap(dataclasses.replace(edek, context=b""))  # stripping the binding does not help either
    cached = CachingKms(kms)
    assert cached.unwrap(edek) == WK
    with pytest.raises(KmsError):  # a cache hit under another binding would bypass the KMS: it is a miss
        cached.unwrap(dataclasses.replace(edek, context=wk_edek_context(WK_B)))


def test_records_derive_the_binding_from_the_wk_id_and_old_unbound_records_still_read(kms: LocalKms) -> None:
    bound = WrappingKeyRecord(WK_A, kms.wrap(kms.resolve_alias("kek"), WK, wk_edek_context(WK_A)), 1)
    key, value = records.encode(bound)
    assert value is not None
    assert json.loads(value)["edek_binding"] == WK_EDEK_BINDING
    decoded = records.decode(key, value)
    assert isinstance(decoded, WrappingKeyRecord)
    assert kms.unwrap(decoded.edek) == WK

    # the same EDEK moved under another WK id: the record names B, so the context is B's and it fails
    moved = json.loads(value)
    moved["wk_id"] = WK_B.hex()
    forged = records.decode(records.wrapping_key_message_key(WK_B), json.dumps(moved).encode())
    assert isinstance(forged, WrappingKeyRecord)
    with pytest.raises(EdekInvalid):
        kms.unwrap(forged.edek)

    legacy = WrappingKeyRecord(WK_A, kms.wrap(kms.resolve_alias("kek"), WK), 1)  # written before binding existed
    key, value = records.encode(legacy)
    assert value is not None
    assert "edek_binding" not in json.loads(value)
    decoded = records.decode(key, value)
    assert isinstance(decoded, WrappingKeyRecord)
    assert decoded.edek.context == b""
    assert kms.unwrap(decoded.edek) == WK

    unknown = json.loads(records.encode(bound)[1] or b"{}")
    unknown["edek_binding"] = "wk-id/v9"
    with pytest.raises(CorruptKeyRecord, match="upgrade strongroom"):
        records.decode(records.wrapping_key_message_key(WK_A), json.dumps(unknown).encode())
    with pytest.raises(ValueError, match="bound to its own WK id"):
        records.encode(WrappingKeyRecord(WK_B, bound.edek, 1))


def test_the_store_keeps_the_binding(kms: LocalKms, tmp_path: Path) -> None:
    store = KeyStore(tmp_path / "store.sqlite", topic="keys")
    bound = WrappingKeyRecord(WK_A, kms.wrap(kms.resolve_alias("kek"), WK, wk_edek_context(WK_A)), 1)
    legacy = WrappingKeyRecord(WK_B, kms.wrap(kms.resolve_alias("kek"), WK), 1)
    store.apply([(0, 0, bound), (0, 1, legacy)], {0: 2})
    stored_a, stored_b = store.wrapping_key(WK_A), store.wrapping_key(WK_B)
    assert stored_a is not None
    assert stored_b is not None
    assert kms.unwrap(stored_a.edek) == WK
    assert kms.unwrap(stored_b.edek) == WK
    store.close()
