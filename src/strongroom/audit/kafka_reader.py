"""Read one offset range of one partition with confluent-kafka, as Arrow batches of audit rows.

This is what runs inside Spark executors for the ``strongroom-kafka`` data source (and directly in
benchmarks and spot checks). An assigned consumer (no group membership, no commits) reads
``[start, end)`` and emits, per record, its coordinates, leader epoch, timestamp and content hashes
(:mod:`strongroom.audit.hashing`) - never the content itself.

End of range. Offsets are not dense: compaction removes records, transaction markers and (with
``read_committed``) aborted records are never returned. So the range is finished when a record at
``end - 1`` or beyond arrives, or when the consumer reports end-of-partition (it reached the high
watermark, or the last stable offset under ``read_committed``) - never by counting records.

An end-of-partition *below* ``end`` is not trusted at once. ``end`` was the committed end when the
range was planned, and a committed record does not go away on a clean leader change, but a new
leader's high watermark trails the old one until its followers fetch again (seconds; longer while a
dead broker is still in the ISR). Stopping there would leave a hole in the ledger (the next batch
starts at ``end``) or report records as missing. So the reader keeps fetching for ``eof_grace``
seconds; only if the log still ends short of ``end`` then (a truncation) does it stop, and its range
marker says where the log really ended.

Start of range. With ``auto.offset.reset=error`` a start below the log start offset is reported
instead of silently skipped; the reader then restarts at the log start and says so in its range
marker, so the ledger never claims coverage of offsets it could not read.

Isolation defaults to ``read_committed``: the audit tracks what consumers of committed data can
read. Aborted transactional records are not acknowledged data, are never ledgered, and the cleaner
may drop them at any time.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Iterator, Mapping
from hashlib import blake2b
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from strongroom.audit.digest import DIGEST_ARROW_SCHEMA, ChunkAccumulator
from strongroom.audit.errors import KafkaReadError
from strongroom.audit.hashing import DIGEST_SIZE, hash_headers
from strongroom.audit.schema import ARROW_SCHEMA, KIND_RANGE, KIND_RECORD
from strongroom.kafka.config import REFETCH_SOON
from strongroom.runtime import now_ms

#: Consumer settings of an audit reader, on top of the caller's connection settings.
READER_DEFAULTS: dict[str, Any] = {
    "group.id": "strongroom-audit-reader",
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "enable.partition.eof": True,
    "auto.offset.reset": "error",
    "isolation.level": "read_committed",
    "fetch.max.bytes": 64 * 1024 * 1024,
    "max.partition.fetch.bytes": 16 * 1024 * 1024,
    "queued.min.messages": 200_000,
    **REFETCH_SOON,  # 2.3x the records/s of a 1 KB topic here
    "fetch.wait.max.ms": 100,
    "socket.nagle.disable": True,
    "reconnect.backoff.ms": 250,
    "reconnect.backoff.max.ms": 5_000,
}

# Error codes compared without importing confluent_kafka at module import (executors import lazily).
_PARTITION_EOF = -191
#: Seconds a reader keeps fetching after the log ended short of the planned end (see above).
DEFAULT_EOF_GRACE = 30.0
_AUTO_OFFSET_RESET = -140


def reader_config(connection: Mapping[str, Any], isolation: str = "read_committed") -> dict[str, Any]:
    conf = dict(READER_DEFAULTS)
    conf.update(connection)
    conf["isolation.level"] = isolation
    return conf


def range_marker(
    topic: str, partition: int, start: int, end: int, read_at: int, records: int = 0, nbytes: int = 0
) -> pa.RecordBatch:
    """One ``kind=range`` row: the reader finished ``[start, end)`` at ``read_at``."""
    return pa.RecordBatch.from_pylist(
        [{"topic": topic, "partition": partition, "offset": start, "read_at": read_at, "kind": KIND_RANGE,
          "range_end": end, "range_records": records, "range_bytes": nbytes}],
        schema=ARROW_SCHEMA,
    )  # fmt: skip


class _RangeRead:
    """The consume loop shared by the row and digest readers: yields runs of record messages of
    ``[start, end)`` and tracks where the range really started and ended.

    One fetch is one step: a fetch with records is handled (:meth:`_handle`), an empty one asks whether
    the quiet has lasted long enough to end the read or fail it (:meth:`_waited_out`)."""

    def __init__(self, consumer: Any, topic: str, partition: int, start: int, end: int, *, batch_size: int,
                 idle_timeout: float, eof_grace: float = DEFAULT_EOF_GRACE) -> None:  # fmt: skip
        self.consumer = consumer
        self.topic = topic
        self.partition = partition
        self.start = start
        self.end = end
        self.batch_size = batch_size
        self.idle_timeout = idle_timeout
        self.eof_grace = eof_grace
        self.effective_start = start
        self.actual_end = end
        # The loop's state: where the next record is expected, whether the range is finished, when a
        # record last arrived, (where, since when) the log has ended short of ``end``, resets seen.
        self._position = start
        self._done = False
        self._last_progress = 0.0
        self._short_eof: tuple[int, float] | None = None
        self._resets = 0

    def runs(self) -> Iterator[tuple[list[Any], list[int]]]:
        """``(messages, offsets)`` of consecutive records, in offset order."""
        from confluent_kafka import TopicPartition

        self.consumer.assign([TopicPartition(self.topic, self.partition, self.start)])
        self._last_progress = time.monotonic()
        while not self._done:
            msgs = self._fetch()
            if msgs:
                self._last_progress = time.monotonic()
                self._short_eof = None
                yield from self._handle(msgs)
            elif self._waited_out():
                break

    def _fetch(self) -> list[Any]:
        from confluent_kafka import KafkaException

        from strongroom.kafka.transport import consume_ready, error_text

        try:
            msgs: list[Any] = consume_ready(self.consumer, self.batch_size, 0.5)
            return msgs
        except KafkaException as exc:
            raise KafkaReadError(
                f"reading {self.topic}[{self.partition}] at offset {self._position} failed: {error_text(exc)}"
            ) from exc

    def _waited_out(self) -> bool:
        """After a fetch with nothing: True when the log ended short of ``end`` for longer than the grace
        (a truncation: :attr:`actual_end` says where); :class:`KafkaReadError` when no record came for
        ``idle_timeout`` seconds (or past the grace, while the leader says there are more)."""
        now = time.monotonic()
        if self._short_eof is None:
            if now - self._last_progress > self.idle_timeout:
                raise KafkaReadError(
                    f"no progress reading {self.topic}[{self.partition}] at offset {self._position} "
                    f"(range {self.start}-{self.end}) for {self.idle_timeout:.0f}s"
                )
            return False
        eof_at, since = self._short_eof
        waited = now - since
        if waited < self.eof_grace:
            return False
        _, high = self._watermarks(f"ended short of offset {self.end}")
        if high < self.end:  # still short of ``end`` after the grace: the log was truncated below it
            self.actual_end = max(self.effective_start, min(self.end, eof_at, high))
            return True
        if waited >= self.eof_grace + self.idle_timeout:
            raise KafkaReadError(
                f"{self.topic}[{self.partition}]: the leader reports records up to offset {high}, but none "
                f"past {self._position} arrived in {waited:.0f}s"
            )
        return False

    def _handle(self, msgs: list[Any]) -> Iterator[tuple[list[Any], list[int]]]:
        """The runs of one fetch. The common case, records only, is column-wise work with no per-record
        branching; a fetch that also carries events (end of partition, out of range, errors) is walked."""
        errors = [m.error() for m in msgs]
        if not any(errors):
            offs: list[int] = [m.offset() for m in msgs]
            cut = bisect_left(offs, self.end)  # offsets increase within a partition
            if cut < len(msgs):
                msgs, offs, self._done = msgs[:cut], offs[:cut], True
            if offs:
                self._position = offs[-1] + 1
                self._done = self._done or offs[-1] >= self.end - 1
                yield msgs, offs
            return
        for m, err in zip(msgs, errors, strict=True):
            if err is not None:
                if self._on_event(m, err):
                    return
                continue
            off: int = m.offset()
            if off >= self.end:
                self._done = True
                return
            yield [m], [off]
            self._position = off + 1
            if off >= self.end - 1:
                self._done = True
                return

    def _on_event(self, msg: Any, err: Any) -> bool:
        """Act on one event of a fetch; True when the rest of the fetch is to be dropped."""
        code = err.code()
        if code == _PARTITION_EOF:
            return self._on_partition_eof(msg.offset())
        if code == _AUTO_OFFSET_RESET:
            self._on_out_of_range()
            return True
        if err.fatal():
            raise KafkaReadError(f"reading {self.topic}[{self.partition}] failed: {err.str()}")
        return False  # anything else is transient (broker down, leader moving): librdkafka retries

    def _on_partition_eof(self, eof_at: int | None) -> bool:
        """The consumer reached the end of the log: the range is finished, unless the log ends short of
        ``end`` (then keep fetching for the grace; see "End of range")."""
        if eof_at is None or eof_at < 0 or eof_at >= self.end or self.eof_grace <= 0:
            if eof_at is not None and eof_at >= 0:
                self.actual_end = max(self.effective_start, min(self.end, eof_at))
            self._done = True
            return True
        self._short_eof = (eof_at, time.monotonic())
        return False  # records fetched after this event may follow in the same fetch

    def _on_out_of_range(self) -> None:
        """The position is outside the log: below its start (retention, deletion) or beyond its end (the
        log was truncated below what we were asked to read). Restart at the log start, or finish."""
        from confluent_kafka import TopicPartition

        self._resets += 1
        position = self._position
        if self._resets > 10:
            raise KafkaReadError(f"{self.topic}[{self.partition}] keeps rejecting offset {position} as out of range")
        low, high = self._watermarks(f"rejected offset {position} as out of range")
        if position >= high:
            self.actual_end = max(self.effective_start, min(self.end, high))
            self._done = True
            return
        self.effective_start = max(self.effective_start, low)
        self._position = max(position, self.effective_start)
        if self.effective_start >= self.end:
            self.actual_end = self.effective_start = self.end
            self._done = True
        else:
            self.consumer.assign([TopicPartition(self.topic, self.partition, self._position)])

    def _watermarks(self, why: str) -> tuple[int, int]:
        """The partition's (log start, high watermark) from its leader; ``why`` names the question."""
        from strongroom.errors import KafkaError
        from strongroom.kafka.transport import watermarks

        try:
            return watermarks(self.consumer, self.topic, self.partition, timeout=15)
        except KafkaError as exc:
            raise KafkaReadError(f"{self.topic}[{self.partition}] {why}, and {exc.problem}") from None

    @property
    def first(self) -> int:
        return min(self.effective_start, self.actual_end)


