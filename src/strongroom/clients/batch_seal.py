"""The producer's batch path: seal many whole values in one pass, with per-subject work done once.

:func:`strongroom.clients.sealing.seal_record` handles every record shape (field mode, header or JSON
subjects, post-erasure decisions, caller headers) one record at a time. Most batches are simpler: the
subject is the record key, the value is sealed whole, there are no caller headers. For those, what
does not change per record is computed once per (output topic, subject) and kept in
:class:`SubjectSealers`:

* the envelope header (magic, version, cipher, key ref, AAD profile),
* the complete AAD (label, header, bound topic, subject, empty field path),
* the ready cipher of the subject's key (the native ``Gcm`` of ``crypto/_gcm.c`` when the project's build
  made it, else ``cryptography``'s ``AESGCM``: the same AES-256-GCM of OpenSSL behind both).

Sealing a record is then one LRU lookup, one slice of a batch-wide random buffer for the nonce, one
``encrypt`` and one join: the same bytes :func:`strongroom.envelope.seal` writes (the frozen vectors
and the unit tests check it). Field mode's top-level rule fields are sealed the same way by
:meth:`SubjectSealers.seal_fields`, a record in one native call (``seal_fields``: the strict reader, each
field's seal, the canonical text), the bytes :func:`strongroom.envelope.encrypt_json_fields` writes.
Nothing here decides policy: a record that needs any decision is left to the per-record path.

Erasure: the key table tells :meth:`SubjectSealers.on_erasure` about every applied erasure, key
tombstone and lost marker (in its reader thread); the cache is emptied at once, so no cipher of an
erased key stays here, and entries built from keys fetched before a notice are not kept.
"""

from __future__ import annotations

import os
import struct
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Final, NamedTuple

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from strongroom.crypto import nonces
from strongroom.crypto.aead import CIPHERS
from strongroom.envelope.aad import new_aad_frame
from strongroom.envelope.ids import NONCE_SIZE, SUBJECT_KEY_ID_SIZE, TAG_SIZE, AadProfile
from strongroom.envelope.json_fields import NativeMembers
from strongroom.envelope.keyref import SubjectKeyRef
from strongroom.keys.erasure_feed import ErasureNotice
from strongroom.keys.table import SubjectKey
from strongroom.runtime import untracked

try:  # the native cipher and field sealer, built by `make` from crypto/_gcm.c (issue 18)
    from strongroom.crypto._gcm import Gcm, seal_fields
except ImportError:  # pragma: no cover - an install without the project's build: cryptography's AESGCM seals
    Gcm = seal_fields = None  # type: ignore[assignment,misc]

#: Whether the native cipher and field sealer are here (the project's build makes them; a test insists).
NATIVE: Final = Gcm is not None

#: Active (output topic, subject) pairs kept ready; a realistic producer meets tens of thousands. The
#: producer sizes it like its key cache (``key_cache_size``); each entry's ``AESGCM`` is ≈ 2.4 KB.
DEFAULT_CAPACITY: Final = 100_000
#: Bytes a whole-value SUBJECT_KEY envelope adds to its plaintext: header (4 + 16 + 1), nonce, tag.
ENVELOPE_OVERHEAD: Final = 4 + SUBJECT_KEY_ID_SIZE + 1 + NONCE_SIZE + TAG_SIZE
_pack_u32: Final = struct.Struct(">I").pack
_PORTABLE: Final = AadProfile.PORTABLE


class SubjectSealer(NamedTuple):
    """What sealing a record of one subject to one output topic needs besides the value and a nonce."""

    key_id: bytes
    header: bytes
    #: The whole value's AAD: :attr:`subject_aad` and the empty field path.
    aad: bytes
    cipher: Gcm | AESGCM
    #: The AAD up to the field path (label, header, bound topic, subject), which a field's path ends.
    subject_aad: bytes


class SealItem(NamedTuple):
    """One record of a batch to seal: where it goes, its subject (text and bytes) and its value."""

    out_topic: str
    profile: AadProfile
    subject: str
    subject_bytes: bytes
    value: bytes


def build_sealer(key: SubjectKey, out_topic: str, profile: AadProfile, subject_bytes: bytes) -> SubjectSealer:
    """The precomputed parts for ``key`` (exactly what :func:`strongroom.envelope.seal` assembles)."""
    header = SubjectKeyRef(key.key_id).header(profile)
    prefix, suffix = new_aad_frame(header, "" if profile == _PORTABLE else out_topic, "")
    subject_aad = b"".join((prefix, _pack_u32(len(subject_bytes)), subject_bytes))
    cipher = Gcm(key.key) if NATIVE else CIPHERS.get(key.key)
    return SubjectSealer(key.key_id, header, subject_aad + suffix, cipher, subject_aad)


