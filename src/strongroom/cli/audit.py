"""``strongroom audit``: ledger capture, scrub, sensitive-operation watcher, justify, report.

Exit codes: 0 = done and nothing lost; 1 = handled error; 2 = usage error; 4 = the scrub found
records that are not durable (missing, altered, diverged, expired-unjustified), or ``watch
--once/--duration`` raised a critical alert.
"""

from __future__ import annotations

import json
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from strongroom.cli.common import (
    JAVA_LONG_MAX,
    FiniteFloatRange,
    client_config,
    kafka_options,
    spark_master_option,
    spark_session,
)
from strongroom.cli.output import Output
from strongroom.text import table

EXIT_FINDINGS = 4
_EXIT_CODES = "Exit codes: 0 ok, 1 error, 2 usage, 4 records not durable / critical alert."

F = TypeVar("F", bound=Callable[..., Any])


def _ledger_option(func: F) -> F:
    return click.option(
        "--ledger",
        "ledger_path",
        metavar="PATH",
        help="Ledger root: a local path or any Spark-supported URI (s3a://...) [default: $STRONGROOM_HOME/ledger].",
    )(func)


def _ledger(path: str | None) -> Any:
    from strongroom.audit.store import LedgerPaths, default_ledger_path

    return LedgerPaths(path or default_ledger_path())


def _duration(_ctx: click.Context, _param: click.Parameter, value: str | None) -> int | None:
    from strongroom.audit.errors import InvalidDuration
    from strongroom.audit.units import parse_duration_ms

    if value is None:
        return None
    try:
        return parse_duration_ms(value)
    except InvalidDuration as exc:
        raise click.BadParameter(str(exc)) from None


