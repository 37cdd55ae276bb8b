"""Offset ranges: splitting partitions for parallel reads, and merging read ranges into coverage.

Pure functions on half-open ranges ``[start, end)``, used by the data source's planner, the ledger's
coverage view and the watcher (no Kafka, no Spark).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class OffsetRange:
    """One slice of one partition's log: offsets ``start <= o < end``."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)


def split_range(rng: OffsetRange, max_records: int) -> list[OffsetRange]:
    """Cut a range into consecutive pieces of at most ``max_records`` offsets (none if empty)."""
    if max_records < 1:
        raise ValueError("max_records must be >= 1")
    pieces = []
    start = rng.start
    while start < rng.end:
        end = min(rng.end, start + max_records)
        pieces.append(OffsetRange(rng.topic, rng.partition, start, end))
        start = end
    return pieces


def plan_ranges(ranges: Iterable[OffsetRange], *, max_records: int, min_pieces: int = 1) -> list[OffsetRange]:
    """Split ranges so no piece exceeds ``max_records`` and there are at least ``min_pieces`` pieces
    when there is enough data (so every core gets work even on a single-partition topic)."""
    nonempty = [r for r in ranges if r.size > 0]
    total = sum(r.size for r in nonempty)
    if total == 0:
        return []
    target = max(1, min(max_records, -(-total // max(1, min_pieces))))
    pieces: list[OffsetRange] = []
    for rng in nonempty:
        pieces.extend(split_range(rng, target))
    return pieces


def merge_ranges(ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Union of half-open ranges as sorted, disjoint, non-touching ranges: ``[(0,5),(5,9)] -> [(0,9)]``."""
    merged: list[list[int]] = []
    for start, end in sorted(r for r in ranges if r[1] > r[0]):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(s, e) for s, e in merged]


def gaps(covered: Iterable[tuple[int, int]], start: int, end: int) -> list[tuple[int, int]]:
    """The parts of ``[start, end)`` not inside ``covered`` (which must be merged)."""
    out: list[tuple[int, int]] = []
    cursor = start
    for s, e in covered:
        if e <= cursor:
            continue
        if s >= end:
            break
        if s > cursor:
            out.append((cursor, min(s, end)))
        cursor = max(cursor, e)
        if cursor >= end:
            break
    if cursor < end:
        out.append((cursor, end))
    return out
