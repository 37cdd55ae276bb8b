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
restarts, two brokers down (NOT_ENOUGH_REPLICAS) or a transaction coordinator moving. Nothing else is
retried: a fatal row, a failing transform (its key service gave up on the KMS) or an unexpected
exception stops the write at once, naming the record or the rows it was processing.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final

from strongroom.errors import PipelineError, StrongroomError
from strongroom.kafka.config import ClientConfig, produce_when_room
from strongroom.kafka.transport import new_consumer, new_producer

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
    "written long, replayed_skipped long, statuses string, group_offset long"
)


@dataclass(frozen=True)
class PartitionSummary:
    """What one task wrote for one source partition in one write (one row of :data:`SUMMARY_SCHEMA`).

    The executors send these as plain Arrow rows (the pickling boundary, with ``statuses`` as JSON
    text); :func:`write_exactly_once` turns each into a ``PartitionSummary`` right where the driver
    collects them, so nothing past the sink reads a summary by string key.
    """

    src_topic: str
    src_partition: int
    #: The group's committed offset when the task started (0: none); rows below it were skipped.
    committed_before: int
    #: The first offset this write read (-1: it read none).
    first_offset: int
    #: Where the partition resumes after this write.
    next_offset: int
    written: int
    #: Rows a replay skipped because an earlier transaction had already written them.
    replayed_skipped: int
    #: Rows per pipeline status (``ok``, ``rejected``, ...).
    statuses: Mapping[str, int]
    #: The group's committed offset as found (-1: none yet; None: not reported).
    group_offset: int | None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> PartitionSummary:
        """The typed summary of one collected summary row."""
        group_offset = row["group_offset"]
        return cls(
            src_topic=str(row["src_topic"]),
            src_partition=int(row["src_partition"]),
            committed_before=int(row["committed_before"]),
            first_offset=int(row["first_offset"]),
            next_offset=int(row["next_offset"]),
            written=int(row["written"]),
            replayed_skipped=int(row["replayed_skipped"]),
            statuses={str(k): int(v) for k, v in json.loads(row["statuses"] or "{}").items()},
            group_offset=None if group_offset is None else int(group_offset),
        )

    @property
    def source_partition(self) -> tuple[str, int]:
        return (self.src_topic, self.src_partition)


#: How the sink's transactional producers batch (on top of the idempotent ``acks=all``, lz4 defaults of
#: :data:`~strongroom.kafka.config.PRODUCER_DEFAULTS`); bench/pipeline_bench.py gives Spark's own Kafka
#: sink the same settings so that its copy is a fair baseline.
BATCHING: Final[Mapping[str, Any]] = MappingProxyType({"linger.ms": 10, "batch.size": 1_000_000})
#: Source partitions whose open transactions :meth:`TransactionalSinkConfig.abort_open` ends at once.
ABORT_PARALLELISM: Final = 8


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

    def abort_open(self, partitions: Iterable[tuple[str, int]]) -> int:
        """Abort the transaction a stopped or killed task left open, per source partition: initialising
        a producer with the partition's transactional id fences the old one and aborts what it had open.
        The partitions are handled side by side (each is a coordinator round trip of its own, 150-300 ms),
        at most :data:`ABORT_PARALLELISM` at once. Returns the number of partitions handled."""
        wanted = list(partitions)
        if not wanted:
            return 0
        with ThreadPoolExecutor(min(ABORT_PARALLELISM, len(wanted)), thread_name_prefix="strongroom-abort") as pool:
            return sum(pool.map(self._abort_one, wanted))

    def _abort_one(self, source: tuple[str, int]) -> int:
        producer = new_producer(
            self.client(),
            {"transactional.id": self.transactional_id(*source), "transaction.timeout.ms": self.transaction_timeout_ms},
        )
        producer.init_transactions(60)
        producer.flush(5)
        return 1


class DeliveryFailed(PipelineError):
    """The brokers did not take a transaction's records: the write is retried from the committed offsets."""


