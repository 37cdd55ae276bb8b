"""Versioned wire format of encrypted records. Imports nothing from Kafka, Spark, KMS or the CLI.

The public API: :func:`seal`, :func:`parse`, :func:`open_envelope`, :func:`decrypt_value` for whole
values; :func:`encrypt_json_fields` / :func:`decrypt_json_fields` for JSON field mode;
:func:`aad_for` / :func:`build_aad` as the byte-exact reference for the Spark pipelines; the
``strongroom.enc`` record header helpers; and the id registry in :mod:`strongroom.envelope.ids`.
"""

from strongroom.envelope.aad import RecordContext, aad_for, bound_topic, build_aad
from strongroom.envelope.codec import (
    KeyLookup,
    ParsedEnvelope,
    decrypt_value,
    open_envelope,
    parse,
    seal,
)
from strongroom.envelope.errors import (
    EncodingLimitExceeded,
    IntegrityError,
    InvalidFieldPath,
    InvalidKeyRef,
    MalformedEnvelope,
    NotAnEnvelope,
    NotJson,
    NotJsonObject,
    SubjectErased,
    UnencryptedField,
    UnknownAadProfile,
    UnknownCipher,
    UnknownKeyRefKind,
    UnknownValueMode,
    UnsupportedFormatVersion,
)
from strongroom.envelope.header import RecordMarker, find_marker, marker_header, parse_marker
from strongroom.envelope.ids import (
    FIELD_PREFIX,
    MAGIC,
    RECORD_HEADER_NAME,
    AadProfile,
    Cipher,
    FormatVersion,
    KeyRefKind,
    ValueMode,
)
from strongroom.envelope.json_fields import decrypt_json_fields, encrypt_json_fields
from strongroom.envelope.jsonpath import FieldPath, FieldRules
from strongroom.envelope.keyref import KeyRef, SubjectKeyRef, WrappedDekRef

__all__ = [
    "FIELD_PREFIX",
    "MAGIC",
    "RECORD_HEADER_NAME",
    "AadProfile",
    "Cipher",
    "EncodingLimitExceeded",
    "FieldPath",
    "FieldRules",
    "FormatVersion",
    "IntegrityError",
    "InvalidFieldPath",
    "InvalidKeyRef",
    "KeyLookup",
    "KeyRef",
    "KeyRefKind",
    "MalformedEnvelope",
    "NotAnEnvelope",
    "NotJson",
    "NotJsonObject",
    "ParsedEnvelope",
    "RecordContext",
    "RecordMarker",
    "SubjectErased",
    "SubjectKeyRef",
    "UnencryptedField",
    "UnknownAadProfile",
    "UnknownCipher",
    "UnknownKeyRefKind",
    "UnknownValueMode",
    "UnsupportedFormatVersion",
    "ValueMode",
    "WrappedDekRef",
    "aad_for",
    "bound_topic",
    "build_aad",
    "decrypt_json_fields",
    "decrypt_value",
    "encrypt_json_fields",
    "find_marker",
    "marker_header",
    "open_envelope",
    "parse",
    "parse_marker",
    "seal",
]
