"""Small, JVM-free lookups into a ledger with pyarrow, for the watcher and the report.

The watcher must answer within a poll interval ("do the ledgered timestamps justify this
log-start advance?", "where does each leader epoch start?"), which does not warrant a Spark job.
pyarrow reads the same Parquet files, pruned by the ``topic=``/``kind=`` directories. For a local
ledger it reads exactly the files Spark's file sink committed (its ``_spark_metadata`` log: JSON
lines after a ``v1`` header, compacted every few batches into ``N.compact``), so a file the capture
is still writing is never opened half-done.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

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


def committed_files(root: Path) -> list[Path] | None:
    """Files the Spark file sink committed under ``root`` (None when there is no metadata log)."""
    log_dir = root / "_spark_metadata"
    if not log_dir.is_dir():
        return None
    batches: list[tuple[int, Path]] = []
    for entry in log_dir.iterdir():
        stem = entry.name.removesuffix(".compact")
        if stem.isdigit() and not entry.name.startswith("."):
            batches.append((int(stem), entry))
    batches.sort()
    compacted = [i for i, (_, e) in enumerate(batches) if e.name.endswith(".compact")]
    start = compacted[-1] if compacted else 0
    files: dict[str, Path] = {}
    for _, entry in batches[start:]:
        try:
            lines = entry.read_text(encoding="utf-8").splitlines()
        except OSError:
            continue
        for line in lines[1:]:  # the first line is the log version ("v1")
            if not line.strip():
                continue
            record = json.loads(line)
            location = urlparse(record["path"])
            path = Path(unquote(location.path))
            if record.get("action", "add") == "delete":
                files.pop(str(path), None)
            elif not record.get("isDir"):
                files[str(path)] = path
    return sorted(files.values())


class LedgerView:
    def __init__(self, ledger: LedgerPaths) -> None:
        self.ledger = ledger

    def _dataset(self, path: str, topic: str | None = None, kind: str | None = None) -> ds.Dataset | None:
        if not self.ledger.is_local:
            try:
                return ds.dataset(path, format="parquet", partitioning=_PARTITIONING)
            except (FileNotFoundError, pa.ArrowInvalid):
                return None
        root = self.ledger.local(path)
        if not root.exists():
            return None
        files = committed_files(root)
        if files is None:
            return ds.dataset(str(root), format="parquet", partitioning=_PARTITIONING)
        if topic is not None and kind is not None:
            marker = f"/topic={topic}/kind={kind}/"
            files = [f for f in files if marker in str(f)]
        existing = [str(f) for f in files if f.exists()]
        if not existing:  # nothing committed yet (for this topic and kind): an empty dataset has no columns
            return None
        return ds.dataset(existing, format="parquet", partitioning=_PARTITIONING, partition_base_dir=str(root))

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
            dataset = self._dataset(path, topic, kind)
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