class _PartitionTxn:
    """The transaction writing one source partition's rows."""

    def __init__(self, config: TransactionalSinkConfig, topic: str, partition: int) -> None:
        from confluent_kafka import TopicPartition

        self.topic, self.partition = topic, partition
        client = config.client()
        self.producer = new_producer(
            client,
            {
                "transactional.id": config.transactional_id(topic, partition),
                "transaction.timeout.ms": config.transaction_timeout_ms,
                **BATCHING,
                "queue.buffering.max.messages": 500_000,
                "queue.buffering.max.kbytes": 1_048_576,
                "partitioner": "murmur2_random",  # the Java client's choice: same key, same partition
            },
        )
        self.consumer = new_consumer(client, config.group_id, {"enable.auto.commit": False})
        self.producer.init_transactions(120)  # fences zombies, finishes their open transaction
        committed = self.consumer.committed([TopicPartition(topic, partition)], timeout=60)[0].offset
        #: The group's committed offset as found (-1: none yet); rows below ``committed_before`` are skipped.
        self.group_offset = committed if committed >= 0 else -1
        self.committed_before = max(committed, 0)
        self.first_offset = -1
        self.last_offset = -1
        self.written = 0
        self.skipped = 0
        self.statuses: dict[str, int] = {}
        self.errors: list[str] = []
        self.producer.begin_transaction()
        self.open = True

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
            self.abort()  # replay of work already committed: nothing to add
            return
        self.producer.flush(300)
        if self.errors:
            self.abort()
            raise DeliveryFailed(
                f"writing the output of {self.topic}[{self.partition}] failed: {self.errors[0]}",
                hint="the write is retried from the last committed offset; check the brokers",
            )
        offsets = [TopicPartition(self.topic, self.partition, self.last_offset + 1)]
        self.producer.send_offsets_to_transaction(offsets, self.consumer.consumer_group_metadata(), 60)
        self.producer.commit_transaction(300)
        self.open = False

    def abort(self, timeout_s: float = 60) -> None:
        self.open = False
        self.producer.abort_transaction(timeout_s)

    def abort_if_open(self) -> None:
        """On a stop: end the transaction now, so read_committed readers of the output are not held
        back until ``transaction.timeout.ms`` (best effort: a later attempt's fencing aborts it anyway)."""
        if self.open:
            try:
                self.abort(10)  # short: when the brokers are the problem, the next attempt's fencing aborts it
            except Exception as exc:  # noqa: BLE001 - best effort on the way out; the original error wins
                log.warning("could not abort the transaction of %s[%d]: %s", self.topic, self.partition, exc)
                # Kept for _fenced: a fenced producer's flush can fail with a bare SystemError from the client,
                # and then only the abort's own error says the producer was fenced.
                self.errors.append(str(exc))

    def close(self) -> None:
        self.consumer.close()


#: What a row transform receives per Arrow batch (headers as ``(name, value)`` tuples).
SOURCE_COLUMNS = ("src_topic", "src_partition", "src_offset", "key", "value", "headers", "timestamp_ms")

#: ``transform(source_columns) -> output_columns``: one output per input row, with the columns of
#: :data:`SINK_COLUMNS` except the source coordinates (see :mod:`strongroom.spark.row_transforms`).
RowTransform = Callable[[dict[str, list[Any]]], dict[str, list[Any]]]


#: One attempt of a write by an engine: runs the write tasks over the plan (one per source partition) and
#: returns their summaries, typed; raises what a task raised (a fatal row carries :data:`FATAL_MARK`).
WriteTasks = Callable[["DataFrame"], list[PartitionSummary]]

#: Spark schema of sink rows (:data:`SINK_COLUMNS`).
SINK_SCHEMA = (
    "src_topic string, src_partition int, src_offset long, emit boolean, topic string, key binary, value binary, "
    "headers array<struct<key:string,value:binary>>, timestamp_ms long, status string, reason string, fatal boolean"
)


