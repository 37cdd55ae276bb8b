"""Scrub throughput against a plain confluent-kafka read and against Spark's own Kafka source, ledger
capture rate and lag at 100,000 records/s, and ledger bytes per record - on a real 1-broker KRaft
cluster and a local[2] Spark session (2 cores).

* baseline 1, raw read: one process reads the whole topic with a tuned assigned Consumer (``consume``
  in batches of 10,000, large fetches, values taken column-wise with list comprehensions and their
  lengths summed) - the fastest plain read of every record we know in Python, no hashing;
* baseline 2, Spark read: ``spark.read.format("kafka")...count()`` over the same topic and partitions
  (read_committed, one Spark partition per Kafka partition, the same session), no hashing;
* scrub: ``strongroom.audit.scrub.run_scrub`` end to end with the audit's default reader (the JVM
  reader) - plan offset ranges, read the log in the executors (hashing key, value and headers of
  every record), compare chunk digests with the ledger, classify, count, write the history - timed
  from call to return, Spark job overheads included; every round must score every record ``ok``;
* one untimed warm-up round of all three, then ``ROUNDS`` interleaved rounds (raw, Spark, scrub);
  medians; the Python reader's scrub is measured once more for comparison;
* capture: the ledger from scratch (``availableNow``), records/s; then records produced at 100,000/s
  (two producer processes of 50,000/s) while the capture runs continuously; lag = ``read_at -
  timestamp`` of every captured record (CreateTime set by the producer), p50/p99/max;
* ledger bytes per record: Parquet bytes of the ledger's record files / records.

    .venv/bin/python bench/scrub_throughput.py [records] [partitions] [rounds]

The last lines are ``RESULT scrub ratio=<scrub / raw read> ...`` and ``RESULT scrub-vs-spark-read
ratio=<scrub / Spark Kafka count> ...``.
"""

from __future__ import annotations

import multiprocessing as mp
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import TopicPartition

from strongroom.audit.ledger import capture_ledger, read_ledger
from strongroom.audit.readers import AuditReader
from strongroom.audit.scrub import ScrubOptions, run_scrub
from strongroom.audit.store import LedgerPaths
from strongroom.kafka.config import ClientConfig, produce_when_room
from strongroom.kafka.transport import build_consumer, build_producer
from strongroom.spark.session import build_spark_session
from strongroom.testing.kafka_cluster import KafkaCluster

VALUE = b"x" * 90
#: Records per second the capture-lag test produces, and the producer processes that share it.
LAG_RATE, LAG_PRODUCERS, LAG_SECONDS = 100_000, 2, 30.0


def fill(bootstrap: str, topic: str, records: int) -> None:
    producer = build_producer(ClientConfig(bootstrap).producer({"linger.ms": 20, "batch.size": 1_000_000}))
    for i in range(records):
        produce_when_room(producer, topic, key=b"key-%d" % (i % 10_000), value=VALUE + b"%08d" % i)
        if i % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(120) == 0


def raw_read(bootstrap: str, topic: str, partitions: int, expected: int) -> float:
    """Records per second of one tuned consumer reading everything."""
    consumer = build_consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-raw",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.max.bytes": 64 * 1024 * 1024,
            "max.partition.fetch.bytes": 16 * 1024 * 1024,
            "queued.min.messages": 200_000,
            "isolation.level": "read_committed",
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    started = time.perf_counter()
    seen = eof = 0
    nbytes = 0
    while eof < partitions:
        msgs = consumer.consume(10_000, 1.0)
        errors = [m.error() for m in msgs]
        if any(errors):
            eof += sum(1 for e in errors if e is not None and e.code() == -191)
            msgs = [m for m, e in zip(msgs, errors, strict=True) if e is None]
        values = [m.value() for m in msgs]  # column-wise, as fast as Python reads a topic
        nbytes += sum(map(len, filter(None, values)))
        seen += len(values)
    seconds = time.perf_counter() - started
    consumer.close()
    assert seen == expected, (seen, expected)
    return seen / seconds


def spark_count(spark: Any, bootstrap: str, topic: str, expected: int) -> float:
    """Records per second of Spark's own Kafka source counting the topic (one task per Kafka partition)."""
    started = time.perf_counter()
    n = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .option("kafka.isolation.level", "read_committed")
        .load()
        .count()
    )
    seconds = time.perf_counter() - started
    assert n == expected, (n, expected)
    return n / seconds


def scrub(
    spark: Any, client: ClientConfig, ledger: LedgerPaths, records: int, reader: AuditReader
) -> tuple[float, Any]:
    """Records per second of one scrub (every record must come out ok) and its summary."""
    started = time.perf_counter()
    summary = run_scrub(spark, client, ledger, ScrubOptions(span_ms=3_600_000, reader=reader)).to_json()
    seconds = time.perf_counter() - started
    assert {k: v for k, v in summary["counts"].items() if v} == {"ok": records}, summary["counts"]
    return records / seconds, summary


def paced_producer(bootstrap: str, topic: str, rate: int, seconds: float, done: Any) -> None:
    producer = build_producer(ClientConfig(bootstrap).producer({"linger.ms": 5, "batch.size": 1_000_000}))
    started = time.perf_counter()
    sent = 0
    while (elapsed := time.perf_counter() - started) < seconds:
        due = int(elapsed * rate)
        while sent < due:
            try:
                producer.produce(topic, key=b"k%d" % (sent % 1000), value=VALUE)
                sent += 1
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
        time.sleep(0.002)
    producer.flush(60)
    done.set()


