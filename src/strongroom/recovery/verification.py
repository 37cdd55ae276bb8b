"""What ``recover scan``'s Spark verification found: per partition, and per lost key.

Pass 1 (:func:`~strongroom.recovery.spark_jobs.prefix_groups`) brings back one row per group of records
that share kind and key prefixes; :func:`summarise_groups` turns those rows and the driver's verdicts
into a :class:`PartitionVerification` per partition, and :func:`lost_keys` into :class:`LostKeys`.
Pass 2 (:func:`~strongroom.recovery.spark_jobs.status_runs`) adds the order below L
(:meth:`PartitionVerification.with_runs`). The plan document is written from these in
:mod:`strongroom.recovery.scan`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from strongroom.recovery.dependency import KeyStatus, KeyVerdict

if TYPE_CHECKING:  # Spark is imported only when a scan verifies (``recover scan --no-verify`` needs none)
    from strongroom.recovery.spark_jobs import PrefixGroup, StatusRuns

#: How many ``[first, last, records]`` runs of corrupt or malformed records a partition lists.
UNREADABLE_EXAMPLES = 20
#: How many lost subject keys the plan lists as examples (the records under all of them are counted).
SUBJECT_EXAMPLES = 50

_RANK = {"readable": 0, "erased": 0, "declared-lost": 0, "corrupt": 1, "lost": 2}


@dataclass(frozen=True)
class PartitionVerification:
    """Every record of one partition checked: counts per status, where the loss is, and (pass 2,
    partitions with lost records only) the order below L."""

    records: int
    readable: int
    lost: int
    corrupt: int
    malformed: int
    plain: int
    tombstones: int
    first_lost: int | None
    last_lost: int | None
    #: Lost records that need a per-subject key (their loss is scattered by design).
    lost_subject_key_records: int
    #: ``(first, last, records)`` of corrupt or malformed groups, the first :data:`UNREADABLE_EXAMPLES`.
    unreadable_other: tuple[tuple[int, int, int], ...]
    #: Lost records at or above the searched boundary (pass 2).
    stragglers: int = 0
    straggler_offsets: tuple[int, ...] = ()
    #: Readable records below the true boundary: what a deletion up to L would also remove (pass 2).
    readable_below: int = 0
    #: Maximal runs of lost records below L: how many, and the first ``(first, last, records)`` (pass 2).
    lost_runs: int = 0
    lost_ranges: tuple[tuple[int, int, int], ...] = ()

    def with_runs(self, by_status: Mapping[str, StatusRuns]) -> PartitionVerification:
        """This partition with pass 2's runs below L."""
        lost = by_status.get("lost")
        readable = by_status.get("readable")
        return replace(
            self,
            stragglers=0 if lost is None else lost.above_searched,
            straggler_offsets=() if lost is None else lost.straggler_offsets,
            readable_below=0 if readable is None else readable.records,
            lost_runs=0 if lost is None else lost.runs,
            lost_ranges=() if lost is None else lost.ranges,
        )


@dataclass
class _PartitionTally:
    """Pass 1's groups of one partition, counted (the mutable side of :class:`PartitionVerification`)."""

    by_status: dict[str, int] = field(default_factory=dict)
    records: int = 0
    plain: int = 0
    tombstones: int = 0
    first_lost: int | None = None
    last_lost: int | None = None
    lost_subject_key_records: int = 0
    unreadable_other: list[tuple[int, int, int]] = field(default_factory=list)

    def add(self, group: PrefixGroup, status: str, needs_subject_key: bool) -> None:
        self.records += group.records
        self.by_status[status] = self.by_status.get(status, 0) + group.records
        if group.kind == "plain":
            self.plain += group.records
        elif group.kind == "tombstone":
            self.tombstones += group.records
        if status == "lost":
            self.first_lost = group.first if self.first_lost is None else min(self.first_lost, group.first)
            self.last_lost = group.last if self.last_lost is None else max(self.last_lost, group.last)
            if needs_subject_key:
                self.lost_subject_key_records += group.records
        elif status in ("corrupt", "malformed"):
            self.unreadable_other.append((group.first, group.last, group.records))

    def freeze(self) -> PartitionVerification:
        return PartitionVerification(
            records=self.records,
            readable=self.by_status.get("readable", 0),
            lost=self.by_status.get("lost", 0),
            corrupt=self.by_status.get("corrupt", 0),
            malformed=self.by_status.get("malformed", 0),
            plain=self.plain,
            tombstones=self.tombstones,
            first_lost=self.first_lost,
            last_lost=self.last_lost,
            lost_subject_key_records=self.lost_subject_key_records,
            unreadable_other=tuple(sorted(self.unreadable_other)[:UNREADABLE_EXAMPLES]),
        )


def group_status(group: PrefixGroup, verdicts: Mapping[bytes, KeyVerdict]) -> str:
    """A group's status: the worst of its prefixes' verdicts (lost over corrupt over readable)."""
    worst = max((_RANK[verdicts[p].status.value] for p in group.prefixes), default=0)
    return {0: "readable", 1: "corrupt", 2: "lost"}[worst]


