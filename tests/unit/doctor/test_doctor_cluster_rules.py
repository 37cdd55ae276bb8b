"""Every cluster rule on hand-built snapshots: it fires on the bad setting, stays quiet on the good one."""

from __future__ import annotations

import json

import pytest
from doctor_builders import internal_topics, snapshot, topic

from strongroom.doctor import CLUSTER_RULES, ClusterCheckSettings, ClusterSnapshot, Finding, Severity, check_snapshot
from strongroom.doctor.limits import PartitionLimit, partition_limit
from strongroom.doctor.remediation import KafkaTools
from strongroom.doctor.snapshot import ConfigValue, Partition, Topic
from strongroom.errors import ConfigError, DoctorError
from strongroom.keys.topic_config import KEYS_TOPIC_CONFIG


def ids(snap: ClusterSnapshot, settings: ClusterCheckSettings | None = None, subject: str | None = None) -> set[str]:
    return check_snapshot(snap, settings).rule_ids(subject)


def findings(snap: ClusterSnapshot, rule_id: str, settings: ClusterCheckSettings | None = None) -> list[Finding]:
    return [f for f in check_snapshot(snap, settings).findings if f.rule_id == rule_id]


def test_healthy_four_broker_cluster_has_no_findings() -> None:
    snap = snapshot(
        topic("orders", 3, partitions=6),
        topic("payments", 4, partitions=3, min_isr=2, min_isr_source="topic"),
        topic("strongroom-keys", 3, config=KEYS_TOPIC_CONFIG),
        *internal_topics(),
    )
    report = check_snapshot(snap)
    assert report.findings == []
    assert report.exit_code == 0


def test_rule_ids_are_unique_kebab_case_and_documented_severities() -> None:
    for rule in CLUSTER_RULES:
        assert rule.id == rule.id.lower()
        assert " " not in rule.id
        assert rule.title
        assert rule.why
        assert isinstance(rule.severity, Severity)


# ------------------------------------------------------------------------------------ brokers


@pytest.mark.parametrize(("brokers", "expected"), [(1, "brokers-fewer-than-3"), (2, "brokers-fewer-than-3")])
def test_fewer_than_three_brokers_is_an_error(brokers: int, expected: str) -> None:
    found = findings(snapshot(brokers=brokers), expected)
    assert len(found) == 1
    assert found[0].severity is Severity.ERROR
    assert found[0].evidence["live_brokers"] == list(range(1, brokers + 1))
    assert "brokers-exactly-3" not in ids(snapshot(brokers=brokers))


def test_exactly_three_brokers_is_a_warning_recommending_four() -> None:
    report = check_snapshot(snapshot(topic("t", 3, brokers=(1, 2, 3)), brokers=3))
    assert report.rule_ids() == {"brokers-exactly-3"}
    (finding,) = report.findings
    assert finding.severity is Severity.WARNING
    assert "4" in finding.fix
    assert "two brokers down" in finding.why
    assert report.exit_code == 0  # a warning does not fail the default --fail-on error


def test_four_brokers_no_broker_count_finding() -> None:
    assert ids(snapshot(brokers=4)) == set()


def test_broker_defaults_weak_names_the_cluster_default_command() -> None:
    weak = {
        "default.replication.factor": ConfigValue("1", "kafka-default"),
        "min.insync.replicas": ConfigValue("1", "cluster-default"),
    }
    (finding,) = findings(snapshot(broker_config=weak), "broker-defaults-weak")
    assert finding.subject == "1,2,3,4"
    assert set(finding.evidence) == {"default.replication.factor", "min.insync.replicas"}
    assert "--entity-default" in finding.commands[0]
    assert "default.replication.factor=3,min.insync.replicas=2" in finding.commands[0]
    # With fewer than 3 brokers, RF-3 defaults are impossible; brokers-fewer-than-3 says what to do.
    assert "broker-defaults-weak" not in ids(snapshot(brokers=2, broker_config=weak))