def _source_columns(batch: pa.RecordBatch) -> dict[str, list[Any]]:
    cols = {name: batch.column(name).to_pylist() for name in SOURCE_COLUMNS}
    cols["headers"] = [[(h["key"], h["value"]) for h in hs] if hs else [] for hs in cols["headers"]]
    return cols


def transformed(df: DataFrame, transform: RowTransform) -> DataFrame:
    """Source rows (:data:`SOURCE_COLUMNS`) turned into sink rows (:data:`SINK_SCHEMA`) by ``transform`` in
    the executors, without writing them: for outputs other than Kafka, which still commit their
    progress through the exactly-once sink. A transform that fails stops the job, naming the rows."""

    def apply(batches: Iterable[pa.RecordBatch]) -> Iterable[pa.RecordBatch]:
        import pyarrow as pa

        for batch in batches:
            if not batch.num_rows:
                continue
            cols = _source_columns(batch)
            out = {**cols, **_transformed(transform, cols)}
            out["headers"] = [[{"key": k, "value": v} for k, v in hs] if hs else [] for hs in out["headers"]]
            yield pa.RecordBatch.from_pydict({name: out[name] for name in SINK_COLUMNS}, schema=_sink_arrow_schema())

    return df.select(*SOURCE_COLUMNS).mapInArrow(apply, SINK_SCHEMA)


def _sink_arrow_schema() -> pa.Schema:
    import pyarrow as pa

    header = pa.struct([("key", pa.string()), ("value", pa.binary())])
    return pa.schema(
        [("src_topic", pa.string()), ("src_partition", pa.int32()), ("src_offset", pa.int64()), ("emit", pa.bool_()),
         ("topic", pa.string()), ("key", pa.binary()), ("value", pa.binary()), ("headers", pa.list_(header)),
         ("timestamp_ms", pa.int64()), ("status", pa.string()), ("reason", pa.string()), ("fatal", pa.bool_())]
    )  # fmt: skip


def make_partition_writer(config: TransactionalSinkConfig, transform: RowTransform | None = None) -> Any:
    """The ``mapInArrow`` function: writes rows transactionally, one summary row per source partition.

    Without ``transform`` the rows already are sink rows (:data:`SINK_COLUMNS`); with it the rows are
    source rows (:data:`SOURCE_COLUMNS`) that ``transform`` turns into sink rows, batch by batch — only
    the rows a replay has not written yet reach it. The summaries leave the task as plain Arrow rows
    (:data:`SUMMARY_SCHEMA`); the driver types them (:class:`PartitionSummary`).
    """

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        txns: dict[tuple[str, int], _PartitionTxn] = {}
        try:
            for batch in batches:
                _write_batch(config, transform, txns, batch)
            for txn in txns.values():
                txn.commit()
        except BaseException as exc:
            _abort_open(txns)
            failure = _task_failure(exc, txns)
            if failure is None:
                raise
            raise failure from None
        finally:
            for txn in txns.values():
                txn.close()
        yield pa.RecordBatch.from_pylist([_summary_row(t) for t in txns.values()], schema=_summary_arrow_schema())

    return write


def _write_batch(
    config: TransactionalSinkConfig,
    transform: RowTransform | None,
    txns: dict[tuple[str, int], _PartitionTxn],
    batch: pa.RecordBatch,
) -> None:
    """One Arrow batch of a task: open each source partition's transaction first, skip the rows an
    earlier transaction already wrote, transform the rest (if there is a transform) and write them."""
    if transform is None:
        cols = {name: batch.column(name).to_pylist() for name in SINK_COLUMNS}
        cols["headers"] = [[(h["key"], h["value"]) for h in hs] if hs else [] for hs in cols["headers"]]
    else:
        cols = _source_columns(batch)
    for tp in zip(cols["src_topic"], cols["src_partition"], strict=True):
        if tp not in txns:
            txns[tp] = _PartitionTxn(config, *tp)
    fresh = _fresh_rows(txns, cols)
    if transform is not None and fresh:
        source = {name: [cols[name][i] for i in fresh] for name in SOURCE_COLUMNS}
        cols = {**source, **_transformed(transform, source)}
        fresh = list(range(len(fresh)))
    _write_rows(txns, cols, fresh)


