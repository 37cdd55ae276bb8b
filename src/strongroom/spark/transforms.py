"""Pure DataFrame transforms of the encrypt and decrypt pipelines (no I/O, no key management).

Inputs are DataFrames with Spark's Kafka source schema (``key, value, topic, partition, offset,
timestamp, timestampType, headers``) plus a small per-batch **keys frame** the job builds on the
driver; outputs are *sink frames* for :mod:`strongroom.spark.kafka_sink` (``src_*`` coordinates,
``emit``, ``topic``, ``key``, ``value``, ``headers``, ``timestamp_ms``) with a ``status`` and a
``reason`` column the job uses to apply its policies.

Keys frames are joined with ``broadcast``: the large side is never shuffled and the DEK column
exists only in the broadcast relation and in the rows being encrypted. Sessions of the pipelines run
with ``spark.io.encryption.enabled`` so broadcast blocks, spills and the driver→JVM transfer of the
keys frame never reach local disk in clear (see docs/pipelines.md).

Whole-value envelopes are sealed and opened in the JVM (:mod:`strongroom.spark.envelope_columns`).
JSON field mode runs in Python on Arrow batches (``mapInArrow``), with the envelope core's codec.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from strongroom.envelope.ids import FIELD_PREFIX, RECORD_HEADER_NAME, ValueMode
from strongroom.errors import ConfigError
from strongroom.rules import EncryptionRules, TopicRule
from strongroom.spark import envelope_columns as ec

if TYPE_CHECKING:
    import pyarrow as pa

    from strongroom.schemas.registry import RegistrySettings

#: Schema of the per-batch keys frame for encryption (one row per subject of the batch).
ENCRYPT_KEYS_SCHEMA = "subject string, key_id binary, dek binary, emit boolean"
#: Schema of the per-batch keys frame for decryption (one row per key id of the batch).
DECRYPT_KEYS_SCHEMA = "key_id binary, dek binary, key_state string, key_reason string"

# Row statuses (the job turns them into output, dead letters or errors).
OK = "ok"
PASSTHROUGH = "passthrough"  # tombstone or record that was never encrypted
DROPPED = "dropped"  # post-erasure policy 'drop' / erased subject in whole-value mode
REJECTED = "rejected"  # encrypt side: no subject, not JSON in field mode, too large
PENDING = "pending"  # decrypt side: key not arrived yet
ERASED = "erased"
FAILED = "failed"  # decrypt side: lost KEK, tampered, unknown version


def source_coordinates() -> list[Column]:
    """The Kafka source's coordinates as the sink wants them (columns need an active session)."""
    return [
        F.col("topic").alias("src_topic"),
        F.col("partition").alias("src_partition"),
        F.col("offset").alias("src_offset"),
    ]


def rule_condition(rules: EncryptionRules, index: int) -> Column:
    """Rows of ``rules.rules[index]``: it matches and no earlier rule does (first match wins)."""

    def matches(rule: TopicRule) -> Column:
        return F.col("topic").rlike(f"^(?:{rule.topic})$") if rule.pattern else F.col("topic") == F.lit(rule.topic)

    condition = matches(rules.rules[index])
    for earlier in rules.rules[:index]:
        condition = condition & ~matches(earlier)
    return condition


