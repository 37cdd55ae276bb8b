"""Schema mode in the DataFrame API: what ``decrypt_dataframe`` needs for schema-registry records.

A schema record's subject (when the rule takes it from a field) and the key its sealed fields name can
only be read with its schema, so both come from a Python pass over Arrow batches that reads each record
with the client library's code (:class:`strongroom.clients.sealing.RuleCodec`, its registry client per
executor task, cached by schema id): :func:`with_schema_key_ids` adds ``subject``, ``marker`` and
``key_id`` as :func:`strongroom.spark.transforms.with_key_ids` does for the other modes. Opening is a
second pass (:func:`schema_opener`) with the key the driver classified for that key id; a record
whose fields name several keys fails (as field mode does). The registry's settings (its credentials
too) travel to the executors in the closure, as the Kafka client properties do.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame

from strongroom.rules import TopicRule

if TYPE_CHECKING:
    import pyarrow as pa

    from strongroom.schemas.registry import RegistrySettings


def with_schema_key_ids(batch: DataFrame, rule: TopicRule, registry: RegistrySettings, marker: Any) -> DataFrame:
    """``batch`` with ``subject``, ``marker`` and ``key_id`` (the first subject key the record's sealed
    fields name; null when none is sealed or the record cannot be read: opening names the reason)."""
    from pyspark.sql.types import BinaryType, StringType, StructField, StructType

    inputs = batch.withColumn("marker", marker)
    # a new StructType: the frame's own (cached) schema object must not change
    out_schema = StructType(
        [*inputs.schema.fields, StructField("subject", StringType()), StructField("key_id", BinaryType())]
    )
    return inputs.mapInArrow(_key_reader(rule, registry), out_schema)


def _key_reader(rule: TopicRule, registry: RegistrySettings) -> Any:
    def read_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        from strongroom.clients.sealing import RuleCodec
        from strongroom.envelope.keyref import SubjectKeyRef
        from strongroom.errors import EnvelopeError
        from strongroom.schemas.registry import SchemaRegistry

        codec = RuleCodec(rule, schema_registry=SchemaRegistry(registry))
        assert codec.schema is not None
        for batch in batches:
            keys, values = batch.column("key").to_pylist(), batch.column("value").to_pylist()
            headers = batch.column("headers").to_pylist()
            subjects: list[str | None] = []
            key_ids: list[bytes | None] = []
            for key, value, pairs in zip(keys, values, headers, strict=True):
                listed = [(h["key"], h["value"]) for h in pairs or []]
                subject = codec.subject(key, value, listed) if value is not None else None
                subjects.append(subject if isinstance(subject, str) else None)
                try:
                    refs = codec.schema.key_refs(value, sealed_only=True) if value is not None else []
                except EnvelopeError:
                    refs = []  # opening names the reason
                key_ids.append(next((r.key_id for r in refs if isinstance(r, SubjectKeyRef)), None))
            columns = [*batch.columns, pa.array(subjects, pa.string()), pa.array(key_ids, pa.binary())]
            yield pa.RecordBatch.from_arrays(columns, names=[*batch.schema.names, "subject", "key_id"])

    return read_batches


def schema_opener(rule: TopicRule, encrypted_only: bool, registry: RegistrySettings) -> Any:
    """The Arrow opener of schema records for :func:`strongroom.spark.transforms.decrypt_frame`."""

    def open_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        from strongroom.clients.sealing import RuleCodec
        from strongroom.envelope import RecordContext
        from strongroom.errors import EnvelopeError
        from strongroom.schemas.registry import SchemaRegistry
        from strongroom.spark.transforms import FIELD_OPEN_PASSTHROUGH, KEY_ERASED, OK

        codec = RuleCodec(rule, schema_registry=SchemaRegistry(registry))
        fields = codec.schema
        assert fields is not None
        for batch in batches:
            names = ("value", "dek", "key_id", "key_state", "logical_topic", "subject", "status", "marker")
            values, deks, key_ids, states, topics, subjects, statuses, markers = (
                batch.column(n).to_pylist() for n in names
            )
            opened: list[bytes | None] = []
            errors: list[str | None] = []
            for i in range(batch.num_rows):
                if statuses[i] != OK:
                    opened.append(None)
                    errors.append(None)
                    continue
                try:
                    if markers[i] is None and key_ids[i] is None and not encrypted_only:
                        # unmarked and no sealed field found: passed on unless a tagged field looks sealed
                        hidden = fields.holds_envelopes(values[i])
                        opened.append(None if hidden else values[i])
                        errors.append("an unmarked record holds sealed fields" if hidden else None)
                        continue
                    dek = None if states[i] == KEY_ERASED else deks[i]
                    ctx = RecordContext(topics[i], (subjects[i] or "").encode("utf-8"))
                    plain, _ = fields.open(values[i], _one_key(key_ids[i], dek), ctx)
                    opened.append(plain)
                    errors.append(None)
                except EnvelopeError as exc:
                    opened.append(None)
                    errors.append(f"{type(exc).__name__}: {exc.problem}")
            columns = [batch.column(name) for name in FIELD_OPEN_PASSTHROUGH]
            columns += [pa.array(opened, pa.binary()), pa.array(errors, pa.string())]
            yield pa.RecordBatch.from_arrays(columns, names=[*FIELD_OPEN_PASSTHROUGH, "opened", "open_error"])

    return open_batches


def _one_key(key_id: bytes | None, dek: bytes | None) -> Any:
    """The record's key: the one its first sealed field names; a field under another key fails the record."""
    from strongroom.envelope.errors import IntegrityError

    def lookup(ref: Any) -> bytes | None:
        if getattr(ref, "key_id", None) != key_id:
            raise IntegrityError("the record's fields were sealed under different subject keys")
        return dek

    return lookup
