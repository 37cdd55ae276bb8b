"""Ledger capture and scrub on a real broker: clean data scores perfect, coverage is honest."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path

import pytest
from audit_helpers import create_topic_on, produce, wait_for
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from strongroom.audit.errors import KafkaReadError
from strongroom.audit.ledger import capture_ledger, capture_stats, coverage_ranges, read_ledger
from strongroom.audit.readers import AuditReader
from strongroom.audit.scrub import ScrubOptions, run_scrub
from strongroom.audit.store import LedgerPaths
from strongroom.cli.main import main
from strongroom.kafka.config import ClientConfig
from strongroom.kafka.transport import build_producer
from strongroom.testing.kafka_cluster import KafkaCluster


def test_capture_then_scrub_clean_topic_is_perfect(
    spark: SparkSession, kafka_cluster: KafkaCluster, new_topic: Callable[..., str], ledger: LedgerPaths
) -> None:
    bootstrap = kafka_cluster.bootstrap_servers
    client = ClientConfig(bootstrap)
    topic = new_topic(partitions=3)
    acked = produce(bootstrap, topic, (f"v{i}".encode() for i in range(300)), key=lambda i: f"k{i % 17}".encode())

    first = capture_ledger(spark, client, [topic], ledger, once=True, max_records_per_range=40)
    assert first.end_offsets[topic] == {str(p): sum(1 for q, _ in acked if q == p) for p in range(3)}

    rows = read_ledger(spark, ledger)
    stats = {r.partition: r for r in capture_stats(rows).collect()}
    assert sum(s.records for s in stats.values()) == 300
    coverage = {(r.partition, r.range_start, r.range_end) for r in coverage_ranges(rows).collect()}
    assert coverage == {(p, 0, stats[p].max_offset + 1) for p in range(3)}, "ranges merge into one per partition"

    # More records after the capture: the scrub sees them as unledgered, never as audited.
    produce(bootstrap, topic, (f"late{i}".encode() for i in range(30)))
    summary = run_scrub(spark, client, ledger, ScrubOptions(span_ms=60_000)).to_json()
    assert summary["counts"]["ok"] == 300
    assert summary["counts"]["unledgered"] == 30
    assert summary["score"]["display"] == "perfect"
    assert summary["score"]["audited"] == 300
    assert summary["records_read"] == 330

    # A second capture resumes from the checkpoint: exactly the new records, no duplicates.
    second = capture_ledger(spark, client, [topic], ledger, once=True)
    assert sum(second.end_offsets[topic].values()) == 330
    assert records_count(spark, ledger) == 330
    again = run_scrub(spark, client, ledger, ScrubOptions()).to_json()
    assert again["counts"]["ok"] == 330
    assert again["counts"]["unledgered"] == 0
    assert again["chunks"]["suspect"] == 0, "the capture's chunk digests equal the log's: nothing re-read"
    assert again["chunks"]["matched"] == 3


def records_count(spark: SparkSession, ledger: LedgerPaths) -> int:
    rows = read_ledger(spark, ledger)
    return rows.filter("kind = 'record'").select("partition", "offset").distinct().count()


def test_delivery_reports_ledger_records_the_capture_never_saw(
    spark: SparkSession, kafka_cluster: KafkaCluster, new_topic: Callable[..., str], ledger: LedgerPaths
) -> None:
    from confluent_kafka import TopicPartition

    from strongroom.audit.delivery import DeliveryLedger

    bootstrap = kafka_cluster.bootstrap_servers
    client = ClientConfig(bootstrap)
    topic = new_topic(partitions=1)
    capture_ledger(spark, client, [topic], ledger, once=True)  # an empty capture: it saw nothing yet

    deliveries = DeliveryLedger(ledger)
    producer = build_producer(client.producer())
    for i in range(120):
        producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), on_delivery=deliveries.on_delivery)
    assert producer.flush(30) == 0
    assert deliveries.flush() == 120

    # records deleted before any capture read them: only the delivery reports know they existed
    for fut in kafka_cluster.admin().delete_records([TopicPartition(topic, 0, 20)]).values():
        fut.result(30)
    capture_ledger(spark, client, [topic], ledger, once=True)  # now the capture sees offsets 20..119 too

    summary = run_scrub(spark, client, ledger, ScrubOptions()).to_json()
    assert summary["counts"]["expired-unjustified"] == 20
    assert summary["counts"]["ok"] == 100, "captured and delivered rows of one record count once"
    assert summary["score"]["audited"] == 120


def test_cli_ledger_coverage_scrub_and_operations(
    spark: SparkSession,
    kafka_cluster: KafkaCluster,
    new_topic: Callable[..., str],
    ledger: LedgerPaths,
    capsys: pytest.CaptureFixture[str],
) -> None:
    bootstrap = kafka_cluster.bootstrap_servers
    topic = new_topic(partitions=2)
    produce(bootstrap, topic, (f"v{i}".encode() for i in range(50)))

    assert main(["--output", "json", "audit", "ledger", "-b", bootstrap, "--topic", topic, "--ledger", ledger.root,
                 "--once"]) == 0  # fmt: skip
    captured = json.loads(capsys.readouterr().out)
    assert sum(captured["end_offsets"][topic].values()) == 50

    assert main(["--output", "json", "audit", "coverage", "--ledger", ledger.root]) == 0
    coverage = json.loads(capsys.readouterr().out)["partitions"]
    assert sum(p["records"] for p in coverage) == 50
    assert all(len(p["ranges"]) == 1 for p in coverage)

    assert main(["audit", "scrub", "-b", bootstrap, "--ledger", ledger.root, "--span", "10m"]) == 0
    text = capsys.readouterr().out
    assert "durability perfect" in text

    assert main(["--output", "json", "audit", "operations", "-b", bootstrap, "--topic", topic]) == 0
    assert json.loads(capsys.readouterr().out) == {"operations": []}

    state = ledger.local(ledger.root) / "watch.json"
    for _ in range(2):  # the second run compares with the state the first one saved
        watch = ["--output", "json", "audit", "watch", "-b", bootstrap, "--topic", topic, "--ledger", ledger.root,
                 "--once", "--state", str(state)]  # fmt: skip
        assert main(watch) == 0
        lines = capsys.readouterr().out.strip().splitlines()
        assert json.loads(lines[-1])["summary"]["polls"] == 1
        assert json.loads(lines[-1])["summary"]["alerts"] == 0
    assert state.exists()

    assert main(["audit", "ledger", "-b", bootstrap, "--topic", "no-such-topic", "--ledger", ledger.root,
                 "--once"]) == 1  # fmt: skip
    assert "topic 'no-such-topic' does not exist" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("stopped", "reader"),
    [  # the JVM reader in both cases; the Python reader's catch-up loop where a run reads no rows
        ("with-a-short-plan", AuditReader.JVM),
        ("after-the-sink-wrote", AuditReader.JVM),
        ("after-the-sink-wrote", AuditReader.PYTHON),
    ],
)
def test_a_once_capture_after_a_stopped_one_catches_up_with_the_whole_log(
    spark: SparkSession,
    kafka_cluster: KafkaCluster,
    new_topic: Callable[..., str],
    ledger: LedgerPaths,
    reader: AuditReader,
    stopped: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A stopped streaming capture leaves the batch it had planned in the checkpoint (``offsets/N``
    without ``commits/N``), and ``--once`` re-runs that batch first. It must still end caught up with the
    whole log (it once ended early, and the scrub counted the rest unledgered):
    - ``with-a-short-plan``: the planned end is short of the log (the listing left out a partition whose
      leader was moving);
    - ``after-the-sink-wrote``: the capture stopped between the file sink's commit of batch N and Spark's
      ``commits/N`` (the clean run's broker-kill test stopped one there); the sink skips the re-run as
      already written, so it reads no rows, yet it moves the capture's end.

    The JVM reader supports ``availableNow``, so its query runs on; for the Python reader Spark runs one
    batch per query, so the capture starts the query again."""
    if stopped == "with-a-short-plan":
        client, topic = captured_then_more(spark, kafka_cluster, new_topic, ledger, more=200, reader=reader)
        offsets = Path(ledger.local(ledger.checkpoint)) / "offsets"
        last = last_batch(offsets)
        version, metadata, planned = (offsets / str(last)).read_text().splitlines()
        stale = json.loads(planned)  # what a stopped query planned: partition 0 short, partition 1 not moved
        stale[topic]["0"] = int(stale[topic]["0"]) + 10
        (offsets / str(last + 1)).write_text("\n".join([version, metadata, json.dumps(stale)]))
        records = 300
    else:
        client, topic = captured_then_more(spark, kafka_cluster, new_topic, ledger, more=50, reader=reader)
        capture_ledger(spark, client, [topic], ledger, once=True, reader=reader)
        commits = Path(ledger.local(ledger.checkpoint)) / "commits"
        last = last_batch(commits)
        for done in (commits / str(last), commits / f".{last}.crc"):  # the sink has batch ``last``; the
            done.unlink(missing_ok=True)  # checkpoint never recorded it done (nor its Hadoop checksum)
        produce_keyed(client.bootstrap_servers, topic, "c", 80)
        records = 230

    assert_a_once_capture_catches_up(spark, client, topic, ledger, records=records, reader=reader, caplog=caplog)


