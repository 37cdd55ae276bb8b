"""Record layouts of the keys topic: message keys that make compaction do the right thing, versioned values.

Message keys (the kind is the first byte, so a reader can classify a record without its value)::

    subject key     b"k\\0" + subject(UTF-8) + b"\\0" + key_id(16)   one per key: two keys of a subject both survive
    wrapping key    b"w\\0" + wk_id(16)                               rewrap overwrites it in place
    erasure marker  b"e\\0" + subject(UTF-8)                           "every key of this subject before me is erased"
    lost marker     b"x\\0" + wk_id(16)                               "every subject key under this WK is lost"
    nudge           b"n\\0" + partition(u32be)                         rolls the active segment so compaction can run
    layout          b"m\\0layout"                                      partition count the topic was created with
    seal lease      b"u\\0" + key_id(16) + lease_id(8)                 "may I seal N more records with this key?"
    seal leases     b"l\\0" + lease_id(8)                              the same for many keys of one partition
    seal slot       b"s\\0" + slot_id(8)                               "I start sealing with this partition's keys"

Subject-key values — the bulk of the topic, one per data subject, read by every cold key table — are
compact binary (big-endian, decoded with one ``struct`` call)::

    version 0x01 | alg 0x01 (A256GCM-WK1) | created u64 ms | key_id(16) | wk_id(16)
    | u8 len + wrapped_sk | u16 len + subject(UTF-8) | u16 len + kek_ref(UTF-8)

Seal-lease values (:mod:`strongroom.keys.usage`; several per busy key, none for most) are binary too::

    version 0x01 | seals u64 | max_seals u64 | requested_at u64 ms

A writer asks for the leases of a whole batch at once, one *seal-leases* record per partition (single
leases, which earlier versions wrote, are still read and applied)::

    version 0x01 | max_seals u64 | requested_at u64 ms | count u32 | count × (key_id(16) | seals u64)

Its entries are applied in order at the record's offset, each exactly as a single lease of its own.

A lease lives in its key's subject partition and names no subject: erasure removes the key, and a
lease of an unknown key is ignored.

A *seal slot* stands for a lease of ``seals`` under every key written before it in its partition, for the
writer that wrote it. A key's slots are the slot records after the key's record in its partition; the
first ``window`` of them may seal with it (:mod:`strongroom.keys.usage`)::

    version 0x01 | seals u64 | window u32 | requested_at u64 ms

Every other value is a UTF-8 JSON object with ``"v": 1`` and a ``"type"`` (rare, read by people too).
A subject-key value holds the subject key wrapped by a wrapping key (AES-256-GCM), a wrapping-key value
holds the wrapping key wrapped by a KMS KEK (an EDEK): no value ever holds a plaintext key. A null
value is a tombstone.

Decoding is strict and never raises anything but :class:`CorruptKeyRecord`, which the key table
counts and skips. One exception on purpose: an erasure marker whose *value* is unreadable is still
an erasure marker (its key says so), because a damaged marker must never bring a key back. A lost
marker with an unreadable value is *not* applied (it is corrupt like any other record): its only
effect is to silence failures, and a decision to skip data must be readable to count.
"""

from __future__ import annotations

import dataclasses
import json
import struct
from dataclasses import dataclass
from typing import Any, Final

from strongroom.envelope.ids import SUBJECT_KEY_ID_SIZE
from strongroom.errors import KmsError, StrongroomError
from strongroom.keys.errors import CorruptKeyRecord, InvalidSubject
from strongroom.kms.api import Edek

VALUE_VERSION: Final = 1
KEY_ID_SIZE: Final = SUBJECT_KEY_ID_SIZE
WK_ID_SIZE: Final = 16
MAX_SUBJECT_BYTES: Final = 4096

