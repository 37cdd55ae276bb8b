"""Partition counts against documented per-broker guidance (see ``doctor.limits`` for the sources)."""

from __future__ import annotations

from collections.abc import Iterator

from strongroom.doctor.cluster_rules.base import CLUSTER_RULES, ClusterCheckSettings, ClusterRule
from strongroom.doctor.model import Finding, Severity
from strongroom.doctor.snapshot import ClusterSnapshot


@CLUSTER_RULES.rule(
    "partitions-per-broker-high",
    Severity.ERROR,
    "Partition replicas per broker near or above the documented limit",
    "Every replica costs a broker files, memory and a replication stream, and slows controlled shutdown "
    "and leader election; near capacity, maintenance drags and metadata goes out of sync ('Always "
    "maintain at least 30-40% headroom', MSK operations guide). On MSK, above the recommended count "
    "configuration updates, upgrades and broker-size changes may be refused.",
)
def partitions_per_broker_high(
    rule: ClusterRule, snapshot: ClusterSnapshot, settings: ClusterCheckSettings
) -> Iterator[Finding]:
    limit = settings.partition_limit
    warn_at = int(limit.per_broker * (1.0 - settings.headroom))
    for broker, count in snapshot.replicas_per_broker().items():
        if count < warn_at:
            continue
        over = count >= limit.per_broker
        yield rule.finding(
            "broker",
            str(broker),
            f"{count} partition replicas on broker {broker}: "
            + (f"at or above the limit of {limit.per_broker}" if over else
               f"less than {settings.headroom:.0%} headroom below the limit of {limit.per_broker}"),
            "add brokers and move replicas to them (kafka-reassign-partitions.sh), delete unused topics, or "
            "use fewer partitions per topic; move to a larger broker size on managed Kafka",
            severity=Severity.ERROR if over else Severity.WARNING,
            evidence={
                "replicas": count,
                "limit": limit.per_broker,
                "warn_at": warn_at,
                "headroom": settings.headroom,
                "limit_source": limit.source,
            },
        )  # fmt: skip


@CLUSTER_RULES.rule(
    "topic-partitions-high",
    Severity.INFO,
    "Topic with more than 1000 partitions",
    "The MSK operations guide reports 'partition count changed from N to 0' metadata errors that did not "
    "recover, requiring manual intervention, on topics with more than 1000 partitions on brokers running "
    "close to capacity.",
)
def topic_partitions_high(
    rule: ClusterRule, snapshot: ClusterSnapshot, settings: ClusterCheckSettings
) -> Iterator[Finding]:
    for topic in snapshot.checked_topics():
        if len(topic.partitions) > settings.large_topic_partitions:
            yield rule.finding(
                "topic", topic.name,
                f"{len(topic.partitions)} partitions (> {settings.large_topic_partitions})",
                "keep broker capacity headroom and restart a consumer that logs 'partition count changed from N to 0' "
                "outside planned topic changes; consider fewer partitions",
                evidence={"partitions": len(topic.partitions), "threshold": settings.large_topic_partitions},
            )  # fmt: skip
