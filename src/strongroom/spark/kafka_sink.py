"""Exactly-once Kafka output for Spark micro-batches: one transaction per source partition.

Spark's own Kafka sink is at-least-once: a micro-batch replayed after a crash is written twice. This
sink makes the output exactly-once with Kafka transactions and the source offsets themselves as the
durable record of what was written:

* Every task handles the rows of one source topic-partition (Spark's Kafka source plans one task per
  offset range and the pipelines only add narrow transformations). For source partition ``(t, p)``
  the task uses the transactional id ``strongroom-<app>-<t>-<p>``: ``init_transactions`` fences any
  zombie still holding that id (a killed attempt, a speculative duplicate) and completes or aborts
  its open transaction.
* It then reads the committed offset ``c`` of ``(t, p)`` in the consumer group ``strongroom-<app>``
  and writes only rows with source offset ≥ ``c``; the output records and the new source offset
  (``last + 1``) are committed in **one** transaction (``send_offsets_to_transaction``).
* A replayed batch therefore skips what a committed transaction already wrote, whatever Spark's
  checkpoint says — even when the checkpoint is lost and the query restarts from the earliest offset.
  Readers use ``isolation.level=read_committed``.

Rows reach Python as Arrow record batches (``mapInArrow``), not pickled rows. Rows whose ``emit`` is
false (dropped by policy) still advance the offset. A row marked ``fatal`` (the pipeline's policy says
stop) makes its task abort the transaction and fail the write with the row's coordinates and reason;
partitions whose transactions committed stay committed — consistent, and skipped on restart.

Every delivery or transaction error fails the task; :func:`write_exactly_once` re-runs the whole write
with backoff (safe: it is idempotent) until its deadline, which is how the pipelines wait out broker
restarts, two brokers down (NOT_ENOUGH_REPLICAS) or a transaction coordinator moving.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from strongroom.errors import PipelineError
from strongroom.kafka.config import ClientConfig, produce_when_room

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)

#: Columns the sink reads (others are ignored).
SINK_COLUMNS = (
    "src_topic",  # string: source topic
    "src_partition",  # int
    "src_offset",  # long
    "emit",  # boolean: false = advance the offset, write nothing
    "topic",  # string: output topic
    "key",  # binary
    "value",  # binary
    "headers",  # array<struct<key:string,value:binary>>
    "timestamp_ms",  # long, record timestamp to keep (null: broker time)
    "status",  # string: the pipeline's verdict on the row (counted in the summary)
    "reason",  # string: why a row was rejected or failed
    "fatal",  # boolean: the policy says stop — the task aborts its transaction and fails the write
)

#: Prefix of the message a task raises for a fatal row; the driver turns it into a PipelineError
#: without retrying (a retry would meet the same row again).
FATAL_MARK = "[strongroom-fatal]"

SUMMARY_SCHEMA = (
    "src_topic string, src_partition int, committed_before long, first_offset long, next_offset long, "
    "written long, replayed_skipped long, statuses string"
)


@dataclass(frozen=True)
class TransactionalSinkConfig:
    """Where and as whom the sink writes. ``app_id`` must be stable across restarts of one pipeline."""

    bootstrap_servers: str
    app_id: str
    client_properties: Mapping[str, Any] = field(default_factory=dict)
    transaction_timeout_ms: int = 600_000
    #: How long :func:`write_exactly_once` keeps retrying a failing write before it gives up.
    retry_deadline_s: float = 1800.0

    @property
    def group_id(self) -> str:
        return f"strongroom-{self.app_id}"

    def transactional_id(self, topic: str, partition: int) -> str:
        return f"strongroom-{self.app_id}-{topic}-{partition}"

    def client(self) -> ClientConfig:
        return ClientConfig(self.bootstrap_servers, dict(self.client_properties))


class _PartitionTxn:
    """The transaction writing one source partition's rows."""

    def __init__(self, config: TransactionalSinkConfig, topic: str, partition: int) -> None:
        from confluent_kafka import Consumer, Producer, TopicPartition

        self.topic, self.partition = topic, partition
        client = config.client()
        self.producer = Producer(
            client.producer(
                {
                    "transactional.id": config.transactional_id(topic, partition),
                    "transaction.timeout.ms": config.transaction_timeout_ms,
                    "linger.ms": 10,
                    "batch.size": 1_000_000,
                    "queue.buffering.max.messages": 500_000,
                    "queue.buffering.max.kbytes": 1_048_576,
                    "partitioner": "murmur2_random",  # the Java client's choice: same key, same partition
                }
            )
        )
        self.consumer = Consumer(client.consumer(config.group_id, {"enable.auto.commit": False}))
        self.producer.init_transactions(120)  # fences zombies, finishes their open transaction
        committed = self.consumer.committed([TopicPartition(topic, partition)], timeout=60)[0].offset
        self.committed_before = committed if committed >= 0 else 0
        self.first_offset = -1
        self.last_offset = -1
        self.written = 0
        self.skipped = 0
        self.statuses: dict[str, int] = {}
        self.errors: list[str] = []
        self.producer.begin_transaction()

    def on_delivery(self, err: Any, _msg: Any) -> None:
        if err is not None:
            self.errors.append(str(err))

    def produce(self, topic: str, key: bytes | None, value: bytes | None, headers: Any, ts: int | None) -> None:
        kwargs: dict[str, Any] = {"key": key, "value": value, "on_delivery": self.on_delivery}
        if headers:
            kwargs["headers"] = headers
        if ts is not None and ts >= 0:
            kwargs["timestamp"] = ts
        produce_when_room(self.producer, topic, **kwargs)
        self.written += 1
        if self.written % 10_000 == 0:
            self.producer.poll(0)

    def commit(self) -> None:
        from confluent_kafka import TopicPartition

        if self.last_offset < self.committed_before:
            self.producer.abort_transaction(60)  # replay of work already committed: nothing to add
            return
        self.producer.flush(300)
        if self.errors:
            self.producer.abort_transaction(60)
            raise PipelineError(
                f"writing the output of {self.topic}[{self.partition}] failed: {self.errors[0]}",
                hint="the write is retried from the last committed offset; check the brokers",
            )
        offsets = [TopicPartition(self.topic, self.partition, self.last_offset + 1)]
        self.producer.send_offsets_to_transaction(offsets, self.consumer.consumer_group_metadata(), 60)
        self.producer.commit_transaction(300)

    def close(self) -> None:
        self.consumer.close()


