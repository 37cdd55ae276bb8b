"""Declaring wrapping keys lost, and undoing it: the keys-topic side of ``strongroom recover mark-lost``.

When the KMS KEK behind a wrapping key (WK) is gone for good, every subject key that WK wraps is
unreadable, and every reader fails on the records sealed with them (``KekNotFound``), scattered through
every data partition. Deleting a prefix would destroy other subjects' good data; the remedy that fits
is a *decision*, written where every reader already looks: a lost marker per WK in the keys topic
(``x\\0`` + WK id, in the WK's own partition; see :mod:`strongroom.keys.records`). Key tables apply it
within a poll interval and answer :class:`~strongroom.keys.errors.SubjectKeyLost` (a ``SubjectErased``)
for those keys, without asking the KMS; readers skip the records deliberately.

Why the WK is the unit: a lost KEK takes all subject keys under its WKs at once, and there are few WKs
(one per million subjects), so the markers are few and never need a subject id.

The marker is not null, so compaction keeps it (the latest per WK) for as long as the topic exists.
The undo — the KEK was restored after all — is a tombstone of the marker; compaction then removes both.
Writes go through the keys topic's idempotent ``acks=all`` writer; both operations read their records
back before they report success.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from strongroom.errors import StrongroomError
from strongroom.kafka.config import ClientConfig
from strongroom.keys import records
from strongroom.keys.errors import LostMarkingFailed
from strongroom.keys.murmur2 import partition_for
from strongroom.keys.records import LostMarker, LostMarkerTombstone, WrappingKeyRecord, WrappingKeyTombstone
from strongroom.keys.topic import KeysTopic, KeysWriter
from strongroom.keys.topic_config import KEYS_TOPIC_DEFAULT
from strongroom.runtime import now_ms, operator_name


@dataclass(frozen=True)
class WrappingKeyState:
    """What the keys topic says about one wrapping key now: its record (if any) and its lost marker (if any)."""

    wk_id: bytes
    partition: int
    record: WrappingKeyRecord | None = None
    marker: LostMarker | None = None
    marker_offset: int | None = None

    @property
    def kek_ref(self) -> str | None:
        return None if self.record is None else self.record.kek_ref


def read_wrapping_key_states(
    topic: KeysTopic, wk_ids: Iterable[bytes], *, timeout: float = 300.0
) -> dict[bytes, WrappingKeyState]:
    """The latest wrapping-key record and lost marker of each WK, reading only the partitions that hold them.

    Only ``w\\0`` and ``x\\0`` records are decoded; subject-key records are skipped by their first byte.
    """
    wanted = {wk_id: partition_for(wk_id, topic.partitions) for wk_id in dict.fromkeys(wk_ids)}
    found: dict[bytes, dict[str, Any]] = {wk_id: {} for wk_id in wanted}
    for raw in topic.scan(sorted(set(wanted.values())), timeout=timeout):
        key = raw.key
        if (
            not key
            or len(key) != 2 + records.WK_ID_SIZE
            or key[:2] not in (records.WRAPPING_KEY_PREFIX, records.LOST_PREFIX)
        ):
            continue
        state = found.get(key[2:])
        if state is None:
            continue
        try:
            record = records.decode(key, raw.value)
        except StrongroomError:
            continue  # a corrupt record changes nothing (readers skip it too)
        if isinstance(record, WrappingKeyRecord):
            state["record"] = record
        elif isinstance(record, WrappingKeyTombstone):
            state.pop("record", None)
        elif isinstance(record, LostMarker):
            state["marker"], state["marker_offset"] = record, raw.offset
        elif isinstance(record, LostMarkerTombstone):
            state.pop("marker", None)
            state.pop("marker_offset", None)
    return {wk_id: WrappingKeyState(wk_id, wanted[wk_id], **found[wk_id]) for wk_id in wanted}


@dataclass
class LostMarkerWrite:
    """One marker (or undo) written: where, and whether reading back found it in force."""

    wrapping_key: str
    partition: int
    offset: int
    verified: bool


@dataclass
class LostReceipt:
    """What :func:`declare_lost` / :func:`undeclare_lost` wrote and read back."""

    action: str
    keys_topic: str
    plan_id: str | None
    reason: str
    declared_by: str
    at_ms: int
    written: list[LostMarkerWrite] = field(default_factory=list)

    @property
    def verified(self) -> bool:
        return all(w.verified for w in self.written)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "verified": self.verified}


def declare_lost(
    client: ClientConfig,
    wrapping_keys: Mapping[bytes, str],
    *,
    plan_id: str,
    reason: str,
    declared_by: str | None = None,
    topic: str = KEYS_TOPIC_DEFAULT,
    timeout: float = 60.0,
) -> LostReceipt:
    """Write a lost marker for each wrapping key (``{wk_id: kek_ref}``), then read them back.

    Raises :class:`LostMarkingFailed` if Kafka does not acknowledge every marker, or if reading back does
    not find each marker in force (e.g. someone undid it at the same moment).
    """
    if not plan_id:
        raise LostMarkingFailed("a lost marker needs the id of the plan that found the loss")
    keys_topic = KeysTopic(client, topic)
    keys_topic.check_written_layout()
    who = declared_by or operator_name()
    at = now_ms()
    batch = [
        (partition_for(wk_id, keys_topic.partitions), LostMarker(wk_id, kek_ref, reason, plan_id, who, at))
        for wk_id, kek_ref in wrapping_keys.items()
    ]
    receipt = LostReceipt("mark-lost", topic, plan_id, reason, who, at)
    if not batch:
        return receipt
    with KeysWriter(client, topic) as writer:
        offsets = writer.write(batch, error=LostMarkingFailed, timeout=timeout)
    states = read_wrapping_key_states(keys_topic, wrapping_keys, timeout=max(timeout, 60.0))
    for (partition, marker), offset in zip(batch, offsets, strict=True):
        state = states[marker.wk_id]
        ok = state.marker_offset is not None and state.marker_offset >= offset
        receipt.written.append(LostMarkerWrite(marker.wk_id.hex(), partition, offset, ok))
    if not receipt.verified:
        bad = [w.wrapping_key for w in receipt.written if not w.verified]
        raise LostMarkingFailed(
            f"the lost markers of wrapping key(s) {', '.join(bad)} were written but are not in force when read "
            f"back from {topic!r} (undone at the same moment?)",
            hint="check with `strongroom recover scan` and run mark-lost again if they should be lost",
        )
    return receipt


def undeclare_lost(
    client: ClientConfig,
    wk_ids: Sequence[bytes],
    *,
    reason: str,
    declared_by: str | None = None,
    topic: str = KEYS_TOPIC_DEFAULT,
    timeout: float = 60.0,
) -> LostReceipt:
    """Tombstone the lost markers of ``wk_ids`` (their KEK is back), then read back that none is in force."""
    keys_topic = KeysTopic(client, topic)
    keys_topic.check_written_layout()
    who = declared_by or operator_name()
    receipt = LostReceipt("unmark-lost", topic, None, reason, who, now_ms())
    batch = [(partition_for(wk_id, keys_topic.partitions), LostMarkerTombstone(wk_id)) for wk_id in wk_ids]
    if not batch:
        return receipt
    with KeysWriter(client, topic) as writer:
        offsets = writer.write(batch, error=LostMarkingFailed, timeout=timeout)
    states = read_wrapping_key_states(keys_topic, wk_ids, timeout=max(timeout, 60.0))
    for (partition, tombstone), offset in zip(batch, offsets, strict=True):
        ok = states[tombstone.wk_id].marker is None  # compaction may already have removed both: also fine
        receipt.written.append(LostMarkerWrite(tombstone.wk_id.hex(), partition, offset, ok))
    if not receipt.verified:
        bad = [w.wrapping_key for w in receipt.written if not w.verified]
        raise LostMarkingFailed(
            f"wrapping key(s) {', '.join(bad)} are still declared lost in {topic!r} after the undo was written "
            "(declared lost again at the same moment?)",
            hint="run unmark-lost again once nobody else is marking them",
        )
    return receipt
