"""Sealing and opening one Kafka record under a topic rule: the pure core of the producer and consumer.

No I/O here: keys come in as bytes (producer) or through a lookup callable (consumer), so the wire
conventions can be tested without a broker. The decisions mirror :mod:`strongroom.spark.transforms`:

* sealing binds the **output** topic (the topic the ciphertext lives in) and the subject, puts the
  ``strongroom.enc`` marker first, leaves other headers as they are; tombstones are never sealed;
* opening treats a record as encrypted when it carries the marker, or — without it — when its value
  looks like an envelope (whole value: the SUBJECT_KEY prefix; fields: an ``sr1:`` string), exactly
  as the Spark decrypt pipeline does; a marker for the other mode is a failure, not a guess.

Opening never returns partial plaintext and never confuses its outcomes: not-arrived-yet
(:class:`Pending`), erased (:class:`Erased`, or null fields), KMS unreachable (:class:`KmsDown`, to
wait out) and everything else that stops a record (:class:`Failed`, with the reason and the KEK).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from strongroom.clients.records import Header, NoSubject, subject_of, with_marker, without_marker
from strongroom.envelope.aad import RecordContext
from strongroom.envelope.codec import decrypt_value, seal
from strongroom.envelope.errors import SubjectErased
from strongroom.envelope.header import RecordMarker, marker_header, parse_marker
from strongroom.envelope.ids import (
    NONCE_SIZE,
    RECORD_HEADER_NAME,
    SUBJECT_KEY_ID_SIZE,
    TAG_SIZE,
    ValueMode,
)
from strongroom.envelope.json_fields import (
    FieldDocument,
    decrypt_json_fields,
    encrypt_json_fields,
    may_hold_envelopes,
    rule_value_count,
)
from strongroom.envelope.jsonpath import FieldRules
from strongroom.envelope.keyref import KeyRef, SubjectKeyRef
from strongroom.errors import ConfigError, EnvelopeError, KeysError, KmsError, StrongroomError
from strongroom.keys.errors import KeyTableClosed
from strongroom.keys.records import MAX_SUBJECT_BYTES
from strongroom.kms.errors import KmsUnavailable
from strongroom.rules import TopicRule

if TYPE_CHECKING:
    from strongroom.schemas.registry import SchemaRegistry
    from strongroom.schemas.sealing import SchemaFields

#: magic ‖ version 1 ‖ AES-256-GCM ‖ SUBJECT_KEY: how a whole-value envelope starts (Spark checks the same).
SUBJECT_KEY_PREFIX: Final = bytes((0xF5, 0x01, 0x01, 0x01))
_MIN_SUBJECT_ENVELOPE: Final = len(SUBJECT_KEY_PREFIX) + SUBJECT_KEY_ID_SIZE + 1 + NONCE_SIZE + TAG_SIZE
_MAX_REFS: Final = 65_536
_MAX_MARKERS: Final = 16


class RuleCodec:
    """Seals and opens the records of one rule (holds the compiled field paths and the marker header)."""

    def __init__(
        self, rule: TopicRule, *, encrypted_only: bool = False, schema_registry: SchemaRegistry | None = None
    ) -> None:
        self.rule = rule
        #: Opening refuses records without the marker header (see docs/threat-model.md, downgrade).
        self.encrypted_only = encrypted_only
        self.mode = ValueMode.JSON_FIELDS if rule.mode == "fields" else ValueMode.WHOLE_VALUE
        self.fields = FieldRules(rule.fields) if rule.mode == "fields" else None
        #: Schema mode (docs/schema-aware.md): the tagged fields of schema-registry records.
        self.schema = _schema_fields(rule, schema_registry) if rule.mode == "schema" else None
        if self.schema is not None:
            self.mode = ValueMode.SCHEMA_FIELDS
        self.marker: Header = marker_header(self.mode)
        self.profile = rule.profile
        #: The data subject is the record key (what the consumer's native field opener assumes).
        self.key_subject = rule.subject.source == "key"
        self._refs: dict[bytes, SubjectKeyRef] = {}
        self._markers: dict[bytes | None, RecordMarker] = {}

    # ------------------------------------------------------------------ producer side
    def subject(self, key: bytes | None, value: bytes | None, headers: list[Header]) -> str | NoSubject:
        if self.schema is not None and self.rule.subject.source == "json":
            return _schema_subject(self.schema, self.rule, value)
        return subject_of(self.rule, key, value, headers)

    def seal_value(self, value: bytes, out_topic: str, subject: str, key_id: bytes, dek: bytes) -> bytes:
        """The encrypted value bound to ``out_topic`` and ``subject``; :class:`EnvelopeError` if it cannot be."""
        ref = self._ref(key_id)
        ctx = RecordContext(out_topic, subject.encode("utf-8"), self.profile)
        if self.schema is not None:
            return self.schema.seal(value, dek, ref, ctx)
        if self.fields is None:
            return seal(value, dek, ref, ctx)
        return encrypt_json_fields(value, self.fields, dek, ref, ctx)

    def seal_count(self, value: bytes) -> int:
        """How many seals (AES-GCM nonces) sealing ``value`` takes at most: what a record charges its key's
        usage limit (:mod:`strongroom.keys.usage`). One for a whole value; in field and schema mode one per
        selected value, each sealed under its own nonce. A value that cannot be read counts one: sealing it
        fails and the record is rejected."""
        if self.schema is not None:
            try:
                return self.schema.value_count(value)
            except EnvelopeError:  # a record its schema cannot read (a registry outage goes on)
                return 1
        if self.fields is None:
            return 1
        try:
            return rule_value_count(value, self.fields)
        except EnvelopeError:
            return 1

    def sealed_headers(self, headers: list[Header]) -> list[Header]:
        return with_marker(headers, self.marker)

    def _ref(self, key_id: bytes) -> SubjectKeyRef:
        ref = self._refs.get(key_id)
        if ref is None:
            if len(self._refs) >= _MAX_REFS:
                self._refs.clear()
            ref = self._refs[key_id] = SubjectKeyRef(key_id)
        return ref

    # ------------------------------------------------------------------ consumer side
    def open(
        self,
        key: bytes | None,
        value: bytes | None,
        headers: list[Header],
        bound_topic: str,
        lookup: SubjectKeyLookup,
    ) -> Outcome:
        """Open one record read from a topic whose ciphertext is bound to ``bound_topic``.

        The hot path of every decrypting consumer, so the common record (this rule's marker header, the
        subject in the key) makes no call beyond the decryption: only a record without the marker, or
        with the other mode's, is judged apart (:meth:`_off_marker`)."""
        if value is None:
            return Passthrough()
        try:
            marker = self._marker(headers)
        except EnvelopeError as exc:
            return Failed(_describe(exc), exc)
        document: FieldDocument | None = None
        if marker is None or marker.mode != self.mode:
            verdict = self._off_marker(marker, value)
            if verdict is not None and not isinstance(verdict, FieldDocument):
                return verdict
            document = verdict
        subject: str | NoSubject
        subject_bytes: bytes | None = None
        if self.key_subject and key and len(key) <= MAX_SUBJECT_BYTES:
            try:
                subject, subject_bytes = key.decode("utf-8"), key
            except UnicodeDecodeError:
                subject = self.subject(key, value, headers)
        else:
            subject = self.subject(key, value, headers)
        if isinstance(subject, NoSubject):
            return Failed(f"cannot find the subject to decrypt with: {subject.reason}", None)
        if subject_bytes is None:
            subject_bytes = subject.encode("utf-8")
        keys = _RecordKeys(lookup, subject)
        ctx = RecordContext(bound_topic, subject_bytes)
        try:
            if self.schema is not None:
                plain, _ = self.schema.open(value, keys, ctx)
            elif self.fields is None:
                plain = decrypt_value(value, keys, ctx)
            else:
                plain = decrypt_json_fields(
                    document or value, keys, ctx, on_erased="null", expect_encrypted=self.fields
                )
        except _KeyPending as pending:
            return Pending(pending.key_ref, subject)
        except SubjectErased:
            return Erased(subject)
        except KmsUnavailable as exc:
            return KmsDown(exc, keys.last_ref)
        except (KeyTableClosed, ConfigError):
            raise  # not about this record: the reader itself is broken or misconfigured
        except (EnvelopeError, KmsError, KeysError) as exc:
            return Failed(_describe(exc), exc, keys.last_ref)
        return Opened(plain, without_marker(headers), subject, keys.erased)

    def _off_marker(self, marker: RecordMarker | None, value: bytes) -> Outcome | FieldDocument | None:
        """A record without this rule's marker: its outcome (a failure, or passed through as it is), or
        what to open anyway: None for a whole value that looks like an envelope, the parsed document of a
        field-mode record with sealed fields."""
        if marker is not None:
            problem = (
                f"record is marked {marker.mode.name.lower().replace('_', '-')} but the rule for this topic "
                f"is mode {self.rule.mode!r}"
            )
            return Failed(problem, None)
        if self.encrypted_only:
            return Failed(
                f"record has no {RECORD_HEADER_NAME} marker header; this reader accepts encrypted records only "
                "(a plaintext or downgraded record)",
                None,
            )
        if self.schema is not None:
            try:
                return None if self.schema.holds_envelopes(value) else Passthrough()
            except EnvelopeError as exc:
                return Failed(_describe(exc), exc)
        if self.fields is None:
            return None if self._looks_encrypted(value) else Passthrough()
        try:
            document = self._unmarked_document(value)
        except EnvelopeError as exc:
            return Failed(_describe(exc), exc)
        return Passthrough() if document is None else document

    def _marker(self, headers: list[Header]) -> RecordMarker | None:
        """The record's marker (first ``strongroom.enc`` header), parsed once per distinct value."""
        for name, raw in headers:
            if name == RECORD_HEADER_NAME:
                marker = self._markers.get(raw) if raw is not None else None
                if marker is None:
                    marker = parse_marker(raw)  # raises the precise error for a bad header
                    if len(self._markers) < _MAX_MARKERS:
                        self._markers[raw] = marker
                return marker
        return None

    def _looks_encrypted(self, value: bytes) -> bool:
        return value[:4] == SUBJECT_KEY_PREFIX and len(value) >= _MIN_SUBJECT_ENVELOPE

    def _unmarked_document(self, value: bytes) -> FieldDocument | None:
        """A field-mode record without the marker, parsed when a rule field of it may be sealed; None when
        none is (delivered as it is). Sealed fields are found in the parsed document, so an escaped
        ``sr1:`` spelling is found too (and refused), and a value that is not strict JSON is refused."""
        assert self.fields is not None
        if not may_hold_envelopes(value):
            return None
        document = FieldDocument(value, self.fields)
        return document if document.sealed else None


