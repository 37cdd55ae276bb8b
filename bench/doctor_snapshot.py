"""How long a doctor run takes, and what collecting one snapshot saves.

Against a real 1-broker KRaft cluster with N topics:

* doctor's collection: DescribeCluster + one Metadata request + one batched DescribeConfigs for all
  topics + one per broker (``strongroom.doctor.collect.collect_snapshot``);
* baseline, measured in the same run: the per-topic way - what a loop over ``kafka-configs --describe
  --entity-name T`` does, minus the JVM start - one DescribeConfigs round trip per topic.

Then the rules alone over a synthetic snapshot of 20,000 topics / 200,000 partitions (no I/O).

    .venv/bin/python bench/doctor_snapshot.py [topics]

The last line is ``RESULT doctor_snapshot ratio=<baseline/doctor> ...``.
"""

from __future__ import annotations

import statistics
import sys
import time

from strongroom.doctor import Broker, ClusterSnapshot, ConfigValue, Partition, Topic, check_snapshot
from strongroom.doctor.collect import collect_snapshot
from strongroom.testing.kafka_cluster import KafkaCluster


def create_topics(cluster: KafkaCluster, names: list[str]) -> None:
    from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

    admin = cluster.admin()
    for start in range(0, len(names), 100):
        batch = names[start : start + 100]
        futures = admin.create_topics([NewTopic(n, num_partitions=1, replication_factor=1) for n in batch])
        for future in futures.values():
            future.result(60)
    deadline = time.monotonic() + 120
    while len(admin.list_topics(timeout=10).topics) < len(names) and time.monotonic() < deadline:
        time.sleep(0.2)


def per_topic_baseline(cluster: KafkaCluster, names: list[str]) -> float:
    from confluent_kafka.admin import ConfigResource, ResourceType  # type: ignore[attr-defined]

    admin = cluster.admin()
    started = time.perf_counter()
    admin.list_topics(timeout=10)
    for name in names:
        for future in admin.describe_configs([ConfigResource(ResourceType.TOPIC, name)]).values():
            future.result(30)
    return time.perf_counter() - started


def synthetic_snapshot(topics: int, partitions: int, brokers: int = 6) -> ClusterSnapshot:
    config = {
        "min.insync.replicas": ConfigValue("2", "cluster-default"),
        "cleanup.policy": ConfigValue("delete", "kafka-default"),
        "unclean.leader.election.enable": ConfigValue("false", "kafka-default"),
    }
    made: dict[str, Topic] = {}
    for t in range(topics):
        parts = tuple(
            Partition(p, 1 + (t + p) % brokers, r := tuple(1 + (t + p + i) % brokers for i in range(3)), r)
            for p in range(partitions)
        )
        made[f"topic-{t}"] = Topic(f"topic-{t}", parts, config)
    return ClusterSnapshot(
        "bench:9092", "bench", 1000, tuple(Broker(i) for i in range(1, brokers + 1)), made, frozenset(made)
    )


def main() -> None:
    n_topics = int(sys.argv[1]) if len(sys.argv) > 1 else 400
    names = [f"bench-doctor-{i:05d}" for i in range(n_topics)]
    with KafkaCluster(brokers=1) as cluster:
        t0 = time.perf_counter()
        create_topics(cluster, names)
        print(f"created {n_topics} topics in {time.perf_counter() - t0:.1f}s")
        doctor_runs, naive_runs = [], []
        for _ in range(3):
            started = time.perf_counter()
            snapshot = collect_snapshot(cluster.bootstrap_servers, timeout=30)
            doctor_runs.append(time.perf_counter() - started)
            naive_runs.append(per_topic_baseline(cluster, names))
        assert len(snapshot.checked) == n_topics
    doctor_s, naive_s = statistics.median(doctor_runs), statistics.median(naive_runs)
    print(f"doctor snapshot ({n_topics} topics, batched):  median {doctor_s:.3f}s  runs {doctor_runs}")
    print(f"per-topic DescribeConfigs baseline:        median {naive_s:.3f}s  runs {naive_runs}")

    big = synthetic_snapshot(20_000, 10)
    started = time.perf_counter()
    report = check_snapshot(big)
    rules_s = time.perf_counter() - started
    print(f"18 rules over 20,000 topics / 200,000 partitions: {rules_s:.2f}s, {len(report.findings)} findings")
    print(
        f"RESULT doctor_snapshot ratio={naive_s / doctor_s:.1f} topics={n_topics} doctor_s={doctor_s:.3f} "
        f"per_topic_s={naive_s:.3f} rules_200k_partitions_s={rules_s:.2f}"
    )


if __name__ == "__main__":
    main()
