"""The JVM engine of the exactly-once sink: the records stay in the executor JVM.

The Python engine (:mod:`strongroom.spark.kafka_sink` with the row transforms) hands every record to a
Python worker as Arrow. The JVM engine hands the micro-batch's frame (``DataFrame._jdf``) and a settings
document to the data plane's ``io.strongroom.dataplane.sink.ExactlyOnceWriter`` (java/), which runs one
task per source partition over Spark's internal rows, seals each record with the Java codec and writes it
with the Java ``KafkaProducer``, and returns one small summary per task. The protocol is the Python
sink's, so the two engines fence each other and either can continue the other's checkpoint:

* the same transactional id per (app, source topic, source partition) and the same consumer group,
  whose committed offset the task reads after the fencing; rows below it are skipped;
* the new source offset goes into the transaction with the records; no per-record callback: a record
  that was not delivered makes the commit fail, and the write is retried from the committed offsets;
* a fatal record, a fenced producer or a failing transform ends the task with the sink's
  :data:`~strongroom.spark.kafka_sink.FATAL_MARK` message, which the driver never retries.

The decisions per record (subject, size limits, rejection reasons, dead letters, the post-erasure
drop) are resolved here, on the driver, into plain values per source topic, so both engines say the
same words. The settings carry no key: the tasks ask the driver's key service (pinned TLS and token,
:mod:`strongroom.spark.keyservice`) once per chunk of records, exactly as the Python tasks do.

It runs the encrypt and decrypt pipelines (Kafka output; whole values, JSON fields and the tagged fields of
Avro schema-registry records; the subject from the key, a header or a field path); anything else is
refused before the query starts (:func:`unsupported`), naming ``--engine python``. It also has a plain
exactly-once copy (:func:`copy_settings`: no key, no rule), which the pipeline benchmark's passthrough runs
to measure the sink itself.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from strongroom.errors import ConfigError, StackError
from strongroom.keys.records import MAX_SUBJECT_BYTES
from strongroom.policies import OnErasedRecord, OnFailure, OnReject
from strongroom.rules import EncryptionRules
from strongroom.spark.kafka_sink import PartitionSummary, TransactionalSinkConfig, WriteTasks

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: The data plane's entry point (java/src/main/java/io/strongroom/dataplane/sink/ExactlyOnceWriter.java).
WRITER_CLASS = "io.strongroom.dataplane.sink.ExactlyOnceWriter"
#: Records per key-service request in a JVM task. A chunk's records and their sealed copies stay alive until it is
#: written: at 50,000 records of 1 KB (100 MB per task) they outlived the young generation and the JVM spent about a
#: quarter of its time in garbage collection; 10,000 keep them young (docs/benchmarks.md).
CHUNK_ROWS = 10_000
#: The copy asks nothing per chunk: small chunks keep its records young (no 50 MB held per chunk).
COPY_CHUNK_ROWS = 1_000
_ENGINE_HINT = "run with --engine python (engine='python'), which supports every rule"


def unsupported(kind: str) -> str | None:
    """Why the JVM engine cannot run this pipeline, or None when it can (every rule and policy of the
    encrypt and decrypt pipelines; their Parquet and console outputs stay on the Python engine)."""
    if kind not in ("encrypt", "decrypt"):
        return f"the JVM engine does not run the {kind} pipeline"
    return None


def require_jvm_engine(spark: SparkSession, kind: str) -> None:
    """Refuse a pipeline the JVM engine cannot run, or a session without the data-plane jar."""
    problem = unsupported(kind)
    if problem is not None:
        raise ConfigError(problem, hint=_ENGINE_HINT)
    from strongroom.spark.dataplane import require_dataplane_jar

    jar = require_dataplane_jar()
    if not _jvm_has_writer(spark):
        raise StackError(
            f"the Spark session has no {WRITER_CLASS} (its spark.jars does not hold {jar})",
            hint="build it with `make dataplane` before the session starts, or run with --engine python",
        )


def _jvm_has_writer(spark: SparkSession) -> bool:
    jvm: Any = spark.sparkContext._jvm
    try:
        loader = jvm.Thread.currentThread().getContextClassLoader()
        jvm.java.lang.Class.forName(WRITER_CLASS, False, loader)
    except Exception:  # noqa: BLE001 - py4j raises its own error for a class that is not there
        return False
    return True


def encrypt_settings(
    config: TransactionalSinkConfig,
    rules: EncryptionRules,
    outputs: Mapping[str, str],
    limits: Mapping[str, int],
    dead_letter_topic: str | None,
    service: Mapping[str, Any],
) -> str:
    """The settings document of one encrypt write: per source topic in ``outputs`` (source → output) the
    rule's decisions as plain values; ``limits`` per output topic; the key service's address and token."""
    topics = {topic: _topic_plan(rules, topic, output) for topic, output in outputs.items()}
    return json.dumps(
        {
            "kind": "encrypt",
            **_sink_settings(config),
            "service": dict(service),
            "dead_letter_topic": dead_letter_topic or "",
            "default_limit": 1_000_000 - 1024,
            "limits": dict(limits),
            "topics": topics,
            "chunk_rows": CHUNK_ROWS,
        }
    )


def copy_settings(config: TransactionalSinkConfig, outputs: Mapping[str, str]) -> str:
    """The settings document of an exactly-once copy (source → output per topic in ``outputs``): every
    record written as it is, no key, no rule; what the pipeline benchmark's passthrough measures."""
    topics = {topic: {"output": output} for topic, output in outputs.items()}
    return json.dumps({"kind": "copy", **_sink_settings(config), "topics": topics, "chunk_rows": COPY_CHUNK_ROWS})


