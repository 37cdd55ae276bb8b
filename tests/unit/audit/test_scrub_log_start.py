"""Where the scrub believes a partition's log starts: observed facts only, never a planned piece start."""

from __future__ import annotations

import itertools
from typing import Any

from strongroom.audit.kafka_state import PartitionState, TopicState
from strongroom.audit.scrub import _partition_rows


def state(log_start: int, end: int) -> dict[str, TopicState]:
    part = PartitionState("t", 0, log_start, end, end, 1, 3, (1, 2), (1, 2), 0)
    return {"t": TopicState("t", (part,), {"retention.bytes": "1000"})}


def marker(start: int, end: int, records: int | None = None) -> dict[str, Any]:
    n = end - start if records is None else records
    return {"topic": "t", "partition": 0, "offset": start, "range_end": end, "range_records": n, "range_bytes": 10 * n}


def pieces(start: int, end: int, n: int) -> list[dict[str, Any]]:
    """How the data source splits ``[start, end)`` into ``n`` read pieces (one marker each)."""
    bounds = [start + (end - start) * i // n for i in range(n + 1)]
    return [marker(a, b) for a, b in itertools.pairwise(bounds)]


def test_log_start_ignores_where_re_read_pieces_began() -> None:
    """Two suspect ranges re-read in several pieces far above the partition's real log start: the
    log start stays where the cluster and the first pass saw it (the old code took the last piece's
    planned start, 4_500, and so called every absent record below it expired)."""
    first_pass = pieces(0, 6_000, 4)
    rows = _partition_rows(state(0, 6_000), first_pass, relisted_start={("t", 0): 0})
    topic, partition, log_start, log_end, log_bytes, planned_start, planned_end = rows[("t", 0)]
    assert (topic, partition, log_start, log_end) == ("t", 0, 0, 6_000)
    assert log_bytes == 6_000 * (10 + 64)
    assert (planned_start, planned_end) == (0, 6_000)


def test_log_start_follows_observed_moves() -> None:
    # the first pass's first piece was moved up to the leader's log start (its start had expired)
    moved = [marker(250, 1_500), *pieces(1_500, 6_000, 3)]
    assert _partition_rows(state(0, 6_000), moved)[("t", 0)][2] == 250
    # listed again after the re-read: retention moved it further meanwhile
    assert _partition_rows(state(0, 6_000), moved, relisted_start={("t", 0): 900})[("t", 0)][2] == 900
    # a late answer from a lagging replica never moves it back
    assert _partition_rows(state(300, 6_000), pieces(300, 6_000, 4), relisted_start={("t", 0): 100})[("t", 0)][2] == 300


def test_partition_without_markers_keeps_the_cluster_facts() -> None:
    rows = _partition_rows(state(40, 40), [])
    assert rows[("t", 0)][2:4] == (40, 40)
