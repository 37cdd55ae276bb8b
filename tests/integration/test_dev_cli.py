"""`strongroom dev up|status|down`: a background stack that outlives the command that started it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from confluent_kafka.admin import AdminClient

from strongroom.testing.process import pid_alive

pytestmark = pytest.mark.integration


def strongroom(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "strongroom.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_dev_up_status_down() -> None:
    up = strongroom("--output", "json", "dev", "up")
    assert up.returncode == 0, up.stderr
    state = json.loads(up.stdout)
    try:
        assert state["bootstrap_servers"].startswith("127.0.0.1:")
        assert state["openbao"]["address"].startswith("http://127.0.0.1:")
        # The command has returned; the stack is still serving.
        brokers = AdminClient({"bootstrap.servers": state["bootstrap_servers"]}).list_topics(timeout=20).brokers
        assert len(brokers) == 1
        again = json.loads(strongroom("--output", "json", "dev", "up").stdout)
        assert again["bootstrap_servers"] == state["bootstrap_servers"], "a second `up` reuses the running stack"
        status = json.loads(strongroom("--output", "json", "dev", "status").stdout)
        assert status["running"] is True
        assert status["kafka_answers"] is True
    finally:
        down = strongroom("--output", "json", "dev", "down")
    assert down.returncode == 0, down.stderr
    assert not any(pid_alive(pid) for pid in state["pids"])
    assert json.loads(strongroom("--output", "json", "dev", "status").stdout)["running"] is False
