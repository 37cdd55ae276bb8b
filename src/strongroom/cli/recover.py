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

from strongroom.cli.common import (
    FiniteFloatRange,
    RecordSourceOptions,
    client_config,
    format_and_kms_options,
    kafka_options,
    progress_to,
    spark_master_option,
    spark_session,
)
from strongroom.cli.factories import build_format, build_kms, check_format_options, open_key_chain
from strongroom.cli.output import Output
from strongroom.recovery.plan import RemedyKind
from strongroom.recovery.render import render_apply, render_plan
from strongroom.text import table

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
    type=FiniteFloatRange(0, 1000),
    default=0.1,
    show_default=True,
    help="Scattered when the readable records below L exceed this share of the lost records.",
)
@click.option(
    "--probe-timeout",
    type=FiniteFloatRange(1, 600),
    default=30.0,
    show_default=True,
    help="Seconds to wait for one round of probe fetches.",
)
@spark_master_option
@click.pass_context
def scan(ctx: click.Context, /, bootstrap: str | None, command_config: str | None, topic: str,
         source: RecordSourceOptions, assumed_lost: tuple[str, ...], plan_out: str | None, no_verify: bool,
         max_collateral_ratio: float, probe_timeout: float, spark_master: str | None) -> None:  # fmt: skip
    """Find, per partition, the lowest offset L from which every record is readable, verify it, write a plan."""
    from strongroom.errors import ConfigError
    from strongroom.kafka.topics import require_topics
    from strongroom.recovery.checker import AvailabilityChecker
    from strongroom.recovery.kafka_io import ClusterView, KafkaProbe
    from strongroom.recovery.plan import write_plan
    from strongroom.recovery.scan import ScanOptions, run_scan
    from strongroom.recovery.spark_jobs import kafka_source_options

    out: Output = ctx.obj
    check_format_options(source)
    config = client_config(bootstrap, command_config)
    kms = build_kms(source)
    if kms is None:
        raise ConfigError(
            "recover scan needs the KMS that holds the KEKs (to tell readable from lost records)",
            hint="pass --kms vault|aws|local|inmemory with its options, or --kms-config FILE",
        )
    fmt = build_format(source, kms)
    chain = open_key_chain(source, config, kms)
    checker = AvailabilityChecker(fmt, kms, assumed_lost=assumed_lost, subject_keys=chain)
    options = ScanOptions(
        topic=topic,
        verify=not no_verify,
        max_collateral_ratio=max_collateral_ratio,
        assumed_lost=tuple(assumed_lost),
    )
    view = ClusterView(config)
    progress = progress_to(out)
    try:
        require_topics(config, [topic])
        spark = None if options.verify is False else spark_session(spark_master, "strongroom-recovery")
        with KafkaProbe(config, options.topic, timeout=probe_timeout) as probe:
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
    path = Path(plan_out or default_plan_path(options.topic))
    write_plan(plan.to_json(), path)
    out.result({**plan.to_json(), "plan_file": str(path)}, lambda _data: render_plan(plan, str(path)))
    kind = plan.remedy.kind
    if kind in (RemedyKind.SCATTERED, RemedyKind.MIXED):
        ctx.exit(EXIT_SCATTERED_LOSS)
    if kind == RemedyKind.PREFIX:
        ctx.exit(EXIT_PREFIX_LOSS)


def default_plan_path(topic: str) -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in topic)
    return f"strongroom-plan-{safe}-{stamp}.json"


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
def apply(ctx: click.Context, /, bootstrap: str | None, command_config: str | None, plan_file: str,
          action: str | None, groups: tuple[str, ...], all_groups: bool, dry_run: bool,
          reason: str | None) -> None:  # fmt: skip
    """Apply a plan: --delete-records or --reset-offsets --group G; a dry run unless --execute."""
    from strongroom.recovery.apply import ApplyOptions, OperationsLogRecorder, apply_plan
    from strongroom.recovery.kafka_io import ClusterView
    from strongroom.recovery.plan import load_plan

    out: Output = ctx.obj
    if action is None:
        raise click.UsageError("choose --delete-records or --reset-offsets")
    if action == "delete-records" and (groups or all_groups):
        raise click.UsageError("--group/--all-groups go with --reset-offsets, not --delete-records")
    plan = load_plan(Path(plan_file))
    config = client_config(bootstrap, command_config)
    view = ClusterView(config)
    recorder = None
    if not dry_run:
        from strongroom.audit.oplog import OperationsLog

        oplog = OperationsLog(config)
        oplog.ensure_topic()  # an unreachable operations log stops us before anything changes
        recorder = OperationsLogRecorder(oplog)
    options = ApplyOptions(
        action="delete-records" if action == "delete-records" else "reset-offsets",
        groups=groups,
        all_groups=all_groups,
        execute=not dry_run,
        reason=reason,
    )
    report = apply_plan(view, plan, options, recorder, progress=out.note)
    out.result(report.to_json(), lambda _data: render_apply(report))


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
def mark_lost(ctx: click.Context, /, bootstrap: str | None, command_config: str | None, plan_file: str,
              source: RecordSourceOptions, dry_run: bool, reason: str | None,
              declared_by: str | None) -> None:  # fmt: skip
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
    if source.record_format != "strongroom":
        raise click.UsageError("mark-lost is for strongroom's per-subject keys (--format strongroom)")
    plan = load_plan(Path(plan_file))
    if source.keys_topic and plan.keys_topic and source.keys_topic != plan.keys_topic:
        raise click.UsageError(f"--keys-topic {source.keys_topic} differs from the plan's keys topic {plan.keys_topic}")
    config = client_config(bootstrap, command_config)
    view = ClusterView(config)
    kms = build_kms(source)
    try:
        recorder = None if dry_run else _lost_recorder(config, OperationsLogLostRecorder)
        options = MarkLostOptions(execute=not dry_run, reason=reason, declared_by=declared_by)
        report = run_mark_lost(view, config, plan, options, recorder, kms, progress=out.note)
    finally:
        if kms is not None:
            kms.close()
    out.result(report.to_json(), render_lost)


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
def unmark_lost(ctx: click.Context, /, bootstrap: str | None, command_config: str | None, wk_ids: tuple[str, ...],
                keys_topic: str, dry_run: bool, reason: str | None, declared_by: str | None) -> None:  # fmt: skip
    """Undo `mark-lost` for wrapping keys whose KEK was restored: readers use their keys again.

    Restore the KEK first: without it readers fail on these records again, as before the marking.
    """
    from strongroom.recovery.mark_lost import MarkLostOptions, OperationsLogLostRecorder
    from strongroom.recovery.mark_lost import unmark_lost as run_unmark_lost

    out: Output = ctx.obj
    parsed: list[bytes] = []
    for text in wk_ids:
        try:
            raw = bytes.fromhex(text)
        except ValueError:
            raw = b""
        if len(raw) != 16:
            raise click.BadParameter(f"{text!r} is not a wrapping key id (32 hex digits)", param_hint="--wk")
        parsed.append(raw)
    config = client_config(bootstrap, command_config)
    recorder = None if dry_run else _lost_recorder(config, OperationsLogLostRecorder)
    options = MarkLostOptions(execute=not dry_run, reason=reason, declared_by=declared_by)
    report = run_unmark_lost(config, keys_topic, parsed, options, recorder, progress=out.note)
    out.result(report.to_json(), render_lost)


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
