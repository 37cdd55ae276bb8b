"""Spark Structured Streaming through Spark's own Kafka connector, with headers, both directions."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from confluent_kafka import TopicPartition
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from strongroom.kafka.config import ClientConfig
from strongroom.kafka.transport import build_consumer, build_producer
from strongroom.testing.kafka_cluster import KafkaCluster


def test_stream_kafka_to_kafka_with_headers(
    spark: SparkSession, kafka_cluster: KafkaCluster, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    bootstrap = kafka_cluster.bootstrap_servers
    source, sink = new_topic(partitions=2), new_topic(partitions=2)
    producer = build_producer(ClientConfig(bootstrap).producer())
    for i in range(50):
        producer.produce(source, key=f"k{i}".encode(), value=f"v{i}".encode(), headers=[("trace", f"t{i}".encode())])
    producer.flush(30)

    stream = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
        .load()
    )
    upper = stream.select(
        "key",
        F.upper(F.col("value").cast("string")).cast("binary").alias("value"),
        F.concat(F.col("headers"), F.array(F.struct(F.lit("via").alias("key"), F.lit(b"spark").alias("value")))).alias(
            "headers"
        ),
    )
    query = (
        upper.writeStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", sink)
        .option("checkpointLocation", str(tmp_path / "chk"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None

    consumer = build_consumer(ClientConfig(bootstrap).consumer())
    consumer.assign([TopicPartition(sink, p, 0) for p in range(2)])
    seen: dict[bytes, tuple[bytes, dict[str, bytes]]] = {}
    for _ in range(200):
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            seen[msg.key()] = (msg.value(), dict(msg.headers() or []))
        if len(seen) == 50:
            break
    consumer.close()
    assert len(seen) == 50
    value, headers = seen[b"k7"]
    assert value == b"V7"
    assert headers == {"trace": b"t7", "via": b"spark"}


def test_batch_read_exposes_kafka_columns(
    spark: SparkSession, kafka_cluster: KafkaCluster, new_topic: Callable[..., str]
) -> None:
    topic = new_topic()
    producer = build_producer(ClientConfig(kafka_cluster.bootstrap_servers).producer())
    for i in range(5):
        producer.produce(topic, value=f"x{i}".encode())
    producer.flush(30)
    df = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", kafka_cluster.bootstrap_servers)
        .option("subscribe", topic)
        .load()
    )
    rows = df.orderBy("offset").select("partition", "offset", F.col("value").cast("string").alias("v")).collect()
    assert [(r.partition, r.offset, r.v) for r in rows] == [(0, i, f"x{i}") for i in range(5)]
