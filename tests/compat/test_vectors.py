"""Frozen vectors: today's code must open every released vector and re-create it byte for byte.

A failure here means a change to the wire format (or to AAD, JSON serialisation, the local KMS's
EDEK layout) that would break data already written. Fix the code, do not regenerate the vectors.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from strongroom.crypto.nonces import fixed_nonces_for_vectors
from strongroom.envelope import (
    AadProfile,
    KeyRef,
    RecordContext,
    SubjectKeyRef,
    ValueMode,
    WrappedDekRef,
    aad_for,
    decrypt_json_fields,
    decrypt_value,
    encrypt_json_fields,
    marker_header,
    parse,
    parse_marker,
    seal,
)
from strongroom.kms.local import unwrap_with_kek, wrap_with_kek

VECTORS = sorted((Path(__file__).parent / "vectors").glob("*.json"))


def test_vectors_exist() -> None:
    names = {path.stem for path in VECTORS}
    assert {"whole-value-subject-key-topic", "whole-value-wrapped-dek-topic", "json-fields-subject-key-topic"} <= names
    assert len(names) >= 6


def _load(path: Path) -> dict[str, Any]:
    vector: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return vector


def _key_ref(vector: dict[str, Any]) -> KeyRef:
    ref = vector["key_ref"]
    if ref["kind"] == "subject_key":
        return SubjectKeyRef(bytes.fromhex(ref["key_id_hex"]))
    return WrappedDekRef(ref["kek_ref"], bytes.fromhex(ref["edek_hex"]))


def _context(vector: dict[str, Any]) -> RecordContext:
    ctx = vector["context"]
    return RecordContext(ctx["topic"], bytes.fromhex(ctx["subject_hex"]), AadProfile[ctx["profile"].upper()])


@pytest.mark.parametrize("path", VECTORS, ids=[p.stem for p in VECTORS])
def test_vector(path: Path) -> None:
    vector = _load(path)
    dek = bytes.fromhex(vector["dek_hex"])
    ref = _key_ref(vector)
    ctx = _context(vector)
    nonces = [bytes.fromhex(n) for n in vector["nonces_hex"]]
    mode = ValueMode[vector["value_mode"].upper()]

    header = vector["record_header"]
    assert marker_header(mode) == (header["name"], bytes.fromhex(header["value_hex"]))
    assert parse_marker(bytes.fromhex(header["value_hex"])).mode is mode

    if vector["key_ref"]["kind"] == "wrapped_dek":
        kek = vector["key_ref"]["kek"]
        kek_key, kek_id = bytes.fromhex(kek["kek_hex"]), kek["kek_id"]
        assert unwrap_with_kek(kek_key, kek_id, bytes.fromhex(vector["key_ref"]["edek_hex"])) == dek
        rewrapped = wrap_with_kek(kek_key, kek_id, kek["version"], dek, nonce=bytes.fromhex(kek["wrap_nonce_hex"]))
        assert rewrapped.hex() == vector["key_ref"]["edek_hex"]

    def lookup(seen: KeyRef) -> bytes:
        assert seen == ref
        return dek

    if mode is ValueMode.WHOLE_VALUE:
        envelope = bytes.fromhex(vector["envelope_hex"])
        assert parse(envelope).key_ref == ref
        assert aad_for(ref, ctx).hex() == vector["aad_hex"]
        assert decrypt_value(envelope, lookup, ctx).hex() == vector["plaintext_hex"]
        with fixed_nonces_for_vectors(nonces):
            assert seal(bytes.fromhex(vector["plaintext_hex"]), dek, ref, ctx).hex() == vector["envelope_hex"]
    else:
        sealed = vector["sealed_value_utf8"].encode()
        original = vector["value_utf8"].encode()
        assert json.loads(decrypt_json_fields(sealed, lookup, ctx)) == json.loads(original)
        for rule, aad_hex in vector["field_aads_hex"].items():
            assert aad_for(ref, ctx, rule).hex() == aad_hex
        with fixed_nonces_for_vectors(nonces):
            assert encrypt_json_fields(original, vector["rules"], dek, ref, ctx) == sealed


def _spec_reader(envelope: bytes, dek: bytes, topic: str, subject: bytes) -> bytes:
    """A from-the-spec reader (docs/wire-format.md), sharing no code with strongroom's codec."""
    import struct

    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    assert envelope[:3] == b"\xf5\x01\x01"
    pos = 4
    if envelope[3] == 0x01:
        pos += 16
    else:
        for _ in range(2):
            (length,) = struct.unpack_from(">H", envelope, pos)
            pos += 2 + length
    profile = envelope[pos]
    header, nonce, body = envelope[: pos + 1], envelope[pos + 1 : pos + 13], envelope[pos + 13 :]
    bound = b"" if profile == 0x02 else topic.encode()
    aad = (
        b"strongroom/v1"
        + header
        + struct.pack(">H", len(bound))
        + bound
        + struct.pack(">I", len(subject))
        + subject
        + struct.pack(">H", 0)
    )
    return AESGCM(dek).decrypt(nonce, body, aad)


@pytest.mark.parametrize("path", [p for p in VECTORS if "whole-value" in p.stem], ids=lambda p: p.stem)
def test_vector_opens_with_an_independent_reader(path: Path) -> None:
    vector = _load(path)
    ctx = _context(vector)
    plaintext = _spec_reader(
        bytes.fromhex(vector["envelope_hex"]), bytes.fromhex(vector["dek_hex"]), ctx.topic, ctx.subject
    )
    assert plaintext.hex() == vector["plaintext_hex"]
