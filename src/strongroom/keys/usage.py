"""Usage limits of subject keys: how many records one subject key may seal, and for how long.

Every record is sealed with AES-256-GCM under a random 96-bit nonce. With *q* seals under one key the
chance that two share a nonce is at most q² / 2⁹⁷; NIST SP 800-38D allows 2³² seals per key. A busy
subject (a tenant id as the record key) reaches that in weeks, so subject keys have a seal bound,
enforced by rotating the subject to a new key id (the design already keeps several keys per subject;
erasure removes them all; records name their key id, so old records still open).

The bound holds across any number of writers (threads, executors, pipelines, producers) because seals
are granted through the keys topic, where every writer reads the same order:

- the writer that *created* a key may seal up to ``creator_seals`` records with it without asking
  (its key record is the grant: a key has exactly one creator, and only the creator's winning key is
  ever used);
- every other use needs a **seal lease**: a small record in the subject's partition asking for
  ``lease_seals`` more. Every key table applies the leases in partition order, adding them up; a
  lease that would take the key past ``max_seals`` (as that lease states it) is denied and marks the
  key *exhausted* for everyone. A writer seals under a lease only after reading it back granted.
- a writer that starts on keys that already exist would need a lease for each of them (a new pipeline
  over 100,000 existing subjects: 100,000 lease entries to write, read back and add up, on every
  start). Instead it writes one **seal slot** per partition it seals in: a record that stands for a
  lease of ``lease_seals`` under every key written before it in that partition. Every reader counts a
  key's slots alike (the slot records after the key's record, in partition order); only the first
  ``slot_window`` slots after a key may seal with it, ``lease_seals`` each, and a writer credits each
  key at most once per slot of its own. A key written after the writer's slot, a key whose window is
  full, and a batch bigger than a slot's share take leases as above;
- an exhausted key, or one older than ``max_age_seconds``, is never a subject's current key: the next
  writer that needs the subject creates a new key, and "first key in partition order wins" makes
  every writer converge on it.

So a key seals at most ``max_seals + creator_seals + slot_window × lease_seals`` records, however many
writers share it (docs/threat-model.md has the arithmetic). A writer that stops early wastes the rest of
its lease or slot: unused seals are never handed to anyone else, so the bound errs only on the safe side.

This module is the pure part: the limits and a writer's ledger of what it may still seal per key.
"""

from __future__ import annotations

import enum
import os
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final, TypeVar

from strongroom.keys.errors import KeysConfigError
from strongroom.keys.records import LEASE_ID_SIZE
from strongroom.runtime import untracked

T = TypeVar("T")

#: 2³² random-nonce seals is the NIST ceiling for one key; no limit may let a key pass it.
HARD_MAX_SEALS: Final = 2**32
DEFAULT_MAX_SEALS: Final = 2**30
DEFAULT_LEASE_SEALS: Final = 2**20
DEFAULT_MAX_AGE_SECONDS: Final = 90 * 24 * 3600.0
#: Slots after a key's record that may seal with it: 1,024 writer starts (per partition) before a key's
#: new users lease it key by key again; 2³⁰ seals with the default lease size.
DEFAULT_SLOT_WINDOW: Final = 1024
#: Keys a writer keeps a balance for; a forgotten balance is simply leased again (never re-granted free).
DEFAULT_LEDGER_SIZE: Final = 1_000_000


@dataclass(frozen=True, slots=True)
class SubjectKeyLimits:
    """The usage limits a writer applies to the subject keys it seals with.

    ``max_seals`` is what the leases of one key may add up to; the key's creator seals up to
    ``creator_seals`` more without a lease; leases ask for ``lease_seals`` (or a batch's need if more);
    the first ``slot_window`` seal slots after a key's record seal up to ``lease_seals`` each with it
    (0: no slots, every writer leases every key it did not create).
    """

    max_seals: int = DEFAULT_MAX_SEALS
    lease_seals: int = DEFAULT_LEASE_SEALS
    creator_seals: int = DEFAULT_LEASE_SEALS
    max_age_seconds: float = DEFAULT_MAX_AGE_SECONDS
    slot_window: int = DEFAULT_SLOT_WINDOW

    def __post_init__(self) -> None:
        slots = self.slot_window * self.lease_seals
        if self.max_seals < 1 or self.slot_window < 0 or self.max_seals + self.creator_seals + slots > HARD_MAX_SEALS:
            raise KeysConfigError(
                f"subject-key seal limits max_seals={self.max_seals} + creator_seals={self.creator_seals} + "
                f"slot_window={self.slot_window} × lease_seals={self.lease_seals} must be between 1 and 2**32",
                hint="random 96-bit nonces allow at most 2**32 seals per key; lower max_seals or slot_window",
            )
        if not 1 <= self.lease_seals <= self.max_seals or self.creator_seals < 0:
            raise KeysConfigError(
                f"subject-key lease_seals={self.lease_seals} must be between 1 and max_seals={self.max_seals}, "
                f"creator_seals={self.creator_seals} at least 0"
            )
        if self.max_age_seconds <= 0:
            raise KeysConfigError(f"subject-key max_age_seconds={self.max_age_seconds} must be positive")

    @property
    def bound(self) -> int:
        """The most records one key can seal, however many writers share it."""
        return self.max_seals + self.creator_seals + self.slot_window * self.lease_seals

    def expired(self, created_ms: int, now_ms: int) -> bool:
        return now_ms - created_ms >= self.max_age_seconds * 1000


