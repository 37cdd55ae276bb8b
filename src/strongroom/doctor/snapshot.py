"""A point-in-time picture of a Kafka cluster, as plain dataclasses the cluster rules read.

Collecting (``doctor.collect``) and checking (``doctor.cluster_rules``) are separate so every rule
can be unit-tested with a hand-built snapshot, and a whole run costs a handful of admin requests no
matter how many rules there are.

Each configuration value remembers where it came from - a topic override, a per-broker or
cluster-wide dynamic setting, ``server.properties`` or Kafka's built-in default - because the fix
differs: a topic override is changed on the topic, an inherited value is usually best fixed once
at the cluster default.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

#: Kafka's internal topics that doctor checks with its own rule (they are created by the brokers,
#: from broker settings, the first time a group, a transaction or a share group is used). The broker
#: settings of the first two are checked even before the topic exists; share groups are rarely used.
INTERNAL_TOPICS: dict[str, dict[str, str]] = {
    "__consumer_offsets": {"replication": "offsets.topic.replication.factor", "check_before_creation": "yes"},
    "__transaction_state": {
        "replication": "transaction.state.log.replication.factor",
        "min_isr": "transaction.state.log.min.isr",
        "check_before_creation": "yes",
    },
    "__share_group_state": {
        "replication": "share.coordinator.state.topic.replication.factor",
        "min_isr": "share.coordinator.state.topic.min.isr",
    },
}

#: Config sources as Kafka's DescribeConfigs reports them, by the names doctor prints.
SOURCE_DESCRIPTIONS: dict[str, str] = {
    "topic": "topic override",
    "broker": "per-broker dynamic config",
    "cluster-default": "cluster-wide dynamic default",
    "broker-static": "broker server.properties",
    "kafka-default": "Kafka's built-in default",
    "unknown": "unknown source",
}

#: librdkafka's ``ConfigSource`` numbers → our names.
_SOURCE_BY_NUMBER = {
    0: "unknown",
    1: "topic",
    2: "broker",
    3: "cluster-default",
    4: "broker-static",
    5: "kafka-default",
}


def source_name(source: object) -> str:
    """Our name for a ``ConfigEntry.source`` (an int or a ``ConfigSource`` enum member)."""
    number = getattr(source, "value", source)
    return _SOURCE_BY_NUMBER.get(number, "unknown") if isinstance(number, int) else "unknown"


@dataclass(frozen=True)
class ConfigValue:
    """An effective configuration value and where it is set."""

    value: str | None
    source: str = "unknown"

    @property
    def is_topic_override(self) -> bool:
        return self.source == "topic"

    @property
    def where(self) -> str:
        return SOURCE_DESCRIPTIONS.get(self.source, self.source)

    def as_int(self) -> int | None:
        try:
            return int(self.value) if self.value is not None else None
        except ValueError:
            return None

    def as_bool(self) -> bool | None:
        if self.value is None:
            return None
        return self.value.strip().lower() == "true"

    def to_dict(self) -> dict[str, str | None]:
        return {"value": self.value, "source": self.source, "where": self.where}


@dataclass(frozen=True)
class Broker:
    id: int
    host: str = ""
    port: int = 0
    rack: str | None = None


@dataclass(frozen=True)
class Partition:
    id: int
    #: -1 when the partition has no leader (offline).
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]

    @property
    def replication_factor(self) -> int:
        return len(self.replicas)


@dataclass(frozen=True)
class Topic:
    name: str
    partitions: tuple[Partition, ...]
    #: Effective configuration (every key DescribeConfigs returned); empty when not described.
    config: Mapping[str, ConfigValue] = field(default_factory=dict)

    @property
    def internal(self) -> bool:
        return self.name in INTERNAL_TOPICS

    @property
    def replication_factor(self) -> int:
        """The smallest replica count of any partition: the topic is only as safe as its weakest partition."""
        return min((p.replication_factor for p in self.partitions), default=0)

    @property
    def replication_factors(self) -> list[int]:
        return sorted({p.replication_factor for p in self.partitions})

    def setting(self, name: str) -> ConfigValue | None:
        return self.config.get(name)

    def effective_config(self) -> dict[str, str]:
        return {k: v.value for k, v in self.config.items() if v.value is not None}


@dataclass(frozen=True)
class ClusterSnapshot:
    """Brokers, every topic's partitions, and the configs of the topics being checked."""

    bootstrap_servers: str
    cluster_id: str | None
    controller_id: int | None
    brokers: tuple[Broker, ...]
    #: Every topic in the cluster metadata (capacity rules count all of them).
    topics: Mapping[str, Topic]
    #: The topics the topic rules look at: those matching ``--topic`` plus Kafka's internal topics.
    checked: frozenset[str]
    #: Broker id → effective broker configuration.
    broker_configs: Mapping[int, Mapping[str, ConfigValue]] = field(default_factory=dict)
    #: Things doctor could not look at (e.g. not authorised to describe a topic's configs).
    notes: tuple[str, ...] = ()

    @property
    def broker_ids(self) -> list[int]:
        return sorted(b.id for b in self.brokers)

    def checked_topics(self) -> list[Topic]:
        return [self.topics[name] for name in sorted(self.checked) if name in self.topics]

    def broker_setting(self, name: str) -> dict[int, ConfigValue]:
        """The value of one broker setting on every broker that reported it."""
        return {b: cfg[name] for b, cfg in sorted(self.broker_configs.items()) if name in cfg}

    def replicas_per_broker(self) -> dict[int, int]:
        """Partition replicas (leaders and followers) hosted by each live broker, over all topics."""
        counts: Counter[int] = Counter({b.id: 0 for b in self.brokers})
        for topic in self.topics.values():
            for partition in topic.partitions:
                counts.update(partition.replicas)
        return dict(sorted(counts.items()))
