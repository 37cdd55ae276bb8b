"""Envelope v1: seal, parse and open one envelope.

Layout (every byte before the nonce is fixed bytes and fixed-width big-endian lengths, so the JVM
side can assemble it with ``concat`` around Spark's ``aes_encrypt`` output ``iv ‖ ct ‖ tag``)::

    magic 0xF5 | version | cipher | key-ref kind | key ref | aad profile | nonce(12) | ciphertext‖tag(16)

Opening never returns partial plaintext: AES-GCM verifies the tag over the whole ciphertext and
the AAD before a single byte is released, and every failure raises an
:class:`~strongroom.errors.EnvelopeError` subclass.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Mapping
from typing import Final, NamedTuple

from cryptography.exceptions import InvalidTag

from strongroom.crypto import nonces
from strongroom.crypto.aead import CIPHERS
from strongroom.crypto.limits import DekUsage
from strongroom.envelope.aad import RecordContext, aad_frame, new_aad_frame
from strongroom.envelope.errors import (
    EncodingLimitExceeded,
    IntegrityError,
    MalformedEnvelope,
    NotAnEnvelope,
    SubjectErased,
    UnknownAadProfile,
    UnknownCipher,
    UnknownKeyRefKind,
    UnsupportedFormatVersion,
    subject_fingerprint,
)
from strongroom.envelope.ids import (
    MAGIC,
    NONCE_SIZE,
    SUBJECT_KEY_ID_SIZE,
    TAG_SIZE,
    AadProfile,
    Cipher,
    FormatVersion,
    KeyRefKind,
)
from strongroom.envelope.keyref import KeyRef, SubjectKeyRef, WrappedDekRef

_U16: Final = struct.Struct(">H")
_pack_u32: Final = struct.Struct(">I").pack
_peek_cipher: Final = CIPHERS.peek
_aad_frame: Final = aad_frame
_urandom: Final = os.urandom
_MAX_SEAL_FRAMES: Final = 256
_new_parsed: Final = tuple.__new__  # ParsedEnvelope's generated __new__ is a Python-level call
_FIXED_HEADER_SIZE: Final = 4
_MIN_TAIL: Final = NONCE_SIZE + TAG_SIZE
_PROFILES: Final = {int(p): p for p in AadProfile}
# Enum attribute access costs ~100 ns on Python 3.11; the hot paths use these module constants.
_PORTABLE: Final = AadProfile.PORTABLE
_V1_ENUM: Final = FormatVersion.V1
_AES_256_GCM_ENUM: Final = Cipher.AES_256_GCM
_V1: Final = int(FormatVersion.V1)
_AES_256_GCM: Final = int(Cipher.AES_256_GCM)
_SUBJECT_KEY: Final = int(KeyRefKind.SUBJECT_KEY)
_WRAPPED_DEK: Final = int(KeyRefKind.WRAPPED_DEK)
_SUBJECT_KEY_END: Final = _FIXED_HEADER_SIZE + SUBJECT_KEY_ID_SIZE

#: Given a key reference, return the 32-byte DEK, or None if the key was erased on purpose.
#: Any other failure (KMS down, KEK lost) is raised by the lookup itself.
KeyLookup = Callable[[KeyRef], "bytes | None"]


class ParsedEnvelope(NamedTuple):
    """The fields of an envelope. ``header`` is every byte before the nonce (it is part of the AAD)."""

    version: FormatVersion
    cipher: Cipher
    key_ref: KeyRef
    aad_profile: AadProfile
    header: bytes
    nonce: bytes
    ciphertext: bytes  # ciphertext ‖ 16-byte tag


def seal(
    plaintext: bytes,
    dek: bytes,
    key_ref: KeyRef,
    ctx: RecordContext,
    field_path: str = "",
    *,
    usage: DekUsage | None = None,
) -> bytes:
    """Encrypt ``plaintext`` into an envelope bound to ``ctx`` (and ``field_path`` in field mode).

    ``usage``, when given, is charged one encryption first and raises
    :class:`~strongroom.crypto.DekExhausted` when the DEK must be rotated.
    """
    # This is every producer's hot path: build_aad is inlined and globals are pre-bound.
    topic, subject, profile = ctx.topic, ctx.subject, ctx.profile
    frame = key_ref.seal_frames.get((topic, profile, field_path)) or _seal_frame(key_ref, topic, profile, field_path)
    header, prefix, suffix = frame
    cipher = _peek_cipher(dek) or CIPHERS.get(dek)
    if usage is not None:
        usage.charge()
    nonce = _urandom(NONCE_SIZE) if nonces.override is None else nonces.new_nonce()
    try:
        aad = b"".join((prefix, _pack_u32(len(subject)), subject, suffix))
    except struct.error:
        raise EncodingLimitExceeded(f"subject of {len(subject)} bytes is longer than the AAD allows") from None
    return b"".join((header, nonce, cipher.encrypt(nonce, plaintext, aad)))


def _seal_frame(key_ref: KeyRef, topic: str, profile: AadProfile, field_path: str) -> tuple[bytes, bytes, bytes]:
    """Header and fixed AAD parts for sealing under ``key_ref`` (cached on the key reference)."""
    header = key_ref.header(profile)
    prefix, suffix = new_aad_frame(header, "" if profile == _PORTABLE else topic, field_path)
    frames = key_ref.seal_frames
    if len(frames) >= _MAX_SEAL_FRAMES:
        frames.clear()
    frames[topic, profile, field_path] = (header, prefix, suffix)
    return header, prefix, suffix


def parse(envelope: bytes) -> ParsedEnvelope:
    """Split an envelope into its fields, checking every id and length. Does not decrypt."""
    size = len(envelope)
    if size == 0 or envelope[0] != MAGIC:
        first = "nothing" if size == 0 else f"0x{envelope[0]:02x}"
        raise NotAnEnvelope(f"value does not start with the envelope magic byte 0xF5 (found {first})")
    if size < _FIXED_HEADER_SIZE:
        raise MalformedEnvelope(f"envelope of {size} bytes is shorter than its 4-byte fixed header")
    version = envelope[1]
    if version != _V1:
        raise UnsupportedFormatVersion(f"envelope format version 0x{version:02x}; this strongroom reads 0x01")
    if envelope[2] != _AES_256_GCM:
        raise UnknownCipher(f"envelope cipher id 0x{envelope[2]:02x} is not a known cipher")
    kind = envelope[3]
    key_ref: KeyRef
    if kind == _SUBJECT_KEY:
        end = _SUBJECT_KEY_END
        if size < end:
            raise MalformedEnvelope(f"envelope of {size} bytes is truncated inside its subject key id")
        key_ref = SubjectKeyRef.trusted(envelope[_FIXED_HEADER_SIZE:end])
    elif kind == _WRAPPED_DEK:
        key_ref, end = _parse_wrapped_dek(envelope, _FIXED_HEADER_SIZE)
    else:
        raise UnknownKeyRefKind(f"envelope key-reference kind 0x{kind:02x} is not a known kind")
    if size <= end:
        raise MalformedEnvelope(f"envelope of {size} bytes is truncated before its AAD profile byte")
    profile = _PROFILES.get(envelope[end])
    if profile is None:
        raise UnknownAadProfile(f"envelope AAD profile 0x{envelope[end]:02x} is not a known profile")
    body = end + 1
    if size - body < _MIN_TAIL:
        raise MalformedEnvelope(
            f"envelope is truncated: {size - body} bytes after the header, at least {_MIN_TAIL} needed (nonce and tag)"
        )
    nonce_end = body + NONCE_SIZE
    fields = (
        _V1_ENUM,
        _AES_256_GCM_ENUM,
        key_ref,
        profile,
        envelope[:body],
        envelope[body:nonce_end],
        envelope[nonce_end:],
    )
    return _new_parsed(ParsedEnvelope, fields)


def _parse_wrapped_dek(envelope: bytes, pos: int) -> tuple[WrappedDekRef, int]:
    size = len(envelope)
    if size < pos + 2:
        raise MalformedEnvelope(f"envelope of {size} bytes is truncated inside its KEK reference length")
    (kek_len,) = _U16.unpack_from(envelope, pos)
    pos += 2
    if kek_len == 0 or size < pos + kek_len + 2:
        raise MalformedEnvelope(f"envelope of {size} bytes has a bad KEK reference length {kek_len}")
    try:
        kek_ref = envelope[pos : pos + kek_len].decode("utf-8")
    except UnicodeDecodeError:
        raise MalformedEnvelope("envelope KEK reference is not UTF-8") from None
    provider, sep, kek_id = kek_ref.partition(":")
    if not (provider and sep and kek_id):
        raise MalformedEnvelope(f"envelope KEK reference {kek_ref!r} is not 'provider:kek-id'")
    pos += kek_len
    (edek_len,) = _U16.unpack_from(envelope, pos)
    pos += 2
    if edek_len == 0 or size < pos + edek_len:
        raise MalformedEnvelope(f"envelope of {size} bytes has a bad EDEK length {edek_len}")
    return WrappedDekRef(kek_ref, envelope[pos : pos + edek_len]), pos + edek_len


def open_envelope(
    parsed: ParsedEnvelope,
    dek: bytes,
    ctx: RecordContext,
    field_path: str = "",
    *,
    topic_map: Mapping[str, str] | None = None,
) -> bytes:
    """Authenticate and decrypt a parsed envelope; :class:`IntegrityError` if it does not belong here.

    ``topic_map`` maps physical topic names to the logical names the data was sealed under
    (mirrors). The envelope's own AAD profile decides whether the topic is bound at all.
    """
    _, _, _, profile, header, nonce, ciphertext = parsed
    topic, subject = ctx.topic, ctx.subject
    if profile == _PORTABLE:
        topic = ""
    elif topic_map:
        topic = topic_map.get(topic, topic)
    frame = _aad_frame((header, topic, field_path)) or new_aad_frame(header, topic, field_path)
    try:
        aad = b"".join((frame[0], _pack_u32(len(subject)), subject, frame[1]))
        return (_peek_cipher(dek) or CIPHERS.get(dek)).decrypt(nonce, ciphertext, aad)
    except struct.error:
        raise EncodingLimitExceeded(f"subject of {len(subject)} bytes is longer than the AAD allows") from None
    except InvalidTag:
        where = "any topic (portable)" if parsed.aad_profile == _PORTABLE else f"topic {topic!r}"
        field = f", field {field_path}" if field_path else ""
        raise IntegrityError(
            f"record does not belong to {where} / subject {subject_fingerprint(ctx.subject)}{field} "
            f"under key {parsed.key_ref!r}, or was altered"
        ) from None


def decrypt_value(
    envelope: bytes,
    key_lookup: KeyLookup,
    ctx: RecordContext,
    *,
    topic_map: Mapping[str, str] | None = None,
) -> bytes:
    """Parse, look up the key and open a whole-value envelope. :class:`SubjectErased` if the key is gone."""
    parsed = parse(envelope)
    dek = key_lookup(parsed.key_ref)
    if dek is None:
        raise SubjectErased(f"the key {parsed.key_ref!r} of subject {subject_fingerprint(ctx.subject)} was erased")
    return open_envelope(parsed, dek, ctx, topic_map=topic_map)