def _reader(
    connection: Mapping[str, Any],
    isolation: str,
    consumer_factory: Any,
    where: tuple[str, int, int, int],
    *,
    batch_size: int,
    idle_timeout: float,
    eof_grace: float,
) -> _RangeRead:
    """A range read of ``where`` = (topic, partition, start, end) over a new assigned consumer (the caller
    closes ``reader.consumer``)."""
    from strongroom.kafka.transport import build_consumer

    consumer = (consumer_factory or build_consumer)(reader_config(connection, isolation))
    return _RangeRead(consumer, *where, batch_size=batch_size, idle_timeout=idle_timeout, eof_grace=eof_grace)


def read_range(
    connection: Mapping[str, Any],
    topic: str,
    partition: int,
    start: int,
    end: int,
    *,
    isolation: str = "read_committed",
    batch_size: int = 20_000,
    emit_range: bool = True,
    emit_digests: bool = False,
    chunk_size: int = 10_000,
    idle_timeout: float = 60.0,
    eof_grace: float = DEFAULT_EOF_GRACE,
    consumer_factory: Any = None,
) -> Iterator[pa.RecordBatch]:
    """Yield record batches for ``[start, end)``, then (``emit_digests``) the chunk digests of what
    was read and (``emit_range``) one range marker.

    Raises :class:`KafkaReadError` when the partition makes no progress for ``idle_timeout``
    seconds (no leader, brokers unreachable) - a scrub must fail loudly, never report a short read
    as "missing" data.
    """
    if end <= start:
        if emit_range:
            yield range_marker(topic, partition, start, start, now_ms())
        return
    reader = _reader(connection, isolation, consumer_factory, (topic, partition, start, end),
                     batch_size=batch_size, idle_timeout=idle_timeout, eof_grace=eof_grace)  # fmt: skip
    rows = _RowColumns(topic, partition, ChunkAccumulator(topic, partition, chunk_size) if emit_digests else None)
    try:
        for msgs, offs in reader.runs():
            rows.extend(msgs, offs)
            if rows.pending >= batch_size:
                yield rows.flush()
        if rows.pending:
            yield rows.flush()
        if rows.digests is not None and rows.digests.chunks:
            yield pa.RecordBatch.from_pylist(rows.digests.ledger_rows(now_ms()), schema=ARROW_SCHEMA)
        if emit_range:
            yield range_marker(topic, partition, reader.first, reader.actual_end, now_ms(), rows.records, rows.nbytes)
    finally:
        reader.consumer.close()