def _fresh_rows(txns: Mapping[tuple[str, int], _PartitionTxn], cols: dict[str, list[Any]]) -> list[int]:
    """The rows at or above their partition's committed offset; the others are counted as skipped."""
    fresh: list[int] = []
    for i, offset in enumerate(cols["src_offset"]):
        txn = txns[(cols["src_topic"][i], cols["src_partition"][i])]
        if offset >= txn.committed_before:
            fresh.append(i)
        else:
            txn.skipped += 1
    return fresh


def _task_failure(exc: BaseException, txns: Mapping[tuple[str, int], _PartitionTxn]) -> RuntimeError | None:
    """What a failed write task raises instead of ``exc``, or None when ``exc`` itself goes on: a broker
    problem (:func:`write_exactly_once` retries the whole write from the committed offsets), a fatal
    row, or an interrupt. A fenced producer and anything else stop the write at once, saying why."""
    from confluent_kafka import KafkaException

    fenced = _fenced(exc, txns)
    if fenced is not None:
        return RuntimeError(f"{FATAL_MARK} {fenced}")
    if isinstance(exc, KafkaException | DeliveryFailed):
        return None
    if FATAL_MARK in str(exc) or not isinstance(exc, Exception):
        return None
    # Anything else is not a broker problem a retry could outlast: stop now, saying what failed.
    return RuntimeError(f"{FATAL_MARK} write the output: {_first_line(exc)}")


def _summary_row(txn: _PartitionTxn) -> dict[str, Any]:
    """One row of :data:`SUMMARY_SCHEMA` (plain, to cross from the executor to the driver)."""
    return {
        "src_topic": txn.topic,
        "src_partition": txn.partition,
        "committed_before": txn.committed_before,
        "first_offset": txn.first_offset,
        "next_offset": max(txn.last_offset + 1, txn.committed_before),
        "written": txn.written,
        "replayed_skipped": txn.skipped,
        "statuses": json.dumps(txn.statuses),
        "group_offset": txn.group_offset,
    }


def _fenced(exc: BaseException, txns: Mapping[tuple[str, int], _PartitionTxn]) -> str | None:
    """What it means when a producer of this write was fenced: another producer initialised the same
    transactional id while it ran. Within one write that is another task with rows of the same source
    partition (the write would skip rows below the other's commit), or a second pipeline with this app id."""
    texts: list[str] = []
    seen: BaseException | None = exc
    while seen is not None and len(texts) < 5:
        texts.append(str(seen))
        seen = seen.__cause__ or seen.__context__
    texts += [e for t in txns.values() for e in t.errors]
    if not any("fenced" in text.lower() for text in texts):
        return None
    names = ", ".join(f"{t}[{p}]" for t, p in txns) or "a source partition"
    return (
        f"write the output of {names}: another producer took over its transactional id during the write: the rows "
        "of one source partition were written by more than one task, or a second pipeline runs with the same app id"
    )


def _abort_open(txns: Mapping[tuple[str, int], _PartitionTxn]) -> None:
    for txn in txns.values():
        txn.abort_if_open()


def _transformed(transform: RowTransform, source: dict[str, list[Any]]) -> dict[str, list[Any]]:
    """The transform's output rows; a failure of the transform itself (its key service gave up on the KMS,
    a bug) stops the write, naming the source rows, and is never retried as if the brokers had failed."""
    try:
        return transform(source)
    except Exception as exc:  # noqa: BLE001 - whatever it is, a retry would meet it again
        first = (source["src_topic"][0], source["src_partition"][0], source["src_offset"][0])
        problem = exc.problem if isinstance(exc, StrongroomError) else f"{type(exc).__name__}: {exc}"
        raise RuntimeError(
            f"{FATAL_MARK} process the records from {first[0]}[{first[1]}]@{first[2]} on: {problem}"
        ) from None