def _sink_settings(config: TransactionalSinkConfig) -> dict[str, Any]:
    """Where and as whom the tasks write: exactly the Python sink's ids."""
    return {
        "bootstrap_servers": config.bootstrap_servers,
        "client_properties": {k: str(v) for k, v in config.client_properties.items()},
        "group_id": config.group_id,
        "transactional_id_prefix": config.transactional_id("", 0)[: -len("-0")],
        "transaction_timeout_ms": config.transaction_timeout_ms,
    }


def decrypt_settings(
    config: TransactionalSinkConfig,
    rules: EncryptionRules,
    outputs: Mapping[str, str],
    policies: DecryptPolicies,
    dead_letter_topic: str | None,
    service: Mapping[str, Any],
) -> str:
    """The settings document of one decrypt write to Kafka: per source topic in ``outputs`` (source →
    output) where the subject is, the topic its ciphertext is bound to (``policies.topic_map``) and the
    rule's index (for the pending buffer); the decrypt policies; the key service's address and token."""
    topics = {
        topic: _topic_plan(rules, topic, output, bound=policies.topic_map.get(topic, topic))
        for topic, output in outputs.items()
    }
    return json.dumps(
        {
            "kind": "decrypt",
            **_sink_settings(config),
            "service": dict(service),
            "dead_letter_topic": dead_letter_topic or "",
            "topics": topics,
            "chunk_rows": CHUNK_ROWS,
            "decrypt": {
                "on_failure": str(policies.on_failure),
                "erased": str(policies.erased),
                "pending_topic": policies.pending_topic,
                "encrypted_only": policies.encrypted_only,
            },
        }
    )


@dataclass(frozen=True)
class DecryptPolicies:
    """What the decrypt pipeline does with what it cannot open (as ``row_transforms.DecryptRows`` does)."""

    on_failure: OnFailure
    erased: OnErasedRecord
    pending_topic: str
    topic_map: Mapping[str, str]
    encrypted_only: bool


def _topic_plan(rules: EncryptionRules, topic: str, output: str, *, bound: str | None = None) -> dict[str, Any]:
    rule = rules.rule_for(topic)
    return {
        "bound_topic": bound or topic,
        "rule_index": rules.rules.index(rule),
        "output": output,
        "subject_source": rule.subject.source,
        "subject_header": rule.subject.header or "",
        "subject_path": rule.subject.path or "",
        "subject_where": rule.subject.describe(),
        "max_subject_bytes": MAX_SUBJECT_BYTES,
        "profile": "portable" if rule.aad_profile == "portable" else "topic",
        "dead_letter": rule.on_reject == OnReject.DEAD_LETTER,
        "fields": list(rule.fields) if rule.mode == "fields" else [],
        # schema mode: the fields come per schema id from the driver (strongroom.spark.schema_plans)
        "mode": rule.mode,
    }


def jvm_tasks(spark: SparkSession, settings: str) -> WriteTasks:
    """The JVM engine's write tasks over a plan of source rows (``SOURCE_COLUMNS``, in that order)."""

    def run(plan: DataFrame) -> list[PartitionSummary]:
        jvm: Any = spark.sparkContext._jvm
        writer = jvm.io.strongroom.dataplane.sink.ExactlyOnceWriter
        rows = [json.loads(str(text)) for text in writer.write(plan._jdf, settings)]
        # Where the driver receives the tasks' summaries: typed from here on, as the Python engine's.
        return [PartitionSummary.from_row({**row, "statuses": json.dumps(row["statuses"])}) for row in rows]

    return run


def close_idle_clients(spark: SparkSession, group_id: str | None = None) -> None:
    """Close the Kafka clients the JVM sink keeps between micro-batches (``TxnClients.java``) in this JVM: of
    the pipeline whose consumer group is ``group_id``, or of every pipeline.

    A pipeline calls it when it closes, so its producers do not outlive it; in local mode this JVM runs the
    tasks, and a cluster's executors close theirs once idle for a minute. A stopped session has none left."""
    if spark.sparkContext._jsc is None or not _jvm_has_writer(spark):
        return
    jvm: Any = spark.sparkContext._jvm
    jvm.io.strongroom.dataplane.sink.ExactlyOnceWriter.closeIdleClients(group_id)
