"""Unclean leader election on a real 3-broker cluster (classic, no Eligible Leader Replicas).

One fault sequence, two topics on replicas (1, 2) with min.insync.replicas=1:

* ``div``: A (replicated) - kill 2 - B written only to 1 - kill 1 - start 2 - unclean election -
  C written to 2 - start 1, which truncates B: the ledger's B records are ``diverged`` where C
  reused their offsets and ``missing`` beyond the new log end.
* ``ack1``: A (replicated) - kill 2 - X written with acks=1 to 1 - same election, nothing written
  after: the ledger's X records are ``missing``, and count against the score.

The watcher sees the unclean election (new leader outside the previous ISR), the truncation
(ledgered offsets no longer in the log) and the config change that allowed it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from audit_helpers import CollectingSink, create_topic_on, produce, wait_for
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource
from pyspark.sql import SparkSession

from strongroom.audit.alerts import Fanout
from strongroom.audit.ledger import capture_ledger
from strongroom.audit.scrub import ScrubOptions, run_scrub
from strongroom.audit.store import LedgerPaths
from strongroom.audit.watch import Watcher
from strongroom.kafka.config import ClientConfig
from strongroom.testing.kafka_cluster import TOOLS, KafkaCluster


def test_unclean_election_is_found_by_scrub_and_watcher(
    spark: SparkSession,
    kafka_cluster3_classic: KafkaCluster,
    unique_name: Callable[[str], str],
    ledger: LedgerPaths,
    tmp_path: Path,
) -> None:
    cluster = kafka_cluster3_classic
    bs = cluster.bootstrap_servers
    client = ClientConfig(bs)
    div = create_topic_on(cluster, unique_name("div"), [1, 2], {"min.insync.replicas": "1"})
    ack1 = create_topic_on(cluster, unique_name("ack1"), [1, 2], {"min.insync.replicas": "1"})
    topics = [div, ack1]
    sink = CollectingSink()
    watcher = Watcher(
        client, topics=topics, ledger=ledger, state_path=tmp_path / "watch.json", sink=Fanout([sink]), timeout=5
    )

    for t in topics:
        produce(bs, t, (f"A{i}".encode() for i in range(20)), key=lambda i: f"k{i}".encode())
    capture_ledger(spark, client, topics, ledger, once=True)
    watcher.poll_once()

    cluster.kill_broker(2)
    for t in topics:
        wait_for(cluster, f"ISR of {t} to shrink to [1]", lambda t=t: cluster.partition_isr(t) == [1])
    produce(bs, div, (f"B{i}".encode() for i in range(10)), key=lambda i: f"k{i}".encode())
    produce(bs, ack1, (f"X{i}".encode() for i in range(10)), key=lambda i: f"k{i}".encode(), acks="1")
    capture_ledger(spark, client, topics, ledger, once=True)  # the ledger saw B and X at epoch 0
    watcher.poll_once()

    cluster.kill_broker(1)
    for t in topics:
        wait_for(cluster, f"{t} to lose its leader", lambda t=t: cluster.partition_leader(t) == -1)
    cluster.start_broker(2)
    admin = cluster.admin()
    for t in topics:
        resource = ConfigResource(
            ConfigResource.Type.TOPIC,
            t,
            incremental_configs=[
                ConfigEntry("unclean.leader.election.enable", "true", incremental_operation=AlterConfigOpType.SET)
            ],
        )
        admin.incremental_alter_configs([resource])[resource].result(30)
        cluster.run_tool(
            TOOLS["leader-election"], "--bootstrap-server", bs, "--election-type", "unclean", "--topic", t,
            "--partition", "0", check=False,
        )  # fmt: skip
        wait_for(cluster, f"broker 2 to lead {t}", lambda t=t: cluster.partition_leader(t) == 2)
    produce(bs, div, (f"C{i}".encode() for i in range(5)), key=lambda i: f"k{i}".encode())
    alerts = watcher.poll_once()

    kinds = {(a.kind, a.topic) for a in alerts if a.severity == "critical"}
    for t in topics:
        assert ("unclean-election", t) in kinds, alerts
        assert ("truncation", t) in kinds, alerts
        assert ("config-weakened", t) in kinds, alerts

    cluster.start_broker(1)
    wait_for(cluster, "broker 1 to truncate and rejoin", lambda: cluster.partition_isr(div) == [1, 2], timeout=90)
    assert "Truncating partition" in cluster.broker_log(1).read_text()

    summary = run_scrub(spark, client, ledger, ScrubOptions(span_ms=3_600_000)).to_json()
    by_topic = {t["topic"]: t for t in summary["topics"]}
    assert by_topic[div]["counts"]["ok"] == 20
    assert by_topic[div]["counts"]["diverged"] == 5  # B0..B4 replaced by C0..C4 at the same offsets
    assert by_topic[div]["counts"]["missing"] == 5  # B5..B9 beyond the new log end
    assert by_topic[ack1]["counts"]["ok"] == 20
    assert by_topic[ack1]["counts"]["missing"] == 10  # acknowledged with acks=1, gone
    assert by_topic[ack1]["counts"]["unledgered"] == 0
    assert summary["score"]["audited"] == 60
    assert summary["score"]["durable"] == 40
    assert summary["score"]["display"] == "0.4 nines"  # -log10(20/60)
    diverged = [e for e in summary["examples"] if e["status"] == "diverged"]
    assert diverged
    assert all(e["ledger_epoch"] < e["log_epoch"] for e in diverged)