def subject_columns(rule: TopicRule) -> tuple[Column, Column]:
    """The record's data subject per the rule's subject source, and why it has none (the subject null), decided as
    the streaming engines and the client library decide (:func:`strongroom.clients.records.subject_of`): at most
    :data:`~strongroom.keys.records.MAX_SUBJECT_BYTES` of UTF-8; a JSON path read by the strict reader of field
    mode, a double written with its shortest digits. Spark's ``get_json_object`` is not used: it takes the first of
    two members of one name, reads single quotes and trailing text, turns bytes that are not UTF-8 into U+FFFD and
    prints a double with the JVM's ``Double.toString``, so its subject could differ from the engines' (and the key a
    record is sealed with, and what an erasure reaches)."""
    from strongroom.keys.records import MAX_SUBJECT_BYTES

    source = rule.subject
    where = source.describe()
    if source.source == "json":
        found = _json_subject_udf(source.path or "", where)(F.col("value"))
        return found["subject"], found["reason"]
    if source.source == "key":
        raw = F.col("key")
    else:
        matching = F.filter(F.col("headers"), lambda h: h["key"] == F.lit(source.header))
        raw = F.try_element_at(matching, F.lit(1))["value"]
    size = F.octet_length(raw)
    limit = f" bytes, more than {MAX_SUBJECT_BYTES})"
    too_long = F.concat(F.lit(f"no subject ({where} is "), size.cast("string"), F.lit(limit))
    reason = (
        F.when(raw.isNull() | (size == 0), F.lit(f"no subject ({where} is missing or empty)"))
        .when(size > MAX_SUBJECT_BYTES, too_long)
        .when(~F.is_valid_utf8(raw.cast("string")), F.lit(f"no subject ({where} is not UTF-8 text)"))
    )
    return F.when(reason.isNull(), raw.cast("string")), reason


def _json_subject_udf(path: str, where: str) -> Any:
    """The subject at a JSON path of the value, or why there is none: the engines' own reading, in Python."""

    def subject_at(value: bytes | None) -> tuple[str | None, str | None]:
        from strongroom.clients.records import NoSubject, json_path_subject

        found = json_path_subject(value, path, where)
        return (None, found.reason) if isinstance(found, NoSubject) else (found, None)

    return F.udf(subject_at, "struct<subject:string,reason:string>", useArrow=True)


def with_subject(batch: DataFrame, rule: TopicRule) -> DataFrame:
    """``batch`` with the ``subject`` of each record and the ``subject_reason`` of a record without one."""
    subject, reason = subject_columns(rule)
    return batch.withColumn("subject", subject).withColumn("subject_reason", reason)


def encrypt_frame(batch: DataFrame, keys: DataFrame, rule: TopicRule, *, max_value_bytes: int | Column) -> DataFrame:
    """Sink frame encrypting the records of ``batch`` (one rule's topics) under the subjects' keys.

    ``batch`` must already have the ``subject`` column (:func:`with_subject`); ``keys`` has a row per subject,
    or per source ``topic`` and subject (:data:`ENCRYPT_KEYS_SCHEMA`, with a leading topic). Records that cannot be
    encrypted get ``status = rejected`` and a ``reason``; their value in the frame is their original
    plaintext so the job can dead-letter them — the job never writes a rejected row to the output topic.
    ``max_value_bytes`` bounds the *encrypted* value (the output topic's limit minus record headroom).
    """
    rule.require_not_schema("encrypt_dataframe")
    out_topic = F.regexp_replace(F.lit(rule.output_topic), r"\$\(topic\)", F.col("topic"))
    # keys per (source topic, subject) when topics have their own KEKs (strongroom.keys.router), else per subject
    joined = batch.join(
        F.broadcast(keys), on=["topic", "subject"] if "topic" in keys.columns else "subject", how="left"
    )
    if rule.mode == "fields":
        joined = joined.withColumn("json_ok", _is_json_object(F.col("value")))
    framed = joined.withColumn("reason", _encrypt_reason(rule)).withColumn("out_topic", out_topic)
    framed = framed.withColumn("status", _encrypt_status())
    if rule.mode == "value":
        sealed = ec.seal_whole_value(
            F.col("value"),
            F.col("dek"),
            F.col("key_id"),
            F.col("out_topic"),
            F.col("subject").cast("binary"),
            rule.profile,
        )
        framed = framed.withColumn("sealed", F.when(F.col("status") == OK, sealed))
        mode = ValueMode.WHOLE_VALUE
    else:
        framed = _seal_fields(framed, rule)
        mode = ValueMode.JSON_FIELDS
    limit = max_value_bytes if isinstance(max_value_bytes, Column) else F.lit(max_value_bytes)
    return _encrypted_sink_rows(_reject_too_large(framed, limit), mode)


