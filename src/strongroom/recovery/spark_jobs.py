"""The Spark side of recovery: read partitions, cut key prefixes in the JVM, classify, aggregate.

Shape: one thin I/O shell (:func:`read_partitions`, Spark's Kafka source with explicit per-partition
start and end offsets, headers included) and pure DataFrame → DataFrame transforms. Python sees
only *distinct* key prefixes (one per DEK window or per subject key) and small per-partition
aggregates: the per-record work — header lookup, prefix cut, the join with the verdicts, counts,
runs — is Spark SQL in the JVM.

The verdict table (prefix → status, KEK label) is built on the driver by
:class:`~strongroom.recovery.checker.AvailabilityChecker` and joined back as a broadcast.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, IntegerType, StringType, StructField, StructType

from strongroom.kafka.config import ClientConfig
from strongroom.recovery.dependency import KeyVerdict
from strongroom.recovery.formats.base import RecordFormat

#: Status ranks: a record's status is the worst of its prefixes'.
STATUS_RANK: Final = {"readable": 0, "erased": 0, "corrupt": 1, "lost": 2}
#: How many offsets / ranges per partition are brought back to the driver as examples.
EXAMPLES: Final = 20

VERDICT_SCHEMA: Final = StructType(
    [
        StructField("prefix", BinaryType(), False),
        StructField("rank", IntegerType(), False),
        StructField("label", StringType(), False),
        StructField("subject_key", StringType(), True),
    ]
)


# ---------------------------------------------------------------------------------------- I/O shell
def kafka_source_options(client_config: ClientConfig) -> dict[str, str]:
    """Spark Kafka source options (Java client names) from strongroom's librdkafka client config.

    Translated: bootstrap servers, ``security.protocol``, SASL PLAIN/SCRAM user and password, and a
    PEM CA file. Anything else in ``--command-config`` applies to the librdkafka clients only.
    """
    extra = dict(client_config.extra or {})
    options = {"kafka.bootstrap.servers": client_config.bootstrap_servers}
    if "security.protocol" in extra:
        options["kafka.security.protocol"] = str(extra["security.protocol"]).upper()
    mechanism = str(extra.get("sasl.mechanism") or extra.get("sasl.mechanisms") or "")
    if mechanism:
        options["kafka.sasl.mechanism"] = mechanism.upper()
        user, password = extra.get("sasl.username"), extra.get("sasl.password")
        if user is not None and password is not None:
            module = (
                "org.apache.kafka.common.security.scram.ScramLoginModule"
                if mechanism.upper().startswith("SCRAM")
                else "org.apache.kafka.common.security.plain.PlainLoginModule"
            )
            options["kafka.sasl.jaas.config"] = f'{module} required username="{user}" password="{password}";'
    if "ssl.ca.location" in extra:
        options["kafka.ssl.truststore.type"] = "PEM"
        options["kafka.ssl.truststore.location"] = str(extra["ssl.ca.location"])
    return options


def read_partitions(
    spark: SparkSession,
    source_options: Mapping[str, str],
    topic: str,
    ranges: Mapping[int, tuple[int, int]],
) -> DataFrame:
    """Records of ``topic`` with ``start <= offset < end`` per partition (read_committed), headers included."""
    starting = {topic: {str(p): start for p, (start, _) in ranges.items()}}
    ending = {topic: {str(p): end for p, (_, end) in ranges.items()}}
    reader = spark.read.format("kafka")
    for key, value in source_options.items():
        reader = reader.option(key, value)
    return (
        reader.option("assign", json.dumps({topic: sorted(ranges)}))
        .option("startingOffsets", json.dumps(starting))
        .option("endingOffsets", json.dumps(ending))
        .option("includeHeaders", "true")
        .option("failOnDataLoss", "false")  # compaction and transaction markers leave gaps
        .option("kafka.isolation.level", "read_committed")
        .load()
    )


# ---------------------------------------------------------------------------------------- transforms
def with_key_prefixes(records: DataFrame, fmt: RecordFormat) -> DataFrame:
    """partition, offset, kind, prefixes — the record cut of ``fmt``, evaluated in the JVM.

    Only ``headers`` and the key-reference prefix of ``value`` survive this projection.
    """
    kind = F.expr(fmt.spark_kind_sql())
    prefixes = F.expr(fmt.spark_prefixes_sql())
    return records.select(
        "partition",
        "offset",
        kind.alias("kind"),
        F.when(kind == F.lit("encrypted"), prefixes).alias("prefixes"),
    )


def distinct_prefixes(cut: DataFrame) -> list[bytes]:
    """Every distinct key prefix (collected to the driver: one per DEK window or subject key)."""
    rows = cut.select(F.explode("prefixes").alias("prefix")).distinct().collect()
    return [bytes(r["prefix"]) for r in rows]


def verdict_frame(spark: SparkSession, verdicts: Mapping[bytes, KeyVerdict]) -> DataFrame:
    """The driver's verdicts as a small DataFrame to broadcast: prefix → rank, KEK label, subject key."""
    rows = []
    for prefix, verdict in verdicts.items():
        dep = verdict.dependency
        label = dep.label if dep is not None else "(corrupt key reference)"
        subject = dep.subject_key_id.hex() if dep is not None and dep.subject_key_id is not None else None
        rows.append((prefix, STATUS_RANK[verdict.status.value], label, subject))
    return spark.createDataFrame(rows, VERDICT_SCHEMA)


