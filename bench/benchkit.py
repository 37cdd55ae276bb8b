"""What the benchmarks share: medians and spread, round verification, CPU per process kind, RESULT lines.

Pure parts (no Kafka, no JVM) are unit-tested in tests/unit/test_bench_kit.py. The module name has no
underscore, so ``make bench`` (which runs ``bench/*_*.py``) does not run it as a benchmark.
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

#: The header every benchmark record carries: its sequence number, unique within a source topic.
SEQ_HEADER = "bench-seq"


# ---------------------------------------------------------------------------------------------- statistics
@dataclass(frozen=True)
class Summary:
    """Median and spread of one figure over the rounds."""

    values: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    @property
    def low(self) -> float:
        return min(self.values)

    @property
    def high(self) -> float:
        return max(self.values)

    @property
    def spread(self) -> float:
        """(max - min) / median: 0.10 means the rounds lie within 10 % of the median."""
        median = self.median
        return (self.high - self.low) / median if median else 0.0


def summarize(values: Iterable[float]) -> Summary:
    found = tuple(float(v) for v in values)
    if not found:
        raise ValueError("no rounds to summarize")
    return Summary(found)


def result_line(name: str, ratios: Summary, **figures: object) -> str:
    """``RESULT <name> ratio=<median> min=.. max=.. spread=.. key=value ...`` (floats to 2 or 0 decimals)."""
    parts = [
        f"RESULT {name} ratio={ratios.median:.2f}",
        f"min={ratios.low:.2f}",
        f"max={ratios.high:.2f}",
        f"spread={ratios.spread:.2f}",
        f"rounds={len(ratios.values)}",
    ]
    for key, value in figures.items():
        if isinstance(value, float):
            value = f"{value:.2f}" if abs(value) < 100 else f"{value:.0f}"
        parts.append(f"{key}={value}")
    return " ".join(parts)


# ---------------------------------------------------------------------------------------------- verification
def record_hash(key: bytes | None, value: bytes | None, headers: Sequence[tuple[str, bytes | None]],
                timestamp_ms: int | None) -> int:  # fmt: skip
    """A record's content as a 256-bit integer (length-prefixed fields; ``None`` differs from empty)."""
    digest = hashlib.sha256()

    def field_bytes(data: bytes | None) -> None:
        if data is None:
            digest.update(b"\xff")
        else:
            digest.update(len(data).to_bytes(4, "big") + data)

    field_bytes(key)
    field_bytes(value)
    for name, data in headers:
        field_bytes(name.encode())
        field_bytes(data)
    field_bytes(None if timestamp_ms is None else str(timestamp_ms).encode())
    return int.from_bytes(digest.digest(), "big")


def canonical_json(value: bytes | None) -> bytes | None:
    """JSON re-serialised with sorted keys (field mode may re-serialise what it opens)."""
    if value is None:
        return None
    return json.dumps(json.loads(value), sort_keys=True, separators=(",", ":")).encode()


@dataclass
class TopicDigest:
    """What a topic read under read_committed holds: counts, sequence numbers and order-free content sums.

    The sums add each record's hash modulo 2**256, so they ignore order and partitioning but not
    duplicates: ``with_time`` covers key, value, headers and timestamp; ``without_time`` leaves the
    timestamp out (Spark's Kafka sink cannot set one: its records carry the time they were written)."""

    records: int = 0
    seqs: Counter[str] = field(default_factory=Counter)
    with_time: int = 0
    without_time: int = 0

    def add(self, key: bytes | None, value: bytes | None, headers: Sequence[tuple[str, bytes | None]],
            timestamp_ms: int | None) -> None:  # fmt: skip
        self.records += 1
        seq = next((data for name, data in headers if name == SEQ_HEADER), None)
        self.seqs[seq.decode() if seq is not None else "<missing>"] += 1
        self.with_time = (self.with_time + record_hash(key, value, headers, timestamp_ms)) % 2**256
        self.without_time = (self.without_time + record_hash(key, value, headers, None)) % 2**256

    @property
    def duplicates(self) -> int:
        return sum(n - 1 for n in self.seqs.values() if n > 1)


