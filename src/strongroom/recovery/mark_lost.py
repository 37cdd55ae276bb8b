"""``recover mark-lost`` / ``unmark-lost``: the remedy for scattered loss under per-subject keys.

A lost KEK makes the subject keys under its wrapping keys unreadable; their records are scattered
through every partition, so deleting a prefix would destroy good data (the scan calls such partitions
*scattered* and lists every affected wrapping key in ``lost_wrapping_keys``). The fitting remedy is
to declare those wrapping keys lost in the keys topic (:mod:`strongroom.keys.lost`): readers then skip
the affected records deliberately, as for erased subjects, instead of failing on each one.

``mark-lost`` acts on a plan only, after the same checks as ``recover apply`` (checksum, cluster id,
verified) and more, each before anything is written:

* every lost wrapping key's KEK must be lost according to the plan (``missing``, ``pending_deletion``
  or ``disabled`` in the KMS). A plan that only *assumed* a KEK lost (``--kek``, a what-if) while the
  KMS has it enabled, or could not tell its state, is refused: marking would hide readable records;
* the keys topic is read now: a wrapping key rewrapped since the scan (it names another KEK) is
  readable again and is not marked; one already declared lost is left as it is (idempotent);
* with KMS options, each wrapping key's EDEK is unwrapped once more: one that opens (the KEK was
  restored meanwhile) is not marked; a KMS that does not answer aborts (never "lost" on a guess).

With ``--execute`` the markers are written, recorded in the operations log (kind ``keys-mark-lost``,
the plan's checksum as ``plan_id``), and read back. ``unmark-lost`` tombstones markers (kind
``keys-unmark-lost``) after a KEK came back.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final, Protocol

from strongroom.errors import KmsError
from strongroom.kafka.config import ClientConfig
from strongroom.keys.lost import (
    LostReceipt,
    WrappingKeyState,
    declare_lost,
    read_wrapping_key_states,
    undeclare_lost,
)
from strongroom.keys.topic import KeysTopic
from strongroom.kms.api import Kms
from strongroom.kms.errors import EdekInvalid, KekDisabled, KekNotFound
from strongroom.recovery.apply import check_cluster
from strongroom.recovery.errors import ApplyRefused, PlanInvalid, PlanRejected, VerificationFailed
from strongroom.recovery.kafka_io import ClusterView
from strongroom.recovery.plan import RecoveryPlan

#: KEK states (as the scan recorded them) under which the KEK's keys may be declared lost.
LOST_STATES: Final = frozenset({"missing", "pending_deletion", "disabled"})
#: States from which the KEK can still come back: marking is allowed, but the report says so.
RESTORABLE_STATES: Final = frozenset({"pending_deletion", "disabled"})
MARK_KIND: Final = "keys-mark-lost"
UNMARK_KIND: Final = "keys-unmark-lost"


class LostRecorder(Protocol):
    """Where mark-lost / unmark-lost are recorded (the audit's operations log in production)."""

    def record_lost(self, kind: str, keys_topic: str, receipt: LostReceipt, details: dict[str, Any]) -> str: ...


@dataclass
class MarkLostOptions:
    execute: bool = False
    reason: str | None = None
    declared_by: str | None = None


@dataclass
class Candidate:
    """One wrapping key of the plan, and what mark-lost decided about it."""

    wk_id: bytes
    kek: str | None
    kek_state: str
    subject_keys: int
    records: int
    status: str = "would mark"
    note: str = ""


@dataclass(frozen=True)
class LostEntry:
    """One wrapping key in a mark-lost / unmark-lost report. ``kek_state`` is set in mark-lost reports
    only; ``plan_id``/``declared_by`` in unmark-lost reports of a key that is declared lost; ``partition``
    and ``offset`` once its marker (or undo) was written."""

    wrapping_key: str
    kek: str | None
    status: str
    kek_state: str | None = None
    subject_keys: int = 0
    records: int = 0
    note: str = ""
    plan_id: str | None = None
    declared_by: str | None = None
    partition: int | None = None
    offset: int | None = None

    @classmethod
    def of(cls, candidate: Candidate) -> LostEntry:
        return cls(candidate.wk_id.hex(), candidate.kek, candidate.status, candidate.kek_state,
                   candidate.subject_keys, candidate.records, candidate.note)  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"wrapping_key": self.wrapping_key, "kek": self.kek}
        if self.kek_state is not None:
            out.update(kek_state=self.kek_state, subject_keys=self.subject_keys, records=self.records,
                       status=self.status, note=self.note)  # fmt: skip
        else:
            out["status"] = self.status
            if self.plan_id is not None:
                out.update(plan_id=self.plan_id, declared_by=self.declared_by)
        if self.partition is not None:
            out.update(partition=self.partition, offset=self.offset)
        return out