class _RowColumns:
    """The audit columns of the records read and not yet emitted, and the totals of those emitted."""

    def __init__(self, topic: str, partition: int, digests: ChunkAccumulator | None) -> None:
        self.topic = topic
        self.partition = partition
        #: Chunk digests of every record emitted (``emit_digests``).
        self.digests = digests
        self.records = 0
        self.nbytes = 0
        self.cols: dict[str, list[Any]] = {n: [] for n in ("offset", "leader_epoch", "timestamp", "timestamp_type",
                                                            "key_hash", "value_hash", "headers_hash", "key_len",
                                                            "value_len", "read_at")}  # fmt: skip

    @property
    def pending(self) -> int:
        return len(self.cols["offset"])

    def extend(self, msgs: list[Any], offs: list[int]) -> None:
        _extend(self.cols, msgs, offs)
        self.cols["read_at"].extend([now_ms()] * len(offs))

    def flush(self) -> pa.RecordBatch:
        """The pending rows as one batch (their digests and totals counted); the columns start empty again."""
        cols = self.cols
        if self.digests is not None:
            self.digests.add_hashed(cols["offset"], cols["leader_epoch"], cols["timestamp"], cols["key_hash"],
                                    cols["value_hash"], cols["headers_hash"])  # fmt: skip
        batch = _batch(self.topic, self.partition, cols)
        self.records += batch.num_rows
        self.nbytes += int(pc.sum(batch.column("key_len")).as_py() or 0)
        self.nbytes += int(pc.sum(batch.column("value_len")).as_py() or 0)
        for col in cols.values():
            col.clear()
        return batch


