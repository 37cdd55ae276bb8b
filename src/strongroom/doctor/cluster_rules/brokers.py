"""Cluster size and the broker defaults new topics inherit."""

from __future__ import annotations

from collections.abc import Iterator

from strongroom.doctor.cluster_rules.base import CLUSTER_RULES, ClusterCheckSettings, ClusterRule
from strongroom.doctor.model import Finding, Severity
from strongroom.doctor.snapshot import ClusterSnapshot, ConfigValue

_DUAL_OUTAGE = (
    "Managed Kafka restarts brokers one at a time for maintenance, and two brokers have been observed "
    "offline at once; 'with two brokers down, a 3-node cluster with min.insync.replicas=2 cannot "
    "satisfy write requirements, causing producers to fail' (MSK operations guide: minimum 4 brokers "
    "for production clusters requiring high availability)."
)


def _cluster_subject(snapshot: ClusterSnapshot) -> str:
    return snapshot.cluster_id or snapshot.bootstrap_servers


@CLUSTER_RULES.rule(
    "brokers-fewer-than-3",
    Severity.ERROR,
    "Fewer than 3 live brokers",
    "No topic can keep 3 replicas, so one broker restart - which maintenance does to every broker - "
    "either stops acks=all writes or leaves a single copy of the data.",
)
def brokers_fewer_than_3(
    rule: ClusterRule, snapshot: ClusterSnapshot, settings: ClusterCheckSettings
) -> Iterator[Finding]:
    count = len(snapshot.brokers)
    if count < 3:
        yield rule.finding(
            "cluster",
            _cluster_subject(snapshot),
            f"only {count} live broker(s) ({', '.join(map(str, snapshot.broker_ids)) or 'none'})",
            f"run at least {settings.recommended_brokers} brokers, then raise topics to replication factor 3 "
            "with min.insync.replicas=2",
            evidence={"live_brokers": snapshot.broker_ids, "recommended_brokers": settings.recommended_brokers},
        )


@CLUSTER_RULES.rule(
    "brokers-exactly-3",
    Severity.WARNING,
    "Exactly 3 brokers: not maintenance-safe with min.insync.replicas=2",
    _DUAL_OUTAGE,
)
def brokers_exactly_3(
    rule: ClusterRule, snapshot: ClusterSnapshot, settings: ClusterCheckSettings
) -> Iterator[Finding]:
    if len(snapshot.brokers) == 3:
        yield rule.finding(
            "cluster",
            _cluster_subject(snapshot),
            "3 live brokers: two brokers down at once (seen during managed-Kafka maintenance) leaves one "
            "in-sync replica, below min.insync.replicas=2, and acks=all producers fail",
            f"add brokers to at least {settings.recommended_brokers} (keep RF 3 / min.insync.replicas=2, "
            "or RF 4 / min.insync.replicas=2 to survive two brokers down)",
            evidence={"live_brokers": snapshot.broker_ids, "recommended_brokers": settings.recommended_brokers},
        )


@CLUSTER_RULES.rule(
    "broker-defaults-weak",
    Severity.WARNING,
    "Broker defaults create weakly replicated topics",
    "Topics created without explicit settings - by tools, frameworks, or auto-creation - inherit "
    "default.replication.factor and min.insync.replicas; weak defaults quietly produce weak topics.",
)
def broker_defaults_weak(
    rule: ClusterRule, snapshot: ClusterSnapshot, settings: ClusterCheckSettings
) -> Iterator[Finding]:
    if len(snapshot.brokers) < 3:
        return  # brokers-fewer-than-3 says it; RF 3 defaults are impossible here
    wanted = {"default.replication.factor": 3, "min.insync.replicas": 2}
    weak: dict[str, dict[int, ConfigValue]] = {}
    for name, minimum in wanted.items():
        for broker, value in snapshot.broker_setting(name).items():
            number = value.as_int()
            if number is not None and number < minimum:
                weak.setdefault(name, {})[broker] = value
    if not weak:
        return
    values = ", ".join(f"{name}={next(iter(per_broker.values())).value}" for name, per_broker in weak.items())
    brokers = sorted({b for per_broker in weak.values() for b in per_broker})
    yield rule.finding(
        "broker",
        ",".join(map(str, brokers)),
        f"broker defaults {values}: new topics get fewer than 3 replicas or min.insync.replicas < 2",
        "set the cluster-wide defaults (on Amazon MSK: in the cluster configuration)",
        evidence={
            name: {
                "recommended": wanted[name],
                "brokers": {str(b): v.to_dict() for b, v in per_broker.items()},
            }
            for name, per_broker in weak.items()
        },
        commands=[settings.tools.alter_broker_default({name: wanted[name] for name in weak})],
    )