# ------------------------------------------------------------------------------------ replication


@pytest.mark.parametrize("rf", [1, 2])
def test_replication_factor_below_three_with_reassignment_plan(rf: int) -> None:
    snap = snapshot(topic("thin", rf, partitions=4, min_isr=1, min_isr_source="topic"))
    (finding,) = findings(snap, "replication-factor-below-3")
    assert finding.severity is Severity.ERROR
    assert finding.subject == "thin"
    plan = finding.evidence["reassignment_plan"]
    assert [len(p["replicas"]) for p in plan["partitions"]] == [3, 3, 3, 3]
    for entry, partition in zip(plan["partitions"], snap.topics["thin"].partitions, strict=True):
        assert entry["replicas"][:rf] == list(partition.replicas)  # existing replicas (leader first) kept
        assert len(set(entry["replicas"])) == 3
    assert json.loads(finding.commands[0].splitlines()[1]) == plan
    assert "kafka-reassign-partitions.sh" in finding.commands[1]
    assert "min.insync.replicas=2" in finding.commands[2]


def test_replication_factor_below_three_on_small_cluster_says_add_brokers() -> None:
    (finding,) = findings(snapshot(topic("t", 1, min_isr=1, brokers=(1,)), brokers=1), "replication-factor-below-3")
    assert "add brokers" in finding.fix
    assert finding.commands == ()


def test_replication_factor_above_live_brokers() -> None:
    snap = snapshot(topic("wide", 4, brokers=(1, 2, 3, 4)), brokers=3)  # broker 4 is gone
    (finding,) = findings(snap, "replication-factor-above-brokers")
    assert finding.evidence["missing_brokers"] == [4]
    assert "replication-factor-above-brokers" not in ids(snapshot(topic("ok", 3)))


def test_min_isr_above_rf_is_critical_and_not_also_under_min_isr() -> None:
    snap = snapshot(topic("never", 3, min_isr=4, min_isr_source="topic"))
    assert ids(snap) == {"min-isr-above-rf"}
    (finding,) = findings(snap, "min-isr-above-rf")
    assert finding.severity is Severity.CRITICAL
    assert "min.insync.replicas=2" in finding.commands[0]


def test_min_isr_equals_rf_topic_override() -> None:
    snap = snapshot(topic("strict", 3, min_isr=3, min_isr_source="topic"))
    assert ids(snap) == {"min-isr-equals-rf"}
    (finding,) = findings(snap, "min-isr-equals-rf")
    assert finding.evidence["min.insync.replicas"] == {"value": "3", "source": "topic", "where": "topic override"}
    assert finding.commands == (KafkaTools().alter_topic("strict", {"min.insync.replicas": 2}),)
    assert "maintenance" in finding.why


def test_min_isr_equals_rf_inherited_offers_cluster_default_too() -> None:
    snap = snapshot(topic("rf2", 2, min_isr=2), topic("rf3", 3, min_isr=3, min_isr_source="cluster-default"))
    rf3 = next(f for f in findings(snap, "min-isr-equals-rf") if f.subject == "rf3")
    assert "inherited" in rf3.fix
    assert len(rf3.commands) == 2
    assert "--entity-default" in rf3.commands[1]
    rf2 = next(f for f in findings(snap, "min-isr-equals-rf") if f.subject == "rf2")
    assert "raise the replication factor" in rf2.fix  # RF 2 cannot keep min ISR 2 and lose a broker
    assert ids(snap, subject="rf2") == {"replication-factor-below-3", "min-isr-equals-rf"}


def test_rf_one_min_isr_one_is_only_the_replication_finding() -> None:
    assert ids(snapshot(topic("single", 1, min_isr=1))) == {"replication-factor-below-3"}


