"""A reused executor Python worker forgets an erased subject key before it seals its next batch.

Real Kafka keys topic, real key manager and key table, the real TLS key service, the real encrypt row
transform running in Spark's Python worker (the same worker reused across batches: shown by its pid).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from strongroom.kafka.config import ClientConfig
from strongroom.keys import KeyManager, SubjectKey, erase
from strongroom.keys.cache import KeyCache
from strongroom.keys.erasure_feed import ErasureFeed
from strongroom.keys.topic import create_keys_topic
from strongroom.kms.local import LocalKeyringAdmin, LocalKms
from strongroom.rules import EncryptionRules
from strongroom.spark.dataframes import encrypt_key_rows
from strongroom.spark.keyservice import KeyService, b64
from strongroom.spark.row_transforms import OK, EncryptRows
from strongroom.testing.kafka_cluster import KafkaCluster

#: How many batches may run before the worker that sealed with the erased key is handed out again.
REUSE_ATTEMPTS = 40


def seal_in_executor(
    transform: EncryptRows, subject: str, watched: SubjectKey
) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """One batch in the worker: seal a record of ``subject``; report the pid, the status and whether this
    process still holds the ``watched`` key in its cipher cache or its key memory."""

    def run(rows: Iterator[Any]) -> Iterator[Any]:
        from strongroom.crypto.aead import CIPHERS
        from strongroom.spark.executor_keys import EXECUTOR_KEYS

        for _ in rows:  # a worker that left its input unread is not reused
            pass

        cols = {"src_topic": ["events"], "src_partition": [0], "src_offset": [0], "key": [subject.encode()],
                "value": [b"secret of " + subject.encode()], "headers": [[]], "timestamp_ms": [0]}  # fmt: skip
        out = transform(cols)
        held = CIPHERS.peek(watched.key) is not None
        remembered = EXECUTOR_KEYS.holds(watched.key_id)
        yield (os.getpid(), out["status"][0], held, remembered)

    return run


def test_a_reused_executor_worker_forgets_an_erased_key(
    spark: SparkSession, kafka_cluster: KafkaCluster, unique_name: Callable[[str], str], tmp_path: Path
) -> None:
    client = ClientConfig(kafka_cluster.bootstrap_servers, extra={"log_level": 0})
    topic = unique_name("keys")
    create_keys_topic(client, topic, partitions=3)
    keyring = tmp_path / "keyring.json"
    LocalKeyringAdmin(LocalKms.from_config({"path": keyring, "create": True}).keyring).create_kek("strongroom-subjects")
    kms = LocalKms.from_config({"path": keyring})
    options = {"register": False}
    with KeyManager(client, kms, topic=topic, table_options=options) as manager:
        cache = KeyCache(manager)
        feed = ErasureFeed()
        manager.table.add_erasure_listener(feed)

        def serve(op: str, args: dict[str, Any]) -> Any:
            decided = cache.get_or_create([str(s) for s in args["subjects"]])
            return {s: [b64(k), b64(d), e] for s, k, d, e in encrypt_key_rows(decided)}

        service = KeyService(serve, erasures=feed)
        try:
            transform = EncryptRows(EncryptionRules.single(["events"]), service.client_spec(), {})
            alice = cache.get_or_create(["alice"])["alice"]
            assert isinstance(alice, SubjectKey)
            rdd = spark.sparkContext.parallelize([0], 1)

            [(pid1, status1, held1, remembered1)] = rdd.mapPartitions(
                seal_in_executor(transform, "alice", alice)
            ).collect()
            assert status1 == OK
            assert held1, "the worker sealed with alice's key: its cipher cache holds it"
            assert remembered1

            erase(client, ["alice"], reason="reused worker test", topic=topic)
            deadline = time.monotonic() + 10
            while alice.key_id not in feed.since(0).key_ids:
                assert time.monotonic() < deadline, "the driver's key table did not apply the erasure"
                time.sleep(0.02)

            # Spark hands out its idle workers first in, first out: with other idle workers in a shared
            # session, the one that sealed with alice's key comes back after each of them ran a batch.
            for _ in range(REUSE_ATTEMPTS):
                [(pid2, status2, held2, remembered2)] = rdd.mapPartitions(
                    seal_in_executor(transform, "bob", alice)
                ).collect()
                if pid2 == pid1:
                    break
            else:
                pytest.fail("Spark never reused the worker that sealed with alice's key: the test proves nothing")
            assert status2 == OK
            assert not held2, "the reused worker still holds the erased key's cipher"
            assert not remembered2
        finally:
            service.close()