def summarise_groups(
    groups: Iterable[PrefixGroup],
    statuses: Mapping[tuple[bytes, ...], str],
    verdicts: Mapping[bytes, KeyVerdict],
) -> dict[int, PartitionVerification]:
    """Pass 1's groups counted per partition."""
    tallies: dict[int, _PartitionTally] = {}
    for g in groups:
        status = "malformed" if g.kind == "malformed" else statuses.get(g.prefixes, "readable")
        needs_subject_key = any(_needs_subject_key(verdicts[p]) for p in g.prefixes) if status == "lost" else False
        tallies.setdefault(g.partition, _PartitionTally()).add(g, status, needs_subject_key)
    return {partition: tally.freeze() for partition, tally in tallies.items()}


def _needs_subject_key(verdict: KeyVerdict) -> bool:
    return verdict.dependency is not None and verdict.dependency.subject_key_id is not None


@dataclass(frozen=True)
class LostSubjectKey:
    """A per-subject key whose wrapping key's KEK is lost, and the records that need it."""

    key_id: bytes
    records: int
    first: int
    last: int
    #: Partitions in the order the verification met them.
    partitions: tuple[int, ...]


@dataclass(frozen=True)
class LostKeys:
    """The verification's lost keys: lost records per (partition, KEK label), every lost subject key, and
    the records under subject keys already declared lost."""

    #: ``(partition, label, records)``, sorted.
    by_kek: tuple[tuple[int, str, int], ...] = ()
    subjects: Mapping[bytes, LostSubjectKey] = field(default_factory=dict)
    #: Records per subject key id already declared lost (skipped by readers on purpose).
    declared_lost: Mapping[bytes, int] = field(default_factory=dict)

    @property
    def subject_keys(self) -> int:
        return len(self.subjects)

    def subject_examples(self) -> list[LostSubjectKey]:
        """The subject keys with the most lost records (then by id), the first :data:`SUBJECT_EXAMPLES`."""
        ordered = sorted(self.subjects.values(), key=lambda k: (-k.records, k.key_id.hex()))
        return ordered[:SUBJECT_EXAMPLES]


@dataclass
class _SubjectTally:
    records: int
    first: int
    last: int
    partitions: list[int]

    def add(self, group: PrefixGroup) -> None:
        self.records += group.records
        self.first = min(self.first, group.first)
        self.last = max(self.last, group.last)
        if group.partition not in self.partitions:
            self.partitions.append(group.partition)


def lost_keys(
    groups: Iterable[PrefixGroup],
    statuses: Mapping[tuple[bytes, ...], str],
    verdicts: Mapping[bytes, KeyVerdict],
) -> LostKeys:
    """Lost records per (partition, KEK) and per subject key (records, first/last offset, partitions);
    records under keys already declared lost, per subject key."""
    by_kek: dict[tuple[int, str], int] = {}
    subjects: dict[bytes, _SubjectTally] = {}
    declared: dict[bytes, int] = {}
    for g in groups:
        # A record counts once per key and per KEK, however many of its fields (prefixes) use them.
        for key_id in _declared_lost_ids(g, verdicts):
            declared[key_id] = declared.get(key_id, 0) + g.records
        if statuses.get(g.prefixes) != "lost":
            continue
        labels, key_ids = _lost_dependencies(g, verdicts)
        for label in labels:
            by_kek[(g.partition, label)] = by_kek.get((g.partition, label), 0) + g.records
        for key_id in key_ids:
            tally = subjects.setdefault(key_id, _SubjectTally(0, g.first, g.last, []))
            tally.add(g)
    return LostKeys(
        by_kek=tuple((p, label, n) for (p, label), n in sorted(by_kek.items())),
        subjects={k: LostSubjectKey(k, t.records, t.first, t.last, tuple(t.partitions)) for k, t in subjects.items()},
        declared_lost=declared,
    )


def _declared_lost_ids(group: PrefixGroup, verdicts: Mapping[bytes, KeyVerdict]) -> set[bytes]:
    """The subject keys of the group that are declared lost."""
    ids: set[bytes] = set()
    for prefix in group.prefixes:
        verdict = verdicts.get(prefix)
        dependency = None if verdict is None else verdict.dependency
        if verdict is not None and verdict.status is KeyStatus.DECLARED_LOST and dependency is not None:
            ids.add(dependency.subject_key_id or b"")
    ids.discard(b"")
    return ids


def _lost_dependencies(group: PrefixGroup, verdicts: Mapping[bytes, KeyVerdict]) -> tuple[set[str], set[bytes]]:
    """The KEK labels and subject key ids a lost group needs."""
    labels: set[str] = set()
    key_ids: set[bytes] = set()
    for prefix in group.prefixes:
        verdict = verdicts[prefix]
        if verdict.status is not KeyStatus.LOST or verdict.dependency is None:
            continue
        labels.add(verdict.dependency.label)
        if verdict.dependency.subject_key_id is not None:
            key_ids.add(verdict.dependency.subject_key_id)
    return labels, key_ids
