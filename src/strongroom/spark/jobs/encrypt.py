"""The encrypt pipeline: plaintext topics in, encrypted topics out, exactly once.

Per micro-batch (``foreachBatch`` on the driver):

1. the batch is cached (``spark.io.encryption.enabled`` keeps any spill encrypted) and the distinct
   subjects of each rule's records are collected;
2. :class:`~strongroom.keys.manager.KeyManager` returns a key for every subject, creating the missing
   ones in one round and **flushing them to the keys topic before any record that needs them is
   written** (erased subjects get the post-erasure policy's decision);
3. the subjects' keys become a small keys frame, broadcast-joined to the rows; whole values are sealed
   in the JVM, JSON fields on Arrow batches in Python (:mod:`strongroom.spark.transforms`);
4. records that cannot be encrypted stop the pipeline (``on_reject: fail``, naming topic, partition and
   offset) or go unchanged to the dead-letter topic; plaintext never reaches the output topic;
5. the output is written with :func:`~strongroom.spark.kafka_sink.write_exactly_once` (one transaction
   per source partition with the source offsets).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from strongroom.errors import StrongroomError
from strongroom.kms.api import Kms
from strongroom.spark.jobs.common import (
    Counters,
    PipelineSettings,
    StreamingJob,
    dead_letter,
    ensure_topics,
    kafka_stream,
    output_topics,
    rule_condition,
    wait_out_kms_outage,
)
from strongroom.spark.kafka_sink import write_exactly_once
from strongroom.spark.transforms import ENCRYPT_KEYS_SCHEMA, REJECTED, encrypt_frame, with_subject

log = logging.getLogger(__name__)


class EncryptJob(StreamingJob):
    """Thin I/O shell around :func:`~strongroom.spark.transforms.encrypt_frame`; the session is passed in."""

    kind = "encrypt"

    def __init__(
        self,
        spark: SparkSession,
        settings: PipelineSettings,
        *,
        kms: Kms | None = None,
        kek_alias: str = "strongroom-subjects",
        post_erasure: str = "unreadable",
        on_batch: Callable[[int, dict[str, Any]], None] | None = None,
    ) -> None:
        from strongroom.keys.cache import KeyCache
        from strongroom.keys.manager import KeyManager
        from strongroom.kms.registry import kms_from_config

        self.spark = spark
        self.settings = settings
        self.kms = kms or kms_from_config(settings.kms)
        self.keys = KeyManager(
            settings.client, self.kms, topic=settings.keys_topic, kek_alias=kek_alias, policy=post_erasure
        )
        self.key_cache = KeyCache(self.keys)
        self.sink = settings.sink(self.kind)
        self.topics = output_topics(settings.client, settings.create_topics)
        self.counters = Counters()
        self.on_batch = on_batch
        self.error: StrongroomError | None = None
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ the stream
    def source(self) -> DataFrame:
        return kafka_stream(self.spark, self.settings, self.settings.rules.subscription())

    def result(self) -> dict[str, Any]:
        return {**self.counters.to_dict(), "keys": self.key_cache.stats()}

    def close(self) -> None:
        self.keys.close()

    # ------------------------------------------------------------------ one micro-batch
    def _process(self, batch: DataFrame, batch_id: int) -> None:
        rules = self.settings.rules
        parts = [with_subject(batch.filter(rule_condition(rules, i)), rule) for i, rule in enumerate(rules.rules)]
        # Pass 1 over the cached batch: which topics, which subjects.
        seen = parts[0].select("topic", "subject")
        for part in parts[1:]:
            seen = seen.unionByName(part.select("topic", "subject"))
        with self.counters.phase("scan"):
            pairs = seen.distinct().collect()
        topics = sorted({r["topic"] for r in pairs})
        if not topics:
            return
        outputs = {t: rules.rule_for(t).output_for(t) for t in topics}
        ensure_topics(self.topics, outputs.items())
        dlq = self.settings.dead_letter_topic
        if dlq:
            ensure_topics(self.topics, [(topics[0], dlq)])
        with self.counters.phase("keys"):
            keys = self._keys_frame(sorted({r["subject"] for r in pairs if r["subject"] is not None}))
        limits = F.create_map(
            *[x for out in sorted(set(outputs.values())) for x in (F.lit(out), F.lit(self.topics.max_value_bytes(out)))]
        )
        frame: DataFrame | None = None
        for part, rule in zip(parts, rules.rules, strict=True):
            out_topic = F.regexp_replace(F.lit(rule.output_topic), r"\$\(topic\)", F.col("topic"))
            encrypted = encrypt_frame(part, keys, rule, max_value_bytes=limits[out_topic])
            stop = rule.on_reject == "fail" or dlq is None
            encrypted = encrypted.withColumn("fatal", F.lit(stop) & (F.col("status") == REJECTED))
            if not stop:
                assert dlq is not None
                encrypted = dead_letter(encrypted, REJECTED, dlq)
            frame = encrypted if frame is None else frame.unionByName(encrypted)
        assert frame is not None
        # Pass 2: seal and write, exactly once (a fatal row stops the write with its coordinates).
        with self.counters.phase("write"):
            self.counters.add_batch(write_exactly_once(frame, self.sink))
        if self.on_batch is not None:
            self.on_batch(batch_id, self.result())

    def _keys_frame(self, subjects: list[str]) -> DataFrame:
        """One row per subject: its key id and DEK (the post-erasure policy's key or ``emit=False``)."""
        from strongroom.keys.manager import PolicyDecision

        decided = (
            wait_out_kms_outage(lambda: self.key_cache.get_or_create(subjects), self.settings.kms_outage_wait_s)
            if subjects
            else {}
        )
        rows = []
        for subject, outcome in decided.items():
            if isinstance(outcome, PolicyDecision):
                if outcome.drop or outcome.key is None:
                    rows.append((subject, b"\x00" * 16, b"\x00" * 32, False))
                else:
                    rows.append((subject, outcome.key.key_id, outcome.key.key, True))
            else:
                rows.append((subject, outcome.key_id, outcome.key, True))
        return self.spark.createDataFrame(rows, ENCRYPT_KEYS_SCHEMA)
