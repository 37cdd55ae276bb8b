"""Leaf errors of the envelope area. Each names the bad value and the operator's next step.

None of them ever carries key material or plaintext. Subjects (record keys) may be personal data,
so messages show a short fingerprint of a subject (see :func:`subject_fingerprint`), never the
subject itself.
"""

from __future__ import annotations

import hashlib

from strongroom.errors import ConfigError, EnvelopeError


def subject_fingerprint(subject: bytes) -> str:
    """``sha256:<first 12 hex>`` of a subject: enough to correlate log lines, not to read a key."""
    return "sha256:" + hashlib.sha256(subject).hexdigest()[:12]


class MalformedEnvelope(EnvelopeError):
    """Bytes that claim to be an envelope but are truncated, have bad lengths, or are garbage."""

    default_hint = "the record was truncated or corrupted; quarantine it and check the producer"


class NotAnEnvelope(MalformedEnvelope):
    """The value does not even start with the envelope magic byte."""

    default_hint = (
        "the record carries the strongroom header but its value is not an envelope; "
        "quarantine it and check the producer"
    )


class UnsupportedFormatVersion(EnvelopeError):
    """A version byte this strongroom does not know (written by a newer, or a broken, writer)."""

    default_hint = "upgrade strongroom on the reading side; if it is current, the record is corrupt"


class UnknownCipher(EnvelopeError):
    """A cipher id that is not in the registry (or the reserved 0x00)."""

    default_hint = "upgrade strongroom on the reading side; if it is current, the record is corrupt"


class UnknownKeyRefKind(EnvelopeError):
    """A key-reference kind that is not in the registry."""

    default_hint = "upgrade strongroom on the reading side; if it is current, the record is corrupt"


class UnknownAadProfile(EnvelopeError):
    """An AAD profile id that is not in the registry."""

    default_hint = "upgrade strongroom on the reading side; if it is current, the record is corrupt"


class UnknownValueMode(EnvelopeError):
    """A value-mode byte in the record header that is not in the registry."""

    default_hint = "upgrade strongroom on the reading side; if it is current, the header is corrupt"


class IntegrityError(EnvelopeError):
    """AES-GCM authentication failed: wrong place (topic/subject/field), wrong key, or altered bytes."""

    default_hint = "it may have been moved or tampered with — quarantine it"


class UnencryptedField(IntegrityError):
    """A JSON field that the topic's rules say is encrypted holds plaintext: rewritten or misproduced."""

    default_hint = "quarantine the record and check who can write to the topic and the producer's rules"


class StrayEnvelope(EnvelopeError):
    """A JSON string that looks sealed (``sr1:``) where the rules seal nothing: refused at encrypt time."""

    default_hint = (
        "the producer wrote a value that looks encrypted outside the topic's encrypted fields; fix the producer, "
        "or add the field to the rule"
    )


class UnverifiedEnvelope(IntegrityError):
    """A rule field that already holds an ``sr1:`` string which does not open under the subject's key."""

    default_hint = (
        "only values this strongroom sealed for this subject, topic and field are kept as they are; "
        "send the plaintext value and let strongroom encrypt it"
    )


class SubjectErased(EnvelopeError):
    """The key that sealed this data was erased (crypto-shredded) on purpose; it cannot come back."""

    default_hint = "expected after a GDPR erasure; treat the data as deleted"


class NotJson(EnvelopeError):
    """A JSON-fields record whose value is not UTF-8 JSON."""

    default_hint = (
        "JSON field encryption needs UTF-8 JSON values; use whole-value mode for this topic or fix the producer"
    )


class NotJsonObject(NotJson):
    """A JSON-fields record whose value is JSON but not an object."""


class EncodingLimitExceeded(EnvelopeError):
    """A length that does not fit its fixed-width field (topic, subject, field path, key ref)."""

    default_hint = "shorten the value named above; the wire format cannot carry it"


class InvalidFieldPath(ConfigError):
    """A JSON field rule that does not parse or conflicts with another rule."""

    default_hint = "write field paths like $.email, $.address.city or $.items[*].email"


class InvalidKeyRef(EnvelopeError):
    """A key reference built by a caller that the wire format cannot carry."""

    default_hint = "pass a 16-byte subject key id, or a 'provider:kek-id' reference and a non-empty EDEK"
