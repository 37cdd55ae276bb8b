"""Replication factor, min.insync.replicas and unclean leader election, per topic and per broker."""

from __future__ import annotations

import json
from collections.abc import Iterator

from strongroom.doctor.cluster_rules.base import (
    CLUSTER_RULES,
    ClusterCheckSettings,
    ClusterRule,
    config_evidence,
    min_isr,
    regular_topics,
)
from strongroom.doctor.model import Finding, Severity
from strongroom.doctor.remediation import reassignment_plan
from strongroom.doctor.snapshot import ClusterSnapshot, ConfigValue, Topic

TARGET_RF = 3
TARGET_MIN_ISR = 2


def _rf_text(topic: Topic) -> str:
    factors = topic.replication_factors
    return str(factors[0]) if len(factors) == 1 else f"{factors[0]} (partitions range {factors[0]}-{factors[-1]})"


def _min_isr_evidence(topic: Topic, rf: int) -> dict[str, object]:
    return {"replication_factor": rf, **config_evidence(topic, "min.insync.replicas")}


def _min_isr_settings(snapshot: ClusterSnapshot) -> Iterator[tuple[Topic, int, ConfigValue, int]]:
    """``(topic, min.insync.replicas, where it is set, replication factor)`` of each regular topic that
    has a min.insync.replicas: what the three min-isr rules compare."""
    for topic in regular_topics(snapshot):
        required, value = min_isr(topic)
        if required is not None and value is not None:
            yield topic, required, value, topic.replication_factor


def _min_isr_finding(rule: ClusterRule, topic: Topic, rf: int, problem: str, fix: tuple[str, list[str]]) -> Finding:
    text, commands = fix
    return rule.finding("topic", topic.name, problem, text, evidence=_min_isr_evidence(topic, rf), commands=commands)


def _min_isr_fixes(
    topic: Topic, value: ConfigValue, target: int, settings: ClusterCheckSettings
) -> tuple[str, list[str]]:
    """Fix text and commands for a wrong min.insync.replicas, depending on where it is set."""
    commands = [settings.tools.alter_topic(topic.name, {"min.insync.replicas": target})]
    if value.is_topic_override:
        return f"set the topic's min.insync.replicas to {target}", commands
    return (
        f"min.insync.replicas={value.value} is inherited ({value.where}); override it on the topic "
        f"(first command), or fix the cluster default for every topic (second; check RF-2 topics first)",
        [*commands, settings.tools.alter_broker_default({"min.insync.replicas": target})],
    )


@CLUSTER_RULES.rule(
    "replication-factor-below-3",
    Severity.ERROR,
    "Topic has fewer than 3 replicas",
    "Replication factor 3 with min.insync.replicas=2 is the standard recommendation (AWS): it survives "
    "one broker down while still accepting acks=all writes. With fewer replicas, a broker restart "
    "either blocks writes or leaves a single copy that the next failure loses.",
)
def replication_factor_below_3(
    rule: ClusterRule, snapshot: ClusterSnapshot, settings: ClusterCheckSettings
) -> Iterator[Finding]:
    load = snapshot.replicas_per_broker()
    for topic in regular_topics(snapshot):
        rf = topic.replication_factor
        if not topic.partitions or rf >= TARGET_RF:
            continue
        evidence: dict[str, object] = {
            "replication_factor": rf,
            "partitions": len(topic.partitions),
            "live_brokers": len(snapshot.brokers),
        }
        commands: list[str] = []
        if len(snapshot.brokers) >= TARGET_RF:
            plan = reassignment_plan(topic.name, topic.partitions, TARGET_RF, snapshot.broker_ids, load)
            plan_file = f"{topic.name}-rf{TARGET_RF}.json"
            evidence["reassignment_plan"] = plan
            commands = [
                f"cat > {plan_file} <<'EOF'\n{json.dumps(plan)}\nEOF",
                settings.tools.reassign(plan_file),
                settings.tools.alter_topic(topic.name, {"min.insync.replicas": TARGET_MIN_ISR}),
            ]
            fix = (
                f"raise the replication factor to {TARGET_RF} with the reassignment plan in the evidence, "
                f"then set min.insync.replicas={TARGET_MIN_ISR}"
            )
        else:
            fix = f"add brokers (at least {settings.recommended_brokers}), then raise the replication factor to 3"
        yield rule.finding(
            "topic", topic.name, f"replication factor {_rf_text(topic)} < {TARGET_RF}", fix,
            evidence=evidence, commands=commands,
        )  # fmt: skip


@CLUSTER_RULES.rule(
    "replication-factor-above-brokers",
    Severity.ERROR,
    "Replication factor above the number of live brokers",
    "Replicas assigned to brokers that are not alive can never be in sync: the partitions stay "
    "under-replicated, and with min.insync.replicas close to RF they stop accepting writes.",
)
def replication_factor_above_brokers(
    rule: ClusterRule, snapshot: ClusterSnapshot, settings: ClusterCheckSettings
) -> Iterator[Finding]:
    live = set(snapshot.broker_ids)
    for topic in regular_topics(snapshot):
        rf = max((p.replication_factor for p in topic.partitions), default=0)
        if rf <= len(live):
            continue
        missing = sorted({r for p in topic.partitions for r in p.replicas} - live)
        yield rule.finding(
            "topic",
            topic.name,
            f"replication factor {rf} > {len(live)} live brokers (replicas on brokers {missing} that are not alive)",
            f"bring brokers {missing} back, or reassign the replicas to live brokers with kafka-reassign-partitions.sh",
            evidence={"replication_factor": rf, "live_brokers": sorted(live), "missing_brokers": missing},
        )