SUBJECT_KEY_PREFIX: Final = b"k\x00"
WRAPPING_KEY_PREFIX: Final = b"w\x00"
ERASURE_PREFIX: Final = b"e\x00"
LOST_PREFIX: Final = b"x\x00"
NUDGE_PREFIX: Final = b"n\x00"
LAYOUT_KEY: Final = b"m\x00layout"
LEASE_PREFIX: Final = b"u\x00"
LEASE_ID_SIZE: Final = 8
LEASE_VALUE_V1: Final = 0x01
_LEASE: Final = struct.Struct(">BQQQ")
LEASES_PREFIX: Final = b"l\x00"
#: Most entries in one seal-leases record (24 bytes each: a value stays well under 1 MB).
MAX_LEASE_ENTRIES: Final = 16_384
_LEASES_HEAD: Final = struct.Struct(">BQQI")
_LEASE_ENTRY: Final = struct.Struct(">16sQ")
SLOT_PREFIX: Final = b"s\x00"
_SLOT: Final = struct.Struct(">BQIQ")

#: The algorithm of a subject key wrapped by a wrapping key (see :mod:`strongroom.keys.wrapping`).
SK_ALG: Final = "A256GCM-WK1"
#: One-byte ids of the binary subject-key value (forever once released).
SK_VALUE_V1: Final = 0x01
SK_ALG_IDS: Final = {SK_ALG: 0x01}
_SK_ALG_NAMES: Final = {v: k for k, v in SK_ALG_IDS.items()}
_SK_HEAD: Final = struct.Struct(">BBQ16s16sB")

#: The wrapping-key value's ``edek_binding``: the EDEK was wrapped bound to :func:`wk_edek_context` of
#: the record's WK id. Absent: an unbound EDEK (written before binding existed; still read, and bound
#: at its next rewrap). Any other value: a newer strongroom wrote it (the record is skipped, not lost).
WK_EDEK_BINDING: Final = "wk-id/v1"
_WK_CONTEXT_LABEL: Final = b"strongroom/wk/v1\x00"

_U32: Final = struct.Struct(">I")
_U16: Final = struct.Struct(">H")
_DECODER: Final = json.JSONDecoder()


def wk_edek_context(wk_id: bytes) -> bytes:
    """What a wrapping key's EDEK is bound to: its WK id (an EDEK copied under another WK id does not unwrap)."""
    return _WK_CONTEXT_LABEL + wk_id


def check_subject(subject: str) -> bytes:
    """The UTF-8 bytes of a valid subject id, or :class:`InvalidSubject`."""
    if not isinstance(subject, str) or not subject:
        raise InvalidSubject(f"subject must be a non-empty string, got {subject!r}")
    try:
        raw = subject.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidSubject("subject is not valid Unicode text (it contains a lone surrogate)") from None
    if len(raw) > MAX_SUBJECT_BYTES:
        raise InvalidSubject(f"subject of {len(raw)} bytes is longer than {MAX_SUBJECT_BYTES}")
    return raw


# ---------------------------------------------------------------------------- message keys
def subject_key_message_key(subject: str, key_id: bytes) -> bytes:
    return b"".join((SUBJECT_KEY_PREFIX, check_subject(subject), b"\x00", key_id))


def wrapping_key_message_key(wk_id: bytes) -> bytes:
    return WRAPPING_KEY_PREFIX + wk_id


def erasure_message_key(subject: str) -> bytes:
    return ERASURE_PREFIX + check_subject(subject)


def lost_message_key(wk_id: bytes) -> bytes:
    return LOST_PREFIX + wk_id


def nudge_message_key(partition: int) -> bytes:
    return NUDGE_PREFIX + _U32.pack(partition)


# ---------------------------------------------------------------------------- records
@dataclass(slots=True)
class SubjectKeyRecord:
    """A subject key, wrapped by wrapping key ``wk_id``. ``kek_ref`` is the KEK of that WK at creation."""

    subject: str
    key_id: bytes
    wk_id: bytes
    wrapped_sk: bytes
    created_ms: int
    kek_ref: str
    alg: str = SK_ALG

    def __repr__(self) -> str:
        return f"SubjectKeyRecord(key_id={self.key_id.hex()}, wk_id={self.wk_id.hex()}, kek_ref={self.kek_ref!r})"


