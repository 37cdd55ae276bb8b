"""`strongroom dev create-topic` without a cluster to talk to is a usage error, not a traceback; a cluster that does
not answer is one clear error."""

from __future__ import annotations

import subprocess
import sys

import pytest


def test_without_bootstrap_and_without_a_running_dev_stack_it_asks_for_the_cluster() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "strongroom.cli.main", "dev", "create-topic", "orders"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "--bootstrap-server is required" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_cluster_that_does_not_answer_is_named_with_the_next_step_not_a_repr() -> None:
    from strongroom.errors import KafkaError
    from strongroom.kafka.config import ClientConfig
    from strongroom.kafka.topics import create_topics

    client = ClientConfig("127.0.0.1:1", extra={"log_level": 0})
    with pytest.raises(KafkaError) as raised:
        create_topics(client, ["orders"], partitions=1, timeout=1.0)
    assert raised.value.problem.startswith("cannot create topic 'orders' on Kafka at 127.0.0.1:1: ")
    assert "KafkaError{" not in raised.value.problem
    assert raised.value.hint == "check --bootstrap-server and that the brokers are up"
