"""Small, JVM-free lookups into a ledger with pyarrow, for the watcher and the report.

The watcher must answer within a poll interval ("do the ledgered timestamps justify this
log-start advance?", "where does each leader epoch start?"), which does not warrant a Spark job.
pyarrow reads the same Parquet files, pruned by the ``topic=``/``kind=`` directories. It does not
consult Spark's ``_spark_metadata`` log, so it may also see files of a capture batch that failed
before committing; those hold real records read from the log, so the answers (maxima, minima,
first-capture wins) are unaffected.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from strongroom.audit.ranges import gaps, merge_ranges
from strongroom.audit.schema import KIND_RANGE, KIND_RECORD
from strongroom.audit.store import LedgerPaths

_PARTITIONING = ds.partitioning(pa.schema([("topic", pa.string()), ("kind", pa.string())]), flavor="hive")


@dataclass(frozen=True)
class RangeEvidence:
    """What the ledger knows about ``[start, end)`` of one partition."""

    start: int
    end: int
    records: int
    unseen: list[tuple[int, int]]
    max_timestamp: int | None
    payload_bytes: int

    @property
    def fully_covered(self) -> bool:
        return not self.unseen


class LedgerView:
    def __init__(self, ledger: LedgerPaths) -> None:
        self.ledger = ledger

    def _dataset(self, path: str) -> ds.Dataset | None:
        location: Any = str(self.ledger.local(path)) if self.ledger.is_local else path
        if self.ledger.is_local and not self.ledger.local(path).exists():
            return None
        try:
            return ds.dataset(location, format="parquet", partitioning=_PARTITIONING)
        except (FileNotFoundError, pa.ArrowInvalid):
            return None

    @property
    def available(self) -> bool:
        return self._dataset(self.ledger.records) is not None

    def _table(self, topic: str, partition: int, kind: str, columns: list[str], start: int | None = None,
               end: int | None = None) -> pa.Table:  # fmt: skip
        expr = (ds.field("topic") == topic) & (ds.field("kind") == kind) & (ds.field("partition") == partition)
        if start is not None:
            expr = expr & (ds.field("offset") >= start)
        if end is not None:
            expr = expr & (ds.field("offset") < end)
        tables = []
        for path in (self.ledger.records, self.ledger.deliveries):
            dataset = self._dataset(path)
            if dataset is not None:
                tables.append(dataset.to_table(columns=columns, filter=expr))
        if not tables:
            return pa.table({c: [] for c in columns})
        return pa.concat_tables(tables, promote_options="default") if len(tables) > 1 else tables[0]

    def coverage(self, topic: str, partition: int) -> list[tuple[int, int]]:
        t = self._table(topic, partition, KIND_RANGE, ["offset", "range_end"])
        return merge_ranges(zip(t.column("offset").to_pylist(), t.column("range_end").to_pylist(), strict=True))

    def evidence(self, topic: str, partition: int, start: int, end: int) -> RangeEvidence:
        t = self._table(topic, partition, KIND_RECORD, ["offset", "timestamp", "key_len", "value_len"], start, end)
        max_ts = pc.max(t.column("timestamp")).as_py() if t.num_rows else None
        nbytes = 0
        if t.num_rows:
            nbytes = int(pc.sum(pc.fill_null(t.column("key_len"), 0)).as_py() or 0) + int(
                pc.sum(pc.fill_null(t.column("value_len"), 0)).as_py() or 0
            )
        unseen = gaps(self.coverage(topic, partition), start, end)
        return RangeEvidence(start, end, t.num_rows, unseen, max_ts, nbytes)

    def epoch_chain(self, topic: str, partition: int) -> list[tuple[int, int]]:
        """``[(leader_epoch, first offset ledgered in it)]`` in offset order."""
        t = self._table(topic, partition, KIND_RECORD, ["offset", "leader_epoch"])
        if not t.num_rows:
            return []
        t = t.filter(pc.is_valid(t.column("leader_epoch")))
        grouped = t.group_by("leader_epoch").aggregate([("offset", "min")])
        pairs = zip(grouped.column("leader_epoch").to_pylist(), grouped.column("offset_min").to_pylist(), strict=True)
        return sorted(((int(e), int(o)) for e, o in pairs), key=lambda x: x[1])

    def last_offset(self, topic: str, partition: int) -> int | None:
        t = self._table(topic, partition, KIND_RECORD, ["offset"])
        return None if not t.num_rows else int(pc.max(t.column("offset")).as_py())

    def rows_at(self, topic: str, partition: int, offsets: list[int]) -> dict[int, dict[str, Any]]:
        """The first-captured ledger row at each offset (absent offsets are left out)."""
        if not offsets:
            return {}
        cols = ["offset", "leader_epoch", "timestamp", "key_hash", "value_hash", "headers_hash", "read_at"]
        t = self._table(topic, partition, KIND_RECORD, cols, min(offsets), max(offsets) + 1)
        wanted = set(offsets)
        out: dict[int, dict[str, Any]] = {}
        for row in t.to_pylist():
            off = int(row["offset"])
            if off in wanted and (off not in out or (row["read_at"] or 0) < (out[off]["read_at"] or 0)):
                out[off] = row
        return out
