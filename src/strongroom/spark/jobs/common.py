"""What the encrypt and decrypt jobs share: settings, the Kafka source, topic preparation, counters."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

from strongroom.errors import PipelineError, StrongroomError
from strongroom.kafka.config import ClientConfig
from strongroom.kafka.topics import RDKAFKA_MESSAGE_MAX_BYTES, TopicLimits
from strongroom.kafka.transport import log_starts, new_admin, topic_partitions
from strongroom.policies import Engine
from strongroom.rules import EncryptionRules
from strongroom.spark.jobs.progress import app_id_for, partitions_to_restore, read_checkpoint, restore_progress
from strongroom.spark.jobs.results import InputGaps, PipelineResult
from strongroom.spark.jvm_sink import close_idle_clients
from strongroom.spark.kafka_sink import (
    PartitionSummary,
    RowTransform,
    TransactionalSinkConfig,
    WriteTasks,
    write_exactly_once,
)
from strongroom.spark.session import jvm_log

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from strongroom.metrics import Metrics, PipelineInstruments, RecordSample
    from strongroom.schemas.registry import RegistrySettings

log = logging.getLogger(__name__)
T = TypeVar("T")
ResultT = TypeVar("ResultT", bound=PipelineResult)
# py4j logs every exception a foreachBatch callback raises, traceback and all; the jobs re-raise
# those exceptions themselves as one clear error, so py4j's copy would only be noise on stderr.
logging.getLogger("py4j.clientserver").setLevel(logging.CRITICAL)

#: Session settings every pipeline needs: broadcast blocks, spills and driver→JVM transfers of the
#: per-batch keys frame are encrypted with a per-application key and never reach local disk in clear.
PIPELINE_SPARK_CONF = {
    "spark.io.encryption.enabled": "true",
    # Larger Arrow batches: each batch is one key-service round trip from the sink's tasks.
    "spark.sql.execution.arrow.maxRecordsPerBatch": "50000",
}


class InputGapPolicy(StrEnum):
    """What a pipeline does when input records aged out before it read them."""

    REPORT = "report"
    FAIL = "fail"


@dataclass(frozen=True)
class PipelineSettings:
    """Settings shared by the encrypt and decrypt pipelines."""

    bootstrap_servers: str
    rules: EncryptionRules
    #: The command's KMS settings (empty: every rule names one of ``kmses``). Hold secrets: driver only.
    kms: Mapping[str, Any] = field(repr=False)
    checkpoint: str
    app_id: str | None = None
    client_properties: Mapping[str, Any] = field(default_factory=dict)
    keys_topic: str = "strongroom-keys"
    dead_letter_topic: str | None = None
    starting_offsets: Literal["earliest", "latest"] = "earliest"
    max_offsets_per_trigger: int | None = None
    trigger_seconds: float | None = None  # None: process what is there now, then stop
    create_topics: bool = True
    #: How long a failing exactly-once write is retried (broker outages, NOT_ENOUGH_REPLICAS).
    write_retry_deadline_s: float = 1800.0
    #: How long a KMS outage is waited out (key creation, wrapping-key unwraps) before the job stops.
    kms_outage_wait_s: float = 1800.0
    #: Input records that aged out (retention) before the pipeline read them: ``report`` counts them in
    #: the result and logs an error; ``fail`` also stops the job.
    on_input_gap: InputGapPolicy = InputGapPolicy.REPORT
    #: Run on a cluster whose driver-executor channel is not authenticated and encrypted (it carries the
    #: key service's token): refused unless set (docs/pipelines.md, "Running on a cluster").
    allow_unencrypted_spark_channel: bool = False
    #: Where the exactly-once Kafka writer runs: the Python workers, or the executor JVM (docs/pipelines.md).
    engine: Engine = Engine.PYTHON
    #: Named KMS settings the rules may name (a rules file's ``kms:`` section, :mod:`strongroom.kms.catalog`).
    kmses: Mapping[str, Mapping[str, Any]] = field(default_factory=dict, repr=False)
    #: The schema registry of schema-mode rules (docs/schema-aware.md); its credentials never leave the driver
    #: on the JVM engine (tasks ask the key service for schema plans).
    schema_registry: RegistrySettings | None = field(default=None, repr=False)

    @property
    def client(self) -> ClientConfig:
        return ClientConfig(self.bootstrap_servers, dict(self.client_properties))

    def sink(self, spark: SparkSession, kind: str) -> TransactionalSinkConfig:
        """The exactly-once sink of this pipeline; its app id is explicit or recorded in the checkpoint
        (:func:`~strongroom.spark.jobs.progress.app_id_for`)."""
        return TransactionalSinkConfig(
            self.bootstrap_servers,
            app_id_for(spark, self.checkpoint, kind, self.app_id),
            dict(self.client_properties),
            retry_deadline_s=self.write_retry_deadline_s,
        )


def kafka_stream(spark: SparkSession, settings: PipelineSettings, subscription: Mapping[str, str]) -> DataFrame:
    """Spark's Kafka source over the subscription, with headers, reading committed records only.

    ``read_committed``: an aborted or still-open transaction (a killed, fenced or retried attempt of a
    strongroom pipeline, or any transactional producer upstream) is never read, so it is never
    encrypted or decrypted into the output. The source plans one task per topic-partition (no
    ``minPartitions`` / ``maxRecordsPerPartition``), which the exactly-once sink relies on.
    """
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", settings.bootstrap_servers)
        .option("includeHeaders", "true")
        .option("startingOffsets", settings.starting_offsets)
        # Records that aged out before they were read are counted and reported by the job (input gaps).
        .option("failOnDataLoss", "false")
    )
    for key, value in settings.client_properties.items():
        if key == "isolation.level":
            continue  # never read uncommitted data, whatever the client properties say
        reader = reader.option(f"kafka.{key}", str(value))
    reader = reader.option("kafka.isolation.level", "read_committed")
    for key, value in subscription.items():
        reader = reader.option(key, value)
    if settings.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(settings.max_offsets_per_trigger))
    return reader.load()


def wait_out_kms_outage(call: Callable[[], T], wait_s: float) -> T:
    """Run ``call``, waiting out a KMS outage (never mistaking it for a lost key); after ``wait_s`` the job
    stops with a clear error and resumes from its checkpoint when restarted."""
    from strongroom.keys.cache import retry_while_kms_unavailable
    from strongroom.kms.errors import KmsUnavailable

    try:
        return retry_while_kms_unavailable(call, wait_s)
    except KmsUnavailable as exc:
        raise PipelineError(
            f"the KMS has been unavailable for {wait_s:.0f}s: {exc.problem}",
            hint="restore the KMS; restarting the pipeline resumes where it stopped, without duplicates",
        ) from None


def source_rows(batch: DataFrame) -> DataFrame:
    """The batch's records as the sink's row transforms take them (``SOURCE_COLUMNS``)."""
    return batch.select(
        F.col("topic").alias("src_topic"),
        F.col("partition").alias("src_partition"),
        F.col("offset").alias("src_offset"),
        "key",
        "value",
        "headers",
        F.unix_millis("timestamp").alias("timestamp_ms"),
    )


def source_partitions(client: ClientConfig, rules: EncryptionRules) -> list[tuple[str, int]]:
    """Every partition of the cluster's topics the rules cover now."""
    counts = topic_partitions(new_admin(client))
    return sorted(
        (name, p)
        for name, n in counts.items()
        if not name.startswith("__") and any(r.matches(name) for r in rules.rules)
        for p in range(n)
    )