class SubjectSealers:
    """(output topic, profile, subject) → :class:`SubjectSealer`, least recently used out first. Thread-safe."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self.capacity = max(1, capacity)
        self._entries: OrderedDict[tuple[str, int, str], SubjectSealer] = OrderedDict()
        self._lock = threading.Lock()
        self._notices = 0
        self.counters = {"hits": 0, "misses": 0, "erasure_clears": 0}

    def __len__(self) -> int:
        return len(self._entries)

    def on_erasure(self, notice: ErasureNotice) -> None:
        """The key table applied an erasure (its listener): forget every prepared cipher now."""
        with self._lock:
            self._notices += 1
            self._entries.clear()
            self.counters["erasure_clears"] += 1

    def notices(self) -> int:
        """Erasure notices so far; pass it to :meth:`seal` along with keys fetched after reading it."""
        return self._notices

    def seal(self, items: Sequence[SealItem], keys: dict[str, SubjectKey], notices: int) -> list[bytes]:
        """The envelopes of ``items`` (in order), each sealed with its subject's key from ``keys``.

        ``notices`` is :meth:`notices` read before ``keys`` were fetched: if an erasure arrived since,
        the batch is still sealed (erasure wins anyway: the key is gone) but nothing of it is cached.
        """
        randomness = _nonce_source(len(items))
        out: list[bytes] = []
        append = out.append
        with self._lock:
            sealers = self._sealers(items, keys, notices)
            for position, ((_, _, _, _, value), sealer) in enumerate(zip(items, sealers, strict=True)):
                start = position * NONCE_SIZE
                nonce = randomness[start : start + NONCE_SIZE] if randomness else nonces.new_nonce()
                append(b"".join((sealer.header, nonce, sealer.cipher.encrypt(nonce, value, sealer.aad))))
        return out

    def seal_fields(
        self,
        items: Sequence[SealItem],
        fields: Sequence[NativeMembers | None],
        keys: dict[str, SubjectKey],
        notices: int,
    ) -> list[bytes | None]:
        """Field mode: each item's top-level rule fields (``fields``, per item: its rule's, None when they are
        not all top-level members) sealed with its subject's key in one native call; None for an item the
        caller must seal through :func:`~strongroom.envelope.encrypt_json_fields` (no native build, fixed
        nonces, or a document that path must read). ``notices`` as in :meth:`seal`."""
        if not NATIVE or nonces.override is not None:
            return [None] * len(items)
        width = max((len(f.names) for f in fields if f is not None), default=0) * NONCE_SIZE
        randomness = os.urandom(len(items) * width)
        out: list[bytes | None] = []
        append = out.append
        with self._lock:
            sealers = self._sealers(items, keys, notices)
            for position, (item, members, sealer) in enumerate(zip(items, fields, sealers, strict=True)):
                cipher = sealer.cipher
                if members is None or not isinstance(cipher, Gcm):
                    append(None)
                    continue
                start = position * width
                append(
                    seal_fields(
                        item.value,
                        members.names,
                        members.aad_suffixes,
                        sealer.subject_aad,
                        sealer.header,
                        cipher,
                        randomness[start : start + width],
                    )
                )
        return out

    def _sealers(self, items: Sequence[SealItem], keys: dict[str, SubjectKey], notices: int) -> list[SubjectSealer]:
        """Each item's sealer, from the cache or built (and kept unless an erasure came after ``notices``). Under
        the lock."""
        entries = self._entries
        get = entries.get
        to_end = entries.move_to_end
        keep = notices == self._notices
        found: list[SubjectSealer] = []
        misses = 0
        for out_topic, profile, subject, subject_bytes, _ in items:
            slot = (out_topic, profile, subject)
            sealer = get(slot)
            key = keys[subject]
            if sealer is None or sealer.key_id != key.key_id:
                misses += 1
                sealer = build_sealer(key, out_topic, profile, subject_bytes)
                if keep:
                    entries[untracked(slot)] = untracked(sealer)
                    if len(entries) > self.capacity:
                        entries.popitem(last=False)
            else:
                to_end(slot)
            found.append(sealer)
        if misses and keep:  # nothing in the cache is part of a reference cycle: out of the collector's passes
            untracked(entries)
        self.counters["hits"] += len(items) - misses
        self.counters["misses"] += misses
        return found


def _nonce_source(count: int) -> bytes:
    """Random bytes for ``count`` nonces in one system call (empty under the vectors' fixed-nonce override)."""
    if nonces.override is not None:
        return b""
    return os.urandom(count * NONCE_SIZE)