class Check(StrEnum):
    """How a round's output is compared with its source."""

    #: Count and sequence numbers only (ciphertext: its content is checked by the round trip).
    COUNT = "count"
    #: Count, sequence numbers and content without timestamps (Spark's own Kafka sink).
    CONTENT = "content"
    #: Count, sequence numbers and content with timestamps (strongroom's pipelines keep them).
    CONTENT_AND_TIME = "content+time"


def verify(name: str, source: TopicDigest, output: TopicDigest, check: Check) -> list[str]:
    """Every way ``output`` is not an exact copy of ``source`` under ``check``; empty when it is."""
    problems: list[str] = []
    if output.records != source.records:
        problems.append(f"{name}: {output.records} records, expected {source.records}")
    if output.duplicates:
        problems.append(f"{name}: {output.duplicates} duplicate records under read_committed")
    missing = sum(1 for seq in source.seqs if seq not in output.seqs)
    if missing:
        problems.append(f"{name}: {missing} source records missing")
    if check == Check.CONTENT and output.without_time != source.without_time:
        problems.append(f"{name}: content hash differs from the source (keys, values or headers changed)")
    if check == Check.CONTENT_AND_TIME and output.with_time != source.with_time:
        problems.append(f"{name}: content hash differs from the source (keys, values, headers or timestamps)")
    return problems


# ---------------------------------------------------------------------------------------------- CPU per kind
class ProcessKind(StrEnum):
    """Where CPU goes. In ``local[N]`` mode Spark's driver and executors share one JVM."""

    DRIVER_PYTHON = "driver-python"
    SPARK_JVM = "spark-jvm"
    PYTHON_WORKERS = "python-workers"
    BROKER = "broker"
    OTHER = "other"


def classify(pid: int, root: int, argv: Sequence[str], parent_kind: ProcessKind | None) -> ProcessKind:
    """The kind of one process of the benchmark's tree from its command line and its parent's kind."""
    if pid == root:
        return ProcessKind.DRIVER_PYTHON
    program = os.path.basename(argv[0]) if argv else ""
    if program.startswith("java"):
        return ProcessKind.BROKER if "kafka.Kafka" in argv else ProcessKind.SPARK_JVM
    if parent_kind in (ProcessKind.SPARK_JVM, ProcessKind.PYTHON_WORKERS):
        return ProcessKind.PYTHON_WORKERS
    if parent_kind == ProcessKind.BROKER:
        return ProcessKind.BROKER
    return ProcessKind.OTHER


def stat_cpu_seconds(stat: str, ticks: int) -> tuple[int, float]:
    """``(ppid, seconds)`` from a ``/proc/<pid>/stat`` line: utime + stime + the reaped children's
    cutime + cstime (Spark's worker daemon forks workers that come and go between samples)."""
    fields = stat.rsplit(") ", 1)[1].split()
    return int(fields[1]), sum(int(v) for v in fields[11:15]) / ticks


def cpu_by_kind(root: int | None = None) -> dict[ProcessKind, float]:
    """CPU seconds used so far by the process tree under ``root`` (this process), per kind."""
    root = os.getpid() if root is None else root
    ticks = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[int]] = {}
    seconds: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid, cpu = stat_cpu_seconds((entry / "stat").read_text(), ticks)
        except (OSError, IndexError, ValueError):
            continue  # gone between listing and reading
        seconds[int(entry.name)] = cpu
        children.setdefault(ppid, []).append(int(entry.name))
    totals = {kind: 0.0 for kind in ProcessKind}
    todo: list[tuple[int, ProcessKind | None]] = [(root, None)]
    while todo:
        pid, parent_kind = todo.pop()
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        kind = classify(pid, root, argv, parent_kind)
        totals[kind] += seconds.get(pid, 0.0)
        todo.extend((child, kind) for child in children.get(pid, []))
    return totals


def cpu_delta(before: Mapping[ProcessKind, float], after: Mapping[ProcessKind, float]) -> dict[ProcessKind, float]:
    return {kind: max(0.0, after[kind] - before[kind]) for kind in ProcessKind}
