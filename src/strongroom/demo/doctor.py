"""Demo chapter: ``strongroom doctor`` finds a keys topic that would delete keys, and its fix works."""

from __future__ import annotations

import shlex
from typing import Any

from strongroom.demo.story import Chapter, DemoContext

WEAK_KEYS_TOPIC = "demo-strongroom-keys"


def doctor_finds_weak_keys_topic(ctx: DemoContext) -> dict[str, Any]:
    from strongroom.doctor import ClusterCheckSettings, check_client, check_cluster
    from strongroom.doctor.remediation import KafkaTools
    from strongroom.testing.kafka_cluster import TOOLS

    bootstrap = ctx.cluster.bootstrap_servers
    # A keys topic created like an ordinary topic: retention would delete subject keys after 7 days.
    ctx.cluster.create_topic(WEAK_KEYS_TOPIC, partitions=1, config={"cleanup.policy": "delete"})
    settings = ClusterCheckSettings(tools=KafkaTools(bootstrap))
    report = check_cluster(bootstrap, topic_patterns=[WEAK_KEYS_TOPIC], settings=settings, timeout=10)
    ctx.say(f"    created {WEAK_KEYS_TOPIC!r} with cleanup.policy=delete; strongroom doctor --topic {WEAK_KEYS_TOPIC}:")
    for finding in report.findings:
        ctx.say(f"      {finding.severity.label:8} {finding.rule_id:32} {finding.subject_kind} {finding.subject}")
    deletes = next(f for f in report.findings if f.rule_id == "keys-topic-deletes-keys")
    ctx.say(f"    {deletes.problem}")
    ctx.say(f"    exit code {report.exit_code} (findings at or above --fail-on error); doctor's fix:")
    ctx.say(f"      $ {deletes.commands[0]}")

    # Apply the printed fixes with Kafka's own kafka-configs, then check again.
    for rule_id in ("keys-topic-deletes-keys", "keys-topic-compaction-blocked"):
        command = next(f for f in report.findings if f.rule_id == rule_id).commands[0]
        ctx.cluster.run_tool(TOOLS["configs"], *shlex.split(command)[1:])
    after = check_cluster(bootstrap, topic_patterns=[WEAK_KEYS_TOPIC], settings=settings, timeout=10)
    remaining = sorted(after.rule_ids(WEAK_KEYS_TOPIC))
    ctx.say(f"    after applying them, findings for the keys topic: {', '.join(remaining) or 'none about compaction'}")
    ctx.say("    (replication-factor-below-3 and brokers-fewer-than-3 remain: the demo cluster has one broker)")

    client = check_client({"acks": "all", "reties": "5"}, source="producer.properties", role="producer")
    typo = next(f for f in client.findings if f.rule_id == "client-unknown-property")
    ctx.say(f"    strongroom doctor client on a producer config with a typo: {typo.problem}")
    return {
        "topic": WEAK_KEYS_TOPIC,
        "findings": {f.rule_id: f.severity.label for f in report.findings if f.subject in (WEAK_KEYS_TOPIC,)},
        "cluster_findings": sorted(f.rule_id for f in report.findings if f.subject_kind == "cluster"),
        "exit_code": report.exit_code,
        "after_fix": remaining,
        "client_typo_suggestion": typo.evidence["suggestions"],
    }


CHAPTERS: list[tuple[str, Chapter]] = [
    ("strongroom doctor: a keys topic that would delete keys, found and fixed", doctor_finds_weak_keys_topic),
]
