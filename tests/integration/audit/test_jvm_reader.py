"""The audit's JVM reader against the Python reader it replaces, on a real broker and the shared session.

The Python ``strongroom-kafka`` source is the reference: the same records read by both must give the
same rows (hashes, epochs, timestamps, lengths, digests, range markers - everything but ``read_at``),
and a ledger captured by the Python reader must scrub clean with the JVM reader.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from audit_helpers import produce
from pyspark.sql import SparkSession

from strongroom.audit.digest import DIGEST_DDL, ChunkAccumulator
from strongroom.audit.errors import KafkaReadError
from strongroom.audit.hashing import hash_bytes, hash_headers
from strongroom.audit.ledger import capture_ledger, read_ledger
from strongroom.audit.readers import JVM_SOURCE, AuditReader, read_batch, read_errors
from strongroom.audit.schema import KIND_RANGE, spark_schema
from strongroom.audit.scrub import ScrubOptions, run_scrub
from strongroom.audit.store import LedgerPaths
from strongroom.kafka.config import ClientConfig
from strongroom.kafka.transport import build_producer
from strongroom.testing.kafka_cluster import KafkaCluster

Record = tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]] | None]

#: Records a reader could get wrong: no key, tombstones, empty bytes, header lists with null values,
#: repeated and non-ASCII names, a value near the broker's default size limit.
HOSTILE: list[Record] = [
    (None, b"no key", None),
    (b"tombstone", None, None),
    (None, None, None),
    (b"", b"", None),
    (b"k", b"v", [("h", None)]),
    (b"k", b"v", [("h", b"")]),
    (b"k", b"v", [("", b"x")]),
    (b"k", b"v", [("dup", b"1"), ("dup", b"2"), ("dup", None)]),
    (b"k", b"v", [("naïve-名前", "ünïcode".encode())]),
    (b"\x00\xff" * 50, bytes(range(256)) * 4, [("bin", b"\x00\x01\xff")]),
    (b"big", os.urandom(900_000), [("size", b"900000")]),
    (b"k" * 10_000, b"v" * 100_000, None),
]


def _produce_hostile(bootstrap: str, topic: str, copies: int = 1) -> None:
    producer = build_producer(ClientConfig(bootstrap).producer({"linger.ms": 0, "message.max.bytes": 2_000_000}))
    failed: list[Any] = []
    now = int(time.time() * 1000)  # recent CreateTimes: an old one would let retention delete the records
    for _ in range(copies):
        for i, (key, value, headers) in enumerate(HOSTILE):
            producer.produce(topic, key=key, value=value, headers=headers, partition=0, timestamp=now + i,
                             on_delivery=lambda err, _msg: failed.append(err) if err is not None else None)  # fmt: skip
            assert producer.flush(60) == 0  # one record per batch: two large values never share one
    assert failed == []


def _abort_a_transaction(bootstrap: str, topic: str) -> None:
    settings = {
        "transactional.id": f"abort-{topic}",
        "linger.ms": 5,
        "transaction.timeout.ms": 120_000,
        "message.timeout.ms": 60_000,
    }
    producer = build_producer(ClientConfig(bootstrap).producer(settings))
    producer.init_transactions(60)
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, key=b"aborted", value=b"aborted-%d" % i, partition=0)
    producer.flush(30)
    producer.abort_transaction(30)


def _rows(spark: SparkSession, reader: AuditReader, bootstrap: str, **options: Any) -> list[dict[str, Any]]:
    frame = read_batch(spark, ClientConfig(bootstrap), reader, **options).load()
    rows = [r.asDict() for r in frame.collect()]
    for r in rows:
        r.pop("read_at", None)
    return sorted(rows, key=lambda r: repr(sorted(r.items())))


def test_the_jvm_reader_has_the_row_layouts_of_the_python_reader(
    spark: SparkSession, kafka_cluster: KafkaCluster
) -> None:
    bs = kafka_cluster.bootstrap_servers
    options = {"kafka.bootstrap.servers": bs, "ranges": "[]"}
    assert spark.read.format(JVM_SOURCE).options(**options).load().schema == spark_schema()
    digests = spark.read.format(JVM_SOURCE).options(**options, output="digests").load().schema
    assert digests.simpleString() == spark.createDataFrame([], DIGEST_DDL).schema.simpleString()


def test_content_hashes_and_record_digests_are_bit_identical(spark: SparkSession) -> None:
    audit: Any = spark.sparkContext._jvm.io.strongroom.dataplane.audit  # type: ignore[union-attr]
    for key, value, headers in HOSTILE:
        names = None if headers is None else [n for n, _ in headers]
        values = None if headers is None else [v for _, v in headers]
        got = [None if h is None else bytes(h) for h in audit.HashCheck.hashes(key, value, names, values)]
        assert got == [hash_bytes(key), hash_bytes(value), hash_headers(headers)], (key, headers)
        for offset, epoch, stamp in [(0, 0, 0), (123_456_789, 7, 1_700_000_000_123), (2**40, None, -1)]:
            acc = ChunkAccumulator("t", 0, 10_000)
            acc.add_hashed([offset], [epoch], [stamp], [got[0]], [got[1]], [got[2]])
            [expected] = [e[1] for e in acc.chunks.values()]
            assert audit.RecordDigest.of(offset, epoch, stamp, got[0], got[1], got[2]) == expected


def test_the_jvm_reader_reads_the_same_rows_as_the_python_reader(
    spark: SparkSession, kafka_cluster: KafkaCluster, new_topic: Callable[..., str]
) -> None:
    bs = kafka_cluster.bootstrap_servers
    topic = new_topic(partitions=2, config={"max.message.bytes": "2000000"})
    _produce_hostile(bs, topic, copies=3)
    _abort_a_transaction(bs, topic)  # read_committed: never returned, never ledgered
    produce(bs, topic, (b"after-%d" % i for i in range(2_500)), partition=1, key=lambda i: b"k%d" % (i % 7))
    common = {"topics": topic, "emitRanges": True, "emitDigests": True, "chunkSize": 100, "maxRecordsPerRange": 700}
    python = _rows(spark, AuditReader.PYTHON, bs, **common)
    jvm = _rows(spark, AuditReader.JVM, bs, **common)
    assert len([r for r in jvm if r["kind"] == "record"]) == 3 * len(HOSTILE) + 2_500
    assert not [r for r in jvm if r["key_len"] == len(b"aborted")]
    assert jvm == python

    ranges = json.dumps([[topic, 0, 0, 10_000], [topic, 1, 5, 2_000]])
    for output in ("rows", "digests"):
        options = {"ranges": ranges, "emitRanges": True, "output": output, "chunkSize": 16, "eofGraceSeconds": 0}
        assert _rows(spark, AuditReader.JVM, bs, **options) == _rows(spark, AuditReader.PYTHON, bs, **options)


def test_a_ledger_captured_by_the_python_reader_scrubs_clean_with_the_jvm_reader(
    spark: SparkSession, kafka_cluster: KafkaCluster, new_topic: Callable[..., str], ledger: LedgerPaths
) -> None:
    bs = kafka_cluster.bootstrap_servers
    client = ClientConfig(bs)
    topic = new_topic(partitions=2, config={"max.message.bytes": "2000000"})
    _produce_hostile(bs, topic, copies=2)
    produce(bs, topic, (b"v%d" % i for i in range(3_000)), key=lambda i: None if i % 5 == 0 else b"k%d" % i)
    capture_ledger(spark, client, [topic], ledger, once=True, reader=AuditReader.PYTHON)
    records = read_ledger(spark, ledger).filter("kind = 'record'").count()
    assert records == 2 * len(HOSTILE) + 3_000

    summary = run_scrub(spark, client, ledger, ScrubOptions(reader=AuditReader.JVM, chunk_size=500)).to_json()
    assert {k: v for k, v in summary["counts"].items() if v} == {"ok": records}, summary["counts"]
    assert summary["chunks"]["suspect"] == 0, summary["chunks"]

    # ... and the JVM reader's own capture of more records continues the Python reader's checkpoint
    produce(bs, topic, (b"w%d" % i for i in range(1_000)))
    capture_ledger(spark, client, [topic], ledger, once=True, reader=AuditReader.JVM)
    assert read_ledger(spark, ledger).filter("kind = 'record'").count() == records + 1_000
    summary = run_scrub(spark, client, ledger, ScrubOptions(reader=AuditReader.PYTHON, chunk_size=500)).to_json()
    assert {k: v for k, v in summary["counts"].items() if v} == {"ok": records + 1_000}, summary["counts"]


def _marker_and_offsets(spark: SparkSession, bs: str, topic: str, end: int, grace: float) -> tuple[list[int], Any]:
    options = {"ranges": json.dumps([[topic, 0, 0, end]]), "emitRanges": True, "eofGraceSeconds": grace,
               "idleTimeoutSeconds": 20}  # fmt: skip
    rows = _rows(spark, AuditReader.JVM, bs, **options)
    [marker] = [r for r in rows if r["kind"] == KIND_RANGE]
    return sorted(r["offset"] for r in rows if r["kind"] != KIND_RANGE), (marker["offset"], marker["range_end"])


def test_the_jvm_reader_waits_out_a_short_log_for_the_grace_then_believes_the_leader(
    spark: SparkSession, kafka_cluster: KafkaCluster, new_topic: Callable[..., str]
) -> None:
    bs = kafka_cluster.bootstrap_servers
    topic = new_topic(partitions=1)
    produce(bs, topic, (b"v%d" % i for i in range(10)), partition=0)
    started = time.monotonic()
    assert _marker_and_offsets(spark, bs, topic, end=15, grace=1.5) == (list(range(10)), (0, 10))
    assert 1.5 <= time.monotonic() - started < 15
    assert _marker_and_offsets(spark, bs, topic, end=15, grace=0) == (list(range(10)), (0, 10))

    late = threading.Timer(3.0, lambda: produce(bs, topic, (b"w%d" % i for i in range(5)), partition=0))
    late.start()
    try:
        assert _marker_and_offsets(spark, bs, topic, end=15, grace=20) == (list(range(15)), (0, 15))
    finally:
        late.join()


def test_a_range_starting_below_the_log_start_says_where_it_could_start(
    spark: SparkSession, kafka_cluster: KafkaCluster, new_topic: Callable[..., str]
) -> None:
    from confluent_kafka import TopicPartition

    bs = kafka_cluster.bootstrap_servers
    topic = new_topic(partitions=1)
    produce(bs, topic, (b"v%d" % i for i in range(20)), partition=0)
    futures = kafka_cluster.admin().delete_records([TopicPartition(topic, 0, 8)])
    for f in futures.values():
        f.result(30)
    options = {"ranges": json.dumps([[topic, 0, 0, 20]]), "emitRanges": True}
    jvm = _rows(spark, AuditReader.JVM, bs, **options)
    assert sorted(r["offset"] for r in jvm if r["kind"] == "record") == list(range(8, 20))
    assert [(r["offset"], r["range_end"]) for r in jvm if r["kind"] == KIND_RANGE] == [(8, 20)]
    assert jvm == _rows(spark, AuditReader.PYTHON, bs, **options)


def test_a_partition_that_makes_no_progress_fails_the_read_naming_it(
    spark: SparkSession, kafka_cluster: KafkaCluster, new_topic: Callable[..., str]
) -> None:
    bs = kafka_cluster.bootstrap_servers
    topic = new_topic(partitions=1)
    options = {"ranges": json.dumps([[topic, 3, 0, 10]]), "idleTimeoutSeconds": 3}  # partition 3 does not exist
    failed = pytest.raises(KafkaReadError, match=rf"no progress reading {topic}-3 at offset 0 \(range 0-10\) for 3s")
    with failed, read_errors():
        read_batch(spark, ClientConfig(bs), AuditReader.JVM, **options).load().collect()


def test_each_capture_batch_reads_with_the_consumers_the_last_batch_kept_and_loses_nothing(
    spark: SparkSession, kafka_cluster: KafkaCluster, new_topic: Callable[..., str], ledger: LedgerPaths
) -> None:
    pool: Any = spark.sparkContext._jvm.io.strongroom.dataplane.audit.ConsumerPool  # type: ignore[union-attr]
    pool.clear()
    bs = kafka_cluster.bootstrap_servers
    client = ClientConfig(bs)
    topic = new_topic(partitions=2)
    produce(bs, topic, (b"a%d" % i for i in range(1_500)), key=lambda i: b"k%d" % i)
    capture_ledger(spark, client, [topic], ledger, once=True, reader=AuditReader.JVM)
    assert pool.idle() == 2  # each partition's read ended at the log's end: its consumer is kept

    for round_ in range(3):  # the next batches start where the kept consumers stopped
        produce(bs, topic, (b"b%d-%d" % (round_, i) for i in range(700)), key=lambda i: b"k%d" % i)
        capture_ledger(spark, client, [topic], ledger, once=True, reader=AuditReader.JVM)
        assert pool.idle() == 2  # taken and given back, not one more consumer per batch
    records = read_ledger(spark, ledger).filter("kind = 'record'")
    assert records.count() == 1_500 + 3 * 700
    assert records.select("partition", "offset").distinct().count() == 1_500 + 3 * 700
    summary = run_scrub(spark, client, ledger, ScrubOptions(reader=AuditReader.JVM, chunk_size=500)).to_json()
    assert {k: v for k, v in summary["counts"].items() if v} == {"ok": 1_500 + 3 * 700}, summary["counts"]

    # A read that believes the first end of the log it sees (no grace) never takes a kept consumer, whose
    # last known end may be a batch old; nor does a read that failed give its consumer back.
    pool.clear()
    options = {"ranges": json.dumps([[topic, 0, 0, 10_000]]), "emitRanges": True, "eofGraceSeconds": 0}
    _rows(spark, AuditReader.JVM, bs, **options)
    assert pool.idle() == 0
    with pytest.raises(KafkaReadError), read_errors():
        read_batch(
            spark, client, AuditReader.JVM, ranges=json.dumps([[topic, 5, 0, 10]]), idleTimeoutSeconds=2
        ).load().collect()
    assert pool.idle() == 0
