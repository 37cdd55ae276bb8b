"""``kek inventory``: which offset ranges of which partitions depend on which KEK (and key version).

A Spark job reads each topic from its log start to its last stable offset (a snapshot), cuts every
record to its key prefixes in the JVM, and groups consecutive records by the KEK they need (gaps
and islands), so the answer is a handful of ranges per partition rather than a row per record.
Each KEK's state comes from its KMS; with a KMS configured, each (KEK, version) is also checked for
being unwrappable right now (Vault's ``min_decryption_version`` can make old versions unreadable
while the key itself is enabled).

"Is it safe to delete KEK X?" is answered from the same data: yes only when no record of the
scanned topics depends on X, in any version — with the ranges and counts as evidence when not. The
answer covers the scanned topics up to the scan's snapshot, nothing else (see ``caveats``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from strongroom.recovery.checker import AvailabilityChecker
from strongroom.recovery.dependency import KeyDependency, KeyStatus, KeyVerdict
from strongroom.recovery.formats.base import MalformedPrefix
from strongroom.recovery.kafka_io import ClusterView

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

Progress = Callable[[str, int | None, int | None], None]
RANGE_EXAMPLES = 20

CAVEATS = [
    "Only the topics named were scanned, up to each partition's last stable offset at scan time.",
    "Records written after the scan, other topics, mirrors, backups and exports may still need the KEK.",
    "With per-subject keys, a KEK is also needed by the wrapping keys in the keys topic that it wraps.",
]


@dataclass
class InventoryOptions:
    topics: Sequence[str]
    #: Check that each (KEK, version) can be unwrapped now (needs a KMS).
    check_unwrap: bool = True
    question_kek: str | None = None


@dataclass(frozen=True)
class Dependency:
    """A run of records of one partition that need one KEK (at one version): where, how many, which ranges."""

    label: str  # KEK@version, or "(corrupt key reference)"
    records: int
    first: int
    last: int
    runs: int
    ranges: tuple[tuple[int, ...], ...]  # (first, last, records), the first RANGE_EXAMPLES runs

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "records": self.records, "first": self.first, "last": self.last,
                "runs": self.runs, "ranges": [list(r) for r in self.ranges]}  # fmt: skip


@dataclass(frozen=True)
class PartitionInventory:
    partition: int
    log_start: int
    end: int
    dependencies: tuple[Dependency, ...]

    @property
    def records(self) -> int:
        return sum(d.records for d in self.dependencies)

    def to_json(self) -> dict[str, Any]:
        return {"partition": self.partition, "log_start": self.log_start, "end": self.end,
                "dependencies": [d.to_json() for d in self.dependencies], "records": self.records}  # fmt: skip


@dataclass(frozen=True)
class TopicInventory:
    topic: str
    partitions: tuple[PartitionInventory, ...]

    def to_json(self) -> dict[str, Any]:
        return {"topic": self.topic, "partitions": [p.to_json() for p in self.partitions]}


@dataclass(frozen=True)
class KekVersion:
    records: int
    #: Whether the version unwraps now (None: not checked).
    unwrappable: bool | None


@dataclass(frozen=True)
class KekUsage:
    """One KEK: its state in the KMS and the records (per version) and partitions that need it."""

    kek: str
    kek_id: str
    provider: str
    state: str
    versions: dict[str, KekVersion]
    partitions: tuple[str, ...]

    @property
    def records(self) -> int:
        return sum(v.records for v in self.versions.values())

    def to_json(self) -> dict[str, Any]:
        return {
            "kek": self.kek, "kek_id": self.kek_id, "provider": self.provider, "state": self.state,
            "records": self.records,
            "versions": {v: {"records": i.records, "unwrappable": i.unwrappable} for v, i in self.versions.items()},
            "partitions": list(self.partitions),
        }  # fmt: skip


@dataclass(frozen=True)
class DeletionEvidence:
    topic: str
    partition: int
    dependency: Dependency
    version: str | None

    def to_json(self) -> dict[str, Any]:
        d = self.dependency
        return {"topic": self.topic, "partition": self.partition, "version": self.version, "records": d.records,
                "first": d.first, "last": d.last, "ranges": [list(r) for r in d.ranges], "runs": d.runs}  # fmt: skip


@dataclass(frozen=True)
class DeletionAnswer:
    """ "Is it safe to delete KEK X?": yes only when no scanned record needs it, in any version."""

    kek: str
    evidence: tuple[DeletionEvidence, ...]
    state: str | None

    @property
    def records_needing_it(self) -> int:
        return sum(e.dependency.records for e in self.evidence)

    @property
    def safe_to_delete(self) -> bool:
        return self.records_needing_it == 0

    def to_json(self) -> dict[str, Any]:
        return {"kek": self.kek, "safe_to_delete": self.safe_to_delete, "records_needing_it": self.records_needing_it,
                "evidence": [e.to_json() for e in self.evidence], "state": self.state, "caveats": CAVEATS}  # fmt: skip


@dataclass(frozen=True)
class Inventory:
    cluster_id: str
    scanned_at: str
    record_format: dict[str, Any]
    topics: tuple[TopicInventory, ...]
    keks: tuple[KekUsage, ...]
    question: DeletionAnswer | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "cluster_id": self.cluster_id,
            "scanned_at": self.scanned_at,
            "record_format": self.record_format,
            "topics": [t.to_json() for t in self.topics],
            "keks": [k.to_json() for k in self.keks],
            "caveats": CAVEATS,
        }
        if self.question is not None:
            out["question"] = self.question.to_json()
        return out


def run_inventory(
    spark: SparkSession,
    view: ClusterView,
    source_options: Mapping[str, str],
    checker: AvailabilityChecker,
    options: InventoryOptions,
    *,
    has_kms: bool,
    progress: Progress | None = None,
) -> Inventory:
    from strongroom.recovery import spark_jobs

    say = progress or (lambda message, done, total: None)
    cluster_id = view.cluster_id()
    topics_out: list[TopicInventory] = []
    deps_by_label: dict[str, KeyDependency] = {}
    readable_by_label: dict[str, bool | None] = {}
    for topic in options.topics:
        partitions = view.partitions(topic)
        bounds = view.bounds(topic, partitions)
        ranges = {p: (s, e) for p, (s, e) in bounds.items() if e > s}
        say(f"scanning {topic}: {len(partitions)} partition(s), {sum(e - s for s, e in ranges.values())} offsets",
            None, None)  # fmt: skip
        found: dict[int, list[Dependency]] = {p: [] for p in bounds}
        if ranges:
            records = spark_jobs.read_partitions(spark, source_options, topic, ranges)
            groups, full = spark_jobs.prefix_groups(records, checker.format)
            prefixes = {prefix for group in groups for prefix in group.prefixes}
            say(f"{topic}: {len(prefixes)} distinct key prefix(es); ordering records into ranges", None, None)
            verdicts = _label_prefixes(
                checker, sorted(prefixes), options.check_unwrap and has_kms, deps_by_label, readable_by_label
            )
            labels = {g.prefixes: _labels(g.prefixes, verdicts) for g in groups if g.kind == "encrypted"}
            cut = spark_jobs.with_key_prefixes(records, checker.format, full=full)
            rows = spark_jobs.label_runs(cut, spark_jobs.label_frame(spark, labels))
            for (partition, label), runs in rows.items():
                found[partition].append(Dependency(label, runs.records, runs.first, runs.last, runs.runs, runs.ranges))
        topics_out.append(
            TopicInventory(
                topic,
                tuple(
                    PartitionInventory(p, *bounds[p], tuple(sorted(found[p], key=lambda d: (d.first, d.label))))
                    for p in sorted(bounds)
                ),
            )
        )
    states = checker.kek_states(deps_by_label.values()) if has_kms else {}
    keks = _kek_table(topics_out, deps_by_label, readable_by_label, states, has_kms)
    question = None if options.question_kek is None else safe_to_delete(options.question_kek, topics_out, keks)
    return Inventory(
        cluster_id, datetime.now(UTC).isoformat(timespec="seconds"), checker.format.describe(), tuple(topics_out),
        keks, question,
    )  # fmt: skip


def _label_prefixes(
    checker: AvailabilityChecker,
    prefixes: list[bytes],
    check_unwrap: bool,
    deps_by_label: dict[str, KeyDependency],
    readable_by_label: dict[str, bool | None],
) -> dict[bytes, KeyVerdict]:
    """Each prefix's dependency (and, with a KMS, whether it unwraps now)."""
    if check_unwrap:
        verdicts = checker.check_prefixes(prefixes)
    else:
        verdicts = {}
        for prefix in prefixes:
            try:
                dep = checker.format.dependency(prefix)
            except MalformedPrefix as exc:
                verdicts[prefix] = KeyVerdict(KeyStatus.CORRUPT, None, str(exc))
                continue
            verdicts[prefix] = KeyVerdict(KeyStatus.READABLE, dep, "not checked")
    for verdict in verdicts.values():
        dependency = verdict.dependency
        if dependency is None or not dependency.kek_id:
            continue
        label = dependency.label
        deps_by_label.setdefault(label, dependency)
        if not check_unwrap:
            readable_by_label.setdefault(label, None)
        else:
            previous = readable_by_label.get(label, True)
            readable_by_label[label] = bool(previous) and verdict.status is KeyStatus.READABLE
    return verdicts


