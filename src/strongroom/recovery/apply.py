"""``recover apply``: carry out a plan — delete records up to L, or move consumer groups to L — safely.

Conventions of Kafka's own ``kafka-consumer-groups`` tool: a dry run unless ``--execute``; the
offsets of a group with members cannot be reset. In order:

1. The plan is loaded and its checksum checked (:func:`~strongroom.recovery.plan.load_plan`).
2. The target cluster must be the plan's (cluster id), the plan must be verified, and each
   partition's log must still contain what the plan saw (its end offset may only have grown; a
   shorter log means the topic was recreated or truncated since).
3. Only partitions whose loss is a prefix are acted on; scattered partitions are refused with the
   remedy that fits them.
4. With ``--execute``: the change is made, recorded in the operations log (so the durability audit
   counts the deletion as intended), then verified — the new log start offsets / committed offsets
   are read back and must be where the plan said.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Protocol

from strongroom.errors import StrongroomError
from strongroom.recovery.errors import ApplyRefused, GroupActive, PlanRejected, VerificationFailed
from strongroom.recovery.kafka_io import ClusterView
from strongroom.recovery.plan import PartitionPlan, RecoveryPlan, Shape

Action = Literal["delete-records", "reset-offsets"]


class OperationRecorder(Protocol):
    """Where applied actions are recorded (the audit's operations log in production)."""

    def record_deletion(self, plan: RecoveryPlan, changes: dict[int, tuple[int, int]], reason: str) -> str: ...

    def record_reset(
        self, plan: RecoveryPlan, group: str, changes: dict[int, tuple[int | None, int]], reason: str
    ) -> str: ...


@dataclass
class ApplyOptions:
    action: Action
    groups: Sequence[str] = ()
    all_groups: bool = False
    execute: bool = False
    reason: str | None = None


@dataclass(frozen=True)
class DeletionChange:
    """What ``--delete-records`` does (or would do) to one partition."""

    partition: int
    log_start_before: int
    log_start_after: int
    lost_records: int | None
    readable_records_also_deleted: int
    status: str


@dataclass(frozen=True)
class OffsetChange:
    """What ``--reset-offsets`` does (or would do) to one group's offset on one partition."""

    partition: int
    committed_before: int | None
    committed_after: int | None
    status: str


@dataclass
class GroupReset:
    group: str
    changes: list[OffsetChange]
    operation_id: str | None = None
    verified: dict[str, int | None] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"group": self.group, "changes": [asdict(c) for c in self.changes]}
        if self.operation_id is not None:
            out["operation_id"] = self.operation_id
        if self.verified is not None:
            out["verified"] = self.verified
        return out


@dataclass
class ApplyReport:
    """What ``recover apply`` did or would do (a dry run), and what it verified afterwards."""

    topic: str
    action: Action
    executed: bool = False
    changes: list[DeletionChange] = field(default_factory=list)
    groups: list[GroupReset] = field(default_factory=list)
    note: str | None = None
    operation_id: str | None = None
    verified: dict[str, int] | None = None
    #: Partitions left alone because their loss is scattered (None: not reported).
    skipped_scattered: list[int] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"topic": self.topic, "action": self.action, "executed": self.executed}
        if self.action == "delete-records":
            out["changes"] = [asdict(c) for c in self.changes]
        else:
            out["groups"] = [g.to_json() for g in self.groups]
        optional = {"note": self.note, "operation_id": self.operation_id, "verified": self.verified,
                    "skipped_scattered": self.skipped_scattered}  # fmt: skip
        out.update({k: v for k, v in optional.items() if v is not None})
        return out


def apply_plan(
    view: ClusterView,
    plan: RecoveryPlan,
    options: ApplyOptions,
    recorder: OperationRecorder | None,
    progress: Callable[[str], None] | None = None,
) -> ApplyReport:
    """Check the plan against the cluster, then report (dry run) or act, record and verify."""
    say = progress or (lambda message: None)
    topic = plan.topic
    check_cluster(view, plan)
    if not plan.verified:
        raise ApplyRefused(
            "the plan is unverified (scanned with --no-verify): its counts and stragglers are unknown",
            hint="run `strongroom recover scan` with verification and apply that plan",
        )
    current = view.bounds(topic, [p.partition for p in plan.partitions])
    _check_logs(plan, current)
    targets, skipped = _targets(plan)
    if not targets:
        if skipped:
            raise ApplyRefused(
                f"every affected partition of {topic!r} has scattered loss "
                f"({', '.join(str(s.partition) for s in skipped)}); "
                "deleting a prefix or skipping to L would discard readable records",
                hint=plan.remedy.hint,
            )
        note = "no partition of the plan has records that need a lost key: nothing to do"
        return ApplyReport(topic, options.action, changes=[], note=note)
    reason = options.reason or _default_reason(plan)
    if options.action == "delete-records":
        report = _delete_records(view, plan, targets, current, options, recorder, reason, say)
    else:
        report = _reset_offsets(view, plan, targets, options, recorder, reason, say)
    report.skipped_scattered = [s.partition for s in skipped]
    return report