def _schema_fields(rule: TopicRule, registry: SchemaRegistry | None) -> SchemaFields:
    if registry is None:
        raise ConfigError(
            f"the rule for {rule.topic!r} is in schema mode but no schema registry was given",
            hint="pass schema_registry=SchemaRegistry(url) to the producer or consumer",
        )
    from strongroom.schemas.fields import Selection
    from strongroom.schemas.sealing import SchemaFields

    subject_path = rule.subject.path if rule.subject.source == "json" else None
    return SchemaFields(registry, Selection(rule.selected_tags, rule.fields), subject_path=subject_path)


def _schema_subject(schema: SchemaFields, rule: TopicRule, value: bytes | None) -> str | NoSubject:
    """The subject at the rule's field path of a schema-registry record (read with its schema)."""
    where = f"field path {rule.subject.path}"
    if value is None:
        return NoSubject(f"no subject ({where} is missing or empty)")
    try:
        text = schema.subject(value, rule.subject.path or "")
    except EnvelopeError as exc:
        return NoSubject(f"no subject ({where} cannot be read: {exc.problem})")
    if not text:
        return NoSubject(f"no subject ({where} is missing, empty or not a string or integer)")
    if len(text.encode("utf-8")) > MAX_SUBJECT_BYTES:
        return NoSubject(f"no subject ({where} is more than {MAX_SUBJECT_BYTES} bytes)")
    return text


