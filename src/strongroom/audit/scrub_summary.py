"""What one scrub found, typed: per topic, span and partition counts and scores, examples, how it went.

Built once, from the scrub's status-count rows and the partitions' facts, and converted to JSON only
where it leaves strongroom (the CLI, the history files the report reads): :meth:`ScrubSummary.to_json`
keeps the layout those readers know.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from strongroom.audit.classify import ALL_STATUSES, AUDITED_STATUSES, DURABLE_STATUSES, UNLEDGERED
from strongroom.audit.kafka_state import TopicState
from strongroom.audit.nines import Score
from strongroom.audit.units import format_duration_ms
from strongroom.runtime import iso_utc

#: Topic settings a summary shows (the ones that explain verdicts).
SHOWN_CONFIG = ("cleanup.policy", "retention.ms", "retention.bytes", "min.insync.replicas",
                "unclean.leader.election.enable")  # fmt: skip

CountRow = Mapping[str, Any]


def counts_of(rows: Iterable[CountRow]) -> dict[str, int]:
    """Records per status (every status present, zero or not)."""
    out = dict.fromkeys(ALL_STATUSES, 0)
    for r in rows:
        out[r["status"]] += int(r["records"])
    return out


def score_of(counts: Mapping[str, int]) -> Score:
    return Score(sum(counts[s] for s in DURABLE_STATUSES), sum(counts[s] for s in AUDITED_STATUSES))


def _nonzero(counts: Mapping[str, int]) -> dict[str, int]:
    return {k: v for k, v in counts.items() if v}


@dataclass(frozen=True)
class SpanScrub:
    """One score window (by record timestamp) of one topic."""

    start_ms: int
    span_ms: int
    counts: dict[str, int]

    def to_json(self) -> dict[str, Any]:
        return {
            "span_start": iso_utc(self.start_ms),
            "span_end": iso_utc(self.start_ms + self.span_ms),
            "span_start_ms": self.start_ms,
            "counts": _nonzero(self.counts),
            "score": score_of(self.counts).to_json(),
        }


@dataclass(frozen=True)
class PartitionScrub:
    """One partition: the log start the verdicts used, counts, and what the ledger never saw."""

    partition: int
    log_start: int | None
    log_end: int | None
    counts: dict[str, int]
    unledgered_min: int | None
    unledgered_max: int | None
    unledgered_in_coverage: int

    def to_json(self) -> dict[str, Any]:
        return {
            "partition": self.partition,
            "log_start": self.log_start,
            "log_end": self.log_end,
            "counts": _nonzero(self.counts),
            "score": score_of(self.counts).to_json(),
            "unledgered": {
                "records": self.counts[UNLEDGERED],
                "min_offset": self.unledgered_min,
                "max_offset": self.unledgered_max,
                "inside_ledger_coverage": self.unledgered_in_coverage,
            },
        }


@dataclass(frozen=True)
class TopicScrub:
    topic: str
    counts: dict[str, int]
    spans: list[SpanScrub]
    partitions: list[PartitionScrub]
    config: dict[str, str]

    @property
    def score(self) -> Score:
        return score_of(self.counts)

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "counts": self.counts,
            "score": self.score.to_json(),
            "spans": [s.to_json() for s in self.spans],
            "partitions": [p.to_json() for p in self.partitions],
            "config": self.config,
        }


@dataclass(frozen=True)
class ScrubRun:
    """Who ran against what, and how long each phase took."""

    run_id: str
    started_ms: int
    finished_ms: int
    seconds: float
    ledger: str
    bootstrap_servers: str
    span_ms: int
    phases: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class ScrubSummary:
    run: ScrubRun
    records_read: int
    counts: dict[str, int]
    topics: list[TopicScrub]
    examples: list[dict[str, Any]]
    operations_considered: int = 0
    chunks: dict[str, int] = field(default_factory=dict)

    @property
    def score(self) -> Score:
        return score_of(self.counts)

    @property
    def lost(self) -> int:
        """Audited records that are not durable (the scrub's exit code is 4 when there are any)."""
        return self.score.audited - self.score.durable

    def to_json(self) -> dict[str, Any]:
        run = self.run
        return {
            "run_id": run.run_id,
            "started_at": iso_utc(run.started_ms),
            "finished_at": iso_utc(run.finished_ms),
            "started_ms": run.started_ms,
            "seconds": run.seconds,
            "ledger": run.ledger,
            "bootstrap_servers": run.bootstrap_servers,
            "span": format_duration_ms(run.span_ms),
            "span_ms": run.span_ms,
            "records_read": self.records_read,
            "counts": self.counts,
            "score": self.score.to_json(),
            "topics": [t.to_json() for t in self.topics],
            "examples": [_json_example(e) for e in self.examples],
            "operations_considered": self.operations_considered,
            "chunks": self.chunks,
            "phases": run.phases,
        }


def _json_example(example: Mapping[str, Any]) -> dict[str, Any]:
    return {k: (v.hex() if isinstance(v, bytes | bytearray) else v) for k, v in example.items()}


def topic_scrubs(
    count_rows: Sequence[CountRow],
    state: Mapping[str, TopicState],
    partition_facts: Mapping[tuple[str, int], tuple[Any, ...]],
    span_ms: int,
) -> list[TopicScrub]:
    """Per topic (every topic counted or described), its spans and partitions."""
    by_topic: dict[str, list[CountRow]] = defaultdict(list)
    for r in count_rows:
        by_topic[r["topic"]].append(r)
    out = []
    for topic in sorted(set(by_topic) | set(state)):
        rows = by_topic.get(topic, [])
        known = {p.partition for p in state[topic].partitions} if topic in state else set()
        config = dict(state[topic].config) if topic in state else {}
        out.append(
            TopicScrub(
                topic=topic,
                counts=counts_of(rows),
                spans=_spans(rows, span_ms),
                partitions=_partitions(topic, rows, known, partition_facts),
                config={k: config[k] for k in sorted(config) if k in SHOWN_CONFIG},
            )
        )
    return out


def _spans(rows: Sequence[CountRow], span_ms: int) -> list[SpanScrub]:
    by_span: dict[int, list[CountRow]] = defaultdict(list)
    for r in rows:
        if r["status"] != UNLEDGERED and r["span_start"] is not None:
            by_span[int(r["span_start"])].append(r)
    return [SpanScrub(start, span_ms, counts_of(by_span[start])) for start in sorted(by_span)]


def _partitions(
    topic: str, rows: Sequence[CountRow], known: set[int], facts: Mapping[tuple[str, int], tuple[Any, ...]]
) -> list[PartitionScrub]:
    by_partition: dict[int, list[CountRow]] = defaultdict(list)
    for r in rows:
        by_partition[int(r["partition"])].append(r)
    out = []
    for p in sorted(set(by_partition) | known):
        prow = by_partition.get(p, [])
        unl = [r for r in prow if r["status"] == UNLEDGERED]
        fact = facts.get((topic, p))
        out.append(
            PartitionScrub(
                partition=p,
                log_start=fact[2] if fact else None,
                log_end=fact[3] if fact else None,
                counts=counts_of(prow),
                unledgered_min=min((r["min_offset"] for r in unl), default=None),
                unledgered_max=max((r["max_offset"] for r in unl), default=None),
                unledgered_in_coverage=sum(int(r["in_coverage"] or 0) for r in unl),
            )
        )
    return out
