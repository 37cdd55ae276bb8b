"""The cluster rule registry and the settings every cluster rule receives."""

from __future__ import annotations

from dataclasses import dataclass, field

from strongroom.doctor.limits import APACHE_KAFKA_GUIDANCE, DEFAULT_HEADROOM, LARGE_TOPIC_PARTITIONS, PartitionLimit
from strongroom.doctor.model import Rule, RuleRegistry
from strongroom.doctor.remediation import KafkaTools
from strongroom.doctor.snapshot import ClusterSnapshot, ConfigValue, Topic
from strongroom.keys.topic_config import KEYS_TOPIC_DEFAULT

#: Any topic whose name ends with this is treated as a strongroom keys topic (one per tenant/app).
KEYS_TOPIC_SUFFIX = f"-{KEYS_TOPIC_DEFAULT}"

#: The broker count the MSK operations guide recommends for production ("Minimum 4 brokers").
RECOMMENDED_BROKERS = 4


@dataclass(frozen=True)
class ClusterCheckSettings:
    """Thresholds and names the cluster rules use; every one is a CLI option."""

    tools: KafkaTools = field(default_factory=KafkaTools)
    #: Exact keys topic names (``--keys-topic``); topics ending in ``-strongroom-keys`` count too.
    keys_topics: tuple[str, ...] = (KEYS_TOPIC_DEFAULT,)
    #: True when the operator named keys topics: a missing one is then worth a finding.
    keys_topics_explicit: bool = False
    partition_limit: PartitionLimit = APACHE_KAFKA_GUIDANCE
    headroom: float = DEFAULT_HEADROOM
    large_topic_partitions: int = LARGE_TOPIC_PARTITIONS
    recommended_brokers: int = RECOMMENDED_BROKERS

    def is_keys_topic(self, name: str) -> bool:
        return name in self.keys_topics or name.endswith(KEYS_TOPIC_SUFFIX)


ClusterRule = Rule[ClusterSnapshot, ClusterCheckSettings]

#: Every cluster rule, in the order doctor runs and lists them.
CLUSTER_RULES: RuleRegistry[ClusterSnapshot, ClusterCheckSettings] = RuleRegistry("cluster")


def regular_topics(snapshot: ClusterSnapshot) -> list[Topic]:
    """Checked topics other than Kafka's internal ones (those have their own rule)."""
    return [t for t in snapshot.checked_topics() if not t.internal]


def min_isr(topic: Topic) -> tuple[int | None, ConfigValue | None]:
    value = topic.setting("min.insync.replicas")
    return (value.as_int() if value is not None else None), value


def config_evidence(topic: Topic, *names: str) -> dict[str, dict[str, str | None]]:
    """The named settings with their value and where they come from, for a finding's evidence."""
    return {n: v.to_dict() for n in names if (v := topic.setting(n)) is not None}
