"""Chunk digests: compare ledger and log a chunk of offsets at a time, row by row only where they differ.

A full row-level join of ledger and log costs a shuffle of every record, and almost every record is
fine. So the scrub first reduces both sides to one digest per *chunk* (``chunk_size`` consecutive
offsets of one partition): the record count, the XOR and the two 32-bit halves' sums of a 64-bit
``xxhash64`` over each record's (offset, leader epoch, timestamp, key/value/headers hashes, null
flags). The log's digests are computed inside the executors' Python readers (the records never
enter the JVM); the ledger's by Spark (a map-side aggregation - no row crosses a shuffle).

Chunks whose digests agree hold the same records with the same epochs and content: all ``ok``. Only
the other chunks - altered, diverged, missing, expired, duplicated or unledgered records - are re-read
and classified row by row with :func:`strongroom.audit.classify.classify`. A changed chunk passing as
unchanged needs a 64-bit hash collision that also preserves the XOR and both sums: negligible.

Pure pieces: :func:`record_digest`, :func:`chunk_digests` (DataFrame transforms) and
:func:`plan_chunks` (plain Python over the collected digests).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from hashlib import blake2b
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from strongroom.audit.hashing import DIGEST_SIZE

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

DEFAULT_CHUNK_SIZE = 10_000

ChunkKey = tuple[str, int, int]  # topic, partition, chunk number


def record_digest() -> Column:
    """A 64-bit hash of everything the scrub compares in one record, as Spark computes it.

    ``xxhash64(offset, epoch or -1, timestamp or -1, key/value/headers hash or X'', null flags)``;
    :class:`ChunkAccumulator` computes the very same value in Python (see
    :mod:`strongroom.audit.xxhash64`).
    """
    from pyspark.sql import functions as F

    empty = F.lit(b"")
    flags = (
        F.col("key_hash").isNull().cast("int")
        + F.col("value_hash").isNull().cast("int") * F.lit(2)
        + F.col("headers_hash").isNull().cast("int") * F.lit(4)
    )
    return F.xxhash64(
        F.col("offset").cast("bigint"),
        F.coalesce(F.col("leader_epoch").cast("int"), F.lit(-1)),
        F.coalesce(F.col("timestamp").cast("bigint"), F.lit(-1).cast("bigint")),
        F.coalesce(F.col("key_hash"), empty),
        F.coalesce(F.col("value_hash"), empty),
        F.coalesce(F.col("headers_hash"), empty),
        flags.cast("int"),
    )


#: Rows of the ``strongroom-kafka`` source in digest mode (one per chunk, plus range markers).
DIGEST_DDL = (
    "topic STRING, partition INT, kind STRING, chunk BIGINT, records BIGINT, digest_xor BIGINT, digest_lo BIGINT, "
    "digest_hi BIGINT, min_offset BIGINT, max_offset BIGINT, range_end BIGINT, range_records BIGINT, "
    "range_bytes BIGINT"
)
DIGEST_ARROW_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("kind", pa.string()),
        ("chunk", pa.int64()),
        ("records", pa.int64()),
        ("digest_xor", pa.int64()),
        ("digest_lo", pa.int64()),
        ("digest_hi", pa.int64()),
        ("min_offset", pa.int64()),
        ("max_offset", pa.int64()),
        ("range_end", pa.int64()),
        ("range_records", pa.int64()),
        ("range_bytes", pa.int64()),
    ]
)


class ChunkAccumulator:
    """Digests of one partition's records, chunk by chunk, from confluent-kafka messages."""

    def __init__(self, topic: str, partition: int, chunk_size: int) -> None:
        self.topic = topic
        self.partition = partition
        self.chunk_size = chunk_size
        self.chunks: dict[int, list[int]] = {}  # chunk -> [records, xor, lo, hi, min, max]
        self.records = 0
        self.payload_bytes = 0

    def add(self, msgs: list[Any], offsets: list[int]) -> None:
        """Add a run of record messages (offsets increasing)."""
        from strongroom.audit.hashing import hash_headers

        if not offsets:
            return
        size = DIGEST_SIZE
        b2 = blake2b
        keys = [m.key() for m in msgs]
        values = [m.value() for m in msgs]
        self.payload_bytes += sum(map(len, filter(None, keys))) + sum(map(len, filter(None, values)))
        self.add_hashed(
            offsets,
            [m.leader_epoch() for m in msgs],
            [m.timestamp()[1] for m in msgs],
            [None if k is None else b2(k, digest_size=size).digest() for k in keys],
            [None if v is None else b2(v, digest_size=size).digest() for v in values],
            [hash_headers(h) if h else None for h in [m.headers() for m in msgs]],
        )

    def add_hashed(
        self,
        offsets: list[int],
        epochs: list[int | None],
        timestamps: list[int],
        key_hashes: list[bytes | None],
        value_hashes: list[bytes | None],
        headers_hashes: list[bytes | None],
    ) -> None:
        """Add records given by their audit columns (offsets increasing; hashes 16 bytes or None)."""
        from strongroom.audit import xxhash64 as xx

        n = len(offsets)
        if n == 0:
            return
        zero = bytes(16)
        offs = np.asarray(offsets, dtype=np.int64)
        epoch_arr = np.asarray([-1 if e is None else e for e in epochs], dtype=np.int32)
        ts_arr = np.asarray(timestamps, dtype=np.int64)
        k_words = np.frombuffer(b"".join([zero if k is None else k for k in key_hashes]), dtype="<u8").reshape(n, 2)
        v_words = np.frombuffer(b"".join([zero if v is None else v for v in value_hashes]), dtype="<u8").reshape(n, 2)
        h_words = np.frombuffer(b"".join([zero if h is None else h for h in headers_hashes]), dtype="<u8").reshape(n, 2)
        # A real digest is never all zero bytes, so zero marks "no key / tombstone / no headers".
        k_present = (k_words != 0).any(axis=1)
        v_present = (v_words != 0).any(axis=1)
        h_present = (h_words != 0).any(axis=1)
        self.records += n

        h = xx.seed(n)
        h = xx.hash_long(offs, h)
        h = xx.hash_int(epoch_arr, h)
        h = xx.hash_long(ts_arr, h)
        h = xx.hash_optional16(k_words, k_present, h)
        h = xx.hash_optional16(v_words, v_present, h)
        h = xx.hash_optional16(h_words, h_present, h)
        flags = (~k_present).astype(np.int32) + (~v_present).astype(np.int32) * 2 + (~h_present).astype(np.int32) * 4
        h = xx.hash_int(flags, h)

        chunk_ids = offs // self.chunk_size
        starts = np.concatenate(([0], np.flatnonzero(np.diff(chunk_ids)) + 1))
        ends = np.append(starts[1:], n)
        xors = np.bitwise_xor.reduceat(h, starts).view(np.int64)
        los = np.add.reduceat((h & np.uint64(0xFFFFFFFF)).astype(np.int64), starts)
        his = np.add.reduceat((h >> np.uint64(32)).astype(np.int64), starts)
        for i, s in enumerate(starts):
            c = int(chunk_ids[s])
            entry = self.chunks.get(c)
            first, last = int(offs[s]), int(offs[ends[i] - 1])
            if entry is None:
                self.chunks[c] = [int(ends[i] - s), int(xors[i]), int(los[i]), int(his[i]), first, last]
            else:
                entry[0] += int(ends[i] - s)
                entry[1] ^= int(xors[i])
                entry[2] += int(los[i])
                entry[3] += int(his[i])
                entry[4] = min(entry[4], first)
                entry[5] = max(entry[5], last)

    def rows(self) -> list[dict[str, Any]]:
        return [
            {"topic": self.topic, "partition": self.partition, "kind": "chunk", "chunk": c, "records": e[0],
             "digest_xor": e[1], "digest_lo": e[2], "digest_hi": e[3], "min_offset": e[4], "max_offset": e[5]}
            for c, e in sorted(self.chunks.items())
        ]  # fmt: skip

    def ledger_rows(self, read_at: int) -> list[dict[str, Any]]:
        """The digests as ``kind=digest`` rows of the ledger's row layout (:mod:`strongroom.audit.schema`)."""
        return [
            {"topic": self.topic, "partition": self.partition, "offset": e[4], "read_at": read_at, "kind": "digest",
             "range_end": e[5] + 1, "range_records": e[0], "chunk": c, "digest_xor": e[1], "digest_lo": e[2],
             "digest_hi": e[3]}
            for c, e in sorted(self.chunks.items())
        ]  # fmt: skip

    def marker(self, first: int, end: int) -> dict[str, Any]:
        return {"topic": self.topic, "partition": self.partition, "kind": "range", "min_offset": first,
                "range_end": end, "range_records": self.records, "range_bytes": self.payload_bytes}  # fmt: skip


