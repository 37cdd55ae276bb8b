"""A loss in the middle of a partition's history is ``missing``, never a justified expiry (issue 19).

One fault sequence on a real 3-broker cluster (classic elections), two topics on replicas (1, 2):
``cap`` is size-capped at its cap (``retention.bytes`` far below what it holds; a single segment, so
the broker never deletes anything) and ``time`` has time retention (the lost records carry old
timestamps; a recent record keeps the segment). For each:

* A: 2,000 records, replicated; kill 2; B: 30 records acknowledged by broker 1 alone; ledgered;
* kill 1, start 2, unclean election: B is lost. The new leader writes an aborted transaction at B's
  first offsets (10 records and its abort marker: 11 offsets that hold nothing a reader sees) and then
  C, 3,000 records that reuse B's other 19 offsets and carry on far past them; C is ledgered;
* start 1 (it truncates B away), then D: 300 records that are never ledgered.

The scrub re-reads the one suspect chunk in several pieces, the last of them far above B. It must
report exactly B's 11 lost records as ``missing`` and its 19 overwritten ones as ``diverged``, and exit
4, in both topics: before the fix it took the last piece's start for the log start and scored the
11 lost records durable (``expired-justified`` by retention.bytes / retention.ms).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from audit_helpers import create_topic_on, produce, wait_for
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource
from pyspark.sql import SparkSession

from strongroom.audit.ledger import capture_ledger
from strongroom.audit.store import LedgerPaths
from strongroom.cli.main import main
from strongroom.kafka.config import ClientConfig
from strongroom.kafka.transport import build_producer
from strongroom.testing.kafka_cluster import TOOLS, KafkaCluster

A, B, ABORTED, C, D = 2_000, 30, 10, 3_000, 300
DAY_MS = 86_400_000


def _allow_unclean_and_elect(cluster: KafkaCluster, topic: str) -> None:
    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("unclean.leader.election.enable", "true", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    cluster.admin().incremental_alter_configs([resource])[resource].result(30)
    cluster.run_tool(
        TOOLS["leader-election"], "--bootstrap-server", cluster.bootstrap_servers, "--election-type", "unclean",
        "--topic", topic, "--partition", "0", check=False,
    )  # fmt: skip
    wait_for(cluster, f"broker 2 to lead {topic}", lambda: cluster.partition_leader(topic) == 2)


def _aborted_transaction(producer: Any, topic: str, n: int) -> None:
    producer.begin_transaction()
    for i in range(n):
        producer.produce(topic, key=f"k{i}".encode(), value=f"aborted{i}".encode())
    producer.flush(30)
    producer.abort_transaction(60)


@pytest.mark.cluster3
def test_lost_records_below_the_last_re_read_piece_are_missing(
    spark: SparkSession,
    kafka_cluster3_classic: KafkaCluster,
    unique_name: Callable[[str], str],
    ledger: LedgerPaths,
    capsys: pytest.CaptureFixture[str],
) -> None:
    cluster = kafka_cluster3_classic
    bs = cluster.bootstrap_servers
    client = ClientConfig(bs)
    common = {"min.insync.replicas": "1", "segment.bytes": str(256 * 1024 * 1024)}
    cap = create_topic_on(cluster, unique_name("cap"), [1, 2], {**common, "retention.bytes": "4096"})
    timed = create_topic_on(cluster, unique_name("time"), [1, 2], {**common, "retention.ms": str(DAY_MS)})
    topics = [cap, timed]
    key = lambda i: f"k{i % 97}".encode()  # noqa: E731
    # The transaction coordinator's topic is made now, while all three brokers can host it.
    txn = build_producer(
        client.producer({"transactional.id": f"loss-{uuid.uuid4().hex}", "transaction.timeout.ms": 300_000})
    )
    txn.init_transactions(60)

    old = int(time.time() * 1000) - 3 * DAY_MS
    for t in topics:
        produce(bs, t, (f"A{i}".encode() for i in range(A)), key=key)
    cluster.kill_broker(2)
    for t in topics:
        wait_for(cluster, f"ISR of {t} to shrink to [1]", lambda t=t: cluster.partition_isr(t) == [1])
        produce(bs, t, (f"B{i}".encode() for i in range(B)), key=key, timestamp=old)
    capture_ledger(spark, client, topics, ledger, once=True)  # A and B, at leader epoch 0

    cluster.kill_broker(1)
    for t in topics:
        wait_for(cluster, f"{t} to lose its leader", lambda t=t: cluster.partition_leader(t) == -1)
    cluster.start_broker(2)
    for t in topics:
        _allow_unclean_and_elect(cluster, t)
        _aborted_transaction(txn, t, ABORTED)
        produce(bs, t, (f"C{i}".encode() for i in range(C)), key=key)
    capture_ledger(spark, client, topics, ledger, once=True)  # C past B's offsets

    cluster.start_broker(1)
    for t in topics:
        wait_for(cluster, f"broker 1 to rejoin {t}", lambda t=t: cluster.partition_isr(t) == [1, 2], timeout=90)
        produce(bs, t, (f"D{i}".encode() for i in range(D)), key=key)  # never ledgered: the tail is suspect

    capsys.readouterr()
    code = main(["--output", "json", "audit", "scrub", "-b", bs, "--ledger", ledger.root, "--span", "1d"])
    summary = json.loads(capsys.readouterr().out)
    lost_first, lost_last = A, A + ABORTED  # 10 aborted records and the abort marker
    for t in topics:
        topic = next(x for x in summary["topics"] if x["topic"] == t)
        (partition,) = topic["partitions"]
        assert partition["log_start"] == 0, f"{t}: the true log start ({partition})"
        counts = topic["counts"]
        assert counts["missing"] == ABORTED + 1, (t, counts)
        assert counts["diverged"] == B - ABORTED - 1, (t, counts)
        assert counts["expired-justified"] == counts["expired-unjustified"] == 0, (t, counts)
        assert counts["ok"] == A + C - (B - ABORTED - 1), (t, counts)
        assert counts["unledgered"] == D, (t, counts)
        missing = sorted(e["offset"] for e in summary["examples"] if e["topic"] == t and e["status"] == "missing")
        assert missing == list(range(lost_first, lost_last + 1))[: len(missing)]
    assert code == 4, "records were lost"
