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
from strongroom.audit.kafka_state import PartitionState, TopicState
from strongroom.audit.schema import COLUMNS, spark_schema
from strongroom.audit.scrub import _partition_rows

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
        row("c", 0, 5, key=b"K5", value=b"x"),  # removed; the later K5 is gone too -> missing
        row("c", 0, 6, key=b"K5", value=b"y"),  # absent at/above log start -> missing
        row("c", 0, 7, key=b"K7", value=b"x"),  # removed; the later K7 sits in a matched chunk -> justified
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
    partitions = [("a", 0, 3, 11, 500), ("a", 1, 1, 1, 0), ("c", 0, 0, 20_000, 50), ("s", 0, 2, 3, 150)]
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
        retained_keys=spark.createDataFrame(
            [("c", 0, 15_000, hash_bytes(b"K7"))], "topic STRING, partition INT, offset BIGINT, key_hash BINARY"
        ),
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
        (("c", 0, 5), "missing", "absent"),
        (("c", 0, 6), "missing", "absent"),
        (("c", 0, 7), "expired-justified", "compaction: same key at offset 15000"),
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


def test_absent_record_below_the_last_re_read_piece_is_missing(spark: SparkSession) -> None:
    """Two suspect ranges of a size-capped topic at its cap, re-read in several pieces; a record
    absent from the first range sits far below where the last piece began. It is ``missing``: the
    log start comes from observed facts (the scrub once took the last piece's planned start and
    scored such a record durable, justified by retention.bytes)."""
    old = NOW - 3 * 86_400_000
    state = {"t": TopicState("t", (PartitionState("t", 0, 0, 6_000, 6_000, 1, 3, (1,), (1, 2), NOW),))}
    first_pass = [
        {
            "topic": "t",
            "partition": 0,
            "offset": a,
            "range_end": b,
            "range_records": b - a,
            "range_bytes": 100 * (b - a),
        }
        for a, b in ((0, 1_500), (1_500, 3_000), (3_000, 4_500), (4_500, 6_000))
    ]
    partitions = _partition_rows(state, first_pass, relisted_start={("t", 0): 0})
    ledger = [row("t", 0, off, ts=old) for off in (1_000, 1_001, 1_002, 5_500)]
    log = [row("t", 0, off, ts=old) for off in (1_000, 1_002, 5_500, 5_501)]  # 1_001 lost, 5_501 not ledgered
    classified = classify(
        frame(spark, ledger),
        frame(spark, log),
        spark.createDataFrame([r[:5] for r in partitions.values()], PARTITIONS_DDL),
        spark.createDataFrame(
            topics_rows([("t", {"cleanup.policy": "delete", "retention.ms": str(HOUR), "retention.bytes": "1000"})]),
            TOPICS_DDL,
        ),
        spark.createDataFrame([], DELETIONS_DDL),
        ClassifyParams(now_ms=NOW, span_ms=HOUR),
    )
    statuses = {r.offset: (r.status, r.reason) for r in classified.collect()}
    assert statuses[1_001] == ("missing", "absent although at or above log start offset 0")
    assert statuses[1_000][0] == statuses[1_002][0] == statuses[5_500][0] == "ok"
    assert statuses[5_501][0] == "unledgered"
