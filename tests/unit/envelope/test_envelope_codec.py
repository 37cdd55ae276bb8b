"""Whole-value envelopes: round trips, binding to topic/subject/field, and every parse error."""

from __future__ import annotations

import os
import struct

import pytest

from strongroom.crypto import InvalidDek, nonces
from strongroom.envelope import (
    AadProfile,
    EncodingLimitExceeded,
    IntegrityError,
    InvalidKeyRef,
    KeyRef,
    MalformedEnvelope,
    NotAnEnvelope,
    RecordContext,
    SubjectErased,
    SubjectKeyRef,
    UnknownAadProfile,
    UnknownCipher,
    UnknownKeyRefKind,
    UnsupportedFormatVersion,
    WrappedDekRef,
    aad_for,
    decrypt_value,
    open_envelope,
    parse,
    seal,
)
from strongroom.errors import EnvelopeError

DEK = bytes(range(32))
OTHER_DEK = bytes(range(1, 33))
SUBJECT_REF = SubjectKeyRef(bytes.fromhex("00112233445566778899aabbccddeeff"))
WRAPPED_REF = WrappedDekRef("vault:orders-kek", b"vault:v1:c29tZS1lZGVr")
REFS = [pytest.param(SUBJECT_REF, id="subject-key"), pytest.param(WRAPPED_REF, id="wrapped-dek")]
PROFILES = [pytest.param(AadProfile.TOPIC, id="topic"), pytest.param(AadProfile.PORTABLE, id="portable")]


def ctx(topic: str = "orders", subject: bytes = b"customer-42", profile: AadProfile = AadProfile.TOPIC):
    return RecordContext(topic, subject, profile)


@pytest.mark.parametrize("key_ref", REFS)
@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("plaintext", [b"", b"x", b'{"a": 1}', os.urandom(5000)], ids=["empty", "1", "json", "5k"])
def test_round_trip(key_ref: KeyRef, profile: AadProfile, plaintext: bytes) -> None:
    envelope = seal(plaintext, DEK, key_ref, ctx(profile=profile))
    parsed = parse(envelope)
    assert parsed.key_ref == key_ref
    assert parsed.aad_profile is profile
    assert len(parsed.nonce) == 12
    assert len(parsed.ciphertext) == len(plaintext) + 16
    assert open_envelope(parsed, DEK, ctx(profile=profile)) == plaintext
    assert decrypt_value(envelope, lambda ref: DEK, ctx(profile=profile)) == plaintext


@pytest.mark.parametrize("key_ref", REFS)
def test_layout_is_header_then_nonce_then_ciphertext(key_ref: KeyRef) -> None:
    envelope = seal(b"hello", DEK, key_ref, ctx())
    header = key_ref.header(AadProfile.TOPIC)
    assert envelope.startswith(bytes((0xF5, 0x01, 0x01, key_ref.kind)) + key_ref.encode())
    assert envelope[: len(header)] == header
    assert header[-1] == AadProfile.TOPIC
    assert len(envelope) == len(header) + 12 + 5 + 16


def test_wrapped_dek_key_ref_encoding() -> None:
    assert WRAPPED_REF.encode() == (
        struct.pack(">H", 16) + b"vault:orders-kek" + struct.pack(">H", 21) + b"vault:v1:c29tZS1lZGVr"
    )
    assert WRAPPED_REF.provider == "vault"
    assert WRAPPED_REF.kek_id == "orders-kek"


def test_aad_layout_matches_the_spec() -> None:
    subject = b"customer-42"
    expected = (
        b"strongroom/v1"
        + SUBJECT_REF.header(AadProfile.TOPIC)
        + b"\x00\x06orders"
        + struct.pack(">I", len(subject))
        + subject
        + b"\x00\x07$.email"
    )
    assert aad_for(SUBJECT_REF, ctx(), "$.email") == expected
    portable = aad_for(SUBJECT_REF, ctx(profile=AadProfile.PORTABLE))
    assert portable == (
        b"strongroom/v1"
        + SUBJECT_REF.header(AadProfile.PORTABLE)
        + b"\x00\x00"
        + b"\x00\x00\x00\x0b"
        + subject
        + b"\x00\x00"
    )


@pytest.mark.parametrize("key_ref", REFS)
def test_moved_to_another_topic_fails(key_ref: KeyRef) -> None:
    envelope = seal(b"secret", DEK, key_ref, ctx(topic="orders"))
    with pytest.raises(IntegrityError, match="topic 'payments'"):
        decrypt_value(envelope, lambda ref: DEK, ctx(topic="payments"))


