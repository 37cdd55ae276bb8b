"""The scrub's classification transform on small hand-made DataFrames (Spark, no Kafka)."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

from strongroom.audit.classify import (
    COVERAGE_DDL,
    DELETIONS_DDL,
    PARTITIONS_DDL,
    TOPICS_DDL,
    ClassifyParams,
    classify,
    status_counts,
    topics_rows,
)
from strongroom.audit.hashing import hash_bytes
from strongroom.audit.schema import COLUMNS, spark_schema

NOW = 1_800_000_000_000
HOUR = 3_600_000


def row(topic: str, p: int, off: int, *, epoch: int = 0, ts: int = NOW - 1000, key: bytes | None = b"k",
        value: bytes | None = b"v", read_at: int = NOW) -> tuple[Any, ...]:  # fmt: skip
    d = {
        "topic": topic, "partition": p, "offset": off, "leader_epoch": epoch, "timestamp": ts,
        "timestamp_type": 1, "key_hash": hash_bytes(key), "value_hash": hash_bytes(value), "headers_hash": None,
        "key_len": None if key is None else len(key), "value_len": None if value is None else len(value),
        "read_at": read_at, "kind": "record", "range_end": None, "range_records": None, "range_bytes": None,
    }  # fmt: skip
    return tuple(d.get(c) for c in COLUMNS)


def frame(spark: SparkSession, rows: list[tuple[Any, ...]]) -> DataFrame:
    return spark.createDataFrame(rows, spark_schema())


@pytest.fixture(scope="module")
def outcome(spark: SparkSession) -> dict[tuple[str, int, int], tuple[str, str | None]]:
    old = NOW - 2 * HOUR
    ledger = [
        # topic a: delete policy, retention.ms 1h; log start 3, log end 11
        row("a", 0, 0, ts=old),  # below start, covered by the recorded delete-records (checked first)
        row("a", 1, 0, ts=old),  # below start, older than retention -> justified (retention.ms)
        row("a", 0, 1),  # below start, recorded delete-records up to 2 -> justified
        row("a", 0, 2),  # below start, nothing explains it -> unjustified
        row("a", 0, 3),  # ok
        row("a", 0, 5),  # absent from the log at/above log start -> missing
        row("a", 0, 6, value=b"v6"),  # same epoch, different value -> altered
        row("a", 0, 7, value=b"B"),  # different epoch and value -> diverged
        row("a", 0, 8, value=b"v8"),  # same content under a new epoch -> ok
        row("a", 0, 9),
        row("a", 0, 9, epoch=5, value=b"later", read_at=NOW + 10),  # a second capture: the first wins
        row("a", 0, 12),  # beyond the log end -> missing (truncated)
        # topic c: compacted
        row("c", 0, 0, key=b"K1", value=b"old"),  # removed, same key later at 2 -> justified (compaction)
        row("c", 0, 1, key=b"K2"),
        row("c", 0, 2, key=b"K1", value=b"new"),
        row("c", 0, 3, key=b"K3", value=None, ts=NOW - 2 * 86_400_000),  # old tombstone removed -> justified
        row("c", 0, 4, key=b"K4", value=b"x"),  # removed, no later K4 -> missing
        # topic s: retention.bytes 100, the log holds 150 bytes
        row("s", 0, 0),
        row("s", 0, 1),
    ]
    log = [
        row("a", 0, 3),
        row("a", 0, 4),  # unledgered inside the ledger's coverage
        row("a", 0, 6, value=b"changed"),
        row("a", 0, 7, epoch=1, value=b"C"),
        row("a", 0, 8, epoch=1, value=b"v8"),
        row("a", 0, 9),
        row("a", 0, 10),  # unledgered, never covered
        row("c", 0, 1, key=b"K2"),
        row("c", 0, 2, key=b"K1", value=b"new"),
        row("s", 0, 2),
    ]
    partitions = [("a", 0, 3, 11, 500), ("a", 1, 1, 1, 0), ("c", 0, 0, 5, 50), ("s", 0, 2, 3, 150)]
    configs = [
        ("a", {"cleanup.policy": "delete", "retention.ms": str(HOUR)}),
        ("c", {"cleanup.policy": "compact", "delete.retention.ms": "86400000"}),
        ("s", {"cleanup.policy": "delete", "retention.ms": "-1", "retention.bytes": "100"}),
    ]
    deletions = [("a", 0, 2, "op-1")]
    coverage = [("a", 0, 0, 10)]
    classified = classify(
        frame(spark, ledger),
        frame(spark, log),
        spark.createDataFrame(partitions, PARTITIONS_DDL),
        spark.createDataFrame(topics_rows(configs), TOPICS_DDL),
        spark.createDataFrame(deletions, DELETIONS_DDL),
        ClassifyParams(now_ms=NOW, span_ms=HOUR, compacted_topics=frozenset({"c"})),
        coverage=spark.createDataFrame(coverage, COVERAGE_DDL),
    )
    rows = classified.collect()
    assert len(rows) == len({(r.topic, r.partition, r.offset) for r in rows}), "one status per record"
    counts = status_counts(classified).collect()
    assert sum(r.records for r in counts) == len(rows)
    return {(r.topic, r.partition, r.offset): (r.status, r.reason) for r in rows}


@pytest.mark.parametrize(
    ("coords", "status", "reason_part"),
    [
        (("a", 0, 0), "expired-justified", "recorded delete-records op-1"),
        (("a", 1, 0), "expired-justified", "retention.ms=3600000"),
        (("a", 0, 1), "expired-justified", "recorded delete-records op-1"),
        (("a", 0, 2), "expired-unjustified", "below log start offset 3"),
        (("a", 0, 3), "ok", None),
        (("a", 0, 4), "unledgered", "inside a range the ledger had read"),
        (("a", 0, 5), "missing", "at or above log start offset 3"),
        (("a", 0, 6), "altered", "changed value"),
        (("a", 0, 7), "diverged", "leader epoch 0 -> 1; changed value"),
        (("a", 0, 8), "ok", "same content, leader epoch 0 -> 1"),
        (("a", 0, 9), "ok", None),
        (("a", 0, 10), "unledgered", "not captured"),
        (("a", 0, 12), "missing", "beyond the log end offset 11"),
        (("c", 0, 0), "expired-justified", "compaction: same key at offset 2"),
        (("c", 0, 1), "ok", None),
        (("c", 0, 3), "expired-justified", "tombstone"),
        (("c", 0, 4), "missing", "absent"),
        (("s", 0, 0), "expired-justified", "retention.bytes=100"),
        (("s", 0, 2), "unledgered", "not captured"),
    ],
)
def test_classification(
    outcome: dict[tuple[str, int, int], tuple[str, str | None]],
    coords: tuple[str, int, int],
    status: str,
    reason_part: str | None,
) -> None:
    got_status, got_reason = outcome[coords]
    assert got_status == status, (coords, got_reason)
    if reason_part is None:
        assert got_reason is None
    else:
        assert got_reason is not None
        assert reason_part in got_reason
