"""Text renderings of recovery's reports: the KEK inventory, a recovery plan, an apply report (used by the
CLI and the demo alike)."""

from __future__ import annotations

from typing import Any

from strongroom.recovery.apply import ApplyReport
from strongroom.recovery.inventory import CAVEATS, Inventory
from strongroom.recovery.plan import RecoveryPlan
from strongroom.text import table


def render_inventory(report: Inventory) -> str:
    lines = [f"cluster {report.cluster_id} · format {report.record_format['format']}", ""]
    rows: list[list[Any]] = []
    for topic in report.topics:
        for partition in topic.partitions:
            where = f"{topic.topic}-{partition.partition}"
            if not partition.dependencies:
                rows.append([where, "(empty)", "", "", "", ""])
            for dep in partition.dependencies:
                ranges = ", ".join(f"{r[0]}-{r[1]}" for r in dep.ranges[:4])
                more = f" (+{dep.runs - 4} more)" if dep.runs > 4 else ""
                rows.append([where, dep.label, dep.records, dep.first, dep.last, ranges + more])
    lines.append(table(rows, ["partition", "depends on", "records", "first", "last", "ranges"]))
    if report.keks:
        lines += ["", "KEKs:"]
        kek_rows = []
        for kek in report.keks:
            versions = ", ".join(
                f"{v}: {info.records}" + ("" if info.unwrappable in (None, True) else " (NOT unwrappable)")
                for v, info in sorted(kek.versions.items())
            )
            kek_rows.append([kek.kek, kek.state, kek.records, versions])
        lines.append(table(kek_rows, ["KEK", "state", "records", "versions"]))
    question = report.question
    if question is not None:
        lines.append("")
        if question.safe_to_delete:
            lines.append(f"Is it safe to delete {question.kek}? YES — no scanned record depends on it.")
        else:
            where = ", ".join(
                f"{e.topic}-{e.partition} ({e.dependency.records} records, offsets {e.dependency.first}-"
                f"{e.dependency.last})"
                for e in question.evidence
            )
            lines.append(
                f"Is it safe to delete {question.kek}? NO — {question.records_needing_it} record(s) still need "
                f"it: {where}"
            )
        lines.append("Caveats: " + " ".join(CAVEATS))
    return "\n".join(lines)


def render_plan(plan: RecoveryPlan, plan_file: str | None = None) -> str:
    lines = [
        f"cluster {plan.cluster_id} · topic {plan.topic} · format {plan.record_format}"
        + (" · UNVERIFIED" if not plan.verified else ""),
        "",
    ]
    rows = []
    for p in plan.partitions:
        below = [
            f"{g.group}@{'no offset' if g.committed is None else g.committed}" for g in p.groups if g.below_boundary
        ]
        rows.append(
            [p.partition, p.log_start, p.end, p.boundary, _n(p.lost), _n(p.stragglers if p.lost is not None else None),
             _n(p.readable_below_boundary if p.lost is not None else None), p.shape, f"{p.fetches}/{p.fetch_budget}",
             ", ".join(below) or "-"]
        )  # fmt: skip
    lines.append(
        table(rows, ["partition", "log start", "end", "L", "lost", "stragglers", "readable<L", "shape",
                     "fetches", "groups below L"])
    )  # fmt: skip
    if plan.keks:
        kek_rows = [[k.kek, k.state, "yes" if k.lost else "no", k.lost_records] for k in plan.keks]
        lines += ["", table(kek_rows, ["KEK", "state in KMS", "lost", "lost records"])]
    if plan.lost_subject_keys:
        lines += ["", f"{plan.lost_subject_keys} subject key(s) affected; first: "
                  + ", ".join(str(s["subject_key"]) for s in plan.lost_subject_key_examples[:5])]  # fmt: skip
    wks = plan.lost_wrapping_keys or ()
    if wks:
        lines.append(f"under {len(wks)} wrapping key(s): " + ", ".join(w.wrapping_key for w in wks[:5]))
    declared = plan.declared_lost
    if declared.get("subject_keys"):
        lines.append(
            f"{declared['subject_keys']} subject key(s) already declared lost ({declared['records']} record(s) "
            "skipped by readers on purpose)"
        )
    for p in plan.partitions:
        if p.stragglers:
            lines.append(
                f"partition {p.partition}: {p.stragglers} straggler(s) above the searched boundary "
                f"{p.searched_boundary} (e.g. offsets {list(p.straggler_offsets[:5])}); L corrected to {p.boundary}"
            )
        if p.corrupt or p.malformed:
            where = ", ".join(f"{a}-{b}" for a, b, _ in p.unreadable_other[:5])
            lines.append(
                f"partition {p.partition}: {p.corrupt} corrupt and {p.malformed} malformed "
                f"record(s) (not a KEK problem; they do not move L), between offsets {where}"
            )
    lines += ["", "Remedy:"] + [f"  - {step}" for step in plan.remedy.steps]
    if plan_file is not None:
        lines += ["", f"Plan written to {plan_file} (checksum {plan.checksum[:19]}...)"]
    return "\n".join(lines)


def _n(value: Any, unknown: str = "?") -> str:
    return unknown if value is None else str(value)


def render_apply(report: ApplyReport) -> str:
    lines = [f"{report.action} on {report.topic}" + (" (EXECUTED)" if report.executed else "")]
    if report.action == "delete-records" and report.changes:
        rows = [
            [c.partition, c.log_start_before, c.log_start_after, _n(c.lost_records), c.readable_records_also_deleted,
             c.status]
            for c in report.changes
        ]  # fmt: skip
        lines.append(
            table(rows, ["partition", "log start", "new log start", "lost", "readable also deleted", "status"])
        )
    for group in report.groups:
        lines.append(f"group {group.group}:")
        rows = [[c.partition, _n(c.committed_before), _n(c.committed_after), c.status] for c in group.changes]
        lines.append(table(rows, ["partition", "committed", "new committed", "status"]))
        if group.operation_id is not None:
            lines.append(f"recorded in the operations log as {group.operation_id}; verified {group.verified}")
    if report.operation_id is not None:
        lines.append(f"recorded in the operations log as {report.operation_id}; verified log starts {report.verified}")
    if report.skipped_scattered:
        lines.append(f"skipped (scattered loss, not a prefix): partitions {report.skipped_scattered}")
    if report.note:
        lines.append(report.note)
    return "\n".join(lines)