def test_min_isr_one_with_rf_three_can_lose_acknowledged_writes() -> None:
    snap = snapshot(topic("loose", 3, min_isr=1, min_isr_source="kafka-default"))
    assert ids(snap) == {"min-isr-too-low"}
    (finding,) = findings(snap, "min-isr-too-low")
    assert "acknowledged record is lost" in finding.why
    assert ids(snapshot(topic("rf2", 2, min_isr=1))) == {"replication-factor-below-3"}


def test_unclean_leader_election_topic_override() -> None:
    snap = snapshot(topic("yolo", 3, config={"unclean.leader.election.enable": "true"}))
    assert ids(snap) == {"unclean-leader-election-enabled"}
    (finding,) = findings(snap, "unclean-leader-election-enabled")
    assert finding.subject_kind == "topic"
    assert "unclean.leader.election.enable=false" in finding.commands[0]


def test_unclean_leader_election_broker_level() -> None:
    snap = snapshot(
        topic("t", 3),
        broker_config={"unclean.leader.election.enable": ConfigValue("true", "cluster-default")},
    )
    (finding,) = findings(snap, "unclean-leader-election-enabled")
    assert finding.subject_kind == "broker"
    assert finding.subject == "1,2,3,4"
    assert "--entity-default --delete-config unclean.leader.election.enable" in finding.commands[0]


def test_internal_topics_are_not_judged_by_the_regular_topic_rules() -> None:
    snap = snapshot(*internal_topics(rf=3, min_isr=3))
    assert ids(snap) == {"internal-topic-weak-replication"}


# ------------------------------------------------------------------------------------ health now


def test_offline_partitions_are_critical() -> None:
    snap = snapshot(topic("dark", 1, partitions=2, min_isr=1, leader=-1, isr=(), brokers=(4, 5)), brokers=3)
    (finding,) = findings(snap, "partitions-offline")
    assert finding.severity is Severity.CRITICAL
    assert finding.evidence["count"] == 2
    assert finding.evidence["partitions"][0]["on_dead_brokers"] == [4]


def test_under_min_isr_and_under_replicated_now() -> None:
    snap = snapshot(topic("shrunk", 3, partitions=2, isr=(1,), leader=1))
    assert ids(snap) == {"partitions-under-min-isr", "partitions-under-replicated"}
    (below,) = findings(snap, "partitions-under-min-isr")
    assert below.severity is Severity.CRITICAL
    assert below.evidence["partitions"][0]["out_of_sync"] == [2, 3]
    lagging = snapshot(topic("lagging", 3, isr=(1, 2), leader=1))
    assert ids(lagging) == {"partitions-under-replicated"}


def test_health_rules_cover_internal_topics() -> None:
    offsets = topic("__consumer_offsets", 3, partitions=1, isr=(1, 2), leader=1)
    assert "partitions-under-replicated" in ids(snapshot(offsets, internal_topics()[1]))


def test_evidence_lists_at_most_twenty_partitions_but_counts_all() -> None:
    (finding,) = findings(snapshot(topic("big", 3, partitions=50, isr=(1, 2, 3, 4)[:2])), "partitions-under-replicated")
    assert finding.evidence["count"] == 50
    assert len(finding.evidence["partitions"]) == 20


# ------------------------------------------------------------------------------------ capacity


def test_partitions_per_broker_warning_then_error() -> None:
    settings = ClusterCheckSettings(partition_limit=PartitionLimit(100, "test"))
    # 4 brokers, RF 3: 100 partitions -> 75 replicas per broker (>= 70% of 100) -> warning
    warn = findings(snapshot(topic("t", 3, partitions=100)), "partitions-per-broker-high", settings)
    assert {f.severity for f in warn} == {Severity.WARNING}
    assert len(warn) == 4
    assert warn[0].evidence["limit_source"] == "test"
    assert warn[0].evidence["replicas"] == 75
    over = findings(snapshot(topic("t", 3, partitions=200)), "partitions-per-broker-high", settings)
    assert {f.severity for f in over} == {Severity.ERROR}
    assert findings(snapshot(topic("t", 3, partitions=80)), "partitions-per-broker-high", settings) == []


