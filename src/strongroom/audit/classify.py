"""The scrub's classification: a pure DataFrame transform from (ledger, current log, cluster facts)
to one status per record. No I/O: the scrub job (:mod:`strongroom.audit.scrub`) reads the inputs and
writes the outputs; unit tests feed small DataFrames.

Every ledgered record gets exactly one status:

``ok``
    the log holds the same content (key, value, headers and timestamp hashes) at that offset.
``altered``
    same offset, same leader epoch, different content: the bytes changed in place.
``diverged``
    same offset, different leader epoch and content: the ledgered record was truncated away
    (unclean election, acks=1 loss) and the offset reused by a new leader.
``missing``
    no record at that offset although it is at or above the log start offset (or beyond the log
    end: truncated), whatever its timestamp or the topic's size: retention removes only what is
    below the log start. Compaction is the one legitimate cause and is checked first.
``expired-justified``
    below the log start offset, and explained by a recorded delete-records, by ``retention.ms``
    (the record's timestamp is older than now - retention.ms), by ``retention.bytes`` (the log
    still holds at least retention.bytes after it), or by compaction (a later record with the same
    key that is still in the log; a tombstone past ``delete.retention.ms``).
``expired-unjustified``
    below the log start offset with none of those explanations.

Records in the log but not in the ledger are ``unledgered``: not audited, reported as a coverage
gap, and flagged when they sit inside a range the ledger did read (offsets do not reappear in a
healthy log, so that is itself a sign of divergence).

Durable = ``ok`` + ``expired-justified``; audited = every ledgered status (see
:mod:`strongroom.audit.nines`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from strongroom.audit.kafka_state import config_number
from strongroom.audit.schema import RECORD_KINDS

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

OK = "ok"
ALTERED = "altered"
DIVERGED = "diverged"
MISSING = "missing"
EXPIRED_JUSTIFIED = "expired-justified"
EXPIRED_UNJUSTIFIED = "expired-unjustified"
UNLEDGERED = "unledgered"

AUDITED_STATUSES = (OK, MISSING, ALTERED, DIVERGED, EXPIRED_JUSTIFIED, EXPIRED_UNJUSTIFIED)
DURABLE_STATUSES = (OK, EXPIRED_JUSTIFIED)
ALL_STATUSES = (*AUDITED_STATUSES, UNLEDGERED)

#: Per partition, as measured by the scrub: ``log_start`` = log start offset (after the read),
#: ``log_end`` = end of what was read, ``log_bytes`` = estimated bytes now in the log.
PARTITIONS_DDL = "topic STRING, partition INT, log_start BIGINT, log_end BIGINT, log_bytes BIGINT"
#: Per topic, the effective configuration (-1 = unlimited).
TOPICS_DDL = "topic STRING, retention_ms BIGINT, retention_bytes BIGINT, delete_retention_ms BIGINT, compacted BOOLEAN"
#: Recorded delete-records: every offset below ``deleted_up_to`` was deleted on purpose.
DELETIONS_DDL = "topic STRING, partition INT, deleted_up_to BIGINT, deletion_op STRING"
#: Offset ranges the ledger read (merged), for flagging unledgered records inside them.
COVERAGE_DDL = "topic STRING, partition INT, range_start BIGINT, range_end BIGINT"

#: Columns of the classification's output.
FINDINGS_COLUMNS = (
    "topic",
    "partition",
    "offset",
    "status",
    "reason",
    "ledger_epoch",
    "log_epoch",
    "timestamp",
    "span_start",
    "changed",
    "ledger_copies",
)


#: A record's coordinates, and the columns compared between the ledger (``l_``) and the log (``r_``).
_KEYS = ["topic", "partition", "offset"]
_CONTENT = ["leader_epoch", "timestamp", "key_hash", "value_hash", "headers_hash", "key_len", "value_len"]


@dataclass(frozen=True)
class ClassifyParams:
    """Scalars of one scrub run."""

    now_ms: int
    span_ms: int = 3_600_000
    #: Tolerance for broker/auditor clock differences when checking retention.ms.
    clock_skew_ms: int = 5_000
    #: Compacted topics (only these pay for the same-key lookup).
    compacted_topics: frozenset[str] = field(default_factory=frozenset)


def _ns_eq(a: Column, b: Column) -> Column:
    return a.eqNullSafe(b)


def dedupe_ledger(ledger: DataFrame) -> DataFrame:
    """One row per (topic, partition, offset): the *first* capture (earliest ``read_at``) wins.

    A ledger can hold an offset twice when a capture restarted after a truncation re-read reused
    offsets, or when a producer delivery report and a capture both recorded it. The first capture
    is the one acknowledged before anything went wrong; ``ledger_copies`` keeps the evidence of the
    others.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    records = ledger.filter(F.col("kind").isin(*RECORD_KINDS)) if "kind" in ledger.columns else ledger
    # A window, not an aggregate: it shuffles by (topic, partition, offset) and sorts by read_at within,
    # which is also the order the sort-merge join with the log needs - one shuffle, one sort.
    key = Window.partitionBy("topic", "partition", "offset")
    return (
        records.withColumn("ledger_rank", F.row_number().over(key.orderBy("read_at", "leader_epoch")))
        .withColumn("ledger_copies", F.count(F.lit(1)).over(key))
        .filter(F.col("ledger_rank") == 1)
        .drop("ledger_rank")
    )