def _encrypt_reason(rule: TopicRule) -> Column:
    """Why a record cannot be sealed (null: it can, or it is a tombstone)."""
    reason = (
        F.when(F.col("value").isNull(), F.lit(None))
        .when(F.col("subject").isNull(), F.col("subject_reason"))  # with_subject gives a reason to every null subject
        .when(F.col("key_id").isNull(), F.lit("no key was provided for the subject"))
    )
    if rule.mode == "fields":
        reason = reason.when(~F.col("json_ok"), F.lit("value is not JSON: not a JSON object (field mode)"))
    return reason


def _encrypt_status() -> Column:
    """Tombstones pass through, records with a reason are rejected, ``emit = false`` drops, the rest is sealed."""
    return (
        F.when(F.col("value").isNull(), F.lit(PASSTHROUGH))
        .when(F.col("reason").isNotNull(), F.lit(REJECTED))
        .when(~F.col("emit"), F.lit(DROPPED))
        .otherwise(F.lit(OK))
    )


def _reject_too_large(framed: DataFrame, limit: Column) -> DataFrame:
    """An ``ok`` row whose sealed value exceeds the output topic's limit is rejected, saying by how much."""
    too_large = (F.col("status") == OK) & (F.length("sealed") > limit)
    return framed.withColumn(
        "reason",
        F.when(
            too_large,
            F.concat(F.lit("encrypted value would be "), F.length("sealed").cast("string"),
                     F.lit(" bytes, above the output topic's limit of "), limit.cast("string"), F.lit(" bytes")),
        ).otherwise(F.col("reason")),
    ).withColumn("status", F.when(too_large, F.lit(REJECTED)).otherwise(F.col("status")))  # fmt: skip


def _encrypted_sink_rows(framed: DataFrame, mode: ValueMode) -> DataFrame:
    """The sink's columns: never the plaintext for an ok row; rejected rows keep theirs for the dead-letter topic."""
    return framed.select(
        *source_coordinates(),
        (F.col("status").isin(OK, PASSTHROUGH)).alias("emit"),
        F.col("out_topic").alias("topic"),
        "key",
        F.when(F.col("status") == OK, F.col("sealed")).otherwise(F.col("value")).alias("value"),
        F.when(F.col("status") == OK, ec.with_marker(F.col("headers"), mode))
        .otherwise(F.col("headers"))
        .alias("headers"),
        F.unix_millis("timestamp").alias("timestamp_ms"),
        "status",
        "reason",
    )


def _is_json_object(value: Column) -> Column:
    """True for a value that parses as a JSON object (Jackson); the Python codec re-checks."""
    text = F.ltrim(value.cast("string"))
    return F.coalesce(text.startswith("{") & F.get_json_object(text, "$").isNotNull(), F.lit(False))


#: Columns carried through the Python field sealer unchanged (the DEK is consumed, never returned).
_FIELD_PASSTHROUGH = ("topic", "partition", "offset", "key", "value", "headers", "timestamp", "out_topic", "subject",
                      "status", "reason")  # fmt: skip


def _seal_fields(framed: DataFrame, rule: TopicRule) -> DataFrame:
    """Encrypt the rule's JSON fields in Python on Arrow batches; errors become a rejection reason.

    One narrow ``mapInArrow`` stage: the rows keep their partitioning (no shuffle of plaintext or keys),
    the pass-through columns are handed back as the same Arrow arrays, and the DEK column goes in but
    not out.
    """
    inputs = framed.select(*_FIELD_PASSTHROUGH, "dek", "key_id")
    out_schema = inputs.drop("dek", "key_id").schema.add("sealed", "binary").add("seal_error", "string")
    sealer = _field_sealer(tuple(rule.fields), int(rule.profile))
    return (
        inputs.mapInArrow(sealer, out_schema)
        .withColumn("status", F.when(F.col("seal_error").isNotNull(), F.lit(REJECTED)).otherwise(F.col("status")))
        .withColumn("reason", F.coalesce(F.col("reason"), F.col("seal_error")))
    )


