"""Scrub throughput against a plain confluent-kafka read, ledger capture lag at 50k records/s, and
ledger bytes per record - on a real 1-broker KRaft cluster and a local[2] Spark session (2 cores).

* baseline: one process reads the whole topic with a tuned assigned Consumer (``consume`` in batches
  of 10,000, large fetches, values taken column-wise with list comprehensions and their lengths
  summed) - the fastest plain read of every record we know in Python, no hashing;
* scrub: ``strongroom.audit.scrub.run_scrub`` end to end - plan offset ranges, read the log in the
  executors (hashing key, value and headers of every record), join with the ledger, classify, count,
  write the history - timed from call to return, Spark job overheads included;
* capture lag: records produced at 50,000/s (a separate producer process) while the ledger capture
  runs continuously; lag = ``read_at - timestamp`` of every captured record (CreateTime set by the
  producer), p50/p99/max;
* ledger bytes per record: Parquet bytes of the ledger's record files / records.

    .venv/bin/python bench/scrub_throughput.py [records] [partitions]

The last line is ``RESULT scrub ratio=<scrub rate / raw read rate> ...``.
"""

from __future__ import annotations

import multiprocessing as mp
import shutil
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from strongroom.audit.ledger import capture_ledger, read_ledger
from strongroom.audit.scrub import ScrubOptions, run_scrub
from strongroom.audit.store import LedgerPaths
from strongroom.kafka.config import ClientConfig, produce_when_room
from strongroom.spark.session import build_spark_session
from strongroom.testing.kafka_cluster import KafkaCluster

VALUE = b"x" * 90


def fill(bootstrap: str, topic: str, records: int) -> None:
    producer = Producer(ClientConfig(bootstrap).producer({"linger.ms": 20, "batch.size": 1_000_000}))
    for i in range(records):
        produce_when_room(producer, topic, key=b"key-%d" % (i % 10_000), value=VALUE + b"%08d" % i)
        if i % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(120) == 0


def raw_read(bootstrap: str, topic: str, partitions: int, expected: int) -> float:
    """Records per second of one tuned consumer reading everything."""
    consumer = Consumer(
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


def paced_producer(bootstrap: str, topic: str, rate: int, seconds: float, done: mp.Event) -> None:  # type: ignore[valid-type]
    producer = Producer(ClientConfig(bootstrap).producer({"linger.ms": 5}))
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


def main() -> int:
    records = int(sys.argv[1]) if len(sys.argv) > 1 else 2_000_000
    partitions = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    work = Path(tempfile.mkdtemp(prefix="strongroom-bench-scrub-"))
    cluster = KafkaCluster(brokers=1, heap="1g").start()
    spark = build_spark_session(app_name="bench-scrub")
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
        print(f"ledger capture (availableNow, from scratch): {records / capture_s:,.0f} records/s ({capture_s:.1f}s)")
        record_files = list((work / "ledger" / "records").rglob("kind=record/*.parquet"))
        ledger_bytes = sum(f.stat().st_size for f in record_files)
        bytes_per_record = ledger_bytes / records
        print(f"ledger: {ledger_bytes:,} bytes in {len(record_files)} files = {bytes_per_record:.1f} bytes/record")

        raw_rates = []
        scrub_rates = []
        for round_ in range(2):
            raw = raw_read(bs, topic, partitions, records)
            t0 = time.perf_counter()
            summary = run_scrub(spark, client, ledger, ScrubOptions(span_ms=3_600_000)).to_json()
            scrub_s = time.perf_counter() - t0
            assert summary["counts"]["ok"] == records, summary["counts"]
            scrub = records / scrub_s
            raw_rates.append(raw)
            scrub_rates.append(scrub)
            print(f"round {round_ + 1}: raw read {raw:,.0f} records/s; scrub {scrub:,.0f} records/s "
                  f"({scrub_s:.1f}s, score {summary['score']['display']}, chunks {summary['chunks']}, "
                  f"phases {summary['phases']})")  # fmt: skip
        raw, scrub = max(raw_rates), max(scrub_rates)

        # capture lag while producing at 50k records/s
        lag_topic = cluster.create_topic("bench-lag", partitions)
        lag_ledger = LedgerPaths(str(work / "lag-ledger"))
        rate, seconds = 50_000, 30.0
        done = mp.get_context("spawn").Event()
        proc = mp.get_context("spawn").Process(target=paced_producer, args=(bs, lag_topic, rate, seconds, done))
        proc.start()
        capture_ledger(spark, client, [lag_topic], lag_ledger, once=False, trigger_seconds=0.5,
                       starting_offsets="earliest", stop=lambda: done.is_set() and not proc.is_alive())  # fmt: skip
        proc.join()
        capture_ledger(spark, client, [lag_topic], lag_ledger, once=True)
        frame = read_ledger(spark, lag_ledger).filter("kind = 'record'")
        lag = frame.selectExpr("read_at - timestamp AS lag")
        p50, p99 = lag.approxQuantile("lag", [0.5, 0.99], 0.001)
        stats = frame.selectExpr("count(*) AS n", "max(read_at - timestamp) AS mx", "min(timestamp) AS t0",
                                 "max(timestamp) AS t1").collect()[0]  # fmt: skip
        achieved = stats["n"] / max(0.001, (stats["t1"] - stats["t0"]) / 1000)
        print(f"capture lag at {achieved:,.0f} records/s produced ({stats['n']:,} records): "
              f"p50 {p50 / 1000:.2f}s, p99 {p99 / 1000:.2f}s, max {stats['mx'] / 1000:.2f}s")  # fmt: skip

        ratio = scrub / raw
        print(f"RESULT scrub ratio={ratio:.2f} scrub_rps={scrub:.0f} raw_rps={raw:.0f} records={records} "
              f"capture_lag_p50_s={p50 / 1000:.2f} capture_lag_p99_s={p99 / 1000:.2f} "
              f"ledger_bytes_per_record={bytes_per_record:.1f}")  # fmt: skip
        return 0
    finally:
        spark.stop()
        cluster.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