def classify(
    ledger: DataFrame,
    log: DataFrame,
    partitions: DataFrame,
    topics: DataFrame,
    deletions: DataFrame,
    params: ClassifyParams,
    coverage: DataFrame | None = None,
    retained_keys: DataFrame | None = None,
) -> DataFrame:
    """Classify every ledgered record (and every unledgered log record); see the module docstring.

    ``log`` may be a part of the current log (the scrub re-reads only suspect chunks);
    ``retained_keys`` (topic, partition, offset, key_hash) then names records known to be in the log
    outside it (ledgered records of chunks whose digests matched), which compaction's same-key check
    also counts as kept.
    """
    from pyspark.sql import functions as F

    led = dedupe_ledger(ledger).select(
        *_KEYS, *[F.col(c).alias(f"l_{c}") for c in _CONTENT], "ledger_copies", F.lit(True).alias("l_present")
    )
    cur = log.filter(F.col("kind").isin(*RECORD_KINDS)) if "kind" in log.columns else log
    cur = cur.select(*_KEYS, *[F.col(c).alias(f"r_{c}") for c in _CONTENT], F.lit(True).alias("r_present"))

    joined = led.join(cur, on=_KEYS, how="full_outer")
    joined = joined.join(F.broadcast(partitions), on=["topic", "partition"], how="left")
    joined = joined.join(F.broadcast(topics), on=["topic"], how="left")
    joined = joined.join(F.broadcast(deletions), on=["topic", "partition"], how="left")
    joined = _with_latest_key_offset(joined, cur, params.compacted_topics, retained_keys)
    joined = _with_coverage(joined, coverage)
    return joined.select(*_classified_columns(params))


def _with_latest_key_offset(
    joined: DataFrame, cur: DataFrame, compacted_topics: frozenset[str], retained_keys: DataFrame | None
) -> DataFrame:
    """``key_latest_offset``: the highest offset of each key among the records still in the log
    (compacted topics only). Compaction removes an older record only because a later one of its key is
    kept; a later record that is itself only in the ledger (lost too) explains nothing."""
    from pyspark.sql import functions as F

    if not compacted_topics:
        return joined.withColumn("key_latest_offset", F.lit(None).cast("bigint"))
    names = sorted(compacted_topics)
    key_rows = cur.filter(F.col("topic").isin(names) & F.col("r_key_hash").isNotNull()).select(
        "topic", "partition", "offset", F.col("r_key_hash").alias("key_hash")
    )
    if retained_keys is not None:
        key_rows = key_rows.unionByName(
            retained_keys.filter(F.col("topic").isin(names) & F.col("key_hash").isNotNull()).select(
                "topic", "partition", "offset", "key_hash"
            )
        )
    latest = key_rows.groupBy("topic", "partition", "key_hash").agg(F.max("offset").alias("key_latest_offset"))
    return joined.join(
        latest.withColumnRenamed("key_hash", "l_key_hash"), on=["topic", "partition", "l_key_hash"], how="left"
    )


def _with_coverage(joined: DataFrame, coverage: DataFrame | None) -> DataFrame:
    """``in_coverage``: an unledgered record inside a range the ledger did read."""
    from pyspark.sql import functions as F

    if coverage is None:
        return joined.withColumn("in_coverage", F.lit(False))
    cov = coverage.select(
        F.col("topic").alias("c_topic"),
        F.col("partition").alias("c_partition"),
        "range_start",
        "range_end",
    )
    cond = (
        (joined["topic"] == cov["c_topic"])
        & (joined["partition"] == cov["c_partition"])
        & joined["l_present"].isNull()
        & (joined["offset"] >= cov["range_start"])
        & (joined["offset"] < cov["range_end"])
    )
    return (
        joined.join(F.broadcast(cov), on=cond, how="left")
        .withColumn("in_coverage", F.col("range_start").isNotNull())
        .drop("c_topic", "c_partition", "range_start", "range_end")
    )


