"""Documented partition-count guidance, with where each number comes from.

Every partition replica costs a broker open files, memory, a replication fetch stream and time in
leader elections and controlled shutdown; past a point, maintenance (rolling restarts, heal
operations) gets slow and metadata gets unstable. There is no hard limit, only guidance:

* Apache Kafka / Confluent: "As a rule of thumb, we recommend each broker to have up to 4,000
  partitions and each cluster to have up to 200,000 partitions" (Jun Rao, *Apache Kafka Supports
  200K Partitions Per Cluster*, Confluent blog, 2018; ZooKeeper-era, replicas included). KRaft
  raises the cluster-wide ceiling, not what one broker's disks, memory and network can carry.
* Amazon MSK (Standard brokers): recommended partitions per broker, leader and follower replicas
  included, by broker size (*Best practices*, Amazon MSK Developer Guide, "Right-size your
  cluster: Number of partitions per broker"). Above it, MSK may refuse configuration updates,
  version upgrades and broker-size changes.
* Headroom: the MSK operations guide strongly advises "at least 30-40% headroom" because
  metadata synchronisation failures happen near maximum capacity, with high partition counts.
"""

from __future__ import annotations

from dataclasses import dataclass

from strongroom.errors import ConfigError


@dataclass(frozen=True)
class PartitionLimit:
    per_broker: int
    source: str


APACHE_KAFKA_GUIDANCE = PartitionLimit(
    4000,
    "Confluent, 'Apache Kafka Supports 200K Partitions Per Cluster' (2018): up to 4,000 partitions "
    "per broker, replicas included",
)

_MSK_DOC = "Amazon MSK Developer Guide, Best practices: recommended partitions per broker (replicas included)"

#: Amazon MSK Standard broker sizes → recommended partitions per broker (leader and follower replicas).
MSK_STANDARD_LIMITS: dict[str, int] = {
    "kafka.t3.small": 300,
    "kafka.m5.large": 1000,
    "kafka.m5.xlarge": 1000,
    "kafka.m5.2xlarge": 2000,
    "kafka.m5.4xlarge": 4000,
    "kafka.m5.8xlarge": 4000,
    "kafka.m5.12xlarge": 4000,
    "kafka.m5.16xlarge": 4000,
    "kafka.m5.24xlarge": 4000,
    "kafka.m7g.large": 1000,
    "kafka.m7g.xlarge": 1000,
    "kafka.m7g.2xlarge": 2000,
    "kafka.m7g.4xlarge": 4000,
    "kafka.m7g.8xlarge": 4000,
    "kafka.m7g.12xlarge": 4000,
    "kafka.m7g.16xlarge": 4000,
}

#: Keep this share of the limit free (the operations guide asks for 30-40%).
DEFAULT_HEADROOM = 0.3

#: Topics above this many partitions were involved in the unrecoverable "partition count changed
#: from N to 0" metadata errors the MSK operations guide reports.
LARGE_TOPIC_PARTITIONS = 1000


def partition_limit(*, per_broker: int | None = None, broker_type: str | None = None) -> PartitionLimit:
    """The limit to check against: an explicit number, an MSK broker size, or the Apache Kafka guidance."""
    if per_broker is not None and broker_type is not None:
        raise ConfigError(
            "--max-partitions-per-broker and --broker-type both set a partition limit",
            hint="pass only one of them",
        )
    if per_broker is not None:
        if per_broker < 1:
            raise ConfigError(f"--max-partitions-per-broker={per_broker} must be positive")
        return PartitionLimit(per_broker, "--max-partitions-per-broker")
    if broker_type is not None:
        key = broker_type if broker_type.startswith("kafka.") else f"kafka.{broker_type}"
        if key not in MSK_STANDARD_LIMITS:
            raise ConfigError(
                f"unknown MSK broker type {broker_type!r}",
                hint=f"use one of {', '.join(MSK_STANDARD_LIMITS)} or --max-partitions-per-broker",
            )
        return PartitionLimit(MSK_STANDARD_LIMITS[key], f"{_MSK_DOC}, {key}")
    return APACHE_KAFKA_GUIDANCE