def input_gaps(client: ClientConfig, summaries: Iterable[PartitionSummary]) -> dict[tuple[str, int], int]:
    """Offsets each source partition lost before this batch read it: between where the pipeline had got
    to (the group's committed offset) and the first record it read, those now below the log start.

    Offsets missing above the log start are transaction markers or aborted records (read_committed),
    not losses.
    """
    behind = {
        s.source_partition: (s.group_offset, s.first_offset)
        for s in summaries
        if s.group_offset is not None and 0 <= s.group_offset < s.first_offset
    }
    if not behind:
        return {}
    starts = log_starts(client, behind)
    gaps = {tp: min(first, starts[tp]) - done for tp, (done, first) in behind.items() if tp in starts}
    return {tp: n for tp, n in gaps.items() if n > 0}


def matching_topics(topics: TopicLimits, rules: EncryptionRules) -> list[str]:
    """The cluster's topics the rules cover now (the subscription's topics)."""
    names = topics.admin.list_topics(timeout=30).topics
    return [n for n in sorted(names) if not n.startswith("__") and any(r.matches(n) for r in rules.rules)]


def driver_host(spark: SparkSession) -> str:
    """The address executors reach the driver at (where the key service listens)."""
    return spark.conf.get("spark.driver.host", "127.0.0.1") or "127.0.0.1"