@dataclass(frozen=True)
class LostReport:
    """What ``recover mark-lost`` / ``unmark-lost`` did or would do (a dry run), and what it read back.

    ``topic``, ``plan_id`` and ``kms_checked`` belong to mark-lost reports (None in unmark-lost ones).
    """

    action: str
    keys_topic: str
    wrapping_keys: tuple[LostEntry, ...]
    executed: bool = False
    topic: str | None = None
    plan_id: str | None = None
    kms_checked: bool | None = None
    note: str | None = None
    operation_id: str | None = None
    verified: dict[str, int] | None = None

    def to_json(self) -> dict[str, Any]:
        entries = [entry.to_json() for entry in self.wrapping_keys]
        out: dict[str, Any] = {"action": self.action}
        if self.action == "mark-lost":
            out.update(topic=self.topic, keys_topic=self.keys_topic, plan_id=self.plan_id, executed=self.executed,
                       kms_checked=self.kms_checked, wrapping_keys=entries)  # fmt: skip
        else:
            out.update(keys_topic=self.keys_topic, executed=self.executed, wrapping_keys=entries)
        optional = {"note": self.note, "operation_id": self.operation_id, "verified": self.verified}
        out.update({k: v for k, v in optional.items() if v is not None})
        return out


def candidates_of(plan: RecoveryPlan) -> list[Candidate]:
    """The plan's lost wrapping keys with their KEK states; refuses plans this remedy does not fit."""
    if not plan.verified:
        raise ApplyRefused(
            "the plan is unverified (scanned with --no-verify): which keys are lost is not established",
            hint="run `strongroom recover scan` with verification and use that plan",
        )
    if plan.lost_wrapping_keys is None or not plan.keys_topic:
        raise PlanInvalid(
            "the plan does not list lost wrapping keys or its keys topic (written by an older strongroom, "
            "or scanned without --keys-topic)",
            hint="run `strongroom recover scan --keys-topic ...` again and use the fresh plan",
        )
    entries = plan.lost_wrapping_keys
    if not entries:
        raise ApplyRefused(
            f"the plan of {plan.topic!r} has no per-subject-key loss: there is no wrapping key to declare lost",
            hint=plan.remedy.hint,
        )
    states = {k.kek: k.state for k in plan.keks}
    out: list[Candidate] = []
    refused: list[str] = []
    for entry in entries:
        try:
            wk_id = bytes.fromhex(entry.wrapping_key)
        except ValueError:
            raise PlanInvalid(f"the plan lists a lost wrapping key that is not hex: {entry.wrapping_key!r}") from None
        kek = entry.kek
        state = "wrapping-key record missing" if kek is None else states.get(kek, "unknown: not in the plan")
        if kek is not None and state not in LOST_STATES:
            refused.append(f"{kek} ({state})")
        out.append(Candidate(wk_id, kek, state, entry.subject_keys, entry.records))
    if refused:
        assumed = ", ".join(plan.assumed_lost) or "none"
        raise PlanRejected(
            f"the plan's KEK(s) {', '.join(sorted(set(refused)))} are not lost in the KMS (KEKs assumed lost with "
            f"--kek: {assumed}); declaring their keys lost would hide readable records; nothing was marked",
            hint="mark-lost is for KEKs the KMS reports missing, pending deletion or disabled; scan again once it does",
        )
    return out