def _describe(exc: StrongroomError) -> str:
    return f"{type(exc).__name__}: {exc.problem}"


#: Given a subject key reference and the record's subject: the key, None if it has not arrived yet;
#: raises :class:`SubjectErased` if it was erased, KMS/keys errors if it cannot be unwrapped.
#: :meth:`strongroom.keys.KeyTable.lookup` has exactly this contract.
SubjectKeyLookup = Callable[[SubjectKeyRef, str], "bytes | None"]


class _KeyPending(Exception):
    def __init__(self, key_ref: SubjectKeyRef) -> None:
        super().__init__(key_ref.key_id.hex())
        self.key_ref = key_ref


class _RecordKeys:
    """The envelope's ``KeyLookup`` for one record: erased → None, not arrived → :class:`_KeyPending`."""

    __slots__ = ("erased", "last_ref", "lookup", "subject")

    def __init__(self, lookup: SubjectKeyLookup, subject: str) -> None:
        self.lookup = lookup
        self.subject = subject
        self.erased = False
        self.last_ref: SubjectKeyRef | None = None

    def __call__(self, key_ref: KeyRef) -> bytes | None:
        if not isinstance(key_ref, SubjectKeyRef):
            raise UnsupportedKeyRef(
                f"the record is sealed with {key_ref!r}, not a per-subject key; the decrypting consumer "
                "reads subject-key envelopes only"
            )
        self.last_ref = key_ref
        try:
            key = self.lookup(key_ref, self.subject)
        except SubjectErased:
            self.erased = True
            return None
        if key is None:
            raise _KeyPending(key_ref)
        return key


