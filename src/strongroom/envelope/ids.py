"""The registry of every wire-format constant and one-byte id of strongroom.

**Forever once released, never reused.** Data written with these bytes may sit in Kafka (and in
backups of it) for years. A released id keeps its meaning for as long as strongroom can read
anything; an id that is withdrawn is marked retired here and never handed out again. New ids are
appended. Nothing else in the code base defines a byte that goes on the wire: everything reads it
from here, and ``docs/wire-format.md`` mirrors this file.

Released in format version 1 (strongroom 0.1): every id below except those marked reserved.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Final

#: Name of the Kafka record header that marks a strongroom-encrypted record.
RECORD_HEADER_NAME: Final = "strongroom.enc"

#: First byte of every envelope. 0xF5 never starts valid UTF-8, so no JSON or text payload
#: (including an unencrypted one) can be mistaken for an envelope.
MAGIC: Final = 0xF5

#: Domain-separation label that starts every AAD.
AAD_LABEL: Final = b"strongroom/v1"

#: Prefix of an encrypted JSON field: ``"sr1:" + base64(envelope)``. Strings that start with it
#: are reserved in field-mode topics.
FIELD_PREFIX: Final = "sr1:"


class FormatVersion(IntEnum):
    """Version byte of the record header and of the envelope."""

    V1 = 0x01


class ValueMode(IntEnum):
    """Second byte of the record header: what part of the value is encrypted."""

    WHOLE_VALUE = 0x01
    JSON_FIELDS = 0x02
    #: Fields of a schema-registry record (Confluent wire format) sealed in place (strongroom 0.2).
    SCHEMA_FIELDS = 0x03


class Cipher(IntEnum):
    """AEAD suite of an envelope. 0x00 is reserved and never used (catches zero-filled garbage)."""

    AES_256_GCM = 0x01  # 32-byte key, 12-byte nonce, 16-byte tag


#: Cipher ids that must never be assigned.
RESERVED_CIPHER_IDS: Final = frozenset({0x00})


class KeyRefKind(IntEnum):
    """How an envelope names its data key."""

    SUBJECT_KEY = 0x01  # 16-byte id of a per-subject key in the key table
    WRAPPED_DEK = 0x02  # KEK reference + EDEK carried in the envelope


class AadProfile(IntEnum):
    """Which context the AAD binds."""

    TOPIC = 0x01  # topic + subject + field path
    PORTABLE = 0x02  # subject + field path (topic bound as empty), for mirrored/renamed topics


#: Sizes fixed by version 1.
SUBJECT_KEY_ID_SIZE: Final = 16
NONCE_SIZE: Final = 12
TAG_SIZE: Final = 16