#: What a row transform receives per Arrow batch (headers as ``(name, value)`` tuples).
SOURCE_COLUMNS = ("src_topic", "src_partition", "src_offset", "key", "value", "headers", "timestamp_ms")

#: ``transform(source_columns) -> output_columns``: one output per input row, with the columns of
#: :data:`SINK_COLUMNS` except the source coordinates (see :mod:`strongroom.spark.row_transforms`).
RowTransform = Callable[[dict[str, list[Any]]], dict[str, list[Any]]]


def make_partition_writer(config: TransactionalSinkConfig, transform: RowTransform | None = None) -> Any:
    """The ``mapInArrow`` function: writes rows transactionally, one summary row per source partition.

    Without ``transform`` the rows already are sink rows (:data:`SINK_COLUMNS`); with it the rows are
    source rows (:data:`SOURCE_COLUMNS`) that ``transform`` turns into sink rows, batch by batch — only
    the rows a replay has not written yet reach it.
    """

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        txns: dict[tuple[str, int], _PartitionTxn] = {}
        try:
            for batch in batches:
                names = SINK_COLUMNS if transform is None else SOURCE_COLUMNS
                cols = {name: batch.column(name).to_pylist() for name in names}
                cols["headers"] = [[(h["key"], h["value"]) for h in hs] if hs else [] for hs in cols["headers"]]
                for i in range(batch.num_rows):  # open each source partition's transaction first
                    tp = (cols["src_topic"][i], cols["src_partition"][i])
                    if tp not in txns:
                        txns[tp] = _PartitionTxn(config, *tp)
                fresh = [
                    i for i in range(batch.num_rows)
                    if cols["src_offset"][i] >= txns[(cols["src_topic"][i], cols["src_partition"][i])].committed_before
                ]  # fmt: skip
                for i in range(batch.num_rows):
                    if cols["src_offset"][i] < txns[(cols["src_topic"][i], cols["src_partition"][i])].committed_before:
                        txns[(cols["src_topic"][i], cols["src_partition"][i])].skipped += 1
                if transform is not None and fresh:
                    source = {name: [cols[name][i] for i in fresh] for name in SOURCE_COLUMNS}
                    cols = {**source, **transform(source)}
                    fresh = list(range(len(fresh)))
                _write_rows(txns, cols, fresh)
            for txn in txns.values():
                txn.commit()
        finally:
            for txn in txns.values():
                txn.close()
        rows = [
            {
                "src_topic": t.topic,
                "src_partition": t.partition,
                "committed_before": t.committed_before,
                "first_offset": t.first_offset,
                "next_offset": max(t.last_offset + 1, t.committed_before),
                "written": t.written,
                "replayed_skipped": t.skipped,
                "statuses": json.dumps(t.statuses),
            }
            for t in txns.values()
        ]
        yield pa.RecordBatch.from_pylist(rows, schema=_summary_arrow_schema())

    return write