@dataclass(frozen=True, slots=True)
class SubjectKeyTombstone:
    """The null-value record that erases one subject key."""

    subject: str
    key_id: bytes


@dataclass(frozen=True, slots=True)
class WrappingKeyRecord:
    """A wrapping key, wrapped by a KMS KEK."""

    wk_id: bytes
    edek: Edek
    created_ms: int

    @property
    def kek_ref(self) -> str:
        return self.edek.kek_ref


@dataclass(frozen=True, slots=True)
class WrappingKeyTombstone:
    """A wrapping key deleted by hand (strongroom never writes one): its subject keys become unreadable."""

    wk_id: bytes


@dataclass(frozen=True, slots=True)
class ErasureMarker:
    """An erasure request for one subject. ``problem`` is set when the value was unreadable."""

    subject: str
    request_id: str
    requested_by: str
    reason: str
    requested_at_ms: int
    problem: str | None = None


@dataclass(frozen=True, slots=True)
class LostMarker:
    """Wrapping key ``wk_id`` — and with it every subject key it wraps — is declared lost.

    Written by ``strongroom recover mark-lost`` when the KEK that wraps the WK is gone for good: readers
    then treat those subject keys like erased ones *on purpose* (no KMS call, no waiting, no failure)
    instead of failing on every record. ``kek_ref`` is the KEK that was lost, ``plan_id`` the checksum
    of the recovery plan that found the loss. The undo (the KEK came back) is a tombstone of the marker.
    """

    wk_id: bytes
    kek_ref: str
    reason: str
    plan_id: str
    declared_by: str
    declared_at_ms: int


@dataclass(frozen=True, slots=True)
class LostMarkerTombstone:
    """The undo of a :class:`LostMarker`: the wrapping key is readable again (its KEK was restored)."""

    wk_id: bytes


@dataclass(frozen=True, slots=True)
class NudgeRecord:
    """A no-op record appended so the broker rolls the active segment and compaction can proceed."""

    partition: int
    at_ms: int


@dataclass(frozen=True, slots=True)
class SealLease:
    """A writer asks to seal ``seals`` more records with subject key ``key_id``; granted if the key's
    leases, in partition order, stay within ``max_seals`` (:mod:`strongroom.keys.usage`)."""

    key_id: bytes
    lease_id: bytes
    seals: int
    max_seals: int
    requested_at_ms: int


@dataclass(frozen=True, slots=True)
class SealLeases:
    """A writer's seal leases for many keys of one partition in one record: entry *i* asks to seal
    ``entries[i][1]`` more records with key ``entries[i][0]``, granted or denied exactly as a
    :class:`SealLease` at the record's offset would be, in entry order."""

    lease_id: bytes
    entries: tuple[tuple[bytes, int], ...]
    max_seals: int
    requested_at_ms: int


@dataclass(frozen=True, slots=True)
class SealSlot:
    """A writer's seal slot in one partition (:mod:`strongroom.keys.usage`): it may seal ``seals`` records
    with each key written before this record in the partition, if this slot is among the first ``window``
    slots after that key's record. Nothing is granted or denied: every reader counts slots alike."""

    slot_id: bytes
    seals: int
    window: int
    requested_at_ms: int


@dataclass(frozen=True, slots=True)
class LayoutRecord:
    """The partition count the keys topic was created with."""

    partitions: int
    created_ms: int


@dataclass(frozen=True, slots=True)
class IgnoredRecord:
    """A tombstone of a marker, nudge or layout record: nothing to apply."""

    kind: str


KeysRecord = (
    SubjectKeyRecord
    | SubjectKeyTombstone
    | WrappingKeyRecord
    | WrappingKeyTombstone
    | ErasureMarker
    | LostMarker
    | LostMarkerTombstone
    | NudgeRecord
    | LayoutRecord
    | SealLease
    | SealLeases
    | SealSlot
    | IgnoredRecord
)