def chunk_digests(records: DataFrame, chunk_size: int, *, span_ms: int | None = None) -> DataFrame:
    """Digest per (topic, partition, chunk[, span_start]) of record rows.

    Columns: topic, partition, chunk, [span_start,] records, digest_xor, digest_lo, digest_hi,
    min_offset, max_offset.
    """
    from pyspark.sql import functions as F

    h = record_digest()
    keys = [
        F.col("topic"),
        F.col("partition"),
        F.floor(F.col("offset") / F.lit(chunk_size)).cast("bigint").alias("chunk"),
    ]
    if span_ms is not None:
        keys.append((F.floor(F.col("timestamp") / F.lit(span_ms)) * F.lit(span_ms)).cast("bigint").alias("span_start"))
    return (
        records.withColumn("_h", h)
        .groupBy(*keys)
        .agg(
            F.count(F.lit(1)).alias("records"),
            F.bit_xor("_h").alias("digest_xor"),
            F.sum(F.col("_h").bitwiseAND(F.lit(0xFFFFFFFF))).alias("digest_lo"),
            F.sum(F.shiftrightunsigned(F.col("_h"), 32)).alias("digest_hi"),
            F.min("offset").alias("min_offset"),
            F.max("offset").alias("max_offset"),
        )
    )


@dataclass
class ChunkPlan:
    """What the digests decided, per chunk."""

    #: identical on both sides - every ledgered record there is ok: chunk -> the ledger's digest rows
    matched: dict[ChunkKey, list[Mapping[str, Any]]] = field(default_factory=dict)
    #: only in the log and outside the ledger's coverage - unledgered, counted without a re-read:
    #: chunk -> (records, min offset, max offset)
    unledgered_chunks: dict[ChunkKey, tuple[int, int, int]] = field(default_factory=dict)
    #: everything else: re-read and classified row by row
    suspect: list[ChunkKey] = field(default_factory=list)

    @property
    def matched_chunks(self) -> int:
        return len(self.matched)

    @property
    def ok_by_span(self) -> dict[tuple[str, int, int | None], int]:
        out: dict[tuple[str, int, int | None], int] = {}
        for (topic, partition, _), rows in self.matched.items():
            for r in rows:
                if not int(r["records"]):
                    continue  # a digest-only row: its records are counted by span rows
                span = None if r.get("span_start") is None else int(r["span_start"])
                out[(topic, partition, span)] = out.get((topic, partition, span), 0) + int(r["records"])
        return out

    @property
    def ok_ranges(self) -> dict[tuple[str, int], tuple[int, int]]:
        out: dict[tuple[str, int], tuple[int, int]] = {}
        for (topic, partition, _), rows in self.matched.items():
            lo = min(int(r["min_offset"]) for r in rows)
            hi = max(int(r["max_offset"]) for r in rows)
            old = out.get((topic, partition))
            out[(topic, partition)] = (lo, hi) if old is None else (min(old[0], lo), max(old[1], hi))
        return out

    @property
    def unledgered(self) -> dict[tuple[str, int], list[tuple[int, int, int]]]:
        out: dict[tuple[str, int], list[tuple[int, int, int]]] = {}
        for (topic, partition, _), item in sorted(self.unledgered_chunks.items()):
            out.setdefault((topic, partition), []).append(item)
        return out

    @property
    def ok_records(self) -> int:
        return sum(self.ok_by_span.values())

    def demote(self, chunks: Iterable[ChunkKey]) -> None:
        """Make these chunks suspect whatever their digests said (e.g. they hold delivery reports)."""
        for key in sorted(set(chunks) - set(self.suspect)):
            self.matched.pop(key, None)
            self.unledgered_chunks.pop(key, None)
            self.suspect.append(key)


