"""The bridge between the KMS and the envelope: WRAPPED_DEK key references and their DEKs.

Layering: ``crypto`` ← ``envelope`` ← this module ← pipelines. The envelope package never imports
the KMS; this module is where an envelope's ``provider:kek-id`` + EDEK bytes become an
:class:`~strongroom.kms.api.Edek` and back, and where a KMS becomes a ``key_lookup``.

:class:`RotatingDekSource` is the key owner for WRAPPED_DEK mode: one DEK per KEK, reused until its
usage policy says stop (count or age), then replaced by a fresh one from the KMS — so the KMS sees
one ``generate_dek`` per 2^28 records (by default) rather than one per record.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import NamedTuple

from strongroom.crypto.errors import DekExhausted
from strongroom.crypto.limits import DekUsage, DekUsagePolicy
from strongroom.envelope.aad import RecordContext
from strongroom.envelope.codec import KeyLookup, seal
from strongroom.envelope.keyref import KeyRef, WrappedDekRef
from strongroom.kms.api import Edek, Kms
from strongroom.kms.errors import KmsConfigError


def key_ref_for(edek: Edek) -> WrappedDekRef:
    """The envelope key reference that carries ``edek``."""
    return WrappedDekRef(edek.kek_ref, edek.ciphertext)


def edek_of(key_ref: WrappedDekRef) -> Edek:
    """The EDEK an envelope's WRAPPED_DEK key reference carries."""
    return Edek.from_kek_ref(key_ref.kek_ref, key_ref.edek)


def kms_key_lookup(kms: Kms | Mapping[str, Kms], subject_keys: KeyLookup | None = None) -> KeyLookup:
    """A ``key_lookup`` for the envelope decryptors.

    WRAPPED_DEK references are unwrapped by the KMS whose name matches the reference's provider
    (pass a mapping to read data written under several KMSes, e.g. during a migration). SUBJECT_KEY
    references go to ``subject_keys`` (the per-subject key table). KMS errors propagate: a lost KEK
    is never reported as an erased subject.
    """
    by_name = dict(kms) if isinstance(kms, Mapping) else {kms.name: kms}

    def lookup(key_ref: KeyRef) -> bytes | None:
        if isinstance(key_ref, WrappedDekRef):
            provider = by_name.get(key_ref.provider)
            if provider is None:
                raise KmsConfigError(
                    f"record's KEK {key_ref.kek_ref!r} belongs to KMS {key_ref.provider!r}, "
                    f"which this reader has no configuration for (it has {sorted(by_name)})"
                )
            return provider.unwrap(edek_of(key_ref))
        if subject_keys is None:
            raise KmsConfigError(f"record uses a per-subject key {key_ref!r} but this reader has no subject key table")
        return subject_keys(key_ref)

    return lookup


class ActiveDek(NamedTuple):
    """The DEK currently used for one KEK, with its envelope key reference and usage counter."""

    dek: bytes
    key_ref: WrappedDekRef
    usage: DekUsage


class RotatingDekSource:
    """One reusable DEK for a KEK, replaced when its usage policy is reached. Thread-safe."""

    def __init__(self, kms: Kms, kek_id: str, policy: DekUsagePolicy | None = None) -> None:
        self.kms = kms
        self.kek_id = kek_id
        self.policy = policy or DekUsagePolicy()
        self.rotations = 0
        self._lock = threading.Lock()
        self._active: ActiveDek | None = None

    def current(self) -> ActiveDek:
        """The DEK to use now (a fresh one if there is none yet or the last one is exhausted)."""
        active = self._active
        if active is not None and not active.usage.exhausted:
            return active
        return self._rotate(active)

    def _rotate(self, seen: ActiveDek | None) -> ActiveDek:
        with self._lock:
            if self._active is not seen and self._active is not None and not self._active.usage.exhausted:
                return self._active  # another thread rotated first
            pair = self.kms.generate_dek(self.kek_id)
            label = f"DEK under KEK {pair.edek.kek_ref}"
            self._active = ActiveDek(pair.dek, key_ref_for(pair.edek), DekUsage(self.policy, label=label))
            self.rotations += 1
            return self._active

    def seal(self, plaintext: bytes, ctx: RecordContext, field_path: str = "") -> bytes:
        """Seal with the current DEK, rotating first if it is exhausted."""
        active = self.current()
        try:
            return seal(plaintext, active.dek, active.key_ref, ctx, field_path, usage=active.usage)
        except DekExhausted:
            active = self._rotate(active)
            return seal(plaintext, active.dek, active.key_ref, ctx, field_path, usage=active.usage)