def check_cluster(view: ClusterView, plan: RecoveryPlan) -> None:
    cluster_id = view.cluster_id()
    if cluster_id != plan.cluster_id:
        raise PlanRejected(
            f"the plan was made on cluster {plan.cluster_id!r}, but --bootstrap-server "
            f"{view.client_config.bootstrap_servers} is cluster {cluster_id!r}; nothing was done",
            hint="point --bootstrap-server at the scanned cluster, or scan this cluster for a plan of its own",
        )


def _check_logs(plan: RecoveryPlan, current: dict[int, tuple[int, int]]) -> None:
    for entry in plan.partitions:
        partition = entry.partition
        if partition not in current:
            raise PlanRejected(f"partition {partition} of {plan.topic!r} no longer exists; nothing was done")
        _, end = current[partition]
        if end < entry.end:
            raise PlanRejected(
                f"partition {plan.topic}-{partition} ends at offset {end} now but at {entry.end} when it was "
                "scanned: the topic was recreated or truncated since; nothing was done"
            )


def _targets(plan: RecoveryPlan) -> tuple[list[PartitionPlan], list[PartitionPlan]]:
    targets = [p for p in plan.partitions if p.prefix_to_delete]
    skipped = [p for p in plan.partitions if p.shape == Shape.SCATTERED]
    return targets, skipped


def _default_reason(plan: RecoveryPlan) -> str:
    return f"lost KEK recovery: records under {', '.join(plan.lost_keks) or 'a lost KEK'} cannot be decrypted"


def _delete_records(
    view: ClusterView,
    plan: RecoveryPlan,
    targets: list[PartitionPlan],
    current: dict[int, tuple[int, int]],
    options: ApplyOptions,
    recorder: OperationRecorder | None,
    reason: str,
    say: Callable[[str], None],
) -> ApplyReport:
    topic = plan.topic
    report = ApplyReport(topic, "delete-records")
    to_delete: dict[int, int] = {}
    for entry in targets:
        partition, boundary = entry.partition, entry.boundary
        start, _ = current[partition]
        status = "already past L" if start >= boundary else ("deleted" if options.execute else "would delete")
        also_deleted = entry.readable_below_boundary if start < boundary else 0
        report.changes.append(DeletionChange(partition, start, max(start, boundary), entry.lost, also_deleted, status))
        if start < boundary:
            to_delete[partition] = boundary
    if not options.execute or not to_delete:
        if not options.execute:
            report.note = "dry run: nothing was changed; add --execute to delete these records"
        return report
    say(f"deleting records of {len(to_delete)} partition(s) of {topic}")
    view.delete_records(topic, to_delete)
    report.executed = True
    if recorder is not None:
        before_after = {p: (current[p][0], o) for p, o in to_delete.items()}
        report.operation_id = _recorded(lambda: recorder.record_deletion(plan, before_after, reason))
    after = view.bounds(topic, sorted(to_delete))
    wrong = {p: after[p][0] for p, o in to_delete.items() if after[p][0] < o}
    if wrong:
        raise VerificationFailed(
            f"after deleting, the log start offsets of {topic} are {wrong}, below the plan's boundaries "
            f"{ {p: to_delete[p] for p in wrong} }"
        )
    report.verified = {str(p): after[p][0] for p in sorted(to_delete)}
    return report


def _reset_offsets(
    view: ClusterView,
    plan: RecoveryPlan,
    targets: list[PartitionPlan],
    options: ApplyOptions,
    recorder: OperationRecorder | None,
    reason: str,
    say: Callable[[str], None],
) -> ApplyReport:
    """Move each chosen group past L where it is below; refused before any change if a group is active."""
    topic = plan.topic
    groups = _groups_to_reset(targets, options)
    partitions = [t.partition for t in targets]
    boundaries = {t.partition: t.boundary for t in targets}
    _refuse_active_groups(view, groups)
    report = ApplyReport(topic, "reset-offsets")
    for group in groups:
        group_entry, moves = _planned_reset(group, view.committed(group, topic, partitions), boundaries, options)
        report.groups.append(group_entry)
        if not options.execute or not moves:
            continue
        say(f"resetting group {group!r} on {len(moves)} partition(s) of {topic}")
        view.reset_offsets(group, topic, {p: new for p, (_, new) in moves.items()})
        report.executed = True
        if recorder is not None:
            group_entry.operation_id = _recorded(functools.partial(recorder.record_reset, plan, group, moves, reason))
        group_entry.verified = _verified_reset(view, group, topic, moves)
    if not options.execute:
        report.note = "dry run: nothing was changed; add --execute to reset these offsets"
    return report