def classify(cut: DataFrame, verdicts: DataFrame) -> DataFrame:
    """One row per record: partition, offset, kind, status (readable/lost/corrupt/malformed), keks, subject keys.

    Plain records and tombstones are readable; a record is lost when any key it needs is lost.
    """
    exploded = cut.select("partition", "offset", "kind", F.explode_outer("prefixes").alias("prefix"))
    joined = exploded.join(F.broadcast(verdicts), on="prefix", how="left")
    per_record = joined.groupBy("partition", "offset", "kind").agg(
        F.max(F.coalesce("rank", F.lit(0))).alias("rank"),
        F.sort_array(F.collect_set("label")).alias("keks"),
        F.collect_set("subject_key").alias("subject_keys"),
    )
    status = (
        F.when(F.col("kind") == "malformed", F.lit("malformed"))
        .when(F.col("rank") == STATUS_RANK["lost"], F.lit("lost"))
        .when(F.col("rank") == STATUS_RANK["corrupt"], F.lit("corrupt"))
        .otherwise(F.lit("readable"))
    )
    return per_record.select("partition", "offset", "kind", status.alias("status"), "keks", "subject_keys")


def _count_if(condition: Column) -> Column:
    return F.sum(F.when(condition, 1).otherwise(0)).cast("long")


def verification_summary(classified: DataFrame, search_boundaries: Mapping[int, int]) -> list[dict[str, Any]]:
    """Per partition: counts by status, the true boundary, stragglers above the searched one, examples.

    The true boundary is 1 + the last lost offset; *stragglers* are lost records at or above the
    boundary the binary search returned; *readable below* are records a prefix deletion would remove
    although they are still readable (the collateral).
    """
    spark = classified.sparkSession
    bounds = spark.createDataFrame(
        [(int(p), int(b)) for p, b in search_boundaries.items()], "partition int, searched long"
    )
    lost = F.col("status") == "lost"
    straggler = lost & (F.col("offset") >= F.col("searched"))
    per_partition = Window.partitionBy("partition")
    data = classified.join(F.broadcast(bounds), on="partition", how="left").withColumn(
        "last_lost", F.max(F.when(lost, F.col("offset"))).over(per_partition)
    )
    summary = data.groupBy("partition").agg(
        F.count("*").alias("records"),
        _count_if(F.col("status") == "readable").alias("readable"),
        _count_if(lost).alias("lost"),
        _count_if(lost & (F.size("subject_keys") > 0)).alias("lost_subject_key_records"),
        _count_if(F.col("status") == "corrupt").alias("corrupt"),
        _count_if(F.col("status") == "malformed").alias("malformed"),
        _count_if(F.col("kind") == "plain").alias("plain"),
        _count_if(F.col("kind") == "tombstone").alias("tombstones"),
        F.min(F.when(lost, F.col("offset"))).alias("first_lost"),
        F.max("last_lost").alias("last_lost"),
        _count_if(straggler).alias("stragglers"),
        F.slice(F.sort_array(F.collect_list(F.when(straggler, F.col("offset")))), 1, EXAMPLES).alias(
            "straggler_offsets"
        ),
        _count_if((F.col("status") == "readable") & (F.col("offset") < F.col("last_lost"))).alias("readable_below"),
        F.slice(
            F.sort_array(F.collect_list(F.when(F.col("status").isin("corrupt", "malformed"), F.col("offset")))),
            1,
            EXAMPLES,
        ).alias("unreadable_other_offsets"),
    )
    return [row.asDict(recursive=True) for row in summary.orderBy("partition").collect()]


