"""The consumer's batch path: open many whole-value records in one pass, keys resolved per batch.

:meth:`strongroom.clients.sealing.RuleCodec.open` judges every record shape (no marker, the other
mode's marker, subjects outside the key, field mode, erased, pending, KMS down, tampered) and turns
each into an :class:`~strongroom.clients.sealing.Outcome`. Most records of a healthy topic are one
shape: this rule's marker as the only ``strongroom.enc`` header, a SUBJECT_KEY envelope, the subject
in the key, a key the table has, a tag that verifies. :func:`open_simple` opens those with nothing
per record but the decryption, the AAD join and the message; at the first record of any other shape
it stops and hands the rest to the per-record path, which judges it exactly as before (so holds,
failures, dead letters and erasure outcomes are unchanged, and partition order is kept).

:class:`KeyCiphers` keeps ``key id → AESGCM`` for the keys the batches meet (an LRU sized for the
active subjects), filled from the key table once per key and shared by every consumer of that table;
an erasure notice from the table empties it.
"""

from __future__ import annotations

import contextlib
import struct
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from strongroom.clients.records import DecryptedMessage, Header, MessageStatus
from strongroom.clients.sealing import Opened, RuleCodec, SubjectKeyLookup
from strongroom.crypto.aead import CIPHERS
from strongroom.envelope.ids import AAD_LABEL, NONCE_SIZE, RECORD_HEADER_NAME, SUBJECT_KEY_ID_SIZE, AadProfile
from strongroom.envelope.json_fields import NativeMembers, native_members
from strongroom.envelope.keyref import SubjectKeyRef
from strongroom.errors import StrongroomError
from strongroom.keys.erasure_feed import ErasureNotice
from strongroom.keys.records import MAX_SUBJECT_BYTES
from strongroom.runtime import untracked

try:  # the native opener, built by `make` from _gcm.c (issue 18); without it the Python loop opens every record
    from strongroom.crypto._gcm import HEADER_END, MIN_SIZE, Gcm, configure, open_fields, open_run
except ImportError:  # pragma: no cover - an install without the project's build
    Gcm = AESGCM  # type: ignore[misc,assignment]
    configure = open_run = open_fields = None  # type: ignore[assignment]
    HEADER_END = MIN_SIZE = 0

#: Whether the native opener is here (the project's build makes it; a test insists).
NATIVE: Final = open_run is not None

#: Subject keys kept ready to decrypt with; a consumer of a busy topic meets tens of thousands. A ready
#: cipher holds its OpenSSL context: ≈ 1.2 KB for the native opener's ``Gcm`` (≈ 120 MB when full),
#: ≈ 2.4 KB for a used ``AESGCM``.
DEFAULT_CAPACITY: Final = 100_000
#: Openers kept per key table, all topics together (:meth:`OpenTarget.opener`; ≈ 300 bytes each, no secret).
MAX_OPENERS: Final = 200_000
#: magic ‖ version 1 ‖ AES-256-GCM ‖ SUBJECT_KEY: how a whole-value envelope starts.
_SUBJECT_KEY_PREFIX: Final = bytes((0xF5, 0x01, 0x01, 0x01))
_KEY_ID_END: Final = 4 + SUBJECT_KEY_ID_SIZE
_HEADER_END: Final = _KEY_ID_END + 1
_NONCE_END: Final = _HEADER_END + NONCE_SIZE
_MIN_SIZE: Final = _NONCE_END + 16
_EMPTY_PATH: Final = b"\x00\x00"
_pack_u16: Final = struct.Struct(">H").pack
_pack_u32: Final = struct.Struct(">I").pack

#: A key ready to decrypt with: the native opener's (OpenSSL's EVP, built by ``make``) or ``cryptography``'s.
Cipher = Gcm | AESGCM


def ready_cipher(dek: bytes) -> Cipher:
    """The cipher :class:`KeyCiphers` keeps for ``dek``: a :class:`~strongroom.crypto._gcm.Gcm`, which the
    native opener can use, when it is built; else ``cryptography``'s (shared through :data:`CIPHERS`)."""
    return Gcm(dek) if NATIVE else CIPHERS.get(dek)


class KeySource(Protocol):
    """What :class:`KeyCiphers` needs of the key table (:class:`~strongroom.keys.KeyTable` has it)."""

    def lookup(self, key_id: SubjectKeyRef, subject: str) -> bytes | None: ...

    def warm(self, key_ids: Sequence[bytes]) -> int: ...

    def add_erasure_listener(self, listener: Callable[[ErasureNotice], None]) -> None: ...