def _field_sealer(paths: tuple[str, ...], profile: int) -> Any:
    def seal_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        from strongroom.envelope import AadProfile, RecordContext, SubjectKeyRef, encrypt_json_fields
        from strongroom.envelope.jsonpath import FieldRules
        from strongroom.errors import EnvelopeError

        rules = FieldRules(paths)
        aad_profile = AadProfile(profile)
        refs: dict[bytes, SubjectKeyRef] = {}
        for batch in batches:
            values, deks, key_ids = (batch.column(n).to_pylist() for n in ("value", "dek", "key_id"))
            topics, subjects, statuses = (batch.column(n).to_pylist() for n in ("out_topic", "subject", "status"))
            sealed: list[bytes | None] = []
            errors: list[str | None] = []
            for i in range(batch.num_rows):
                if statuses[i] != OK:
                    sealed.append(None)
                    errors.append(None)
                    continue
                ref = refs.get(key_ids[i]) or refs.setdefault(key_ids[i], SubjectKeyRef(key_ids[i]))
                ctx = RecordContext(topics[i], subjects[i].encode("utf-8"), aad_profile)
                try:
                    sealed.append(encrypt_json_fields(values[i], rules, deks[i], ref, ctx))
                    errors.append(None)
                except EnvelopeError as exc:
                    sealed.append(None)
                    errors.append(exc.problem)
            columns = [batch.column(name) for name in _FIELD_PASSTHROUGH]
            columns += [pa.array(sealed, pa.binary()), pa.array(errors, pa.string())]
            yield pa.RecordBatch.from_arrays(columns, names=[*_FIELD_PASSTHROUGH, "sealed", "seal_error"])

    return seal_batches


def field_key_id(value: Column) -> Column:
    """The key id of the first ``sr1:`` field of a JSON value, read in the JVM.

    The first 21 envelope bytes (magic … profile, holding the 16-byte key id at offset 4) are exactly
    the first 28 base64 characters of the field string, so no JSON parse is needed to find the key.
    """
    b64 = F.regexp_extract(value.cast("string"), '"' + FIELD_PREFIX + r"([A-Za-z0-9+/]{28})", 1)
    return F.when(F.length(b64) == 28, F.substring(F.unbase64(b64), ec.KEY_ID_POS, 16))


# --------------------------------------------------------------------------------------------- decrypt

#: Key states a decrypt keys frame may carry.
KEY_AVAILABLE, KEY_ERASED, KEY_PENDING, KEY_LOST = "available", "erased", "pending", "lost"
#: The key exists but belongs to another subject than the record names (moved or forged record).
KEY_FOREIGN = "foreign"


def envelope_key_id_column(rule: TopicRule) -> Column:
    """The subject key id a record was sealed under (null when the record carries no envelope)."""
    if rule.mode == "fields":
        return field_key_id(F.col("value"))
    return F.when(ec.is_subject_key_envelope(F.col("value")), ec.envelope_key_id(F.col("value")))


def marker_column() -> Column:
    """The value of the ``strongroom.enc`` header (null when absent)."""
    matching = F.filter(
        F.coalesce(F.col("headers"), F.array().cast(ec.headers_type())), lambda h: h["key"] == F.lit(RECORD_HEADER_NAME)
    )
    return F.try_element_at(matching, F.lit(1))["value"]


