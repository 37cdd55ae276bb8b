"""The scrub job: compare the ledger with the current log, classify every record, score durability.

A thin I/O shell around pure transforms (:mod:`strongroom.audit.digest`,
:func:`strongroom.audit.classify.classify`):

1. snapshot the ledger (its file listing is fixed before anything else is looked at, so every
   ledgered offset was captured from a log that was at least that long);
2. ask the cluster for log start offsets, stable end offsets and topic configs, and the operations
   log for recorded deletions;
3. read the whole current log once with the ``strongroom-kafka`` source (offset ranges read in the
   executors) and reduce it to chunk digests and range markers - map-side, nothing shuffled;
4. digest the ledger the same way; chunks that agree are ``ok`` as a whole, chunks only in the log
   and outside the ledger's coverage are ``unledgered``;
5. re-read only the remaining *suspect* chunks and classify them row by row (full outer join on
   topic, partition, offset); keep non-ok records as findings;
6. append the counts and findings to the scrub history (Parquet) and write a JSON summary.
"""

from __future__ import annotations

import json
import time
import uuid
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from strongroom.audit.classify import (
    COVERAGE_DDL,
    DELETIONS_DDL,
    DURABLE_STATUSES,
    PARTITIONS_DDL,
    TOPICS_DDL,
    UNLEDGERED,
    ClassifyParams,
    classify,
    not_ok,
    status_counts,
    topics_rows,
)
from strongroom.audit.datasource import DEFAULT_MAX_RECORDS_PER_RANGE
from strongroom.audit.delivery import KIND_DELIVERY
from strongroom.audit.digest import DEFAULT_CHUNK_SIZE, ChunkPlan, chunk_digests, plan_chunks
from strongroom.audit.errors import KafkaReadError
from strongroom.audit.kafka_state import ClusterState, TopicState
from strongroom.audit.ledger import coverage_ranges, ledger_topics, read_ledger, records_of
from strongroom.audit.oplog import OperationsLog, deletion_bounds
from strongroom.audit.progress import ProgressFn, with_progress
from strongroom.audit.ranges import merge_ranges
from strongroom.audit.readers import DEFAULT_READER, AuditReader, guarded, read_batch
from strongroom.audit.schema import KIND_DIGEST, KIND_RANGE, KIND_RECORD
from strongroom.audit.scrub_summary import ScrubRun, ScrubSummary, counts_of, topic_scrubs
from strongroom.audit.store import LedgerPaths
from strongroom.kafka.config import ClientConfig
from strongroom.runtime import now_ms

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: Estimated on-disk bytes per record beyond key and value (record and batch headers), used only
#: to judge retention.bytes; generous, so size-based deletions are not reported as unjustified.
RECORD_OVERHEAD_BYTES = 64


@dataclass(frozen=True)
class ScrubOptions:
    topics: Sequence[str] | None = None
    span_ms: int = 3_600_000
    max_records_per_range: int = DEFAULT_MAX_RECORDS_PER_RANGE
    clock_skew_ms: int = 5_000
    examples: int = 20
    write_history: bool = True
    chunk_size: int = DEFAULT_CHUNK_SIZE
    #: Which reader reads the log (see :mod:`strongroom.audit.readers`).
    reader: AuditReader = DEFAULT_READER


def run_scrub(
    spark: SparkSession,
    client: ClientConfig,
    ledger: LedgerPaths,
    options: ScrubOptions | None = None,
    *,
    progress: ProgressFn | None = None,
) -> ScrubSummary:
    """Run one scrub and return its summary (also written under ``<ledger>/scrubs``)."""
    return _Scrub(spark, client, ledger, options or ScrubOptions(), progress).run()


