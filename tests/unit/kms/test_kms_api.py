"""EDEK value type, its serializations, and DekPair's redaction."""

from __future__ import annotations

import pytest

from strongroom.kms.api import DekPair, Edek
from strongroom.kms.errors import EdekInvalid

EDEK = Edek("vault", "orders-kek", b"vault:v3:abcdef")


def test_bytes_round_trip_and_layout() -> None:
    data = EDEK.to_bytes()
    assert data == b"\x01\x05vault\x00\x0aorders-kek" + b"vault:v3:abcdef"
    assert Edek.from_bytes(data) == EDEK


def test_dict_round_trip() -> None:
    assert EDEK.to_dict() == {"provider": "vault", "kek_id": "orders-kek", "ciphertext": "dmF1bHQ6djM6YWJjZGVm"}
    assert Edek.from_dict(EDEK.to_dict()) == EDEK


def test_kek_ref() -> None:
    assert EDEK.kek_ref == "vault:orders-kek"
    arn = "arn:aws:kms:eu-west-1:123456789012:key/1234"
    assert Edek.from_kek_ref(f"aws:{arn}", b"blob") == Edek("aws", arn, b"blob")
    with pytest.raises(EdekInvalid):
        Edek.from_kek_ref("no-provider", b"blob")


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x02\x05vault",
        b"\x01\x05vau",
        b"\x01\x05vault\x00",
        b"\x01\x05vault\x00\x0aorders-kek",
        b"\x01\x02\xff\xfe\x00\x01k1",
    ],
)
def test_from_bytes_rejects_garbage(data: bytes) -> None:
    with pytest.raises(EdekInvalid):
        Edek.from_bytes(data)


@pytest.mark.parametrize(
    "data",
    [
        {},
        {"provider": "vault", "kek_id": "k"},
        {"provider": "vault", "kek_id": "k", "ciphertext": "!!"},
        {"provider": "", "kek_id": "k", "ciphertext": "AA=="},
    ],
)
def test_from_dict_rejects_garbage(data: dict[str, str]) -> None:
    with pytest.raises(EdekInvalid):
        Edek.from_dict(data)


@pytest.mark.parametrize(
    ("provider", "kek_id", "ciphertext"),
    [("", "k", b"c"), ("a:b", "k", b"c"), ("p", "", b"c"), ("p", "k", b"")],
)
def test_invalid_edeks(provider: str, kek_id: str, ciphertext: bytes) -> None:
    with pytest.raises(EdekInvalid):
        Edek(provider, kek_id, ciphertext)


def test_dek_pair_repr_never_shows_the_dek() -> None:
    dek = bytes(range(32))
    text = repr(DekPair(dek, EDEK)) + str(DekPair(dek, EDEK))
    assert dek.hex() not in text
    assert repr(dek) not in text
    assert "redacted" in text
    assert "abcdef" not in repr(EDEK)
