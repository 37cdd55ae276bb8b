"""``strongroom recover``: find what a lost KEK made unreadable, plan the repair, apply it safely.

\b
Exit codes of `recover scan`:
  0  no record needs a lost key (a plan is still written, for the record)
  1  handled error: the scan was aborted (KMS outage or refusal, Kafka unreachable) — no plan written
  2  usage error
  3  internal error (a bug in strongroom)
  4  records need a lost key and the loss is a prefix: plan written, apply it
  5  scattered loss (interleaved with readable records): plan written, do not delete a prefix
\b
Exit codes of `recover apply`, `recover mark-lost` and `recover unmark-lost`:
  0  dry run reported, or the action was executed, recorded and verified (mark-lost: also when every
     lost wrapping key was already declared lost)
  1  refused (plan edited or from another cluster, active group, scattered loss for apply, prefix loss
     or KEK not lost for mark-lost, nothing declared lost for unmark-lost) or failed
  2  usage error
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from strongroom.cli.common import client_config, kafka_options
from strongroom.cli.kek import (
    build_format,
    build_kms,
    check_format_options,
    format_and_kms_options,
    open_key_chain,
    progress_printer,
    spark_session,
)
from strongroom.cli.output import Output, table

EXIT_PREFIX_LOSS = 4
EXIT_SCATTERED_LOSS = 5


@click.group(epilog=__doc__.split("\n\n", 1)[-1] if __doc__ else None)
def recover() -> None:
    """Lost-KEK recovery: boundary search, verified plan, safe repair."""


@recover.command(epilog=__doc__.split("\n\n", 1)[-1] if __doc__ else None)
@kafka_options
@click.option("--topic", required=True, help="The topic to scan.")
@format_and_kms_options
@click.option(
    "--kek",
    "assumed_lost",
    multiple=True,
    metavar="KEK",
    help="Treat this KEK as lost even if the KMS still has it (a what-if before deleting it; repeatable).",
)
@click.option(
    "--plan-out",
    type=click.Path(dir_okay=False),
    default=None,
    help="Where to write the plan (default: ./strongroom-plan-<topic>-<time>.json).",
)
@click.option(
    "--no-verify",
    is_flag=True,
    help="Binary search only, no Spark verification (counts unknown; apply refuses such plans).",
)
@click.option(
    "--max-collateral-ratio",
    type=click.FloatRange(0, 1000),
    default=0.1,
    show_default=True,
    help="Scattered when the readable records below L exceed this share of the lost records.",
)
@click.option(
    "--probe-timeout",
    type=click.FloatRange(1, 600),
    default=30.0,
    show_default=True,
    help="Seconds to wait for one round of probe fetches.",
)
@click.option("--spark-master", default=None, help="Spark master (default local[2] or $STRONGROOM_SPARK_MASTER).")
@click.pass_context
def scan(ctx: click.Context, /, **params: Any) -> None:
    """Find, per partition, the lowest offset L from which every record is readable, verify it, write a plan."""
    from strongroom.errors import ConfigError
    from strongroom.recovery.checker import AvailabilityChecker
    from strongroom.recovery.kafka_io import ClusterView, KafkaProbe
    from strongroom.recovery.plan import write_plan
    from strongroom.recovery.scan import ScanOptions, run_scan
    from strongroom.recovery.spark_jobs import kafka_source_options

    out: Output = ctx.obj
    check_format_options(params)
    config = client_config(params["bootstrap"], params["command_config"])
    kms = build_kms(params)
    if kms is None:
        raise ConfigError(
            "recover scan needs the KMS that holds the KEKs (to tell readable from lost records)",
            hint="pass --kms vault|aws|local|inmemory with its options, or --kms-config FILE",
        )
    fmt = build_format(params, kms)
    chain = open_key_chain(params, config, kms)
    checker = AvailabilityChecker(fmt, kms, assumed_lost=params["assumed_lost"], subject_keys=chain)
    options = ScanOptions(
        topic=params["topic"],
        verify=not params["no_verify"],
        max_collateral_ratio=params["max_collateral_ratio"],
        assumed_lost=tuple(params["assumed_lost"]),
    )
    view = ClusterView(config)
    progress = progress_printer(out)
    try:
        spark = None if options.verify is False else spark_session(params["spark_master"])
        with KafkaProbe(config, options.topic, timeout=params["probe_timeout"]) as probe:
            plan = run_scan(
                view, probe, checker, options,
                spark=spark,
                source_options=kafka_source_options(config) if spark is not None else None,
                progress=progress,
            )  # fmt: skip
    finally:
        if chain is not None:
            chain.close()
        kms.close()
    path = Path(params["plan_out"] or default_plan_path(options.topic))
    write_plan(plan, path)
    out.result({**plan, "plan_file": str(path)}, render_plan)
    kind = plan["remedy"]["kind"]
    if kind in ("scattered", "mixed"):
        ctx.exit(EXIT_SCATTERED_LOSS)
    if kind == "prefix":
        ctx.exit(EXIT_PREFIX_LOSS)


def default_plan_path(topic: str) -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in topic)
    return f"strongroom-plan-{safe}-{stamp}.json"


def render_plan(plan: dict[str, Any]) -> str:
    lines = [
        f"cluster {plan['cluster_id']} · topic {plan['topic']} · format {plan['record_format']['format']}"
        + (" · UNVERIFIED" if not plan["verified"] else ""),
        "",
    ]
    rows = []
    for p in plan["partitions"]:
        below = [
            f"{g['group']}@{'no offset' if g['committed'] is None else g['committed']}"
            for g in p["groups"]
            if g["below_boundary"]
        ]
        rows.append(
            [p["partition"], p["log_start"], p["end"], p["boundary"], _n(p.get("lost")), _n(p.get("stragglers")),
             _n(p.get("readable_below_boundary")), p["shape"], f"{p['fetches']}/{p['fetch_budget']}",
             ", ".join(below) or "-"]
        )  # fmt: skip
    lines.append(
        table(rows, ["partition", "log start", "end", "L", "lost", "stragglers", "readable<L", "shape",
                     "fetches", "groups below L"])
    )  # fmt: skip
    if plan["keks"]:
        kek_rows = [[k["kek"], k["state"], "yes" if k["lost"] else "no", k["lost_records"]] for k in plan["keks"]]
        lines += ["", table(kek_rows, ["KEK", "state in KMS", "lost", "lost records"])]
    subjects = plan.get("lost_subject_keys", {})
    if subjects.get("count"):
        lines += ["", f"{subjects['count']} subject key(s) affected; first: "
                  + ", ".join(str(s["subject_key"]) for s in subjects["examples"][:5])]  # fmt: skip
    wks = plan.get("lost_wrapping_keys", [])
    if wks:
        lines.append(f"under {len(wks)} wrapping key(s): " + ", ".join(w["wrapping_key"] for w in wks[:5]))
    declared = plan.get("declared_lost", {})
    if declared.get("subject_keys"):
        lines.append(
            f"{declared['subject_keys']} subject key(s) already declared lost ({declared['records']} record(s) "
            "skipped by readers on purpose)"
        )
    for p in plan["partitions"]:
        if p.get("stragglers"):
            lines.append(
                f"partition {p['partition']}: {p['stragglers']} straggler(s) above the searched boundary "
                f"{p['searched_boundary']} (e.g. offsets {p['straggler_offsets'][:5]}); L corrected to {p['boundary']}"
            )
        if p.get("corrupt") or p.get("malformed"):
            where = ", ".join(f"{a}-{b}" for a, b, _ in p["unreadable_other"][:5])
            lines.append(
                f"partition {p['partition']}: {p.get('corrupt', 0)} corrupt and {p.get('malformed', 0)} malformed "
                f"record(s) (not a KEK problem; they do not move L), between offsets {where}"
            )
    lines += ["", "Remedy:"] + [f"  - {step}" for step in plan["remedy"]["steps"]]
    if "plan_file" in plan:
        lines += ["", f"Plan written to {plan['plan_file']} (checksum {plan['checksum'][:19]}...)"]
    return "\n".join(lines)


def _n(value: Any) -> str:
    return "?" if value is None else str(value)


@recover.command(epilog=__doc__.split("\n\n", 1)[-1] if __doc__ else None)
@kafka_options
@click.option(
    "--plan", "plan_file", type=click.Path(dir_okay=False), required=True, help="The plan written by `recover scan`."
)
@click.option(
    "--delete-records",
    "action",
    flag_value="delete-records",
    help="Delete every record below L in each prefix-loss partition (for every consumer).",
)
@click.option(
    "--reset-offsets",
    "action",
    flag_value="reset-offsets",
    help="Move consumer groups (--group / --all-groups) to L where they are below it.",
)
@click.option("--group", "groups", multiple=True, metavar="GROUP", help="Consumer group to reset (repeatable).")
@click.option("--all-groups", is_flag=True, help="Reset every group the plan lists as below L.")
@click.option(
    "--dry-run/--execute",
    "dry_run",
    default=True,
    show_default=True,
    help="Report what would change (default), or change it.",
)
@click.option("--reason", default=None, help="Why, for the operations log (default: names the lost KEKs).")
@click.pass_context
def apply(ctx: click.Context, /, **params: Any) -> None:
    """Apply a plan: --delete-records or --reset-offsets --group G; a dry run unless --execute."""
    from strongroom.recovery.apply import ApplyOptions, OperationsLogRecorder, apply_plan
    from strongroom.recovery.kafka_io import ClusterView
    from strongroom.recovery.plan import load_plan

    out: Output = ctx.obj
    if params["action"] is None:
        raise click.UsageError("choose --delete-records or --reset-offsets")
    if params["action"] == "delete-records" and (params["groups"] or params["all_groups"]):
        raise click.UsageError("--group/--all-groups go with --reset-offsets, not --delete-records")
    plan = load_plan(Path(params["plan_file"]))
    config = client_config(params["bootstrap"], params["command_config"])
    view = ClusterView(config)
    recorder = None
    if not params["dry_run"]:
        from strongroom.audit.oplog import OperationsLog

        oplog = OperationsLog(config)
        oplog.ensure_topic()  # an unreachable operations log stops us before anything changes
        recorder = OperationsLogRecorder(oplog)
    options = ApplyOptions(
        action=params["action"],
        groups=params["groups"],
        all_groups=params["all_groups"],
        execute=not params["dry_run"],
        reason=params["reason"],
    )
    report = apply_plan(view, plan, options, recorder, progress=out.note)
    out.result(report, render_apply)


def render_apply(report: dict[str, Any]) -> str:
    lines = [f"{report['action']} on {report['topic']}" + (" (EXECUTED)" if report["executed"] else "")]
    if report["action"] == "delete-records" and report.get("changes"):
        rows = [
            [c["partition"], c["log_start_before"], c["log_start_after"], _n(c["lost_records"]),
             c["readable_records_also_deleted"], c["status"]]
            for c in report["changes"]
        ]  # fmt: skip
        lines.append(
            table(rows, ["partition", "log start", "new log start", "lost", "readable also deleted", "status"])
        )
    for group in report.get("groups", []):
        lines.append(f"group {group['group']}:")
        rows = [
            [c["partition"], _n(c["committed_before"]), _n(c["committed_after"]), c["status"]] for c in group["changes"]
        ]
        lines.append(table(rows, ["partition", "committed", "new committed", "status"]))
        if "operation_id" in group:
            lines.append(f"recorded in the operations log as {group['operation_id']}; verified {group['verified']}")
    if "operation_id" in report:
        lines.append(
            f"recorded in the operations log as {report['operation_id']}; verified log starts {report['verified']}"
        )
    if report.get("skipped_scattered"):
        lines.append(f"skipped (scattered loss, not a prefix): partitions {report['skipped_scattered']}")
    if report.get("note"):
        lines.append(report["note"])
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------ mark-lost
@recover.command("mark-lost", epilog=__doc__.split("\n\n", 1)[-1] if __doc__ else None)
@kafka_options
@click.option(
    "--plan", "plan_file", type=click.Path(dir_okay=False), required=True, help="The plan written by `recover scan`."
)
@format_and_kms_options
@click.option(
    "--dry-run/--execute",
    "dry_run",
    default=True,
    show_default=True,
    help="Report what would be marked (default), or mark it.",
)
@click.option("--reason", default=None, help="Why, for the markers and the operations log (default: names the KEKs).")
@click.option("--declared-by", default=None, help="Who decides (default: user@host).")
@click.pass_context
def mark_lost(ctx: click.Context, /, **params: Any) -> None:
    """Scattered loss under per-subject keys: declare the plan's lost wrapping keys lost in the keys topic.

    Readers (key tables, the decrypting consumer, the decrypt pipeline) then skip the affected records on
    purpose — JSON fields become null, whole values are dropped or marked, as for erased subjects —
    instead of failing on them. With KMS options (as for the scan) each KEK is re-checked first. Undo
    with `recover unmark-lost` if the KEK comes back.
    """
    from strongroom.recovery.kafka_io import ClusterView
    from strongroom.recovery.mark_lost import MarkLostOptions, OperationsLogLostRecorder
    from strongroom.recovery.mark_lost import mark_lost as run_mark_lost
    from strongroom.recovery.plan import load_plan

    out: Output = ctx.obj
    if params["record_format"] != "strongroom":
        raise click.UsageError("mark-lost is for strongroom's per-subject keys (--format strongroom)")
    plan = load_plan(Path(params["plan_file"]))
    if params["keys_topic"] and plan.get("keys_topic") and params["keys_topic"] != plan["keys_topic"]:
        raise click.UsageError(
            f"--keys-topic {params['keys_topic']} differs from the plan's keys topic {plan['keys_topic']}"
        )
    config = client_config(params["bootstrap"], params["command_config"])
    view = ClusterView(config)
    kms = build_kms(params)
    try:
        recorder = None if params["dry_run"] else _lost_recorder(config, OperationsLogLostRecorder)
        options = MarkLostOptions(
            execute=not params["dry_run"], reason=params["reason"], declared_by=params["declared_by"]
        )
        report = run_mark_lost(view, config, plan, options, recorder, kms, progress=out.note)
    finally:
        if kms is not None:
            kms.close()
    out.result(report, render_lost)


@recover.command("unmark-lost", epilog=__doc__.split("\n\n", 1)[-1] if __doc__ else None)
@kafka_options
@click.option(
    "--wk",
    "wk_ids",
    multiple=True,
    required=True,
    metavar="ID",
    help="Wrapping key id (32 hex digits) whose lost marker to undo (repeatable).",
)
@click.option("--keys-topic", default="strongroom-keys", show_default=True, help="The keys topic.")
@click.option(
    "--dry-run/--execute",
    "dry_run",
    default=True,
    show_default=True,
    help="Report what would be undone (default), or undo it.",
)
@click.option("--reason", default=None, help="Why, for the operations log (default: the KEK was restored).")
@click.option("--declared-by", default=None, help="Who decides (default: user@host).")
@click.pass_context
def unmark_lost(ctx: click.Context, /, **params: Any) -> None:
    """Undo `mark-lost` for wrapping keys whose KEK was restored: readers use their keys again.

    Restore the KEK first: without it readers fail on these records again, as before the marking.
    """
    from strongroom.recovery.mark_lost import MarkLostOptions, OperationsLogLostRecorder
    from strongroom.recovery.mark_lost import unmark_lost as run_unmark_lost

    out: Output = ctx.obj
    wk_ids = []
    for text in params["wk_ids"]:
        try:
            raw = bytes.fromhex(text)
        except ValueError:
            raw = b""
        if len(raw) != 16:
            raise click.BadParameter(f"{text!r} is not a wrapping key id (32 hex digits)", param_hint="--wk")
        wk_ids.append(raw)
    config = client_config(params["bootstrap"], params["command_config"])
    recorder = None if params["dry_run"] else _lost_recorder(config, OperationsLogLostRecorder)
    options = MarkLostOptions(execute=not params["dry_run"], reason=params["reason"], declared_by=params["declared_by"])
    report = run_unmark_lost(config, params["keys_topic"], wk_ids, options, recorder, progress=out.note)
    out.result(report, render_lost)


def _lost_recorder(config: Any, recorder_class: Any) -> Any:
    from strongroom.audit.oplog import OperationsLog

    oplog = OperationsLog(config)
    oplog.ensure_topic()  # an unreachable operations log stops us before anything changes
    return recorder_class(oplog)


def render_lost(report: dict[str, Any]) -> str:
    where = f" on {report['topic']}" if "topic" in report else ""
    lines = [
        f"{report['action']}{where} · keys topic {report['keys_topic']}" + (" (EXECUTED)" if report["executed"] else "")
    ]
    rows = [
        [e["wrapping_key"], e.get("kek") or "-", e.get("kek_state", "-"), e.get("subject_keys", "-"),
         e.get("records", "-"), e["status"]]
        for e in report["wrapping_keys"]
    ]  # fmt: skip
    lines.append(table(rows, ["wrapping key", "KEK", "KEK state", "subject keys", "records", "status"]))
    for entry in report["wrapping_keys"]:
        if entry.get("note"):
            lines.append(f"{entry['wrapping_key']}: {entry['note']}")
    if "operation_id" in report:
        lines.append(f"recorded in the operations log as {report['operation_id']}")
    if "verified" in report and report["action"] == "mark-lost":
        lines.append(f"read back from the keys topic: {len(report['verified'])} lost marker(s) in force as written")
    elif "verified" in report:
        lines.append(
            f"read back from the keys topic: {len(report['verified'])} wrapping key(s) no longer declared lost"
        )
    if report.get("note"):
        lines.append(report["note"])
    return "\n".join(lines)
