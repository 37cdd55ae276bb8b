"""Demo chapter: a KEK is deleted mid-stream; consumers fail; inventory → scan → plan → apply; they resume.

The stream is encrypted in WRAPPED_DEK mode (one DEK per window, as a Kroxylicious-style proxy
does), the writer moves from KEK A to KEK B half way, and KEK A is then deleted in OpenBao. The
``billing`` consumer group is stuck on the first record it cannot decrypt; recovery finds the
boundary, plans, resets the group past the loss (dry run, then for real, recorded in the
operations log), and billing resumes.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

from strongroom.demo.story import Chapter, DemoContext
from strongroom.kafka.transport import new_consumer, new_producer

TOPIC = "payments-encrypted"
GROUP = "billing"


def _produce(ctx: DemoContext, kms: Any, kek: str, count: int, start: int) -> None:

    from strongroom.crypto.limits import DekUsagePolicy
    from strongroom.envelope import RecordContext, ValueMode, marker_header
    from strongroom.kafka.config import ClientConfig
    from strongroom.kms.envelope_keys import RotatingDekSource

    source = RotatingDekSource(kms, kek, DekUsagePolicy(max_encryptions=40))
    producer = new_producer(ClientConfig(ctx.cluster.bootstrap_servers))
    for i in range(start, start + count):
        key = f"customer-{i % 17}".encode()
        payment = json.dumps({"payment": i, "amount": round(10 + i * 0.37, 2), "currency": "EUR"}).encode()
        value = source.seal(payment, RecordContext(TOPIC, key))
        producer.produce(TOPIC, value=value, key=key, headers=[marker_header(ValueMode.WHOLE_VALUE)])
    producer.flush(30)


def _billing_reads(ctx: DemoContext, kms: Any, limit: int) -> tuple[int, str | None]:
    """The billing application: read from its committed offsets, decrypt, commit; stop at the first failure."""
    from confluent_kafka import TopicPartition

    from strongroom.envelope import RecordContext, decrypt_value
    from strongroom.errors import StrongroomError
    from strongroom.kafka.config import ClientConfig
    from strongroom.kms.envelope_keys import kms_key_lookup

    consumer = new_consumer(ClientConfig(ctx.cluster.bootstrap_servers), GROUP, {"enable.partition.eof": True})
    partitions = [TopicPartition(TOPIC, p) for p in (0, 1)]
    committed = _committed(consumer, partitions)
    consumer.assign([TopicPartition(TOPIC, tp.partition, max(tp.offset, 0)) for tp in committed])
    lookup = kms_key_lookup(kms)
    read, failure = 0, None
    at_end: set[int] = set()
    deadline = time.monotonic() + 20
    try:
        while read < limit and len(at_end) < 2 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            partition, offset, value = msg.partition(), msg.offset(), msg.value()
            if msg.error() or partition is None or offset is None or value is None:
                at_end.add(partition or 0)
                continue
            try:
                decrypt_value(value, lookup, RecordContext(TOPIC, msg.key() or b""))
            except StrongroomError as exc:
                failure = f"{TOPIC}-{partition} offset {offset}: {exc.problem}"
                break
            consumer.commit(offsets=[TopicPartition(TOPIC, partition, offset + 1)], asynchronous=False)
            read += 1
    finally:
        consumer.close()
    return read, failure


def _committed(consumer: Any, partitions: list[Any]) -> Any:
    """Committed offsets, waiting out a group coordinator that is still loading (fresh clusters)."""
    from confluent_kafka import KafkaException

    deadline = time.monotonic() + 30
    while True:
        try:
            return consumer.committed(partitions, timeout=10)
        except KafkaException:
            if time.monotonic() > deadline:  # NOT_COORDINATOR is not flagged retriable, but passes
                raise
            time.sleep(0.5)


@dataclass(frozen=True)
class _Stage:
    """What the chapter's steps share: the cluster's client settings and the readers' KMS."""

    config: Any
    reader_kms: Any
    view: Any


def lost_kek_recovery(ctx: DemoContext) -> dict[str, Any]:
    from strongroom.kafka.config import ClientConfig
    from strongroom.kms.retrying import RetryingKms
    from strongroom.kms.vault import VaultKms
    from strongroom.recovery.kafka_io import ClusterView

    config = ClientConfig(ctx.cluster.bootstrap_servers)
    vault = {"address": ctx.openbao.address, "token": ctx.openbao.token}
    stage = _Stage(config, RetryingKms(VaultKms.from_config(vault), max_attempts=3), ClusterView(config))
    kek_b = _write_then_lose_kek_a(ctx, stage, VaultKms.from_config(vault))
    report = _inventory(ctx, stage, kek_b)
    plan = _scan(ctx, stage)
    _apply(ctx, stage, plan)
    read, failure = _billing_reads(ctx, stage.reader_kms, limit=10_000)
    ctx.say(f"\n    {GROUP!r} resumes from L: read {read} payments, failures: {failure or 'none'}")
    return {
        "topic": TOPIC,
        "boundaries": {p.partition: p.boundary for p in plan.partitions},
        "lost_records": sum(p.lost or 0 for p in plan.partitions),
        "fetches": sum(p.fetches for p in plan.partitions),
        "resumed_reads": read,
        "resumed_failure": failure,
        "safe_to_delete_kek_b": report.question is not None and report.question.safe_to_delete,
    }