def test_partition_count_counts_unchecked_topics_too() -> None:
    settings = ClusterCheckSettings(partition_limit=PartitionLimit(10, "test"))
    snap = snapshot(topic("mine", 3), topic("theirs", 3, partitions=20), checked=["mine"])
    assert {f.subject for f in findings(snap, "partitions-per-broker-high", settings)} == {"1", "2", "3", "4"}


def test_partition_limits_from_msk_sizes_and_options() -> None:
    assert partition_limit().per_broker == 4000
    assert partition_limit(broker_type="kafka.m5.large").per_broker == 1000
    assert partition_limit(broker_type="t3.small").per_broker == 300
    assert partition_limit(per_broker=50).source == "--max-partitions-per-broker"
    with pytest.raises(ConfigError, match="unknown MSK broker type"):
        partition_limit(broker_type="kafka.m99.huge")
    with pytest.raises(ConfigError, match="both"):
        partition_limit(per_broker=1, broker_type="kafka.m5.large")


def test_topic_with_more_than_1000_partitions_is_info() -> None:
    snap = snapshot(topic("wide", 3, partitions=1001))
    (finding,) = findings(snap, "topic-partitions-high")
    assert finding.severity is Severity.INFO


# ------------------------------------------------------------------------------------ internal topics


def test_internal_topic_rf_and_min_isr() -> None:
    snap = snapshot(*internal_topics(rf=1, min_isr=1), brokers=4)
    found = {f.subject: f for f in findings(snap, "internal-topic-weak-replication")}
    assert set(found) == {"__consumer_offsets", "__transaction_state"}
    assert "replication factor 1 < 3" in found["__consumer_offsets"].problem
    assert "reassignment_plan" in found["__consumer_offsets"].evidence
    low = snapshot(*internal_topics(rf=3, min_isr=1))
    assert {f.subject for f in findings(low, "internal-topic-weak-replication")} == {
        "__consumer_offsets",
        "__transaction_state",
    }


def test_internal_topic_not_created_yet_checks_broker_settings() -> None:
    weak = {
        "offsets.topic.replication.factor": ConfigValue("1", "broker-static"),
        "transaction.state.log.min.isr": ConfigValue("1", "broker-static"),
    }
    found = {f.subject: f for f in findings(snapshot(broker_config=weak), "internal-topic-weak-replication")}
    assert set(found) == {"__consumer_offsets", "__transaction_state"}
    assert "offsets.topic.replication.factor=1" in found["__consumer_offsets"].problem
    assert found["__transaction_state"].evidence["exists"] is False
    assert findings(snapshot(), "internal-topic-weak-replication") == []


# ------------------------------------------------------------------------------------ keys topics


def test_keys_topic_with_delete_policy_is_critical_and_compaction_blocked() -> None:
    snap = snapshot(topic("strongroom-keys", 3, config={"cleanup.policy": "delete"}))
    assert ids(snap) == {"keys-topic-deletes-keys", "keys-topic-compaction-blocked"}
    (deletes,) = findings(snap, "keys-topic-deletes-keys")
    assert deletes.severity is Severity.CRITICAL
    assert "cleanup.policy=compact" in deletes.commands[0]
    (blocked,) = findings(snap, "keys-topic-compaction-blocked")
    assert not any("includes delete" in r for r in blocked.evidence["reasons"])  # said once, by the other rule


def test_keys_topic_compacted_with_default_lags_is_blocked() -> None:
    snap = snapshot(topic("tenant-a-strongroom-keys", 3, config={"cleanup.policy": "compact"}))
    assert ids(snap) == {"keys-topic-compaction-blocked"}
    (finding,) = findings(snap, "keys-topic-compaction-blocked")
    assert "max.compaction.lag.ms" in finding.problem
    assert "max.compaction.lag.ms=21600000" in finding.commands[0]
    assert "cleanup.policy" not in finding.commands[0]  # already right