@CLUSTER_RULES.rule(
    "min-isr-above-rf",
    Severity.CRITICAL,
    "min.insync.replicas greater than the replication factor",
    "min.insync.replicas above the number of replicas can never be met: every acks=all write fails "
    "with NOT_ENOUGH_REPLICAS.",
)
def min_isr_above_rf(rule: ClusterRule, snapshot: ClusterSnapshot, settings: ClusterCheckSettings) -> Iterator[Finding]:
    for topic, required, value, rf in _min_isr_settings(snapshot):
        if not topic.partitions or required <= rf:
            continue
        target = TARGET_MIN_ISR if rf >= TARGET_RF else max(1, rf - 1)
        problem = (
            f"min.insync.replicas={required} ({value.where}) > replication factor {rf}: acks=all writes always fail"
        )
        yield _min_isr_finding(rule, topic, rf, problem, _min_isr_fixes(topic, value, target, settings))


@CLUSTER_RULES.rule(
    "min-isr-equals-rf",
    Severity.ERROR,
    "min.insync.replicas equals the replication factor",
    "'When RF equals MinISR, any single broker failure or maintenance operation blocks writes until all "
    "replicas are back in sync' (MSK operations guide; AWS Health Dashboard alerts on it). Every "
    "rolling restart becomes a write outage for acks=all producers.",
)
def min_isr_equals_rf(
    rule: ClusterRule, snapshot: ClusterSnapshot, settings: ClusterCheckSettings
) -> Iterator[Finding]:
    for topic, required, value, rf in _min_isr_settings(snapshot):
        # RF 1 cannot have anything else; replication-factor-below-3 reports it.
        if rf < 2 or required != rf:
            continue
        fix: tuple[str, list[str]] = (
            _min_isr_fixes(topic, value, TARGET_MIN_ISR, settings)
            if rf >= TARGET_RF
            else (
                f"raise the replication factor to {TARGET_RF} (see replication-factor-below-3), "
                f"keeping min.insync.replicas={TARGET_MIN_ISR}",
                [],
            )
        )
        problem = (
            f"min.insync.replicas={required} ({value.where}) = replication factor {rf}: "
            "one broker down stops acks=all writes"
        )
        yield _min_isr_finding(rule, topic, rf, problem, fix)


@CLUSTER_RULES.rule(
    "min-isr-too-low",
    Severity.ERROR,
    "min.insync.replicas=1 on a topic with 3 or more replicas",
    "With min.insync.replicas=1 an acks=all write is acknowledged as soon as the leader alone has it "
    "(the ISR may have shrunk to the leader); if that broker then fails, an acknowledged record is lost.",
)
def min_isr_too_low(rule: ClusterRule, snapshot: ClusterSnapshot, settings: ClusterCheckSettings) -> Iterator[Finding]:
    for topic, required, value, rf in _min_isr_settings(snapshot):
        if required > 1 or rf < TARGET_RF:
            continue
        problem = (
            f"min.insync.replicas={required} ({value.where}) with replication factor {rf}: acks=all can acknowledge "
            "a write only the leader has"
        )
        yield _min_isr_finding(rule, topic, rf, problem, _min_isr_fixes(topic, value, TARGET_MIN_ISR, settings))


@CLUSTER_RULES.rule(
    "unclean-leader-election-enabled",
    Severity.ERROR,
    "Unclean leader election enabled",
    "Unclean leader election lets an out-of-sync replica become leader: records the old leader had "
    "acknowledged but not replicated are truncated away - acknowledged data silently lost.",
)
def unclean_leader_election(
    rule: ClusterRule, snapshot: ClusterSnapshot, settings: ClusterCheckSettings
) -> Iterator[Finding]:
    name = "unclean.leader.election.enable"
    enabled = {b: v for b, v in snapshot.broker_setting(name).items() if v.as_bool()}
    if enabled:
        sources = sorted({v.source for v in enabled.values()})
        commands = []
        if "cluster-default" in sources:
            commands.append(settings.tools.alter_broker_default(delete=[name]))
        if "broker" in sources:
            commands += [
                settings.tools.alter_broker(b, delete=[name]) for b, v in enabled.items() if v.source == "broker"
            ]
        if "broker-static" in sources:
            commands.append(f"remove {name}=true from server.properties on brokers {sorted(enabled)} and restart them")
        yield rule.finding(
            "broker",
            ",".join(map(str, sorted(enabled))),
            f"{name}=true on brokers {sorted(enabled)} ({', '.join(enabled[b].where for b in sorted(enabled)[:1])}): "
            "every topic without an override inherits it",
            "turn it off at the broker level (on Amazon MSK: in the cluster configuration) and only ever enable it "
            "temporarily on one topic, as a deliberate, audited recovery step",
            evidence={"brokers": {str(b): v.to_dict() for b, v in enabled.items()}},
            commands=commands,
        )
    for topic in regular_topics(snapshot):
        value = topic.setting(name)
        if value is not None and value.is_topic_override and value.as_bool():
            yield rule.finding(
                "topic", topic.name, f"{name}=true (topic override)",
                "set it to false on the topic",
                evidence=config_evidence(topic, name), commands=[settings.tools.alter_topic(topic.name, {name: False})],
            )  # fmt: skip