def new_lease_id() -> bytes:
    """A random lease id (its message key must be unique: compaction keeps every lease)."""
    return os.urandom(LEASE_ID_SIZE)


class Charge(enum.StrEnum):
    """What a writer must do before sealing with a key."""

    #: the balance covers it (and was charged)
    SEAL = "seal"
    #: ask the keys topic for a lease first
    LEASE = "lease"
    #: too old (or exhausted): rotate the subject to a new key
    ROTATE = "rotate"


class SealLedger:
    """One writer's balance of seals per subject key: its creator share, its slot shares, then its granted
    leases.

    A key the ledger holds a balance for (even an empty one) was already credited under the writer's
    current slots; a balance the ledger drops (its capacity, :meth:`forget`) moves :attr:`generation` on,
    and the writer claims new slots before it credits any key from a slot again: a slot never credits a
    key twice. Not thread-safe on its own: the key manager calls it under its lock.
    """

    def __init__(
        self,
        limits: SubjectKeyLimits,
        *,
        capacity: int = DEFAULT_LEDGER_SIZE,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.limits = limits
        self.capacity = capacity
        self.clock = clock
        #: key id → seals left; numbers only, so out of the collector's passes for good (``runtime.untracked``).
        self._balance: OrderedDict[bytes, int] = untracked(OrderedDict())
        #: Moves on whenever a balance is dropped: the slots claimed before it may not credit again.
        self.generation = 0
        self.counters = {"charged": 0, "leases_granted": 0, "leases_denied": 0, "rotated": 0, "slot_credits": 0,
                         "slots_claimed": 0}  # fmt: skip

    def created(self, key_id: bytes) -> None:
        """This writer created ``key_id`` (and its record won): its creator share."""
        self._set(key_id, self.limits.creator_seals)

    def created_many(self, key_ids: Iterable[bytes]) -> None:
        """:meth:`created` for each of ``key_ids``, in order (a creating batch's keys: one call, not one each)."""
        balance, share = self._balance, self.limits.creator_seals
        for key_id in key_ids:  # what _set does per key, trimmed once at the end
            balance[key_id] = share
            balance.move_to_end(key_id)
        self._trim()

    def granted(self, key_id: bytes, seals: int) -> None:
        self.counters["leases_granted"] += 1
        self._set(key_id, self._balance.get(key_id, 0) + seals)

    def denied(self, key_id: bytes) -> None:
        self.counters["leases_denied"] += 1
        self._set(key_id, 0)

    def fresh(self, key_id: bytes) -> bool:
        """No balance held for ``key_id`` since the current slots were claimed: a slot may credit it."""
        return key_id not in self._balance

    def slot_credit(self, key_id: bytes) -> None:
        """A slot of this writer, within the key's window, credits a fresh key with its share."""
        assert key_id not in self._balance, "a slot credits a key once"
        self.counters["slot_credits"] += 1
        self._set(key_id, self.limits.lease_seals)

    def charge(self, key_id: bytes, created_ms: int | None, seals: int) -> Charge:
        """Take ``seals`` from the key's balance, or say what must happen first."""
        if created_ms is not None and self.limits.expired(created_ms, int(self.clock() * 1000)):
            return Charge.ROTATE
        balance = self._balance.get(key_id, 0)
        if balance < seals:
            return Charge.LEASE
        self._balance[key_id] = balance - seals
        self.counters["charged"] += seals
        return Charge.SEAL

    def charge_many(self, wanted: Iterable[tuple[T, bytes, int | None, int]]) -> tuple[list[T], list[T]]:
        """:meth:`charge` for each ``(item, key id, created_ms, seals)``, the clock read once: the items whose key
        needs a lease first (``Charge.LEASE``) and those to rotate (``Charge.ROTATE``); the rest are charged."""
        now_ms = int(self.clock() * 1000)
        max_age_ms = self.limits.max_age_seconds * 1000
        balances = self._balance
        lease: list[T] = []
        rotate: list[T] = []
        charged = 0
        for item, key_id, created_ms, seals in wanted:
            if created_ms is not None and now_ms - created_ms >= max_age_ms:  # SubjectKeyLimits.expired
                rotate.append(item)
                continue
            balance = balances.get(key_id, 0)
            if balance < seals:
                lease.append(item)
                continue
            balances[key_id] = balance - seals
            charged += seals
        self.counters["charged"] += charged
        return lease, rotate

    def slot_charge(self, key_id: bytes, seals: int) -> None:
        """:meth:`slot_credit` and then :meth:`charge` of ``seals`` (at most the slot's share) in one step."""
        assert key_id not in self._balance, "a slot credits a key once"
        share = self.limits.lease_seals
        assert seals <= share, "a slot's share covers the seals it was checked against"
        self.counters["slot_credits"] += 1
        self.counters["charged"] += seals
        self._set(key_id, share - seals)

    def lease_size(self, seals: int) -> int:
        """How many seals to ask for when ``seals`` are needed now."""
        return max(self.limits.lease_seals, seals)

    def balance(self, key_id: bytes) -> int:
        return self._balance.get(key_id, 0)

    def forget(self, key_id: bytes) -> None:
        if self._balance.pop(key_id, None) is not None:
            self.generation += 1

    def _set(self, key_id: bytes, balance: int) -> None:
        self._balance[key_id] = balance
        self._balance.move_to_end(key_id)
        self._trim()

    def _trim(self) -> None:
        while len(self._balance) > self.capacity:
            self._balance.popitem(last=False)
            self.generation += 1