def test_a_partition_offline_during_a_capture_keeps_its_place_and_is_not_read_again(
    spark: SparkSession, kafka_cluster3: KafkaCluster, unique_name: Callable[[str], str], tmp_path: Path
) -> None:
    """A partition whose only replica is down does not answer the capture's listing. A batch end without it
    made the next batch read it again from its log start, and the ledger held its records twice. The JVM reader
    ends the batch where that partition had got to; the Python reader (its API has no start offset there)
    fails the capture naming the partition, and the next capture goes on from where the last one ended.
    Both readers, each with its own ledger, through one outage."""
    cluster = kafka_cluster3
    client = ClientConfig(cluster.bootstrap_servers)
    ledgers = {reader: LedgerPaths(str(tmp_path / f"ledger-{reader}")) for reader in AuditReader}
    steady = create_topic_on(cluster, unique_name("steady"), [1], {})
    offline = create_topic_on(cluster, unique_name("offline"), [2], {})

    def capture(reader: AuditReader) -> None:
        capture_ledger(spark, client, [steady, offline], ledgers[reader], once=True, reader=reader)

    for topic in (steady, offline):
        produce(cluster.bootstrap_servers, topic, (f"a{i}".encode() for i in range(40)), partition=0)
    for reader in AuditReader:
        capture(reader)
    cluster.stop_broker(2)
    try:
        produce(cluster.bootstrap_servers, steady, (f"b{i}".encode() for i in range(10)), partition=0)
        capture(AuditReader.JVM)  # the listing leaves `offline` out
        with pytest.raises(KafkaReadError, match=rf"no leader answered for the end of {offline}\[0\]"):
            capture(AuditReader.PYTHON)
    finally:
        cluster.start_broker(2)
    wait_for(cluster, "the offline topic's leader back", lambda: cluster.partition_leader(offline) == 2)
    produce(cluster.bootstrap_servers, offline, (f"c{i}".encode() for i in range(5)), partition=0)
    for reader, ledger in ledgers.items():
        capture(reader)
        rows = read_ledger(spark, ledger).filter("kind = 'record'")
        per_topic = {r["topic"]: (r["rows"], r["offsets"]) for r in rows.groupBy("topic").agg(
            F.count("*").alias("rows"), F.countDistinct("offset").alias("offsets")).collect()}  # fmt: skip
        assert per_topic == {steady: (50, 50), offline: (45, 45)}, reader