def with_key_ids(batch: DataFrame, rule: TopicRule) -> DataFrame:
    """Add ``subject``, ``marker`` and ``key_id`` (what the driver needs to look keys up)."""
    return (
        batch.withColumn("subject", subject_columns(rule)[0])
        .withColumn("marker", marker_column())
        .withColumn("key_id", envelope_key_id_column(rule))
    )


def decrypt_frame(
    batch: DataFrame,
    keys: DataFrame,
    rule: TopicRule,
    *,
    logical_topic: Column,
    output_topic: Column,
    erased_value: str = "drop",
    encrypted_only: bool = True,
    schema_registry: RegistrySettings | None = None,
) -> DataFrame:
    """Sink frame opening the records of ``batch`` (from :func:`with_key_ids`) with the batch's keys.

    ``logical_topic`` is the topic the ciphertext is bound to (the physical topic, or its logical name
    for mirrored topics). Statuses: ``ok``; ``passthrough`` (tombstones and records without an
    envelope); ``pending`` (key not arrived); ``erased`` (whole value: dropped, or kept with a null
    value when ``erased_value == "null"``; fields: the encrypted fields become null and the record is
    ``ok``); ``failed`` with a reason (lost KEK, tampered or moved, unknown version; with
    ``encrypted_only``, a record without the marker header: plaintext or downgraded).
    A failed, pending or dropped row never carries plaintext. Schema mode needs ``schema_registry`` (and
    ``batch`` from :func:`strongroom.spark.schema_frames.with_schema_key_ids`).
    """
    joined = batch.join(F.broadcast(keys), on="key_id", how="left")
    reason = _decrypt_reason(rule, encrypted_only)
    status = _decrypt_status(rule, reason)
    framed = joined.withColumn("reason", reason).withColumn("status", status).withColumn("logical_topic", logical_topic)
    if rule.mode == "schema":
        from strongroom.spark.schema_frames import schema_opener

        if schema_registry is None:
            raise ConfigError(
                f"the rule for {rule.topic!r} is in schema mode but no schema registry was given",
                hint="pass schema_registry=RegistrySettings(url=...)",
            )
        framed = _open_fields(framed, schema_opener(rule, encrypted_only, schema_registry), encrypted_only)
    elif rule.mode == "value":
        framed = _open_whole_values(framed)
    else:
        framed = _open_fields(framed, _field_opener(tuple(rule.fields), encrypted_only), encrypted_only)
    return _decrypted_sink_rows(framed, output_topic, erased_value)


def _no_envelope(fields: bool) -> Column:
    """A record without a marker and without a key id in its bytes: nothing to open."""
    no_envelope = F.col("key_id").isNull() & F.col("marker").isNull()
    if fields:
        # The key id comes from the raw bytes; an ``sr1:`` string spelt with JSON escapes hides from that,
        # so an unmarked document that has any escape goes to the Python opener, which reads it parsed.
        no_envelope = no_envelope & ~F.col("value").contains(F.lit(b"\\u"))
    return no_envelope


def _decrypt_reason(rule: TopicRule, encrypted_only: bool) -> Column:
    """Why a record fails before it is opened (null: it does not fail here)."""
    fields = rule.mode != "value"  # JSON fields or a schema record's fields
    mode = {"value": ValueMode.WHOLE_VALUE, "fields": ValueMode.JSON_FIELDS, "schema": ValueMode.SCHEMA_FIELDS}
    expected_marker = bytes((1, mode[rule.mode]))
    unmarked = F.col("marker").isNull() & F.col("value").isNotNull()
    return (
        F.when(F.col("value").isNull(), F.lit(None))
        .when(F.lit(encrypted_only) & unmarked,
              F.lit(f"record has no {RECORD_HEADER_NAME} marker header; this reader accepts encrypted records only "
                    "(a plaintext or downgraded record)"))
        .when(_no_envelope(fields), F.lit(None))
        .when(F.col("marker").isNotNull() & (F.col("marker") != F.lit(expected_marker)),
              F.concat(F.lit("unknown or unexpected strongroom.enc header 0x"), F.hex("marker"),
                       F.lit(f" (this reader expects 0x{expected_marker.hex()}); upgrade strongroom or fix the rule")))
        .when(F.col("key_id").isNull() & F.lit(not fields),
              F.lit("record is marked encrypted but its value is not a readable envelope"))
        .when(F.col("key_state") == KEY_LOST, F.coalesce(F.col("key_reason"), F.lit("the key's KEK is lost")))
        .when(F.col("key_state") == KEY_FOREIGN, F.col("key_reason"))
    )  # fmt: skip


