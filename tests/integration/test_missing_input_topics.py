"""A command whose input topic does not exist says so, and how to create it (issue 15 item 7).

On the README path a newcomer runs `strongroom encrypt --topic orders` before `orders` exists (the dev
broker does not create topics on first write). Every command that reads topics checks them before it
starts a Spark query: one error line naming the topic and the command that creates it, exit 1, no
traceback, no Spark exception, and no promise to resume from a checkpoint that was never written.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from strongroom.testing.kafka_cluster import KafkaCluster

pytestmark = pytest.mark.integration

#: command name -> its arguments besides --bootstrap-server, for a missing topic and a scratch directory.
COMMANDS: dict[str, Callable[[str, Path], list[str]]] = {
    "encrypt": lambda topic, tmp: ["encrypt", "--local-kms", str(tmp / "ring.json"), "--topic", topic,
                                   "--checkpoint", str(tmp / "chk")],
    "decrypt": lambda topic, tmp: ["decrypt", "--local-kms", str(tmp / "ring.json"), "--topic", topic,
                                   "--checkpoint", str(tmp / "chk")],
    "audit ledger": lambda topic, tmp: ["audit", "ledger", "--topic", topic, "--ledger", str(tmp / "ledger"),
                                        "--once"],
    "recover scan": lambda topic, tmp: ["recover", "scan", "--topic", topic, "--kms", "local",
                                        "--keyring", str(tmp / "ring.json"), "--plan-out", str(tmp / "plan.json")],
    "kek inventory": lambda topic, tmp: ["kek", "inventory", "--topic", topic],
}  # fmt: skip


def strongroom(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "strongroom.cli.main", *args], capture_output=True, text=True, timeout=600, check=False
    )


@pytest.fixture
def keyring_dir(tmp_path: Path) -> Path:
    made = strongroom("kek", "create", "--local-kms", str(tmp_path / "ring.json"))
    assert made.returncode == 0, made.stderr
    return tmp_path


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_missing_input_topic_is_named_with_how_to_create_it(
    command: str, kafka_cluster: KafkaCluster, unique_name: Callable[[str], str], keyring_dir: Path
) -> None:
    topic = unique_name("orders")
    bootstrap = kafka_cluster.bootstrap_servers
    done = strongroom(*COMMANDS[command](topic, keyring_dir), "--bootstrap-server", bootstrap)
    assert done.returncode == 1, done.stderr[-3000:]
    assert done.stderr.startswith(f"error: topic '{topic}' does not exist on Kafka at {bootstrap} ("), done.stderr
    assert f"`strongroom dev create-topic {topic} --bootstrap-server {bootstrap}`" in done.stderr
    assert f"kafka-topics.sh --bootstrap-server {bootstrap} --create --topic {topic} " in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr[-3000:]
    for noise in ("Traceback", "Exception", "checkpoint"):
        assert noise not in done.stderr
    assert done.stdout == ""
    assert not (keyring_dir / "chk").exists()


def test_every_missing_topic_is_named_and_an_existing_one_is_not(
    kafka_cluster: KafkaCluster, unique_name: Callable[[str], str], new_topic: Callable[..., str], keyring_dir: Path
) -> None:
    present = new_topic()
    missing = [unique_name("orders"), unique_name("payments")]
    bootstrap = kafka_cluster.bootstrap_servers
    args: list[Any] = ["kek", "inventory", "--bootstrap-server", bootstrap]
    for topic in (present, *missing):
        args += ["--topic", topic]
    done = strongroom(*args)
    assert done.returncode == 1
    assert done.stderr.startswith(f"error: topics '{missing[0]}', '{missing[1]}' do not exist"), done.stderr
    assert f"'{present}'" not in done.stderr
    assert "create them first" in done.stderr


def test_the_command_the_error_names_creates_the_topics(
    kafka_cluster: KafkaCluster, unique_name: Callable[[str], str]
) -> None:
    from strongroom.kafka.config import ClientConfig
    from strongroom.kafka.topics import require_topics

    missing = [unique_name("orders"), unique_name("payments")]
    bootstrap = kafka_cluster.bootstrap_servers
    failed = strongroom(
        "kek", "inventory", "--bootstrap-server", bootstrap, "--topic", missing[0], "--topic", missing[1]
    )
    assert failed.returncode == 1
    quoted = re.search(r"`(strongroom dev create-topic [^`]+)`", failed.stderr)
    assert quoted, failed.stderr
    created = strongroom("--output", "json", *shlex.split(quoted.group(1))[1:])
    assert created.returncode == 0, created.stderr
    assert '"created"' in created.stdout
    assert require_topics(ClientConfig(bootstrap), missing) == {missing[0]: 3, missing[1]: 3}
    again = strongroom(*shlex.split(quoted.group(1))[1:])
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines() == [f"exists topic '{missing[0]}'", f"exists topic '{missing[1]}'"]
