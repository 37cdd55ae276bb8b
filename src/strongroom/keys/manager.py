"""Key creation for encryptors: ``get_or_create(subjects)`` per batch, race-free across processes.

Several encryptors (other topics, other Spark applications) may meet the same new subject at the same
moment. Each one:

1. writes its new subject-key record to the subject's partition (after the wrapping-key record, if it
   needs a new wrapping key), and flushes with ``acks=all`` + idempotence — one flush per batch;
2. waits until its own key table has read that partition up to its own record's offset;
3. adopts the subject's *earliest* live key in partition order ("first key in partition order wins").
   Every creator reads the same partition in the same order, so all converge on one key. A creator uses
   a key only after this check, so a losing key has never encrypted anything: its creator tombstones it
   (best effort, one batch). If that tombstone is lost (a crash), the stray key is harmless and is
   tombstoned with the subject at erasure (it sits below any later marker); records always name their
   key id exactly, so no reader ever has to guess which key of a subject opens a record.

Erasure wins every race: a key written before the erasure marker is tombstoned by the eraser (it reads
the partition up to its marker); a key written after it is seen *after* the marker by its creator,
which then applies the post-erasure policy — :data:`PostErasurePolicy.UNREADABLE` (default: a fresh key
that is never stored, so the record is complete but its encrypted part is unreadable from birth),
``DROP`` (the pipeline drops the record), or ``NEW_KEY`` (a new generation of keys after the marker).

A subject whose keys were all *declared lost* (their KEK is gone, ``strongroom recover mark-lost``) is
not erased: it gets a new key, and "first key in partition order wins" skips keys declared lost.

Nothing is returned before it is durable: a key whose record was not acknowledged is never handed out,
and a KMS failure while making a wrapping key (e.g. :class:`~strongroom.kms.KmsUnavailable`) propagates
before anything is written.
"""

from __future__ import annotations

import enum
import logging
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from strongroom.crypto.aead import generate_dek
from strongroom.envelope.errors import SubjectErased
from strongroom.kafka.config import ClientConfig
from strongroom.keys.errors import KeyCreationFailed, KeysConfigError, WrappingKeyUnavailable
from strongroom.keys.murmur2 import partition_for
from strongroom.keys.records import (
    MAX_LEASE_ENTRIES,
    LayoutRecord,
    SealLeases,
    SealSlot,
    SubjectKeyTombstone,
    WrappingKeyRecord,
    check_subject,
    subject_key_message,
    wk_edek_context,
)
from strongroom.keys.store import StoredKey, slots_within
from strongroom.keys.table import ErasureInfo, KeyInfo, KeyTable, SubjectKey, SubjectState, stored_subject_key
from strongroom.keys.topic import KeysTopic, KeysWriter
from strongroom.keys.topic_config import KEYS_TOPIC_DEFAULT
from strongroom.keys.usage import Charge, SealLedger, SubjectKeyLimits, new_lease_id
from strongroom.keys.wrapping import (
    ActiveWrappingKey,
    WrappingKeyPolicy,
    new_key_id,
    new_wk_id,
    new_wrapped_subject_keys,
    new_wrapping_key,
)
from strongroom.kms.api import Kms
from strongroom.kms.selector import TemplateKekSelector
from strongroom.metrics import KeyTableSample
from strongroom.policies import MissingKek
from strongroom.runtime import collector_paused, now_ms

log = logging.getLogger(__name__)

DEFAULT_KEK_ALIAS = "strongroom-subjects"
_MAX_ROUNDS = 4


class PostErasurePolicy(enum.Enum):
    """What an encryptor does with a record of a subject that has been erased."""

    UNREADABLE = "unreadable"
    DROP = "drop"
    NEW_KEY = "new-key"


@dataclass(frozen=True)
class PolicyDecision:
    """The subject is erased; do what ``policy`` says. ``key`` is the never-stored key for UNREADABLE."""

    subject: str
    policy: PostErasurePolicy
    erasure: ErasureInfo
    key: SubjectKey | None = field(default=None, repr=False)

    @property
    def drop(self) -> bool:
        return self.policy is PostErasurePolicy.DROP


KeyOrDecision = SubjectKey | PolicyDecision


