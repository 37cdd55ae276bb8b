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
    from confluent_kafka import TopicPartition

    from strongroom.audit.alerts import Fanout, FileSink
    from strongroom.audit.ledger import capture_ledger
    from strongroom.audit.oplog import DELETE_RECORDS, Operation, OperationsLog, PartitionChange
    from strongroom.audit.report import collect, write_report
    from strongroom.audit.scrub import ScrubOptions, run_scrub
    from strongroom.audit.store import LedgerPaths
    from strongroom.audit.watch import Watcher
    from strongroom.kafka.config import ClientConfig

    bootstrap = ctx.cluster.bootstrap_servers
    client = ClientConfig(bootstrap)
    ctx.cluster.create_topic(AUDIT_TOPIC, partitions=3)
    producer = new_producer(client)
    for i in range(900):
        producer.produce(
            AUDIT_TOPIC, key=f"account-{i % 40}".encode(), value=f'{{"payment": {i}}}'.encode(), partition=i % 3
        )
        producer.poll(0)
    producer.flush(30)
    ledger = LedgerPaths(str(ctx.workdir / "ledger"))
    capture_ledger(ctx.spark, client, [AUDIT_TOPIC], ledger, once=True)
    ctx.say(f"    captured a ledger of {AUDIT_TOPIC!r}: (leader epoch, offset, timestamp, content hashes) per record")

    sink = _Collect()
    alerts_file = ledger.local(ledger.alerts) / "alerts.jsonl"
    watcher = Watcher(
        client,
        topics=[AUDIT_TOPIC],
        ledger=ledger,
        state_path=ctx.workdir / "watch-state.json",
        sink=Fanout([sink, FileSink(alerts_file)]),
    )
    watcher.poll_once()
    clean = run_scrub(ctx.spark, client, ledger, ScrubOptions(span_ms=3_600_000))
    score = clean.score.to_json()
    ctx.say(
        f"    clean scrub: {clean.counts['ok']} records ok of {score['audited']} audited - "
        f"durability {score['display']} (at least {score['demonstrable_nines']} nines shown)"
    )

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
    for alert in watcher.poll_once():
        ctx.say(f"    watcher [{alert.severity}] {alert.kind}: {alert.message}")

    after = run_scrub(ctx.spark, client, ledger, ScrubOptions(span_ms=3_600_000))
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


CHAPTERS: list[tuple[str, Chapter]] = [
    ("Durability audit: a ledger, a perfect scrub, then deletions found and told apart", durability_audit),
]
