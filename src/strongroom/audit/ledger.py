"""Ledger capture: a Structured Streaming job from the audit's Kafka reader to Parquet, and its coverage.

The ledger is the audit's source of truth: for every record of the audited topics, the (leader
epoch, offset) it was first seen at and hashes of its content. The capture query reads with the
audit's reader (:mod:`strongroom.audit.readers`, the JVM reader by default; offsets ``{topic:
{partition: next offset}}`` in Spark's checkpoint) and writes with Spark's file sink, which commits
each micro-batch's files atomically in its metadata log - together exactly-once: a restarted capture
neither loses nor duplicates rows.

Coverage. The source also emits one *range marker* per offset range it finished, so the ledger
knows which offsets it has read - including ranges that held no records (compaction, transaction
markers) - and which it never saw (capture started late, or retention deleted records before the
capture got there). :func:`coverage_ranges` merges markers into contiguous ranges per partition;
:func:`capture_stats` reports capture lag (``read_at - timestamp``). A scrub never audits what the
ledger did not see: those records are ``unledgered``, not ``ok``.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from strongroom.audit.datasource import DEFAULT_MAX_RECORDS_PER_RANGE
from strongroom.audit.errors import KafkaReadError, LedgerNotFound
from strongroom.audit.kafka_state import CAPTURE_LISTING_TIMEOUT, ClusterState
from strongroom.audit.readers import DEFAULT_READER, AuditReader, read_failure, read_stream
from strongroom.audit.schema import KIND_RANGE, KIND_RECORD, RECORD_KINDS, spark_schema
from strongroom.audit.store import LedgerPaths
from strongroom.errors import AuditError
from strongroom.kafka.config import ClientConfig

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.readwriter import DataStreamReader

log = logging.getLogger(__name__)


@dataclass
class CaptureResult:
    batches: int = 0
    #: Rows written: records plus one range marker per offset range read.
    rows: int = 0
    seconds: float = 0.0
    end_offsets: dict[str, dict[str, int]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "batches": self.batches,
            "rows": self.rows,
            "seconds": round(self.seconds, 2),
            "end_offsets": self.end_offsets,
        }


def capture_ledger(
    spark: SparkSession,
    client: ClientConfig,
    topics: Sequence[str],
    ledger: LedgerPaths,
    *,
    checkpoint: str | None = None,
    once: bool = True,
    trigger_seconds: float = 10.0,
    duration: float | None = None,
    starting_offsets: str = "earliest",
    max_records_per_range: int = DEFAULT_MAX_RECORDS_PER_RANGE,
    on_batch: Callable[[dict[str, Any]], None] | None = None,
    stop: Callable[[], bool] | None = None,
    reader: AuditReader = DEFAULT_READER,
) -> CaptureResult:
    """Run the capture query: until caught up (``once``), or every ``trigger_seconds`` until
    ``duration`` elapsed or ``stop()`` says so. ``on_batch`` gets each batch's progress.

    ``once`` means caught up with every partition's committed end as listed when the capture started.
    The query does not always get there in one run, so it runs again, up to :data:`CATCH_UP_ROUNDS`
    times, until no partition ends below the listed end, or a run neither read a row nor moved the end:
    - a restarted query first re-runs the batch a stopped one had planned, whose end can be short
      (a leader did not answer the listing: a broker restarting). When the file sink had already
      written that batch, the re-run reads no rows, yet moves the end;
    - the JVM reader supports ``availableNow`` and goes on to the end it listed at the start in the
      same query; for the Python reader, Spark runs one batch per query."""
    if not topics:
        raise AuditError("no topics to capture", hint="pass --topic NAME (repeatable)")
    cluster = ClusterState(client, timeout=CAPTURE_LISTING_TIMEOUT)
    partitions = [(t, p) for t, md in cluster.partitions_of(topics).items() for p in md.partitions]  # fails early
    stream = read_stream(
        spark,
        client,
        reader,
        topics=",".join(topics),
        startingOffsets=starting_offsets,
        emitRanges=True,
        emitDigests=True,
        maxRecordsPerRange=max_records_per_range,
    )
    trigger = {"availableNow": True} if once else {"processingTime": f"{trigger_seconds} seconds"}
    result = CaptureResult()
    started = time.monotonic()
    target = {tp: offset for tp, (offset, _) in cluster.list_offsets(partitions, "latest").items()} if once else {}
    runs = CATCH_UP_ROUNDS if once else 1
    for run in range(1, runs + 1):
        before = (result.batches, result.end_offsets)
        query = _start_capture_query(stream, ledger.records, checkpoint or ledger.checkpoint, trigger)
        _await(query, result, on_batch, lambda: _should_stop(started, duration, stop))
        behind = ", ".join(f"{t}[{p}]" for t, p in _behind(result, target))
        if not behind or (result.batches, result.end_offsets) == before or _should_stop(started, duration, stop):
            break  # caught up, this round found nothing more to read (its own target reached), or told to stop
        if run == runs:
            log.warning("the capture ended short of the log's end in %s after %d runs; run it again", behind, runs)
        else:
            log.info("the capture stopped short of %s; running it again", behind)
    result.seconds = time.monotonic() - started
    return result


def _start_capture_query(stream: DataStreamReader, path: str, checkpoint: str, trigger: Mapping[str, Any]) -> Any:
    """Start the streaming query from the audit's reader to the ledger's Parquet files."""
    writer = (
        stream.load()
        .writeStream.format("parquet")
        .partitionBy("topic", "kind")
        # zstd: ~25% smaller than snappy here; content hashes are random, so a dictionary never
        # pays for value/headers hashes (it does for key hashes: keys repeat).
        .option("compression", "zstd")
        .option("parquet.enable.dictionary#value_hash", "false")
        .option("parquet.enable.dictionary#headers_hash", "false")
        .option("path", path)
        .option("checkpointLocation", checkpoint)
    )
    return writer.trigger(**trigger).start()


#: How often a ``once`` capture runs its query to reach the ends listed at its start.
CATCH_UP_ROUNDS = 4


def _should_stop(started: float, duration: float | None, stop: Callable[[], bool] | None) -> bool:
    return (duration is not None and time.monotonic() - started >= duration) or (stop is not None and stop())


def _await(
    query: Any,
    result: CaptureResult,
    on_batch: Callable[[dict[str, Any]], None] | None,
    should_stop: Callable[[], bool],
) -> None:
    """Follow ``query`` to its end (or stop it when ``should_stop``), accounting every batch once."""
    last_batch = -1

    def account_new() -> None:
        nonlocal last_batch
        for progress in _progress_since(query, last_batch):
            last_batch = int(progress["batchId"])
            _account(result, progress)
            if on_batch is not None:
                on_batch(progress)

    error: Any = None
    try:
        while query.isActive:
            try:
                query.awaitTermination(0.5)  # seconds; a float works
            except Exception as exc:  # noqa: BLE001 - the query failed (StreamingQueryException): told below
                error = exc
                break
            account_new()
            if should_stop():
                query.stop()
        error = error or query.exception()
    finally:
        if query.isActive:
            query.stop()
    account_new()
    if error is not None:
        problem = read_failure(str(error))
        if problem is not None:
            raise KafkaReadError(f"the ledger capture could not read the log: {problem}")
        raise AuditError(
            f"the ledger capture query failed: {_first_line(str(error))}",
            hint="see the error above; the checkpoint keeps progress, so rerunning resumes where it stopped",
        )


def _progress_since(query: Any, last_batch: int) -> list[dict[str, Any]]:
    """The query's progress updates of batches after ``last_batch``, oldest first, as JSON objects.

    PySpark's ``recentProgress`` converts every retained update (up to 100), field by field over py4j,
    on every call: polled twice a second, that took CPU from the capture it watches. This asks the JVM
    for the retained updates and converts only the new ones, one ``json()`` call each. A batch's first
    update counts; the no-data updates Spark repeats carry a batch id already seen."""
    updates = query._jsq.recentProgress()
    new: list[dict[str, Any]] = []
    for index in range(len(updates) - 1, -1, -1):
        update = updates[index]
        if int(update.batchId()) <= last_batch:
            break
        new.append(json.loads(update.json()))
    new.reverse()
    first: dict[int, dict[str, Any]] = {}
    for progress in new:
        first.setdefault(int(progress["batchId"]), progress)
    return list(first.values())


def _behind(result: CaptureResult, target: dict[tuple[str, int], int]) -> list[tuple[str, int]]:
    """Partitions whose captured end is below ``target``."""
    ends = result.end_offsets
    return sorted(tp for tp, offset in target.items() if ends.get(tp[0], {}).get(str(tp[1]), -1) < offset)


def _account(result: CaptureResult, progress: Any) -> None:
    rows = int(progress.get("numInputRows") or 0)
    if rows == 0 and not progress.get("sources"):
        return
    result.batches += 1 if rows else 0
    result.rows += rows
    for source in progress.get("sources") or []:
        end = source.get("endOffset")
        if isinstance(end, str):
            end = json.loads(end)
        if isinstance(end, dict):
            result.end_offsets = {t: {p: int(o) for p, o in ps.items()} for t, ps in end.items()}


def _first_line(text: str) -> str:
    for line in text.strip().splitlines():
        if line.strip():
            return line.strip()[:400]
    return text[:400]


# ---------------------------------------------------------------------------------------- reading


def read_ledger(spark: SparkSession, ledger: LedgerPaths, *, include_deliveries: bool = True) -> DataFrame:
    """Every ledger row (records and range markers). The file listing is fixed when this returns,
    which the scrub relies on (its snapshot of the ledger predates its look at the log)."""
    from pyspark.errors import AnalysisException

    schema = spark_schema()
    if ledger.is_local and not (ledger.local(ledger.records) / "_spark_metadata").exists():
        raise LedgerNotFound(f"no ledger at {ledger.root}")
    try:
        frame = spark.read.schema(schema).parquet(ledger.records)
    except AnalysisException as exc:
        raise LedgerNotFound(f"no ledger at {ledger.root} ({_first_line(str(exc))})") from exc
    frame = frame.select(*schema.fieldNames())
    if include_deliveries and _exists(spark, ledger, ledger.deliveries):
        deliveries = (
            spark.read.schema(schema).option("basePath", ledger.deliveries).parquet(ledger.deliveries)
        ).select(*schema.fieldNames())
        frame = frame.unionByName(deliveries)
    return frame


def _exists(spark: SparkSession, ledger: LedgerPaths, path: str) -> bool:
    if ledger.is_local:
        local = ledger.local(path)
        return local.exists() and any(local.rglob("*.parquet"))
    jvm: Any = spark.sparkContext._jvm
    jsc: Any = spark.sparkContext._jsc
    hadoop_path = jvm.org.apache.hadoop.fs.Path(path)
    fs = hadoop_path.getFileSystem(jsc.hadoopConfiguration())
    return bool(fs.exists(hadoop_path))


def ledger_topics(frame: DataFrame) -> list[str]:
    """Topics in the ledger, from its file paths (``topic=<name>``) - no data scan."""
    from urllib.parse import unquote

    names: set[str] = set()
    for path in frame.inputFiles():
        for part in path.split("/"):
            if part.startswith("topic="):
                names.add(unquote(part[len("topic=") :]))
    return sorted(names)


def records_of(frame: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    return frame.filter(F.col("kind").isin(*RECORD_KINDS))


def ranges_of(frame: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    return frame.filter(F.col("kind") == F.lit(KIND_RANGE))


def coverage_ranges(frame: DataFrame) -> DataFrame:
    """Merge range markers into contiguous covered ranges per partition.

    Output: topic, partition, range_start, range_end (exclusive), first_read_at, last_read_at,
    records (records the reads found in the range).
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    ranges = ranges_of(frame).filter(F.col("range_end") > F.col("offset"))
    w = Window.partitionBy("topic", "partition").orderBy("offset", "range_end")
    prev_end = F.max("range_end").over(w.rowsBetween(Window.unboundedPreceding, -1))
    island = F.sum(F.when(prev_end.isNull() | (F.col("offset") > prev_end), 1).otherwise(0)).over(
        w.rowsBetween(Window.unboundedPreceding, 0)
    )
    return (
        ranges.withColumn("island", island)
        .groupBy("topic", "partition", "island")
        .agg(
            F.min("offset").alias("range_start"),
            F.max("range_end").alias("range_end"),
            F.min("read_at").alias("first_read_at"),
            F.max("read_at").alias("last_read_at"),
            F.sum(F.coalesce(F.col("range_records"), F.lit(0))).alias("records"),
        )
        .drop("island")
    )


def capture_stats(frame: DataFrame) -> DataFrame:
    """Per partition: records captured, offsets, first/last capture time and capture lag
    (``read_at - timestamp``, meaningful for LogAppendTime or honest CreateTime producers)."""
    from pyspark.sql import functions as F

    records = frame.filter(F.col("kind") == F.lit(KIND_RECORD))
    lag = F.col("read_at") - F.col("timestamp")
    return records.groupBy("topic", "partition").agg(
        F.count(F.lit(1)).alias("records"),
        F.min("offset").alias("min_offset"),
        F.max("offset").alias("max_offset"),
        F.min("read_at").alias("first_capture"),
        F.max("read_at").alias("last_capture"),
        F.percentile_approx(lag, 0.5).alias("lag_p50_ms"),
        F.percentile_approx(lag, 0.99).alias("lag_p99_ms"),
        F.max(lag).alias("lag_max_ms"),
    )