def _combine(rows: Iterable[Mapping[str, Any]]) -> tuple[int, int, int, int]:
    count = xor = lo = hi = 0
    for r in rows:
        count += int(r["records"])
        xor ^= int(r["digest_xor"] or 0)
        lo += int(r["digest_lo"] or 0)
        hi += int(r["digest_hi"] or 0)
    return count, xor, lo, hi


def plan_chunks(
    ledger_rows: Iterable[Mapping[str, Any]],
    log_rows: Iterable[Mapping[str, Any]],
    coverage: Mapping[tuple[str, int], list[tuple[int, int]]],
    chunk_size: int,
) -> ChunkPlan:
    """Decide per chunk from collected digests (``ledger_rows`` carry ``span_start``)."""
    ledger_by_chunk: dict[ChunkKey, list[Mapping[str, Any]]] = {}
    for r in ledger_rows:
        ledger_by_chunk.setdefault((r["topic"], int(r["partition"]), int(r["chunk"])), []).append(r)
    log_by_chunk: dict[ChunkKey, list[Mapping[str, Any]]] = {}
    for r in log_rows:  # a chunk split across two read ranges comes in two rows
        log_by_chunk.setdefault((r["topic"], int(r["partition"]), int(r["chunk"])), []).append(r)
    plan = ChunkPlan()
    for key in sorted(set(ledger_by_chunk) | set(log_by_chunk)):
        topic, partition, chunk = key
        led = ledger_by_chunk.get(key)
        log = log_by_chunk.get(key)
        if led is not None and log is not None and _combine(led) == _combine(log):
            plan.matched[key] = led
            continue
        if led is None and log is not None:
            lo, hi = chunk * chunk_size, (chunk + 1) * chunk_size
            if not any(s < hi and e > lo for s, e in coverage.get((topic, partition), [])):
                plan.unledgered_chunks[key] = (
                    sum(int(r["records"]) for r in log),
                    min(int(r["min_offset"]) for r in log),
                    max(int(r["max_offset"]) for r in log),
                )
                continue
        plan.suspect.append(key)
    return plan
