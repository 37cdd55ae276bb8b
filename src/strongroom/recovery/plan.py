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
from pathlib import Path
from typing import Any, Final

from strongroom.recovery.errors import PlanInvalid, PlanRejected

PLAN_FORMAT: Final = "strongroom-recovery-plan/1"


class Shape:
    """How the loss in a partition is laid out (a string in the plan)."""

    EMPTY = "empty"  # no records at all
    INTACT = "intact"  # nothing lost
    PREFIX = "prefix"  # lost records form a prefix (stragglers allowed within the collateral limit)
    NO_READABLE_SUFFIX = "no-readable-suffix"  # the last record is lost too: L = end
    SCATTERED = "scattered"  # lost records interleaved with readable ones: do not delete a prefix
    UNVERIFIED = "unverified"  # search only (--no-verify): counts unknown


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


def load_plan(path: Path) -> dict[str, Any]:
    """Read and check a plan file: format, required fields, checksum. Does not contact the cluster."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PlanInvalid(f"cannot read plan file {str(path)!r}: {exc.strerror or exc}") from None
    try:
        plan = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PlanInvalid(f"plan file {str(path)!r} is not JSON (line {exc.lineno}: {exc.msg})") from None
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
    return plan


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
