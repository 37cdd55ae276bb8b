"""strongroom doctor against real Kafka clusters: exact findings per bad setting, none on good ones.

Most tests share one private, well-configured 4-broker cluster - what doctor recommends: 4 brokers,
min.insync.replicas=2 and default.replication.factor=3 as broker defaults, internal topics with RF 3 and
transaction.state.log.min.isr=2 - with a SASL listener for the authentication test. The test that stops a
broker restarts it. The remediation commands doctor prints are run through Kafka's own ConfigCommand to
prove they fix what they claim to fix.
"""

from __future__ import annotations

import json
import re
import shlex
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)

from strongroom.cli.main import main
from strongroom.kafka.config import ClientConfig
from strongroom.kafka.transport import build_consumer
from strongroom.keys.topic_config import KEYS_TOPIC_CONFIG
from strongroom.testing.kafka_cluster import TOOLS, KafkaCluster

pytestmark = pytest.mark.integration

SASL_USER = "admin"
SASL_PASSWORD = "right"


@pytest.fixture(scope="module")
def doctor_cluster() -> Iterator[KafkaCluster]:
    cluster = KafkaCluster(
        brokers=4,
        broker_config={"min.insync.replicas": 2, "default.replication.factor": 3},
        sasl_users={SASL_USER: SASL_PASSWORD},
        heap="384m",
    ).start()
    try:
        yield cluster
    finally:
        cluster.stop()