def mark_lost(
    view: ClusterView,
    client: ClientConfig,
    plan: RecoveryPlan,
    options: MarkLostOptions,
    recorder: LostRecorder | None,
    kms: Kms | None = None,
    progress: Callable[[str], None] | None = None,
) -> LostReport:
    """Check the plan against the cluster, the keys topic and (optionally) the KMS; report or mark, record, verify."""
    say = progress or (lambda message: None)
    candidates = _judged_candidates(view, client, plan, kms, say)
    keys_topic = str(plan.keys_topic)
    todo = {c.wk_id: c.kek or "" for c in candidates if c.status == "would mark"}
    report = LostReport("mark-lost", keys_topic, tuple(LostEntry.of(c) for c in candidates), topic=plan.topic,
                        plan_id=plan.checksum, kms_checked=kms is not None)  # fmt: skip
    already = [c for c in candidates if c.status.startswith("already")]
    if not todo:
        if already and len(already) == len(candidates):
            return replace(report, note="every lost wrapping key of the plan is already declared lost: nothing to do")
        raise ApplyRefused(
            "none of the plan's lost wrapping keys is lost any more: "
            + "; ".join(f"{c.wk_id.hex()}: {c.status}" for c in candidates),
            hint="run `strongroom recover scan` again: the plan is out of date",
        )
    if not options.execute:
        note = f"dry run: nothing was changed; add --execute to declare {len(todo)} wrapping key(s) lost" + (
            "" if kms is not None else " (the KEKs were not re-checked: pass the KMS options to do so)"
        )
        return replace(report, note=note)
    reason = options.reason or _default_reason(plan)
    say(f"writing {len(todo)} lost marker(s) to {keys_topic}")
    receipt = declare_lost(
        client, todo, plan_id=plan.checksum, reason=reason, declared_by=options.declared_by, topic=keys_topic
    )
    report = replace(report, executed=True, wrapping_keys=_written(report.wrapping_keys, receipt, "marked"))
    if recorder is not None:
        details = {
            "tool": "strongroom recover mark-lost",
            "cluster_id": plan.cluster_id,
            "data_topic": plan.topic,
            "wrapping_keys": [e.to_json() for e in report.wrapping_keys if e.status == "marked"],
            "plan_created_at": plan.created_at,
        }
        operation_id = _recorded(lambda: recorder.record_lost(MARK_KIND, keys_topic, receipt, details))
        report = replace(report, operation_id=operation_id)
    return replace(report, verified={w.wrapping_key: w.offset for w in receipt.written if w.verified})


def _judged_candidates(
    view: ClusterView, client: ClientConfig, plan: RecoveryPlan, kms: Kms | None, say: Callable[[str], None]
) -> list[Candidate]:
    """The plan's candidates, each judged against the cluster, the keys topic now and (optionally) the KMS."""
    candidates = candidates_of(plan)  # refuses what does not fit before contacting anything
    check_cluster(view, plan)
    keys_topic = str(plan.keys_topic)
    say(f"reading the wrapping keys of {len(candidates)} candidate(s) from {keys_topic}")
    states = read_wrapping_key_states(KeysTopic(client, keys_topic), [c.wk_id for c in candidates])
    for candidate in candidates:
        _judge_against_topic(candidate, states[candidate.wk_id])
    if kms is not None:
        _judge_against_kms(kms, [c for c in candidates if c.status == "would mark"], states)
    for candidate in candidates:
        if candidate.status == "would mark" and candidate.kek_state in RESTORABLE_STATES:
            restorable = (
                f"KEK {candidate.kek} is {candidate.kek_state}: it can still be restored, which heals readers "
                "without marking anything"
            )
            candidate.note = f"{candidate.note}; {restorable}" if candidate.note else restorable
    return candidates


def _judge_against_topic(candidate: Candidate, state: WrappingKeyState) -> None:
    if state.marker is not None:
        candidate.status = f"already declared lost by plan {state.marker.plan_id}"
        return
    if candidate.kek is None:  # the scan found the WK record missing
        if state.record is not None:
            candidate.status = "skipped: its wrapping-key record is back in the keys topic"
        return
    if state.record is None:
        candidate.status = "skipped: its wrapping-key record is no longer in the keys topic"
        return
    if state.record.kek_ref != candidate.kek:
        candidate.status = f"skipped: rewrapped since the scan (now under KEK {state.record.kek_ref})"


def _judge_against_kms(kms: Kms, candidates: Sequence[Candidate], states: dict[bytes, WrappingKeyState]) -> None:
    """Unwrap each candidate's EDEK once more: only a KMS that says "lost" confirms the loss."""
    checked = [(c, states[c.wk_id].record) for c in candidates if states[c.wk_id].record is not None]
    edeks = [record.edek for _, record in checked if record is not None]
    if not edeks:
        return
    try:
        outcomes = kms.unwrap_many(edeks)
    except KmsError as exc:
        raise ApplyRefused(
            f"the KMS could not re-check the KEK(s) ({type(exc).__name__}: {exc.problem}); nothing was marked",
            hint="this is not a lost key; run mark-lost again when the KMS answers (or without the KMS options)",
        ) from exc
    for (candidate, _), outcome in zip(checked, outcomes, strict=True):
        if isinstance(outcome, bytes):
            candidate.status = "skipped: its KEK unwraps it again (restored since the scan)"
        elif isinstance(outcome, KekNotFound | KekDisabled):
            candidate.note = f"confirmed by the KMS: {outcome.problem}"
        elif isinstance(outcome, EdekInvalid):
            candidate.status = f"skipped: the KMS rejects its EDEK as invalid, not as lost ({outcome.problem})"
        else:
            raise ApplyRefused(
                f"the KMS could not re-check KEK {candidate.kek} ({type(outcome).__name__}: {outcome.problem}); "
                "nothing was marked",
                hint="this is not a lost key; run mark-lost again when the KMS answers",
            )


