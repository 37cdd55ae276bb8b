"""The keys, erase and erasure commands against a real cluster, in JSON and text."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from strongroom.cli.main import main
from strongroom.kafka.config import ClientConfig
from strongroom.keys import KeyManager, KeyTable
from strongroom.kms.metered import MeteredKms
from strongroom.testing.kafka_cluster import KafkaCluster


def run(capsys: pytest.CaptureFixture[str], *argv: str, code: int = 0) -> Any:
    assert main(["--output", "json", *argv]) == code, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def test_keys_and_erasure_commands(
    kafka_cluster: KafkaCluster,
    unique_name: Callable[[str], str],
    readers_topic: str,
    kms: MeteredKms,
    fast_compaction: dict[str, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    bootstrap = kafka_cluster.bootstrap_servers
    topic = unique_name("keys")
    common = ["-b", bootstrap, "--keys-topic", topic, "--readers-topic", readers_topic]
    overrides = [arg for k, v in fast_compaction.items() for arg in ("--config", f"{k}={v}")]
    created = run(capsys, "keys", "create-topic", *common, "--partitions", "2", *overrides)
    assert created["created"] is True
    assert created["partitions"] == 2
    assert created["config"]["cleanup.policy"] == "compact"
    assert created["compaction_blockers"] == []
    assert run(capsys, "keys", "create-topic", *common)["created"] is False

    client = ClientConfig(bootstrap, extra={"log_level": 0})
    with KeyManager(client, kms, topic=topic, table_options={"readers_topic": readers_topic}) as manager:
        manager.get_or_create(["ann", "ben", "cat"])
    running = KeyTable(client, kms, topic=topic, readers_topic=readers_topic, heartbeat_interval=1.0).open()
    try:
        running.wait_caught_up(30)
        listed = run(capsys, "keys", "readers", *common)
        assert running.reader_id in {r["reader_id"] for r in listed}

        shown = run(capsys, "keys", "show", *common, "ann")
        assert shown[0]["erasure_marker"] is None
        assert len(shown[0]["keys"]) == 1

        inventory = run(capsys, "keys", "inventory", *common)
        (kek_ref, entry), = inventory["keks"].items()  # fmt: skip
        assert entry["subject_keys"] == 3
        subjects = run(capsys, "keys", "inventory", *common, "--kek", kek_ref, "--list-subjects")["subjects"]
        assert subjects == ["ann", "ben", "cat"]

        requests = tmp_path / "requests.txt"
        requests.write_text("# from the ticket system\nben\n\nnobody\n")
        receipt = run(capsys, "erase", *common, "ann", "--from-file", str(requests), "--reason", "art. 17",
                      "--requested-by", "dpo@example.com", "--wait", "60")  # fmt: skip
        assert receipt["status"] == "verified"
        assert [s["subject"] for s in receipt["subjects"]] == ["ann", "ben", "nobody"]
        assert receipt["keys_tombstoned"] == 2
        assert all(v["status"] == "verified" for v in receipt["verification"])

        statuses = run(capsys, "erasure", "status", *common, "--all")
        assert {s["subject"]: s["status"] for s in statuses} == {
            "ann": "verified",
            "ben": "verified",
            "nobody": "verified",
        }
        never = run(capsys, "erasure", "status", *common, "cat", code=4)
        assert never[0]["status"] == "not-erased"
        assert run(capsys, "keys", "show", *common, "ann")[0]["erasure_marker"] is not None

        # Text output for people.
        assert main(["erasure", "status", *common, "ann"]) == 0
        text = capsys.readouterr().out
        assert "ann: verified" in text
        assert "evidence: partition" in text
    finally:
        running.close()
    forgotten = run(capsys, "keys", "readers", *common, "--forget", running.reader_id)
    assert forgotten["forgotten"] == running.reader_id
    assert main(["keys", "readers", *common, "--forget", "nobody-reads"]) == 1
    assert "no reader 'nobody-reads'" in capsys.readouterr().err


def test_erase_against_a_missing_keys_topic_is_a_clear_error(
    kafka_cluster: KafkaCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["erase", "-b", kafka_cluster.bootstrap_servers, "--keys-topic", "no-such-keys-topic", "x", "--reason", "r"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "topic 'no-such-keys-topic' does not exist" in err
    assert "strongroom keys create-topic" in err
