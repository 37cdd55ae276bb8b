"""An erasure past the deadline the keys topic's configs promise: `erasure status --fail-on overdue` exits 4
and `audit watch --check-erasures` raises it on its sinks (stdout JSON and a Kafka topic).

The keys topic compacts within seconds (segment.ms = max.compaction.lag.ms = 1 s), so the promised
deadline is 16 s after the tombstones (the larger of the two plus the cleaner's default back-off). With
``--no-nudge`` nothing appends to the quiet partition, its active segment (holding the tombstone) never
rolls, and compaction cannot remove the erased key record: the erasure stays pending past its deadline.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from strongroom.cli.main import main
from strongroom.kafka.config import ClientConfig
from strongroom.kafka.transport import build_consumer
from strongroom.keys import KeyManager, erase
from strongroom.kms.metered import MeteredKms
from strongroom.testing.kafka_cluster import KafkaCluster


def status(capsys: pytest.CaptureFixture[str], common: list[str], *extra: str) -> tuple[int, list[dict[str, Any]]]:
    code = main(["--output", "json", "erasure", "status", *common, "--all", "--no-nudge", *extra])
    return code, json.loads(capsys.readouterr().out)


def test_an_overdue_erasure_fails_the_status_check_and_raises_a_watch_alert(
    kafka_cluster: KafkaCluster,
    client: ClientConfig,
    keys_topic: str,
    readers_topic: str,
    kms: MeteredKms,
    unique_name: Callable[[str], str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    bootstrap = kafka_cluster.bootstrap_servers
    common = ["-b", bootstrap, "--keys-topic", keys_topic, "--readers-topic", readers_topic]
    with KeyManager(client, kms, topic=keys_topic, table_options={"readers_topic": readers_topic}) as manager:
        manager.get_or_create(["late-subject"])
    time.sleep(1.5)  # the key record's segment is older than segment.ms: the erasure's first append rolls it
    erased_at = time.monotonic()
    receipt = erase(client, ["late-subject"], reason="overdue test", topic=keys_topic)

    # pending but within the deadline: a pending check fails, an overdue check does not
    code, statuses = status(capsys, common, "--fail-on", "overdue")
    assert code == 0
    assert [(s["status"], s["overdue"]) for s in statuses] == [("pending", False)]
    assert statuses[0]["compaction_deadline"] is not None
    assert status(capsys, common)[0] == 4

    # the watcher checks the keys topic every second and raises the erasure once it is overdue
    alerts_topic = unique_name("alerts")
    watch = [
        "--output", "json", "audit", "watch", "-b", bootstrap, "--topic", keys_topic,
        "--state", str(tmp_path / "watch.json"), "--interval", "1s", "--duration", "30",
        "--alerts-topic", alerts_topic, "--check-erasures", "--keys-topic", keys_topic,
        "--readers-topic", readers_topic, "--erasure-interval", "1s", "--min-severity", "warning",
    ]  # fmt: skip
    assert main(watch) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    overdue = [a for a in lines if a.get("kind") == "erasure-overdue"]
    assert len(overdue) == 1, lines  # raised once, not on every check
    alert = overdue[0]
    assert alert["severity"] == "warning"
    assert alert["topic"] == keys_topic
    assert alert["evidence"]["request_id"] == receipt.request_id
    assert "late-subject" not in json.dumps(alert)  # the subject is named by its fingerprint only
    assert time.monotonic() - erased_at > 16

    consumer = build_consumer(
        {"bootstrap.servers": bootstrap, "group.id": unique_name("g"), "auto.offset.reset": "earliest"}
    )
    try:
        consumer.subscribe([alerts_topic])
        kinds: list[str] = []
        deadline = time.monotonic() + 20
        while "erasure-overdue" not in kinds and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                kinds.append(json.loads(msg.value())["kind"])
        assert "erasure-overdue" in kinds
    finally:
        consumer.close()

    # and the status check now fails on it, saying by how much
    code, statuses = status(capsys, common, "--fail-on", "overdue")
    assert code == 4
    assert [(s["status"], s["overdue"]) for s in statuses] == [("pending", True)]
    assert any("overdue" in reason for reason in statuses[0]["reasons"])