class UnsupportedKeyRef(EnvelopeError):
    """An envelope whose key reference the consumer cannot resolve (a KMS-wrapped DEK)."""

    default_hint = "read such records with a reader configured for wrapped DEKs, or re-encrypt them"


def seal_record(
    codec: RuleCodec,
    value: bytes,
    headers: list[Header],
    out_topic: str,
    subject: str,
    key: tuple[bytes, bytes] | None,
    limit: int,
) -> Sealed | Rejected | None:
    """Seal one record's value with the subject's ``(key id, DEK)``; None when the post-erasure policy
    drops it (``key`` is None). The encrypted value must fit ``limit`` bytes (the output topic's)."""
    if key is None:
        return None
    if len(value) > limit:
        return Rejected(f"value too large to encrypt (> {limit} bytes)")
    try:
        sealed = codec.seal_value(value, out_topic, subject, key[0], key[1])
    except EnvelopeError as exc:
        mode = {"fields": " (field mode)", "schema": " (schema mode)"}.get(codec.rule.mode, "")
        return Rejected(f"{exc.problem}{mode}")
    if len(sealed) > limit:
        return Rejected(
            f"encrypted value would be {len(sealed)} bytes, above the output topic's limit of {limit} bytes"
        )
    return Sealed(sealed, codec.sealed_headers(headers))


# ------------------------------------------------------------------------------------------ outcomes
@dataclass(slots=True)
class Sealed:
    value: bytes
    headers: list[Header]


@dataclass(slots=True)
class Rejected:
    """Why a record cannot be encrypted (it is never produced in plaintext to the output topic)."""

    reason: str


# Plain slotted dataclasses (one is built per record; frozen ones cost twice as much to construct).
@dataclass(slots=True)
class Opened:
    value: bytes
    headers: list[Header]
    subject: str
    erased_fields: bool


@dataclass(slots=True)
class Passthrough:
    """Not encrypted (tombstone, or no marker and no envelope): delivered as it is."""


@dataclass(slots=True)
class Erased:
    """Whole value of an erased subject: dropped or marked, by policy."""

    subject: str


@dataclass(slots=True)
class Pending:
    """The subject key has not arrived in the key table yet."""

    key_ref: SubjectKeyRef
    subject: str


@dataclass(slots=True)
class KmsDown:
    """The KMS is unreachable: transient, waited out, never reported as a lost key."""

    error: KmsUnavailable
    key_ref: SubjectKeyRef | None


@dataclass(slots=True)
class Failed:
    """The record cannot be decrypted (lost or disabled KEK, tampered, unknown format, no subject)."""

    reason: str
    error: StrongroomError | None
    key_ref: SubjectKeyRef | None = None


Outcome = Opened | Passthrough | Erased | Pending | KmsDown | Failed