def lost_ranges(classified: DataFrame, limit: int = EXAMPLES) -> dict[int, dict[str, Any]]:
    """Maximal runs of consecutive lost records per partition (gaps and islands): count and the first ``limit``."""
    ordered = Window.partitionBy("partition").orderBy("offset")
    numbered = classified.withColumn("rn_all", F.row_number().over(ordered))
    lost = numbered.where(F.col("status") == "lost").withColumn("rn_lost", F.row_number().over(ordered))
    islands = lost.groupBy("partition", (F.col("rn_all") - F.col("rn_lost")).alias("island")).agg(
        F.min("offset").alias("first"), F.max("offset").alias("last"), F.count("*").alias("records")
    )
    ranked = islands.withColumn("i", F.row_number().over(Window.partitionBy("partition").orderBy("first")))
    per_partition = ranked.groupBy("partition").agg(
        F.count("*").alias("runs"),
        F.sort_array(F.collect_list(F.when(F.col("i") <= limit, F.array("first", "last", "records")))).alias(
            "examples"
        ),
    )
    return {
        int(r["partition"]): {"runs": int(r["runs"]), "ranges": [list(map(int, x)) for x in r["examples"]]}
        for r in per_partition.collect()
    }


def lost_by_key(classified: DataFrame, limit: int = 50) -> dict[str, Any]:
    """Lost records per KEK label and per subject key (scattered loss: which subjects, how many records)."""
    lost = classified.where(F.col("status") == "lost")
    by_kek = lost.select("partition", F.explode("keks").alias("kek")).groupBy("partition", "kek").count()
    keks = [(int(r["partition"]), str(r["kek"]), int(r["count"])) for r in by_kek.collect()]
    subjects = (
        lost.select(F.explode("subject_keys").alias("subject_key"), "partition", "offset")
        .groupBy("subject_key")
        .agg(
            F.count("*").alias("records"),
            F.min("offset").alias("first"),
            F.max("offset").alias("last"),
            F.sort_array(F.collect_set("partition")).alias("partitions"),
        )
    )
    total_subjects = subjects.count()
    top = subjects.orderBy(F.desc("records"), "subject_key").limit(limit).collect()
    return {
        "by_kek": keks,
        "subject_keys": total_subjects,
        "subject_examples": [r.asDict(recursive=True) for r in top],
    }


def dependency_runs(classified_labels: DataFrame) -> DataFrame:
    """Inventory runs: for each (partition, label), maximal runs of consecutive records depending on it.

    ``classified_labels`` has one row per (partition, offset, label); a record that depends on
    several KEKs (JSON fields) appears once per KEK. Any record not depending on a label ends that
    label's run.
    """
    distinct = classified_labels.select("partition", "offset", "label").distinct()
    ordered_records = Window.partitionBy("partition").orderBy("offset")
    ranked = distinct.withColumn("rank_all", F.dense_rank().over(ordered_records))
    per_label = Window.partitionBy("partition", "label").orderBy("offset")
    islands = ranked.withColumn("island", F.col("rank_all") - F.row_number().over(per_label))
    return islands.groupBy("partition", "label", "island").agg(
        F.min("offset").alias("first"), F.max("offset").alias("last"), F.count("*").alias("records")
    )


def labelled(cut: DataFrame, labels: DataFrame) -> DataFrame:
    """One row per (record, dependency label); plain/tombstone/malformed records get a label of their own."""
    exploded = cut.select("partition", "offset", "kind", F.explode_outer("prefixes").alias("prefix"))
    joined = exploded.join(F.broadcast(labels.select("prefix", "label")), on="prefix", how="left")
    label = F.when(F.col("kind") == "encrypted", F.coalesce(F.col("label"), F.lit("(no encrypted field)"))).otherwise(
        F.concat(F.lit("("), F.col("kind"), F.lit(")"))
    )
    return joined.select("partition", "offset", label.alias("label"))
