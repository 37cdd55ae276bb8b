"""``recover scan``: binary search per partition, Spark verification of every record, and the plan.

1. Read the cluster id, the partitions and their log start / last stable offsets (one snapshot: the
   plan is about the records that existed then).
2. Binary search per partition (:mod:`strongroom.recovery.search`), all partitions in lock-step,
   one fetched record per probe, judged by the cheap key check.
3. Verify with Spark: every record of each partition is cut to its key prefixes in the JVM, every
   distinct prefix is judged once, and per-partition counts come back: lost, stragglers (lost at or
   above the searched L), readable records below the true L (what a deletion would also remove),
   corrupt and malformed records (unreadable, but not because of a KEK — they never move L).
   The true L = 1 + last lost offset replaces the searched one when they differ.
4. Classify each partition's *shape* and pick the remedy; read every consumer group's committed
   offsets and the KEKs' states; write the plan with its checksum.

Nothing is changed on the cluster.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from strongroom.recovery.checker import AvailabilityChecker, RecordVerdict
from strongroom.recovery.dependency import KeyDependency, KeyStatus, KeyVerdict
from strongroom.recovery.kafka_io import ClusterView, GroupInfo
from strongroom.recovery.plan import (
    PLAN_FORMAT,
    PREFIX_SHAPES,
    RecoveryPlan,
    Remedy,
    RemedyKind,
    Shape,
    seal_plan,
)
from strongroom.recovery.search import ProbedRecord, RecordProbe, SearchResult, probe_budget, search_boundaries

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from strongroom.recovery import spark_jobs as spark_jobs_types

Progress = Callable[[str, int | None, int | None], None]

ASSUMPTIONS = [
    "The binary search assumes the loss is a prefix of each partition (one DEK per KEK and time "
    "window; once a record is readable, every later one is). The Spark verification checks every "
    "record afterwards; when it finds lost records above the searched boundary (stragglers: writers "
    "that switched KEKs at different times), L is corrected to 1 + the last lost offset.",
    "Readable means: the key each envelope names can be unwrapped now (KMS unwrap of the EDEK, or the "
    "subject key's chain for per-subject keys). Records are not decrypted; a record whose key is "
    "available but whose ciphertext was tampered with counts as readable here.",
    "Only lost keys move L. Corrupt or malformed records (bad bytes, EDEKs the KMS rejects as "
    "invalid) are unreadable whatever happens to KEKs; they are listed, not used to place L.",
    "The plan covers the records up to each partition's last stable offset at scan time; records "
    "written later are not examined (the writer should have stopped using the lost KEK).",
    "A KMS outage, denied access or a KMS that does not match the records aborts the scan: a "
    "transient failure is never reported as a lost key.",
]


@dataclass
class ScanOptions:
    topic: str
    verify: bool = True
    #: A partition whose readable records below L exceed this share of its lost records is scattered.
    max_collateral_ratio: float = 0.1
    assumed_lost: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)


def _judge(checker: AvailabilityChecker) -> Callable[[ProbedRecord], RecordVerdict]:
    def judge(record: ProbedRecord) -> RecordVerdict:
        return checker.check_record(record.headers, record.value)

    return judge


def run_scan(
    view: ClusterView,
    probe: RecordProbe,
    checker: AvailabilityChecker,
    options: ScanOptions,
    *,
    spark: SparkSession | None = None,
    source_options: Mapping[str, str] | None = None,
    progress: Progress | None = None,
) -> RecoveryPlan:
    """Search, verify and build the (sealed) plan for one topic. Raises ScanAborted on a KMS outage."""
    say = progress or (lambda message, done, total: None)
    topic = options.topic
    cluster_id = view.cluster_id()
    partitions = view.partitions(topic)
    bounds = view.bounds(topic, partitions)
    say(
        f"searching {topic}: {len(partitions)} partition(s), {sum(e - s for s, e in bounds.values())} offsets",
        None,
        None,
    )

    started = time.monotonic()

    def on_round(round_no: int, active: int, total: int) -> None:
        say(f"binary search round {round_no}: {active} partition(s) still searching", total - active, total)

    results = search_boundaries(bounds, probe, _judge(checker), on_round)
    search_seconds = time.monotonic() - started
    fetches = sum(r.probes for r in results.values())
    say(
        f"binary search done in {search_seconds:.2f}s: {fetches} fetch(es) over {len(results)} partition(s)", None, None
    )

    verification: dict[int, dict[str, Any]] = {}
    lost_keys: dict[str, Any] = _no_lost_keys()
    verify_seconds = 0.0
    if options.verify:
        if spark is None or source_options is None:
            raise ValueError("verification needs a SparkSession and Kafka source options")
        started = time.monotonic()
        verification, lost_keys = verify_partitions(spark, source_options, topic, bounds, results, checker, say)
        verify_seconds = time.monotonic() - started

    groups = view.groups_on_topic(topic, partitions)
    plan_partitions = [_partition_entry(results[p], verification.get(p), groups, options) for p in partitions]
    keks = _kek_entries(checker, lost_keys)
    plan: dict[str, Any] = {
        "format": PLAN_FORMAT,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "cluster_id": cluster_id,
        "bootstrap_servers": view.client_config.bootstrap_servers,
        "topic": topic,
        "record_format": checker.format.describe(),
        "assumed_lost": sorted(options.assumed_lost),
        "verified": options.verify,
        "assumptions": ASSUMPTIONS,
        "keks": keks,
        "partitions": plan_partitions,
        "lost_subject_keys": {
            "count": lost_keys["subject_keys"],
            "examples": [_with_subject(e, checker) for e in lost_keys["subject_examples"]],
        },
        "keys_topic": getattr(checker.subject_keys, "topic", None),
        "lost_wrapping_keys": _lost_wrapping_keys(lost_keys, checker),
        "declared_lost": _declared_lost_summary(lost_keys, checker),
        "summary": _summary(plan_partitions),
        "timings": {"search_seconds": round(search_seconds, 3), "verify_seconds": round(verify_seconds, 3)},
        "kms_checks": checker.stats.to_dict(),
    }
    plan["remedy"] = remedy(plan).to_json()
    return RecoveryPlan.from_document(seal_plan(plan))


def verify_partitions(
    spark: SparkSession,
    source_options: Mapping[str, str],
    topic: str,
    bounds: Mapping[int, tuple[int, int]],
    results: Mapping[int, SearchResult],
    checker: AvailabilityChecker,
    say: Progress,
) -> tuple[dict[int, dict[str, Any]], dict[str, Any]]:
    """Every record checked: pass 1 groups all records by key prefixes; pass 2 orders the region below L."""
    from strongroom.recovery import spark_jobs

    ranges = {p: (s, e) for p, (s, e) in bounds.items() if e > s}
    if not ranges:
        return {}, _no_lost_keys()
    say(f"verifying every record of {len(ranges)} partition(s) with Spark (pass 1: key prefixes)", None, None)
    records = spark_jobs.read_partitions(spark, source_options, topic, ranges)
    groups, full = spark_jobs.prefix_groups(records, checker.format)
    prefixes = {prefix for group in groups for prefix in group.prefixes}
    say(f"checking {len(prefixes)} distinct key prefix(es) against the KMS", None, None)
    verdicts = checker.check_prefixes(prefixes, lambda done, total: say("key checks", done, total))
    statuses = {g.prefixes: _group_status(g, verdicts) for g in groups if g.kind == "encrypted"}
    summary = _summarise_groups(groups, statuses, verdicts)
    lost_keys = _lost_keys(groups, statuses, verdicts)
    with_loss = {p: s for p, s in summary.items() if s["lost"]}
    if with_loss:
        say(f"verifying the order of records below L in {len(with_loss)} partition(s) (pass 2)", None, None)
        order_bounds = {p: (results[p].boundary, int(s["last_lost"]) + 1) for p, s in with_loss.items()}
        region = {p: (bounds[p][0], b) for p, (_, b) in order_bounds.items()}
        cut2 = spark_jobs.with_key_prefixes(
            spark_jobs.read_partitions(spark, source_options, topic, region), checker.format, full=full
        )
        classified = spark_jobs.classify(cut2, spark_jobs.status_frame(spark, statuses))
        runs = spark_jobs.status_runs(classified, order_bounds)
        for partition, by_status in runs.items():
            lost = by_status.get("lost", {})
            entry = summary[partition]
            entry["stragglers"] = lost.get("above_searched", 0)
            entry["straggler_offsets"] = lost.get("straggler_offsets", [])
            entry["readable_below"] = by_status.get("readable", {}).get("records", 0)
            entry["lost_ranges"] = {"runs": lost.get("runs", 0), "ranges": lost.get("ranges", [])}
    return summary, lost_keys


_RANK = {"readable": 0, "erased": 0, "declared-lost": 0, "corrupt": 1, "lost": 2}


def _group_status(group: spark_jobs_types.PrefixGroup, verdicts: Mapping[bytes, KeyVerdict]) -> str:
    worst = max((_RANK[verdicts[p].status.value] for p in group.prefixes), default=0)
    return {0: "readable", 1: "corrupt", 2: "lost"}[worst]


def _summarise_groups(
    groups: list[spark_jobs_types.PrefixGroup],
    statuses: Mapping[tuple[bytes, ...], str],
    verdicts: Mapping[bytes, KeyVerdict],
) -> dict[int, dict[str, Any]]:
    out: dict[int, dict[str, Any]] = {}
    for g in groups:
        entry = out.setdefault(
            g.partition,
            {"records": 0, "readable": 0, "lost": 0, "corrupt": 0, "malformed": 0, "plain": 0, "tombstones": 0,
             "first_lost": None, "last_lost": None, "lost_subject_key_records": 0, "unreadable_other": [],
             "stragglers": 0, "straggler_offsets": [], "readable_below": 0, "lost_ranges": {"runs": 0, "ranges": []}},
        )  # fmt: skip
        entry["records"] += g.records
        status = "malformed" if g.kind == "malformed" else statuses.get(g.prefixes, "readable")
        entry[status] += g.records
        if g.kind == "plain":
            entry["plain"] += g.records
        elif g.kind == "tombstone":
            entry["tombstones"] += g.records
        if status == "lost":
            entry["first_lost"] = g.first if entry["first_lost"] is None else min(entry["first_lost"], g.first)
            entry["last_lost"] = g.last if entry["last_lost"] is None else max(entry["last_lost"], g.last)
            if any(_needs_subject_key(verdicts[p]) for p in g.prefixes):
                entry["lost_subject_key_records"] += g.records
        elif status in ("corrupt", "malformed"):
            entry["unreadable_other"].append([g.first, g.last, g.records])
    for entry in out.values():
        entry["unreadable_other"] = sorted(entry["unreadable_other"])[:20]
    return out


def _needs_subject_key(verdict: KeyVerdict) -> bool:
    return verdict.dependency is not None and verdict.dependency.subject_key_id is not None


def _no_lost_keys() -> dict[str, Any]:
    return {"by_kek": [], "subject_keys": 0, "subject_examples": [], "subject_records": {}, "declared_lost": {}}


def _lost_keys(
    groups: list[spark_jobs_types.PrefixGroup],
    statuses: Mapping[tuple[bytes, ...], str],
    verdicts: Mapping[bytes, KeyVerdict],
) -> dict[str, Any]:
    """Lost records per (partition, KEK) and per subject key (records, first/last offset, partitions);
    records under keys already declared lost, per subject key."""
    by_kek: dict[tuple[int, str], int] = {}
    subjects: dict[str, dict[str, Any]] = {}
    declared: dict[bytes, int] = {}
    for g in groups:
        # A record counts once per key and per KEK, however many of its fields (prefixes) use them.
        declared_ids: set[bytes] = set()
        for prefix in g.prefixes:
            verdict = verdicts.get(prefix)
            dependency = None if verdict is None else verdict.dependency
            if verdict is not None and verdict.status is KeyStatus.DECLARED_LOST and dependency is not None:
                declared_ids.add(dependency.subject_key_id or b"")
        declared_ids.discard(b"")
        for key_id in declared_ids:
            declared[key_id] = declared.get(key_id, 0) + g.records
        if statuses.get(g.prefixes) != "lost":
            continue
        labels: set[str] = set()
        key_ids: set[bytes] = set()
        for prefix in g.prefixes:
            verdict = verdicts[prefix]
            if verdict.status is not KeyStatus.LOST or verdict.dependency is None:
                continue
            labels.add(verdict.dependency.label)
            if verdict.dependency.subject_key_id is not None:
                key_ids.add(verdict.dependency.subject_key_id)
        for label in labels:
            by_kek[(g.partition, label)] = by_kek.get((g.partition, label), 0) + g.records
        for key_id in key_ids:
            entry = subjects.setdefault(
                key_id.hex(), {"subject_key": key_id.hex(), "records": 0, "first": g.first, "last": g.last,
                               "partitions": []},
            )  # fmt: skip
            entry["records"] += g.records
            entry["first"] = min(entry["first"], g.first)
            entry["last"] = max(entry["last"], g.last)
            if g.partition not in entry["partitions"]:
                entry["partitions"].append(g.partition)
    examples = sorted(subjects.values(), key=lambda e: (-e["records"], e["subject_key"]))[:50]
    return {
        "by_kek": [(p, label, n) for (p, label), n in sorted(by_kek.items())],
        "subject_keys": len(subjects),
        "subject_examples": examples,
        "subject_records": {bytes.fromhex(k): (v["records"], v["partitions"]) for k, v in subjects.items()},
        "declared_lost": declared,
    }


def _lost_wrapping_keys(lost_keys: Mapping[str, Any], checker: AvailabilityChecker) -> list[dict[str, Any]]:
    """Every wrapping key with lost subject keys in the scanned records — complete, unlike the examples.

    The unit ``recover mark-lost`` acts on: a lost KEK takes every subject key under its wrapping keys.
    Few entries (a wrapping key wraps up to a million subject keys).
    """
    by_wk: dict[str, dict[str, Any]] = {}
    kek_of: dict[bytes, str | None] = {}
    for verdict in checker.seen().values():
        dep = verdict.dependency
        if verdict.status is KeyStatus.LOST and dep is not None and dep.subject_key_id is not None:
            kek_of[dep.subject_key_id] = dep.kek if dep.kek_id else None
    for key_id, (records, partitions) in lost_keys.get("subject_records", {}).items():
        known = checker.subjects.get(key_id)
        if known is None:
            continue
        entry = by_wk.setdefault(
            known[1], {"wrapping_key": known[1], "kek": kek_of.get(key_id), "subject_keys": 0, "records": 0,
                       "partitions": []},
        )  # fmt: skip
        entry["subject_keys"] += 1
        entry["records"] += records
        entry["partitions"] = sorted(set(entry["partitions"]) | set(partitions))
    return sorted(by_wk.values(), key=lambda e: e["wrapping_key"])


def _declared_lost_summary(lost_keys: Mapping[str, Any], checker: AvailabilityChecker) -> dict[str, Any]:
    """Subject keys already declared lost (their records are skipped on purpose), per wrapping key."""
    by_wk: dict[str, dict[str, Any]] = {}
    for key_id, records in lost_keys.get("declared_lost", {}).items():
        known = checker.subjects.get(key_id)
        if known is None:
            continue
        kek, plan_id = checker.declared_lost.get(known[1], ("", ""))
        entry = by_wk.setdefault(
            known[1], {"wrapping_key": known[1], "kek": kek, "plan_id": plan_id, "subject_keys": 0, "records": 0}
        )
        entry["subject_keys"] += 1
        entry["records"] += records
    wrapping_keys = sorted(by_wk.values(), key=lambda e: e["wrapping_key"])
    return {
        "subject_keys": sum(e["subject_keys"] for e in wrapping_keys),
        "records": sum(e["records"] for e in wrapping_keys),
        "wrapping_keys": wrapping_keys,
    }


def _with_subject(example: dict[str, Any], checker: AvailabilityChecker) -> dict[str, Any]:
    """A lost subject key with its subject's fingerprint and wrapping key (never the subject itself)."""
    known = checker.subjects.get(bytes.fromhex(str(example["subject_key"])))
    if known is not None:
        example = {**example, "subject_fingerprint": known[0], "wrapping_key": known[1]}
    return example


