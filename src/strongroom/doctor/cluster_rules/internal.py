"""Kafka's internal topics: committed offsets, transaction state, share-group state."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from strongroom.doctor.cluster_rules.base import CLUSTER_RULES, ClusterCheckSettings, ClusterRule, min_isr
from strongroom.doctor.cluster_rules.replication import TARGET_MIN_ISR, TARGET_RF
from strongroom.doctor.model import Finding, Severity
from strongroom.doctor.remediation import reassignment_plan
from strongroom.doctor.snapshot import INTERNAL_TOPICS, ClusterSnapshot, Topic


def _existing_topic_problems(
    topic: Topic, snapshot: ClusterSnapshot, settings: ClusterCheckSettings
) -> tuple[list[str], dict[str, Any], list[str]]:
    problems: list[str] = []
    commands: list[str] = []
    rf = topic.replication_factor
    required, value = min_isr(topic)
    evidence: dict[str, Any] = {"replication_factor": rf}
    if value is not None:
        evidence["min.insync.replicas"] = value.to_dict()
    if rf < TARGET_RF:
        problems.append(f"replication factor {rf} < {TARGET_RF}")
        if len(snapshot.brokers) >= TARGET_RF:
            plan = reassignment_plan(
                topic.name, topic.partitions, TARGET_RF, snapshot.broker_ids, snapshot.replicas_per_broker()
            )
            plan_file = f"{topic.name.strip('_')}-rf{TARGET_RF}.json"
            evidence["reassignment_plan"] = plan
            commands += [f"cat > {plan_file} <<'EOF'\n{json.dumps(plan)}\nEOF", settings.tools.reassign(plan_file)]
    if required is not None and value is not None:
        if rf >= TARGET_RF and required < TARGET_MIN_ISR:
            problems.append(f"min.insync.replicas={required} ({value.where}): committed state can be lost")
            commands.append(settings.tools.alter_topic(topic.name, {"min.insync.replicas": TARGET_MIN_ISR}))
        elif rf >= 2 and required >= rf:
            problems.append(f"min.insync.replicas={required} ({value.where}) >= replication factor {rf}: "
                            "one broker down blocks its writes")  # fmt: skip
            commands.append(settings.tools.alter_topic(topic.name, {"min.insync.replicas": max(1, rf - 1)}))
    return problems, evidence, commands


def _future_topic_problems(name: str, snapshot: ClusterSnapshot) -> tuple[list[str], dict[str, Any]]:
    """A not-yet-created internal topic will get its RF / min ISR from these broker settings."""
    weak_settings: list[str] = []
    evidence: dict[str, Any] = {"exists": False}
    settings_of = INTERNAL_TOPICS[name]
    for key, minimum in (("replication", TARGET_RF), ("min_isr", TARGET_MIN_ISR)):
        setting = settings_of.get(key)
        if setting is None:
            continue
        values = snapshot.broker_setting(setting)
        weak = {b: v for b, v in values.items() if (n := v.as_int()) is not None and n < minimum}
        if weak:
            weak_settings.append(f"{setting}={next(iter(weak.values())).value} (< {minimum})")
            evidence[setting] = {str(b): v.to_dict() for b, v in weak.items()}
    if not weak_settings:
        return [], evidence
    return [f"not created yet; brokers will create it with {' and '.join(weak_settings)}"], evidence


@CLUSTER_RULES.rule(
    "internal-topic-weak-replication",
    Severity.ERROR,
    "Internal topic (offsets, transactions) weakly replicated",
    "__consumer_offsets holds every group's committed offsets and __transaction_state every transaction's "
    "state. With fewer than 3 replicas or min.insync.replicas below 2, a broker restart blocks commits and "
    "transactions or loses them - consumers then re-read or skip data.",
)
def internal_topic_weak_replication(
    rule: ClusterRule, snapshot: ClusterSnapshot, settings: ClusterCheckSettings
) -> Iterator[Finding]:
    for name in INTERNAL_TOPICS:
        topic = snapshot.topics.get(name)
        commands: list[str] = []
        if topic is not None:
            problems, evidence, commands = _existing_topic_problems(topic, snapshot, settings)
        elif not INTERNAL_TOPICS[name].get("check_before_creation"):
            continue
        else:
            problems, evidence = _future_topic_problems(name, snapshot)
        if problems:
            fix = (
                "raise its replication factor to 3 (reassignment plan in the evidence) and keep min.insync.replicas=2"
                if topic is not None
                else f"set the broker settings named in the evidence to RF {TARGET_RF} / min ISR {TARGET_MIN_ISR} "
                "before the first consumer group or transaction creates the topic"
            )
            if len(snapshot.brokers) < TARGET_RF:
                fix = f"add brokers (see brokers-fewer-than-3), then: {fix}"
            yield rule.finding("topic", name, "; ".join(problems), fix, evidence=evidence, commands=commands)