class KeyCiphers:
    """key id → ``AESGCM`` of a subject key, least recently used out first. Thread-safe.

    Filled through :meth:`KeyTable.lookup` (which answers erased and lost keys with errors; those
    records take the per-record path). Emptied on every erasure notice of the table.
    """

    def __init__(self, table: KeySource, capacity: int = DEFAULT_CAPACITY) -> None:
        self.table = table
        self.capacity = max(1, capacity)
        #: key id → ready cipher, least recently used first (the native opener reads it too).
        self.entries: OrderedDict[bytes, Cipher] = OrderedDict()
        self._lock = threading.Lock()
        self._notices = 0
        #: (envelope header, record key, bound topic) → :data:`Opener`, for every consumer of the table: a
        #: consumer that is replaced (a restart, a rebalance's new member) finds them built. No key is in
        #: them, so an erasure need not touch them.
        self.openers: dict[tuple[bytes, bytes, str], Opener] = {}
        table.add_erasure_listener(self.on_erasure)

    @classmethod
    def shared(cls, table: KeySource) -> KeyCiphers:
        """The one instance for ``table``: every consumer of a key table shares its ready ciphers."""
        with _SHARED_LOCK:
            ciphers = _SHARED.get(table)
            if ciphers is None:
                ciphers = _SHARED[table] = cls(table)
            return ciphers

    def __len__(self) -> int:
        return len(self.entries)

    def on_erasure(self, notice: ErasureNotice) -> None:
        with self._lock:
            self._notices += 1
            self.entries.clear()

    def get(self, key_id: bytes) -> Cipher | None:
        entries = self.entries
        cipher = entries.get(key_id)
        if cipher is not None:
            try:
                entries.move_to_end(key_id)
            except KeyError:  # cleared by an erasure notice meanwhile: ask the table again
                return None
        return cipher

    def load(self, key_id: bytes, subject: str) -> Cipher | None:
        """The cipher of ``key_id`` from the table; None when the table does not simply have it
        (pending, erased, lost, KMS down: the per-record path says which)."""
        notices = self._notices
        try:
            dek = self.table.lookup(SubjectKeyRef.trusted(key_id), subject)
        except StrongroomError:
            return None
        if dek is None:
            return None
        cipher = ready_cipher(dek)
        with self._lock:
            if notices == self._notices:  # no erasure since the lookup: safe to keep
                self.entries[key_id] = cipher
                if len(self.entries) > self.capacity:
                    self.entries.popitem(last=False)
                untracked(self.entries)  # key ids and ciphers: no reference cycle for the collector to walk
        return cipher

    def warm(self, key_ids: Sequence[bytes]) -> None:
        """Load the table's cache for the keys of a batch that are not here, in few store queries."""
        missing = [k for k in dict.fromkeys(key_ids) if k not in self.entries]
        if missing:
            with contextlib.suppress(StrongroomError):  # each record's own lookup reports it
                self.table.warm(missing)


_SHARED: Final[weakref.WeakKeyDictionary[KeySource, KeyCiphers]] = weakref.WeakKeyDictionary()
_SHARED_LOCK: Final = threading.Lock()


@dataclass(frozen=True, slots=True)
class OpenTarget:
    """How the batch path opens the records of one physical topic (None when it never can)."""

    #: The marker header this rule's records carry first.
    marker: Header
    #: u16 length ‖ bound topic, by AAD profile id (PORTABLE binds the empty topic).
    topic_parts: tuple[bytes, ...]
    #: The topic the ciphertext is bound to (the logical name of a mirrored topic).
    bound_topic: str
    #: Field mode: the rule's codec, which opens the record (JSON work is the cost there, not the call).
    fields_codec: RuleCodec | None = None
    #: Field mode with rules of top-level members only and the subject in the record key: what the native
    #: opener (``open_fields``) takes.
    fields_native: NativeMembers | None = None
    #: (envelope header, record key, bound topic) → what a record needs besides its key: see
    #: :data:`Opener`. A consumer passes its key table's (:attr:`KeyCiphers.openers`).
    openers: dict[tuple[bytes, bytes, str], Opener] = field(default_factory=dict, compare=False, repr=False)

    @property
    def native_ready(self) -> bool:
        """Whether the native loop (``open_run``) can open this target's records: whole values, or field mode
        with :attr:`fields_native`."""
        return self.fields_codec is None or self.fields_native is not None

    @property
    def native_fields(self) -> tuple[tuple[bytes, ...], tuple[bytes, ...], bytes, tuple[bytes, ...]] | None:
        """Field mode's settings as ``open_run`` and ``open_fields`` take them; None for whole values."""
        members = self.fields_native
        return None if members is None else (members.names, members.aad_suffixes, AAD_LABEL, self.topic_parts)

    def opener(self, head: bytes, key: bytes) -> Opener | None:
        """The opener of records with envelope header ``head`` and record key ``key``; None when such a
        record is not simple (another key-reference kind, an AAD profile this target does not bind, a key
        that is not a UTF-8 subject of allowed size). Built once per (header, key), kept up to
        :data:`MAX_OPENERS` (then forgotten at once: rebuilding costs one record's checks)."""
        if head[:4] != _SUBJECT_KEY_PREFIX or len(key) > MAX_SUBJECT_BYTES:
            return None
        profile = head[_KEY_ID_END]
        if profile >= len(self.topic_parts) or not self.topic_parts[profile]:
            return None
        try:
            subject = key.decode("utf-8")
        except UnicodeDecodeError:
            return None
        aad = b"".join((AAD_LABEL, head, self.topic_parts[profile], _pack_u32(len(key)), key, _EMPTY_PATH))
        opener = (head[4:_KEY_ID_END], aad, subject)
        openers = self.openers
        if len(openers) >= MAX_OPENERS:
            openers.clear()
        openers[head, key, self.bound_topic] = opener
        untracked(openers)  # bytes and text only: no reference cycle for the collector to walk
        return opener


