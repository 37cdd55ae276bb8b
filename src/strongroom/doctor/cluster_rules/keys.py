"""strongroom's keys topics: compaction must finish erasures, and retention must never delete keys."""

from __future__ import annotations

from collections.abc import Iterator

from strongroom.doctor.cluster_rules.base import CLUSTER_RULES, ClusterCheckSettings, ClusterRule, config_evidence
from strongroom.doctor.model import Finding, Severity
from strongroom.doctor.snapshot import ClusterSnapshot
from strongroom.keys.topic_config import KEYS_TOPIC_CONFIG, compaction_blockers

_COMPACTION_SETTINGS = ("cleanup.policy", "segment.ms", "max.compaction.lag.ms", "min.cleanable.dirty.ratio")


def _cleanup_policies(value: str | None) -> set[str]:
    return {p.strip() for p in (value or "delete").split(",") if p.strip()}


@CLUSTER_RULES.rule(
    "keys-topic-compaction-blocked",
    Severity.ERROR,
    "Keys topic settings keep compaction from finishing an erasure",
    "An erasure (crypto-shredding) writes a tombstone for the subject's key; the key is physically gone only "
    "once the log cleaner has compacted the segment holding it. With these settings that may never happen, "
    "so an 'erased' subject's key - and with it the subject's data - stays recoverable from the log.",
)
def keys_topic_compaction_blocked(
    rule: ClusterRule, snapshot: ClusterSnapshot, settings: ClusterCheckSettings
) -> Iterator[Finding]:
    for topic in snapshot.checked_topics():
        if not settings.is_keys_topic(topic.name) or not topic.config:
            continue
        config = topic.effective_config()
        # A delete policy is keys-topic-deletes-keys' finding; judge compaction as if it were removed.
        kept = _cleanup_policies(config.get("cleanup.policy")) - {"delete"}
        reasons = compaction_blockers({**config, "cleanup.policy": ",".join(sorted(kept)) or "none"})
        if not reasons:
            continue
        wanted = {k: KEYS_TOPIC_CONFIG[k] for k in _COMPACTION_SETTINGS}
        change = {k: v for k, v in wanted.items() if config.get(k) != v}
        yield rule.finding(
            "topic", topic.name, "; ".join(reasons),
            "apply strongroom's keys topic configuration (bounded compaction lag, hourly segment roll)",
            evidence={"reasons": reasons, "recommended": wanted, **config_evidence(topic, *_COMPACTION_SETTINGS)},
            commands=[settings.tools.alter_topic(topic.name, change)] if change else [],
        )  # fmt: skip


@CLUSTER_RULES.rule(
    "keys-topic-deletes-keys",
    Severity.CRITICAL,
    "Keys topic cleanup.policy includes delete",
    "Time- or size-based retention deletes live subject keys, and every record encrypted under them "
    "becomes undecryptable: silent loss of the data the keys protect.",
)
def keys_topic_deletes_keys(
    rule: ClusterRule, snapshot: ClusterSnapshot, settings: ClusterCheckSettings
) -> Iterator[Finding]:
    for topic in snapshot.checked_topics():
        if not settings.is_keys_topic(topic.name) or not topic.config:
            continue
        policy = topic.setting("cleanup.policy")
        if "delete" not in _cleanup_policies(policy.value if policy is not None else None):
            continue
        yield rule.finding(
            "topic", topic.name,
            f"cleanup.policy={policy.value if policy else 'delete'} "
            f"({policy.where if policy else 'default'}): retention deletes keys still in use",
            "set cleanup.policy=compact on the keys topic now, before retention.ms passes for the oldest keys",
            evidence=config_evidence(topic, "cleanup.policy", "retention.ms", "retention.bytes"),
            commands=[settings.tools.alter_topic(topic.name, {"cleanup.policy": KEYS_TOPIC_CONFIG["cleanup.policy"]})],
        )  # fmt: skip


@CLUSTER_RULES.rule(
    "keys-topic-missing",
    Severity.INFO,
    "Named keys topic does not exist",
    "A keys topic given with --keys-topic was not found, so its settings could not be checked.",
)
def keys_topic_missing(
    rule: ClusterRule, snapshot: ClusterSnapshot, settings: ClusterCheckSettings
) -> Iterator[Finding]:
    if not settings.keys_topics_explicit:
        return
    for name in settings.keys_topics:
        if name not in snapshot.topics:
            yield rule.finding(
                "topic", name, "keys topic not found in the cluster",
                "check the name (--keys-topic) and the cluster; strongroom creates it on first use",
            )  # fmt: skip