def unmark_lost(
    client: ClientConfig,
    keys_topic: str,
    wk_ids: Sequence[bytes],
    options: MarkLostOptions,
    recorder: LostRecorder | None,
    progress: Callable[[str], None] | None = None,
) -> LostReport:
    """Undo lost markers (the KEK is back): report (dry run) or tombstone, record and verify."""
    say = progress or (lambda message: None)
    topic = KeysTopic(client, keys_topic)
    say(f"reading the lost markers of {len(wk_ids)} wrapping key(s) from {keys_topic}")
    states = read_wrapping_key_states(topic, wk_ids)
    entries: list[LostEntry] = []
    todo: list[bytes] = []
    for wk_id in dict.fromkeys(wk_ids):
        state = states[wk_id]
        if state.marker is None:
            entries.append(LostEntry(wk_id.hex(), state.kek_ref, "not declared lost (nothing to undo)"))
        else:
            entries.append(LostEntry(wk_id.hex(), state.kek_ref, "would unmark", plan_id=state.marker.plan_id,
                                     declared_by=state.marker.declared_by))  # fmt: skip
            todo.append(wk_id)
    report = LostReport("unmark-lost", keys_topic, tuple(entries))
    if not todo:
        raise ApplyRefused(
            f"none of the wrapping keys {', '.join(w.hex() for w in wk_ids)} is declared lost in {keys_topic!r}; "
            "nothing was changed",
            hint="check the ids (`strongroom recover scan` lists declared-lost wrapping keys) and --keys-topic",
        )
    if not options.execute:
        note = (
            f"dry run: nothing was changed; add --execute to undo {len(todo)} lost marker(s). Readers then need the "
            "KEK again: restore it first, or they fail on these records as before the marking"
        )
        return replace(report, note=note)
    reason = options.reason or "the KEK was restored: its wrapping keys are readable again"
    say(f"tombstoning {len(todo)} lost marker(s) in {keys_topic}")
    receipt = undeclare_lost(client, todo, reason=reason, declared_by=options.declared_by, topic=keys_topic)
    report = replace(report, executed=True, wrapping_keys=_written(report.wrapping_keys, receipt, "unmarked"))
    if recorder is not None:
        details = {
            "tool": "strongroom recover unmark-lost",
            "wrapping_keys": [e.to_json() for e in report.wrapping_keys if e.status == "unmarked"],
        }
        operation_id = _recorded(lambda: recorder.record_lost(UNMARK_KIND, keys_topic, receipt, details))
        report = replace(report, operation_id=operation_id)
    return replace(report, verified={w.wrapping_key: w.offset for w in receipt.written if w.verified})


def _default_reason(plan: RecoveryPlan) -> str:
    return f"KEK {', '.join(plan.lost_keks) or '(wrapping-key record missing)'} lost; scattered loss in {plan.topic}"


def _recorded(record: Callable[[], str]) -> str:
    """Record an operation that was already carried out; a failure says that it *was* carried out."""
    from strongroom.errors import StrongroomError

    try:
        return record()
    except StrongroomError as exc:
        raise VerificationFailed(
            f"the markers WERE written, but the operations log did not take the entry: {exc.problem}",
            hint="record it with `strongroom audit justify` (see docs/audit.md) so the audit shows who did it",
        ) from exc


class OperationsLogLostRecorder:
    """Records mark-lost / unmark-lost in the durability audit's operations log (``strongroom-operations``)."""

    def __init__(self, oplog: Any) -> None:
        self.oplog = oplog

    def record_lost(self, kind: str, keys_topic: str, receipt: LostReceipt, details: dict[str, Any]) -> str:
        from strongroom.audit.oplog import Operation

        operation = Operation(
            kind=kind,
            reason=receipt.reason,
            topic=keys_topic,
            plan_id=receipt.plan_id,
            details={**details, "declared_by": receipt.declared_by, "keys_topic": keys_topic},
        )
        return str(self.oplog.record(operation).id)


def _written(entries: tuple[LostEntry, ...], receipt: LostReceipt, status: str) -> tuple[LostEntry, ...]:
    """Each entry whose wrapping key the receipt wrote gets ``status`` and where it was written."""
    by_hex = {w.wrapping_key: w for w in receipt.written}
    return tuple(
        entry
        if (written := by_hex.get(entry.wrapping_key)) is None
        else replace(entry, status=status, partition=written.partition, offset=written.offset)
        for entry in entries
    )