class KeyManager:
    """Creates and finds subject keys for an encryptor. Thread-safe (batches are serialised).

    Owns a :class:`KeyTable` unless one is passed in. ``kek_alias`` names the KMS KEK that wraps new
    wrapping keys; ``wrapping`` sets when a new wrapping key is made. A manager seals only with keys under
    its own KEK: a subject's keys under other KEKs (another topic's, :mod:`strongroom.keys.router`) are
    not its current key. ``missing_kek`` says what happens when the alias resolves to nothing.
    """

    def __init__(
        self,
        client: ClientConfig,
        kms: Kms,
        *,
        topic: str = KEYS_TOPIC_DEFAULT,
        kek_alias: str = DEFAULT_KEK_ALIAS,
        policy: PostErasurePolicy | str = PostErasurePolicy.UNREADABLE,
        wrapping: WrappingKeyPolicy | None = None,
        table: KeyTable | None = None,
        table_options: Mapping[str, Any] | None = None,
        timeout: float = 60.0,
        limits: SubjectKeyLimits | None = None,
        missing_kek: MissingKek = MissingKek.FAIL,
        kek_owner: str = "this writer",
    ) -> None:
        try:
            self.policy = PostErasurePolicy(policy)
        except ValueError:
            raise KeysConfigError(
                f"post-erasure policy {policy!r} is unknown",
                hint="use one of unreadable (default), drop, new-key",
            ) from None
        self.kms = kms
        self.topic = topic
        self.kek_alias = kek_alias
        self.kek = TemplateKekSelector(kms, kek_alias, missing=missing_kek)
        self.kek_owner = kek_owner
        self._kek_id: str | None = None  # resolved once, and again for every new wrapping key
        self._other_kek_wks: set[bytes] = set()  # wrapping keys under other KEKs: their keys are not ours
        self.wrapping = wrapping or WrappingKeyPolicy()
        self.limits = limits or SubjectKeyLimits()
        #: What this writer may still seal per subject key (:mod:`strongroom.keys.usage`).
        self.ledger = SealLedger(self.limits, clock=self.wrapping.clock)
        #: partition → offset of this writer's current seal slot there (claimed when first needed)
        self._slots: dict[int, int] = {}
        self._slots_generation = self.ledger.generation
        self.timeout = timeout
        self._owns_table = table is None
        self.table = table or KeyTable(client, kms, topic=topic, **dict(table_options or {})).open()
        if not self.table.seal_usage:
            if self._owns_table:
                self.table.close()
            raise KeysConfigError(
                "a writer's key table must add up seal leases; this one passes them over (seal_usage=False)",
                hint="give the writer a key table with seal_usage=True (the default; leave it out of table_options)",
            )
        self._writer = KeysWriter(client, topic)
        self._lock = threading.Lock()
        self._wk: ActiveWrappingKey | None = None
        self.counters = {
            "batches": 0,
            "created": 0,
            "adopted": 0,
            "reused": 0,
            "wrapping_keys_created": 0,
            "policy_decisions": 0,
            "discarded": 0,
        }
        try:
            self.table.wait_caught_up(timeout)
            self._check_layout(client)
        except BaseException:
            self.close()
            raise

    def _check_layout(self, client: ClientConfig) -> None:
        layout = self.table.store.layout_partitions()
        topic = KeysTopic(client, self.topic)
        topic.check_layout(layout)
        if layout is None:  # created by other tooling: record the partition count it has now
            self._writer.write([(0, LayoutRecord(topic.partitions, now_ms()))], error=KeyCreationFailed)

    # ------------------------------------------------------------------ public API
    def get_or_create(self, subjects: Iterable[str]) -> dict[str, KeyOrDecision]:
        """The key (or post-erasure decision) for each distinct subject, creating missing keys in one batch.

        Charges no seals: a writer that seals with the keys calls :meth:`charge` (or asks a
        :class:`~strongroom.keys.cache.KeyCache`, which does).
        """
        ordered = list(dict.fromkeys(subjects))
        for subject in ordered:
            check_subject(subject)
        with self._lock, collector_paused:
            return self._resolve(ordered)

    def charge(self, keys: Mapping[str, KeyOrDecision], seals: Mapping[str, int]) -> dict[str, KeyOrDecision]:
        """Account for sealing ``seals[subject]`` records with each subject's key, before sealing them.

        Returns the keys to seal with: the same ones, or — for a key that is too old, or whose seal
        lease was denied because it reached its bound (:mod:`strongroom.keys.usage`) — the subject's
        new key (rotation; created or adopted like any new key). Seal with the returned keys only.
        Keys that were never stored (post-erasure ``unreadable``) and decisions are returned as they are.
        """
        for count in seals.values():
            if count < 0:
                raise KeysConfigError(f"cannot charge {count} seals (for a subject key)")
            if count > self.limits.max_seals:
                raise KeysConfigError(
                    f"one batch would seal {count} values with one subject's key, more than a key may seal "
                    f"({self.limits.max_seals}, its usage limit)",
                    hint="write smaller batches, or raise the usage limit (max_seals)",
                )
        with self._lock, collector_paused:
            result = dict(keys)
            wanted = {s: n for s, n in seals.items() if n and isinstance(result.get(s), SubjectKey)}
            for _ in range(_MAX_ROUNDS):
                stored = {
                    subject: key for subject in wanted if isinstance(key := result[subject], SubjectKey) and key.stored
                }
                unpaid, rotate = self.ledger.charge_many(
                    (subject, key.key_id, key.created_ms, wanted[subject]) for subject, key in stored.items()
                )
                lease = {subject: stored[subject] for subject in unpaid}
                rotate.extend(self._lease(self._by_slots(lease, wanted), wanted))
                if not rotate:
                    return result
                self.ledger.counters["rotated"] += len(rotate)
                result.update(self._resolve(rotate))
                wanted = {subject: wanted[subject] for subject in rotate}
            raise KeyCreationFailed(
                f"{len(wanted)} subject keys reached their usage limit again while being rotated "
                f"({_MAX_ROUNDS} rounds)",
                hint="retry; other writers are using up the new keys as fast as they are made",
            )

    def _by_slots(self, keys: dict[str, SubjectKey], seals: Mapping[str, int]) -> dict[str, SubjectKey]:
        """Charge what this writer's seal slots cover (claiming a slot in each partition that needs one first:
        one record per partition, one flush, the read-back); returns the keys that still need a lease."""
        window, share = self.limits.slot_window, self.limits.lease_seals
        ledger = self.ledger
        if not keys or not window:
            return keys
        if self._slots_generation != ledger.generation:  # a balance was dropped: earlier slots credit no more
            self._slots.clear()
            self._slots_generation = ledger.generation
        covered: dict[str, tuple[int, int]] = {}  # subject → the key's partition and offset
        for subject, key in keys.items():
            fits = seals[subject] <= share and ledger.fresh(key.key_id)
            if fits and key.partition is not None and key.offset is not None:
                covered[subject] = (key.partition, key.offset)
        unclaimed = sorted({partition for partition, _ in covered.values() if partition not in self._slots})
        if unclaimed:
            self._claim_slots(unclaimed)
        rest: dict[str, SubjectKey] = {}
        generation = ledger.generation
        slots = self._slots
        offsets = self.table.slot_offsets({partition for partition, _ in covered.values()})
        for subject, key in keys.items():
            place = covered.get(subject)
            slot = slots.get(place[0]) if place is not None else None
            if (
                place is None
                or slot is None
                or ledger.generation != generation
                or place[1] >= slot
                or slots_within(offsets[place[0]], place[1], slot) > window  # KeyTable.slots_between
            ):
                rest[subject] = key
                continue
            ledger.slot_charge(key.key_id, seals[subject])
        return rest

    def _claim_slots(self, partitions: list[int]) -> None:
        now = now_ms()
        limits = self.limits
        asked = [(p, SealSlot(new_lease_id(), limits.lease_seals, limits.slot_window, now)) for p in partitions]
        offsets = self._writer.write(asked, error=KeyCreationFailed, timeout=self.timeout)
        self.table.wait_for_offsets(
            {p: offset + 1 for (p, _), offset in zip(asked, offsets, strict=True)}, self.timeout
        )
        self._slots.update((p, offset) for (p, _), offset in zip(asked, offsets, strict=True))
        self.ledger.counters["slots_claimed"] += len(asked)

    def _lease(self, keys: Mapping[str, SubjectKey], seals: Mapping[str, int]) -> list[str]:
        """Ask the keys topic for a seal lease for each key — one seal-leases record per partition, one
        flush, the read-back — and charge the granted ones; returns the subjects whose lease was denied
        (their key is exhausted)."""
        if not keys:
            return []
        now = now_ms()
        by_partition: dict[int, list[str]] = {}
        for subject, key in keys.items():
            by_partition.setdefault(key.partition or 0, []).append(subject)
        asked: list[tuple[int, SealLeases, list[str]]] = []
        for partition, subjects in by_partition.items():
            for start in range(0, len(subjects), MAX_LEASE_ENTRIES):
                part = subjects[start : start + MAX_LEASE_ENTRIES]
                entries = tuple((keys[s].key_id, self.ledger.lease_size(seals[s])) for s in part)
                asked.append((partition, SealLeases(new_lease_id(), entries, self.limits.max_seals, now), part))
        offsets = self._writer.write(
            [(partition, record) for partition, record, _ in asked], error=KeyCreationFailed, timeout=self.timeout
        )
        targets: dict[int, int] = {}
        for (partition, _, _), offset in zip(asked, offsets, strict=True):
            targets[partition] = max(targets.get(partition, 0), offset + 1)
        self.table.wait_for_offsets(targets, self.timeout)
        outcomes = self.table.lease_outcomes(record.lease_id for _, record, _ in asked)
        denied: list[str] = []
        for _, record, part in asked:
            grants = outcomes.get(record.lease_id, b"")  # forgotten before it was read: denied (safe side)
            for index, subject in enumerate(part):
                key_id, size = record.entries[index]
                if index < len(grants) and grants[index]:
                    self.ledger.granted(key_id, size)
                    verdict = self.ledger.charge(key_id, None, seals[subject])
                    assert verdict is Charge.SEAL, "a granted lease covers the seals it was asked for"
                else:
                    self.ledger.denied(key_id)
                    denied.append(subject)
        return denied

    def _resolve(self, ordered: list[str]) -> dict[str, KeyOrDecision]:
        """:meth:`get_or_create` under the lock."""
        self.counters["batches"] += 1
        self._refresh_other_keks()
        result: dict[str, KeyOrDecision] = {}
        need: list[str] = []
        applied_before = self.table.applied_offsets()  # the states below reflect at least this much
        current: dict[str, KeyInfo | None] = {}

        def current_of(state: SubjectState) -> KeyInfo | None:  # the key to warm: the one _known uses
            current[state.subject] = info = self._current(state)
            return info

        # Subjects with a current key and nothing else to decide, straight from their rows; the rest as states.
        found, states = self.table.current_keys(ordered, self._current_row_picker(), warm=current_of)
        self.counters["reused"] += len(found)
        result.update(found)
        for subject in states:
            known = self._known(states[subject], current.get(subject))  # not asked for a state without keys
            if known is None:
                need.append(subject)
            else:
                result[subject] = known
        rounds = 0
        while need:
            rounds += 1
            if rounds > _MAX_ROUNDS:
                raise KeyCreationFailed(
                    f"{len(need)} subjects were erased again while their keys were being created "
                    f"({_MAX_ROUNDS} rounds)",
                    hint="retry the batch; erasure keeps winning, which is the intended outcome",
                )
            written_before = Counter(self._writer.acknowledged)
            created = self._create(need, {s: states[s].partition for s in need})
            targets: dict[int, int] = {}
            for key in created.values():
                assert key.partition is not None
                assert key.offset is not None
                targets[key.partition] = max(targets.get(key.partition, 0), key.offset + 1)
            self.table.wait_for_offsets(targets, self.timeout)
            if rounds == 1 and _only_own_records(applied_before, targets, self._writer.acknowledged - written_before):
                result.update(created)  # nothing else reached these partitions: every own key is current
                self.ledger.created_many([key.key_id for key in created.values()])
                break
            need = []
            unused: list[SubjectKey] = []
            self._refresh_other_keks()  # wrapping keys other writers made meanwhile
            states = self.table.subject_states(created)
            for subject, own in created.items():
                decision = self._converge(own, states[subject])
                if decision is own:
                    self.ledger.created(own.key_id)
                else:
                    unused.append(own)
                if decision is None:
                    need.append(subject)
                else:
                    result[subject] = decision
            self._discard(unused)
        return {subject: result[subject] for subject in ordered}

    def stats(self) -> dict[str, Any]:
        wk = self._wk
        return {
            **self.counters,
            "seals": dict(self.ledger.counters),
            "policy": self.policy.value,
            "active_wrapping_key": None
            if wk is None
            else {"wk_id": wk.wk_id.hex(), "kek_ref": wk.kek_ref, "used": wk.used},
        }

    def metric_sample(self) -> KeyTableSample:
        """Its key table's figures for Prometheus, with the keys this manager created."""
        return replace(self.table.metric_sample(), created=self.counters["created"])

    def close(self) -> None:
        self._writer.close()
        if self._owns_table:
            self.table.close()

    def __enter__(self) -> KeyManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ internals
    def kek_id(self) -> str:
        """The KEK this manager wraps with (created first under ``missing_kek: create``). Resolved once and
        again for each new wrapping key only, so existing keys keep sealing through a KMS outage."""
        if self._kek_id is None:
            self._kek_id = self.kek.resolve(self.kek_alias, self.kek_owner)
        return self._kek_id

    def _refresh_other_keks(self) -> None:
        """Which wrapping keys are under KEKs other than this manager's now (one query on the small wrapping
        key table, per batch and again before deciding a race). With no wrapping key of this KMS in the
        table yet, the KEK is not resolved here: the first wrapping key made resolves it (one KMS call)."""
        store = self.table.store
        kek_id = self._kek_id
        if kek_id is None and store.has_wrapping_keys(self.kms.name):
            kek_id = self.kek_id()
        others = store.wrapping_key_ids_elsewhere(self.kms.name, kek_id)
        wk = self._wk
        if wk is not None:
            others.discard(wk.wk_id)
        self._other_kek_wks = others

    def _current(self, state: SubjectState) -> KeyInfo | None:
        """The subject's current key for this writer: first in partition order among keys not known to be
        under another KEK, not declared lost, not exhausted and younger than the key age limit."""
        return state.current_key_within(
            int(self.limits.max_age_seconds * 1000), int(self.wrapping.clock() * 1000), other_keks=self._other_kek_wks
        )

    def _current_row_picker(self) -> Callable[[Sequence[StoredKey]], StoredKey | None]:
        """:meth:`_current` over a subject's key rows (partition order, keys declared lost left out), for
        :meth:`KeyTable.current_keys`: the first not exhausted, younger than the key age limit and not under
        another KEK."""
        max_age_ms, now = int(self.limits.max_age_seconds * 1000), int(self.wrapping.clock() * 1000)
        others = self._other_kek_wks

        def pick(rows: Sequence[StoredKey]) -> StoredKey | None:
            for row in rows:
                if not row.exhausted and now - row.created_ms < max_age_ms and row.wk_id not in others:
                    return row
            return None

        return pick

    def _known(self, state: SubjectState, current: KeyInfo | None) -> KeyOrDecision | None:
        """What the subject's state gives (``current``: its :meth:`_current`), None: a key must be made."""
        if state.erasure is not None and self.policy is not PostErasurePolicy.NEW_KEY:
            return self._decision(state.subject, state.erasure)
        if current is None:  # no key, or only keys declared lost, exhausted or too old: make one
            return None
        key = self._unwrapped_current(state, current)
        if key is not None:
            self.counters["reused"] += 1
        return key

    def _unwrapped_current(self, state: SubjectState, info: KeyInfo | None) -> SubjectKey | None:
        """The state's current key ``info`` (its :meth:`_current`), unwrapped; None if an erasure (or a lost
        marker) removed it meanwhile."""
        if info is None:
            return None
        try:
            key = self.table.lookup(info.key_id)
            if key is None:  # its wrapping-key record lives in a partition the table has not read yet
                self.table.wait_caught_up(self.timeout)
                key = self.table.lookup(info.key_id)
        except SubjectErased:
            return None
        if key is None:
            raise WrappingKeyUnavailable(
                f"the current key {info.key_id.hex()} of a subject cannot be unwrapped: its wrapping key "
                f"{info.wk_id.hex()} is not in {self.topic!r}"
            )
        return stored_subject_key(state.subject, info.key_id, key, info.wk_id, state.partition, info.offset,
                                  info.created_ms)  # fmt: skip

    def _decision(self, subject: str, erasure: ErasureInfo) -> PolicyDecision:
        self.counters["policy_decisions"] += 1
        key = None
        if self.policy is PostErasurePolicy.UNREADABLE:
            key = SubjectKey(subject, new_key_id(), generate_dek(), stored=False)
        return PolicyDecision(subject, self.policy, erasure, key)

    def _create(self, subjects: list[str], partitions: dict[str, int]) -> dict[str, SubjectKey]:
        """Write a new key for each subject (one produce and one flush per wrapping key's share)."""
        created: dict[str, SubjectKey] = {}
        step = self.wrapping.max_keys
        for start in range(0, len(subjects), step):
            chunk = subjects[start : start + step]
            wk = self._wrapping_key(len(chunk))
            raws = [subject.encode("utf-8") for subject in chunk]  # checked in get_or_create
            made = new_wrapped_subject_keys(wk.key, wk.wk_id, raws)
            now, kek_ref, wk_id = now_ms(), wk.kek_ref.encode("utf-8"), wk.wk_id
            messages = [
                (partitions[subject], *subject_key_message(raw, key_id, wk_id, wrapped, now, kek_ref))
                for subject, raw, (key_id, _, wrapped) in zip(chunk, raws, made, strict=True)
            ]
            wk.used += len(chunk)
            offsets = self._writer.write_messages(messages, error=KeyCreationFailed, timeout=self.timeout)
            for subject, (key_id, sk, _), offset in zip(chunk, made, offsets, strict=True):
                created[subject] = stored_subject_key(subject, key_id, sk, wk_id, partitions[subject], offset, now)
            self.counters["created"] += len(chunk)
        return created

    def _wrapping_key(self, needed: int) -> ActiveWrappingKey:
        clock = self.wrapping.clock
        wk = self._wk
        if wk is not None and not wk.exhausted(clock(), needed):
            return wk
        self._kek_id = None  # the alias may point elsewhere now
        kek_id = self.kek_id()
        plaintext = new_wrapping_key()
        wk_id = new_wk_id()
        # bound to its WK id (docs/shredding.md); KMS errors propagate: nothing has been written
        edek = self.kms.wrap(kek_id, plaintext, wk_edek_context(wk_id))
        record = WrappingKeyRecord(wk_id, edek, now_ms())
        self._writer.write(
            [(partition_for(wk_id, self.table.partitions), record)], error=KeyCreationFailed, timeout=self.timeout
        )
        self.table.remember_wrapping_key(wk_id, plaintext)
        self.counters["wrapping_keys_created"] += 1
        self._wk = ActiveWrappingKey(
            wk_id, edek.kek_ref, plaintext, clock(), self.wrapping.max_keys, self.wrapping.max_age
        )
        log.info("new wrapping key %s under KEK %s", wk_id.hex(), edek.kek_ref)
        return self._wk

    def _converge(self, own: SubjectKey, state: SubjectState) -> KeyOrDecision | None:
        """Decide after reading the partition up to our own record. None: create again."""
        assert own.offset is not None
        subject = own.subject
        erasure = state.erasure
        if erasure is not None:
            if erasure.offset > own.offset:
                # Erased after our key was written: the eraser tombstones our key (it is below the marker).
                if self.policy is PostErasurePolicy.NEW_KEY:
                    return None
                return self._decision(subject, erasure)
            if self.policy is not PostErasurePolicy.NEW_KEY:
                return self._decision(subject, erasure)
        current = self._current(state)
        if current is None:
            return None  # our key was tombstoned by someone else (or declared lost); make another
        if current.key_id == own.key_id:
            return own
        self.counters["adopted"] += 1
        return self._unwrapped_current(state, current)

    def _discard(self, unused: list[SubjectKey]) -> None:
        """Tombstone keys we wrote but never used (lost the race, or met an erasure): one batch, best effort."""
        if not unused:
            return
        batch = [(key.partition or 0, SubjectKeyTombstone(key.subject, key.key_id)) for key in unused]
        try:
            self._writer.write(batch, error=KeyCreationFailed, timeout=self.timeout)
            self.counters["discarded"] += len(batch)
        except KeyCreationFailed as exc:  # harmless: a key that encrypted nothing
            log.warning("could not tombstone %d unused subject keys: %s", len(batch), exc)


def _only_own_records(applied_before: Mapping[int, int], targets: Mapping[int, int], own: Counter[int]) -> bool:
    """True when every record between where the table was (before the batch's subject states were read)
    and the batch's own keys is one this writer wrote: no other creator's key, no erasure marker and
    no tombstone can then have come between, and each new key is its subject's current key.

    Offsets of a partition are consecutive, so it is a count: the window's size equals the number of
    this writer's records acknowledged in that partition meanwhile. Anything else (another writer, an
    eraser, a table that applied records after ``applied_before`` was taken) falls back to reading
    each subject's state.
    """
    return all(end - applied_before.get(partition, 0) == own[partition] for partition, end in targets.items())
