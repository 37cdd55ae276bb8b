"""The decrypt pipeline: encrypted topics in, usable records out (Kafka exactly-once, Parquet, console).

Per micro-batch (``foreachBatch`` on the driver):

1. held subjects whose keys arrived are released first (:mod:`strongroom.spark.jobs.pending`), so each
   subject's records leave in source order;
2. Kafka output, one pass: the exactly-once sink's tasks open each Arrow batch
   (:class:`~strongroom.spark.row_transforms.DecryptRows`) with keys from the driver's key service,
   which classifies each ``(key id, subject)`` in the key table (a continuously refreshed view of the
   keys topic): available, erased, not arrived yet, or lost (the wrapping key's KEK is gone or disabled
   in the KMS). A KMS outage is waited out, never reported as a lost key.
   Parquet/console output: the same transform, its rows cached; the files are written first (rows a
   replay already wrote are left out), then the offsets are committed (keys never travel in a
   DataFrame on either path);
3. erased subjects lose their encrypted fields (field mode) or are dropped / kept with a null value
   (whole-value mode, ``erased``);
4. per-record failures (lost KEK, tampered or moved records, unknown format versions) follow
   ``on_failure``: ``fail`` (default) stops with an error naming topic, partition, offset and KEK — for
   a lost or disabled KEK only after ``lost_kek_wait_s`` of re-checking, so a KEK that is restored
   (deletion cancelled, soft-delete undone) heals the running pipeline without a restart; ``dead-letter``
   diverts the ciphertext unchanged; ``skip`` drops it and counts it;
5. records whose key has not arrived are written to the pending topic in the same transaction as the
   output; the output goes to Kafka exactly once, or to Parquet (one directory per batch and resume
   point, overwritten only by a replay of the same batch) or the console (at least once).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from strongroom.envelope import RecordContext, decrypt_json_fields, decrypt_value
from strongroom.envelope.errors import SubjectErased
from strongroom.errors import EnvelopeError, KeysError, KmsError, PipelineError, StrongroomError
from strongroom.kafka.transport import committed
from strongroom.keys.erasure_feed import ErasureFeed
from strongroom.kms.api import Kms
from strongroom.kms.errors import KmsUnavailable
from strongroom.policies import Engine, OnErasedRecord, OnFailure
from strongroom.runtime import LargeHeapCollector
from strongroom.spark.dataframes import LOST_KEY_REASON, classify_key
from strongroom.spark.jobs.common import (
    Counters,
    PipelineSettings,
    StreamingJob,
    driver_host,
    ensure_topics,
    kafka_stream,
    matching_topics,
    output_topics,
    source_rows,
    wait_out_kms_outage,
)
from strongroom.spark.jobs.pending import HeldRecord, PendingBuffer
from strongroom.spark.jobs.results import DecryptResult
from strongroom.spark.jvm_sink import (
    DecryptPolicies,
    decrypt_settings,
    jvm_tasks,
    require_jvm_engine,
)
from strongroom.spark.kafka_sink import transformed
from strongroom.spark.keyservice import KeyService, b64, packed_decrypt_answer, require_secure_channel, unb64
from strongroom.spark.row_transforms import DecryptRows
from strongroom.spark.schema_plans import SchemaPlans
from strongroom.spark.transforms import (
    ERASED,
    FAILED,
    KEY_LOST,
    KEY_PENDING,
    OK,
)

if TYPE_CHECKING:
    from strongroom.metrics import Metrics, RecordSample

log = logging.getLogger(__name__)

LOST_KEK_HINT = (
    "restore the KEK (cancel its deletion, undo the soft-delete) or run `strongroom recover scan`; "
    "or rerun with --on-failure dead-letter/skip"
)
DAMAGED_HINT = (
    "the record is damaged, was moved from elsewhere, or needs a newer strongroom; "
    "rerun with --on-failure dead-letter to quarantine it"
)


class DecryptOutput(StrEnum):
    """Where ``strongroom decrypt`` writes."""

    KAFKA = "kafka"  # exactly once, in transactions with the source offsets
    PARQUET = "parquet"  # files first, then the offsets
    CONSOLE = "console"  # printed (at least once)


class DecryptJob(StreamingJob[DecryptResult]):
    """Thin I/O shell around :class:`~strongroom.spark.row_transforms.DecryptRows` (Kafka output) and
    :func:`~strongroom.spark.kafka_sink.transformed` (Parquet, console); the session is passed in."""

    kind = "decrypt"

    def __init__(
        self,
        spark: SparkSession,
        settings: PipelineSettings,
        *,
        kms: Kms | None = None,
        output: DecryptOutput | str = DecryptOutput.KAFKA,
        output_path: str | None = None,
        output_topic: str = "$(base).decrypted",
        on_failure: OnFailure | str = OnFailure.FAIL,
        erased: OnErasedRecord | str = OnErasedRecord.DROP,
        lost_kek_wait_s: float = 300.0,
        kek_recheck_s: float = 15.0,
        topic_map: dict[str, str] | None = None,
        max_pending: int = 100_000,
        pending_timeout_s: float = 600.0,
        on_batch: Callable[[int, DecryptResult], None] | None = None,
        encrypted_only: bool = True,
    ) -> None:
        from strongroom.keys.router import kms_by_provider
        from strongroom.keys.table import KeyTable
        from strongroom.kms.registry import kms_from_config

        if settings.engine == Engine.JVM and output == DecryptOutput.KAFKA:
            require_jvm_engine(spark, self.kind)  # before anything is opened
        if output == "parquet" and not output_path:
            raise PipelineError("decrypting to Parquet needs an output path", hint="pass --output-path")
        if on_failure == "dead-letter" and not settings.dead_letter_topic:
            raise PipelineError("on_failure=dead-letter needs a dead-letter topic", hint="pass --dead-letter-topic")
        self.schema_plans = SchemaPlans(settings.rules, settings.schema_registry)
        self.spark = spark
        self.settings = settings
        self.kms = kms or (kms_from_config(settings.kms) if settings.kms else None)
        # every KMS a wrapping key may name (a KEK per topic, strongroom.keys.router)
        self.kmses = kms_by_provider(self.kms, {name: kms_from_config(c) for name, c in settings.kmses.items()})
        # it only opens records: seal leases are passed over (KeyTable.seal_usage)
        self.table = KeyTable(settings.client, self.kmses, topic=settings.keys_topic, seal_usage=False).open()
        self.output = DecryptOutput(output)
        self.output_path = output_path
        self.output_topic_template = output_topic
        self.on_failure = OnFailure(on_failure)
        self.erased = OnErasedRecord(erased)
        self.lost_kek_wait_s = lost_kek_wait_s
        self.kek_recheck_s = kek_recheck_s
        self.topic_map = dict(topic_map or {})
        #: A record without the marker header fails (docs/threat-model.md, downgrade); False passes it on.
        self.encrypted_only = encrypted_only
        self.sink = settings.sink(spark, self.kind)
        self.topics = output_topics(settings.client, settings.create_topics)
        self.pending = PendingBuffer(
            settings.client, self.sink.app_id, max_records=max_pending, timeout_s=pending_timeout_s
        )
        self.counters = Counters()
        self.on_batch = on_batch
        self.error: StrongroomError | None = None
        self._lock = threading.Lock()
        self.cache_batches = False  # both paths read the batch once (the file path caches what it opened)
        self.table.wait_caught_up(120)
        require_secure_channel(spark, allow_unencrypted=settings.allow_unencrypted_spark_channel)
        self.erasures = ErasureFeed()
        self.table.add_erasure_listener(self.erasures)
        self.service = KeyService(self._serve_keys, host=driver_host(spark), erasures=self.erasures)
        # The driver holds a large heap from here on: keep the garbage collector off the key service's path.
        self.heap = LargeHeapCollector.hold()

    # ------------------------------------------------------------------ the stream
    def source(self) -> DataFrame:
        from strongroom.keys.topic_config import READERS_TOPIC_DEFAULT

        subscription = dict(self.settings.rules.subscription())
        # The key readers' heartbeats tick every few seconds: they keep batches (releases, timeouts) coming.
        if "subscribe" in subscription:
            subscription["subscribe"] += f",{READERS_TOPIC_DEFAULT}"
        else:
            subscription["subscribePattern"] = f"(?:{subscription['subscribePattern']})|{READERS_TOPIC_DEFAULT}"
        return kafka_stream(self.spark, self.settings, subscription)

    def result(self) -> DecryptResult:
        return DecryptResult.of(self.counters.snapshot(), pending=self.pending.snapshot())

    def close(self) -> None:
        self.service.close()
        self.close_kept_clients()
        self.pending.close()
        self.table.close()
        self.heap.release()

    def record_sample(self) -> RecordSample:
        from strongroom.metrics import RecordSample

        words = {"ok": "opened", "pending": "held"}
        outcomes = {words.get(status, status): n for status, n in self.counters.by_status.items()}
        dead = outcomes.get("failed", 0) if self.on_failure == OnFailure.DEAD_LETTER else 0
        oldest_ms = min((queue[0].since_ms for queue in list(self.pending.held.values()) if queue), default=None)
        age = 0.0 if oldest_ms is None else max(0.0, time.time() - oldest_ms / 1000)
        return RecordSample(outcomes, dead_lettered=dead, pending=self.pending.count, oldest_pending_age_s=age)

    def _watch_parts(self, metrics: Metrics) -> None:
        from strongroom.kms.metered import watch_metered

        metrics.watch_key_table(self.settings.keys_topic, self.table.metric_sample)
        watch_metered(metrics, [self.kms, *self.kmses.values()])

    # ------------------------------------------------------------------ one micro-batch
    def _prepare(self, batch: DataFrame, batch_id: int) -> DataFrame:
        """Release held subjects whose keys arrived (before the batch: order), drop heartbeat ticks."""
        from strongroom.keys.topic_config import READERS_TOPIC_DEFAULT

        self._release_pending(batch_id)
        return batch.filter(F.col("topic") != READERS_TOPIC_DEFAULT)

    def _logical_topic(self) -> Any:
        column = F.col("topic")
        for physical, logical in self.topic_map.items():
            column = F.when(F.col("topic") == physical, F.lit(logical)).otherwise(column)
        return column

    def _output_topic(self) -> Any:
        """The output topic per the template: ``$(topic)`` is the source topic, ``$(base)`` the source
        topic without a trailing ``.enc`` (default ``$(base).decrypted``: ``orders.enc`` → ``orders.decrypted``)."""
        base = F.when(F.col("topic").endswith(".enc"), F.expr("substring(topic, 1, length(topic) - 4)")).otherwise(
            F.col("topic")
        )
        template = F.lit(self.output_topic_template)
        return F.regexp_replace(F.regexp_replace(template, r"\$\(base\)", base), r"\$\(topic\)", F.col("topic"))

    def output_topic_for(self, topic: str) -> str:
        base = topic[:-4] if topic.endswith(".enc") else topic
        return self.output_topic_template.replace("$(base)", base).replace("$(topic)", topic)

    def _process(self, batch: DataFrame, batch_id: int) -> None:
        """Kafka output in one pass: the sink's tasks read the batch, open each record (keys from the
        driver's key service, one request per Arrow batch) and write it transactionally. Parquet and
        console output: :meth:`_process_files`."""
        dlq = self.settings.dead_letter_topic
        if self.on_failure == "dead-letter" and dlq:
            self.settings.rules.refuse_own_output({}, dlq)
            ensure_topics(self.topics, [(dlq, dlq)])
        try:
            if self.output == "kafka":
                topics = matching_topics(self.topics, self.settings.rules)
                outputs = {t: self.output_topic_for(t) for t in topics}
                self.settings.rules.refuse_own_output(outputs)
                ensure_topics(self.topics, outputs.items())
                if self.settings.engine == Engine.JVM:
                    self.write_batch(source_rows(batch), tasks=jvm_tasks(self.spark, self._jvm_settings(topics)))
                else:
                    self.write_batch(source_rows(batch), self._transform())
            else:
                self._process_files(batch, batch_id)
        except PipelineError as exc:
            if not exc.problem.startswith("cannot decrypt"):
                raise
            hint = LOST_KEK_HINT if LOST_KEY_REASON in exc.problem else DAMAGED_HINT
            raise PipelineError(exc.problem, hint=hint) from None
        self.pending.refresh()
        if self.on_batch is not None:
            self.on_batch(batch_id, self.result())

    def _serve_keys(self, op: str, args: dict[str, Any]) -> Any:
        """The key service's handler: ``decrypt_keys`` → ``[[state, DEK or None, reason or None], ...]``, or with
        ``packed`` the compact answer of :func:`~strongroom.spark.keyservice.packed_decrypt_answer`."""
        if op == "schema_plan":
            return self.schema_plans.answer(args)
        if op != "decrypt_keys":
            raise PipelineError(f"unknown key service request {op!r}")
        pairs = [(unb64(kid), subject) for kid, subject in args.get("pairs", [])]
        with self.counters.phase("keys"):
            rows = self._keys_waiting_for_lost_keks(pairs)
        if args.get("packed") is True:
            return packed_decrypt_answer(rows)
        return [[state, b64(dek) if dek else None, reason] for _, dek, state, reason in rows]

    def _process_files(self, batch: DataFrame, batch_id: int) -> None:
        """Parquet and console output: the same row transform as the Kafka path (keys from the driver's
        key service, never in a DataFrame), then files first and offsets second.

        Rows below the group's committed offsets were written by an earlier attempt and are left out;
        the files of this attempt go to a directory named after the batch and those offsets, overwritten
        by a replay of the same batch and never by a later one (even when a lost checkpoint restarts the
        batch ids). Only then does the exactly-once sink commit the offsets, together with the records
        bound for Kafka (pending, dead letters). A crash between the two replays the batch into the same
        directory.
        """
        frame = transformed(source_rows(batch), self._transform()).persist(StorageLevel.MEMORY_AND_DISK)
        try:
            partitions = {(r["src_topic"], int(r["src_partition"])): None for r in
                          frame.select("src_topic", "src_partition").distinct().collect()}  # fmt: skip
            if not partitions:
                return
            done = committed(self.settings.client, self.sink.group_id, partitions)
            fresh = frame.filter(_at_or_after(done))
            fatal = fresh.filter(F.col("fatal")).select("src_topic", "src_partition", "src_offset", "reason").head()
            if fatal is not None:
                raise PipelineError(
                    f"cannot decrypt {fatal['src_topic']}[{fatal['src_partition']}]@{fatal['src_offset']}: "
                    f"{fatal['reason']}"
                )
            outputs = {self.output_topic_for(t) for t, _ in partitions}
            with self.counters.phase("files"):
                self._write_files(fresh.filter(F.col("emit") & F.col("topic").isin(*outputs)), batch_id, done)
            to_kafka = frame.withColumn("emit", F.col("emit") & ~F.col("topic").isin(*outputs))
            self.write_batch(to_kafka)
        finally:
            frame.unpersist()

    def _transform(self) -> DecryptRows:
        return DecryptRows(
            self.settings.rules, self.service.client_spec(), self.output_topic_template, self.on_failure,
            self.erased, self.pending.topic, self.topic_map, self.settings.dead_letter_topic, self.encrypted_only,
            self.settings.schema_registry,
        )  # fmt: skip

    def _jvm_settings(self, topics: list[str]) -> str:
        """The JVM engine's settings for one batch: :meth:`_transform`'s decisions as plain values."""
        policies = DecryptPolicies(
            self.on_failure, self.erased, self.pending.topic, self.topic_map, self.encrypted_only
        )
        outputs = {t: self.output_topic_for(t) for t in topics}
        return decrypt_settings(
            self.sink, self.settings.rules, outputs, policies, self.settings.dead_letter_topic,
            self.service.client_spec(),
        )  # fmt: skip

    def _write_files(self, rows: DataFrame, batch_id: int, done: dict[tuple[str, int], int]) -> None:
        out = rows.select(
            F.col("src_topic").alias("topic"),
            F.col("src_partition").alias("partition"),
            F.col("src_offset").alias("offset"),
            "key",
            "value",
            F.col("value").cast("string").alias("value_text"),
            "headers",
            F.timestamp_millis("timestamp_ms").alias("timestamp"),
        )
        if self.output == "parquet":
            out.write.mode("overwrite").parquet(f"{self.output_path}/{batch_directory(batch_id, done)}")
            return
        for row in out.select("topic", "partition", "offset", "value_text").collect():
            print(f"{row['topic']}[{row['partition']}]@{row['offset']} {row['value_text']}", flush=True)

    def _keys_waiting_for_lost_keks(
        self, pairs: list[tuple[bytes, str | None]]
    ) -> list[tuple[bytes, bytes | None, str, str | None]]:
        """Classify the batch's keys; with ``on_failure=fail`` re-check lost KEKs for a while first, so a
        KEK that is restored (deletion cancelled, soft-delete undone) heals the running pipeline."""
        deadline = time.monotonic() + self.lost_kek_wait_s
        while True:
            keys_rows = self._classify(pairs)
            lost = [r for r in keys_rows if r[2] == KEY_LOST]
            if not lost or self.on_failure != "fail" or time.monotonic() >= deadline:
                return keys_rows
            log.error(
                "%d subject keys cannot be unwrapped (%s); re-checking every %.0fs for %.0fs more before stopping",
                len(lost), lost[0][3], self.kek_recheck_s, deadline - time.monotonic(),
            )  # fmt: skip
            time.sleep(self.kek_recheck_s)

    def _classify(self, pairs: Iterable[tuple[bytes, str | None]]) -> list[tuple[bytes, bytes | None, str, str | None]]:
        """Look every key up; wait out a KMS outage (``KmsUnavailable``) instead of calling keys lost."""
        held = self.pending.held_subjects()
        pairs = list(pairs)
        self.table.warm(key_id for key_id, _ in pairs)
        return wait_out_kms_outage(
            lambda: [self._classify_one(key_id, subject, held) for key_id, subject in pairs],
            self.settings.kms_outage_wait_s,
        )

    def _classify_one(
        self, key_id: bytes, subject: str | None, held: set[str]
    ) -> tuple[bytes, bytes | None, str, str | None]:
        if subject is not None and subject in held:
            return (key_id, None, KEY_PENDING, None)  # keep the subject's order: it has older records held
        return classify_key(self.table, key_id, subject)

    # ------------------------------------------------------------------ releasing held records
    def _release_pending(self, batch_id: int) -> None:
        """Release the held subjects whose keys arrived (or whose records timed out), in one transaction."""
        if not self.pending.count:
            return
        if self.output != "kafka":
            raise PipelineError(
                f"{self.pending.count} records wait for keys, and releasing them is only supported for Kafka output",
                hint="decrypt to Kafka, or wait until the keys topic has caught up",
            )
        done = self.pending.release(self._resolve_held, self._emit_released, self.settings.dead_letter_topic)
        if done.released or done.timed_out:
            log.info("batch %d: released %d held records, %d timed out", batch_id, done.released, done.timed_out)

    def _resolve_held(self, record: HeldRecord) -> tuple[str, Any] | None:
        """A held record opened on the driver: ``(status, value or reason)``, or None while its key is unknown."""
        from strongroom.keys.errors import KeyNotYetAvailable

        rule = self.settings.rules.rules[record.rule]
        topic = self.topic_map.get(record.src_topic, record.src_topic)
        ctx = RecordContext(topic, record.subject.encode("utf-8"))
        lookup = self.table.key_lookup_for(record.subject)
        try:
            if rule.mode == "schema":
                opened, _ = self.schema_plans.fields_for(rule).open(record.value or b"", _erased_as_none(lookup), ctx)
                return (OK, opened)
            if rule.mode == "fields":
                opened = decrypt_json_fields(
                    record.value or b"", lookup, ctx, on_erased="null", expect_encrypted=rule.fields
                )
                return (OK, opened)
            return (OK, decrypt_value(record.value or b"", lookup, ctx))
        except SubjectErased:
            return (ERASED, None)
        except (KmsUnavailable, KeyNotYetAvailable):
            return None
        except (EnvelopeError, KmsError, KeysError) as exc:
            return (FAILED, str(exc))

    def _emit_released(self, producer: Any, items: Iterable[tuple[HeldRecord, str, Any]]) -> None:
        """Produce released records into the release transaction, per the erased and failure policies."""
        for record, status, payload in items:
            out_topic = self.output_topic_for(record.src_topic)
            headers = [(k, v) for k, v in record.headers if k != "strongroom.enc"]
            if status == OK:
                producer.produce(
                    out_topic, key=record.key, value=payload, headers=headers, timestamp=record.timestamp_ms or 0
                )
            elif status == ERASED and self.erased == "mark":
                producer.produce(out_topic, key=record.key, value=None, headers=[*headers, ("strongroom.erased", b"1")])
            elif status in (FAILED, "timed-out") and self.settings.dead_letter_topic:
                reason = str(payload).encode()
                producer.produce(
                    self.settings.dead_letter_topic, key=record.key, value=record.value,
                    headers=[*record.headers, ("strongroom.dead-letter.reason", reason)],
                )  # fmt: skip
            elif status == FAILED and self.on_failure == "fail":
                raise PipelineError(
                    f"cannot decrypt held record {record.src_topic}[{record.src_partition}]@{record.src_offset}: "
                    f"{payload}",
                    hint="restore the KEK or rerun with --on-failure dead-letter/skip",
                )


def _erased_as_none(lookup: Callable[[Any], bytes | None]) -> Callable[[Any], bytes | None]:
    """``lookup`` answering None for an erased key: schema mode reads an erased subject's fields as null or
    empty (as the executors do), instead of dropping the whole record."""

    def wrapped(ref: Any) -> bytes | None:
        try:
            return lookup(ref)
        except SubjectErased:
            return None

    return wrapped


def _at_or_after(done: dict[tuple[str, int], int]) -> Any:
    """Rows at or after each partition's committed offset (the rows a replay has not written yet)."""
    condition = F.lit(True)
    for (topic, partition), offset in done.items():
        if offset > 0:
            mine = (F.col("src_topic") == F.lit(topic)) & (F.col("src_partition") == F.lit(partition))
            condition = condition & (~mine | (F.col("src_offset") >= F.lit(offset)))
    return condition


def batch_directory(batch_id: int, done: dict[tuple[str, int], int]) -> str:
    """``batch_id=<id>-<digest of where each partition resumed>``: the same for a replay of the batch, and
    different for any later batch, even one that reuses the id after its checkpoint was lost."""
    import hashlib

    where = ",".join(f"{t}:{p}:{o}" for (t, p), o in sorted(done.items()))
    return f"batch_id={batch_id}-{hashlib.sha256(where.encode()).hexdigest()[:12]}"