# ---------------------------------------------------------------------------- encoding
def _dumps(value: dict[str, Any]) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def encode(record: KeysRecord) -> tuple[bytes, bytes | None]:
    """The (message key, value) of a record; tombstones have a None value."""
    if isinstance(record, SubjectKeyRecord):
        return _subject_key_message(record)
    if isinstance(record, SubjectKeyTombstone):
        return subject_key_message_key(record.subject, record.key_id), None
    if isinstance(record, WrappingKeyRecord):
        return wrapping_key_message_key(record.wk_id), _wrapping_key_value(record)
    if isinstance(record, WrappingKeyTombstone):
        return wrapping_key_message_key(record.wk_id), None
    if isinstance(record, ErasureMarker):
        value = {
            "v": VALUE_VERSION,
            "type": "erasure",
            "request_id": record.request_id,
            "requested_by": record.requested_by,
            "reason": record.reason,
            "requested_at": record.requested_at_ms,
        }
        return erasure_message_key(record.subject), _dumps(value)
    if isinstance(record, LostMarker):
        value = {
            "v": VALUE_VERSION,
            "type": "lost",
            "wk_id": record.wk_id.hex(),
            "kek_ref": record.kek_ref,
            "reason": record.reason,
            "plan_id": record.plan_id,
            "declared_by": record.declared_by,
            "declared_at": record.declared_at_ms,
        }
        return lost_message_key(_check_wk_id(record.wk_id)), _dumps(value)
    if isinstance(record, LostMarkerTombstone):
        return lost_message_key(_check_wk_id(record.wk_id)), None
    if isinstance(record, NudgeRecord):
        return nudge_message_key(record.partition), _dumps({"v": VALUE_VERSION, "type": "nudge", "at": record.at_ms})
    if isinstance(record, SealLease):
        if len(record.key_id) != KEY_ID_SIZE or len(record.lease_id) != LEASE_ID_SIZE:
            raise ValueError(f"a seal lease names a {KEY_ID_SIZE}-byte key id and an {LEASE_ID_SIZE}-byte lease id")
        packed = _LEASE.pack(LEASE_VALUE_V1, record.seals, record.max_seals, record.requested_at_ms)
        return LEASE_PREFIX + record.key_id + record.lease_id, packed
    if isinstance(record, SealLeases):
        return _encode_leases(record)
    if isinstance(record, SealSlot):
        if len(record.slot_id) != LEASE_ID_SIZE or record.seals < 1 or record.window < 1:
            raise ValueError(f"a seal slot names an {LEASE_ID_SIZE}-byte slot id, at least one seal and a window")
        return SLOT_PREFIX + record.slot_id, _SLOT.pack(LEASE_VALUE_V1, record.seals, record.window,
                                                        record.requested_at_ms)  # fmt: skip
    if isinstance(record, LayoutRecord):
        value = {"v": VALUE_VERSION, "type": "layout", "partitions": record.partitions, "created": record.created_ms}
        return LAYOUT_KEY, _dumps(value)
    raise TypeError(f"not a keys-topic record: {type(record).__name__}")


def _subject_key_message(record: SubjectKeyRecord) -> tuple[bytes, bytes]:
    """A subject key's message: key ``prefix ‖ subject ‖ 0 ‖ key id``, value the packed binary layout."""
    return subject_key_message(
        check_subject(record.subject), record.key_id, record.wk_id, record.wrapped_sk, record.created_ms,
        record.kek_ref.encode("utf-8"), SK_ALG_IDS[record.alg],
    )  # fmt: skip


def subject_key_message(
    subject: bytes, key_id: bytes, wk_id: bytes, wrapped_sk: bytes, created_ms: int, kek_ref: bytes, alg_id: int = 0x01
) -> tuple[bytes, bytes]:
    """The (message key, value) of a subject key from its parts, ``subject`` already checked
    (:func:`check_subject`): key creation encodes a whole batch this way without a record object each."""
    head = _SK_HEAD.pack(SK_VALUE_V1, alg_id, created_ms, key_id, wk_id, len(wrapped_sk))
    value = b"".join((head, wrapped_sk, _U16.pack(len(subject)), subject, _U16.pack(len(kek_ref)), kek_ref))
    return b"".join((SUBJECT_KEY_PREFIX, subject, b"\x00", key_id)), value


