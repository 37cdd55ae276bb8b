"""Read one offset range of one partition with confluent-kafka, as Arrow batches of audit rows.

This is what runs inside Spark executors for the ``strongroom-kafka`` data source (and directly in
benchmarks and spot checks). An assigned consumer (no group membership, no commits) reads
``[start, end)`` and emits, per record, its coordinates, leader epoch, timestamp and content hashes
(:mod:`strongroom.audit.hashing`) - never the content itself.

End of range. Offsets are not dense: compaction removes records, transaction markers and (with
``read_committed``) aborted records are never returned. So the range is finished when a record at
``end - 1`` or beyond arrives, or when the consumer reports end-of-partition (it reached the high
watermark, or the last stable offset under ``read_committed``) - never by counting records.

Start of range. With ``auto.offset.reset=error`` a start below the log start offset is reported
instead of silently skipped; the reader then restarts at the log start and says so in its range
marker, so the ledger never claims coverage of offsets it could not read.

Isolation defaults to ``read_committed``: the audit tracks what consumers of committed data can
read. Aborted transactional records are not acknowledged data, are never ledgered, and the cleaner
may drop them at any time.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from hashlib import blake2b
from typing import Any

import pyarrow as pa

from strongroom.audit.errors import KafkaReadError
from strongroom.audit.hashing import DIGEST_SIZE, hash_headers
from strongroom.audit.schema import ARROW_SCHEMA, KIND_RANGE, KIND_RECORD

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
    "fetch.wait.max.ms": 100,
    "socket.nagle.disable": True,
    "reconnect.backoff.ms": 250,
    "reconnect.backoff.max.ms": 5_000,
}

# Error codes compared without importing confluent_kafka at module import (executors import lazily).
_PARTITION_EOF = -191
_AUTO_OFFSET_RESET = -140


def reader_config(connection: Mapping[str, Any], isolation: str = "read_committed") -> dict[str, Any]:
    conf = dict(READER_DEFAULTS)
    conf.update(connection)
    conf["isolation.level"] = isolation
    return conf


def _now_ms() -> int:
    return int(time.time() * 1000)


def range_marker(
    topic: str, partition: int, start: int, end: int, read_at: int, records: int = 0, nbytes: int = 0
) -> pa.RecordBatch:
    """One ``kind=range`` row: the reader finished ``[start, end)`` at ``read_at``."""
    return pa.RecordBatch.from_pylist(
        [{"topic": topic, "partition": partition, "offset": start, "read_at": read_at, "kind": KIND_RANGE,
          "range_end": end, "range_records": records, "range_bytes": nbytes}],
        schema=ARROW_SCHEMA,
    )  # fmt: skip


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
    idle_timeout: float = 60.0,
    consumer_factory: Any = None,
) -> Iterator[pa.RecordBatch]:
    """Yield record batches for ``[start, end)`` then (if ``emit_range``) one range marker.

    Raises :class:`KafkaReadError` when the partition makes no progress for ``idle_timeout``
    seconds (no leader, brokers unreachable) - a scrub must fail loudly, never report a short read
    as "missing" data.
    """
    if end <= start:
        if emit_range:
            yield range_marker(topic, partition, start, start, _now_ms())
        return
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    conf = reader_config(connection, isolation)
    consumer = (consumer_factory or Consumer)(conf)
    tp = TopicPartition(topic, partition, start)
    effective_start = start
    actual_end = end
    try:
        consumer.assign([tp])
        cols: dict[str, list[Any]] = {n: [] for n in ("offset", "leader_epoch", "timestamp", "timestamp_type",
                                                       "key_hash", "value_hash", "headers_hash", "key_len",
                                                       "value_len", "read_at")}  # fmt: skip
        offsets, epochs, tss, ttypes = cols["offset"], cols["leader_epoch"], cols["timestamp"], cols["timestamp_type"]
        khs, vhs, hhs, klens, vlens = (
            cols["key_hash"],
            cols["value_hash"],
            cols["headers_hash"],
            cols["key_len"],
            cols["value_len"],
        )
        reads = cols["read_at"]
        done = False
        resets = 0
        n_records = n_bytes = 0
        last_progress = time.monotonic()
        position = start
        while not done:
            try:
                msgs = consumer.consume(num_messages=batch_size, timeout=0.5)
            except KafkaException as exc:
                raise KafkaReadError(f"reading {topic}[{partition}] at offset {position} failed: {exc}") from exc
            now = _now_ms()
            n_before = len(offsets)
            for m in msgs:
                err = m.error()
                if err is not None:
                    code = err.code()
                    if code == _PARTITION_EOF:
                        eof_at = m.offset()
                        if eof_at is not None and eof_at >= 0:
                            actual_end = max(effective_start, min(end, eof_at))
                        done = True
                        break
                    if code == _AUTO_OFFSET_RESET:
                        # The position is outside the log: below its start (retention, deletion) or
                        # beyond its end (the log was truncated below what we were asked to read).
                        resets += 1
                        if resets > 10:
                            raise KafkaReadError(
                                f"{topic}[{partition}] keeps rejecting offset {position} as out of range"
                            )
                        low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=15)
                        if position >= high:
                            actual_end = max(effective_start, min(end, int(high)))
                            done = True
                        else:
                            effective_start = max(effective_start, int(low))
                            position = max(position, effective_start)
                            if effective_start >= end:
                                actual_end = effective_start = end
                                done = True
                            else:
                                consumer.assign([TopicPartition(topic, partition, position)])
                        break
                    if err.fatal():
                        raise KafkaReadError(f"reading {topic}[{partition}] failed: {err.str()}")
                    continue  # transient (broker down, leader moving): librdkafka retries
                off: int = m.offset()  # type: ignore[assignment]  # always set on a record
                if off >= end:
                    done = True
                    break
                key = m.key()
                value = m.value()
                headers = m.headers()
                ttype, ts = m.timestamp()
                offsets.append(off)
                epochs.append(m.leader_epoch())
                tss.append(ts)
                ttypes.append(ttype)
                if key is None:
                    khs.append(None)
                    klens.append(None)
                else:
                    khs.append(blake2b(key, digest_size=DIGEST_SIZE).digest())
                    klens.append(len(key))
                if value is None:
                    vhs.append(None)
                    vlens.append(None)
                else:
                    vhs.append(blake2b(value, digest_size=DIGEST_SIZE).digest())
                    vlens.append(len(value))
                hhs.append(hash_headers(headers) if headers else None)  # type: ignore[arg-type]
                position = off + 1
                if off >= end - 1:
                    done = True
                    break
            added = len(offsets) - n_before
            if added:
                reads.extend([now] * added)
                last_progress = time.monotonic()
            elif msgs:
                last_progress = time.monotonic()
            elif time.monotonic() - last_progress > idle_timeout:
                raise KafkaReadError(
                    f"no progress reading {topic}[{partition}] at offset {position} (range {start}-{end}) "
                    f"for {idle_timeout:.0f}s"
                )
            if len(offsets) >= batch_size or (done and offsets):
                n_records += len(offsets)
                n_bytes += sum(x for x in klens if x is not None) + sum(x for x in vlens if x is not None)
                yield _batch(topic, partition, cols)
                for col in cols.values():
                    col.clear()
        if emit_range:
            first = min(effective_start, actual_end)
            yield range_marker(topic, partition, first, actual_end, _now_ms(), n_records, n_bytes)
    finally:
        consumer.close()


def _batch(topic: str, partition: int, cols: dict[str, list[Any]]) -> pa.RecordBatch:
    n = len(cols["offset"])
    arrays = [
        pa.array([topic] * n, pa.string()),
        pa.array([partition] * n, pa.int32()),
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
        pa.array([KIND_RECORD] * n, pa.string()),
        pa.nulls(n, pa.int64()),
        pa.nulls(n, pa.int64()),
        pa.nulls(n, pa.int64()),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)