def _write_rows(txns: dict[tuple[str, int], _PartitionTxn], cols: dict[str, list[Any]], rows: list[int]) -> None:
    for i in rows:
        tp = (cols["src_topic"][i], cols["src_partition"][i])
        txn = txns[tp]
        offset = cols["src_offset"][i]
        if cols["fatal"][i]:
            txn.abort()
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
            ("group_offset", pa.int64()),
        ]
    )


def write_exactly_once(
    df: DataFrame,
    config: TransactionalSinkConfig,
    transform: RowTransform | None = None,
    *,
    one_task_per_partition: bool = False,
    tasks: WriteTasks | None = None,
) -> list[PartitionSummary]:
    """Write ``df`` exactly once; returns one :class:`PartitionSummary` per source partition.

    ``df`` holds sink rows (:data:`SINK_COLUMNS`), or source rows (:data:`SOURCE_COLUMNS`) when a
    ``transform`` turns them into sink rows in the executors, or when ``tasks`` (another engine's write
    tasks, :mod:`strongroom.spark.jvm_sink`) transform and write them: it runs over the plan and returns
    the tasks' summaries; everything around it (the plan, the split checks, the retries) is this function's.

    Each source partition's rows must reach one task, in offset order: two tasks with one partition's
    rows would share its transactional id and fence each other, and a retry would skip rows below the
    other task's commit. So ``df`` is repartitioned by source partition and sorted by offset, unless the
    caller promises ``one_task_per_partition`` (Spark's Kafka source without ``minPartitions`` /
    ``maxRecordsPerPartition``, narrow transformations only: the pipelines). Either way a write in which
    one partition came out of two tasks is refused (:class:`PipelineError`), never reported as done.

    Retries the whole write with capped exponential backoff and jitter until ``retry_deadline_s``:
    every attempt resumes from the committed offsets, so a retry never duplicates.
    """
    from pyspark.errors import AnalysisException

    plan = _write_plan(df, transform is not None or tasks is not None, one_task_per_partition)
    if tasks is None:
        tasks = _python_tasks(make_partition_writer(config, transform))
    deadline = time.monotonic() + config.retry_deadline_s
    attempt = 0
    while True:
        attempt += 1
        try:
            summaries = tasks(plan)
            _check_one_task_per_partition(summaries)
            return summaries
        except AnalysisException:
            raise  # a bug in the frame, not a transient failure
        except Exception as exc:
            _raise_if_not_retryable(exc, plan, check_split=one_task_per_partition and attempt == 1)
            if time.monotonic() >= deadline:
                raise PipelineError(
                    f"the exactly-once Kafka write failed after {attempt} attempts: {_first_line(exc)}",
                    hint="check that the brokers are up and the transaction coordinator reachable; "
                    "restarting the pipeline resumes from the last committed offsets without duplicates",
                ) from exc
            _back_off(attempt, exc)


def _python_tasks(writer: Any) -> WriteTasks:
    """The Python engine's write tasks: ``writer`` over the plan's Arrow batches (``mapInArrow``)."""

    def run(plan: DataFrame) -> list[PartitionSummary]:
        rows = plan.mapInArrow(writer, SUMMARY_SCHEMA).collect()
        # Where the driver receives the tasks' plain summary rows: typed from here on.
        return [PartitionSummary.from_row(r.asDict()) for r in rows]

    return run


def _write_plan(df: DataFrame, source_rows: bool, one_task_per_partition: bool) -> DataFrame:
    """The frame the write runs over: its sink (or source) columns, each source partition in one task
    in offset order unless the caller promises that already."""
    plan = df.select(*(SOURCE_COLUMNS if source_rows else SINK_COLUMNS))  # a malformed frame fails here
    if not one_task_per_partition:
        plan = plan.repartition("src_topic", "src_partition").sortWithinPartitions(
            "src_topic", "src_partition", "src_offset"
        )
    return plan