def _wrapping_key_value(record: WrappingKeyRecord) -> bytes:
    """A wrapping key's JSON value; a bound EDEK says so (``edek_binding``), bound only to its own WK id."""
    value = {
        "v": VALUE_VERSION,
        "type": "wrapping-key",
        "wk_id": record.wk_id.hex(),
        "edek": record.edek.to_dict(),
        "kek_ref": record.kek_ref,
        "created": record.created_ms,
    }
    if record.edek.context:
        if record.edek.context != wk_edek_context(record.wk_id):
            raise ValueError("a wrapping key's EDEK is bound to its own WK id or to nothing")
        value["edek_binding"] = WK_EDEK_BINDING
    return _dumps(value)


def _check_wk_id(wk_id: bytes) -> bytes:
    if not isinstance(wk_id, bytes) or len(wk_id) != WK_ID_SIZE:
        raise ValueError(f"a wrapping key id is {WK_ID_SIZE} bytes")
    return wk_id


# ---------------------------------------------------------------------------- decoding
def _subject(raw: bytes, what: str) -> str:
    if not raw:
        raise CorruptKeyRecord(f"{what} record has an empty subject")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise CorruptKeyRecord(f"{what} record's subject is not UTF-8") from None


def _load(value: bytes, expected_type: str) -> dict[str, Any]:
    try:
        document = _DECODER.decode(value.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise CorruptKeyRecord(f"{expected_type} value of {len(value)} bytes is not UTF-8 JSON") from None
    if not isinstance(document, dict):
        raise CorruptKeyRecord(f"{expected_type} value is JSON but not an object")
    version = document.get("v")
    if version != VALUE_VERSION:
        raise CorruptKeyRecord(
            f"{expected_type} value has version {version!r}; this strongroom reads version {VALUE_VERSION}",
            hint="upgrade strongroom: the record was written by a newer version (it is skipped, not lost)",
        )
    if document.get("type") != expected_type:
        raise CorruptKeyRecord(f"value of type {document.get('type')!r} under a {expected_type} message key")
    return document


def _hex_id(document: dict[str, Any], field: str, size: int) -> bytes:
    text = document.get(field)
    try:
        raw = bytes.fromhex(text) if isinstance(text, str) else b""
    except ValueError:
        raw = b""
    if len(raw) != size:
        raise CorruptKeyRecord(f"field {field!r} is not {size} bytes of hex")
    return raw


def _int(document: dict[str, Any], field: str) -> int:
    value = document.get(field)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise CorruptKeyRecord(f"field {field!r} is not a non-negative integer")
    return value


def _str(document: dict[str, Any], field: str) -> str:
    value = document.get(field)
    if not isinstance(value, str):
        raise CorruptKeyRecord(f"field {field!r} is not a string")
    return value


def decode(key: bytes | None, value: bytes | None) -> KeysRecord:
    """Classify and parse one keys-topic record; :class:`CorruptKeyRecord` for anything malformed."""
    if not key:
        raise CorruptKeyRecord("record has no message key")
    prefix = key[:2]
    if prefix == SUBJECT_KEY_PREFIX:
        return _decode_subject_key(key, value)
    if prefix == ERASURE_PREFIX:
        return _decode_marker(key, value)
    if prefix == WRAPPING_KEY_PREFIX:
        return _decode_wrapping_key(key, value)
    if prefix == LOST_PREFIX:
        return _decode_lost(key, value)
    if prefix == LEASE_PREFIX:
        return _decode_lease(key, value)
    if prefix == LEASES_PREFIX:
        return _decode_leases(key, value)
    if prefix == SLOT_PREFIX:
        return _decode_slot(key, value)
    if prefix == NUDGE_PREFIX:
        if value is None:
            return IgnoredRecord("nudge")
        if len(key) != 6:
            raise CorruptKeyRecord("nudge record key is not 6 bytes")
        document = _load(value, "nudge")
        return NudgeRecord(_U32.unpack(key[2:])[0], _int(document, "at"))
    if key == LAYOUT_KEY:
        if value is None:
            return IgnoredRecord("layout")
        document = _load(value, "layout")
        partitions = _int(document, "partitions")
        if partitions < 1:
            raise CorruptKeyRecord(f"layout record names {partitions} partitions")
        return LayoutRecord(partitions, _int(document, "created"))
    raise CorruptKeyRecord(f"unknown record kind {key[:2]!r} (message key of {len(key)} bytes)")


def salvage_subject_key(key: bytes) -> SubjectKeyTombstone | None:
    """Subject and key id from a subject-key *message key* alone (for records whose value is corrupt).

    Erasure tombstones such records too, and verification counts them as key records: an unreadable
    value may still hold key material.
    """
    try:
        record = _decode_subject_key(key, None)
    except CorruptKeyRecord:
        return None
    return record if isinstance(record, SubjectKeyTombstone) else None


def decode_or_salvage(key: bytes, value: bytes | None) -> KeysRecord | None:
    """:func:`decode`; a corrupt value under a subject-key message key still counts as that subject's key
    record (with empty key material): erasure tombstones it and verification counts it, because an
    unreadable value may still hold key material. None for anything else that cannot be read."""
    try:
        return decode(key, value)
    except StrongroomError:
        salvaged = salvage_subject_key(key)
        if salvaged is None:
            return None
        return SubjectKeyRecord(salvaged.subject, salvaged.key_id, b"", b"", 0, "")


def _decode_subject_key(key: bytes, value: bytes | None) -> SubjectKeyRecord | SubjectKeyTombstone:
    if value is None:
        if len(key) < 2 + 1 + 1 + KEY_ID_SIZE or key[-KEY_ID_SIZE - 1] != 0:
            raise CorruptKeyRecord(f"subject-key message key of {len(key)} bytes is malformed")
        return SubjectKeyTombstone(_subject(key[2 : -KEY_ID_SIZE - 1], "subject-key"), key[-KEY_ID_SIZE:])
    key_id, subject, wk_id, wrapped, _, _, created, kek_ref = subject_key_row(key, value, 0, 0)
    return SubjectKeyRecord(subject, key_id, wk_id, wrapped, created, kek_ref, SK_ALG)


#: A subject-key record as the key store inserts it:
#: ``(key_id, subject, wk_id, wrapped_sk, partition, offset, created_ms, kek_ref)``.
SubjectKeyRow = tuple[bytes, str, bytes, bytes, int, int, int, str]


def subject_key_row(key: bytes, value: bytes, partition: int, offset: int) -> SubjectKeyRow:
    """A subject-key message (with a value) decoded straight into the row the key store inserts.

    The hot path of every key table's catch-up — one per data subject — so it builds no record object:
    one ``struct`` call, a few slices, lengths checked against the size. :class:`CorruptKeyRecord`
    for anything malformed, like :func:`decode`.
    """
    if len(key) < 2 + 1 + 1 + KEY_ID_SIZE or key[-KEY_ID_SIZE - 1] != 0:
        raise CorruptKeyRecord(f"subject-key message key of {len(key)} bytes is malformed")
    if not value or value[0] != SK_VALUE_V1:
        version = f"0x{value[0]:02x}" if value else "an empty value"
        raise CorruptKeyRecord(
            f"subject-key value has version {version}; this strongroom reads version 0x01",
            hint="upgrade strongroom if a newer version wrote it (the record is skipped, not lost)",
        )
    size = len(value)
    try:
        _, alg_id, created, value_key_id, wk_id, wrapped_len = _SK_HEAD.unpack_from(value)
        pos = _SK_HEAD.size + wrapped_len
        wrapped = value[_SK_HEAD.size : pos]
        (subject_len,) = _U16.unpack_from(value, pos)
        value_subject = value[pos + 2 : pos + 2 + subject_len]
        pos += 2 + subject_len
        (kek_len,) = _U16.unpack_from(value, pos)
        kek_ref = value[pos + 2 : pos + 2 + kek_len].decode("utf-8")
    except (struct.error, UnicodeDecodeError):
        raise CorruptKeyRecord(f"subject-key value of {size} bytes is truncated or garbled") from None
    if pos + 2 + kek_len != size or len(wrapped) != wrapped_len:
        raise CorruptKeyRecord(f"subject-key value of {size} bytes has inconsistent lengths")
    key_id = key[-KEY_ID_SIZE:]
    if value_key_id != key_id or value_subject != key[2 : -KEY_ID_SIZE - 1]:
        raise CorruptKeyRecord("subject-key value names another subject or key id than its message key")
    if alg_id not in _SK_ALG_NAMES:
        raise CorruptKeyRecord(f"subject key algorithm id 0x{alg_id:02x} is unknown")
    return key_id, _subject(value_subject, "subject-key"), wk_id, wrapped, partition, offset, created, kek_ref


def _binary_value(
    kind: str, key: bytes, key_size: int, value: bytes | None, size: int, *, exact: bool = True
) -> bytes | None:
    """The value of a binary seal record (lease, leases, slot) past the checks they share: the message key's
    size, then a version 0x01 value of ``size`` bytes (at least ``size`` unless ``exact``); None: a tombstone."""
    if len(key) != key_size:
        raise CorruptKeyRecord(f"{kind} message key of {len(key)} bytes is malformed")
    if value is None:
        return None
    if (len(value) != size if exact else len(value) < size) or value[0] != LEASE_VALUE_V1:
        raise CorruptKeyRecord(
            f"{kind} value of {len(value)} bytes is not version 0x01",
            hint="upgrade strongroom if a newer version wrote it (the record is skipped, not lost)",
        )
    return value


def _decode_lease(key: bytes, raw: bytes | None) -> SealLease | IgnoredRecord:
    value = _binary_value("seal-lease", key, 2 + KEY_ID_SIZE + LEASE_ID_SIZE, raw, _LEASE.size)
    if value is None:
        return IgnoredRecord("lease")
    _, seals, max_seals, requested_at = _LEASE.unpack(value)
    if not 1 <= seals <= max_seals:
        raise CorruptKeyRecord(f"seal lease asks for {seals} seals under a bound of {max_seals}")
    return SealLease(key[2 : 2 + KEY_ID_SIZE], key[2 + KEY_ID_SIZE :], seals, max_seals, requested_at)


def _encode_leases(record: SealLeases) -> tuple[bytes, bytes]:
    if len(record.lease_id) != LEASE_ID_SIZE or not 1 <= len(record.entries) <= MAX_LEASE_ENTRIES:
        raise ValueError(f"seal leases name an {LEASE_ID_SIZE}-byte lease id and 1 to {MAX_LEASE_ENTRIES} entries")
    if any(len(key_id) != KEY_ID_SIZE for key_id, _ in record.entries):
        raise ValueError(f"a seal-leases entry names a {KEY_ID_SIZE}-byte key id")
    head = _LEASES_HEAD.pack(LEASE_VALUE_V1, record.max_seals, record.requested_at_ms, len(record.entries))
    return LEASES_PREFIX + record.lease_id, head + b"".join(_LEASE_ENTRY.pack(k, n) for k, n in record.entries)


def _decode_leases(key: bytes, raw: bytes | None) -> SealLeases | IgnoredRecord:
    value = _binary_value("seal-leases", key, 2 + LEASE_ID_SIZE, raw, _LEASES_HEAD.size, exact=False)
    if value is None:
        return IgnoredRecord("leases")
    _, max_seals, requested_at, count = _LEASES_HEAD.unpack_from(value)
    if not 1 <= count <= MAX_LEASE_ENTRIES or len(value) != _LEASES_HEAD.size + count * _LEASE_ENTRY.size:
        raise CorruptKeyRecord(f"seal-leases value of {len(value)} bytes does not hold its {count} entries")
    entries = tuple(_LEASE_ENTRY.iter_unpack(memoryview(value)[_LEASES_HEAD.size :]))
    for _, seals in entries:
        if not 1 <= seals <= max_seals:
            raise CorruptKeyRecord(f"a seal lease asks for {seals} seals under a bound of {max_seals}")
    return SealLeases(key[2:], entries, max_seals, requested_at)


def _decode_slot(key: bytes, raw: bytes | None) -> SealSlot | IgnoredRecord:
    value = _binary_value("seal-slot", key, 2 + LEASE_ID_SIZE, raw, _SLOT.size)
    if value is None:
        return IgnoredRecord("slot")
    _, seals, window, requested_at = _SLOT.unpack(value)
    if seals < 1 or window < 1:
        raise CorruptKeyRecord(f"seal slot of {seals} seals in a window of {window}")
    return SealSlot(key[2:], seals, window, requested_at)


def _decode_marker(key: bytes, value: bytes | None) -> ErasureMarker | IgnoredRecord:
    subject = _subject(key[2:], "erasure")
    if value is None:
        return IgnoredRecord("erasure")
    try:
        document = _load(value, "erasure")
        return ErasureMarker(
            subject=subject,
            request_id=_str(document, "request_id"),
            requested_by=_str(document, "requested_by"),
            reason=_str(document, "reason"),
            requested_at_ms=_int(document, "requested_at"),
        )
    except CorruptKeyRecord as exc:
        return ErasureMarker(subject, "", "", "", 0, problem=exc.problem)


def _decode_wrapping_key(key: bytes, value: bytes | None) -> WrappingKeyRecord | WrappingKeyTombstone:
    if len(key) != 2 + WK_ID_SIZE:
        raise CorruptKeyRecord(f"wrapping-key message key of {len(key)} bytes is malformed")
    wk_id = key[2:]
    if value is None:
        return WrappingKeyTombstone(wk_id)
    document = _load(value, "wrapping-key")
    if _hex_id(document, "wk_id", WK_ID_SIZE) != wk_id:
        raise CorruptKeyRecord("wrapping-key value names another id than its message key")
    edek_doc = document.get("edek")
    if not isinstance(edek_doc, dict):
        raise CorruptKeyRecord("field 'edek' is not an object")
    try:
        edek = Edek.from_dict(edek_doc)
    except KmsError as exc:
        raise CorruptKeyRecord(f"field 'edek' is invalid: {exc.problem}") from None
    binding = document.get("edek_binding")
    if binding == WK_EDEK_BINDING:
        edek = dataclasses.replace(edek, context=wk_edek_context(wk_id))  # derived here, never read from the record
    elif binding is not None:
        raise CorruptKeyRecord(
            f"wrapping-key value has edek_binding {binding!r}; this strongroom reads {WK_EDEK_BINDING!r}",
            hint="upgrade strongroom: the record was written by a newer version (it is skipped, not lost)",
        )
    return WrappingKeyRecord(wk_id, edek, _int(document, "created"))


def _decode_lost(key: bytes, value: bytes | None) -> LostMarker | LostMarkerTombstone:
    if len(key) != 2 + WK_ID_SIZE:
        raise CorruptKeyRecord(f"lost-marker message key of {len(key)} bytes is malformed")
    wk_id = key[2:]
    if value is None:
        return LostMarkerTombstone(wk_id)
    document = _load(value, "lost")
    if _hex_id(document, "wk_id", WK_ID_SIZE) != wk_id:
        raise CorruptKeyRecord("lost-marker value names another wrapping key than its message key")
    plan_id = _str(document, "plan_id")
    if not plan_id:
        raise CorruptKeyRecord("lost marker has an empty plan_id")
    return LostMarker(
        wk_id=wk_id,
        kek_ref=_str(document, "kek_ref"),
        reason=_str(document, "reason"),
        plan_id=plan_id,
        declared_by=_str(document, "declared_by"),
        declared_at_ms=_int(document, "declared_at"),
    )
