"""``strongroom-kafka``: a PySpark Python Data Source that reads Kafka *with leader epochs*.

Spark's own Kafka source has no leader-epoch column, and the audit identifies a record by (leader
epoch, offset). This source reads with confluent-kafka inside the executors: one input partition per
(topic, partition, offset range), big partitions split into ranges for parallelism, each range read
by :func:`strongroom.audit.kafka_reader.read_range` and returned as Arrow batches of the rows in
:mod:`strongroom.audit.schema` (hashes, never content).

Batch::

    spark.read.format("strongroom-kafka")
        .option("kafka.bootstrap.servers", bs).option("topics", "a,b")
        .option("startingOffsets", "earliest").option("endingOffsets", "latest")   # or JSON
        .load()

or ``.option("ranges", json.dumps([[topic, partition, start, end], ...]))`` for exact ranges (the
scrub plans its own). Streaming (``spark.readStream``): offsets are JSON ``{topic: {partition: next
offset}}``, so Spark's checkpoint plus the file sink make a ledger exactly-once; a new partition is
read from its log start; the end never moves backwards within a run (after a truncation the source
waits until the log passes what it already read, so offsets it has seen are not re-captured with new
content).

Options: ``kafka.*`` (librdkafka properties: bootstrap, security), ``topics``, ``startingOffsets``,
``endingOffsets``, ``ranges``, ``maxRecordsPerRange`` (default 500000), ``minRanges`` (default 1),
``emitRanges`` (range marker rows; default false), ``isolation`` (``read_committed`` default or
``read_uncommitted``), ``emitDigests`` (also ``kind=digest`` rows, the ledger's precomputed chunk
digests; default false), ``idleTimeoutSeconds`` (default 60), ``eofGraceSeconds`` (default 30: how
long a read that found the log ending short of its planned end keeps fetching, see
:mod:`strongroom.audit.kafka_reader`), ``output`` (``rows``, or ``digests``:
one row per ``chunkSize`` offsets with the digest of :mod:`strongroom.audit.digest` plus the range
markers - the records stay in the executor).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition

from strongroom.audit.kafka_reader import DEFAULT_EOF_GRACE
from strongroom.audit.ranges import OffsetRange, plan_ranges
from strongroom.audit.schema import LOG_ROWS_DDL

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

SOURCE_NAME = "strongroom-kafka"
DEFAULT_MAX_RECORDS_PER_RANGE = 500_000

Offsets = dict[str, dict[str, int]]


class RangePartition(InputPartition):
    """One offset range of one Kafka partition (pickled to the executor that reads it)."""

    def __init__(self, topic: str, partition: int, start: int, end: int) -> None:
        super().__init__((topic, partition, start, end))
        self.topic = topic
        self.partition = partition
        self.start = start
        self.end = end


class _Settings:
    """Parsed, validated options shared by the batch and streaming readers."""

    def __init__(self, options: Mapping[str, str]) -> None:
        from strongroom.errors import ConfigError

        opts = {str(k).lower(): str(v) for k, v in options.items()}
        self.connection: dict[str, str] = {k[len("kafka.") :]: v for k, v in opts.items() if k.startswith("kafka.")}
        if "bootstrap.servers" not in self.connection:
            raise ConfigError(
                f"the {SOURCE_NAME} source needs the kafka.bootstrap.servers option",
                hint='add .option("kafka.bootstrap.servers", "host:9092")',
            )
        self.topics = [t.strip() for t in opts.get("topics", "").split(",") if t.strip()]
        self.ranges = opts.get("ranges")
        if not self.topics and not self.ranges:
            raise ConfigError(f"the {SOURCE_NAME} source needs the topics option", hint='add .option("topics", "a,b")')
        self.starting = opts.get("startingoffsets", "earliest")
        self.ending = opts.get("endingoffsets", "latest")
        self.max_records = int(opts.get("maxrecordsperrange", DEFAULT_MAX_RECORDS_PER_RANGE))
        self.min_ranges = int(opts.get("minranges", "1"))
        self.emit_ranges = opts.get("emitranges", "false").lower() == "true"
        self.emit_digests = opts.get("emitdigests", "false").lower() == "true"
        self.isolation = opts.get("isolation", "read_committed")
        if self.isolation not in ("read_committed", "read_uncommitted"):
            raise ConfigError(
                f"isolation {self.isolation!r} is not supported", hint="use read_committed or read_uncommitted"
            )
        self.idle_timeout = float(opts.get("idletimeoutseconds", "60"))
        self.eof_grace = float(opts.get("eofgraceseconds", str(DEFAULT_EOF_GRACE)))
        self.output = opts.get("output", "rows")
        if self.output not in ("rows", "digests"):
            raise ConfigError(f"output {self.output!r} is not supported", hint="use rows or digests")
        self.chunk_size = int(opts.get("chunksize", "10000"))

    def cluster(self) -> Any:
        from strongroom.audit.kafka_state import CAPTURE_LISTING_TIMEOUT, ClusterState
        from strongroom.kafka.config import ClientConfig

        extra = {k: v for k, v in self.connection.items() if k != "bootstrap.servers"}
        return ClusterState(
            ClientConfig(self.connection["bootstrap.servers"], extra=extra), timeout=CAPTURE_LISTING_TIMEOUT
        )

    def resolve(self, spec: str, which: str, *, keep: Offsets | None = None) -> Offsets:
        """``earliest`` / ``latest`` / JSON offsets -> {topic: {partition: offset}} for all partitions.

        A partition whose leader does not answer is left out, unless ``keep`` is given: then it must be in
        ``keep``, or the read fails naming it."""
        state = self.cluster()
        tps = [(t, p) for t, md in state.partitions_of(self.topics).items() for p in md.partitions]
        explicit: Offsets = {}
        if spec not in ("earliest", "latest"):
            explicit = {t: {str(p): int(o) for p, o in ps.items()} for t, ps in json.loads(spec).items()}
            spec = "earliest" if which == "start" else "latest"
        found = state.list_offsets(tps, spec, committed=self.isolation == "read_committed")
        out: Offsets = {}
        for t, p in tps:
            if str(p) in explicit.get(t, {}):
                out.setdefault(t, {})[str(p)] = explicit[t][str(p)]
            elif (t, p) in found:
                out.setdefault(t, {})[str(p)] = found[(t, p)][0]
        if keep is not None:
            self._refuse_unlisted(tps, out, keep)
        return out

    @staticmethod
    def _refuse_unlisted(tps: Sequence[tuple[str, int]], listed: Offsets, keep: Offsets) -> None:
        """Fail the read naming the partitions neither ``listed`` nor in ``keep``."""
        lost = [f"{t}[{p}]" for t, p in tps if str(p) not in listed.get(t, {}) and str(p) not in keep.get(t, {})]
        if lost:
            from strongroom.audit.readers import JVM_READ_FAILED

            raise RuntimeError(
                f"{JVM_READ_FAILED}no leader answered for the end of {', '.join(lost[:5])}; the capture stops "
                "rather than lose its place there (Spark's Python sources cannot end a batch where the previous "
                "one ended); run it again when the partition has a leader, or use the JVM reader (the default), "
                "which keeps the partition where it was"
            )

    def plan(self, start: Offsets, end: Offsets) -> list[RangePartition]:
        ranges = []
        for topic, parts in end.items():
            for p, e in parts.items():
                s = start.get(topic, {}).get(p, 0)
                if e > s:
                    ranges.append(OffsetRange(topic, int(p), int(s), int(e)))
        pieces = plan_ranges(ranges, max_records=self.max_records, min_pieces=self.min_ranges)
        return [RangePartition(r.topic, r.partition, r.start, r.end) for r in pieces]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        from strongroom.audit.kafka_reader import read_range, read_range_digests

        assert isinstance(partition, RangePartition)
        where = (self.connection, partition.topic, partition.partition, partition.start, partition.end)
        if self.output == "digests":
            yield from read_range_digests(*where, chunk_size=self.chunk_size, isolation=self.isolation,
                                          idle_timeout=self.idle_timeout, eof_grace=self.eof_grace)  # fmt: skip
            return
        yield from read_range(*where, isolation=self.isolation, emit_range=self.emit_ranges,
                              emit_digests=self.emit_digests, chunk_size=self.chunk_size,
                              idle_timeout=self.idle_timeout, eof_grace=self.eof_grace)  # fmt: skip


class KafkaBatchReader(DataSourceReader):
    def __init__(self, settings: _Settings) -> None:
        self.settings = settings

    def partitions(self) -> Sequence[InputPartition]:
        s = self.settings
        if s.ranges:
            listed = [OffsetRange(str(t), int(p), int(a), int(b)) for t, p, a, b in json.loads(s.ranges)]
            pieces = plan_ranges(listed, max_records=s.max_records, min_pieces=s.min_ranges)
            return [RangePartition(r.topic, r.partition, r.start, r.end) for r in pieces]
        return s.plan(s.resolve(s.starting, "start"), s.resolve(s.ending, "end"))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from self.settings.read(partition)


class KafkaStreamReader(DataSourceStreamReader):
    def __init__(self, settings: _Settings) -> None:
        self.settings = settings
        self._high: Offsets = {}

    def initialOffset(self) -> dict:  # type: ignore[type-arg]
        return self.settings.resolve(self.settings.starting, "start")

    def latestOffset(self) -> dict:  # type: ignore[type-arg]
        """The ends as listed now, never below what this run listed before. A partition that this run has not
        listed yet and whose leader does not answer fails the read: this API has no start offset to keep it at,
        and a batch end without it would make the next batch read it again from its log start."""
        latest = self.settings.resolve("latest", "end", keep=self._high)
        merged: Offsets = {t: dict(ps) for t, ps in self._high.items()}
        for topic, parts in latest.items():
            for p, off in parts.items():
                merged.setdefault(topic, {})[p] = max(off, merged.get(topic, {}).get(p, off))
        self._high = merged
        return merged

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:  # type: ignore[type-arg]
        return self.settings.plan(start, end)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from self.settings.read(partition)

    def commit(self, end: dict) -> None:  # type: ignore[type-arg]
        """Nothing to commit: progress lives in Spark's checkpoint, never in a consumer group."""


class StrongroomKafkaSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        if str(self.options.get("output", "rows")).lower() == "digests":
            from strongroom.audit.digest import DIGEST_DDL

            return DIGEST_DDL
        return LOG_ROWS_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        return KafkaBatchReader(_Settings(self.options))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return KafkaStreamReader(_Settings(self.options))


def register(spark: SparkSession) -> None:
    """Make ``spark.read.format("strongroom-kafka")`` available in this session (idempotent)."""
    spark.dataSource.register(StrongroomKafkaSource)


def source_options(bootstrap_servers: str, extra: Mapping[str, Any] | None = None, **options: Any) -> dict[str, str]:
    """Options for the source: connection settings as ``kafka.*`` plus the given reader options."""
    out = {"kafka.bootstrap.servers": bootstrap_servers}
    for k, v in (extra or {}).items():
        out[f"kafka.{k}"] = str(v)
    for k, v in options.items():
        out[k] = str(v).lower() if isinstance(v, bool) else str(v)
    return out
