"""Demo chapter: the durability audit - a clean ledger scores perfect, injected deletions are found.

On the demo's one-broker cluster: capture a ledger of a topic, scrub (all ``ok``, a perfect score),
then delete records twice - once without a word (the watcher raises a critical alert, the scrub
finds ``expired-unjustified`` records) and once recorded in the operations log first (a justified
event, ``expired-justified`` records) - scrub again and write the HTML report. Unclean elections and
acks=1 loss need three brokers and several broker restarts, too slow for a demo: the integration
tests show those on real 3-broker clusters.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from strongroom.demo.story import Chapter, DemoContext
from strongroom.kafka.transport import new_producer

AUDIT_TOPIC = "payments"


class _Collect:
    name = "demo"

    def __init__(self) -> None:
        self.alerts: list[Any] = []

    def emit(self, alerts: Sequence[Any]) -> None:
        self.alerts.extend(alerts)

    def close(self) -> None:
        pass


def durability_audit(ctx: DemoContext) -> dict[str, Any]:
    from strongroom.audit.oplog import OperationsLog
    from strongroom.audit.report import collect, write_report
    from strongroom.audit.store import LedgerPaths
    from strongroom.kafka.config import ClientConfig

    client = ClientConfig(ctx.cluster.bootstrap_servers)
    ledger = LedgerPaths(str(ctx.workdir / "ledger"))
    _capture_ledger(ctx, client, ledger)
    sink = _Collect()
    watcher = _watcher(ctx, client, ledger, sink)
    clean = _scrub(ctx, client, ledger)
    score = clean.score.to_json()
    ctx.say(
        f"    clean scrub: {clean.counts['ok']} records ok of {score['audited']} audited - "
        f"durability {score['display']} (at least {score['demonstrable_nines']} nines shown)"
    )
    _delete_records_twice(ctx, client)
    for alert in watcher.poll_once():
        ctx.say(f"    watcher [{alert.severity}] {alert.kind}: {alert.message}")
    after = _scrub(ctx, client, ledger)
    counts = after.counts
    ctx.say(
        f"    scrub again: ok {counts['ok']}, expired-justified {counts['expired-justified']}, "
        f"expired-unjustified {counts['expired-unjustified']} - durability {after.score.display} "
        f"({after.score.to_json()['percent']})"
    )
    html, _ = write_report(collect(ledger, operations=OperationsLog(client).read()), ctx.workdir / "audit-report")
    ctx.say(f"    report: {html}")
    return {
        "topic": AUDIT_TOPIC,
        "clean_score": clean.score.display,
        "after_faults": {k: v for k, v in counts.items() if v},
        "score": after.score.display,
        "alerts": [{"kind": a.kind, "severity": a.severity, "partition": a.partition} for a in sink.alerts],
        "report": str(html),
    }


def _capture_ledger(ctx: DemoContext, client: Any, ledger: Any) -> None:
    """900 payments on three partitions, captured into a ledger."""
    from strongroom.audit.ledger import capture_ledger

    ctx.cluster.create_topic(AUDIT_TOPIC, partitions=3)
    producer = new_producer(client)
    for i in range(900):
        producer.produce(
            AUDIT_TOPIC, key=f"account-{i % 40}".encode(), value=f'{{"payment": {i}}}'.encode(), partition=i % 3
        )
        producer.poll(0)
    producer.flush(30)
    capture_ledger(ctx.spark, client, [AUDIT_TOPIC], ledger, once=True)
    ctx.say(f"    captured a ledger of {AUDIT_TOPIC!r}: (leader epoch, offset, timestamp, content hashes) per record")


def _watcher(ctx: DemoContext, client: Any, ledger: Any, sink: _Collect) -> Any:
    """The sensitive-operation watcher, with a first look at the topic as it is now."""
    from strongroom.audit.alerts import Fanout, FileSink
    from strongroom.audit.watch import Watcher

    watcher = Watcher(
        client,
        topics=[AUDIT_TOPIC],
        ledger=ledger,
        state_path=ctx.workdir / "watch-state.json",
        sink=Fanout([sink, FileSink(ledger.local(ledger.alerts) / "alerts.jsonl")]),
    )
    watcher.poll_once()
    return watcher


def _scrub(ctx: DemoContext, client: Any, ledger: Any) -> Any:
    from strongroom.audit.scrub import ScrubOptions, run_scrub

    return run_scrub(ctx.spark, client, ledger, ScrubOptions(span_ms=3_600_000))


def _delete_records_twice(ctx: DemoContext, client: Any) -> None:
    """Fault 1: a deletion nobody recorded. Fault 2: one recorded in the operations log first."""
    from confluent_kafka import TopicPartition

    from strongroom.audit.oplog import DELETE_RECORDS, Operation, OperationsLog, PartitionChange

    admin = ctx.cluster.admin()
    for fut in admin.delete_records([TopicPartition(AUDIT_TOPIC, 0, 50)]).values():
        fut.result(30)
    ctx.say("    fault 1: deleted the first 50 records of partition 0 and told nobody")
    OperationsLog(client).record(
        Operation(
            kind=DELETE_RECORDS,
            topic=AUDIT_TOPIC,
            reason="demo: retention request DEMO-1",
            partitions=(PartitionChange(1, 0, 50),),
        )
    )
    for fut in admin.delete_records([TopicPartition(AUDIT_TOPIC, 1, 50)]).values():
        fut.result(30)
    ctx.say("    fault 2: recorded a deletion in the operations log, then deleted 50 records of partition 1")


CHAPTERS: list[tuple[str, Chapter]] = [
    ("Durability audit: a ledger, a perfect scrub, then deletions found and told apart", durability_audit),
]
