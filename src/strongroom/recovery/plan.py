"""The recovery plan: what the scan found, what may be done about it, and a checksum over all of it.

A plan is a JSON document (``strongroom-recovery-plan/1``). ``recover apply`` acts on nothing else,
and refuses a plan that

* was edited — ``checksum`` is SHA-256 over the canonical JSON of every other field (sorted keys,
  no whitespace); any change, by hand or by a tool, is caught. It is a checksum, not a signature:
  it stops mistakes (a typo'd offset, a plan for the wrong topic pasted together), not an attacker
  with write access to the file, who could recompute it;
* belongs to another cluster — ``cluster_id`` must equal the target's;
* is unverified or describes partitions whose log has since moved below/beyond what it recorded.

Per partition the plan keeps L (``boundary``), the log start/end seen, the counts from the
verification, the stragglers, every consumer group with a committed offset there (and whether it is
below L), and the shape of the loss, which decides the remedy.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Final

from strongroom.recovery.errors import PlanInvalid, PlanRejected

PLAN_FORMAT: Final = "strongroom-recovery-plan/1"


class Shape(StrEnum):
    """How the loss in a partition is laid out (a string in the plan)."""

    EMPTY = "empty"  # no records at all
    INTACT = "intact"  # nothing lost
    PREFIX = "prefix"  # lost records form a prefix (stragglers allowed within the collateral limit)
    NO_READABLE_SUFFIX = "no-readable-suffix"  # the last record is lost too: L = end
    SCATTERED = "scattered"  # lost records interleaved with readable ones: do not delete a prefix
    UNVERIFIED = "unverified"  # search only (--no-verify): counts unknown


class RemedyKind(StrEnum):
    """Which remedy fits the plan (``recover scan`` exits by it)."""

    NONE = "none"
    UNVERIFIED = "unverified"
    PREFIX = "prefix"
    SCATTERED = "scattered"
    MIXED = "mixed"


#: Shapes for which deleting up to L / resetting groups to L is the fitting remedy.
PREFIX_SHAPES: Final = frozenset({Shape.PREFIX, Shape.NO_READABLE_SUFFIX})


def canonical_json(data: Any) -> bytes:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode("ascii")


def checksum_of(plan: Mapping[str, Any]) -> str:
    """``sha256:<hex>`` over every field except ``checksum`` itself."""
    body = {k: v for k, v in plan.items() if k != "checksum"}
    return "sha256:" + hashlib.sha256(canonical_json(body)).hexdigest()


def seal_plan(plan: dict[str, Any]) -> dict[str, Any]:
    """The plan with its ``checksum`` set (returns the same dict)."""
    plan["checksum"] = checksum_of(plan)
    return plan


def write_plan(plan: Mapping[str, Any], path: Path) -> None:
    """Write atomically (a half-written plan must never be applied)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(plan, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(path)


def load_plan(path: Path) -> RecoveryPlan:
    """Read and check a plan file: format, required fields, checksum. Does not contact the cluster."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PlanInvalid(f"cannot read plan file {str(path)!r}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise PlanInvalid(f"plan file {str(path)!r} is not UTF-8 text") from None
    try:
        plan = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PlanInvalid(f"plan file {str(path)!r} is not JSON (line {exc.lineno}: {exc.msg})") from None
    except RecursionError:
        raise PlanInvalid(f"plan file {str(path)!r} is nested too deeply to be a plan") from None
    if not isinstance(plan, dict) or plan.get("format") != PLAN_FORMAT:
        found = plan.get("format") if isinstance(plan, dict) else type(plan).__name__
        raise PlanInvalid(f"plan file {str(path)!r} is not a {PLAN_FORMAT} document (format: {found!r})")
    missing = [k for k in ("cluster_id", "topic", "partitions", "checksum", "verified") if k not in plan]
    if missing:
        raise PlanInvalid(f"plan file {str(path)!r} lacks {', '.join(missing)}")
    expected = checksum_of(plan)
    if plan["checksum"] != expected:
        raise PlanRejected(
            f"plan file {str(path)!r} was modified after the scan wrote it (checksum {plan['checksum']!r} "
            f"does not match its content)",
            hint="never edit a plan; run `strongroom recover scan` again to get a fresh one",
        )
    _check_partitions(plan, path)
    return RecoveryPlan.from_document(plan)


def _check_partitions(plan: Mapping[str, Any], path: Path) -> None:
    partitions = plan["partitions"]
    if not isinstance(partitions, list) or not all(isinstance(p, dict) for p in partitions):
        raise PlanInvalid(f"plan file {str(path)!r} has no partition list")
    for entry in partitions:
        for key in ("partition", "boundary", "log_start", "end", "shape", "groups"):
            if key not in entry:
                raise PlanInvalid(f"plan file {str(path)!r}: a partition entry lacks {key!r}")
        if not entry["log_start"] <= entry["boundary"] <= max(entry["end"], entry["log_start"]):
            raise PlanInvalid(
                f"plan file {str(path)!r}: partition {entry['partition']} has boundary {entry['boundary']} "
                f"outside its log [{entry['log_start']}, {entry['end']}]"
            )


# ------------------------------------------------------------------------------------------ the typed plan
@dataclass(frozen=True)
class GroupOffset:
    """A consumer group with a committed offset on a partition, as the scan found it."""

    group: str
    committed: int | None
    below_boundary: bool
    state: str = "unknown"
    members: int = 0


@dataclass(frozen=True)
class PartitionPlan:
    """One partition of the plan: where readable data resumes (L = ``boundary``) and what lies below."""

    partition: int
    log_start: int
    end: int
    boundary: int
    shape: Shape
    groups: tuple[GroupOffset, ...]
    fetches: int = 0
    fetch_budget: int = 0
    searched_boundary: int | None = None
    records: int | None = None
    lost: int | None = None
    readable_below_boundary: int = 0
    stragglers: int = 0
    straggler_offsets: tuple[int, ...] = ()
    corrupt: int = 0
    malformed: int = 0
    #: ``(first, last, count)`` runs of records unreadable for reasons other than a lost key.
    unreadable_other: tuple[tuple[int, int, int], ...] = ()

    @property
    def prefix_to_delete(self) -> bool:
        """The loss is a prefix and there is something below L to delete or skip."""
        return self.shape in PREFIX_SHAPES and self.boundary > self.log_start


@dataclass(frozen=True)
class KekEntry:
    kek: str
    state: str
    lost: bool
    lost_records: int = 0


@dataclass(frozen=True)
class WrappingKeyLoss:
    """A wrapping key with lost subject keys under it: the unit ``recover mark-lost`` acts on."""

    wrapping_key: str  # hex
    kek: str | None
    subject_keys: int = 0
    records: int = 0
    partitions: tuple[int, ...] = ()


@dataclass(frozen=True)
class Remedy:
    kind: RemedyKind
    steps: tuple[str, ...]

    @property
    def hint(self) -> str:
        return " ".join(self.steps) or "see the plan's remedy"

    def to_json(self) -> dict[str, Any]:
        return {"kind": str(self.kind), "steps": list(self.steps)}


@dataclass(frozen=True)
class RecoveryPlan:
    """A loaded, checked plan. ``document`` is the sealed JSON as written (its checksum covers it, and it
    is what ``--output json`` shows); the fields are what apply, mark-lost and the renderings act on."""

    document: dict[str, Any]
    topic: str
    cluster_id: str
    checksum: str
    verified: bool
    created_at: str | None
    record_format: str
    keys_topic: str | None
    assumed_lost: tuple[str, ...]
    keks: tuple[KekEntry, ...]
    partitions: tuple[PartitionPlan, ...]
    #: None: the plan predates the list (an older strongroom wrote it).
    lost_wrapping_keys: tuple[WrappingKeyLoss, ...] | None
    lost_subject_keys: int
    lost_subject_key_examples: tuple[dict[str, Any], ...]
    declared_lost: dict[str, Any]
    remedy: Remedy

    @property
    def lost_keks(self) -> list[str]:
        return [k.kek for k in self.keks if k.lost]

    def partition(self, number: int) -> PartitionPlan:
        return next(p for p in self.partitions if p.partition == number)

    def to_json(self) -> dict[str, Any]:
        return dict(self.document)

    @classmethod
    def from_document(cls, doc: dict[str, Any]) -> RecoveryPlan:
        """The typed plan of a sealed document (fields newer plans added default to "not recorded")."""
        try:
            wks = doc.get("lost_wrapping_keys")
            subjects = doc.get("lost_subject_keys") or {}
            remedy = doc.get("remedy") or {}
            return cls(
                document=doc,
                topic=str(doc["topic"]),
                cluster_id=str(doc["cluster_id"]),
                checksum=str(doc["checksum"]),
                verified=bool(doc["verified"]),
                created_at=doc.get("created_at"),
                record_format=str((doc.get("record_format") or {}).get("format", "unknown")),
                keys_topic=doc.get("keys_topic") or None,
                assumed_lost=tuple(doc.get("assumed_lost") or ()),
                keks=tuple(_kek_entry(k) for k in doc.get("keks") or ()),
                partitions=tuple(_partition_plan(e) for e in doc["partitions"]),
                lost_wrapping_keys=None if wks is None else tuple(_wrapping_key_loss(w) for w in wks),
                lost_subject_keys=int(subjects.get("count") or 0),
                lost_subject_key_examples=tuple(subjects.get("examples") or ()),
                declared_lost=dict(doc.get("declared_lost") or {}),
                remedy=Remedy(RemedyKind(remedy.get("kind", RemedyKind.NONE)), tuple(remedy.get("steps") or ())),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise PlanInvalid(f"the plan has a field of the wrong shape ({type(exc).__name__}: {exc})") from None


def _partition_plan(e: dict[str, Any]) -> PartitionPlan:
    return PartitionPlan(
        partition=int(e["partition"]),
        log_start=int(e["log_start"]),
        end=int(e["end"]),
        boundary=int(e["boundary"]),
        shape=Shape(e["shape"]),
        groups=tuple(_group_offset(g) for g in e["groups"]),
        fetches=int(e.get("fetches") or 0),
        fetch_budget=int(e.get("fetch_budget") or 0),
        searched_boundary=e.get("searched_boundary"),
        records=e.get("records"),
        lost=e.get("lost"),
        readable_below_boundary=int(e.get("readable_below_boundary") or 0),
        stragglers=int(e.get("stragglers") or 0),
        straggler_offsets=tuple(e.get("straggler_offsets") or ()),
        corrupt=int(e.get("corrupt") or 0),
        malformed=int(e.get("malformed") or 0),
        unreadable_other=tuple((int(a), int(b), int(n)) for a, b, n in e.get("unreadable_other") or ()),
    )


def _kek_entry(k: dict[str, Any]) -> KekEntry:
    return KekEntry(str(k["kek"]), str(k.get("state", "unknown")), bool(k.get("lost")), int(k.get("lost_records") or 0))


def _group_offset(g: dict[str, Any]) -> GroupOffset:
    state, members = str(g.get("state", "unknown")), int(g.get("members") or 0)
    return GroupOffset(str(g["group"]), g.get("committed"), bool(g.get("below_boundary")), state, members)


def _wrapping_key_loss(w: dict[str, Any]) -> WrappingKeyLoss:
    return WrappingKeyLoss(
        wrapping_key=str(w["wrapping_key"]),
        kek=w.get("kek"),
        subject_keys=int(w.get("subject_keys") or 0),
        records=int(w.get("records") or 0),
        partitions=tuple(w.get("partitions") or ()),
    )