def output_topics(client: ClientConfig, create: bool) -> TopicLimits:
    """Creates missing output topics like their source and knows each one's usable value size."""
    return TopicLimits(client, create=create, producer_max_bytes=RDKAFKA_MESSAGE_MAX_BYTES)


def ensure_topics(topics: TopicLimits, pairs: Iterable[tuple[str, str]]) -> None:
    """Make sure each ``(source, output)`` output topic exists."""
    for source, output in pairs:
        topics.max_value_bytes(output, source=source)


@dataclass
class Counters:
    """Per-status record counts over the life of a job (reported as progress and in the result)."""

    batches: int = 0
    by_status: dict[str, int] = field(default_factory=dict)
    written: int = 0
    replayed_skipped: int = 0
    #: Input offsets that aged out before the pipeline read them, per source partition.
    input_gaps: dict[str, int] = field(default_factory=dict)
    #: Seconds spent per phase of the batches (scan, keys, write, ...): where the time goes.
    seconds: dict[str, float] = field(default_factory=dict)
    #: Where phases, batches and transactions are also observed for Prometheus (``--metrics-port``).
    instruments: PipelineInstruments | None = None
    pipeline: str = "pipeline"

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            elapsed = time.perf_counter() - start
            self.seconds[name] = self.seconds.get(name, 0.0) + elapsed
            if self.instruments is not None:
                self.instruments.phase_seconds.labels(self.pipeline, name).observe(elapsed)

    def add_statuses(self, counts: Mapping[str, int]) -> None:
        for status, n in counts.items():
            self.by_status[status] = self.by_status.get(status, 0) + int(n)

    def add_summaries(self, summaries: Iterable[PartitionSummary]) -> None:
        for s in summaries:
            self.written += s.written
            self.replayed_skipped += s.replayed_skipped

    def add_batch(self, summaries: list[PartitionSummary]) -> None:
        """Count one written batch from the sink's per-partition summaries."""
        self.batches += 1
        for summary in summaries:
            self.add_statuses(summary.statuses)
        self.add_summaries(summaries)
        if self.instruments is not None:
            self.instruments.batches.labels(self.pipeline).inc()
            self.instruments.transactions_committed.labels(self.pipeline).inc(len(summaries))

    def add_input_gaps(self, gaps: Mapping[tuple[str, int], int]) -> None:
        for (topic, partition), lost in sorted(gaps.items()):
            key = f"{topic}[{partition}]"
            self.input_gaps[key] = self.input_gaps.get(key, 0) + lost
        if self.instruments is not None and gaps:
            self.instruments.input_gaps.labels(self.pipeline).inc()
            self.instruments.input_gap_offsets.labels(self.pipeline).inc(sum(gaps.values()))

    def add_aborted(self, transactions: int) -> None:
        if self.instruments is not None and transactions:
            self.instruments.transactions_aborted.labels(self.pipeline).inc(transactions)

    def snapshot(self) -> PipelineResult:
        """The counters as they are now (they keep counting; the result does not change)."""
        return PipelineResult(
            batches=self.batches,
            records=dict(sorted(self.by_status.items())),
            written=self.written,
            replayed_skipped=self.replayed_skipped,
            input_gaps=InputGaps(dict(sorted(self.input_gaps.items()))),
            seconds={k: round(v, 2) for k, v in self.seconds.items()},
        )


