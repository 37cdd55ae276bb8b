"""Drop the seal leases of a keys topic, retiring the subject keys they name (``strongroom keys retire``).

Why. Seal leases (:mod:`strongroom.keys.usage`) are records with message keys of their own, so
compaction keeps every one: each writer start adds a lease per key it uses, and every writer's key
table applies them all when it catches up (docs/shredding.md, "Leases accumulate"). Nothing else may
drop them: a writer's table must add up every seal ever granted under a key it may still lease.

How, per partition ``p`` of the keys topic, with writers running:

1. **Scan** ``p`` up to its end offset ``E``: the subject keys it holds and every seal-lease record below
   ``E`` (its message key and the keys it names).
2. **Retire** the keys those leases name: seal-leases records in ``p`` that ask for one seal of each
   under a bound of one. Every key table (any strongroom version that knows seal leases) applies them
   in partition order, and whatever it added up before, each entry leaves its key *exhausted*: granted
   one seal only to a key that never sealed under a lease (nobody seals with that grant) and denied
   otherwise. An exhausted key is never a subject's current key again, so each writer moves the subject
   to a new key at its next record, as at the seal bound. Old records still open: an exhausted key stays
   readable.
3. **Drop** the leases: a tombstone for every lease record found below ``E``, once step 2 is acknowledged.
   Every key these leases name was retired at step 2 (a lease of a key that is gone, or not in its
   partition, counted for nothing anyway). A key table that reads the topic after compaction misses those
   leases and still reads every retired key as exhausted, so no seal is granted under it again. A key no
   lease names keeps its count: nothing of it is dropped.

Keys written at ``E`` or later (by writers running meanwhile) are left alone, with their leases. A rerun
retires the keys leased since, and again those the earlier retire records name (they are leases below the
new end, dropped in turn). A dry run does step 1 only.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any, Final

from strongroom.kafka.config import ClientConfig
from strongroom.keys import records
from strongroom.keys.errors import CorruptKeyRecord, KeysConfigError, RetireFailed
from strongroom.keys.records import KEY_ID_SIZE, LEASE_PREFIX, LEASES_PREFIX, SUBJECT_KEY_PREFIX, SealLeases
from strongroom.keys.topic import KeysTopic, KeysWriter, RawRecord
from strongroom.keys.topic_config import KEYS_TOPIC_DEFAULT
from strongroom.runtime import now_ms

log = logging.getLogger(__name__)

#: Tombstones written per flush (each batch acknowledged by all in-sync replicas before the next).
TOMBSTONE_BATCH: Final = 10_000


@dataclass
class PartitionRetirement:
    """What ``keys retire`` found (and did) in one partition below its end offset."""

    partition: int
    end_offset: int
    keys_retired: int = 0
    lease_records_dropped: int = 0
    lease_entries_dropped: int = 0


@dataclass
class RetireReport:
    keys_topic: str
    dry_run: bool
    partitions: list[PartitionRetirement] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        parts = [asdict(p) for p in self.partitions]
        return {
            "keys_topic": self.keys_topic,
            "dry_run": self.dry_run,
            "keys_retired": sum(p.keys_retired for p in self.partitions),
            "lease_records_dropped": sum(p.lease_records_dropped for p in self.partitions),
            "lease_entries_dropped": sum(p.lease_entries_dropped for p in self.partitions),
            "partitions": parts,
        }


class _PartitionContents:
    """Live subject keys and seal-lease records of one partition, as its records leave them (a tombstone
    removes what its message key wrote). Key ids only, one set of each: a partition of millions of keys
    and leases fits in memory."""

    def __init__(self) -> None:
        self.keys: set[bytes] = set()  # key ids of live subject-key records
        self.leases: dict[bytes, int] = {}  # message key of each live lease record → its entries
        self.named: set[bytes] = set()  # key ids any lease record named (a dropped one too: see leased_keys)

    def leased_keys(self) -> list[bytes]:
        """The live keys a lease names: those ``keys retire`` retires. A key named only by leases already
        dropped was retired by the run that dropped them, whose retire record names it still; a key no
        lease names keeps its count, nothing of it is dropped."""
        return sorted(self.named & self.keys)

    def add(self, record: RawRecord) -> None:
        key = record.key
        if key is None or key[:2] not in (SUBJECT_KEY_PREFIX, LEASE_PREFIX, LEASES_PREFIX):
            return
        if record.value is None:
            if key[:2] == SUBJECT_KEY_PREFIX:
                self.keys.discard(key[-KEY_ID_SIZE:])
            self.leases.pop(key, None)
            return
        try:
            decoded = records.decode(key, record.value)
        except CorruptKeyRecord:
            return  # every key table skips it too: nothing to retire or drop
        if isinstance(decoded, records.SubjectKeyRecord):
            self.keys.add(decoded.key_id)
        elif isinstance(decoded, records.SealLease):
            self.leases[key] = 1
            self.named.add(decoded.key_id)
        elif isinstance(decoded, SealLeases):
            self.leases[key] = len(decoded.entries)
            self.named.update(key_id for key_id, _ in decoded.entries)


def retire(
    client: ClientConfig,
    *,
    topic: str = KEYS_TOPIC_DEFAULT,
    partitions: Iterable[int] | None = None,
    dry_run: bool = False,
    progress: Callable[[str, int | None, int | None], None] | None = None,
) -> RetireReport:
    """Drop the seal leases of ``partitions`` (default: all), retiring the keys they name (module doc).
    ``progress(message, done, total)`` hears of the scan's records and of each partition written."""
    tell = progress or (lambda message, done, total: None)
    keys_topic = KeysTopic(client, topic)
    try:
        count = keys_topic.partitions
        wanted = sorted(set(range(count) if partitions is None else partitions))
        if any(not 0 <= p < count for p in wanted):
            raise KeysConfigError(
                f"keys topic {topic!r} has partitions 0 to {count - 1}; asked for {wanted}",
                hint="pass --partition with a partition number the keys topic has, or leave it out for all",
            )
        ends = {p: high for p, (_, high) in keys_topic.watermarks(wanted).items()}
        contents = {p: _PartitionContents() for p in wanted}
        scanned = keys_topic.scan(wanted, end_offsets=ends, progress=lambda done, total: tell("scanned", done, total))
        for record in scanned:
            contents[record.partition].add(record)
    finally:
        keys_topic.close()
    report = RetireReport(topic, dry_run)
    to_retire = {p: contents[p].leased_keys() for p in wanted}
    for p in wanted:
        found = contents[p]
        entries = sum(found.leases.values())
        report.partitions.append(PartitionRetirement(p, ends[p], len(to_retire[p]), len(found.leases), entries))
    if dry_run:
        return report
    with KeysWriter(client, topic) as writer:
        for done, p in enumerate(wanted, 1):
            _retire_partition(writer, p, to_retire[p], list(contents[p].leases))
            tell("partitions retired", done, len(wanted))
    return report


def _retire_partition(writer: KeysWriter, partition: int, key_ids: list[bytes], leases: list[bytes]) -> None:
    """Step 2 (retire records, acknowledged), then step 3 (tombstones, batch by batch)."""
    chunk = records.MAX_LEASE_ENTRIES
    retire_records = [
        (partition, _retire_record(key_ids[start : start + chunk])) for start in range(0, len(key_ids), chunk)
    ]
    if retire_records:
        writer.write(retire_records, error=RetireFailed)
    for start in range(0, len(leases), TOMBSTONE_BATCH):
        writer.write_messages([(partition, key, None) for key in leases[start : start + TOMBSTONE_BATCH]],
                              error=RetireFailed)  # fmt: skip
    log.info("keys retire: partition %d: %d keys retired, %d lease records dropped", partition, len(key_ids),
             len(leases))  # fmt: skip


def _retire_record(key_ids: list[bytes]) -> SealLeases:
    """One seal for each key under a bound of one: every key table leaves each of them exhausted."""
    assert all(len(key_id) == KEY_ID_SIZE for key_id in key_ids)
    return SealLeases(os.urandom(records.LEASE_ID_SIZE), tuple((key_id, 1) for key_id in key_ids), 1, now_ms())