def _decrypt_status(rule: TopicRule, reason: Column) -> Column:
    """A record's status before it is opened (opening can still turn ``ok`` into ``failed``)."""
    fields = rule.mode != "value"
    # Field mode: a record whose document holds none of the rule's fields sealed has no envelope at all;
    # the Python opener passes it through (unmarked) or checks no rule path holds plaintext (marked).
    no_fields_sealed = F.lit(fields) & F.col("key_id").isNull()
    return (
        F.when(F.col("value").isNull(), F.lit(PASSTHROUGH))
        .when(reason.isNotNull(), F.lit(FAILED))
        .when(_no_envelope(fields), F.lit(PASSTHROUGH))
        .when(no_fields_sealed, F.lit(OK))
        .when(F.col("key_state").isNull() | (F.col("key_state") == KEY_PENDING), F.lit(PENDING))
        .when((F.col("key_state") == KEY_ERASED) & F.lit(rule.mode == "value"), F.lit(ERASED))
        .otherwise(F.lit(OK))
    )


def _open_whole_values(framed: DataFrame) -> DataFrame:
    """Whole-value mode: open ``ok`` rows in the JVM; one that does not open fails its integrity check."""
    opened = ec.open_whole_value(F.col("value"), F.col("dek"), F.col("logical_topic"), F.col("subject").cast("binary"))
    framed = framed.withColumn("opened", F.when(F.col("status") == OK, opened))
    not_opened = (F.col("status") == OK) & F.col("opened").isNull()
    return framed.withColumn("status", F.when(not_opened, F.lit(FAILED)).otherwise(F.col("status"))).withColumn(
        "reason",
        F.when(
            (F.col("status") == FAILED) & F.col("reason").isNull(),
            F.concat(F.lit("integrity check failed: the record was altered, or moved from another topic or subject "
                           "(bound to topic "), F.col("logical_topic"), F.lit(")")),
        ).otherwise(F.col("reason")),
    )  # fmt: skip


def _decrypted_sink_rows(framed: DataFrame, output_topic: Column, erased_value: str) -> DataFrame:
    """The sink's columns, plus what the jobs need to dead-letter or hold a row (never plaintext for those)."""
    erased_keep = F.lit(erased_value == "null") & (F.col("status") == ERASED)
    value = (
        F.when(F.col("status") == OK, F.col("opened"))
        .when(F.col("status") == PASSTHROUGH, F.col("value"))
        .otherwise(F.lit(None).cast("binary"))
    )
    return framed.select(
        *source_coordinates(),
        ((F.col("status").isin(OK, PASSTHROUGH)) | erased_keep).alias("emit"),
        output_topic.alias("topic"),
        "key",
        value.alias("value"),
        ec.without_marker(F.col("headers")).alias("headers"),
        F.unix_millis("timestamp").alias("timestamp_ms"),
        "status",
        "reason",
        "subject",
        "key_id",
        F.col("value").alias("ciphertext"),
        F.col("headers").alias("orig_headers"),
    )


#: Columns a field opener (JSON fields, schema fields) passes through, besides the DEK and key state it consumes.
FIELD_OPEN_PASSTHROUGH = ("topic", "partition", "offset", "key", "value", "headers", "timestamp", "subject",
                           "key_id", "status", "reason", "logical_topic")  # fmt: skip