def read_range_digests(
    connection: Mapping[str, Any],
    topic: str,
    partition: int,
    start: int,
    end: int,
    *,
    chunk_size: int,
    isolation: str = "read_committed",
    batch_size: int = 20_000,
    idle_timeout: float = 60.0,
    eof_grace: float = DEFAULT_EOF_GRACE,
    consumer_factory: Any = None,
) -> Iterator[pa.RecordBatch]:
    """Like :func:`read_range`, but yield one digest row per chunk of ``chunk_size`` offsets (see
    :mod:`strongroom.audit.digest`) and the range marker: the records never leave this process."""
    acc = ChunkAccumulator(topic, partition, chunk_size)
    if end > start:
        reader = _reader(connection, isolation, consumer_factory, (topic, partition, start, end),
                         batch_size=batch_size, idle_timeout=idle_timeout, eof_grace=eof_grace)  # fmt: skip
        try:
            pending: tuple[list[Any], list[int]] = ([], [])
            for msgs, offs in reader.runs():
                pending[0].extend(msgs)
                pending[1].extend(offs)
                if len(pending[1]) >= batch_size:
                    acc.add(*pending)
                    pending = ([], [])
            if pending[1]:
                acc.add(*pending)
        finally:
            reader.consumer.close()
        first, last = reader.first, reader.actual_end
    else:
        first = last = start
    rows = acc.rows()
    rows.append(acc.marker(first, last))
    yield pa.RecordBatch.from_pylist(rows, schema=DIGEST_ARROW_SCHEMA)


def _extend(cols: dict[str, list[Any]], msgs: list[Any], offs: list[int]) -> None:
    """Append the audit columns of ``msgs`` (records only, offsets given)."""
    b2 = blake2b
    size = DIGEST_SIZE
    keys = [m.key() for m in msgs]
    values = [m.value() for m in msgs]
    stamps = [m.timestamp() for m in msgs]
    headers = [m.headers() for m in msgs]
    cols["offset"].extend(offs)
    cols["leader_epoch"].extend([m.leader_epoch() for m in msgs])
    cols["timestamp"].extend([t[1] for t in stamps])
    cols["timestamp_type"].extend([t[0] for t in stamps])
    cols["key_hash"].extend([None if k is None else b2(k, digest_size=size).digest() for k in keys])
    cols["value_hash"].extend([None if v is None else b2(v, digest_size=size).digest() for v in values])
    cols["headers_hash"].extend([hash_headers(h) if h else None for h in headers])
    cols["key_len"].extend([None if k is None else len(k) for k in keys])
    cols["value_len"].extend([None if v is None else len(v) for v in values])


def _batch(topic: str, partition: int, cols: dict[str, list[Any]]) -> pa.RecordBatch:
    n = len(cols["offset"])
    arrays = [
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        pa.array(cols["offset"], pa.int64()),
        pa.array(cols["leader_epoch"], pa.int32()),
        pa.array(cols["timestamp"], pa.int64()),
        pa.array(cols["timestamp_type"], pa.int8()),
        pa.array(cols["key_hash"], pa.binary()),
        pa.array(cols["value_hash"], pa.binary()),
        pa.array(cols["headers_hash"], pa.binary()),
        pa.array(cols["key_len"], pa.int32()),
        pa.array(cols["value_len"], pa.int32()),
        pa.array(cols["read_at"], pa.int64()),
        pa.repeat(pa.scalar(KIND_RECORD, pa.string()), n),
        pa.nulls(n, pa.int64()),
        pa.nulls(n, pa.int64()),
        pa.nulls(n, pa.int64()),
        pa.nulls(n, pa.int64()),
        pa.nulls(n, pa.int64()),
        pa.nulls(n, pa.int64()),
        pa.nulls(n, pa.int64()),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)