def _duration_or_zero(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    if value is not None and value.strip() in ("0", "0s", "0ms"):
        return 0
    return _duration(ctx, param, value)


@click.group(epilog=_EXIT_CODES)
def audit() -> None:
    """Durability audit: capture a ledger, scrub the log against it, watch sensitive operations.

    The ledger records (topic, partition, offset, leader epoch, timestamp, content hashes) of every
    record as it is captured; the scrub compares the current log with it and scores durability in
    nines; the watcher validates log-start-offset advances, leader changes and config changes as
    they happen. See docs/audit.md.
    """


# ------------------------------------------------------------------------------------ ledger


_reader_option = click.option(
    "--reader", type=click.Choice(["jvm", "python"]), default="jvm", show_default=True,
    help="The Kafka reader: the JVM reader in the data-plane jar, or the slower Python reader (see docs/audit.md).",
)  # fmt: skip


@audit.command(epilog=_EXIT_CODES)
@kafka_options
@click.option("--topic", "topics", multiple=True, required=True, metavar="NAME", help="Topic to capture (repeatable).")
@_ledger_option
@click.option("--checkpoint", metavar="PATH", help="Spark checkpoint [default: <ledger>/checkpoint].")
@click.option("--once", is_flag=True, help="Capture everything up to now, then stop.")
@click.option("--trigger-seconds", type=FiniteFloatRange(min=0.1), default=10.0, show_default=True,
              help="Micro-batch interval when running continuously.")  # fmt: skip
@click.option("--duration", type=FiniteFloatRange(min=1), metavar="SECONDS", help="Stop after this many seconds.")
@click.option("--starting-offsets", type=click.Choice(["earliest", "latest"]), default="earliest", show_default=True,
              help="Where a new capture starts (ignored when the checkpoint exists).")  # fmt: skip
@_reader_option
@spark_master_option
@click.pass_context
def ledger(
    ctx: click.Context,
    bootstrap: str | None,
    command_config: str | None,
    topics: tuple[str, ...],
    ledger_path: str | None,
    checkpoint: str | None,
    once: bool,
    trigger_seconds: float,
    duration: float | None,
    starting_offsets: str,
    reader: str,
    spark_master: str | None,
) -> None:
    """Capture the audited topics into the ledger (a Spark Structured Streaming job).

    Exactly-once: progress lives in the checkpoint, files are committed by Spark's file sink. Stop a
    continuous capture with Ctrl-C; it resumes where it stopped.
    """
    from strongroom.audit.ledger import capture_ledger
    from strongroom.audit.readers import AuditReader
    from strongroom.kafka.topics import require_topics

    out: Output = ctx.obj
    client = client_config(bootstrap, command_config)
    require_topics(client, topics)
    paths = _ledger(ledger_path)
    stop = threading.Event()
    previous = signal.getsignal(signal.SIGINT)
    if not once:
        signal.signal(signal.SIGINT, lambda *_: stop.set())
    spark = spark_session(spark_master, "strongroom-audit-ledger")

    def on_batch(progress: Any) -> None:
        out.progress(f"batch {progress['batchId']}: {progress['numInputRows']} rows", force=True)

    try:
        result = capture_ledger(
            spark, client, list(topics), paths, checkpoint=checkpoint, once=once, trigger_seconds=trigger_seconds,
            duration=duration, starting_offsets=starting_offsets, on_batch=on_batch, stop=stop.is_set,
            reader=AuditReader(reader),
        )  # fmt: skip
    finally:
        signal.signal(signal.SIGINT, previous)
    data = {"ledger": paths.root, "topics": list(topics), **result.to_json()}

    def text(d: dict[str, Any]) -> str:
        rows = [
            (t, p, o)
            for t, ps in sorted(d["end_offsets"].items())
            for p, o in sorted(ps.items(), key=lambda x: int(x[0]))
        ]
        return (
            f"captured {d['rows']} rows in {d['batches']} batches ({d['seconds']}s) into {d['ledger']}\n"
            + table(rows, ["topic", "partition", "next offset"])
        )  # fmt: skip

    out.result(data, text)


@audit.command(epilog=_EXIT_CODES)
@_ledger_option
@spark_master_option
@click.pass_context
def coverage(ctx: click.Context, ledger_path: str, spark_master: str | None) -> None:
    """Show what the ledger has seen: covered offset ranges, records and capture lag per partition."""
    from strongroom.audit.ledger import capture_stats, coverage_ranges, read_ledger

    out: Output = ctx.obj
    paths = _ledger(ledger_path)
    spark = spark_session(spark_master, "strongroom-audit-coverage")
    frame = read_ledger(spark, paths)
    ranges = coverage_ranges(frame).orderBy("topic", "partition", "range_start").collect()
    stats = {(r.topic, r.partition): r.asDict() for r in capture_stats(frame).collect()}
    parts: dict[tuple[str, int], dict[str, Any]] = {}
    for r in ranges:
        entry = parts.setdefault((r.topic, r.partition), {"topic": r.topic, "partition": r.partition, "ranges": []})
        entry["ranges"].append([r.range_start, r.range_end])
    for key, s in stats.items():
        entry = parts.setdefault(key, {"topic": key[0], "partition": key[1], "ranges": []})
        entry.update({k: s[k] for k in ("records", "first_capture", "last_capture", "lag_p50_ms", "lag_p99_ms",
                                        "lag_max_ms")})  # fmt: skip
    data = {"ledger": paths.root, "partitions": [parts[k] for k in sorted(parts)]}

    def text(d: dict[str, Any]) -> str:
        rows = [
            (p["topic"], p["partition"], " ".join(f"[{a},{b})" for a, b in p["ranges"]), p.get("records"),
             p.get("lag_p50_ms"), p.get("lag_p99_ms"))
            for p in d["partitions"]
        ]  # fmt: skip
        return table(rows, ["topic", "partition", "covered offsets", "records", "lag p50 ms", "lag p99 ms"])

    out.result(data, text)


# ------------------------------------------------------------------------------------ scrub


@audit.command(epilog=_EXIT_CODES)
@kafka_options
@_ledger_option
@click.option("--topic", "topics", multiple=True, metavar="NAME", help="Scrub only this topic (repeatable).")
@click.option("--span", default="1h", show_default=True, callback=_duration, metavar="DURATION",
              help="Score window by record timestamp (e.g. 10m, 1h, 1d).")  # fmt: skip
@click.option("--max-records-per-range", type=click.IntRange(1, JAVA_LONG_MAX), default=500_000, show_default=True,
              help="Split partitions into offset ranges of at most this many offsets.")  # fmt: skip
@click.option("--no-history", is_flag=True, help="Do not append this run to <ledger>/scrubs.")
@_reader_option
@spark_master_option
@click.pass_context
def scrub(
    ctx: click.Context,
    bootstrap: str | None,
    command_config: str | None,
    ledger_path: str | None,
    topics: tuple[str, ...],
    span: int,
    max_records_per_range: int,
    no_history: bool,
    reader: str,
    spark_master: str | None,
) -> None:
    """Compare the current log with the ledger; classify every record; score durability in nines."""
    from strongroom.audit.readers import AuditReader
    from strongroom.audit.scrub import ScrubOptions, run_scrub

    out: Output = ctx.obj
    client = client_config(bootstrap, command_config)
    paths = _ledger(ledger_path)
    spark = spark_session(spark_master, "strongroom-audit-scrub")
    summary = run_scrub(
        spark, client, paths,
        ScrubOptions(topics=list(topics) or None, span_ms=span, max_records_per_range=max_records_per_range,
                     write_history=not no_history, reader=AuditReader(reader)),
        progress=lambda label, done, total: out.progress(f"scrub: {label}", done=done, total=total),
    )  # fmt: skip
    out.result(summary.to_json(), _scrub_text)
    if summary.lost:
        ctx.exit(EXIT_FINDINGS)


def _scrub_text(s: dict[str, Any]) -> str:
    lines = [
        f"scrub {s['run_id']}: {s['score']['audited']} records audited, {s['records_read']} read from the log "
        f"in {s['seconds']}s - durability {s['score']['display']} ({s['score']['percent']})"
    ]
    statuses = ("ok", "expired-justified", "missing", "altered", "diverged", "expired-unjustified", "unledgered")
    rows = [(t["topic"], *(t["counts"].get(c, 0) for c in statuses), t["score"]["display"]) for t in s["topics"]]
    lines.append(table(rows, ["topic", *statuses, "score"]))
    span_rows = [
        (t["topic"], sp["span_start"], sp["score"]["audited"], sp["score"]["display"])
        for t in s["topics"]
        for sp in t["spans"]
    ]
    if span_rows:
        lines.append(f"\nper span ({s['span']}):")
        lines.append(table(span_rows, ["topic", "span start", "audited", "score"]))
    if s["examples"]:
        lines.append("\nfindings:")
        lines.append(
            table([(e["topic"], e["partition"], e["offset"], e["status"], e["reason"]) for e in s["examples"]],
                  ["topic", "partition", "offset", "status", "reason"])
        )  # fmt: skip
    return "\n".join(lines)


# ------------------------------------------------------------------------------------ watch


@audit.command(epilog=_EXIT_CODES)
@kafka_options
@click.option("--topic", "topics", multiple=True, metavar="NAME",
              help="Watch only this topic (repeatable) [default: all but internal ones].")  # fmt: skip
@click.option("--ledger", "ledger_path", metavar="PATH",
              help="Ledger to validate against (timestamps, epoch chain); alerts are also appended there.")  # fmt: skip
@click.option("--interval", default="5s", show_default=True, callback=_duration, metavar="DURATION")
@click.option("--grace", default="15s", show_default=True, callback=_duration_or_zero, metavar="DURATION",
              help="How long an unjustified log-start advance waits for its oplog entry (0 = none).")  # fmt: skip
@click.option("--alerts-topic", metavar="NAME", help="Also produce alerts to this Kafka topic (created if missing).")
@click.option("--webhook", metavar="URL", help="Also POST each alert as JSON to this URL.")
@click.option("--metrics-port", type=click.IntRange(min=0, max=65535), metavar="PORT",
              help="Serve Prometheus metrics on this port (0 = any free port).")  # fmt: skip
@click.option("--metrics-host", default="127.0.0.1", show_default=True, help="Address for the metrics endpoint.")
@click.option("--state", "state_file", type=click.Path(dir_okay=False), metavar="FILE",
              help="Previous observation [default: $STRONGROOM_HOME/audit/watch-<cluster>.json].")  # fmt: skip
@click.option("--once", is_flag=True, help="Poll once (compared with the saved state), then exit.")
@click.option("--duration", type=FiniteFloatRange(min=0), metavar="SECONDS", help="Stop after this many seconds.")
@click.option("--min-severity", type=click.Choice(["info", "warning", "critical"]), default="info", show_default=True)
@click.option("--check-erasures", is_flag=True,
              help="Also raise an erasure-overdue alert for each erasure past the deadline the keys topic's "
              "configs promise (as `erasure status --fail-on overdue`).")  # fmt: skip
@click.option("--keys-topic", envvar="STRONGROOM_KEYS_TOPIC", default="strongroom-keys", show_default=True,
              help="The keys topic --check-erasures reads.")  # fmt: skip
@click.option("--readers-topic", default="strongroom-key-readers", show_default=True,
              help="The key readers registry --check-erasures reads.")  # fmt: skip
@click.option("--erasure-interval", default="60s", show_default=True, callback=_duration, metavar="DURATION",
              help="How often --check-erasures looks.")  # fmt: skip
@click.pass_context
def watch(
    ctx: click.Context,
    bootstrap: str | None,
    command_config: str | None,
    topics: tuple[str, ...],
    ledger_path: str | None,
    interval: int,
    grace: int,
    alerts_topic: str | None,
    webhook: str | None,
    metrics_port: int | None,
    metrics_host: str,
    state_file: str | None,
    once: bool,
    duration: float | None,
    min_severity: str,
    check_erasures: bool,
    keys_topic: str,
    readers_topic: str,
    erasure_interval: int,
) -> None:
    """Watch sensitive operations: log start offsets, leaders and epochs, ISR, topic configs.

    Alerts and events are JSON lines on stdout (and the other sinks); with --output json the last
    line is a summary object.
    """
    import hashlib

    from strongroom.audit.alerts import AlertSink, Fanout, FileSink, KafkaSink, StdoutSink, WebhookSink
    from strongroom.audit.erasure_deadlines import OverdueErasures
    from strongroom.audit.metrics import WatchMetrics
    from strongroom.audit.watch import Watcher
    from strongroom.paths import home_dir

    out: Output = ctx.obj
    client = client_config(bootstrap, command_config)
    paths = _ledger(ledger_path) if ledger_path else None
    sinks: list[AlertSink] = [StdoutSink()]
    if paths is not None and paths.is_local:
        sinks.append(FileSink(paths.local(paths.alerts) / "alerts.jsonl"))
    if alerts_topic:
        sinks.append(KafkaSink(client, alerts_topic))
    if webhook:
        sinks.append(WebhookSink(webhook))
    fanout = Fanout(sinks, min_severity=min_severity)
    metrics = WatchMetrics() if metrics_port is not None else None
    if state_file is None:
        digest = hashlib.sha256(client.bootstrap_servers.encode()).hexdigest()[:12]
        state_path = home_dir() / "audit" / f"watch-{digest}.json"
    else:
        state_path = Path(state_file)
    watcher = Watcher(
        client, topics=list(topics) or None, ledger=paths, state_path=state_path, sink=fanout, metrics=metrics,
        exclude=[alerts_topic] if alerts_topic else [], grace=grace / 1000,
        erasures=OverdueErasures(
            client, keys_topic=keys_topic, readers_topic=readers_topic, interval=erasure_interval / 1000
        ) if check_erasures else None,
    )  # fmt: skip
    stop = threading.Event()
    previous = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        if metrics is not None:
            port = metrics.serve(metrics_port or 0, metrics_host)
            out.note(f"metrics on http://{metrics_host}:{port}/metrics")
        out.note(f"watching {client.bootstrap_servers} every {interval / 1000:g}s (state {state_path})")
        watcher.run(interval=interval / 1000, once=once, duration=duration, should_stop=stop.is_set)
    finally:
        signal.signal(signal.SIGINT, previous)
        fanout.close()
        if metrics is not None:
            metrics.close()
    raised = watcher.raised
    summary = {
        "polls": watcher.polls,
        "alerts": sum(1 for a in raised if a.is_alert),
        "critical": sum(1 for a in raised if a.severity == "critical"),
        "events": sum(1 for a in raised if not a.is_alert),
        "sink_errors": fanout.errors,
        "state": str(state_path),
    }
    if out.name == "json":
        click.echo(json.dumps({"summary": summary}))
    else:
        out.note(f"{summary['polls']} polls, {summary['alerts']} alerts ({summary['critical']} critical), "
                 f"{summary['events']} events")  # fmt: skip
    if summary["critical"] and (once or duration is not None):
        ctx.exit(EXIT_FINDINGS)


# ------------------------------------------------------------------------------------ operations log


@audit.command(epilog=_EXIT_CODES)
@kafka_options
@click.option("--topic", required=True, metavar="NAME")
@click.option("--partition", "partitions", type=int, multiple=True, required=True, metavar="N",
              help="Partition (repeatable).")  # fmt: skip
@click.option("--up-to-offset", type=click.IntRange(min=0), required=True, metavar="OFFSET",
              help="Records below this offset are deleted on purpose.")  # fmt: skip
@click.option("--reason", required=True, help="Why (ticket, request): recorded with who and when.")
@click.option("--plan-id", metavar="ID", help="The plan or change id this deletion belongs to.")
@click.option("--execute", is_flag=True, help="Also delete the records (after recording the justification).")
@click.pass_context
def justify(
    ctx: click.Context,
    bootstrap: str | None,
    command_config: str | None,
    topic: str,
    partitions: tuple[int, ...],
    up_to_offset: int,
    reason: str,
    plan_id: str | None,
    execute: bool,
) -> None:
    """Record an intentional deletion (delete-records) in the operations log, before doing it.

    The scrub and the watcher then treat offsets below --up-to-offset as justified. With --execute
    the records are deleted right after the entry is acknowledged.
    """
    from strongroom.audit.kafka_state import ClusterState
    from strongroom.audit.oplog import DELETE_RECORDS, Operation, OperationsLog, PartitionChange
    from strongroom.errors import KafkaError
    from strongroom.kafka.transport import error_text

    out: Output = ctx.obj
    client = client_config(bootstrap, command_config)
    cluster = ClusterState(client)
    md = cluster.partitions_of([topic])[topic]
    unknown = [p for p in partitions if p not in md.partitions]
    if unknown:
        raise click.BadParameter(f"{topic} has no partition {unknown[0]} (it has {len(md.partitions)})")
    starts = cluster.list_offsets([(topic, p) for p in partitions], "earliest")
    ends = cluster.list_offsets([(topic, p) for p in partitions], "latest", committed=False)
    for p in partitions:
        end = ends.get((topic, p), (None, None))[0]
        if end is None:
            raise KafkaError(f"cannot read where {topic}[{p}] ends", hint="check that its leader is up, then retry")
        if up_to_offset > end:
            raise click.BadParameter(
                f"--up-to-offset {up_to_offset} is beyond the end of {topic}[{p}] (offset {end}): Kafka deletes only "
                "records that exist, and a justification beyond them would excuse the loss of records written later"
            )
    op = Operation(
        kind=DELETE_RECORDS, topic=topic, reason=reason, plan_id=plan_id,
        partitions=tuple(PartitionChange(p, starts.get((topic, p), (None, None))[0], up_to_offset) for p in partitions),
        details={"executed_by_strongroom": execute},
    )  # fmt: skip
    recorded = OperationsLog(client).record(op)
    data: dict[str, Any] = {"operation": recorded.to_json(), "log_offset": recorded.log_offset, "executed": False}
    if execute:
        from confluent_kafka import TopicPartition

        futures = cluster.admin.delete_records([TopicPartition(topic, p, up_to_offset) for p in partitions])
        try:
            for fut in futures.values():
                fut.result(30)
        except Exception as exc:
            raise KafkaError(
                f"recorded operation {recorded.id}, but deleting records of {topic} failed: {error_text(exc)}",
                hint="fix the cause and delete with kafka-delete-records; the justification stays recorded",
            ) from exc
        data["executed"] = True
    out.result(
        data,
        lambda d: (
            f"recorded {d['operation']['kind']} {d['operation']['id']} for {topic} {list(partitions)} "
            f"below offset {up_to_offset}" + (" and deleted the records" if d["executed"] else "")
        ),
    )


@audit.command()
@kafka_options
@click.option("--since", callback=_duration, metavar="DURATION", help="Only operations of the last DURATION.")
@click.option("--topic", metavar="NAME", help="Only operations on this topic.")
@click.pass_context
def operations(
    ctx: click.Context, bootstrap: str | None, command_config: str | None, since: int | None, topic: str | None
) -> None:
    """List the operations log (intentional sensitive operations), oldest first."""
    import time

    from strongroom.audit.oplog import OperationsLog

    out: Output = ctx.obj
    client = client_config(bootstrap, command_config)
    since_ms = None if since is None else int(time.time() * 1000) - since
    ops = OperationsLog(client).read(since_ms, topic=topic)
    data = {"operations": [o.to_json() for o in ops]}
    out.result(
        data,
        lambda d: table(
            [(o["when"], o["kind"], o["topic"], o["who"], o["reason"], o["plan_id"]) for o in d["operations"]],
            ["when", "kind", "topic", "who", "reason", "plan"],
        ),
    )


# ------------------------------------------------------------------------------------ report


@audit.command(epilog=_EXIT_CODES)
@_ledger_option
@click.option("--output-dir", required=True, type=click.Path(file_okay=False), metavar="DIR")
@kafka_options
@spark_master_option
@click.pass_context
def report(
    ctx: click.Context,
    ledger_path: str | None,
    output_dir: str,
    bootstrap: str | None,
    command_config: str | None,
    spark_master: str | None,
) -> None:
    """Write the audit report: audit-report.html (self-contained, offline) and audit-report.json.

    With --bootstrap-server the operations log joins the incident timeline.
    """
    from strongroom.audit.oplog import OperationsLog
    from strongroom.audit.report import collect, write_report

    out: Output = ctx.obj
    paths = _ledger(ledger_path)
    operations = OperationsLog(client_config(bootstrap, command_config)).read() if bootstrap or command_config else []
    spark = None if paths.is_local else spark_session(spark_master, "strongroom-audit-report")
    data = collect(paths, operations=operations, spark=spark)
    html_path, json_path = write_report(data, Path(output_dir))
    result = {"html": str(html_path), "json": str(json_path), "latest_run": data["latest_run"],
              "timeline_events": len(data["timeline"])}  # fmt: skip
    out.result(result, lambda d: f"wrote {d['html']} and {d['json']}")