def capture_lag(spark: Any, cluster: KafkaCluster, work: Path, partitions: int) -> tuple[float, float, float, float]:
    """(achieved produce rate, p50, p99, max lag in seconds) of a continuous capture at LAG_RATE."""
    bs = cluster.bootstrap_servers
    client = ClientConfig(bs)
    topic = cluster.create_topic("bench-lag", partitions)
    ledger = LedgerPaths(str(work / "lag-ledger"))
    ctx = mp.get_context("spawn")
    dones = [ctx.Event() for _ in range(LAG_PRODUCERS)]
    procs = [ctx.Process(target=paced_producer, args=(bs, topic, LAG_RATE // LAG_PRODUCERS, LAG_SECONDS, d))
             for d in dones]  # fmt: skip
    for p in procs:
        p.start()
    capture_ledger(spark, client, [topic], ledger, once=False, trigger_seconds=0.5, starting_offsets="earliest",
                   stop=lambda: all(d.is_set() for d in dones) and not any(p.is_alive() for p in procs))  # fmt: skip
    for p in procs:
        p.join()
    capture_ledger(spark, client, [topic], ledger, once=True)
    frame = read_ledger(spark, ledger).filter("kind = 'record'")
    p50, p99 = frame.selectExpr("read_at - timestamp AS lag").approxQuantile("lag", [0.5, 0.99], 0.001)
    stats = frame.selectExpr("count(*) AS n", "max(read_at - timestamp) AS mx", "min(timestamp) AS t0",
                             "max(timestamp) AS t1").collect()[0]  # fmt: skip
    achieved = stats["n"] / max(0.001, (stats["t1"] - stats["t0"]) / 1000)
    print(f"capture lag at {achieved:,.0f} records/s produced ({stats['n']:,} records): "
          f"p50 {p50 / 1000:.2f}s, p99 {p99 / 1000:.2f}s, max {stats['mx'] / 1000:.2f}s")  # fmt: skip
    return achieved, p50 / 1000, p99 / 1000, stats["mx"] / 1000


def main() -> int:
    records = int(sys.argv[1]) if len(sys.argv) > 1 else 2_000_000
    partitions = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    work = Path(tempfile.mkdtemp(prefix="strongroom-bench-scrub-"))
    cluster = KafkaCluster(brokers=1, heap="1g").start()
    spark = build_spark_session(app_name="bench-scrub", dataplane=True)
    try:
        bs = cluster.bootstrap_servers
        client = ClientConfig(bs)
        topic = cluster.create_topic("bench-scrub", partitions)
        t0 = time.perf_counter()
        fill(bs, topic, records)
        print(
            f"produced {records:,} records of ~100 bytes to {partitions} partitions in {time.perf_counter() - t0:.1f}s"
        )

        ledger = LedgerPaths(str(work / "ledger"))
        t0 = time.perf_counter()
        capture_ledger(spark, client, [topic], ledger, once=True)
        capture_s = time.perf_counter() - t0
        capture_rps = records / capture_s
        print(
            f"ledger capture (availableNow, from scratch, JVM reader): {capture_rps:,.0f} records/s ({capture_s:.1f}s)"
        )
        record_files = list((work / "ledger" / "records").rglob("kind=record/*.parquet"))
        ledger_bytes = sum(f.stat().st_size for f in record_files)
        bytes_per_record = ledger_bytes / records
        print(f"ledger: {ledger_bytes:,} bytes in {len(record_files)} files = {bytes_per_record:.1f} bytes/record")

        raw_read(bs, topic, partitions, records)  # warm-up, untimed: broker page cache, Spark's JVM and code
        spark_count(spark, bs, topic, records)
        scrub(spark, client, ledger, records, AuditReader.JVM)
        raw_rates, spark_rates, scrub_rates = [], [], []
        for round_ in range(rounds):
            raw_rates.append(raw_read(bs, topic, partitions, records))
            spark_rates.append(spark_count(spark, bs, topic, records))
            rate, summary = scrub(spark, client, ledger, records, AuditReader.JVM)
            scrub_rates.append(rate)
            print(f"round {round_ + 1}: raw read {raw_rates[-1]:,.0f} records/s; Spark Kafka count "
                  f"{spark_rates[-1]:,.0f} records/s; scrub {rate:,.0f} records/s (score "
                  f"{summary['score']['display']}, chunks {summary['chunks']}, "
                  f"phases {summary['phases']})")  # fmt: skip
        raw, spark_read, scrubbed = (statistics.median(r) for r in (raw_rates, spark_rates, scrub_rates))
        python_rate, _ = scrub(spark, client, ledger, records, AuditReader.PYTHON)
        print(f"medians of {rounds} rounds: raw read {raw:,.0f}, Spark Kafka count {spark_read:,.0f}, scrub "
              f"{scrubbed:,.0f} records/s; for comparison, one scrub with the Python reader: "
              f"{python_rate:,.0f}")  # fmt: skip

        achieved, p50, p99, _ = capture_lag(spark, cluster, work, partitions)

        print(f"RESULT scrub ratio={scrubbed / raw:.2f} scrub_rps={scrubbed:.0f} raw_rps={raw:.0f} records={records} "
              f"rounds={rounds} capture_rps={capture_rps:.0f} capture_rate={achieved:.0f} "
              f"capture_lag_p50_s={p50:.2f} capture_lag_p99_s={p99:.2f} "
              f"ledger_bytes_per_record={bytes_per_record:.1f}")  # fmt: skip
        print(f"RESULT scrub-vs-spark-read ratio={scrubbed / spark_read:.2f} scrub_rps={scrubbed:.0f} "
              f"spark_read_rps={spark_read:.0f} python_reader_scrub_rps={python_rate:.0f}")  # fmt: skip
        return 0
    finally:
        spark.stop()
        cluster.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