@pytest.mark.parametrize("key_ref", REFS)
@pytest.mark.parametrize("profile", PROFILES)
def test_moved_to_another_subject_fails(key_ref: KeyRef, profile: AadProfile) -> None:
    envelope = seal(b"secret", DEK, key_ref, ctx(subject=b"alice", profile=profile))
    with pytest.raises(IntegrityError, match="quarantine"):
        decrypt_value(envelope, lambda ref: DEK, ctx(subject=b"bob"))


def test_moved_to_another_field_path_fails() -> None:
    envelope = seal(b'"a@b.c"', DEK, SUBJECT_REF, ctx(), "$.email")
    parsed = parse(envelope)
    assert open_envelope(parsed, DEK, ctx(), "$.email") == b'"a@b.c"'
    with pytest.raises(IntegrityError, match=r"field \$\.name"):
        open_envelope(parsed, DEK, ctx(), "$.name")
    with pytest.raises(IntegrityError):
        open_envelope(parsed, DEK, ctx())


def test_portable_profile_survives_a_topic_rename() -> None:
    envelope = seal(b"secret", DEK, SUBJECT_REF, ctx(topic="orders", profile=AadProfile.PORTABLE))
    assert decrypt_value(envelope, lambda ref: DEK, ctx(topic="us.orders.v2")) == b"secret"


def test_topic_map_reads_a_mirror_under_its_logical_name() -> None:
    envelope = seal(b"secret", DEK, WRAPPED_REF, ctx(topic="orders"))
    mirror = ctx(topic="us.orders")
    assert decrypt_value(envelope, lambda ref: DEK, mirror, topic_map={"us.orders": "orders"}) == b"secret"
    with pytest.raises(IntegrityError):
        decrypt_value(envelope, lambda ref: DEK, mirror)


def test_wrong_dek_is_an_integrity_error() -> None:
    envelope = seal(b"secret", DEK, SUBJECT_REF, ctx())
    with pytest.raises(IntegrityError):
        decrypt_value(envelope, lambda ref: OTHER_DEK, ctx())


def test_changing_the_profile_byte_is_detected() -> None:
    envelope = bytearray(seal(b"secret", DEK, SUBJECT_REF, ctx()))
    profile_offset = len(SUBJECT_REF.header(AadProfile.TOPIC)) - 1
    envelope[profile_offset] = AadProfile.PORTABLE
    with pytest.raises(IntegrityError):
        decrypt_value(bytes(envelope), lambda ref: DEK, ctx())


def test_erased_key_raises_subject_erased() -> None:
    envelope = seal(b"secret", DEK, SUBJECT_REF, ctx())
    with pytest.raises(SubjectErased, match="erased"):
        decrypt_value(envelope, lambda ref: None, ctx())


def test_every_truncation_fails_cleanly() -> None:
    for key_ref in (SUBJECT_REF, WRAPPED_REF):
        envelope = seal(b"some plaintext", DEK, key_ref, ctx())
        for cut in range(len(envelope)):
            with pytest.raises(EnvelopeError):
                decrypt_value(envelope[:cut], lambda ref: DEK, ctx())