#: What opening a simple record of one subject key and record key needs besides the key itself: the key
#: id, the full AAD and the subject. No secret: the key's cipher is looked up per record in
#: :class:`KeyCiphers`, which erasures empty. (A plain tuple: built once per subject, unpacked per record.)
Opener = tuple[bytes, bytes, str]


def open_target(
    marker: Header,
    bound_topic: str,
    fields_codec: RuleCodec | None = None,
    openers: dict[tuple[bytes, bytes, str], Opener] | None = None,
) -> OpenTarget:
    topic = bound_topic.encode("utf-8")
    parts = [b""] * (max(AadProfile) + 1)
    parts[AadProfile.TOPIC] = _pack_u16(len(topic)) + topic
    parts[AadProfile.PORTABLE] = _pack_u16(0)
    rules = None if fields_codec is None or not fields_codec.key_subject else fields_codec.fields
    native = native_members(rules) if rules is not None and open_fields is not None else None
    return OpenTarget(marker, tuple(parts), bound_topic, fields_codec, native, {} if openers is None else openers)


MessageFactory = Callable[[Any, bytes, list[Header], str], DecryptedMessage]


def open_simple(
    msgs: Sequence[Any],
    target_of: Callable[[str], OpenTarget | None],
    ciphers: KeyCiphers,
    out: list[DecryptedMessage],
    finished: dict[tuple[str, int], int],
) -> int:
    """Open ``msgs`` in order while they are simple; the index of the first that is not (``len(msgs)``
    when all were). Opened messages go to ``out``; ``finished`` gets each partition's last opened offset."""
    warmed = False
    native_run = open_run
    append = out.append
    new_message = fast_message
    last_topic, target, bound = None, None, ""
    index, count = 0, len(msgs)
    while index < count:
        if native_run is not None and target is not None and index and target.native_ready:
            # The records that follow, while simple and already prepared, in C; it stops at the first it
            # cannot open that way, which this loop then judges as before.
            index = native_run(
                msgs, index, last_topic, target.marker, bound, target.openers, ciphers.entries, out, finished,
                target.native_fields,
            )  # fmt: skip
            if index >= count:
                break
        msg = msgs[index]
        if msg.error() is not None:
            return index
        topic = msg.topic()
        if topic != last_topic:
            last_topic, target = topic, target_of(topic)
            bound = "" if target is None else target.bound_topic
        headers = msg.headers()
        value = msg.value()
        key = msg.key()
        if target is not None and target.fields_codec is not None:
            opened = _open_fields_natively(target, key, value, headers, ciphers) if target.fields_native else None
            if opened is None:
                opened = _open_fields(target, key, value, headers, ciphers.table.lookup)
            if opened is None:
                return index
            append(new_message(msg, *opened))
            finished[(topic, msg.partition())] = msg.offset()
            index += 1
            continue
        if (
            target is None
            or not headers
            or headers[0] != target.marker
            or value is None
            or len(value) < _MIN_SIZE
            or not key
        ):
            return index
        rest = headers[1:]
        if rest and any(name == RECORD_HEADER_NAME for name, _ in rest):
            return index
        head = value[:_HEADER_END]
        opener = target.openers.get((head, key, bound)) or target.opener(head, key)
        if opener is None:
            return index
        key_id, aad, subject = opener
        cipher = ciphers.get(key_id)
        if cipher is None:
            if not warmed:
                warmed = True
                ciphers.warm([m.value()[4:_KEY_ID_END] for m in msgs[index:] if _looks_sealed(m.value())])
            cipher = ciphers.load(key_id, subject)
            if cipher is None:
                return index
        try:
            plain = cipher.decrypt(value[_HEADER_END:_NONCE_END], memoryview(value)[_NONCE_END:], aad)
        except InvalidTag:
            return index  # the per-record path names what is wrong with it
        append(new_message(msg, plain, rest, subject))
        finished[(topic, msg.partition())] = msg.offset()
        index += 1
    return count