class StreamingJob(Generic[ResultT]):
    """The life cycle both pipelines share: a ``foreachBatch`` query over the Kafka source.

    Subclasses set ``kind``, build :meth:`source`, say what they report (:meth:`result`, a
    :class:`~strongroom.spark.jobs.results.PipelineResult`) and implement :meth:`process_batch`, storing any
    :class:`~strongroom.errors.StrongroomError` they raise in ``self.error`` so :meth:`run` can re-raise
    the original instead of Spark's wrapped copy.
    """

    kind = "pipeline"
    spark: SparkSession
    settings: PipelineSettings
    sink: TransactionalSinkConfig
    counters: Counters
    error: StrongroomError | None

    def source(self) -> DataFrame:
        raise NotImplementedError

    _lock: threading.Lock
    #: Cache each micro-batch (only jobs that read it more than once need to).
    cache_batches = True
    #: The start's abort of open transactions when it runs while the query starts (:meth:`start`).
    _aborting: threading.Thread | None = None

    def _prepare(self, batch: DataFrame, batch_id: int) -> DataFrame:
        """Hook before a batch is cached and processed."""
        return batch

    def _process(self, batch: DataFrame, batch_id: int) -> None:
        raise NotImplementedError

    def process_batch(self, batch: DataFrame, batch_id: int) -> None:
        """The ``foreachBatch`` function: one batch at a time, cached, errors kept for :meth:`run`."""
        with self._lock:
            self._wait_for_start_abort()
            cached: DataFrame | None = None
            try:
                prepared = self._prepare(batch, batch_id)
                if self.cache_batches:
                    cached = prepared = prepared.persist(StorageLevel.MEMORY_AND_DISK)
                self._process(prepared, batch_id)
            except StrongroomError as exc:
                self.error = exc  # Spark wraps it; run() re-raises the original
                raise
            except Exception as exc:
                first = (str(exc).strip().splitlines() or [""])[0][:500]
                self.error = PipelineError(
                    f"batch {batch_id} of the {self.kind} pipeline failed: {type(exc).__name__}: {first}",
                    hint=f"see the Spark log {jvm_log()}; restarting resumes from the checkpoint without duplicates",
                )
                raise
            finally:
                if cached is not None:
                    cached.unpersist()

    def result(self) -> ResultT:
        """What the job reports so far: its counters (``self.counters.snapshot()``) and its own figures."""
        raise NotImplementedError

    def close(self) -> None:
        """Release what the job holds (key tables, producers)."""

    def close_kept_clients(self) -> None:
        """Close the Kafka clients the JVM sink kept for this pipeline's next micro-batches (its consumer
        group's), so a restart starts with new ones; part of every JVM-engine job's :meth:`close`."""
        if self.settings.engine == Engine.JVM:
            close_idle_clients(self.spark, self.sink.group_id)

    def attach_metrics(self, registry: CollectorRegistry) -> None:
        """Export the job's figures on ``registry`` (``--metrics-port``, docs/metrics.md): records per
        outcome, phase latencies, transactions and input gaps as they happen, and the job's own parts
        (key table, KMS) through :meth:`_watch_parts`."""
        from strongroom.metrics import metrics_for

        metrics = metrics_for(registry)
        self.counters.pipeline = self.kind
        self.counters.instruments = metrics.pipeline
        metrics.pipeline.start(self.kind)
        metrics.watch_records(self.kind, self.record_sample)
        self._watch_parts(metrics)

    def record_sample(self) -> RecordSample:
        """The records so far, in the metrics' words (``ok`` is ``sealed`` or ``opened``)."""
        raise NotImplementedError

    def _watch_parts(self, metrics: Metrics) -> None:
        """Register the samplers of what the job holds (its key table, its KMS)."""

    def write_batch(
        self, frame: DataFrame, transform: RowTransform | None = None, tasks: WriteTasks | None = None
    ) -> list[PartitionSummary]:
        """Write one micro-batch exactly once (the Kafka source gives one task per partition), count it,
        and check it for input that aged out before it was read; ``tasks`` runs the write in another engine
        (:mod:`strongroom.spark.jvm_sink`). When the write stops (a fatal record, a transform that failed),
        the transactions other tasks left open are aborted at once, so readers of the output are not held
        back until ``transaction.timeout.ms``."""
        try:
            with self.counters.phase("write"):
                summaries = write_exactly_once(frame, self.sink, transform, one_task_per_partition=True, tasks=tasks)
        except PipelineError:
            self.abort_open_transactions()
            raise
        self.counters.add_batch(summaries)
        self._check_input_gaps(summaries)
        return summaries

    def abort_open_transactions(self) -> None:
        """Abort whatever transaction a stopped task of this pipeline left open (one per source partition)."""
        try:
            partitions = source_partitions(self.settings.client, self.settings.rules)
            aborted = self.sink.abort_open(partitions)
        except Exception as exc:  # noqa: BLE001 - best effort on the way out: the original error matters more
            log.warning("could not abort the pipeline's open transactions: %s", exc)
            return
        self.counters.add_aborted(aborted)
        if aborted:
            log.info("aborted the open transactions of %d source partitions", aborted)

    def _check_input_gaps(self, summaries: list[PartitionSummary]) -> None:
        gaps = input_gaps(self.settings.client, summaries)
        if not gaps:
            return
        self.counters.add_input_gaps(gaps)
        described = ", ".join(f"{t}[{p}]: {n}" for (t, p), n in sorted(gaps.items()))
        log.error("input records aged out before the %s pipeline read them (offsets per partition): %s",
                  self.kind, described)  # fmt: skip
        if self.settings.on_input_gap == InputGapPolicy.FAIL:
            raise PipelineError(
                f"input records aged out before the {self.kind} pipeline read them ({described} offsets)",
                hint="they are gone from Kafka; raise the input topics' retention or run the pipeline more often; "
                "restart with --on-input-gap report to continue past the gap",
            )

    def start(self) -> StreamingQuery:
        progress = read_checkpoint(self.spark, self.settings.checkpoint)
        # A killed run may have left transactions open on partitions that get no new data for a while; end
        # them now rather than let them hold read_committed readers of the output back until they time out.
        if partitions_to_restore(progress):
            # First: their offsets are pending in the consumer group, and reading the group's committed
            # offsets (restore_progress) waits for them to resolve, up to the transaction timeout.
            self.abort_open_transactions()
            restore_progress(self.settings.client, self.sink.group_id, progress)
        else:
            # A new checkpoint has no offsets to restore: the abort (a coordinator round trip per partition)
            # runs while Spark starts the query. The first micro-batch waits for it, so every task's own
            # fencing of its transactional id comes after it.
            self._aborting = threading.Thread(
                target=self.abort_open_transactions, name="strongroom-abort-open", daemon=True
            )
            self._aborting.start()
        writer = (
            self.source()
            .writeStream.foreachBatch(self.process_batch)
            .option("checkpointLocation", self.settings.checkpoint)
            .queryName(self.sink.app_id)
        )
        if self.settings.trigger_seconds is None:
            writer = writer.trigger(availableNow=True)
        else:
            writer = writer.trigger(processingTime=f"{self.settings.trigger_seconds} seconds")
        return writer.start()

    def _wait_for_start_abort(self) -> None:
        """Wait until the abort :meth:`start` began is done (no-op when it ran before the query started)."""
        aborting, self._aborting = self._aborting, None
        if aborting is not None:
            aborting.join()

    def stop_gracefully(self, query: StreamingQuery, timeout_s: float = 120.0) -> None:
        """Stop between micro-batches: the running batch commits (or fails) first, so no transaction is
        left open. A batch still running after ``timeout_s`` is stopped anyway and the transactions its
        tasks held are aborted."""
        self._wait_for_start_abort()
        deadline = time.monotonic() + timeout_s
        try:
            while query.isActive and query.status.get("isTriggerActive") and time.monotonic() < deadline:
                time.sleep(0.2)
            interrupted = query.isActive and bool(query.status.get("isTriggerActive"))
            query.stop()
        except Exception as exc:  # noqa: BLE001 - Spark's JVM is gone too (a SIGTERM to the process group)
            log.warning("the %s query could not be stopped cleanly: %s", self.kind, type(exc).__name__)
            interrupted = True
        if interrupted:
            self.abort_open_transactions()

    def run(self) -> ResultT:
        """Process everything available now, then stop; returns :meth:`result`."""
        query = self.start()
        try:
            query.awaitTermination()
        except KeyboardInterrupt:
            self.stop_gracefully(query)
            raise
        except Exception as exc:  # noqa: BLE001 - Spark's StreamingQueryException; re-raised below, clearly
            if self.error is None:
                raise PipelineError(
                    f"the {self.kind} query stopped: {str(exc).strip().splitlines()[0]}",
                    hint=f"see the Spark log {jvm_log()}; restarting resumes from the checkpoint without duplicates",
                ) from None
        finally:
            if query.isActive:
                query.stop()
            self._wait_for_start_abort()  # a query with no batch: its producers are closed before run returns
        if self.error is not None:
            raise self.error
        return self.result()
