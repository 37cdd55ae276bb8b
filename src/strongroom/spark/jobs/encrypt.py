"""The encrypt pipeline: plaintext topics in, encrypted topics out, exactly once, in one pass.

Per micro-batch (``foreachBatch`` on the driver), the exactly-once sink's tasks read the batch and,
per Arrow batch of records:

1. extract each record's subject (rule per topic: record key, header or JSON path);
2. ask the driver's key service for the subjects' keys: the driver's
   :class:`~strongroom.keys.cache.KeyCache` / :class:`~strongroom.keys.manager.KeyManager` returns
   a key for every subject, creating missing ones in one round and **flushing them to the keys topic
   before the answer** — so before any record that needs them is written — and applies the
   post-erasure policy to erased subjects;
3. seal the whole value or the rule's JSON fields (:class:`~strongroom.clients.sealing.RuleCodec`, the
   client library's core: byte-compatible by construction), marker header first;
4. reject what cannot be sealed (no subject, not a JSON object in field mode, too large): stop, naming
   topic, partition and offset (``on_reject: fail``), or send it unchanged to the dead-letter topic —
   plaintext never reaches the output topic;
5. write everything in one transaction per source partition together with the source offsets.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame, SparkSession

from strongroom.errors import PipelineError, StrongroomError
from strongroom.keys.erasure_feed import ErasureFeed
from strongroom.kms.api import Kms
from strongroom.policies import Engine
from strongroom.runtime import LargeHeapCollector
from strongroom.spark.dataframes import encrypt_key_rows
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
from strongroom.spark.jobs.results import EncryptResult
from strongroom.spark.jvm_sink import encrypt_settings, jvm_tasks, require_jvm_engine
from strongroom.spark.keyservice import KeyService, b64, packed_encrypt_answer, require_secure_channel
from strongroom.spark.row_transforms import EncryptRows
from strongroom.spark.schema_plans import SchemaPlans

if TYPE_CHECKING:
    from strongroom.metrics import Metrics, RecordSample

log = logging.getLogger(__name__)


class EncryptJob(StreamingJob[EncryptResult]):
    """Thin I/O shell around :class:`~strongroom.spark.row_transforms.EncryptRows`; the session is passed in."""

    kind = "encrypt"
    cache_batches = False  # one pass: nothing reads the batch twice

    def __init__(
        self,
        spark: SparkSession,
        settings: PipelineSettings,
        *,
        kms: Kms | None = None,
        kek_alias: str = "strongroom-subjects",
        post_erasure: str = "unreadable",
        on_batch: Callable[[int, EncryptResult], None] | None = None,
    ) -> None:
        from strongroom.keys.router import KeyRouter
        from strongroom.kms.registry import kms_from_config

        if settings.engine == Engine.JVM:
            require_jvm_engine(spark, self.kind)  # before anything is opened
        self.schema_plans = SchemaPlans(settings.rules, settings.schema_registry)
        self.spark = spark
        self.settings = settings
        self.kms = kms or (kms_from_config(settings.kms) if settings.kms else None)
        kmses = {name: kms_from_config(config) for name, config in settings.kmses.items()}
        # A KEK per topic (docs/shredding.md): one key manager per KEK the rules name, over one key table.
        self.keys = KeyRouter(
            settings.client, self.kms, rules=settings.rules, kmses=kmses, topic=settings.keys_topic,
            kek_alias=kek_alias, policy=post_erasure,
        )  # fmt: skip
        try:
            # a missing KEK stops the job here, before any record is read
            self.keks = wait_out_kms_outage(
                lambda: self.keys.check(settings.rules.exact_topics()), settings.kms_outage_wait_s
            )
        except BaseException:
            self.keys.close()
            raise
        self.erasures = ErasureFeed()  # listens after the router: its caches drop a key before the feed lists it
        self.keys.table.add_erasure_listener(self.erasures)
        self.sink = settings.sink(spark, self.kind)
        self.topics = output_topics(settings.client, settings.create_topics)
        self.counters = Counters()
        self.on_batch = on_batch
        self.error: StrongroomError | None = None
        self._lock = threading.Lock()
        require_secure_channel(spark, allow_unencrypted=settings.allow_unencrypted_spark_channel)
        self.service = KeyService(self._serve_keys, host=driver_host(spark), erasures=self.erasures)
        # The driver holds a large heap from here on: keep the garbage collector off the key service's path.
        self.heap = LargeHeapCollector.hold()

    # ------------------------------------------------------------------ the stream
    def source(self) -> DataFrame:
        return kafka_stream(self.spark, self.settings, self.settings.rules.subscription())

    def result(self) -> EncryptResult:
        return EncryptResult.of(self.counters.snapshot(), keys=self.keys.stats())

    def close(self) -> None:
        self.service.close()
        self.close_kept_clients()
        self.keys.close()
        self.heap.release()

    def record_sample(self) -> RecordSample:
        from strongroom.metrics import RecordSample

        outcomes = {"sealed" if status == "ok" else status: n for status, n in self.counters.by_status.items()}
        # A rejected record of a committed batch went to the dead-letter topic (otherwise it stops the job).
        dead = outcomes.get("rejected", 0) if self.settings.dead_letter_topic else 0
        return RecordSample(outcomes, dead_lettered=dead)

    def _watch_parts(self, metrics: Metrics) -> None:
        from strongroom.kms.metered import watch_metered

        metrics.watch_key_table(self.settings.keys_topic, self.keys.metric_sample)
        watch_metered(metrics, [self.kms, *self.keys.kmses.values()])

    # ------------------------------------------------------------------ one micro-batch
    def _process(self, batch: DataFrame, batch_id: int) -> None:
        """One pass: the sink's tasks read the batch, seal each record (keys from the driver's key
        service, one request per Arrow batch) and write it transactionally."""
        rules = self.settings.rules
        outputs = {t: rules.rule_for(t).output_for(t) for t in matching_topics(self.topics, rules)}
        dlq = self.settings.dead_letter_topic
        rules.refuse_own_output(outputs, dlq)
        ensure_topics(self.topics, outputs.items())
        if dlq:
            ensure_topics(self.topics, [(next(iter(outputs), dlq), dlq)])
        limits = {out: self.topics.max_value_bytes(out) for out in set(outputs.values())}
        if self.settings.engine == Engine.JVM:
            document = encrypt_settings(self.sink, rules, outputs, limits, dlq, self.service.client_spec())
            self.write_batch(source_rows(batch), tasks=jvm_tasks(self.spark, document))
        else:
            transform = EncryptRows(rules, self.service.client_spec(), limits, dlq, self.settings.schema_registry)
            self.write_batch(source_rows(batch), transform)
        if self.on_batch is not None:
            self.on_batch(batch_id, self.result())

    def _serve_keys(self, op: str, args: dict[str, Any]) -> Any:
        """The key service's handler: ``encrypt_keys`` → ``{subject: [key id, DEK, emit]}`` (base64), or with
        ``packed`` the compact answer of :func:`~strongroom.spark.keyservice.packed_encrypt_answer`.

        ``topic`` names the source topic the subjects' records come from: its rule's KEK wraps their keys.

        ``seals`` (optional, one count per subject) is how many seals each subject's key makes in the batch
        (one per record sealed whole, one per sealed value in field and schema mode):
        charged to the keys' usage limits (a client that sends none is charged one seal per subject).
        """
        if op == "schema_plan":
            return self.schema_plans.answer(args)
        if op != "encrypt_keys":
            raise PipelineError(f"unknown key service request {op!r}")
        subjects = [str(s) for s in args.get("subjects", [])]
        seals = seal_counts(subjects, args.get("seals"))
        topic = args.get("topic")
        if topic is not None and not isinstance(topic, str):
            raise PipelineError("the key service request's 'topic' is not a topic name")
        with self.counters.phase("keys"):
            decided = wait_out_kms_outage(
                lambda: self.keys.get_or_create(subjects, topic=topic, seals=seals), self.settings.kms_outage_wait_s
            )
        rows = encrypt_key_rows(decided)
        if args.get("packed") is True:
            return packed_encrypt_answer(subjects, {subject: (kid, dek, emit) for subject, kid, dek, emit in rows})
        return {subject: [b64(kid), b64(dek), emit] if emit else ["", "", False] for subject, kid, dek, emit in rows}


def seal_counts(subjects: list[str], seals: object) -> dict[str, int]:
    """The ``seals`` of an ``encrypt_keys`` request per subject (one each when the client sent none)."""
    if seals is None:
        return dict.fromkeys(subjects, 1)
    if (
        not isinstance(seals, list)
        or len(seals) != len(subjects)
        or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in seals)
    ):
        raise PipelineError(
            "the key service request's 'seals' is not one non-negative count per subject",
            hint="send seals as a list of integers aligned with subjects, or leave it out",
        )
    return dict(zip(subjects, seals, strict=True))
