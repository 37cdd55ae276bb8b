"""Boundary search vs a full linear readability scan of the same 1M-record partition, in one run.

Usage: .venv/bin/python bench/recover_search.py [--records 1000000] [--lost-fraction 0.4] [--per-dek 10000]
       [--repeat 3] [--spark]

Setup (not timed): one Kafka broker and OpenBao; one partition of N WRAPPED_DEK records (a new DEK
every ``--per-dek`` records, as a writer rotating its DEK per window would), the first
``lost-fraction`` under KEK A, the rest under KEK B; then KEK A is deleted from OpenBao.

Timed, each with a cold verdict cache and a new consumer (so KMS calls and connecting are included),
``--repeat`` runs each, interleaved; the ratio is of the medians (the best runs are printed too):

* **search** — ``recover scan``'s binary search: one-record fetches (assign, seek, poll) judged by the
  cheap key check;
* **linear** (baseline) — the straightforward alternative: consume the whole partition with
  librdkafka's batch ``consume`` and judge every record with the same check (its verdict cache makes
  that one KMS call per distinct EDEK plus a prefix cut per record), L = 1 + last lost offset;
* with ``--spark``, also the Spark verification of the whole partition (what ``recover scan`` does
  after the search), for reference.

Last line: ``RESULT recover-search ratio=<linear/search> fetches=<n> ...``.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from confluent_kafka import TopicPartition

from strongroom.crypto.limits import DekUsagePolicy
from strongroom.envelope import RecordContext, ValueMode, marker_header
from strongroom.kafka.config import ClientConfig, produce_when_room
from strongroom.kafka.transport import build_consumer, build_producer
from strongroom.kms.admin.vault import VaultKekAdmin
from strongroom.kms.envelope_keys import RotatingDekSource
from strongroom.kms.metered import MeteredKms
from strongroom.kms.retrying import RetryingKms
from strongroom.kms.vault import VaultKms
from strongroom.recovery import spark_jobs
from strongroom.recovery.checker import AvailabilityChecker
from strongroom.recovery.formats import StrongroomFormat
from strongroom.recovery.kafka_io import ClusterView, KafkaProbe
from strongroom.recovery.search import probe_budget, search_boundaries
from strongroom.testing.kafka_cluster import KafkaCluster
from strongroom.testing.openbao import OpenBaoServer

TOPIC = "bench-recover"


def produce(bootstrap: str, kms: VaultKms, kek_a: str, kek_b: str, n: int, lost: int, per_dek: int) -> None:
    producer = build_producer(ClientConfig(bootstrap).producer({"linger.ms": 50, "batch.size": 1_000_000}))
    sources = {
        kek: RotatingDekSource(kms, kek, DekUsagePolicy(max_encryptions=per_dek, max_age_seconds=None))
        for kek in (kek_a, kek_b)
    }
    headers = [marker_header(ValueMode.WHOLE_VALUE)]
    started = time.perf_counter()
    for i in range(n):
        key = b"customer-%d" % (i % 50_000)
        payload = b'{"order": %d, "total": 42.5, "items": 3, "country": "DE"}' % i
        value = sources[kek_a if i < lost else kek_b].seal(payload, RecordContext(TOPIC, key))
        produce_when_room(producer, TOPIC, value=value, key=key, headers=headers, partition=0)
        if i % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(120) == 0
    print(f"produced {n:,} records ({lost:,} under KEK A) in {time.perf_counter() - started:.1f}s")


def fresh_checker(openbao: OpenBaoServer) -> tuple[AvailabilityChecker, MeteredKms]:
    metered = MeteredKms(VaultKms.from_config({"address": openbao.address, "token": openbao.token}))
    return AvailabilityChecker(StrongroomFormat(), RetryingKms(metered)), metered


def run_search(config: ClientConfig, openbao: OpenBaoServer, bounds: dict[int, tuple[int, int]]) -> dict[str, Any]:
    checker, metered = fresh_checker(openbao)
    with KafkaProbe(config, TOPIC) as probe:
        started = time.perf_counter()
        results = search_boundaries(bounds, probe, lambda r: checker.check_record(r.headers, r.value))
        elapsed = time.perf_counter() - started
    result = results[0]
    return {"seconds": elapsed, "boundary": result.boundary, "fetches": result.probes,
            "kms_calls": metered.snapshot()["calls"]}  # fmt: skip


def run_linear(
    config: ClientConfig, openbao: OpenBaoServer, start: int, end: int, *, check: bool = True
) -> dict[str, Any]:
    checker, metered = fresh_checker(openbao)
    consumer = build_consumer(config.consumer("bench-linear", {"enable.partition.eof": True}))
    consumer.assign([TopicPartition(TOPIC, 0, start)])
    last_lost, seen = None, 0
    started = time.perf_counter()
    done = False
    while not done:
        for msg in consumer.consume(num_messages=10_000, timeout=1.0):
            if msg.error():
                done = "EOF" in msg.error().name()
                continue
            seen += 1
            if check and checker.check_record(msg.headers(), msg.value()).lost:
                last_lost = msg.offset()
            if msg.offset() >= end - 1:
                done = True
    elapsed = time.perf_counter() - started
    consumer.close()
    boundary = start if last_lost is None else last_lost + 1
    if not check:
        boundary = -1
    return {"seconds": elapsed, "boundary": boundary, "records": seen, "kms_calls": metered.snapshot()["calls"]}


def run_spark(config: ClientConfig, openbao: OpenBaoServer, start: int, end: int, searched: int) -> float:
    """The verification ``recover scan`` runs after the search (both Spark passes), on a warm session."""
    from strongroom.recovery.scan import verify_partitions
    from strongroom.recovery.search import SearchResult
    from strongroom.spark.session import build_spark_session

    spark = build_spark_session(app_name="bench-recover")
    spark.range(1).count()  # JVM warm-up is not part of the verification
    checker, _ = fresh_checker(openbao)
    options = spark_jobs.kafka_source_options(config)
    started = time.perf_counter()
    summary, _ = verify_partitions(
        spark, options, TOPIC, {0: (start, end)}, {0: SearchResult(0, start, end, searched, 0)}, checker,
        lambda *_: None,
    )  # fmt: skip
    elapsed = time.perf_counter() - started
    last_lost = summary[0].last_lost
    assert last_lost is not None, summary
    assert last_lost + 1 == searched, summary
    spark.stop()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--lost-fraction", type=float, default=0.4)
    parser.add_argument("--per-dek", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--spark", action="store_true", help="also time the Spark verification of the partition")
    args = parser.parse_args()
    lost = int(args.records * args.lost_fraction)
    with KafkaCluster(brokers=1) as cluster, OpenBaoServer() as openbao:
        bootstrap = cluster.bootstrap_servers
        cluster.create_topic(TOPIC, 1, 1, {"segment.bytes": str(256 * 1024 * 1024)})
        kms = VaultKms.from_config({"address": openbao.address, "token": openbao.token})
        admin = VaultKekAdmin(openbao.client())
        kek_a, kek_b = admin.create_kek("bench-a"), admin.create_kek("bench-b")
        produce(bootstrap, kms, kek_a, kek_b, args.records, lost, args.per_dek)
        admin.delete_kek(kek_a)
        config = ClientConfig(bootstrap)
        bounds = ClusterView(config).bounds(TOPIC, [0])
        start, end = bounds[0]
        searches, linears = [], []
        for _ in range(args.repeat):
            searches.append(run_search(config, openbao, bounds))
            linears.append(run_linear(config, openbao, start, end))
        assert {r["boundary"] for r in searches + linears} == {lost}, (searches, linears)
        consume_only = run_linear(config, openbao, start, end, check=False)["seconds"]
        search = sorted(searches, key=lambda r: r["seconds"])[len(searches) // 2]
        linear = sorted(linears, key=lambda r: r["seconds"])[len(linears) // 2]
        best_ratio = min(r["seconds"] for r in linears) / min(r["seconds"] for r in searches)
        budget = probe_budget(end - start)
        print(f"partition: {end - start:,} offsets, L = {lost:,}; fetch budget 2*ceil(log2 n)+8 = {budget}")
        print(f"search : median {search['seconds']:.3f}s of {[round(r['seconds'], 3) for r in searches]}, "
              f"{search['fetches']} fetches, {search['kms_calls']} KMS calls")  # fmt: skip
        print(f"linear : median {linear['seconds']:.3f}s of {[round(r['seconds'], 3) for r in linears]}, "
              f"{linear['records']:,} records ({linear['records'] / linear['seconds']:,.0f}/s), "
              f"{linear['kms_calls']} KMS calls; consuming alone (no check) took {consume_only:.2f}s")  # fmt: skip
        extra = ""
        if args.spark:
            spark_seconds = run_spark(config, openbao, start, end, lost)
            print(f"spark verification of the whole partition: {spark_seconds:.1f}s")
            extra = f" spark_verify_s={spark_seconds:.1f}"
        ratio = linear["seconds"] / search["seconds"]
        print(json.dumps({"search": search, "linear": linear}, default=str))
        print(
            f"RESULT recover-search ratio={ratio:.1f} best_ratio={best_ratio:.1f} fetches={search['fetches']} "
            f"budget={probe_budget(end - start)} "
            f"records={end - start} search_s={search['seconds']:.3f} linear_s={linear['seconds']:.2f} "
            f"consume_only_s={consume_only:.2f} search_kms_calls={search['kms_calls']} "
            f"linear_kms_calls={linear['kms_calls']}{extra}"
        )


if __name__ == "__main__":
    main()