def _open_fields(
    target: OpenTarget, key: bytes | None, value: bytes | None, headers: list[Header], lookup: SubjectKeyLookup
) -> tuple[bytes, list[Header], str] | None:
    """A field-mode record opened by its codec when that is all it needs (no erased field, nothing odd)."""
    if not headers or headers[0] != target.marker:
        return None
    assert target.fields_codec is not None
    try:
        outcome = target.fields_codec.open(key, value, headers, target.bound_topic, lookup)
    except StrongroomError:
        return None  # the per-record path raises it, after seeking back to the record
    if type(outcome) is not Opened or outcome.erased_fields:
        return None
    return outcome.value, outcome.headers, outcome.subject


def _open_fields_natively(
    target: OpenTarget, key: bytes | None, value: bytes | None, headers: list[Header], ciphers: KeyCiphers
) -> tuple[bytes, list[Header], str] | None:
    """A field-mode record of top-level rule fields opened in one native call (``open_fields``), with the keys
    of :class:`KeyCiphers` (loaded from the table as they are met); None when the codec must open it: any other
    shape, a key the table does not simply have, anything the native opener leaves to the Python path."""
    if (
        type(value) is not bytes
        or type(key) is not bytes
        or not key
        or len(key) > MAX_SUBJECT_BYTES
        or not headers
        or headers[0] != target.marker
        or any(name == RECORD_HEADER_NAME for name, _ in headers[1:])
    ):
        return None
    try:
        subject = key.decode("utf-8")
    except UnicodeDecodeError:
        return None
    members = target.fields_native
    if members is None or open_fields is None:
        return None
    for _ in range(len(members.names) + 1):  # each field may name a key not loaded yet
        opened = open_fields(
            value, members.names, members.aad_suffixes, AAD_LABEL, target.topic_parts, key, ciphers.entries
        )
        if not isinstance(opened, tuple):
            return None if opened is None else (opened, headers[1:], subject)
        if ciphers.load(opened[0], subject) is None:
            return None  # pending, erased, lost, KMS down: the codec's path says which
    return None


def _looks_sealed(value: bytes | None) -> bool:
    return value is not None and len(value) >= _MIN_SIZE and value[:4] == _SUBJECT_KEY_PREFIX


_FIELDS: Final = tuple(DecryptedMessage.__dataclass_fields__)
_ORDER: Final = ("topic", "partition", "offset", "key", "value", "headers", "timestamp", "timestamp_type",
                  "leader_epoch", "status", "subject", "erased_fields")  # fmt: skip
assert _FIELDS == _ORDER, "fast_message sets the fields in this order"
_SLOTS: Final = tuple(DecryptedMessage.__dict__[name] for name in _FIELDS)
_SETTERS: Final = tuple(slot.__set__ for slot in _SLOTS)
_new: Final = object.__new__
_DECRYPTED: Final = MessageStatus.DECRYPTED
if configure is not None:
    assert (HEADER_END, MIN_SIZE) == (_HEADER_END, _MIN_SIZE), "_gcm.c reads another envelope layout"
    configure(DecryptedMessage, _SLOTS, _DECRYPTED, RECORD_HEADER_NAME)


def fast_message(msg: Any, value: bytes, headers: list[Header], subject: str) -> DecryptedMessage:
    """``DecryptedMessage(...)`` of a decrypted record, built through the slots (a frozen dataclass's
    ``__init__`` costs as much as the decryption). Equal to what the constructor builds."""
    ts_type, ts = msg.timestamp()
    message: DecryptedMessage = _new(DecryptedMessage)
    (s_topic, s_partition, s_offset, s_key, s_value, s_headers, s_ts, s_ts_type, s_epoch, s_status, s_subject,
     s_erased) = _SETTERS  # fmt: skip
    s_topic(message, msg.topic())
    s_partition(message, msg.partition())
    s_offset(message, msg.offset())
    s_key(message, msg.key())
    s_value(message, value)
    s_headers(message, headers)
    s_ts(message, None if ts_type == 0 else ts)
    s_ts_type(message, ts_type)
    s_epoch(message, msg.leader_epoch())
    s_status(message, _DECRYPTED)
    s_subject(message, subject)
    s_erased(message, False)
    return message
