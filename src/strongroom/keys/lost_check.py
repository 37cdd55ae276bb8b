"""A lost marker is honoured only when the KMS confirms that the wrapping key's KEK cannot unwrap it.

A lost marker (``strongroom recover mark-lost``) makes every key table answer "lost" for the subject keys
under one wrapping key: readers skip those records instead of failing. Anyone who can write to the keys
topic can write such a marker, so a key table does not take it on trust: before it applies a marker it
asks the KMS to unwrap the wrapping key's EDEK once.

- The KMS answers :class:`~strongroom.kms.errors.KekNotFound` (deleted, never existed; AWS "pending
  deletion" is a ``KekNotFound`` too) or :class:`~strongroom.kms.errors.KekDisabled` (AWS disabled,
  Vault/OpenBao below ``min_decryption_version``): **confirmed**, the marker is applied. Disabled and
  pending-deletion KEKs can still come back; they count as confirmed because the marker is an
  operator's decision that ``recover mark-lost`` only takes for KEKs the KMS refuses (its report says
  that they are restorable), and readers of such a KEK fail on every record either way. The undo is
  ``recover unmark-lost`` and restoring the KEK.
- The EDEK unwraps: the KEK is **not lost**. The marker is forged or stale: it is *not* applied,
  logged at error, counted and listed (:meth:`KeyTable.refused_lost_markers`, ``stats()``).
- The KMS cannot answer (outage, no KMS of that provider configured for this table, an EDEK the KMS
  rejects as invalid): **unconfirmed**, not applied and listed the same way; re-checked every
  :data:`RECHECK_SECONDS` (a KEK deleted after the marker was written is then honoured).
- The wrapping key has no record in the keys topic: there is nothing to unwrap and no KEK to ask; the
  marker is applied (its subject keys cannot be read by anyone, the marker only turns failures into
  deliberate skips).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from strongroom.errors import KmsError
from strongroom.keys.store import KeyStore, StoredLost
from strongroom.kms.api import Kms
from strongroom.kms.errors import KekDisabled, KekNotFound

log = logging.getLogger(__name__)

#: How often a key table asks the KMS again about markers it did not apply.
RECHECK_SECONDS: Final = 60.0


@dataclass(frozen=True)
class RefusedLostMarker:
    """A lost marker a key table did not apply, and why (never secret: ids, KEK reference, KMS problem)."""

    marker: StoredLost
    reason: str
    #: True when the KMS unwrapped the EDEK: the KEK exists, the marker is forged or stale.
    kek_present: bool

    def to_dict(self) -> dict[str, object]:
        return {
            "wrapping_key": self.marker.wk_id.hex(),
            "kek": self.marker.kek_ref,
            "plan_id": self.marker.plan_id,
            "declared_by": self.marker.declared_by,
            "partition": self.marker.partition,
            "offset": self.marker.offset,
            "kek_present": self.kek_present,
            "reason": self.reason,
        }


class LostMarkerCheck:
    """Asks the KMS whether lost markers are true; one EDEK unwrap per marker, never per subject key."""

    def __init__(self, kms: Mapping[str, Kms], store: KeyStore, topic: str) -> None:
        self.kms = kms
        self.store = store
        self.topic = topic

    def judge(
        self, markers: Iterable[StoredLost], known: Mapping[bytes, RefusedLostMarker] | None = None
    ) -> tuple[dict[bytes, StoredLost], dict[bytes, RefusedLostMarker]]:
        """Split ``markers`` into those the KMS confirms and those refused. A refusal is logged at error
        unless ``known`` (the previous round's refusals) already holds it with the same reason."""
        confirmed: dict[bytes, StoredLost] = {}
        refused: dict[bytes, RefusedLostMarker] = {}
        for marker in markers:
            refusal = self._refusal(marker)
            if refusal is None:
                confirmed[marker.wk_id] = marker
                continue
            refused[marker.wk_id] = refusal
            if known is not None and known.get(marker.wk_id) == refusal:
                continue
            log.error(
                "lost marker of wrapping key %s in %s/%d@%d (plan %s) NOT applied: %s",
                marker.wk_id.hex(), self.topic, marker.partition, marker.offset, marker.plan_id, refusal.reason,
            )  # fmt: skip
        return confirmed, refused

    def _refusal(self, marker: StoredLost) -> RefusedLostMarker | None:
        stored = self.store.wrapping_key(marker.wk_id)
        if stored is None:
            return None  # no record to unwrap: nobody can read its subject keys anyway
        edek = stored.edek
        kms = self.kms.get(edek.provider)
        if kms is None:
            reason = (
                f"no KMS of provider {edek.provider!r} is configured for this key table, so nothing can confirm "
                f"that KEK {edek.kek_ref} is gone"
            )
            return RefusedLostMarker(marker, reason, kek_present=False)
        try:
            kms.unwrap(edek)
        except (KekNotFound, KekDisabled):
            return None
        except KmsError as exc:
            reason = (
                f"the KMS could not confirm that KEK {edek.kek_ref} is gone ({type(exc).__name__}: {exc.problem}); "
                f"asked again every {RECHECK_SECONDS:.0f}s"
            )
            return RefusedLostMarker(marker, reason, kek_present=False)
        reason = (
            f"KEK {edek.kek_ref} still unwraps wrapping key {marker.wk_id.hex()}: it is not lost (a forged or stale "
            "marker); check who wrote it, and tombstone it with `strongroom recover unmark-lost`"
        )
        return RefusedLostMarker(marker, reason, kek_present=True)