def _write_then_lose_kek_a(ctx: DemoContext, stage: _Stage, writer: Any) -> str:
    """The writer moves from KEK A to KEK B half way; billing reads some; KEK A is deleted; billing fails.
    Returns KEK B."""
    from strongroom.kms.admin.vault import VaultKekAdmin

    admin = VaultKekAdmin(ctx.openbao.client())
    suffix = uuid.uuid4().hex[:6]
    kek_a, kek_b = admin.create_kek(f"payments-a-{suffix}"), admin.create_kek(f"payments-b-{suffix}")
    ctx.cluster.create_topic(TOPIC, partitions=2)
    _produce(ctx, writer, kek_a, 240, 0)
    ctx.say(f"    wrote 240 payments under KEK A (vault:{kek_a}, a new DEK every 40 records) ...")
    _produce(ctx, writer, kek_b, 160, 240)
    ctx.say(f"    ... then the writer rotated to KEK B (vault:{kek_b}) and wrote 160 more")
    read, _ = _billing_reads(ctx, stage.reader_kms, limit=60)
    ctx.say(f"    consumer group {GROUP!r} read and committed {read} payments, then stopped for the night")

    admin.delete_kek(kek_a)
    ctx.say(f"    !! KEK A was deleted from OpenBao (transit/keys/{kek_a}) while data still needed it")
    read, failure = _billing_reads(ctx, stage.reader_kms, limit=10_000)
    ctx.say(f"    {GROUP!r} restarts: read {read} more, then FAILED at {failure}")
    return kek_b


def _inventory(ctx: DemoContext, stage: _Stage, kek_b: str) -> Any:
    from strongroom.recovery.checker import AvailabilityChecker
    from strongroom.recovery.formats import StrongroomFormat
    from strongroom.recovery.inventory import InventoryOptions, run_inventory
    from strongroom.recovery.render import render_inventory
    from strongroom.recovery.spark_jobs import kafka_source_options

    ctx.say("\n    $ strongroom kek inventory --topic payments-encrypted --kms vault --kek " + kek_b)
    checker = AvailabilityChecker(StrongroomFormat(), stage.reader_kms)
    report = run_inventory(
        ctx.spark, stage.view, kafka_source_options(stage.config), checker,
        InventoryOptions(topics=[TOPIC], question_kek=kek_b), has_kms=True,
    )  # fmt: skip
    for line in render_inventory(report).splitlines():
        ctx.say("      " + line)
    return report


def _scan(ctx: DemoContext, stage: _Stage) -> Any:
    from strongroom.recovery.checker import AvailabilityChecker
    from strongroom.recovery.formats import StrongroomFormat
    from strongroom.recovery.kafka_io import KafkaProbe
    from strongroom.recovery.plan import write_plan
    from strongroom.recovery.render import render_plan
    from strongroom.recovery.scan import ScanOptions, run_scan
    from strongroom.recovery.spark_jobs import kafka_source_options

    ctx.say("\n    $ strongroom recover scan --topic payments-encrypted --kms vault --plan-out plan.json")
    scan_checker = AvailabilityChecker(StrongroomFormat(), stage.reader_kms)
    with KafkaProbe(stage.config, TOPIC) as probe:
        plan = run_scan(
            stage.view, probe, scan_checker, ScanOptions(topic=TOPIC), spark=ctx.spark,
            source_options=kafka_source_options(stage.config),
        )  # fmt: skip
    plan_file = ctx.workdir / "plan.json"
    write_plan(plan.to_json(), plan_file)
    for line in render_plan(plan, str(plan_file)).splitlines():
        ctx.say("      " + line)
    return plan


def _apply(ctx: DemoContext, stage: _Stage, plan: Any) -> None:
    """The plan's remedy for billing: a dry run, then for real (recorded in the operations log)."""
    from strongroom.audit.oplog import OperationsLog
    from strongroom.recovery.apply import ApplyOptions, OperationsLogRecorder, apply_plan
    from strongroom.recovery.render import render_apply

    recorder = OperationsLogRecorder(OperationsLog(stage.config))
    for execute in (False, True):
        flag = "--execute" if execute else "(dry run)"
        ctx.say(f"\n    $ strongroom recover apply --plan plan.json --reset-offsets --group {GROUP} {flag}")
        result = apply_plan(
            stage.view, plan, ApplyOptions("reset-offsets", groups=[GROUP], execute=execute),
            recorder if execute else None,
        )  # fmt: skip
        for line in render_apply(result).splitlines():
            ctx.say("      " + line)


CHAPTERS: list[tuple[str, Chapter]] = [
    ("A KEK is deleted mid-stream: inventory, scan, plan, apply — and consumers resume", lost_kek_recovery),
]
