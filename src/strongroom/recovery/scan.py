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
from strongroom.recovery.dependency import KeyDependency, KeyStatus
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
from strongroom.recovery.verification import (
    LostKeys,
    LostSubjectKey,
    PartitionVerification,
    group_status,
    lost_keys,
    summarise_groups,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


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
    searched = _search(view, probe, checker, options.topic, say)
    verified = _Verified(partitions={}, lost_keys=LostKeys(), seconds=0.0)
    if options.verify:
        if spark is None or source_options is None:
            raise ValueError("verification needs a SparkSession and Kafka source options")
        started = time.monotonic()
        partitions, lost = verify_partitions(
            spark, source_options, options.topic, searched.bounds, searched.results, checker, say
        )
        verified = _Verified(partitions, lost, time.monotonic() - started)
    groups = view.groups_on_topic(options.topic, searched.partitions)
    plan = _plan_document(view, checker, options, searched, verified, groups)
    plan["remedy"] = remedy(plan).to_json()
    return RecoveryPlan.from_document(seal_plan(plan))


@dataclass(frozen=True)
class _Searched:
    """The snapshot the plan is about, and the binary search's boundaries in it."""

    cluster_id: str
    partitions: list[int]
    bounds: dict[int, tuple[int, int]]
    results: dict[int, SearchResult]
    seconds: float


@dataclass(frozen=True)
class _Verified:
    """What the Spark verification found (nothing, with ``--no-verify``)."""

    partitions: dict[int, PartitionVerification]
    lost_keys: LostKeys
    seconds: float


def _search(
    view: ClusterView, probe: RecordProbe, checker: AvailabilityChecker, topic: str, say: Progress
) -> _Searched:
    """Read the partitions and their offsets (one snapshot), then binary-search every partition in lock-step."""
    cluster_id = view.cluster_id()
    partitions = view.partitions(topic)
    bounds = view.bounds(topic, partitions)
    offsets = sum(e - s for s, e in bounds.values())
    say(f"searching {topic}: {len(partitions)} partition(s), {offsets} offsets", None, None)
    started = time.monotonic()

    def on_round(round_no: int, active: int, total: int) -> None:
        say(f"binary search round {round_no}: {active} partition(s) still searching", total - active, total)

    results = search_boundaries(bounds, probe, _judge(checker), on_round)
    seconds = time.monotonic() - started
    fetches = sum(r.probes for r in results.values())
    say(f"binary search done in {seconds:.2f}s: {fetches} fetch(es) over {len(results)} partition(s)", None, None)
    return _Searched(cluster_id, partitions, bounds, results, seconds)


def _plan_document(
    view: ClusterView,
    checker: AvailabilityChecker,
    options: ScanOptions,
    searched: _Searched,
    verified: _Verified,
    groups: list[GroupInfo],
) -> dict[str, Any]:
    """The plan's JSON document, without its remedy and seal: the only place that writes its keys."""
    lost = verified.lost_keys
    plan_partitions = [
        _partition_entry(searched.results[p], verified.partitions.get(p), groups, options) for p in searched.partitions
    ]
    return {
        "format": PLAN_FORMAT,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "cluster_id": searched.cluster_id,
        "bootstrap_servers": view.client_config.bootstrap_servers,
        "topic": options.topic,
        "record_format": checker.format.describe(),
        "assumed_lost": sorted(options.assumed_lost),
        "verified": options.verify,
        "assumptions": ASSUMPTIONS,
        "keks": _kek_entries(checker, lost),
        "partitions": plan_partitions,
        "lost_subject_keys": {
            "count": lost.subject_keys,
            "examples": [_with_subject(key, checker) for key in lost.subject_examples()],
        },
        "keys_topic": getattr(checker.subject_keys, "topic", None),
        "lost_wrapping_keys": _lost_wrapping_keys(lost, checker),
        "declared_lost": _declared_lost_summary(lost, checker),
        "summary": _summary(plan_partitions),
        "timings": {"search_seconds": round(searched.seconds, 3), "verify_seconds": round(verified.seconds, 3)},
        "kms_checks": checker.stats.to_dict(),
    }


def verify_partitions(
    spark: SparkSession,
    source_options: Mapping[str, str],
    topic: str,
    bounds: Mapping[int, tuple[int, int]],
    results: Mapping[int, SearchResult],
    checker: AvailabilityChecker,
    say: Progress,
) -> tuple[dict[int, PartitionVerification], LostKeys]:
    """Every record checked: pass 1 groups all records by key prefixes; pass 2 orders the region below L."""
    from strongroom.recovery import spark_jobs

    ranges = {p: (s, e) for p, (s, e) in bounds.items() if e > s}
    if not ranges:
        return {}, LostKeys()
    say(f"verifying every record of {len(ranges)} partition(s) with Spark (pass 1: key prefixes)", None, None)
    records = spark_jobs.read_partitions(spark, source_options, topic, ranges)
    groups, full = spark_jobs.prefix_groups(records, checker.format)
    prefixes = {prefix for group in groups for prefix in group.prefixes}
    say(f"checking {len(prefixes)} distinct key prefix(es) against the KMS", None, None)
    verdicts = checker.check_prefixes(prefixes, lambda done, total: say("key checks", done, total))
    statuses = {g.prefixes: group_status(g, verdicts) for g in groups if g.kind == "encrypted"}
    summary = summarise_groups(groups, statuses, verdicts)
    with_loss = {p: v for p, v in summary.items() if v.lost}
    if with_loss:
        say(f"verifying the order of records below L in {len(with_loss)} partition(s) (pass 2)", None, None)
        order_bounds = {p: (results[p].boundary, int(v.last_lost or 0) + 1) for p, v in with_loss.items()}
        region = {p: (bounds[p][0], b) for p, (_, b) in order_bounds.items()}
        cut2 = spark_jobs.with_key_prefixes(
            spark_jobs.read_partitions(spark, source_options, topic, region), checker.format, full=full
        )
        classified = spark_jobs.classify(cut2, spark_jobs.status_frame(spark, statuses))
        for partition, by_status in spark_jobs.status_runs(classified, order_bounds).items():
            summary[partition] = summary[partition].with_runs(by_status)
    return summary, lost_keys(groups, statuses, verdicts)


def _lost_wrapping_keys(lost: LostKeys, checker: AvailabilityChecker) -> list[dict[str, Any]]:
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
    for key_id, subject_key in lost.subjects.items():
        known = checker.subjects.get(key_id)
        if known is None:
            continue
        entry = by_wk.setdefault(
            known[1], {"wrapping_key": known[1], "kek": kek_of.get(key_id), "subject_keys": 0, "records": 0,
                       "partitions": []},
        )  # fmt: skip
        entry["subject_keys"] += 1
        entry["records"] += subject_key.records
        entry["partitions"] = sorted(set(entry["partitions"]) | set(subject_key.partitions))
    return sorted(by_wk.values(), key=lambda e: e["wrapping_key"])


def _declared_lost_summary(lost: LostKeys, checker: AvailabilityChecker) -> dict[str, Any]:
    """Subject keys already declared lost (their records are skipped on purpose), per wrapping key."""
    by_wk: dict[str, dict[str, Any]] = {}
    for key_id, records in lost.declared_lost.items():
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


def _with_subject(key: LostSubjectKey, checker: AvailabilityChecker) -> dict[str, Any]:
    """A lost subject key's plan entry, with its subject's fingerprint and wrapping key (never the subject)."""
    example: dict[str, Any] = {
        "subject_key": key.key_id.hex(),
        "records": key.records,
        "first": key.first,
        "last": key.last,
        "partitions": list(key.partitions),
    }
    known = checker.subjects.get(key.key_id)
    if known is not None:
        example = {**example, "subject_fingerprint": known[0], "wrapping_key": known[1]}
    return example


def _partition_entry(
    result: SearchResult, verified: PartitionVerification | None, groups: list[GroupInfo], options: ScanOptions
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
        entry.update(_verified_entry(result, verified, options))
    entry["groups"] = _group_entries(result.partition, entry["boundary"], groups)
    return entry


def _verified_entry(result: SearchResult, verified: PartitionVerification, options: ScanOptions) -> dict[str, Any]:
    """A verified partition's plan fields: the true boundary, its counts and its shape."""
    boundary = result.log_start if verified.last_lost is None else verified.last_lost + 1
    per_subject = verified.lost_subject_key_records > 0
    shape = _shape(
        verified.lost, verified.readable_below, boundary, result.end, options.max_collateral_ratio, per_subject
    )
    return {
        "boundary": boundary,
        "records": verified.records,
        "readable": verified.readable,
        "lost": verified.lost,
        "lost_subject_key_records": verified.lost_subject_key_records,
        "first_lost": verified.first_lost,
        "last_lost": verified.last_lost,
        "stragglers": verified.stragglers,
        "straggler_offsets": list(verified.straggler_offsets),
        "readable_below_boundary": verified.readable_below,
        "corrupt": verified.corrupt,
        "malformed": verified.malformed,
        "unreadable_other": [list(run) for run in verified.unreadable_other],
        "plain": verified.plain,
        "tombstones": verified.tombstones,
        "lost_ranges": {"runs": verified.lost_runs, "ranges": [list(run) for run in verified.lost_ranges]},
        "shape": shape,
    }


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


def _kek_entries(checker: AvailabilityChecker, lost: LostKeys) -> list[dict[str, Any]]:
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
    for _partition, label, count in lost.by_kek:
        kek = label.split("@", 1)[0]
        lost_records[kek] = lost_records.get(kek, 0) + count
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
    shapes = {e["shape"] for e in plan["partitions"]}
    steps = [*_restore_steps(plan), *_declared_lost_steps(plan)]
    if not plan["verified"]:
        steps.append("This plan is unverified (--no-verify); run the scan with verification before applying it.")
        return Remedy(RemedyKind.UNVERIFIED, tuple(steps))
    if shapes <= {Shape.EMPTY, Shape.INTACT}:
        steps.append("No record needs a lost key: nothing to do.")
        return Remedy(RemedyKind.NONE, tuple(steps))
    if Shape.SCATTERED in shapes:
        steps.append(_scattered_step(plan))
    if shapes & PREFIX_SHAPES:
        steps.append(_PREFIX_STEP)
    kind = RemedyKind.SCATTERED if Shape.SCATTERED in shapes and not shapes & PREFIX_SHAPES else RemedyKind.PREFIX
    if Shape.SCATTERED in shapes and shapes & PREFIX_SHAPES:
        kind = RemedyKind.MIXED
    return Remedy(kind, tuple(steps))


def _restore_steps(plan: Mapping[str, Any]) -> list[str]:
    """Lost KEKs that can still be restored come first: nothing needs deleting then."""
    restorable = [k["kek"] for k in plan["keks"] if k["lost"] and k["state"] in ("pending_deletion", "disabled")]
    if not restorable:
        return []
    return [
        f"KEK(s) {', '.join(restorable)} can still be restored (pending deletion or disabled): cancel the "
        "deletion / enable them in the KMS first — strongroom readers resume on their own within their "
        "negative-cache TTL, nothing needs deleting."
    ]


def _declared_lost_steps(plan: Mapping[str, Any]) -> list[str]:
    """Subject keys already declared lost, and how to undo that if their KEK comes back."""
    declared = plan.get("declared_lost", {})
    if not declared.get("subject_keys"):
        return []
    wks = declared["wrapping_keys"]
    return [
        f"{declared['subject_keys']} subject key(s) under {len(wks)} wrapping key(s) are already declared lost "
        f"(plan(s) {', '.join(sorted({w['plan_id'] for w in wks}))}): readers skip their {declared['records']} "
        "record(s) on purpose. If their KEK is restored, undo it with `strongroom recover unmark-lost --wk "
        f"{' --wk '.join(w['wrapping_key'] for w in wks[:3])}{' ...' if len(wks) > 3 else ''} --execute`."
    ]


def _scattered_step(plan: Mapping[str, Any]) -> str:
    """Scattered loss: never delete a prefix; per-subject keys are declared lost, other records skipped."""
    scattered = [e["partition"] for e in plan["partitions"] if e["shape"] == Shape.SCATTERED]
    if plan.get("lost_subject_keys", {}).get("count"):
        count = plan["lost_subject_keys"]["count"]
        wks = len(plan.get("lost_wrapping_keys", []))
        return (
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
    return (
        f"Lost records are interleaved with readable ones in partitions {scattered}: deleting up to L would "
        "also delete the readable records listed as readable_below_boundary. Restore the KEK if at all "
        "possible; otherwise let consumers skip the lost records under their failure policy (skip and "
        "report) rather than deleting a prefix."
    )


_PREFIX_STEP = (
    "Prefix loss: either move the consumer groups past L "
    "(`strongroom recover apply --plan PLAN.json --reset-offsets --group G --execute`, every group listed "
    "as below_boundary, each stopped first) or delete the records up to L for everyone "
    "(`strongroom recover apply --plan PLAN.json --delete-records --execute`). Both skip the readable "
    "records below L listed per partition. Run without --execute first (dry run)."
)