def _open_fields(framed: DataFrame, opener: Any, encrypted_only: bool) -> DataFrame:
    """Open the ``ok`` rows with ``opener`` (Arrow batches in, ``opened`` and ``open_error`` added)."""
    inputs = framed.select(*FIELD_OPEN_PASSTHROUGH, "dek", "key_state", "marker")
    out_schema = inputs.drop("dek", "key_state", "marker").schema.add("opened", "binary").add("open_error", "string")
    out = inputs.mapInArrow(opener, out_schema)
    # The opener passes an unmarked document that holds no sealed field on unchanged (opened = value).
    unmarked_plain = (F.col("status") == OK) & F.col("open_error").isNull() & F.col("key_id").isNull()
    return out.withColumn(
        "status",
        F.when(F.col("open_error").isNotNull(), F.lit(FAILED))
        .when(unmarked_plain & (F.col("opened") == F.col("value")) & F.lit(not encrypted_only), F.lit(PASSTHROUGH))
        .otherwise(F.col("status")),
    ).withColumn("reason", F.coalesce(F.col("reason"), F.col("open_error")))


def _field_opener(paths: tuple[str, ...], encrypted_only: bool) -> Any:
    def open_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        from strongroom.envelope import RecordContext, decrypt_json_fields
        from strongroom.envelope.json_fields import FieldDocument
        from strongroom.envelope.jsonpath import FieldRules
        from strongroom.errors import EnvelopeError

        expected = FieldRules(paths)
        for batch in batches:
            values, deks, key_ids, states = (
                batch.column(n).to_pylist() for n in ("value", "dek", "key_id", "key_state")
            )
            topics, subjects, statuses = (batch.column(n).to_pylist() for n in ("logical_topic", "subject", "status"))
            markers = batch.column("marker").to_pylist()
            opened: list[bytes | None] = []
            errors: list[str | None] = []
            for i in range(batch.num_rows):
                if statuses[i] == OK and markers[i] is None and key_ids[i] is None and not encrypted_only:
                    # Unmarked, and its raw bytes show no sealed field (but a JSON escape): read parsed, it is
                    # passed on unchanged unless a rule field holds an ``sr1:`` string spelt with escapes,
                    # which FieldDocument refuses.
                    try:
                        hidden = FieldDocument(values[i], expected).sealed
                        opened.append(None if hidden else values[i])
                        errors.append("an unmarked record holds sealed fields no raw check found" if hidden else None)
                    except EnvelopeError as exc:
                        opened.append(None)
                        errors.append(f"{exc.problem} ({exc.hint})")
                    continue
                if statuses[i] != OK:
                    opened.append(None)
                    errors.append(None)
                    continue
                dek = None if states[i] == KEY_ERASED else deks[i]
                key_id = key_ids[i]

                def lookup(ref: Any, dek: bytes | None = dek, key_id: bytes = key_id) -> bytes | None:
                    if ref.key_id != key_id:
                        raise _MixedKeys(ref.key_id)
                    return dek

                ctx = RecordContext(topics[i], (subjects[i] or "").encode("utf-8"))
                try:
                    opened.append(
                        decrypt_json_fields(values[i], lookup, ctx, on_erased="null", expect_encrypted=expected)
                    )
                    errors.append(None)
                except EnvelopeError as exc:
                    opened.append(None)
                    errors.append(f"{exc.problem} ({exc.hint})")
                except _MixedKeys:
                    opened.append(None)
                    errors.append("the record's fields were sealed under different subject keys")
            columns = [batch.column(name) for name in FIELD_OPEN_PASSTHROUGH]
            columns += [pa.array(opened, pa.binary()), pa.array(errors, pa.string())]
            yield pa.RecordBatch.from_arrays(columns, names=[*FIELD_OPEN_PASSTHROUGH, "opened", "open_error"])

    return open_batches


class _MixedKeys(Exception):
    pass
