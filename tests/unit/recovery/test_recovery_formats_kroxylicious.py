"""The Kroxylicious record cut: varints, EDEKs per KMS, wrapper V2 + parcel V1 round trips, bad bytes."""

from __future__ import annotations

import os
import uuid

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from hypothesis import given
from hypothesis import strategies as st

from strongroom.kms.api import Edek
from strongroom.kms.errors import EdekInvalid, KekNotFound
from strongroom.recovery.dependency import RecordKind
from strongroom.recovery.errors import UnknownRecordFormat
from strongroom.recovery.formats import KroxyliciousFormat, KroxyliciousInMemoryKms, MalformedPrefix, record_format
from strongroom.recovery.formats.kroxylicious import (
    MARKER_HEADER,
    aws_edek,
    decrypt_record,
    encode_record,
    read_uvarint,
    read_zvarint,
    vault_edek,
    write_uvarint,
    write_zvarint,
)


@pytest.mark.parametrize(("value", "encoded"), [(0, "00"), (78, "4e"), (130, "8201"), (300, "ac02"), (32767, "ffff01")])
def test_uvarint_examples_from_the_spec(value: int, encoded: str) -> None:
    assert write_uvarint(value).hex() == encoded
    assert read_uvarint(bytes.fromhex(encoded), 0) == (value, len(encoded) // 2)


@pytest.mark.parametrize(("value", "encoded"), [(-1, "01"), (-2, "03"), (1, "02"), (0, "00")])
def test_zvarint_examples(value: int, encoded: str) -> None:
    assert write_zvarint(value).hex() == encoded
    assert read_zvarint(bytes.fromhex(encoded), 0)[0] == value


@given(st.integers(min_value=0, max_value=2**34))
def test_uvarint_round_trip(value: int) -> None:
    assert read_uvarint(write_uvarint(value), 0)[0] == value


def test_truncated_and_overlong_varints_are_malformed() -> None:
    with pytest.raises(MalformedPrefix):
        read_uvarint(b"\x80", 0)
    with pytest.raises(MalformedPrefix):
        read_uvarint(b"\xff" * 6, 0)


def _inmemory_record(kek: bytes, kek_uuid: uuid.UUID, plaintext: bytes) -> tuple[list[tuple[str, bytes | None]], bytes]:
    dek, iv = os.urandom(32), os.urandom(12)
    edek = b"\x80\x0c" + iv + kek_uuid.bytes + AESGCM(kek).encrypt(iv, dek, None)
    return encode_record(plaintext, dek, edek, os.urandom(12))


def test_inmemory_round_trip_and_dependency() -> None:
    kek, kek_uuid = os.urandom(32), uuid.uuid4()
    headers, value = _inmemory_record(kek, kek_uuid, b"hello")
    fmt = KroxyliciousFormat("inmemory")
    [prefix] = fmt.record_keys(headers, value).prefixes
    dep = fmt.dependency(prefix)
    assert (dep.kek, dep.kek_id, dep.version) == (f"inmemory:{kek_uuid}", str(kek_uuid), None)
    kms = KroxyliciousInMemoryKms({str(kek_uuid): kek})
    decrypted = decrypt_record(headers, value, fmt, kms)
    assert decrypted.value == b"hello"
    assert decrypted.headers == []
    with pytest.raises(KekNotFound):
        KroxyliciousInMemoryKms({str(uuid.uuid4()): kek}).unwrap(dep.edek)  # type: ignore[arg-type]
    with pytest.raises(EdekInvalid):
        KroxyliciousInMemoryKms({str(kek_uuid): os.urandom(32)}).unwrap(dep.edek)  # type: ignore[arg-type]


def test_vault_edek_maps_onto_strongroom_vault_edeks() -> None:
    ciphertext = "vault:v3:" + "QUJD" * 20
    headers, value = encode_record(b"v", os.urandom(32), vault_edek("KEK-orders", ciphertext), os.urandom(12))
    fmt = KroxyliciousFormat("vault")
    dep = fmt.dependency(fmt.record_keys(headers, value).prefixes[0])
    assert dep.edek == Edek("vault", "KEK-orders", ciphertext.encode())
    assert (dep.kek, dep.version) == ("vault:KEK-orders", "v3")


def test_aws_edek_maps_onto_strongroom_aws_edeks() -> None:
    key_id, blob = str(uuid.uuid4()), os.urandom(184)
    headers, value = encode_record(b"v", os.urandom(32), aws_edek(key_id, blob), os.urandom(12))
    fmt = KroxyliciousFormat("aws", "aws-prod")
    dep = fmt.dependency(fmt.record_keys(headers, value).prefixes[0])
    assert dep.edek == Edek("aws-prod", key_id, blob)
    assert dep.kek == f"aws-prod:{key_id}"


def test_long_edeks_use_multi_byte_lengths() -> None:
    ciphertext = "vault:v1:" + "A" * 400  # EDEK > 127 bytes: a 2-byte length varint
    headers, value = encode_record(b"v", os.urandom(32), vault_edek("k", ciphertext), os.urandom(12))
    fmt = KroxyliciousFormat("vault")
    [prefix] = fmt.record_keys(headers, value).prefixes
    assert prefix[1] & 0x80
    assert fmt.dependency(prefix).kek_id == "k"


@pytest.mark.parametrize(
    ("headers", "value", "kind"),
    [
        ([], b"x", RecordKind.PLAIN),
        (None, None, RecordKind.TOMBSTONE),
        ([(MARKER_HEADER, b"\x01")], b"\x00" * 80, RecordKind.MALFORMED),  # V1 wrapper
        ([(MARKER_HEADER, b"\x03")], b"\x00" * 80, RecordKind.MALFORMED),
        ([(MARKER_HEADER, b"\x02\x02")], b"\x00" * 80, RecordKind.MALFORMED),
        ([(MARKER_HEADER, b"\x02")], None, RecordKind.MALFORMED),
        ([(MARKER_HEADER, b"\x02")], b"\x00\x4e" + b"\x00" * 20, RecordKind.MALFORMED),  # truncated
    ],
)
def test_kinds(headers: list[tuple[str, bytes | None]] | None, value: bytes | None, kind: RecordKind) -> None:
    assert KroxyliciousFormat("vault").record_keys(headers, value).kind is kind


@pytest.mark.parametrize(
    ("kms", "edek"),
    [
        ("vault", b"\x03abcnot-a-vault-string"),
        ("vault", b"\x10abc"),
        ("aws", b"\x01\x03abcblob"),
        ("aws", b"\x00\x03abc"),
        ("inmemory", b"\x80\x10" + b"\x00" * 60),
    ],
)
def test_bad_edeks_are_malformed_prefixes(kms: str, edek: bytes) -> None:
    prefix = b"\x00" + write_uvarint(len(edek)) + edek
    with pytest.raises(MalformedPrefix):
        KroxyliciousFormat(kms).dependency(prefix)


def test_unknown_cipher_is_malformed() -> None:
    with pytest.raises(MalformedPrefix, match="AES-256-GCM"):
        KroxyliciousFormat("vault").dependency(b"\x01\x01x")


def test_the_kms_must_be_named() -> None:
    with pytest.raises(UnknownRecordFormat, match="do not say which KMS"):
        record_format("kroxylicious")
    with pytest.raises(UnknownRecordFormat, match="azure"):
        record_format("kroxylicious", kms_kind="azure")
    with pytest.raises(UnknownRecordFormat):
        record_format("avro")