@dataclass(frozen=True)
class _Justified:
    """Why an absent ledgered record may be gone (each a boolean column), with the reason texts."""

    any: Column
    compaction: Column
    compaction_reason: Column
    expiry_reason: Column


def _justifications(params: ClassifyParams, off: Column) -> _Justified:
    """A recorded deletion, retention by time or size, or compaction (a later record with the same key
    still in the log, or a tombstone past ``delete.retention.ms``)."""
    from pyspark.sql import functions as F

    by_deletion = F.col("deleted_up_to").isNotNull() & (off < F.col("deleted_up_to"))
    by_time = (F.col("retention_ms") >= 0) & (
        F.col("l_timestamp") <= F.lit(params.now_ms) - F.col("retention_ms") + F.lit(params.clock_skew_ms)
    )
    by_size = (F.col("retention_bytes") >= 0) & (F.coalesce(F.col("log_bytes"), F.lit(0)) >= F.col("retention_bytes"))
    by_compaction_key = F.coalesce(F.col("compacted"), F.lit(False)) & (
        F.col("key_latest_offset").isNotNull() & (F.col("key_latest_offset") > off)
    )
    by_tombstone = (
        F.coalesce(F.col("compacted"), F.lit(False))
        & F.col("l_value_hash").isNull()
        & (F.col("l_timestamp") <= F.lit(params.now_ms) - F.col("delete_retention_ms") + F.lit(params.clock_skew_ms))
    )
    compaction = by_compaction_key | by_tombstone
    compaction_reason = F.when(
        by_compaction_key, F.concat(F.lit("compaction: same key at offset "), F.col("key_latest_offset"))
    ).otherwise(F.lit("compaction: tombstone older than delete.retention.ms"))
    expiry_reason = (
        F.when(by_deletion, F.concat(F.lit("recorded delete-records "), F.col("deletion_op")))
        .when(by_time, F.concat(F.lit("retention.ms="), F.col("retention_ms")))
        .when(by_size, F.concat(F.lit("retention.bytes="), F.col("retention_bytes")))
        .when(compaction, compaction_reason)
    )
    return _Justified(by_deletion | by_time | by_size | compaction, compaction, compaction_reason, expiry_reason)