def test_compact_delete_policy_on_keys_topic() -> None:
    snap = snapshot(topic("strongroom-keys", 3, config={**KEYS_TOPIC_CONFIG, "cleanup.policy": "compact,delete"}))
    assert ids(snap) == {"keys-topic-deletes-keys"}


def test_keys_topics_are_found_by_name_only() -> None:
    snap = snapshot(topic("events", 3, config={"cleanup.policy": "delete"}))
    assert ids(snap) == set()
    named = ClusterCheckSettings(keys_topics=("events",), keys_topics_explicit=True)
    assert ids(snap, named) == {"keys-topic-deletes-keys", "keys-topic-compaction-blocked"}


def test_explicitly_named_missing_keys_topic_is_info() -> None:
    named = ClusterCheckSettings(keys_topics=("nowhere",), keys_topics_explicit=True)
    (finding,) = findings(snapshot(), "keys-topic-missing", named)
    assert finding.severity is Severity.INFO
    assert findings(snapshot(), "keys-topic-missing") == []  # the default name may simply be unused


# ------------------------------------------------------------------------------------ registry, report


def test_select_and_skip_rules() -> None:
    snap = snapshot(topic("strict", 3, min_isr=3, min_isr_source="topic"), brokers=3)
    assert check_snapshot(snap, only=["brokers-exactly-3"]).rule_ids() == {"brokers-exactly-3"}
    assert check_snapshot(snap, skip=["brokers-exactly-3"]).rule_ids() == {"min-isr-equals-rf"}
    with pytest.raises(DoctorError, match="unknown cluster rule 'min-isr-equal-rf'") as exc:
        check_snapshot(snap, only=["min-isr-equal-rf"])
    assert "did you mean 'min-isr-equals-rf'" in exc.value.hint


@pytest.mark.parametrize(
    ("fail_on", "code"), [(Severity.CRITICAL, 0), (Severity.ERROR, 4), (Severity.WARNING, 4), (Severity.INFO, 4)]
)
def test_exit_code_follows_fail_on(fail_on: Severity, code: int) -> None:
    snap = snapshot(topic("strict", 3, min_isr=3, min_isr_source="topic"))  # one error
    assert check_snapshot(snap, fail_on=fail_on).exit_code == code


def test_report_json_and_text() -> None:
    snap = snapshot(topic("strict", 3, min_isr=3, min_isr_source="topic"), topic("ok", 3), brokers=3)
    report = check_snapshot(snap)
    data = report.to_dict()
    assert data["summary"] == {"critical": 0, "error": 1, "warning": 1, "info": 0}
    assert data["failed"] is True
    assert data["exit_code"] == 4
    assert [f["rule"] for f in data["findings"]] == ["min-isr-equals-rf", "brokers-exactly-3"]  # most severe first
    json.dumps(data)
    text = report.render_text()
    assert text.index("== ERROR ==") < text.index("== WARNING ==")
    assert "[min-isr-equals-rf]" in text
    assert "$ kafka-configs.sh" in text
    assert "FAIL: findings at or above --fail-on error (exit 4)" in text


def test_commands_quote_topic_names_and_carry_command_config() -> None:
    tools = KafkaTools("b1:9092", "admin client.properties")
    command = tools.alter_topic("odd topic", {"cleanup.policy": "compact,delete"})
    assert "--command-config 'admin client.properties'" in command
    assert "--entity-name 'odd topic'" in command
    assert "cleanup.policy=[compact,delete]" in command


def test_topic_replication_factor_is_the_weakest_partition() -> None:
    mixed = Topic("mixed", (Partition(0, 1, (1, 2, 3), (1, 2, 3)), Partition(1, 1, (1,), (1,))))
    assert mixed.replication_factor == 1
    assert mixed.replication_factors == [1, 3]