def _groups_to_reset(targets: list[PartitionPlan], options: ApplyOptions) -> list[str]:
    """The groups named with --group, and with --all-groups every group the plan lists below a boundary."""
    groups = list(dict.fromkeys(options.groups))
    if options.all_groups:
        for entry in targets:
            for found in entry.groups:
                if found.below_boundary and found.group not in groups:
                    groups.append(found.group)
    if not groups:
        raise ApplyRefused(
            "--reset-offsets needs --group G (repeatable) or --all-groups",
            hint="the plan lists every group with its committed offset per partition",
        )
    return groups


def _refuse_active_groups(view: ClusterView, groups: list[str]) -> None:
    """Refuse before changing anything: every group must be inactive."""
    infos = {g: view.describe_group(g) for g in groups}
    active = {g: i for g, i in infos.items() if i.active}
    if active:
        described = "; ".join(
            f"group {g!r} is {i.state} with member(s) {', '.join(str(m) for m in i.members) or 'unknown'}"
            for g, i in active.items()
        )
        raise GroupActive(f"cannot reset offsets of an active consumer group: {described}; nothing was done")


def _planned_reset(
    group: str, committed: Mapping[int, int | None], boundaries: Mapping[int, int], options: ApplyOptions
) -> tuple[GroupReset, dict[int, tuple[int | None, int]]]:
    """One group's report entry and its moves (partition → (committed, L)) where it is below L."""
    moves: dict[int, tuple[int | None, int]] = {}
    for p, boundary in boundaries.items():
        before = committed.get(p)
        if before is None or before < boundary:
            moves[p] = (before, boundary)
    group_entry = GroupReset(
        group,
        [
            OffsetChange(
                p, committed.get(p), moves[p][1] if p in moves else committed.get(p),
                ("reset" if options.execute else "would reset") if p in moves else "already at or past L",
            )
            for p in boundaries
        ],
    )  # fmt: skip
    return group_entry, moves


def _verified_reset(
    view: ClusterView, group: str, topic: str, moves: Mapping[int, tuple[int | None, int]]
) -> dict[str, int | None]:
    """The group's committed offsets read back after the reset; any that did not move fail the apply."""
    after = view.committed(group, topic, sorted(moves))
    wrong = {p: after.get(p) for p, (_, new) in moves.items() if after.get(p) != new}
    if wrong:
        raise VerificationFailed(f"after resetting, group {group!r} has committed offsets {wrong} on {topic}")
    return {str(p): after[p] for p in sorted(moves)}


def _recorded(record: Callable[[], str]) -> str:
    """Record an action that was already carried out; a failure here must say that it *was* carried out."""
    try:
        return record()
    except StrongroomError as exc:
        raise VerificationFailed(
            f"the change WAS made, but the operations log did not take the entry: {exc.problem}",
            hint="record it with `strongroom audit justify` (see docs/audit.md) so the audit counts it as intended",
        ) from exc


class OperationsLogRecorder:
    """Records applied actions in the durability audit's operations log (``strongroom-operations``)."""

    def __init__(self, oplog: Any) -> None:
        self.oplog = oplog

    def record_deletion(self, plan: RecoveryPlan, changes: dict[int, tuple[int, int]], reason: str) -> str:
        from strongroom.audit.oplog import DELETE_RECORDS, Operation, PartitionChange

        operation = Operation(
            kind=DELETE_RECORDS,
            reason=reason,
            topic=plan.topic,
            partitions=tuple(PartitionChange(p, b, a) for p, (b, a) in sorted(changes.items())),
            plan_id=plan.checksum,
            details=_details(plan, sorted(changes)),
        )
        return str(self.oplog.record(operation).id)

    def record_reset(
        self, plan: RecoveryPlan, group: str, changes: dict[int, tuple[int | None, int]], reason: str
    ) -> str:
        from strongroom.audit.oplog import OFFSET_RESET, Operation, PartitionChange

        operation = Operation(
            kind=OFFSET_RESET,
            reason=reason,
            topic=plan.topic,
            partitions=tuple(PartitionChange(p, b, a) for p, (b, a) in sorted(changes.items())),
            plan_id=plan.checksum,
            details={**_details(plan, sorted(changes)), "group": group},
        )
        return str(self.oplog.record(operation).id)


def _details(plan: RecoveryPlan, partitions: list[int]) -> dict[str, Any]:
    return {
        "tool": "strongroom recover apply",
        "cluster_id": plan.cluster_id,
        "lost_keks": plan.lost_keks,
        "lost_records": {str(p): plan.partition(p).lost for p in partitions},
        "readable_records_below_boundary": {str(p): plan.partition(p).readable_below_boundary for p in partitions},
        "plan_created_at": plan.created_at,
    }