def _partition_entry(
    result: SearchResult, verified: dict[str, Any] | None, groups: list[GroupInfo], options: ScanOptions
) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "partition": result.partition,
        "log_start": result.log_start,
        "end": result.end,
        "searched_boundary": result.boundary,
        "fetches": result.probes,
        "fetch_budget": probe_budget(result.span),
        "probes": [step.to_list() for step in result.steps],
    }
    if result.last_unreadable is not None:
        offset, keks, reason = result.last_unreadable
        entry["example_lost_record"] = {"offset": offset, "keks": keks, "reason": reason}
    if result.span == 0:
        entry.update(boundary=result.log_start, shape=Shape.EMPTY, records=0, lost=0)
    elif verified is None and not options.verify:
        entry.update(boundary=result.boundary, shape=Shape.UNVERIFIED, records=None, lost=None)
    elif verified is None:  # verified, but Spark read no record (only markers / aborted transactions)
        entry.update(boundary=result.log_start, shape=Shape.INTACT, records=0, lost=0)
    else:
        lost = int(verified["lost"])
        last_lost = verified["last_lost"]
        boundary = result.log_start if last_lost is None else int(last_lost) + 1
        readable_below = int(verified["readable_below"])
        entry.update(
            boundary=boundary,
            records=int(verified["records"]),
            readable=int(verified["readable"]),
            lost=lost,
            lost_subject_key_records=int(verified["lost_subject_key_records"]),
            first_lost=verified["first_lost"],
            last_lost=last_lost,
            stragglers=int(verified["stragglers"]),
            straggler_offsets=verified["straggler_offsets"],
            readable_below_boundary=readable_below,
            corrupt=int(verified["corrupt"]),
            malformed=int(verified["malformed"]),
            unreadable_other=verified["unreadable_other"],
            plain=int(verified["plain"]),
            tombstones=int(verified["tombstones"]),
            lost_ranges=verified["lost_ranges"],
        )
        per_subject = int(verified["lost_subject_key_records"]) > 0
        entry["shape"] = _shape(lost, readable_below, boundary, result.end, options.max_collateral_ratio, per_subject)
    entry["groups"] = _group_entries(result.partition, entry["boundary"], groups)
    return entry


