"""Hand-built cluster snapshots for the doctor's rule tests: healthy unless a test says otherwise."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from strongroom.doctor.snapshot import Broker, ClusterSnapshot, ConfigValue, Partition, Topic

#: A well-configured cluster's broker settings, as DescribeConfigs reports them.
HEALTHY_BROKER_CONFIG: dict[str, ConfigValue] = {
    "min.insync.replicas": ConfigValue("2", "cluster-default"),
    "default.replication.factor": ConfigValue("3", "broker-static"),
    "unclean.leader.election.enable": ConfigValue("false", "kafka-default"),
    "offsets.topic.replication.factor": ConfigValue("3", "kafka-default"),
    "transaction.state.log.replication.factor": ConfigValue("3", "kafka-default"),
    "transaction.state.log.min.isr": ConfigValue("2", "kafka-default"),
}


def topic(
    name: str,
    rf: int = 3,
    partitions: int = 1,
    *,
    min_isr: int | None = 2,
    min_isr_source: str = "cluster-default",
    config: Mapping[str, str] | None = None,
    isr: Sequence[int] | None = None,
    leader: int | None = None,
    brokers: Sequence[int] = (1, 2, 3, 4),
) -> Topic:
    """A topic whose partitions are spread round-robin over ``brokers``; ``isr``/``leader`` apply to all."""
    parts = []
    for p in range(partitions):
        replicas = tuple(brokers[(p + i) % len(brokers)] for i in range(rf))
        in_sync = tuple(isr) if isr is not None else replicas
        parts.append(Partition(p, leader if leader is not None else replicas[0], replicas, in_sync))
    values: dict[str, ConfigValue] = {
        "cleanup.policy": ConfigValue("delete", "kafka-default"),
        "unclean.leader.election.enable": ConfigValue("false", "kafka-default"),
        "segment.ms": ConfigValue("604800000", "kafka-default"),
        "max.compaction.lag.ms": ConfigValue(str(2**63 - 1), "kafka-default"),
        "min.cleanable.dirty.ratio": ConfigValue("0.5", "kafka-default"),
    }
    if min_isr is not None:
        values["min.insync.replicas"] = ConfigValue(str(min_isr), min_isr_source)
    for key, value in (config or {}).items():
        values[key] = ConfigValue(value, "topic")
    return Topic(name, tuple(parts), values)


def snapshot(
    *topics: Topic,
    brokers: int | Sequence[int] = 4,
    broker_config: Mapping[str, ConfigValue] | None = None,
    checked: Sequence[str] | None = None,
) -> ClusterSnapshot:
    ids = list(range(1, brokers + 1)) if isinstance(brokers, int) else list(brokers)
    config = {**HEALTHY_BROKER_CONFIG, **(broker_config or {})}
    by_name = {t.name: t for t in topics}
    return ClusterSnapshot(
        bootstrap_servers="kafka:9092",
        cluster_id="test-cluster",
        controller_id=1000,
        brokers=tuple(Broker(i, "kafka", 9092) for i in ids),
        topics=by_name,
        checked=frozenset(checked if checked is not None else by_name),
        broker_configs={i: dict(config) for i in ids},
    )


def internal_topics(rf: int = 3, min_isr: int = 2) -> list[Topic]:
    return [
        topic("__consumer_offsets", rf, partitions=3, min_isr=min_isr),
        topic("__transaction_state", rf, partitions=3, min_isr=min_isr, min_isr_source="topic"),
    ]
