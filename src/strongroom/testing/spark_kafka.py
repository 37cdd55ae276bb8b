"""A topic as a Spark batch frame, read as the tests read their inputs and outputs: every record from the
earliest offset to the latest, with its headers. Shared by the integration tests of the sink, the pipelines
and the DataFrame API."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def read_topic(spark: SparkSession, bootstrap: str, topic: str) -> DataFrame:
    """Spark's Kafka source over ``topic`` as a batch (its default offsets: earliest to latest), headers included."""
    return (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("includeHeaders", "true")
        .load()
    )