def doctor(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    capsys.readouterr()
    code = main(["--output", "json", "doctor", *args])
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip() else {}


def rules_by_subject(report: dict[str, Any]) -> dict[str, set[str]]:
    found: dict[str, set[str]] = defaultdict(set)
    for finding in report["findings"]:
        found[finding["subject"]].add(finding["rule"])
    return found


def create(
    cluster: KafkaCluster, name: str, rf: int = 3, config: dict[str, Any] | None = None, partitions: int = 1
) -> str:
    return cluster.create_topic(name, partitions, rf, config or {})


def create_assigned(cluster: KafkaCluster, name: str, replicas: list[int], config: dict[str, str]) -> str:
    futures = cluster.admin().create_topics(
        [NewTopic(name, num_partitions=1, replica_assignment=[replicas], config=config)]
    )
    futures[name].result(30)
    cluster.wait_for_leaders(name, 1)
    return name


def run_kafka_configs(cluster: KafkaCluster, command: str) -> None:
    """Run a ``kafka-configs.sh ...`` line doctor printed, through Kafka's own ConfigCommand.

    The tool returns once the controller has the change; each broker applies it when it replays the
    metadata log, a moment later on a busy machine. So this waits until the brokers that describe the
    entity show the change, as an operator would re-run doctor after a moment, instead of racing them.
    """
    args = shlex.split(command)
    assert args[0] == "kafka-configs.sh"
    cluster.run_tool(TOOLS["configs"], *args[1:])
    wait_until_described(cluster, args[1:])


def _option(args: list[str], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args else None


def wait_until_described(cluster: KafkaCluster, args: list[str], timeout: float = 30.0) -> None:
    """Wait until ``describe_configs`` shows what a kafka-configs ``--alter`` line added and deleted."""
    # key=value pairs joined by commas; a list value is in brackets: cleanup.policy=[compact,delete]
    added = dict(re.findall(r"([^=,]+)=(\[[^\]]*\]|[^,]*)", _option(args, "--add-config") or ""))
    deleted = [key for key in (_option(args, "--delete-config") or "").split(",") if key]
    # the source of a value this line sets: a deleted value is gone once another source answers for it
    if _option(args, "--entity-type") == "topics":
        resources = [ConfigResource(ResourceType.TOPIC, _option(args, "--entity-name"))]
        owned = ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    elif (name := _option(args, "--entity-name")) is not None:  # one broker
        resources = [ConfigResource(ResourceType.BROKER, name)]
        owned = ConfigSource.DYNAMIC_BROKER_CONFIG.value
    else:  # --entity-default: every broker describes its own view of it
        ids = [str(b) for b in cluster.admin().list_topics(timeout=10).brokers]
        resources = [ConfigResource(ResourceType.BROKER, broker) for broker in ids]
        owned = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
    admin = cluster.admin()
    deadline = time.monotonic() + timeout
    while True:
        shown = [admin.describe_configs([r])[r].result(10) for r in resources]
        if all(
            all(key in entries and entries[key].value == value.strip("[]") for key, value in added.items())
            and all(key not in entries or entries[key].source != owned for key in deleted)
            for entries in shown
        ):
            return
        assert time.monotonic() < deadline, f"brokers did not apply {args} within {timeout:.0f} s"
        time.sleep(0.2)


def test_each_bad_setting_gives_exactly_its_findings(
    doctor_cluster: KafkaCluster, unique_name: Callable[[str], str], capsys: pytest.CaptureFixture[str]
) -> None:
    p = unique_name("doc")
    keys = f"{p}-deleting-strongroom-keys"
    lazy_keys = f"{p}-lazy-strongroom-keys"
    expected: dict[str, set[str]] = {
        create(doctor_cluster, f"{p}-good-rf3"): set(),
        create(doctor_cluster, f"{p}-good-rf4", 4, {"min.insync.replicas": 2}): set(),
        create(doctor_cluster, f"{p}-good-strongroom-keys", 3, KEYS_TOPIC_CONFIG): set(),
        create(doctor_cluster, f"{p}-rf2", 2, {"min.insync.replicas": 1}): {"replication-factor-below-3"},
        create(doctor_cluster, f"{p}-rf2-strict", 2): {"replication-factor-below-3", "min-isr-equals-rf"},
        create(doctor_cluster, f"{p}-rf1", 1): {"replication-factor-below-3", "min-isr-above-rf"},
        create(doctor_cluster, f"{p}-minisr-eq", 3, {"min.insync.replicas": 3}): {"min-isr-equals-rf"},
        create(doctor_cluster, f"{p}-minisr-1", 3, {"min.insync.replicas": 1}): {"min-isr-too-low"},
        create(doctor_cluster, f"{p}-minisr-4", 3, {"min.insync.replicas": 4}): {"min-isr-above-rf"},
        create(doctor_cluster, f"{p}-unclean", 3, {"unclean.leader.election.enable": "true"}): {
            "unclean-leader-election-enabled"
        },
        create(doctor_cluster, keys, 3, {"cleanup.policy": "delete"}): {
            "keys-topic-deletes-keys",
            "keys-topic-compaction-blocked",
        },
        create(doctor_cluster, lazy_keys, 3, {"cleanup.policy": "compact"}): {"keys-topic-compaction-blocked"},
    }
    code, report = doctor(capsys, "-b", doctor_cluster.bootstrap_servers, "--topic", f"{p}-*")
    assert code == 4
    found = rules_by_subject(report)
    assert {topic: found.get(topic, set()) for topic in expected} == expected
    # Nothing about the cluster itself: 4 brokers, good broker defaults, good internal-topic settings.
    assert set(found) <= set(expected)
    assert report["target"]["brokers"] == [1, 2, 3, 4]
    assert sorted(report["target"]["keys_topics"]) == sorted([keys, lazy_keys, f"{p}-good-strongroom-keys"])

    # Evidence says where a value comes from: the topic override, or the cluster default it inherits.
    by_key = {(f["rule"], f["subject"]): f for f in report["findings"]}
    eq = by_key[("min-isr-equals-rf", f"{p}-minisr-eq")]
    assert eq["evidence"]["min.insync.replicas"]["source"] == "topic"
    strict = by_key[("min-isr-equals-rf", f"{p}-rf2-strict")]
    assert strict["evidence"]["min.insync.replicas"]["source"] == "cluster-default"

    # The printed fixes work: apply them with Kafka's own kafka-configs and the findings are gone.
    run_kafka_configs(doctor_cluster, eq["commands"][0])
    run_kafka_configs(doctor_cluster, by_key[("keys-topic-deletes-keys", keys)]["commands"][0])
    run_kafka_configs(doctor_cluster, by_key[("keys-topic-compaction-blocked", keys)]["commands"][0])
    code, after = doctor(capsys, "-b", doctor_cluster.bootstrap_servers, "--topic", f"{p}-minisr-eq", "--topic", keys)
    assert after["findings"] == []
    assert code == 0


def test_well_configured_cluster_has_no_findings(
    doctor_cluster: KafkaCluster,
    unique_name: Callable[[str], str],
    new_group: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    p = unique_name("ok")
    create(doctor_cluster, f"{p}-orders", 3, partitions=6)
    create(doctor_cluster, f"{p}-payments", 4, {"min.insync.replicas": 2}, partitions=3)
    create(doctor_cluster, f"{p}-strongroom-keys", 3, KEYS_TOPIC_CONFIG)
    # A committed offset makes the brokers create __consumer_offsets, which doctor always checks.
    consumer = build_consumer(ClientConfig(doctor_cluster.bootstrap_servers).consumer(new_group))
    try:
        consumer.commit(offsets=[TopicPartition(f"{p}-orders", 0, 0)], asynchronous=False)
    finally:
        consumer.close()
    code, report = doctor(capsys, "-b", doctor_cluster.bootstrap_servers, "--topic", f"{p}-*")
    assert "__consumer_offsets" in doctor_cluster.admin().list_topics(timeout=10).topics
    assert report["findings"] == []
    assert report["summary"] == {"critical": 0, "error": 0, "warning": 0, "info": 0}
    assert code == 0
    assert report["target"]["topics_checked"] == 4  # three topics + __consumer_offsets


def test_broker_level_unclean_election_and_partition_limit(
    doctor_cluster: KafkaCluster, unique_name: Callable[[str], str], capsys: pytest.CaptureFixture[str]
) -> None:
    bootstrap = doctor_cluster.bootstrap_servers
    broker_2 = f"kafka-configs.sh --bootstrap-server {bootstrap} --alter --entity-type brokers --entity-name 2 "
    run_kafka_configs(doctor_cluster, broker_2 + "--add-config unclean.leader.election.enable=true")
    only_unclean = ("-b", bootstrap, "--rule", "unclean-leader-election-enabled", "--topic", "none")
    try:
        code, report = doctor(capsys, *only_unclean)
        (finding,) = report["findings"]
        assert (finding["subject_kind"], finding["subject"]) == ("broker", "2")
        assert finding["evidence"]["brokers"]["2"]["source"] == "broker"
        assert code == 4
        run_kafka_configs(doctor_cluster, finding["commands"][0])  # doctor's own fix
        code, report = doctor(capsys, *only_unclean)
        assert report["findings"] == []
        assert code == 0
    finally:
        run_kafka_configs(doctor_cluster, broker_2 + "--delete-config unclean.leader.election.enable")

    # Partition replicas per broker against a (tiny) configured limit, counted over every topic.
    create(doctor_cluster, unique_name("wide"), 3, partitions=8)
    metadata = doctor_cluster.admin().list_topics(timeout=10)
    replicas = defaultdict(int)
    for topic in metadata.topics.values():
        for partition in topic.partitions.values():
            for broker in partition.replicas:
                replicas[broker] += 1
    code, report = doctor(
        capsys, "-b", bootstrap, "--rule", "partitions-per-broker-high", "--max-partitions-per-broker", "10"
    )
    counted = {int(f["subject"]): f["evidence"]["replicas"] for f in report["findings"]}
    assert counted == {b: n for b, n in replicas.items() if n >= 7}
    assert all(f["severity"] == "error" for f in report["findings"] if f["evidence"]["replicas"] >= 10)


def test_authentication_failure_and_success_over_sasl(
    doctor_cluster: KafkaCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wrong = tmp_path / "wrong.properties"
    wrong.write_text(
        f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username={SASL_USER}\nsasl.password=wrong-pw\n"
    )
    code = main(
        ["doctor", "-b", doctor_cluster.sasl_bootstrap_servers, "--command-config", str(wrong), "--timeout", "5"]
    )
    captured = capsys.readouterr()
    assert code == 1
    assert captured.out == ""
    (line,) = [line for line in captured.err.splitlines() if line.startswith("error:")]
    assert line.startswith(f"error: authentication failed at Kafka {doctor_cluster.sasl_bootstrap_servers}")
    assert f"check sasl.mechanism, sasl.username and sasl.password in {wrong}" in line
    assert "wrong-pw" not in captured.err
    assert "Traceback" not in captured.err

    right = tmp_path / "right.properties"
    right.write_text(wrong.read_text().replace("wrong-pw", SASL_PASSWORD))
    code, report = doctor(
        capsys, "-b", doctor_cluster.sasl_bootstrap_servers, "--command-config", str(right), "--topic", "none"
    )
    assert code == 0
    assert report["target"]["brokers"] == [1, 2, 3, 4]
    assert report["notes"] == ["no topic matches --topic none (only Kafka's internal topics checked)"]


def test_single_broker_cluster_findings(
    kafka_cluster: KafkaCluster,
    new_topic: Callable[..., str],
    new_group: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    topic = new_topic()
    consumer = build_consumer(ClientConfig(kafka_cluster.bootstrap_servers).consumer(new_group))
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
    finally:
        consumer.close()
    code, report = doctor(capsys, "-b", kafka_cluster.bootstrap_servers, "--topic", topic)
    found = rules_by_subject(report)
    assert code == 4
    assert found[topic] == {"replication-factor-below-3"}
    assert found["__consumer_offsets"] == {"internal-topic-weak-replication"}
    assert found[report["target"]["cluster_id"]] == {"brokers-fewer-than-3"}


def _wait_for(condition: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.5)
    raise AssertionError("condition not met in time")


def test_broker_down_now_under_replicated_under_min_isr_offline(
    doctor_cluster: KafkaCluster, unique_name: Callable[[str], str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Runs last in this module: it stops broker 4 and restarts it afterwards."""
    p = unique_name("down")
    urp = create_assigned(doctor_cluster, f"{p}-urp", [1, 2, 4], {})
    below = create_assigned(doctor_cluster, f"{p}-below", [1, 4], {"min.insync.replicas": "2"})
    offline = create_assigned(doctor_cluster, f"{p}-offline", [4], {"min.insync.replicas": "1"})
    wide = create(doctor_cluster, f"{p}-wide", 4)
    doctor_cluster.stop_broker(4)
    try:
        admin = doctor_cluster.admin()

        def settled() -> bool:
            topics = admin.list_topics(timeout=10).topics
            return (
                4 not in topics[urp].partitions[0].isrs
                and 4 not in topics[below].partitions[0].isrs
                and topics[offline].partitions[0].leader == -1
            )

        _wait_for(settled)
        code, report = doctor(capsys, "-b", doctor_cluster.bootstrap_servers, "--topic", f"{p}-*", "--timeout", "10")
        found = rules_by_subject(report)
        assert found[urp] == {"partitions-under-replicated"}
        assert found[below] == {
            "partitions-under-min-isr",
            "partitions-under-replicated",
            "replication-factor-below-3",
            "min-isr-equals-rf",
        }
        assert found[offline] == {"partitions-offline", "replication-factor-below-3"}
        assert found[wide] == {"replication-factor-above-brokers", "partitions-under-replicated"}
        assert found[report["target"]["cluster_id"]] == {"brokers-exactly-3"}
        assert code == 4
        offline_finding = next(f for f in report["findings"] if f["rule"] == "partitions-offline")
        assert offline_finding["evidence"]["partitions"][0]["on_dead_brokers"] == [4]
    finally:
        doctor_cluster.start_broker(4)
