"""The exactly-once sink: replays write nothing twice, output is transactional, offsets advance."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from confluent_kafka import TopicPartition
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from strongroom.kafka.config import ClientConfig
from strongroom.kafka.transport import build_consumer, build_producer, new_producer
from strongroom.spark.kafka_sink import TransactionalSinkConfig, write_exactly_once
from strongroom.testing.kafka_cluster import KafkaCluster
from strongroom.testing.spark_kafka import read_topic


def read_committed(bootstrap: str, topic: str, partitions: int) -> list[tuple[bytes, bytes]]:
    consumer = build_consumer(ClientConfig(bootstrap).consumer())
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: list[tuple[bytes, bytes]] = []
    idle = 0
    while idle < 6:
        msg = consumer.poll(0.5)
        if msg is None:
            idle += 1
        elif msg.error() is None:
            idle = 0
            out.append((msg.key(), msg.value()))
    consumer.close()
    return out


def sink_frame(df: DataFrame, out_topic: str) -> DataFrame:
    return df.select(
        F.col("topic").alias("src_topic"),
        F.col("partition").alias("src_partition"),
        F.col("offset").alias("src_offset"),
        (F.col("offset") % 10 != 3).alias("emit"),  # every tenth record dropped by "policy"
        F.lit(out_topic).alias("topic"),
        "key",
        "value",
        "headers",
        F.unix_millis("timestamp").alias("timestamp_ms"),
        F.when(F.col("offset") % 10 != 3, F.lit("ok")).otherwise(F.lit("dropped")).alias("status"),
        F.lit(None).cast("string").alias("reason"),
        F.lit(False).alias("fatal"),
    )


def test_replayed_batches_are_written_once(
    spark: SparkSession, kafka_cluster: KafkaCluster, new_topic: Callable[..., str], unique_name: Callable[[str], str]
) -> None:
    bootstrap = kafka_cluster.bootstrap_servers
    src, dst = new_topic(partitions=2), new_topic(partitions=3)
    producer = build_producer(ClientConfig(bootstrap).producer())
    for i in range(1000):
        producer.produce(src, key=f"k{i % 37}".encode(), value=f"v{i}".encode(), headers=[("h", b"1")])
    producer.flush(30)
    df = read_topic(spark, bootstrap, src)
    config = TransactionalSinkConfig(bootstrap, unique_name("sink"))
    first = write_exactly_once(sink_frame(df, dst), config)
    assert sum(r.written for r in first) == 900
    assert sum(r.statuses.get("dropped", 0) for r in first) == 100
    # A replay (the same batch after a crash, or a lost checkpoint restarting from the earliest offset)
    again = write_exactly_once(sink_frame(df, dst), config)
    assert sum(r.written for r in again) == 0
    assert sum(r.replayed_skipped for r in again) == 1000

    records = read_committed(bootstrap, dst, 3)
    assert len(records) == 900
    assert len({v for _, v in records}) == 900
    # progress is visible to Kafka's own tooling as committed offsets of the sink's group
    described = kafka_cluster.consumer_groups_tool("--describe", "--group", config.group_id)
    assert src in described


def test_fatal_row_stops_the_write_without_retry(
    spark: SparkSession, kafka_cluster: KafkaCluster, new_topic: Callable[..., str], unique_name: Callable[[str], str]
) -> None:
    import pytest

    from strongroom.errors import PipelineError

    bootstrap = kafka_cluster.bootstrap_servers
    src, dst = new_topic(), new_topic()
    producer = build_producer(ClientConfig(bootstrap).producer())
    for i in range(20):
        producer.produce(src, value=f"v{i}".encode())
    producer.flush(30)
    df = spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", src).load()
    frame = sink_frame(df.withColumn("headers", F.lit(None).cast("array<struct<key:string,value:binary>>")), dst)
    frame = frame.withColumn("status", F.when(F.col("src_offset") == 7, "rejected").otherwise("ok"))
    frame = frame.withColumn("reason", F.when(F.col("src_offset") == 7, "no subject"))
    frame = frame.withColumn("fatal", F.col("src_offset") == 7)
    config = TransactionalSinkConfig(bootstrap, unique_name("sink"), retry_deadline_s=600)
    with pytest.raises(PipelineError, match=rf"cannot encrypt record {src}\[0\]@7: no subject"):
        write_exactly_once(frame, config)
    assert read_committed(bootstrap, dst, 1) == [], "the failing partition's transaction was aborted"


def test_the_jvm_sinks_copy_writes_every_record_as_it_is_once_and_the_python_sink_continues_it(
    spark: SparkSession, kafka_cluster: KafkaCluster, new_topic: Callable[..., str], unique_name: Callable[[str], str]
) -> None:
    from strongroom.spark.jobs.common import source_rows
    from strongroom.spark.jvm_sink import copy_settings, jvm_tasks

    bootstrap = kafka_cluster.bootstrap_servers
    src, dst = new_topic(partitions=3), new_topic(partitions=2)
    producer = build_producer(ClientConfig(bootstrap).producer())
    sent = {}
    now = int(time.time() * 1000) - 10_000  # old timestamps would age out under the topic's retention.ms
    for i in range(2500):  # more than one copy chunk per partition
        headers = [("h", f"{i}".encode()), ("empty", None)]
        producer.produce(src, key=f"k{i % 41}".encode(), value=f"v{i}".encode(), headers=headers, timestamp=now + i)
        sent[f"v{i}".encode()] = (f"k{i % 41}".encode(), headers, now + i)
    producer.produce(src, key=None, value=None, timestamp=now - 1)  # a tombstone without a key is copied too
    assert producer.flush(30) == 0

    def batch() -> DataFrame:
        return read_topic(spark, bootstrap, src)

    config = TransactionalSinkConfig(bootstrap, unique_name("jvm-copy"))
    tasks = jvm_tasks(spark, copy_settings(config, {src: dst}))
    first = write_exactly_once(source_rows(batch()), config, one_task_per_partition=True, tasks=tasks)
    assert sum(r.written for r in first) == 2501
    assert {s for r in first for s in r.statuses} == {"ok"}
    again = write_exactly_once(source_rows(batch()), config, one_task_per_partition=True, tasks=tasks)
    assert sum(r.written for r in again) == 0
    assert sum(r.replayed_skipped for r in again) == 2501
    # the Python sink (same transactional ids and group) continues where the JVM sink committed
    python = write_exactly_once(sink_frame(batch(), dst), config, one_task_per_partition=True)
    assert sum(r.written for r in python) == 0

    consumer = build_consumer(ClientConfig(bootstrap).consumer())
    consumer.assign([TopicPartition(dst, p, 0) for p in range(2)])
    copied = []
    while len(copied) < 2501:
        msgs = consumer.consume(500, 10)
        assert msgs, f"read {len(copied)} of 2501 records"
        copied += [m for m in msgs if m.error() is None]
    assert consumer.consume(10, 1) == []
    consumer.close()
    for msg in copied:
        if msg.value() is None:
            assert (msg.key(), msg.timestamp()[1]) == (None, now - 1)
            continue
        key, headers, timestamp = sent.pop(msg.value())
        assert (msg.key(), msg.headers(), msg.timestamp()[1]) == (key, headers, timestamp)
    assert sent == {}, "every record was copied exactly once"


def test_a_fenced_task_says_so_even_when_the_client_fails_without_naming_it(
    kafka_cluster: KafkaCluster, new_topic: Callable[..., str], unique_name: Callable[[str], str]
) -> None:
    """A fenced producer's flush can fail with a bare ``SystemError`` from the client. The task's abort on
    the way out still meets the fence, and that error is what names the cause (not a generic failure)."""
    from strongroom.spark.kafka_sink import FATAL_MARK, _PartitionTxn, _task_failure

    bootstrap = kafka_cluster.bootstrap_servers
    topic = new_topic(partitions=1)
    config = TransactionalSinkConfig(bootstrap, unique_name("fenced"))
    txn = _PartitionTxn(config, topic, 0)
    try:
        txn.produce(topic, b"k", b"v", None, None)
        same_id = {"transactional.id": config.transactional_id(topic, 0)}
        usurper = new_producer(config.client(), {**same_id, "transaction.timeout.ms": config.transaction_timeout_ms})
        usurper.init_transactions(60)  # the same transactional id, as a second task of the partition would
        txn.abort_if_open()
        failure = _task_failure(SystemError("<cimpl.Producer> returned NULL without setting an exception"),
                                {(topic, 0): txn})  # fmt: skip
        assert failure is not None
        assert str(failure).startswith(FATAL_MARK)
        assert "another producer took over its transactional id" in str(failure)
    finally:
        txn.close()


def test_the_jvm_sink_keeps_its_clients_between_batches_and_replaces_them_once_fenced(
    spark: SparkSession, kafka_cluster: KafkaCluster, new_topic: Callable[..., str], unique_name: Callable[[str], str]
) -> None:
    """The JVM sink keeps a partition's producer for the next micro-batch (TxnClients.java). When another
    producer took the transactional id meanwhile (here the Python sink, writing part of a partition), the
    kept one is found fenced before it sends a record, replaced, and the write goes on from the offset the
    other producer committed: every record once."""
    from strongroom.spark.jobs.common import source_rows
    from strongroom.spark.jvm_sink import close_idle_clients, copy_settings, jvm_tasks

    writer: Any = spark.sparkContext._jvm.io.strongroom.dataplane.sink.ExactlyOnceWriter  # type: ignore[union-attr]
    close_idle_clients(spark)  # the session is shared: start without clients of other tests
    bootstrap = kafka_cluster.bootstrap_servers
    src, dst = new_topic(partitions=2), new_topic(partitions=2)
    producer = build_producer(ClientConfig(bootstrap).producer())
    for i in range(600):
        producer.produce(src, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % 2)
    assert producer.flush(30) == 0
    where = {(r["partition"], r["offset"]): bytes(r["value"]) for r in read_topic(spark, bootstrap, src).collect()}

    def upto(end: int, partitions: tuple[int, ...] = (0, 1)) -> DataFrame:
        frame = read_topic(spark, bootstrap, src)
        return frame.filter((F.col("offset") < end) & F.col("partition").isin(*partitions))

    config = TransactionalSinkConfig(bootstrap, unique_name("jvm-kept"))
    tasks = jvm_tasks(spark, copy_settings(config, {src: dst}))
    first = write_exactly_once(source_rows(upto(100)), config, one_task_per_partition=True, tasks=tasks)
    assert sum(r.written for r in first) == 200
    assert writer.idleClients() == 2, "each partition's clients are kept for the next batch"

    # the Python sink takes partition 0's transactional id and writes its offsets 100-149
    other = write_exactly_once(sink_frame(upto(150, (0,)), dst), config, one_task_per_partition=True)
    assert [(r.src_partition, r.next_offset) for r in other] == [(0, 150)]

    created = writer.clientsCreated()
    second = write_exactly_once(source_rows(upto(200)), config, one_task_per_partition=True, tasks=tasks)
    assert writer.clientsCreated() - created == 1, "partition 1 used its kept clients; partition 0 new ones"
    by_partition = {r.src_partition: r for r in second}
    assert (by_partition[0].written, by_partition[0].replayed_skipped) == (50, 150)
    assert (by_partition[1].written, by_partition[1].replayed_skipped) == (100, 100)
    assert writer.idleClients() == 2, "the fenced producer was replaced, and the new one kept"

    expected = Counter(
        value
        for (partition, offset), value in where.items()
        if offset < 200 and not (partition == 0 and 100 <= offset < 150 and offset % 10 == 3)  # the policy drop
    )
    assert Counter(value for _, value in read_committed(bootstrap, dst, 2)) == expected, "every record once"
    close_idle_clients(spark, "strongroom-another-pipeline")
    assert writer.idleClients() == 2, "a pipeline that closes closes its own clients only"
    close_idle_clients(spark, config.group_id)
    assert writer.idleClients() == 0
