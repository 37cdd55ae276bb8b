"""What a pipeline run reports: typed where the job makes it, turned into JSON only at the CLI edge.

``strongroom encrypt/decrypt --output json`` prints :meth:`PipelineResult.to_json` (after the
``pipeline`` and ``checkpoint`` keys the CLI adds); users and tests read that layout, so the keys and
their order are part of the interface. Python callers read the attributes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, ClassVar

from strongroom.text import table


@dataclass(frozen=True)
class InputGaps:
    """Input offsets that aged out (retention) before the pipeline read them."""

    #: Lost offsets per source partition, keyed ``topic[partition]``.
    partitions: Mapping[str, int]

    @property
    def offsets(self) -> int:
        return sum(self.partitions.values())

    def to_json(self) -> dict[str, Any]:
        return {"offsets": self.offsets, "partitions": dict(sorted(self.partitions.items()))}


@dataclass(frozen=True)
class PipelineResult:
    """The counters of a pipeline run so far (the result of a run, or its progress after a batch)."""

    kind: ClassVar[str] = "pipeline"

    batches: int
    #: Records per status (``ok``, ``rejected``, ``failed``, ``erased``, ``pending``, ...), sorted by status.
    records: Mapping[str, int]
    written: int
    #: Records of replayed batches that an earlier transaction had already written.
    replayed_skipped: int
    input_gaps: InputGaps
    #: Seconds spent per phase of the batches (scan, keys, write, ...), to 10 ms.
    seconds: Mapping[str, float]

    def to_json(self) -> dict[str, Any]:
        return {
            "batches": self.batches,
            "records": dict(self.records),
            "written": self.written,
            "replayed_skipped": self.replayed_skipped,
            "input_gaps": self.input_gaps.to_json(),
            "seconds": dict(self.seconds),
        }

    def render_text(self) -> str:
        """The CLI's text output."""
        rows = list(self.records.items())
        lines = [f"{self.kind}: {self.batches} batches, {self.written} records written"]
        if rows:
            lines.append(table(rows, ["status", "records"]))
        if self.replayed_skipped:
            lines.append(f"{self.replayed_skipped} records of replayed batches were already written (skipped)")
        return "\n".join(lines)


def _counts_of(result: PipelineResult) -> dict[str, Any]:
    """The fields :class:`PipelineResult` declares, to build a job's own result from the counters."""
    return {f.name: getattr(result, f.name) for f in fields(PipelineResult)}


@dataclass(frozen=True)
class EncryptResult(PipelineResult):
    """The encrypt pipeline's counters and its key cache's."""

    kind: ClassVar[str] = "encrypt"

    #: The driver's key cache and key manager counters (``KeyCache.stats()``: created keys, wrapping keys
    #: created, cache hits, the active wrapping key, ...), as the keys package reports them.
    keys: Mapping[str, Any]

    @classmethod
    def of(cls, counts: PipelineResult, keys: Mapping[str, Any]) -> EncryptResult:
        return cls(**_counts_of(counts), keys=keys)

    def to_json(self) -> dict[str, Any]:
        return {**super().to_json(), "keys": dict(self.keys)}


@dataclass(frozen=True)
class PendingStats:
    """Records that waited for their subject's key: buffered, released, timed out, and held now."""

    buffered: int
    released: int
    timed_out: int
    held: int

    def to_json(self) -> dict[str, int]:
        return {"buffered": self.buffered, "released": self.released, "timed_out": self.timed_out, "held": self.held}


@dataclass(frozen=True)
class DecryptResult(PipelineResult):
    """The decrypt pipeline's counters and its pending buffer's."""

    kind: ClassVar[str] = "decrypt"

    pending: PendingStats

    @classmethod
    def of(cls, counts: PipelineResult, pending: PendingStats) -> DecryptResult:
        return cls(**_counts_of(counts), pending=pending)

    def to_json(self) -> dict[str, Any]:
        return {**super().to_json(), "pending": self.pending.to_json()}