def captured_then_more(
    spark: SparkSession,
    kafka_cluster: KafkaCluster,
    new_topic: Callable[..., str],
    ledger: LedgerPaths,
    *,
    more: int,
    reader: AuditReader,
) -> tuple[ClientConfig, str]:
    """A two-partition topic: 100 records captured by a ``--once`` capture, then ``more`` records not yet."""
    client = ClientConfig(kafka_cluster.bootstrap_servers)
    topic = new_topic(partitions=2)
    produce_keyed(client.bootstrap_servers, topic, "a", 100)
    capture_ledger(spark, client, [topic], ledger, once=True, reader=reader)
    produce_keyed(client.bootstrap_servers, topic, "b", more)
    return client, topic


def produce_keyed(bootstrap: str, topic: str, prefix: str, count: int) -> None:
    produce(bootstrap, topic, (f"{prefix}{i}".encode() for i in range(count)), key=lambda i: f"k{i}".encode())


def last_batch(log: Path) -> int:
    """The latest batch id in a checkpoint log directory (``offsets`` or ``commits``)."""
    return max(int(f.name) for f in log.iterdir() if f.name.isdigit())


def assert_a_once_capture_catches_up(
    spark: SparkSession,
    client: ClientConfig,
    topic: str,
    ledger: LedgerPaths,
    *,
    records: int,
    reader: AuditReader,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A ``--once`` capture ends at the log's end of both partitions, with every record ledgered once; with the
    JVM reader (``availableNow``) in one run of its query."""
    with caplog.at_level(logging.INFO, logger="strongroom.audit.ledger"):
        caught_up = capture_ledger(spark, client, [topic], ledger, once=True, reader=reader)
    runs_again = [r.getMessage() for r in caplog.records if "running it again" in r.getMessage()]
    if reader is AuditReader.JVM:
        assert runs_again == []
    ends = {p: kafka_cluster_end(client, topic, p) for p in range(2)}
    assert caught_up.end_offsets[topic] == {str(p): e for p, e in ends.items()}
    assert records_count(spark, ledger) == records
    summary = run_scrub(spark, client, ledger, ScrubOptions()).to_json()
    assert (summary["counts"]["ok"], summary["counts"]["unledgered"]) == (records, 0)


def kafka_cluster_end(client: ClientConfig, topic: str, partition: int) -> int:
    from strongroom.kafka.transport import new_consumer, watermarks

    consumer = new_consumer(client)
    try:
        return watermarks(consumer, topic, partition)[1]
    finally:
        consumer.close()
