"""The audit reader when the log ends short of the range it was asked for (a real broker).

That happens when a new leader's high watermark still trails the offsets the previous leader
reported committed (the clean rolling-restart run hit it: the ledger lost the tail of a batch). Here
the same situation is made directly: the range asked for reaches past the current end, and the
records to fill it arrive later - or never (a truncation).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pyarrow as pa
from audit_helpers import produce

from strongroom.audit.kafka_reader import read_range
from strongroom.audit.schema import KIND_RANGE
from strongroom.testing.kafka_cluster import KafkaCluster


def _read(bootstrap: str, topic: str, end: int, eof_grace: float) -> tuple[list[int], tuple[int, int]]:
    batches: list[pa.RecordBatch] = list(
        read_range({"bootstrap.servers": bootstrap}, topic, 0, 0, end, eof_grace=eof_grace, idle_timeout=20)
    )
    rows = [r for b in batches for r in b.to_pylist()]
    [marker] = [r for r in rows if r["kind"] == KIND_RANGE]
    return [r["offset"] for r in rows if r["kind"] != KIND_RANGE], (marker["offset"], marker["range_end"])


def _ten_records(kafka_cluster: KafkaCluster, new_topic: Callable[..., str]) -> tuple[str, str]:
    bs = kafka_cluster.bootstrap_servers
    topic = new_topic(partitions=1)
    produce(bs, topic, (b"v%d" % i for i in range(10)), partition=0)
    return bs, topic


def test_records_that_arrive_within_the_grace_are_read(
    kafka_cluster: KafkaCluster, new_topic: Callable[..., str]
) -> None:
    bs, topic = _ten_records(kafka_cluster, new_topic)
    late = threading.Timer(2.0, lambda: produce(bs, topic, (b"w%d" % i for i in range(5)), partition=0))
    late.start()
    try:
        offsets, marker = _read(bs, topic, end=15, eof_grace=20)
    finally:
        late.join()
    assert offsets == list(range(15))
    assert marker == (0, 15)


def test_a_log_still_short_after_the_grace_ends_the_range_where_it_ends(
    kafka_cluster: KafkaCluster, new_topic: Callable[..., str]
) -> None:
    bs, topic = _ten_records(kafka_cluster, new_topic)
    started = time.monotonic()
    offsets, marker = _read(bs, topic, end=15, eof_grace=1.5)
    assert 1.5 <= time.monotonic() - started < 15
    assert offsets == list(range(10))
    assert marker == (0, 10)  # the marker never claims offsets the reader did not see

    offsets, marker = _read(bs, topic, end=15, eof_grace=0)  # no grace: the first end-of-partition ends it
    assert (offsets, marker) == (list(range(10)), (0, 10))
