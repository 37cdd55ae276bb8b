"""The cluster's state right now: partitions without a leader, below min ISR, under-replicated.

These rules read the ISR the snapshot saw; they apply to every checked topic, Kafka's internal ones
included (an offline ``__consumer_offsets`` partition stalls every group it hosts).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from strongroom.doctor.cluster_rules.base import CLUSTER_RULES, ClusterCheckSettings, ClusterRule, min_isr
from strongroom.doctor.model import Finding, Severity
from strongroom.doctor.snapshot import ClusterSnapshot, Partition, Topic

#: How many partitions a finding lists in its evidence (the count is always complete).
MAX_LISTED_PARTITIONS = 20


def _partitions_evidence(partitions: Sequence[Partition], live: set[int]) -> dict[str, Any]:
    listed = [
        {
            "partition": p.id,
            "leader": p.leader,
            "replicas": list(p.replicas),
            "isr": list(p.isr),
            "out_of_sync": [r for r in p.replicas if r not in p.isr],
            "on_dead_brokers": [r for r in p.replicas if r not in live],
        }
        for p in partitions[:MAX_LISTED_PARTITIONS]
    ]
    return {"count": len(partitions), "partitions": listed}


def _ids(partitions: Sequence[Partition]) -> str:
    shown = ", ".join(str(p.id) for p in partitions[:10])
    return shown + (f", ... ({len(partitions)} in all)" if len(partitions) > 10 else "")


def _partitions_finding(
    rule: ClusterRule,
    topic: Topic,
    bad: Sequence[Partition],
    what: str,
    fix: str,
    live: set[int],
    evidence: Mapping[str, Any] | None = None,
) -> Finding:
    """One finding about ``bad`` partitions of ``topic``: how many of all, which, and their replicas."""
    return rule.finding(
        "topic", topic.name, f"{len(bad)} of {len(topic.partitions)} partitions {what} (partitions {_ids(bad)})",
        fix, evidence={**(evidence or {}), **_partitions_evidence(bad, live)},
    )  # fmt: skip


@CLUSTER_RULES.rule(
    "partitions-offline",
    Severity.CRITICAL,
    "Partitions without a leader",
    "A partition without a leader accepts no writes and serves no reads until a replica comes back.",
)
def partitions_offline(
    rule: ClusterRule, snapshot: ClusterSnapshot, settings: ClusterCheckSettings
) -> Iterator[Finding]:
    live = set(snapshot.broker_ids)
    for topic in snapshot.checked_topics():
        offline = [p for p in topic.partitions if p.leader < 0]
        if offline:
            dead = sorted({r for p in offline for r in p.replicas if r not in live})
            fix = (
                f"bring back the brokers holding their replicas ({dead or 'see evidence'}); do not enable unclean "
                "leader election unless you accept losing the records only the dead replicas have"
            )
            yield _partitions_finding(rule, topic, offline, "have no leader", fix, live)


@CLUSTER_RULES.rule(
    "partitions-under-min-isr",
    Severity.CRITICAL,
    "Partitions below min.insync.replicas now",
    "Producers with acks=all get NOT_ENOUGH_REPLICAS on these partitions right now - the 'Not Enough "
    "Replicas' errors the MSK operations guide describes during maintenance.",
)
def partitions_under_min_isr(
    rule: ClusterRule, snapshot: ClusterSnapshot, settings: ClusterCheckSettings
) -> Iterator[Finding]:
    live = set(snapshot.broker_ids)
    for topic in snapshot.checked_topics():
        required, value = min_isr(topic)
        if required is None or value is None:
            continue
        # min.insync.replicas above the replica count is min-isr-above-rf's (permanent) finding.
        below = [p for p in topic.partitions if p.leader >= 0 and len(p.isr) < required <= len(p.replicas)]
        if below:
            yield _partitions_finding(
                rule, topic, below, f"have fewer in-sync replicas than min.insync.replicas={required}",
                "bring the out-of-sync brokers back and let them catch up; do not restart another broker meanwhile",
                live, {"min.insync.replicas": value.to_dict()},
            )  # fmt: skip


@CLUSTER_RULES.rule(
    "partitions-under-replicated",
    Severity.ERROR,
    "Under-replicated partitions now",
    "These partitions are one more broker failure away from blocked writes or lost data; maintenance "
    "must not restart the next broker until they are back in sync.",
)
def partitions_under_replicated(
    rule: ClusterRule, snapshot: ClusterSnapshot, settings: ClusterCheckSettings
) -> Iterator[Finding]:
    live = set(snapshot.broker_ids)
    for topic in snapshot.checked_topics():
        lagging = [p for p in topic.partitions if p.leader >= 0 and len(p.isr) < len(p.replicas)]
        if lagging:
            yield _partitions_finding(
                rule, topic, lagging, "are under-replicated",
                "find out why the replicas listed as out_of_sync lag (broker down, disk, network) and fix that first",
                live,
            )  # fmt: skip