def _write_rows(txns: dict[tuple[str, int], _PartitionTxn], cols: dict[str, list[Any]], rows: list[int]) -> None:
    for i in rows:
        tp = (cols["src_topic"][i], cols["src_partition"][i])
        txn = txns[tp]
        offset = cols["src_offset"][i]
        if cols["fatal"][i]:
            txn.producer.abort_transaction(60)
            raise RuntimeError(
                f"{FATAL_MARK} {cols['status'][i]} record {tp[0]}[{tp[1]}]@{offset}: {cols['reason'][i]}"
            )
        if txn.first_offset < 0:
            txn.first_offset = offset
        txn.last_offset = max(txn.last_offset, offset)
        status = cols["status"][i]
        txn.statuses[status] = txn.statuses.get(status, 0) + 1
        if cols["emit"][i]:
            txn.produce(cols["topic"][i], cols["key"][i], cols["value"][i], cols["headers"][i], cols["timestamp_ms"][i])


def _summary_arrow_schema() -> pa.Schema:
    import pyarrow as pa

    return pa.schema(
        [
            ("src_topic", pa.string()),
            ("src_partition", pa.int32()),
            ("committed_before", pa.int64()),
            ("first_offset", pa.int64()),
            ("next_offset", pa.int64()),
            ("written", pa.int64()),
            ("replayed_skipped", pa.int64()),
            ("statuses", pa.string()),
        ]
    )


def write_exactly_once(
    df: DataFrame, config: TransactionalSinkConfig, transform: RowTransform | None = None
) -> list[dict[str, Any]]:
    """Write ``df`` exactly once; returns one summary per source partition.

    ``df`` holds sink rows (:data:`SINK_COLUMNS`), or source rows (:data:`SOURCE_COLUMNS`) when a
    ``transform`` turns them into sink rows in the executors.

    Retries the whole write with capped exponential backoff and jitter until ``retry_deadline_s``:
    every attempt resumes from the committed offsets, so a retry never duplicates.
    """
    from pyspark.errors import AnalysisException

    writer = make_partition_writer(config, transform)
    deadline = time.monotonic() + config.retry_deadline_s
    plan = df.select(*(SINK_COLUMNS if transform is None else SOURCE_COLUMNS))  # a malformed frame fails here
    attempt = 0
    while True:
        attempt += 1
        try:
            rows = plan.mapInArrow(writer, SUMMARY_SCHEMA).collect()
            return [{**r.asDict(), "statuses": json.loads(r["statuses"] or "{}")} for r in rows]
        except Exception as exc:
            if isinstance(exc, AnalysisException):
                raise  # a bug in the frame, not a transient failure
            fatal = _fatal_message(exc)
            if fatal is not None:
                raise PipelineError(
                    f"cannot {fatal}", hint="fix the record or the rule, or run with a dead-letter policy to divert it"
                ) from None
            if time.monotonic() >= deadline:
                raise PipelineError(
                    f"the exactly-once Kafka write failed after {attempt} attempts: {_first_line(exc)}",
                    hint="check that the brokers are up and the transaction coordinator reachable; "
                    "restarting the pipeline resumes from the last committed offsets without duplicates",
                ) from exc
            delay = min(30.0, 0.5 * 2 ** min(attempt, 6)) * random.uniform(0.5, 1.0)
            log.warning(
                "exactly-once write attempt %d failed (%s); retrying in %.1fs", attempt, _first_line(exc), delay
            )
            time.sleep(delay)


def _fatal_message(exc: BaseException) -> str | None:
    """The message of a fatal row, if the task failed because of one."""
    text = str(exc)
    start = text.find(FATAL_MARK)
    if start < 0:
        return None
    message = text[start + len(FATAL_MARK) :].strip().splitlines()[0]
    verb = {"rejected": "encrypt record", "failed": "decrypt"}.get(message.split(" ", 1)[0], "process")
    return f"{verb} {message.split(' ', 2)[-1]}" if " record " in message else message


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    for line in text.splitlines():
        line = line.strip()
        if "Error" in line or "Exception" in line:
            return line[:300]
    return (text.splitlines() or [type(exc).__name__])[0][:300]