def _labels(prefixes: tuple[bytes, ...], verdicts: Mapping[bytes, KeyVerdict]) -> list[str]:
    """The dependency labels of one prefix array (one per distinct KEK@version it needs)."""
    out: list[str] = []
    for prefix in prefixes:
        dep = verdicts[prefix].dependency
        label = "(corrupt key reference)" if dep is None else dep.label
        if label not in out:
            out.append(label)
    return out


def _kek_table(
    topics: Sequence[TopicInventory],
    deps: Mapping[str, KeyDependency],
    readable: Mapping[str, bool | None],
    states: Mapping[str, str],
    has_kms: bool,
) -> tuple[KekUsage, ...]:
    per_version: dict[tuple[str, str], int] = {}
    partitions: dict[str, list[str]] = {}
    for topic in topics:
        for partition in topic.partitions:
            for dependency in partition.dependencies:
                dep = deps.get(dependency.label)
                if dep is None:
                    continue
                key = (dep.kek, dep.version or "-")
                per_version[key] = per_version.get(key, 0) + dependency.records
                where = f"{topic.topic}-{partition.partition}"
                if where not in partitions.setdefault(dep.kek, []):
                    partitions[dep.kek].append(where)
    first: dict[str, KeyDependency] = {}
    versions: dict[str, dict[str, KekVersion]] = {}
    for label, dep in deps.items():
        first.setdefault(dep.kek, dep)
        version = dep.version or "-"
        versions.setdefault(dep.kek, {})[version] = KekVersion(
            per_version.get((dep.kek, version), 0), readable.get(label)
        )
    unknown = "unknown: no KMS configured" if not has_kms else "unknown"
    return tuple(
        KekUsage(kek, first[kek].kek_id, first[kek].provider, states.get(kek, unknown), versions[kek],
                 tuple(partitions.get(kek, ())))
        for kek in sorted(first)
    )  # fmt: skip


def safe_to_delete(kek: str, topics: Sequence[TopicInventory], keks: Sequence[KekUsage]) -> DeletionAnswer:
    """Whether deleting ``kek`` would make any scanned record unreadable, with the evidence."""
    match = next((k for k in keks if kek in (k.kek, k.kek_id)), None)
    evidence: list[DeletionEvidence] = []
    if match is not None:
        prefix = match.kek
        for topic in topics:
            for partition in topic.partitions:
                for dep in partition.dependencies:
                    if dep.label == prefix or dep.label.startswith(prefix + "@"):
                        version = dep.label[len(prefix) + 1 :] or None
                        evidence.append(DeletionEvidence(topic.topic, partition.partition, dep, version))
    return DeletionAnswer(kek, tuple(evidence), match.state if match else None)
