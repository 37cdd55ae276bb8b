"""``erasure status``: is an erasure finished, and what is the evidence?

A subject's erasure is ``verified`` when both hold:

(a) the keys topic no longer holds a single non-tombstone key record of the subject below its erasure
    marker — checked by reading the subject's partition from its log start to its end (compaction has
    physically removed the key records from the leader's log);
(b) every registered key reader that may hold the subject's keys has applied the marker (its heartbeat
    says it has read the partition past the marker), or holds nothing (closed with a temporary store).

Otherwise it is ``pending``, with reasons that name what is outstanding: records waiting for compaction
(with the deadline from the topic configs), an eraser that did not finish its tombstones, or readers
that have not applied the marker (a stopped reader with a persistent store keeps the erasure pending
until it comes back or is forgotten). Subjects without a marker are ``not-erased``.

Compaction only happens when the active segment rolls, and Kafka rolls it only on an append. When
the partition has been quiet for longer than ``min(segment.ms, max.compaction.lag.ms)`` while erased key
records remain, the check appends a no-op *nudge* record (``n\\0<partition>``, compacted to one per
partition) so the segment rolls (``nudge=False`` turns that off).

What "verified" cannot prove: copies of the keys topic taken before compaction (MirrorMaker targets,
backups, tiered-storage objects, consumer-side dumps); follower replicas compact on their own schedule
(the check reads the leader); filesystem/SSD remnants of deleted segment files.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Final, Literal

from strongroom.errors import StrongroomError
from strongroom.kafka.config import ClientConfig
from strongroom.keys import records
from strongroom.keys.erasure import iso
from strongroom.keys.errors import ErasureFailed
from strongroom.keys.readers import ReaderHeartbeat, read_registry
from strongroom.keys.records import ErasureMarker, NudgeRecord, SubjectKeyRecord, SubjectKeyTombstone
from strongroom.keys.topic import KeysTopic, KeysWriter
from strongroom.keys.topic_config import (
    KEYS_TOPIC_DEFAULT,
    READERS_TOPIC_DEFAULT,
    erasure_deadline_ms,
    roll_deadline_ms,
)
from strongroom.runtime import now_ms

log = logging.getLogger(__name__)

Status = Literal["verified", "pending", "not-erased"]

#: What ``verified`` checks (every status lists it, so nobody has to guess; docs/shredding.md keeps the same list).
VERIFIES: Final = (
    "the keys topic's leader holds no non-tombstone key record of the subject below its erasure marker, read "
    "from the log start of the subject's partition to its end",
    "every registered key reader that may hold the subject's keys applied the marker (heartbeat past its "
    "offset) or holds nothing (closed with a temporary store); a reader applies it within a poll interval "
    "and drops the keys from its memory, and tells its listeners at once: the encrypt driver's key cache and "
    "(through the key service's erasure generation) the executors' key and cipher caches, before their next batch",
)
#: What it cannot check.
CANNOT_VERIFY: Final = (
    "copies of the keys topic taken before compaction: MirrorMaker targets, backups, broker disk snapshots, "
    "consumer-side dumps",
    "follower replicas (they compact on their own schedule; the check reads the leader)",
    "filesystem and SSD remnants of deleted segment files and key stores",
    "key records written outside the subject's partition by other tools: every key table ignores them and counts "
    "them (key table stats 'misplaced'), but they stay in the topic and this check does not read other partitions",
    "processes that hold keys without registering as key readers (register=False tools, custom code), and an "
    "executor that runs no further batch keeps its keys until its worker exits (it forgets them at its next batch)",
    "records already decrypted downstream of strongroom",
)


@dataclass
class KeyRecordSeen:
    offset: int
    timestamp_ms: int
    tombstoned_at: int | None = None


@dataclass
class SubjectScan:
    """Everything the scan saw of one subject in its partition."""

    marker_offset: int | None = None
    marker: ErasureMarker | None = None
    marker_timestamp_ms: int = 0
    keys: dict[bytes, KeyRecordSeen] = field(default_factory=dict)
    tombstones: int = 0


@dataclass
class PartitionScan:
    partition: int
    log_start: int
    log_end: int
    records: int = 0
    last_timestamp_ms: int = 0
    subjects: dict[str, SubjectScan] = field(default_factory=dict)


@dataclass
class ErasureStatus:
    subject: str
    status: Status
    partition: int
    request: dict[str, Any] | None = None
    reasons: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    evidence: dict[str, Any] = field(default_factory=dict)
    #: When the erased key records should be compacted away by the keys topic's configs (None: not waiting
    #: for compaction), and whether that time has passed while they are still in the log.
    compaction_deadline: str | None = None
    overdue: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "verifies": list(VERIFIES), "cannot_verify": list(CANNOT_VERIFY)}


def evaluate(
    subject: str,
    scan: PartitionScan,
    readers: Mapping[str, ReaderHeartbeat],
    topic_config: Mapping[str, str],
    now: int,
) -> ErasureStatus:
    """The status of one subject from a partition scan and the readers registry (pure: no I/O)."""
    seen = scan.subjects.get(subject, SubjectScan())
    status = ErasureStatus(subject, "not-erased", scan.partition)
    if seen.marker_offset is None or seen.marker is None:
        status.reasons.append("no erasure marker: this subject was never erased")
        return status
    marker_offset = seen.marker_offset
    marker = seen.marker
    status.request = {
        "request_id": marker.request_id,
        "requested_by": marker.requested_by,
        "reason": marker.reason,
        "requested_at": iso(marker.requested_at_ms) if marker.requested_at_ms else None,
        "marker_offset": marker_offset,
    }
    if marker.problem:
        status.warnings.append(f"the erasure marker's value is unreadable ({marker.problem}); it is applied anyway")
    below = {k: v for k, v in seen.keys.items() if v.offset < marker_offset}
    after = [k for k, v in seen.keys.items() if v.offset > marker_offset and v.tombstoned_at is None]
    _check_key_records(status, subject, below, topic_config, now)
    applied, ignored = _check_readers(status, readers, scan.partition, marker_offset, now)
    status.evidence = {
        "partition": scan.partition,
        "scanned_from_offset": scan.log_start,
        "scanned_to_offset": scan.log_end,
        "records_scanned": scan.records,
        "marker_offset": marker_offset,
        "key_records_below_marker": len(below),
        "tombstones_seen": seen.tombstones,
        "keys_after_marker": len(after),
        "readers_applied": applied,
        "readers_holding_nothing": ignored,
    }
    if after:
        status.warnings.append(
            f"{len(after)} live key(s) after the marker: a new generation (post-erasure policy new-key); "
            "they are not covered by this erasure"
        )
    status.status = "pending" if status.reasons else "verified"
    return status


def _check_key_records(
    status: ErasureStatus,
    subject: str,
    below: Mapping[bytes, KeyRecordSeen],
    topic_config: Mapping[str, str],
    now: int,
) -> None:
    """Reasons the key records below the marker give: some not tombstoned (the eraser did not finish), or
    tombstoned but still in the log until compaction (with when it is expected; ``overdue`` once that
    time has passed)."""
    untombstoned = [k for k, v in below.items() if v.tombstoned_at is None]
    if untombstoned:
        status.reasons.append(
            f"{len(untombstoned)} key record(s) below the marker have no tombstone (the eraser did not finish): "
            f"run `strongroom erase {subject} --reason ...` again"
        )
    awaiting = len(below) - len(untombstoned)
    if awaiting:
        oldest = min(v.timestamp_ms for v in below.values())
        tombstoned = max(v.tombstoned_at or 0 for v in below.values())
        deadline = tombstoned + erasure_deadline_ms(topic_config)
        status.compaction_deadline = iso(deadline)
        status.overdue = now > deadline
        late = f", {(now - deadline) // 1000}s overdue" if status.overdue else ""
        status.reasons.append(
            f"{awaiting} erased key record(s) (oldest written {iso(oldest)}) are still in the log, waiting for "
            f"compaction; expected by {iso(deadline)} from the topic's segment.ms/max.compaction.lag.ms{late}"
        )


def _check_readers(
    status: ErasureStatus,
    readers: Mapping[str, ReaderHeartbeat],
    partition: int,
    marker_offset: int,
    now: int,
) -> tuple[list[str], list[str]]:
    applied: list[str] = []
    ignored: list[str] = []
    for reader_id, heartbeat in sorted(readers.items()):
        state = heartbeat.state(now)
        seen_ago = f"last seen {max(0, now - heartbeat.last_seen_ms) // 1000}s ago"
        if heartbeat.applied_past(partition, marker_offset):
            applied.append(reader_id)
        elif state == "closed" and not heartbeat.persistent:
            ignored.append(reader_id)
        elif state == "stale" and not heartbeat.persistent:
            ignored.append(reader_id)
            status.warnings.append(
                f"reader {reader_id} on {heartbeat.host} stopped without closing ({seen_ago}); it kept keys only in "
                f"memory and a temporary store ({heartbeat.store}) that the next key table on that host removes"
            )
        elif heartbeat.persistent and state != "live":
            status.reasons.append(
                f"reader {reader_id} on {heartbeat.host} has a persistent store ({heartbeat.store}) and has not "
                f"applied the erasure ({state}, {seen_ago}): start it so it catches up, or delete its store and "
                f"run `strongroom keys readers --forget {reader_id}`"
            )
        else:
            status.reasons.append(
                f"reader {reader_id} on {heartbeat.host} has not applied the marker yet "
                f"(at offset {heartbeat.applied.get(partition, 0)} of partition {partition}, {seen_ago})"
            )
    return applied, ignored


# ---------------------------------------------------------------------------- I/O
def scan_partitions(
    topic: KeysTopic,
    partitions: Iterable[int],
    subjects: set[str] | None,
    timeout: float = 600.0,
    progress: Callable[[int, int], None] | None = None,
) -> dict[int, PartitionScan]:
    """Read ``partitions`` from log start to end, collecting markers and key records of ``subjects``.

    With ``subjects=None`` every subject that has a marker is collected (two passes: markers first).
    """
    wanted = sorted(set(partitions))
    marks = topic.watermarks(wanted)
    if subjects is None:
        subjects = set()
        for raw in topic.scan(wanted, end_offsets={p: h for p, (_, h) in marks.items()}, timeout=timeout):
            if raw.key and raw.key.startswith(records.ERASURE_PREFIX) and raw.value is not None:
                subjects.add(raw.key[2:].decode("utf-8", "replace"))
    scans = {p: PartitionScan(p, low, high) for p, (low, high) in marks.items()}
    ends = {p: high for p, (_, high) in marks.items()}
    for raw in topic.scan(wanted, end_offsets=ends, timeout=timeout, progress=progress):
        scan = scans[raw.partition]
        scan.records += 1
        scan.last_timestamp_ms = max(scan.last_timestamp_ms, raw.timestamp_ms)
        key = raw.key or b""
        if not (key.startswith(records.SUBJECT_KEY_PREFIX) or key.startswith(records.ERASURE_PREFIX)):
            continue
        record = records.decode_or_salvage(key, raw.value)
        if not isinstance(record, ErasureMarker | SubjectKeyRecord | SubjectKeyTombstone):
            continue
        if record.subject not in subjects:
            continue
        seen = scan.subjects.setdefault(record.subject, SubjectScan())
        if isinstance(record, ErasureMarker):
            seen.marker_offset = raw.offset
            seen.marker = record
            seen.marker_timestamp_ms = raw.timestamp_ms
        elif isinstance(record, SubjectKeyRecord):
            seen.keys[record.key_id] = KeyRecordSeen(raw.offset, raw.timestamp_ms)
        elif isinstance(record, SubjectKeyTombstone):
            seen.tombstones += 1
            if record.key_id in seen.keys:
                seen.keys[record.key_id].tombstoned_at = raw.timestamp_ms
    return scans


def erasure_status(
    client: ClientConfig,
    subjects: Sequence[str] | None,
    *,
    topic: str = KEYS_TOPIC_DEFAULT,
    readers_topic: str = READERS_TOPIC_DEFAULT,
    nudge: bool = True,
    timeout: float = 600.0,
    progress: Callable[[int, int], None] | None = None,
) -> list[ErasureStatus]:
    """The erasure status of ``subjects`` (``None``: every erased subject), with evidence."""
    keys_topic = KeysTopic(client, topic)
    if subjects is None:
        partitions: list[int] = list(range(keys_topic.partitions))
        wanted: set[str] | None = None
    else:
        wanted = set(subjects)
        partitions = sorted({keys_topic.partition_of(s) for s in subjects})
    scans = scan_partitions(keys_topic, partitions, wanted, timeout, progress)
    config = keys_topic.config()
    readers = read_registry(client, readers_topic, keys_topic=topic)
    now = now_ms()
    if subjects is None:
        ordered = sorted({s for scan in scans.values() for s in scan.subjects})
    else:
        ordered = list(dict.fromkeys(subjects))
    results = [evaluate(s, scans[keys_topic.partition_of(s)], readers, config, now) for s in ordered]
    if nudge:
        _nudge_quiet_partitions(client, keys_topic, scans, results, config, now)
    return results


def _nudge_quiet_partitions(
    client: ClientConfig,
    keys_topic: KeysTopic,
    scans: Mapping[int, PartitionScan],
    results: list[ErasureStatus],
    config: Mapping[str, str],
    now: int,
) -> None:
    """Append a nudge where erased key records wait for a segment roll that no traffic will cause."""
    waiting = {
        r.partition
        for r in results
        if r.status == "pending" and any("waiting for compaction" in reason for reason in r.reasons)
    }
    quiet = [p for p in waiting if now - scans[p].last_timestamp_ms > roll_deadline_ms(config)]
    if not quiet:
        return
    try:
        with KeysWriter(client, keys_topic.name) as writer:
            writer.write([(p, NudgeRecord(p, now)) for p in quiet], error=ErasureFailed, timeout=60)
    except StrongroomError as exc:
        log.warning("could not append a nudge record to roll the keys topic's active segment: %s", exc)
        return
    for result in results:
        if result.partition in quiet:
            result.evidence["nudged"] = True