def _shape(lost: int, readable_below: int, boundary: int, end: int, max_ratio: float, per_subject: bool) -> str:
    """Prefix or scattered: per-subject keys are scattered by design; otherwise the collateral decides."""
    if lost == 0:
        return Shape.INTACT
    if per_subject or readable_below > max_ratio * lost:
        return Shape.SCATTERED
    return Shape.NO_READABLE_SUFFIX if boundary >= end else Shape.PREFIX


def _group_entries(partition: int, boundary: int, groups: list[GroupInfo]) -> list[dict[str, Any]]:
    entries = []
    for group in groups:
        if partition not in group.offsets:
            continue
        committed = group.offsets[partition]
        entries.append(
            {
                "group": group.group,
                "state": group.state,
                "members": len(group.members),
                "committed": committed,
                # No committed offset: the group's auto.offset.reset decides; earliest would hit the loss.
                "below_boundary": committed is None or committed < boundary,
            }
        )
    return entries


def _kek_entries(checker: AvailabilityChecker, lost_keys: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every KEK seen (by the search or the verification) with its state and lost-record count."""
    deps: dict[str, KeyDependency] = {}
    lost_records: dict[str, int] = {}
    lost_labels: set[str] = set()
    for verdict in checker.seen().values():
        dep = verdict.dependency
        if dep is None or not dep.kek_id:
            continue
        deps.setdefault(dep.kek, dep)
        if verdict.status is KeyStatus.LOST:
            lost_labels.add(dep.kek)
    for _partition, label, count in lost_keys.get("by_kek", []):
        kek = str(label).split("@", 1)[0]
        lost_records[kek] = lost_records.get(kek, 0) + int(count)
    states = checker.kek_states(deps.values())
    entries = []
    for kek in sorted(deps):
        entries.append(
            {
                "kek": kek,
                "state": states.get(kek, "unknown"),
                "lost": kek in lost_labels,
                "lost_records": lost_records.get(kek, 0),
            }
        )
    return entries


def _summary(partitions: list[dict[str, Any]]) -> dict[str, Any]:
    shapes: dict[str, int] = {}
    for entry in partitions:
        shapes[entry["shape"]] = shapes.get(entry["shape"], 0) + 1
    lost = [e.get("lost") for e in partitions]
    return {
        "partitions": len(partitions),
        "shapes": shapes,
        "lost_records": sum(x for x in lost if x) if all(x is not None for x in lost) else None,
        "readable_below_boundaries": sum(e.get("readable_below_boundary", 0) for e in partitions),
        "stragglers": sum(e.get("stragglers", 0) for e in partitions),
        "fetches": sum(e["fetches"] for e in partitions),
    }


def remedy(plan: Mapping[str, Any]) -> Remedy:
    """The remedy that fits what was found, in the order an operator should try them."""
    partitions = plan["partitions"]
    shapes = {e["shape"] for e in partitions}
    restorable = [k["kek"] for k in plan["keks"] if k["lost"] and k["state"] in ("pending_deletion", "disabled")]
    steps: list[str] = []
    if restorable:
        steps.append(
            f"KEK(s) {', '.join(restorable)} can still be restored (pending deletion or disabled): cancel the "
            "deletion / enable them in the KMS first — strongroom readers resume on their own within their "
            "negative-cache TTL, nothing needs deleting."
        )
    declared = plan.get("declared_lost", {})
    if declared.get("subject_keys"):
        wks = declared["wrapping_keys"]
        steps.append(
            f"{declared['subject_keys']} subject key(s) under {len(wks)} wrapping key(s) are already declared lost "
            f"(plan(s) {', '.join(sorted({w['plan_id'] for w in wks}))}): readers skip their {declared['records']} "
            "record(s) on purpose. If their KEK is restored, undo it with `strongroom recover unmark-lost --wk "
            f"{' --wk '.join(w['wrapping_key'] for w in wks[:3])}{' ...' if len(wks) > 3 else ''} --execute`."
        )
    if not plan["verified"]:
        steps.append("This plan is unverified (--no-verify); run the scan with verification before applying it.")
        return Remedy(RemedyKind.UNVERIFIED, tuple(steps))
    if shapes <= {Shape.EMPTY, Shape.INTACT}:
        steps.append("No record needs a lost key: nothing to do.")
        return Remedy(RemedyKind.NONE, tuple(steps))
    if Shape.SCATTERED in shapes:
        scattered = [e["partition"] for e in partitions if e["shape"] == Shape.SCATTERED]
        if plan.get("lost_subject_keys", {}).get("count"):
            count = plan["lost_subject_keys"]["count"]
            wks = len(plan.get("lost_wrapping_keys", []))
            steps.append(
                f"Loss is scattered across partitions {scattered}: {count} per-subject key(s) under {wks} wrapping "
                "key(s) hang under a lost KEK (lost_wrapping_keys; examples in lost_subject_keys). Do not delete a "
                "prefix: it would destroy readable records of other subjects. If the KEK can be restored, even for "
                "a moment, restore it and run `strongroom keys rewrap --to-kek <new KEK>` so no wrapping key depends "
                "on it any more. Otherwise declare those wrapping keys lost: `strongroom recover mark-lost --plan "
                "PLAN.json --execute` writes a lost marker per wrapping key to the keys topic, and every reader then "
                "skips the affected records on purpose (JSON fields become null, whole values are dropped or marked, "
                "as for erased subjects) instead of failing with KekNotFound; new records of those subjects get new "
                "keys. It is undone with `strongroom recover unmark-lost --wk ID --execute` if the KEK comes back."
            )
        else:
            steps.append(
                f"Lost records are interleaved with readable ones in partitions {scattered}: deleting up to L would "
                "also delete the readable records listed as readable_below_boundary. Restore the KEK if at all "
                "possible; otherwise let consumers skip the lost records under their failure policy (skip and "
                "report) rather than deleting a prefix."
            )
    if shapes & PREFIX_SHAPES:
        file_hint = "--plan PLAN.json"
        steps.append(
            "Prefix loss: either move the consumer groups past L "
            f"(`strongroom recover apply {file_hint} --reset-offsets --group G --execute`, every group listed "
            "as below_boundary, each stopped first) or delete the records up to L for everyone "
            f"(`strongroom recover apply {file_hint} --delete-records --execute`). Both skip the readable "
            "records below L listed per partition. Run without --execute first (dry run)."
        )
    kind = RemedyKind.SCATTERED if Shape.SCATTERED in shapes and not shapes & PREFIX_SHAPES else RemedyKind.PREFIX
    if Shape.SCATTERED in shapes and shapes & PREFIX_SHAPES:
        kind = RemedyKind.MIXED
    return Remedy(kind, tuple(steps))