class _Scrub:
    """One scrub run, step by step (the steps share what they found as attributes)."""

    def __init__(
        self, spark: SparkSession, client: ClientConfig, ledger: LedgerPaths, opts: ScrubOptions,
        progress: ProgressFn | None,
    ) -> None:  # fmt: skip
        self.spark, self.client, self.ledger, self.opts, self.progress = spark, client, ledger, opts, progress
        self.run_id = datetime.now(tz=UTC).strftime("%Y%m%dT%H%M%SZ-") + uuid.uuid4().hex[:6]
        self.started = time.monotonic()
        self.started_ms = now_ms()
        self.phases: dict[str, float] = {}
        self._clock = self.started
        self.count_rows: list[dict[str, Any]] = []
        self.examples: list[dict[str, Any]] = []
        self.state: dict[str, TopicState] = {}
        self.partition_facts: dict[tuple[str, int], tuple[Any, ...]] = {}
        self.records_read = 0
        self.operations = 0
        self.chunks: dict[str, int] = {}

    def _phase(self, name: str) -> None:
        now = time.monotonic()
        self.phases[name] = round(now - self._clock, 2)
        self._clock = now

    def run(self) -> ScrubSummary:
        ledger_df = self._snapshot_ledger()
        if ledger_df is not None:
            cluster, bounds = self._cluster_facts()
            markers, log_chunks = self._read_log()
            plan, ledger_records, captured, coverage_rows = self._plan(ledger_df, markers, log_chunks)
            if plan.suspect:
                self._classify_suspects(plan, cluster, bounds, markers, ledger_records, captured, coverage_rows)
        summary = self._summary()
        if self.opts.write_history:
            _write_history(self.spark, self.ledger, self.run_id, self.started_ms, self.count_rows, summary)
            self._phase("history")
        return summary

    def _snapshot_ledger(self) -> DataFrame | None:
        """Fix the ledger's file listing before anything else is looked at: every ledgered offset was
        captured from a log that was at least that long. None when there is nothing to scrub."""
        from pyspark.sql import functions as F

        ledger_df = read_ledger(self.spark, self.ledger)
        topics = list(self.opts.topics) if self.opts.topics else ledger_topics(ledger_df)
        self._phase("ledger_snapshot")
        self.topics = topics
        return ledger_df.filter(F.col("topic").isin(topics)) if topics else None

    def _cluster_facts(self) -> tuple[ClusterState, dict[tuple[str, int], tuple[int, str]]]:
        """Log start offsets, stable ends and configs of every partition; the recorded deletions."""
        cluster = ClusterState(self.client)
        self.state = cluster.describe(self.topics)
        unknown = {f"{p.topic}[{p.partition}]" for t in self.state.values() for p in t.partitions
                   if p.stable_end < 0 or p.log_start < 0}  # fmt: skip
        if unknown:
            raise KafkaReadError(
                f"cannot read the offsets of {', '.join(sorted(unknown))}: no leader answers",
                hint="wait until every partition has a leader (kafka-topics --describe), then scrub again",
            )
        operations = OperationsLog(self.client).read()
        self.operations = len(operations)
        self._phase("cluster_state")
        return cluster, deletion_bounds(operations)

    def _read_log(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """One pass over the current log: chunk digests and range markers, computed in the executors."""
        ranges = [(p.topic, p.partition, p.log_start, p.stable_end) for t in self.state.values() for p in t.partitions]
        log_rows = with_progress(
            self.spark,
            "reading the log",
            guarded(lambda: [r.asDict() for r in self._log_digests(ranges).collect()]),
            self.progress,
        )
        markers = [
            {"topic": r["topic"], "partition": r["partition"], "offset": r["min_offset"], "range_end": r["range_end"],
             "range_records": r["range_records"], "range_bytes": r["range_bytes"]}
            for r in log_rows if r["kind"] == KIND_RANGE
        ]  # fmt: skip
        log_chunks = [r for r in log_rows if r["kind"] != KIND_RANGE]
        self.records_read = sum(int(r["records"]) for r in log_chunks)
        self.partition_facts = _partition_rows(self.state, markers)
        self._phase("read_log")
        return markers, log_chunks

    def _log_digests(self, ranges: list[tuple[str, int, int, int]]) -> DataFrame:
        return _read_log(self.spark, self.client, ranges, self.opts, digests=True)

    def _plan(
        self, ledger_df: DataFrame, markers: list[dict[str, Any]], log_chunks: list[dict[str, Any]]
    ) -> tuple[ChunkPlan, DataFrame, DataFrame, list[Any]]:
        """The ledger's digests and coverage, and the verdict per chunk: matched chunks are ok as a
        whole, chunks only in the log outside the coverage are unledgered, the rest is suspect."""
        from pyspark.sql import functions as F

        chunk = self.opts.chunk_size
        ledger_records = records_of(ledger_df)
        captured = ledger_records.filter(F.col("kind") == F.lit(KIND_RECORD))
        ledger_rows = _ledger_digests(ledger_df, captured, self.opts)
        coverage_rows = coverage_ranges(ledger_df).select("topic", "partition", "range_start", "range_end").collect()
        coverage: dict[tuple[str, int], list[tuple[int, int]]] = defaultdict(list)
        for c in coverage_rows:
            coverage[(c.topic, int(c.partition))].append((int(c.range_start), int(c.range_end)))
        plan = plan_chunks(ledger_rows, log_chunks, coverage, chunk)
        plan.demote(self._delivered_chunks(ledger_records))
        self.count_rows = _plan_counts(plan, ledger_rows, chunk)
        self.chunks = {"size": chunk, "matched": plan.matched_chunks, "suspect": len(plan.suspect),
                       "unledgered_only": sum(len(v) for v in plan.unledgered.values())}  # fmt: skip
        self._phase("digests")
        return plan, ledger_records, captured, coverage_rows

    def _delivered_chunks(self, ledger_records: DataFrame) -> list[tuple[str, int, int]]:
        """Chunks holding producer delivery reports: checked row by row, they may disagree with the capture."""
        from pyspark.sql import functions as F

        if self.ledger.is_local and not any(self.ledger.local(self.ledger.deliveries).rglob("*.parquet")):
            return []
        chunk = F.floor(F.col("offset") / F.lit(self.opts.chunk_size)).cast("bigint").alias("chunk")
        rows = (
            ledger_records.filter(F.col("kind") == F.lit(KIND_DELIVERY))
            .select("topic", "partition", chunk)
            .distinct()
            .collect()
        )
        return [(r.topic, int(r.partition), int(r.chunk)) for r in rows]

    def _classify_suspects(
        self, plan: ChunkPlan, cluster: ClusterState, bounds: dict[tuple[str, int], tuple[int, str]],
        markers: list[dict[str, Any]], ledger_records: DataFrame, captured: DataFrame, coverage_rows: list[Any],
    ) -> None:  # fmt: skip
        """Re-read only the suspect chunks and classify them row by row; keep non-ok records as findings."""
        from pyspark import StorageLevel
        from pyspark.sql import functions as F

        spark, chunk = self.spark, self.opts.chunk_size
        suspects = spark.createDataFrame(plan.suspect, "topic STRING, partition INT, chunk BIGINT")
        ledger_sub = (
            ledger_records.withColumn("chunk", F.floor(F.col("offset") / F.lit(chunk)).cast("bigint"))
            .join(F.broadcast(suspects), ["topic", "partition", "chunk"])
            .drop("chunk")
        )
        log_sub = _read_log(spark, self.client, _suspect_ranges(plan.suspect, self.partition_facts, chunk), self.opts)
        log_sub = log_sub.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            reread = log_sub.filter(F.col("kind") == F.lit(KIND_RANGE))
            with_progress(spark, "re-reading suspect chunks", guarded(reread.count), self.progress)
            # Where the log starts now that the re-read is done: it never moves back, so every record
            # below it had left the log by then. The re-read's own markers are no evidence of that:
            # they carry where each re-read piece was planned to start.
            relisted = cluster.list_offsets(list(self.partition_facts), "earliest")
            self.partition_facts = _partition_rows(self.state, markers, relisted_start={k: o for k, (o, _) in
                                                                                        relisted.items()})  # fmt: skip
            partitions, topics, deletions, params, coverage = self._classify_inputs(bounds, coverage_rows)
            retained = _retained_keys(spark, captured, plan, self.state, chunk)
            classified = classify(
                ledger_sub, log_sub, partitions, topics, deletions, params, coverage=coverage, retained_keys=retained
            ).persist(StorageLevel.MEMORY_AND_DISK)  # fmt: skip
            counts = with_progress(spark, "classifying", lambda: status_counts(classified).collect(), self.progress)
            self.count_rows.extend(r.asDict() for r in counts)
            self._phase("classify_suspects")
            if any(r["status"] not in DURABLE_STATUSES and r["status"] != UNLEDGERED for r in self.count_rows):
                self.examples = _findings(spark, self.ledger, classified, self.run_id, self.opts, self.progress)
                self._phase("findings")
            classified.unpersist()
        finally:
            log_sub.unpersist()

    def _classify_inputs(
        self, bounds: dict[tuple[str, int], tuple[int, str]], coverage_rows: list[Any]
    ) -> tuple[DataFrame, DataFrame, DataFrame, ClassifyParams, DataFrame]:
        """The cluster facts as the classification's small frames (partitions, topics, deletions), its
        parameters and the ledger's coverage."""
        spark, state = self.spark, self.state
        return (
            spark.createDataFrame([r[:5] for r in self.partition_facts.values()], PARTITIONS_DDL),
            spark.createDataFrame(topics_rows((t, dict(s.config)) for t, s in state.items()), TOPICS_DDL),
            spark.createDataFrame(
                [(t, p, up_to, op) for (t, p), (up_to, op) in bounds.items() if t in state], DELETIONS_DDL
            ),
            ClassifyParams(
                now_ms=now_ms(),
                span_ms=self.opts.span_ms,
                clock_skew_ms=self.opts.clock_skew_ms,
                compacted_topics=frozenset(t for t, s in state.items() if s.compacted),
            ),
            spark.createDataFrame(coverage_rows, COVERAGE_DDL),
        )

    def _summary(self) -> ScrubSummary:
        run = ScrubRun(
            run_id=self.run_id,
            started_ms=self.started_ms,
            finished_ms=now_ms(),
            seconds=round(time.monotonic() - self.started, 2),
            ledger=self.ledger.root,
            bootstrap_servers=self.client.bootstrap_servers,
            span_ms=self.opts.span_ms,
            phases=self.phases,
        )
        return ScrubSummary(
            run=run,
            records_read=self.records_read,
            counts=counts_of(self.count_rows),
            topics=topic_scrubs(self.count_rows, self.state, self.partition_facts, self.opts.span_ms),
            examples=self.examples,
            operations_considered=self.operations,
            chunks=self.chunks,
        )


def _ledger_digests(ledger_df: DataFrame, captured: DataFrame, opts: ScrubOptions) -> list[dict[str, Any]]:
    """The ledger's chunk digests, with record counts per span.

    The capture stores each chunk's digest (``kind=digest`` rows) as it reads, so the scrub only
    counts records per (chunk, span) - a scan of three numeric columns. Ledgers without digest rows,
    or a scrub with another chunk size, hash the ledger in Spark instead.
    """
    from pyspark.sql import functions as F

    chunk = opts.chunk_size
    if chunk != DEFAULT_CHUNK_SIZE or not any("/kind=digest/" in f for f in ledger_df.inputFiles()):
        return [r.asDict() for r in chunk_digests(captured, chunk, span_ms=opts.span_ms).collect()]
    digests = (
        ledger_df.filter(F.col("kind") == F.lit(KIND_DIGEST))
        .select(
            "topic", "partition", "chunk", F.lit(0).cast("bigint").alias("records"), "digest_xor", "digest_lo",
            "digest_hi", F.col("offset").alias("min_offset"), (F.col("range_end") - 1).alias("max_offset"),
            F.lit(None).cast("bigint").alias("span_start"),
        )
    )  # fmt: skip
    spans = captured.groupBy(
        "topic",
        "partition",
        F.floor(F.col("offset") / F.lit(chunk)).cast("bigint").alias("chunk"),
        (F.floor(F.col("timestamp") / F.lit(opts.span_ms)) * F.lit(opts.span_ms)).cast("bigint").alias("span_start"),
    ).agg(
        F.count(F.lit(1)).alias("records"),
        F.lit(0).cast("bigint").alias("digest_xor"),
        F.lit(0).cast("bigint").alias("digest_lo"),
        F.lit(0).cast("bigint").alias("digest_hi"),
        F.min("offset").alias("min_offset"),
        F.max("offset").alias("max_offset"),
    )
    # Digest rows carry the hashes (and no records), span rows the counts (and no hashes): summed per
    # chunk they are the chunk's digest; a chunk missing either side cannot match the log.
    return [r.asDict() for r in spans.unionByName(digests).collect()]


def _read_log(
    spark: SparkSession,
    client: ClientConfig,
    ranges: Sequence[tuple[str, int, int, int]],
    opts: ScrubOptions,
    *,
    digests: bool = False,
) -> DataFrame:
    return read_batch(
        spark,
        client,
        opts.reader,
        ranges=json.dumps([list(r) for r in ranges if r[3] > r[2]]),
        emitRanges=True,
        maxRecordsPerRange=opts.max_records_per_range,
        minRanges=spark.sparkContext.defaultParallelism * 2,
        output="digests" if digests else "rows",
        chunkSize=opts.chunk_size,
    ).load()


def _retained_keys(
    spark: SparkSession, captured: DataFrame, plan: ChunkPlan, state: dict[str, TopicState], chunk: int
) -> DataFrame | None:
    """Keys of compacted topics' ledgered records in chunks whose digests matched: still in the log,
    though not re-read, so compaction may have removed an older record of the same key."""
    from pyspark.sql import functions as F

    compacted = {t for t, s in state.items() if s.compacted}
    matched = [key for key in plan.matched if key[0] in compacted]
    if not matched:
        return None
    chunks = spark.createDataFrame(matched, "topic STRING, partition INT, chunk BIGINT")
    return (
        captured.filter(F.col("topic").isin(sorted(compacted)))
        .withColumn("chunk", F.floor(F.col("offset") / F.lit(chunk)).cast("bigint"))
        .join(F.broadcast(chunks), ["topic", "partition", "chunk"])
        .select("topic", "partition", "offset", "key_hash")
    )


def _suspect_ranges(
    suspects: Sequence[tuple[str, int, int]], partitions_rows: dict[tuple[str, int], tuple[Any, ...]], chunk: int
) -> list[tuple[str, int, int, int]]:
    """Offset ranges covering the suspect chunks (adjacent chunks merged), clipped to the log."""
    by_partition: dict[tuple[str, int], list[tuple[int, int]]] = defaultdict(list)
    for topic, partition, c in suspects:
        by_partition[(topic, partition)].append((c * chunk, (c + 1) * chunk))
    out = []
    for (topic, partition), spans in by_partition.items():
        facts = partitions_rows.get((topic, partition))
        if facts is None:
            continue
        log_start, log_end = int(facts[2]), int(facts[3])
        for s, e in merge_ranges(spans):
            s, e = max(s, log_start), min(e, log_end)
            if e > s:
                out.append((topic, partition, s, e))
    return out


def _plan_counts(plan: ChunkPlan, ledger_rows: Sequence[dict[str, Any]], chunk: int) -> list[dict[str, Any]]:
    """Status-count rows (as :func:`status_counts` makes) for what the digests decided."""
    rows: list[dict[str, Any]] = []
    ranges = plan.ok_ranges
    for (topic, partition, span), n in sorted(plan.ok_by_span.items(), key=lambda x: (x[0][0], x[0][1], x[0][2] or 0)):
        lo, hi = ranges.get((topic, partition), (None, None))
        rows.append({"topic": topic, "partition": partition, "span_start": span, "status": "ok", "records": n,
                     "min_offset": lo, "max_offset": hi, "in_coverage": 0})  # fmt: skip
    for (topic, partition), items in sorted(plan.unledgered.items()):
        rows.append({"topic": topic, "partition": partition, "span_start": None, "status": UNLEDGERED,
                     "records": sum(n for n, _, _ in items), "min_offset": min(lo for _, lo, _ in items),
                     "max_offset": max(hi for _, _, hi in items), "in_coverage": 0})  # fmt: skip
    return rows


def _findings(
    spark: SparkSession,
    ledger: LedgerPaths,
    classified: DataFrame,
    run_id: str,
    opts: ScrubOptions,
    progress: ProgressFn | None,
) -> list[dict[str, Any]]:
    from pyspark.sql import functions as F

    findings = not_ok(classified).withColumn("run_id", F.lit(run_id))
    if opts.write_history:
        with_progress(
            spark,
            "writing findings",
            lambda: findings.write.mode("append").partitionBy("run_id").parquet(ledger.scrub_findings),
            progress,
        )
    examples = [
        r.asDict()
        for r in findings.filter(F.col("status") != F.lit("expired-justified"))
        .orderBy("topic", "partition", "offset")
        .limit(opts.examples)
        .collect()
    ]
    for e in examples:
        e.pop("run_id", None)
    return examples


def _partition_rows(
    state: dict[str, TopicState], markers: Sequence[Any], *, relisted_start: Mapping[tuple[str, int], int] | None = None
) -> dict[tuple[str, int], tuple[Any, ...]]:
    """(topic, partition, log_start, log_end, log_bytes, planned_start, planned_end) per partition.

    The log start is the latest of three observed facts, never a planned range or piece start:

    * the cluster's earliest offset, listed before the read (``state``);
    * the lowest position the pass over the whole log read from (``markers``): its first piece starts
      at that listed offset, and a reader whose start had expired meanwhile was moved up to the log
      start its leader reported - the marker's ``offset``;
    * ``relisted_start``: the earliest offset listed again after the re-read of suspect chunks.

    Only a record below this log start can be explained by retention or deletion; one that is absent
    at or above it was lost (:mod:`strongroom.audit.classify`). The end is where the first pass ended.
    """
    read_start: dict[tuple[str, int], int] = {}
    read_end: dict[tuple[str, int], int] = {}
    nbytes: dict[tuple[str, int], int] = defaultdict(int)
    for m in markers:
        key = (m["topic"], int(m["partition"]))
        read_start[key] = min(read_start.get(key, m["offset"]), m["offset"])
        read_end[key] = max(read_end.get(key, m["range_end"]), m["range_end"])
        nbytes[key] += int(m["range_bytes"] or 0) + RECORD_OVERHEAD_BYTES * int(m["range_records"] or 0)
    relisted = relisted_start or {}
    rows: dict[tuple[str, int], tuple[Any, ...]] = {}
    for topic_state in state.values():
        for p in topic_state.partitions:
            key = (p.topic, p.partition)
            log_start = max(p.log_start, read_start.get(key, p.log_start), relisted.get(key, p.log_start))
            log_end = read_end.get(key, p.stable_end)
            rows[key] = (p.topic, p.partition, log_start, log_end, nbytes.get(key, 0), p.log_start, p.stable_end)
    return rows


def _counts_arrow() -> Any:
    import pyarrow as pa

    return pa.schema(
        [("run_id", pa.string()), ("scrubbed_at", pa.int64()), ("topic", pa.string()), ("partition", pa.int32()),
         ("span_start", pa.int64()), ("status", pa.string()), ("records", pa.int64()), ("min_offset", pa.int64()),
         ("max_offset", pa.int64())]
    )  # fmt: skip


_COUNTS_ARROW = _counts_arrow()


def _write_history(
    spark: SparkSession,
    ledger: LedgerPaths,
    run_id: str,
    started_ms: int,
    count_rows: list[dict[str, Any]],
    summary: ScrubSummary,
) -> None:
    schema = (
        "run_id STRING, scrubbed_at BIGINT, topic STRING, partition INT, span_start BIGINT, status STRING, "
        "records BIGINT, min_offset BIGINT, max_offset BIGINT"
    )
    rows = [
        (run_id, started_ms, r["topic"], int(r["partition"]), r["span_start"], r["status"], int(r["records"]),
         r["min_offset"], r["max_offset"])
        for r in count_rows
    ]  # fmt: skip
    text = json.dumps(summary.to_json(), indent=2, default=str)
    if ledger.is_local:
        # Small tables: written with pyarrow, no Spark job (same layout Spark reads back).
        import pyarrow as pa
        import pyarrow.parquet as pq

        counts_dir = ledger.local(ledger.scrub_counts)
        counts_dir.mkdir(parents=True, exist_ok=True)
        names = [f.split()[0] for f in schema.split(", ")]
        table = pa.Table.from_pylist([dict(zip(names, r, strict=True)) for r in rows], schema=_COUNTS_ARROW)
        pq.write_table(table, counts_dir / f"part-{run_id}.parquet")
    else:
        spark.createDataFrame(rows, schema).coalesce(1).write.mode("append").parquet(ledger.scrub_counts)
    if ledger.is_local:
        directory = ledger.local(ledger.scrub_summaries)
        directory.mkdir(parents=True, exist_ok=True)
        (directory / f"{run_id}.json").write_text(text)
    else:
        spark.createDataFrame([(text,)], "value STRING").coalesce(1).write.mode("overwrite").text(
            f"{ledger.scrub_summaries}/{run_id}"
        )