def _raise_if_not_retryable(exc: Exception, plan: DataFrame, *, check_split: bool) -> None:
    """Stop at once on what a retry would meet again: a fatal row, or one partition's rows in two tasks."""
    fatal = _fatal_message(exc)
    if fatal is not None:
        raise PipelineError(f"cannot {fatal}", hint=_fatal_hint(fatal)) from None
    if check_split:
        # Tasks sharing a partition fence each other, and the brokers do not always say so (a fenced
        # EndTxn can come back as an unknown error): ask the frame itself before blaming the brokers.
        split = _partitions_split_over_tasks(plan)
        if split:
            raise _split_error(split[0]) from None


def _back_off(attempt: int, exc: Exception) -> None:
    """Capped exponential backoff with jitter before the next attempt."""
    delay = min(30.0, 0.5 * 2 ** min(attempt, 6)) * random.uniform(0.5, 1.0)
    log.warning("exactly-once write attempt %d failed (%s); retrying in %.1fs", attempt, _first_line(exc), delay)
    time.sleep(delay)


def _check_one_task_per_partition(summaries: list[PartitionSummary]) -> None:
    seen: set[tuple[str, int]] = set()
    for summary in summaries:
        tp = summary.source_partition
        if tp in seen:
            raise _split_error(tp)
        seen.add(tp)


def _partitions_split_over_tasks(plan: DataFrame) -> list[tuple[str, int]]:
    """Source partitions whose rows more than one task of ``plan`` holds (a re-read of the source rows:
    only asked after a failed write; if the source cannot be read now, nothing is claimed)."""
    from pyspark.sql import functions as F

    try:
        rows = (
            plan.select(F.spark_partition_id().alias("task"), "src_topic", "src_partition")
            .distinct()
            .groupBy("src_topic", "src_partition")
            .count()
            .where("count > 1")
            .collect()
        )
    except Exception as exc:  # noqa: BLE001 - the brokers may be what failed: the write's own error stands
        log.debug("could not check how the rows are split over tasks: %s", _first_line(exc))
        return []
    return sorted((str(r["src_topic"]), int(r["src_partition"])) for r in rows)


def _split_error(tp: tuple[str, int]) -> PipelineError:
    return PipelineError(
        f"the rows of source partition {tp[0]}[{tp[1]}] were written by more than one task, which share one "
        "transactional id: records may have been skipped",
        hint="read with Spark's Kafka source without minPartitions / maxRecordsPerPartition and do not "
        "repartition the rows, or call write_exactly_once without one_task_per_partition=True",
    )


def _fatal_message(exc: BaseException) -> str | None:
    """The message of a fatal row, if the task failed because of one."""
    text = str(exc)
    start = text.find(FATAL_MARK)
    if start < 0:
        return None
    message = text[start + len(FATAL_MARK) :].strip().splitlines()[0]
    verb = {"rejected": "encrypt record", "failed": "decrypt"}.get(message.split(" ", 1)[0], "process")
    return f"{verb} {message.split(' ', 2)[-1]}" if " record " in message else message


def _fatal_hint(message: str) -> str:
    if "more than one task" in message:
        return (
            "read with Spark's Kafka source without minPartitions / maxRecordsPerPartition and do not repartition "
            "the rows (or let write_exactly_once repartition them); give every pipeline its own --app-id"
        )
    if "(a strongroom bug)" in message:
        return "report it with the record's coordinates; restarting resumes from the committed offsets"
    if " record " in message:
        return "fix the record or the rule, or run with a dead-letter policy to divert it"
    return "fix the cause named above; restarting resumes from the committed offsets without duplicates"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    for line in text.splitlines():
        line = line.strip()
        if "Error" in line or "Exception" in line:
            return line[:300]
    return (text.splitlines() or [type(exc).__name__])[0][:300]
