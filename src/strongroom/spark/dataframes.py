"""The DataFrame API: encrypt and decrypt DataFrames with Spark's Kafka source schema in any Spark job.

For batch users (``spark.read.format("kafka")``, Parquet exports of topics, tests)::

    from strongroom.spark.dataframes import encrypt_dataframe, decrypt_dataframe

    encrypted = encrypt_dataframe(df, rules, keys=KeyCache(KeyManager(client, kms)))
    encrypted.write.format("kafka").option("kafka.bootstrap.servers", ...).save()

    opened = decrypt_dataframe(spark.read.format("kafka")..., rules, keys=KeyTable(client, kms).open())

Both run one small Spark job at call time to find the frame's subjects (encrypt) or key ids (decrypt) —
cache the input if it is expensive to compute — settle the keys on the driver, and return a **lazy**
frame sealed or opened in the JVM (whole values) or on Arrow batches (JSON fields), byte-compatible
with the streaming pipelines and the client library. ``encrypt_dataframe`` creates missing subject
keys and flushes them to the keys topic **before it returns**, so the frame can be written anywhere.
It also charges the keys' usage limits (strongroom.keys.usage) with the seals the frame makes, once:
computing the frame a second time seals every record again, uncharged, so write it once (or persist
the encrypted frame first and reuse that).

Fail closed: a record that cannot be encrypted (no subject, not a JSON object in field mode, too
large) or decrypted (lost KEK, tampered or moved, no key) fails the Spark job that computes the frame
with an error naming topic, partition and offset — unless the caller chooses to drop it
(``on_reject="drop"``, ``on_failure="skip"``) or, for decryption, keep it with a null value and its
``reason`` (``on_failure="keep"``). Plaintext never appears in a row that should hold ciphertext.

The keys frame holds DEKs and is broadcast: run the session with ``spark.io.encryption.enabled=true``
(as the pipelines do) so broadcast blocks and spills never reach local disk in clear.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from strongroom.clients.sealing import RuleCodec
from strongroom.envelope.errors import SubjectErased
from strongroom.errors import ConfigError, KeysError, KmsError, PipelineError
from strongroom.kms.errors import KmsUnavailable
from strongroom.policies import FrameOnErased, FrameOnFailure, FrameOnReject, choose
from strongroom.rules import EncryptionRules, TopicRule
from strongroom.spark.keyservice import require_secure_channel
from strongroom.spark.schema_frames import with_schema_key_ids
from strongroom.spark.transforms import (
    DECRYPT_KEYS_SCHEMA,
    ENCRYPT_KEYS_SCHEMA,
    ERASED,
    FAILED,
    KEY_AVAILABLE,
    KEY_ERASED,
    KEY_FOREIGN,
    KEY_LOST,
    KEY_PENDING,
    PENDING,
    REJECTED,
    decrypt_frame,
    encrypt_frame,
    marker_column,
    rule_condition,
    with_key_ids,
    with_subject,
)

if TYPE_CHECKING:
    from strongroom.keys.cache import KeyCache
    from strongroom.keys.manager import KeyManager, KeyOrDecision
    from strongroom.keys.router import KeyRouter
    from strongroom.keys.table import KeyTable
    from strongroom.schemas.registry import RegistrySettings

log = logging.getLogger(__name__)

#: Columns of Spark's Kafka source the transforms read (``headers`` is added empty when absent).
SOURCE_REQUIRED = ("key", "value", "topic", "partition", "offset", "timestamp")
#: How a failure caused by a key that cannot be unwrapped (lost or disabled KEK) begins.
LOST_KEY_REASON = "subject key"
#: ``decrypt_dataframe`` status of a record whose key is not in the keys topic (no buffering in batch).
MISSING_KEY = "missing-key"
#: No limit on encrypted value sizes unless the caller names one (Kafka enforces its own at write time).
UNLIMITED = 2**31 - 1


# ---------------------------------------------------------------------------- shared with the pipelines
def encrypt_key_rows(decided: Mapping[str, KeyOrDecision]) -> list[tuple[str, bytes, bytes, bool]]:
    """``(subject, key id, DEK, emit)`` per subject: its key, the post-erasure policy's never-stored key,
    or ``emit=False`` (the policy drops the record; the zero key is never used)."""
    from strongroom.keys.manager import PolicyDecision

    rows = []
    for subject, outcome in decided.items():
        if isinstance(outcome, PolicyDecision):
            if outcome.drop or outcome.key is None:
                rows.append((subject, b"\x00" * 16, b"\x00" * 32, False))
            else:
                rows.append((subject, outcome.key.key_id, outcome.key.key, True))
        else:
            rows.append((subject, outcome.key_id, outcome.key, True))
    return rows


def classify_key(table: KeyTable, key_id: bytes, subject: str | None) -> tuple[bytes, bytes | None, str, str | None]:
    """``(key id, DEK or None, state, reason)`` of one key id: available, erased, not arrived, or lost
    (its wrapping key cannot be unwrapped). A KMS outage (:class:`KmsUnavailable`) is raised, never
    reported as a lost key."""
    try:
        dek = table.lookup(key_id, subject)
    except SubjectErased:
        return (key_id, None, KEY_ERASED, None)
    except KmsUnavailable:
        raise
    except (KmsError, KeysError) as exc:
        return (key_id, None, KEY_LOST, f"{LOST_KEY_REASON} {key_id.hex()} cannot be unwrapped: {exc}")
    if dek is None:
        return (key_id, None, KEY_PENDING, None)
    owner = table.owner(key_id)
    if subject is not None and owner is not None and owner != subject:
        # The record claims a subject this key is not theirs: moved or forged. Its key is not handed out.
        return (key_id, None, KEY_FOREIGN, f"key {key_id.hex()} belongs to another subject than the record names")
    return (key_id, dek, KEY_AVAILABLE, None)


# ---------------------------------------------------------------------------- the API
def encrypt_dataframe(
    df: DataFrame,
    rules: EncryptionRules | Mapping[str, object],
    *,
    keys: KeyCache | KeyManager | KeyRouter,
    max_value_bytes: int | Mapping[str, int] | None = None,
    on_reject: FrameOnReject | str = FrameOnReject.FAIL,
    allow_unencrypted_spark_channel: bool = False,
) -> DataFrame:
    """Encrypt a DataFrame with Spark's Kafka source schema; returns ``topic, key, value, headers, timestamp``.

    ``topic`` is each record's output topic per its rule, so the result can go straight to
    ``df.write.format("kafka")``; headers gain the strongroom marker; keys and timestamps are kept.
    Records the post-erasure policy drops are left out. ``max_value_bytes`` (one limit, or one per
    output topic) rejects a record whose encrypted value would not fit.
    ``on_reject="fail"`` (default) makes computing the frame fail on a record that cannot be
    encrypted, naming it; ``"drop"`` leaves such records out.
    """
    on_reject = choose("on_reject", on_reject, FrameOnReject, PipelineError)
    require_secure_channel(df.sparkSession, allow_unencrypted=allow_unencrypted_spark_channel)
    rules = _rules(rules, "encrypt_dataframe")
    source, parts, seen = _split(df, rules, with_subject, "topic", "subject", weight=_seal_count)
    keys_frame = _encrypt_keys_frame(source.sparkSession, keys, seen)
    frames = []
    for part, rule in zip(parts, rules.rules, strict=True):
        out_topic = F.regexp_replace(F.lit(rule.output_topic), r"\$\(topic\)", F.col("topic"))
        frames.append(encrypt_frame(part, keys_frame, rule, max_value_bytes=_limit(max_value_bytes, out_topic)))
    frame = _union(frames)
    rejected = F.col("status") == REJECTED
    if on_reject == FrameOnReject.DROP:
        frame = frame.filter(~rejected)
    else:
        failure = F.raise_error(_describe("cannot encrypt", "on_reject='drop'"))
        frame = frame.withColumn("value", F.when(rejected, failure).otherwise(F.col("value")))
    return frame.filter(F.col("emit") | rejected).select(
        "topic", "key", "value", "headers", F.timestamp_millis("timestamp_ms").alias("timestamp")
    )


def _encrypt_keys_frame(spark: SparkSession, keys: KeyCache | KeyManager | KeyRouter, seen: list[Row]) -> DataFrame:
    """The keys of the frame's subjects, settled on the driver: per subject, or per source topic and subject
    when ``keys`` is a :class:`~strongroom.keys.router.KeyRouter` (each topic's rule names its KEK). Each key's
    usage limit is charged the seals the frame makes with it (``seen``'s ``seals``), once: computing the
    returned frame again seals again, uncharged, so write it once (or persist it first)."""
    from strongroom.keys.manager import KeyManager
    from strongroom.keys.router import KeyRouter

    if not isinstance(keys, KeyRouter):
        seals: dict[str, int] = {}
        for row in seen:
            if row["subject"] is not None:
                seals[row["subject"]] = seals.get(row["subject"], 0) + row["seals"]
        subjects = sorted(seals)
        if not subjects:
            decided = {}
        elif isinstance(keys, KeyManager):
            decided = keys.charge(keys.get_or_create(subjects), seals)
        else:
            decided = keys.get_or_create(subjects, seals=seals)
        return spark.createDataFrame(encrypt_key_rows(decided), ENCRYPT_KEYS_SCHEMA)
    wanted: dict[str, list[str]] = {}
    charged: dict[tuple[str, str], int] = {}
    for row in seen:
        if row["subject"] is not None:
            wanted.setdefault(row["topic"], []).append(row["subject"])
            charged[(row["topic"], row["subject"])] = row["seals"]
    found = keys.get_or_create_by_topic(wanted, seals=charged) if wanted else {}
    rows = [
        (topic, *row)
        for topic, subjects in wanted.items()
        for row in encrypt_key_rows({subject: found[(topic, subject)] for subject in subjects})
    ]
    return spark.createDataFrame(rows, "topic string, " + ENCRYPT_KEYS_SCHEMA)


def decrypt_dataframe(
    df: DataFrame,
    rules: EncryptionRules | Mapping[str, object],
    *,
    keys: KeyTable,
    topic_map: Mapping[str, str] | None = None,
    on_failure: FrameOnFailure | str = FrameOnFailure.FAIL,
    erased: FrameOnErased | str = FrameOnErased.KEEP,
    encrypted_only: bool = True,
    allow_unencrypted_spark_channel: bool = False,
    schema_registry: RegistrySettings | None = None,
) -> DataFrame:
    """Decrypt a DataFrame with Spark's Kafka source schema.

    Returns ``topic, partition, offset, key, value, headers, timestamp, status, reason`` (headers without
    the strongroom marker). ``status``: ``ok``; ``passthrough`` (tombstones, records never encrypted);
    ``erased`` (whole value of an erased subject: value null; in field mode the encrypted fields become
    null and the record is ``ok``); ``failed`` (lost KEK, tampered or moved, unknown format) and
    ``missing-key`` (the keys topic has no key for it), both with a ``reason`` and a null value.
    ``on_failure``: ``fail`` (default) makes computing the frame fail on such a record, naming it;
    ``keep`` returns it; ``skip`` leaves it out. ``erased="drop"`` leaves erased whole values out.
    ``topic_map`` maps physical topics to the logical topic the ciphertext is bound to (mirrors).
    ``encrypted_only`` (default) makes a record without the ``strongroom.enc`` marker ``failed``
    (plaintext or downgraded, docs/threat-model.md); ``False`` passes it through.
    ``schema_registry``: where schema-mode rules read their records' schemas (docs/schema-aware.md); the
    executors ask it themselves (its settings travel in the closure). A schema record's tagged fields of
    an erased subject become null or empty and the record is ``ok``, as in field mode.
    """
    on_failure = choose("on_failure", on_failure, FrameOnFailure, PipelineError)
    erased = choose("erased", erased, FrameOnErased, PipelineError)
    require_secure_channel(df.sparkSession, allow_unencrypted=allow_unencrypted_spark_channel)
    rules = _rules(rules, "decrypt_dataframe", schema_registry)

    def annotate(part: DataFrame, rule: TopicRule) -> DataFrame:
        if rule.mode == "schema":
            assert schema_registry is not None
            return with_schema_key_ids(part, rule, schema_registry, marker_column())
        return with_key_ids(part, rule)

    source, parts, seen = _split(df, rules, annotate, "key_id", "subject")
    keys_frame = _decrypt_keys_frame(source.sparkSession, keys, seen)
    logical = _logical_topic(topic_map or {})
    opened = [
        decrypt_frame(
            part,
            keys_frame,
            rule,
            logical_topic=logical,
            output_topic=F.col("topic"),
            erased_value="null",
            encrypted_only=encrypted_only,
            schema_registry=schema_registry,
        )
        for part, rule in zip(parts, rules.rules, strict=True)
    ]
    frame = _apply_decrypt_policies(_union(opened), on_failure, erased)
    return frame.select(
        F.col("src_topic").alias("topic"),
        F.col("src_partition").alias("partition"),
        F.col("src_offset").alias("offset"),
        "key",
        "value",
        "headers",
        F.timestamp_millis("timestamp_ms").alias("timestamp"),
        "status",
        "reason",
    )


def _decrypt_keys_frame(spark: SparkSession, keys: KeyTable, seen: list[Row]) -> DataFrame:
    """Every ``(key id, subject)`` the frame needs, classified on the driver (the keys table caught up first)."""
    keys.wait_caught_up()
    pairs = sorted({(bytes(r["key_id"]), r["subject"]) for r in seen if r["key_id"] is not None}, key=repr)
    keys.warm(kid for kid, _ in pairs)
    classified = [classify_key(keys, kid, subject) for kid, subject in pairs]
    return spark.createDataFrame(classified, DECRYPT_KEYS_SCHEMA)


def _logical_topic(topic_map: Mapping[str, str]) -> Column:
    """The topic each record's ciphertext is bound to: its own, or the logical name of a mirrored topic."""
    logical = F.col("topic")
    for physical, name in topic_map.items():
        logical = F.when(F.col("topic") == physical, F.lit(name)).otherwise(logical)
    return logical


def _apply_decrypt_policies(frame: DataFrame, on_failure: FrameOnFailure, erased: FrameOnErased) -> DataFrame:
    """A record whose key never arrived is ``missing-key``; failed ones fail, are kept or skipped; erased
    whole values are kept (null) or dropped."""
    missing = F.col("status") == PENDING
    no_key = "no key for this record in the keys topic (never written, or not replicated here)"
    frame = frame.withColumn("reason", F.when(missing, F.lit(no_key)).otherwise(F.col("reason"))).withColumn(
        "status", F.when(missing, F.lit(MISSING_KEY)).otherwise(F.col("status"))
    )  # reason first: it tests the status before the rename
    bad = F.col("status").isin(FAILED, MISSING_KEY)
    if on_failure == FrameOnFailure.SKIP:
        frame = frame.filter(~bad)
    elif on_failure == FrameOnFailure.FAIL:
        failure = F.raise_error(_describe("cannot decrypt", "on_failure='keep' or 'skip'"))
        frame = frame.withColumn("value", F.when(bad, failure).otherwise(F.col("value")))
    if erased == FrameOnErased.DROP:
        frame = frame.filter(F.col("status") != ERASED)
    return frame


# ---------------------------------------------------------------------------- helpers
def _rules(
    rules: EncryptionRules | Mapping[str, object], where: str, registry: RegistrySettings | None = None
) -> EncryptionRules:
    """The parsed rules; schema-mode rules only where the function reads them, and with a registry."""
    parsed = rules if isinstance(rules, EncryptionRules) else EncryptionRules.parse_obj_or_fail(dict(rules))
    for rule in parsed.rules:
        if where == "decrypt_dataframe" and rule.mode == "schema" and registry is None:
            raise ConfigError(
                f"the rule for {rule.topic!r} is in schema mode but no schema registry was given",
                hint="pass schema_registry=RegistrySettings(url=...) to decrypt_dataframe",
            )
        if where != "decrypt_dataframe":
            rule.require_not_schema(where)
    return parsed


def _split(
    df: DataFrame,
    rules: EncryptionRules,
    annotate: Callable[[DataFrame, TopicRule], DataFrame],
    *columns: str,
    weight: Callable[[TopicRule], Column] | None = None,
) -> tuple[DataFrame, list[DataFrame], list[Row]]:
    """The checked source, its rows per rule (annotated), and the distinct ``columns`` over all of them
    (one Spark job), with the sum of ``weight`` over each one's rows as ``seals`` when given. Refuses
    frames whose topics some rule does not cover."""
    source = _source(df)
    _warn_without_io_encryption(source)
    parts = [annotate(source.filter(rule_condition(rules, i)), rule) for i, rule in enumerate(rules.rules)]
    if weight is None:
        seen = _union([p.select(*columns) for p in parts]).distinct().collect()
    else:
        weighed = [p.select(*columns, weight(rule).alias("seals")) for p, rule in zip(parts, rules.rules, strict=True)]
        seen = _union(weighed).groupBy(*columns).agg(F.sum("seals").cast("long").alias("seals")).collect()
    _check_covered(source, rules)
    return source, parts, seen


def _source(df: DataFrame) -> DataFrame:
    missing = [c for c in SOURCE_REQUIRED if c not in df.columns]
    if missing:
        raise PipelineError(
            f"the DataFrame lacks the Kafka source columns {', '.join(missing)} (it has {', '.join(df.columns)})",
            hint="pass a frame read with spark.read.format('kafka') or with the same columns",
        )
    if "headers" not in df.columns:
        df = df.withColumn("headers", F.array().cast("array<struct<key:string,value:binary>>"))
    return df.withColumn("key", F.col("key").cast("binary")).withColumn("value", F.col("value").cast("binary"))


def _check_covered(df: DataFrame, rules: EncryptionRules) -> None:
    covered = F.lit(False)
    for i in range(len(rules.rules)):
        covered = covered | rule_condition(rules, i)
    stray = [r["topic"] for r in df.filter(~covered).select("topic").distinct().limit(5).collect()]
    if stray:
        raise PipelineError(
            f"no rule matches the frame's topics {', '.join(sorted(stray))}",
            hint="add rules for them, or filter the frame to the topics the rules cover",
        )


def _seal_count(rule: TopicRule) -> Column:
    """How many seals encrypting each record of ``rule`` makes (what it charges its key's usage limit):
    one for a whole value; one per selected value in field mode, counted in the record when a path has
    ``[*]`` (:meth:`~strongroom.clients.sealing.RuleCodec.seal_count`)."""
    value = F.col("value")
    if rule.mode != "fields":
        return F.when(value.isNull(), 0).otherwise(1)
    codec = RuleCodec(rule)
    assert codec.fields is not None
    fixed = codec.fields.fixed_value_count
    if fixed is not None:
        return F.when(value.isNull(), 0).otherwise(fixed)
    return F.udf(lambda v: 0 if v is None else codec.seal_count(v), "int")(value)


def _union(frames: Iterable[DataFrame]) -> DataFrame:
    it = iter(frames)
    out = next(it)
    for frame in it:
        out = out.unionByName(frame)
    return out


def _limit(max_value_bytes: int | Mapping[str, int] | None, out_topic: Column) -> int | Column:
    if max_value_bytes is None:
        return UNLIMITED
    if isinstance(max_value_bytes, int):
        return max_value_bytes
    limits = F.create_map(*[x for topic, n in sorted(max_value_bytes.items()) for x in (F.lit(topic), F.lit(n))])
    return F.coalesce(limits[out_topic], F.lit(UNLIMITED))


def _describe(what: str, remedy: str) -> Column:
    return F.concat(
        F.lit(f"[strongroom] {what} "), F.col("src_topic"), F.lit("["), F.col("src_partition").cast("string"),
        F.lit("]@"), F.col("src_offset").cast("string"), F.lit(": "), F.coalesce(F.col("reason"), F.lit("?")),
        F.lit(f" (to go on without it: {remedy})"),
    )  # fmt: skip


def _warn_without_io_encryption(df: DataFrame) -> None:
    if df.sparkSession.conf.get("spark.io.encryption.enabled", "false") != "true":
        log.warning(
            "spark.io.encryption.enabled is off: the broadcast keys frame and spills may reach local disk in "
            "clear; start the session with it on (strongroom.spark.jobs.common.PIPELINE_SPARK_CONF)"
        )