def _classified_columns(params: ClassifyParams) -> list[Column]:
    """The verdict columns of the joined ledger/log rows. Longer than 60 lines on purpose: ``status`` and
    ``reason`` are one decision table written as two ``when`` chains that must stay in step, row by row;
    the justifications they share are built apart (:func:`_justifications`)."""
    from pyspark.sql import functions as F

    l_present = F.col("l_present").isNotNull()
    r_present = F.col("r_present").isNotNull()
    off = F.col("offset")

    changed_parts = [
        F.when(~_ns_eq(F.col("l_key_hash"), F.col("r_key_hash")), F.lit("key")),
        F.when(~_ns_eq(F.col("l_value_hash"), F.col("r_value_hash")), F.lit("value")),
        F.when(~_ns_eq(F.col("l_headers_hash"), F.col("r_headers_hash")), F.lit("headers")),
        F.when(~_ns_eq(F.col("l_timestamp"), F.col("r_timestamp")), F.lit("timestamp")),
    ]
    changed = F.concat_ws(",", *changed_parts)
    same_content = (
        _ns_eq(F.col("l_key_hash"), F.col("r_key_hash"))
        & _ns_eq(F.col("l_value_hash"), F.col("r_value_hash"))
        & _ns_eq(F.col("l_headers_hash"), F.col("r_headers_hash"))
        & _ns_eq(F.col("l_timestamp"), F.col("r_timestamp"))
    )
    epochs_known = F.col("l_leader_epoch").isNotNull() & F.col("r_leader_epoch").isNotNull()
    same_epoch = _ns_eq(F.col("l_leader_epoch"), F.col("r_leader_epoch"))

    log_start = F.coalesce(F.col("log_start"), F.lit(0))
    below_start = off < log_start
    beyond_end = F.col("log_end").isNotNull() & (off >= F.col("log_end"))

    why = _justifications(params, off)
    justified, compaction, compaction_reason, expiry_reason = (
        why.any,
        why.compaction,
        why.compaction_reason,
        why.expiry_reason,
    )

    status = (
        F.when(l_present & r_present & same_content, F.lit(OK))
        .when(l_present & r_present & epochs_known & ~same_epoch, F.lit(DIVERGED))
        .when(l_present & r_present, F.lit(ALTERED))
        .when(l_present & below_start & justified, F.lit(EXPIRED_JUSTIFIED))
        .when(l_present & below_start, F.lit(EXPIRED_UNJUSTIFIED))
        .when(l_present & compaction, F.lit(EXPIRED_JUSTIFIED))
        .when(l_present, F.lit(MISSING))
        .otherwise(F.lit(UNLEDGERED))
    )
    epoch_change = F.concat(F.lit("leader epoch "), F.col("l_leader_epoch"), F.lit(" -> "), F.col("r_leader_epoch"))
    reason = (
        F.when(l_present & r_present & same_content & ~same_epoch, F.concat(F.lit("same content, "), epoch_change))
        .when(l_present & r_present & same_content, F.lit(None).cast("string"))
        .when(l_present & r_present & epochs_known & ~same_epoch, F.concat(epoch_change, F.lit("; changed "), changed))
        .when(l_present & r_present, F.concat(F.lit("changed "), changed))
        .when(l_present & below_start & justified, expiry_reason)
        .when(
            l_present & below_start,
            F.concat(
                F.lit("below log start offset "),
                log_start,
                F.lit("; no recorded deletion, retention or compaction explains it"),
            ),
        )
        .when(l_present & compaction, compaction_reason)
        .when(
            l_present & beyond_end,
            F.concat(F.lit("beyond the log end offset "), F.col("log_end"), F.lit(" (truncated)")),
        )
        .when(l_present, F.concat(F.lit("absent although at or above log start offset "), log_start))
        .when(F.col("in_coverage"), F.lit("appeared inside a range the ledger had read"))
        .otherwise(F.lit("not captured by the ledger"))
    )
    timestamp = F.coalesce(F.col("l_timestamp"), F.col("r_timestamp"))
    span_start = F.floor(timestamp / F.lit(params.span_ms)) * F.lit(params.span_ms)
    return [
        F.col("topic"),
        F.col("partition"),
        off.alias("offset"),
        status.alias("status"),
        reason.alias("reason"),
        F.col("l_leader_epoch").alias("ledger_epoch"),
        F.col("r_leader_epoch").alias("log_epoch"),
        timestamp.alias("timestamp"),
        span_start.cast("bigint").alias("span_start"),
        F.when(l_present & r_present & ~same_content, changed).alias("changed"),
        F.coalesce(F.col("ledger_copies"), F.lit(0)).cast("int").alias("ledger_copies"),
    ]


def status_counts(classified: DataFrame) -> DataFrame:
    """Counts per (topic, partition, span_start, status) with the offset range of each group - the
    small table every score, the summary and the report are computed from."""
    from pyspark.sql import functions as F

    return classified.groupBy("topic", "partition", "span_start", "status").agg(
        F.count(F.lit(1)).alias("records"),
        F.min("offset").alias("min_offset"),
        F.max("offset").alias("max_offset"),
        F.sum(F.when(F.col("reason") == F.lit("appeared inside a range the ledger had read"), 1).otherwise(0)).alias(
            "in_coverage"
        ),
    )


def not_ok(classified: DataFrame) -> DataFrame:
    """The findings worth keeping row by row: every audited record that is not ``ok``."""
    from pyspark.sql import functions as F

    return classified.filter(~F.col("status").isin(OK, UNLEDGERED))


def topics_rows(
    configs: Iterable[tuple[str, dict[str, str]]],
) -> list[tuple[str, int, int, int, bool]]:
    """Rows for :data:`TOPICS_DDL` from effective topic configs (missing values = Kafka defaults)."""
    rows = []
    for topic, config in configs:

        def num(key: str, default: int, cfg: dict[str, str] = config) -> int:
            return config_number(cfg, key, default)

        policy = config.get("cleanup.policy", "delete")
        retention_ms = num("retention.ms", 604_800_000) if "delete" in policy else -1
        retention_bytes = num("retention.bytes", -1) if "delete" in policy else -1
        rows.append((topic, retention_ms, retention_bytes, num("delete.retention.ms", 86_400_000), "compact" in policy))
    return rows
