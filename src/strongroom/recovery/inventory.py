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


def run_inventory(
    spark: SparkSession,
    view: ClusterView,
    source_options: Mapping[str, str],
    checker: AvailabilityChecker,
    options: InventoryOptions,
    *,
    has_kms: bool,
    progress: Progress | None = None,
) -> dict[str, Any]:
    from strongroom.recovery import spark_jobs

    say = progress or (lambda message, done, total: None)
    cluster_id = view.cluster_id()
    topics_out: list[dict[str, Any]] = []
    deps_by_label: dict[str, KeyDependency] = {}
    readable_by_label: dict[str, bool | None] = {}
    for topic in options.topics:
        partitions = view.partitions(topic)
        bounds = view.bounds(topic, partitions)
        ranges = {p: (s, e) for p, (s, e) in bounds.items() if e > s}
        say(f"scanning {topic}: {len(partitions)} partition(s), {sum(e - s for s, e in ranges.values())} offsets",
            None, None)  # fmt: skip
        per_partition: dict[int, dict[str, Any]] = {
            p: {"partition": p, "log_start": s, "end": e, "dependencies": []} for p, (s, e) in bounds.items()
        }
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
            for (partition, label), info in rows.items():
                per_partition[partition]["dependencies"].append({"label": label, **info})
        for entry in per_partition.values():
            entry["dependencies"].sort(key=lambda d: (d["first"], d["label"]))
            entry["records"] = sum(d["records"] for d in entry["dependencies"])
        topics_out.append({"topic": topic, "partitions": [per_partition[p] for p in sorted(per_partition)]})
    states = checker.kek_states(deps_by_label.values()) if has_kms else {}
    keks = _kek_table(topics_out, deps_by_label, readable_by_label, states, has_kms)
    report: dict[str, Any] = {
        "cluster_id": cluster_id,
        "scanned_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "record_format": checker.format.describe(),
        "topics": topics_out,
        "keks": keks,
        "caveats": CAVEATS,
    }
    if options.question_kek is not None:
        report["question"] = safe_to_delete(options.question_kek, topics_out, keks)
    return report


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
    topics: list[dict[str, Any]],
    deps: Mapping[str, KeyDependency],
    readable: Mapping[str, bool | None],
    states: Mapping[str, str],
    has_kms: bool,
) -> list[dict[str, Any]]:
    table: dict[str, dict[str, Any]] = {}
    for label, dep in deps.items():
        entry = table.setdefault(
            dep.kek,
            {
                "kek": dep.kek,
                "kek_id": dep.kek_id,
                "provider": dep.provider,
                "state": states.get(dep.kek, "unknown: no KMS configured" if not has_kms else "unknown"),
                "records": 0,
                "versions": {},
                "partitions": [],
            },
        )
        entry["versions"][dep.version or "-"] = {"records": 0, "unwrappable": readable.get(label)}
    for topic in topics:
        for partition in topic["partitions"]:
            for dependency in partition["dependencies"]:
                found = deps.get(dependency["label"])
                if found is None:
                    continue
                entry = table[found.kek]
                entry["records"] += dependency["records"]
                entry["versions"][found.version or "-"]["records"] += dependency["records"]
                where = f"{topic['topic']}-{partition['partition']}"
                if where not in entry["partitions"]:
                    entry["partitions"].append(where)
    return [table[k] for k in sorted(table)]


def safe_to_delete(kek: str, topics: list[dict[str, Any]], keks: list[dict[str, Any]]) -> dict[str, Any]:
    """Whether deleting ``kek`` would make any scanned record unreadable, with the evidence."""
    match = next((k for k in keks if kek in (k["kek"], k["kek_id"])), None)
    evidence: list[dict[str, Any]] = []
    if match is not None:
        prefix = match["kek"]
        for topic in topics:
            for partition in topic["partitions"]:
                for dep in partition["dependencies"]:
                    if dep["label"] == prefix or dep["label"].startswith(prefix + "@"):
                        evidence.append(
                            {
                                "topic": topic["topic"],
                                "partition": partition["partition"],
                                "version": dep["label"][len(prefix) + 1 :] or None,
                                "records": dep["records"],
                                "first": dep["first"],
                                "last": dep["last"],
                                "ranges": dep["ranges"],
                                "runs": dep["runs"],
                            }
                        )
    records = sum(e["records"] for e in evidence)
    return {
        "kek": kek,
        "safe_to_delete": records == 0,
        "records_needing_it": records,
        "evidence": evidence,
        "state": match["state"] if match else None,
        "caveats": CAVEATS,
    }