def test_every_bit_flip_fails_cleanly() -> None:
    for key_ref in (SUBJECT_REF, WRAPPED_REF):
        envelope = seal(b"some plaintext", DEK, key_ref, ctx())
        for bit in range(len(envelope) * 8):
            mutated = bytearray(envelope)
            mutated[bit // 8] ^= 1 << (bit % 8)
            with pytest.raises(EnvelopeError):
                decrypt_value(bytes(mutated), lambda ref: DEK, ctx())


def _with_byte(envelope: bytes, offset: int, value: int) -> bytes:
    mutated = bytearray(envelope)
    mutated[offset] = value
    return bytes(mutated)


@pytest.mark.parametrize(
    ("offset", "value", "error", "text"),
    [
        (0, 0x7B, NotAnEnvelope, "0x7b"),
        (1, 0x00, UnsupportedFormatVersion, "0x00"),
        (1, 0x02, UnsupportedFormatVersion, "0x02"),
        (2, 0x00, UnknownCipher, "0x00"),
        (2, 0x02, UnknownCipher, "0x02"),
        (3, 0x00, UnknownKeyRefKind, "0x00"),
        (3, 0x03, UnknownKeyRefKind, "0x03"),
        (20, 0x00, UnknownAadProfile, "0x00"),
        (20, 0x03, UnknownAadProfile, "0x03"),
    ],
)
def test_each_unknown_id_has_its_own_error(offset: int, value: int, error: type[Exception], text: str) -> None:
    envelope = seal(b"secret", DEK, SUBJECT_REF, ctx())
    with pytest.raises(error, match=text):
        parse(_with_byte(envelope, offset, value))


def test_not_an_envelope() -> None:
    for value in (b"", b'{"a":1}', b"plain text"):
        with pytest.raises(NotAnEnvelope):
            parse(value)


def _wrapped(kek: bytes, edek: bytes, tail: bytes = b"\x01" + bytes(28)) -> bytes:
    return b"\xf5\x01\x01\x02" + struct.pack(">H", len(kek)) + kek + struct.pack(">H", len(edek)) + edek + tail


@pytest.mark.parametrize(
    ("envelope", "text"),
    [
        (_wrapped(b"", b"e"), "bad KEK reference length 0"),
        (_wrapped(b"\xff\xfe:x", b"e"), "not UTF-8"),
        (_wrapped(b"no-colon", b"e"), "not 'provider:kek-id'"),
        (_wrapped(b":id", b"e"), "not 'provider:kek-id'"),
        (_wrapped(b"vault:k", b""), "bad EDEK length 0"),
        (b"\xf5\x01\x01\x02\x00", "KEK reference length"),
        (b"\xf5\x01\x01\x02\x00\x09vault:k", "bad KEK reference length 9"),
        (b"\xf5\x01\x01\x02\x00\x07vault:k\x00\x05ab", "bad EDEK length 5"),
        (_wrapped(b"vault:k", b"e", tail=b"\x01" + bytes(27)), "at least 28 needed"),
        (_wrapped(b"vault:k", b"e", tail=b""), "before its AAD profile"),
        (b"\xf5\x01\x01\x01" + bytes(15), "inside its subject key id"),
        (b"\xf5\x01\x01", "shorter than its 4-byte fixed header"),
    ],
)
def test_malformed_envelopes(envelope: bytes, text: str) -> None:
    with pytest.raises(MalformedEnvelope, match=text):
        parse(envelope)


def test_bad_dek_is_refused_without_showing_it() -> None:
    for dek in (b"short", bytes(16), bytes(33)):
        with pytest.raises(InvalidDek) as info:
            seal(b"x", dek, SUBJECT_REF, ctx())
        assert dek.hex() not in str(info.value)


def test_messages_never_show_key_material_plaintext_or_subject() -> None:
    envelope = seal(b"TOP-SECRET-PLAINTEXT", DEK, SUBJECT_REF, ctx(subject=b"alice@example.com"))
    with pytest.raises(IntegrityError) as info:
        decrypt_value(envelope, lambda ref: OTHER_DEK, ctx(subject=b"alice@example.com"))
    message = str(info.value)
    for secret in ("TOP-SECRET", DEK.hex(), OTHER_DEK.hex(), "alice"):
        assert secret not in message
    assert "sha256:" in message


def test_key_ref_validation() -> None:
    with pytest.raises(InvalidKeyRef):
        SubjectKeyRef(b"short")
    with pytest.raises(InvalidKeyRef):
        WrappedDekRef("no-provider", b"e")
    with pytest.raises(InvalidKeyRef):
        WrappedDekRef("vault:k", b"")
    with pytest.raises(EncodingLimitExceeded):
        WrappedDekRef("vault:k", bytes(70000))


def test_key_refs_compare_by_value_and_hide_edeks_in_repr() -> None:
    assert SubjectKeyRef(bytes(16)) == SubjectKeyRef(bytes(16))
    assert hash(WrappedDekRef("a:b", b"e")) == hash(WrappedDekRef("a:b", b"e"))
    assert WrappedDekRef("a:b", b"e") != WrappedDekRef("a:b", b"f")
    assert SUBJECT_REF != WRAPPED_REF
    assert "c29tZS1lZGVr" not in repr(WRAPPED_REF)


def test_too_long_topic_or_path_is_refused() -> None:
    with pytest.raises(EncodingLimitExceeded):
        seal(b"x", DEK, SUBJECT_REF, ctx(topic="t" * 70000))
    with pytest.raises(EncodingLimitExceeded):
        seal(b"x", DEK, SUBJECT_REF, ctx(), "$." + "a" * 70000)


def test_fixed_nonces_are_used_then_random_again() -> None:
    nonce = bytes(range(12))
    with nonces.fixed_nonces_for_vectors([nonce, nonce]):
        first = seal(b"x", DEK, SUBJECT_REF, ctx())
        second = seal(b"x", DEK, SUBJECT_REF, ctx())
        with pytest.raises(RuntimeError, match="ran out"):
            seal(b"x", DEK, SUBJECT_REF, ctx())
    assert first == second
    assert parse(first).nonce == nonce
    assert parse(seal(b"x", DEK, SUBJECT_REF, ctx())).nonce != nonce
