"""Envelope v1 as Spark column expressions: sealing and opening whole values inside the JVM.

These back the DataFrame API (:mod:`strongroom.spark.dataframes`) in whole-value mode, where the crypto
stays in the JVM; the streaming pipelines seal and open in the exactly-once sink's Python tasks
(:mod:`strongroom.spark.row_transforms`), so their records do leave the JVM. Spark's built-in
``aes_encrypt(value, key, 'GCM', 'DEFAULT', '', aad)`` draws a random 12-byte IV per row (SecureRandom)
and returns ``iv ‖ ciphertext ‖ tag`` — exactly the envelope's nonce and body — and
``try_aes_decrypt`` returns null instead of failing on a wrong key, AAD or tampered bytes. Everything
before the nonce (magic, version, cipher, key-ref kind, key id, AAD profile) is fixed bytes or the
16-byte key id column, and the AAD is concatenations with fixed-width big-endian lengths, so the
whole envelope is a column expression that Spark code-generates.

The byte layout is defined once in :mod:`strongroom.envelope`; ``tests/integration/spark`` checks
these expressions against the Python codec byte for byte.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from strongroom.envelope.ids import (
    AAD_LABEL,
    MAGIC,
    NONCE_SIZE,
    RECORD_HEADER_NAME,
    SUBJECT_KEY_ID_SIZE,
    AadProfile,
    Cipher,
    FormatVersion,
    KeyRefKind,
    ValueMode,
)

#: magic ‖ version ‖ cipher ‖ kind for SUBJECT_KEY envelopes (the key id and profile follow).
SUBJECT_KEY_PREFIX = bytes((MAGIC, FormatVersion.V1, Cipher.AES_256_GCM, KeyRefKind.SUBJECT_KEY))
#: 1-based positions (Spark's ``substring``) of the fields of a SUBJECT_KEY envelope.
KEY_ID_POS = len(SUBJECT_KEY_PREFIX) + 1
PROFILE_POS = KEY_ID_POS + SUBJECT_KEY_ID_SIZE
BODY_POS = PROFILE_POS + 1  # nonce ‖ ciphertext ‖ tag
HEADER_SIZE = PROFILE_POS
MIN_SUBJECT_ENVELOPE = HEADER_SIZE + NONCE_SIZE + 16


def _u16(length: Column) -> Column:
    """A byte length as 2 big-endian bytes."""
    return F.unhex(F.lpad(F.hex(length), 4, "0"))


def _u32(length: Column) -> Column:
    return F.unhex(F.lpad(F.hex(length), 8, "0"))


def utf8(col: Column) -> Column:
    """A string column as UTF-8 bytes (``length`` of a binary counts bytes, of a string characters)."""
    return col.cast("binary")


def subject_key_header(key_id: Column, profile: AadProfile) -> Column:
    """Every envelope byte before the nonce, for a SUBJECT_KEY envelope."""
    return F.concat(F.lit(SUBJECT_KEY_PREFIX), key_id, F.lit(bytes((profile,))))


def aad(header: Column, bound_topic: Column, subject: Column, field_path: str = "") -> Column:
    """The envelope AAD: label ‖ header ‖ u16 len+topic ‖ u32 len+subject ‖ u16 len+path.

    ``bound_topic`` and ``subject`` are binary columns; ``bound_topic`` is empty for PORTABLE.
    """
    path = field_path.encode("utf-8")
    return F.concat(
        F.lit(AAD_LABEL),
        header,
        _u16(F.length(bound_topic)),
        bound_topic,
        _u32(F.length(subject)),
        subject,
        F.lit(len(path).to_bytes(2, "big") + path),
    )


def seal_whole_value(
    value: Column, dek: Column, key_id: Column, topic: Column, subject: Column, profile: AadProfile
) -> Column:
    """The envelope of ``value`` under the subject key ``(key_id, dek)``, bound to topic and subject.

    ``topic`` is a string column (the topic the ciphertext will live in), ``subject`` binary.
    """
    header = subject_key_header(key_id, profile)
    bound = F.lit(b"") if profile == AadProfile.PORTABLE else utf8(topic)
    # An empty IV makes Spark draw a random 12-byte IV per row and prepend it: nonce ‖ ciphertext ‖ tag.
    body = F.aes_encrypt(value, dek, F.lit("GCM"), F.lit("DEFAULT"), F.lit(b""), aad(header, bound, subject))
    return F.concat(header, body)


def is_subject_key_envelope(value: Column) -> Column:
    """True when the value starts like a version-1 AES-256-GCM SUBJECT_KEY envelope of plausible size."""
    return (F.substring(value, 1, len(SUBJECT_KEY_PREFIX)) == F.lit(SUBJECT_KEY_PREFIX)) & (
        F.length(value) >= MIN_SUBJECT_ENVELOPE
    )


def envelope_key_id(value: Column) -> Column:
    """The 16-byte subject key id of a SUBJECT_KEY envelope (garbage for anything else: check first)."""
    return F.substring(value, KEY_ID_POS, SUBJECT_KEY_ID_SIZE)


def envelope_profile(value: Column) -> Column:
    return F.conv(F.hex(F.substring(value, PROFILE_POS, 1)), 16, 10).cast("int")


def open_whole_value(value: Column, dek: Column, topic: Column, subject: Column) -> Column:
    """The plaintext of a SUBJECT_KEY envelope, or null when it does not open (wrong key/topic/subject,
    tampered bytes, unknown profile). Never partial plaintext: GCM authenticates before releasing.

    ``topic`` is the (logical) string topic the reader binds, ``subject`` binary.
    """
    header = F.substring(value, 1, HEADER_SIZE)
    profile = envelope_profile(value)
    bound = F.when(profile == F.lit(int(AadProfile.PORTABLE)), F.lit(b"")).otherwise(utf8(topic))
    known_profile = profile.isin(int(AadProfile.TOPIC), int(AadProfile.PORTABLE))
    body = F.substring(value, BODY_POS, 2**31 - 1)
    opened = F.try_aes_decrypt(body, dek, F.lit("GCM"), F.lit("DEFAULT"), aad(header, bound, subject))
    return F.when(is_subject_key_envelope(value) & known_profile, opened)


def marker_header(mode: ValueMode) -> Column:
    """The ``strongroom.enc`` record header as an element of Spark's Kafka ``headers`` array."""
    return F.struct(F.lit(RECORD_HEADER_NAME).alias("key"), F.lit(bytes((FormatVersion.V1, mode))).alias("value"))


def with_marker(headers: Column, mode: ValueMode) -> Column:
    """Headers with the marker first and any earlier ``strongroom.enc`` header removed."""
    others = F.filter(
        F.coalesce(headers, F.array().cast(headers_type())), lambda h: h["key"] != F.lit(RECORD_HEADER_NAME)
    )
    return F.concat(F.array(marker_header(mode)), others)


def without_marker(headers: Column) -> Column:
    return F.filter(
        F.coalesce(headers, F.array().cast(headers_type())), lambda h: h["key"] != F.lit(RECORD_HEADER_NAME)
    )


def headers_type() -> str:
    return "array<struct<key:string,value:binary>>"
