"""`strongroom dev up|status|down`: a background stack that outlives the command that started it."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request

import pytest

from strongroom.kafka.transport import build_admin, build_producer
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


def exercise_the_stack_from_the_command_line(state: dict[str, object]) -> None:
    """The README's walk-through: encrypt and decrypt a topic with the stack's KMS config files."""
    from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

    bootstrap = str(state["bootstrap_servers"])
    admin = build_admin({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("orders", 1, 1)])["orders"].result(30)
    producer = build_producer({"bootstrap.servers": bootstrap})
    for i in range(20):
        producer.produce(
            "orders", key=f"customer-{i % 4}".encode(), value=json.dumps({"email": f"c{i}@x", "n": i}).encode()
        )
    producer.flush(30)
    kms_configs = state["kms_configs"]
    assert isinstance(kms_configs, dict)
    common = ["--bootstrap-server", bootstrap, "--kms-config", kms_configs["vault"], "--fields", "$.email"]
    enc = strongroom("--output", "json", "encrypt", "--topic", "orders", *common)
    assert enc.returncode == 0, enc.stderr[-2000:]
    assert json.loads(enc.stdout)["records"] == {"ok": 20}
    dec = strongroom("--output", "json", "decrypt", "--topic", "orders.enc", *common)
    assert dec.returncode == 0, dec.stderr[-2000:]
    assert json.loads(dec.stdout)["written"] == 20


def test_dev_up_status_down() -> None:
    up = strongroom("--output", "json", "dev", "up")
    assert up.returncode == 0, up.stderr
    state = json.loads(up.stdout)
    try:
        assert state["bootstrap_servers"].startswith("127.0.0.1:")
        assert state["openbao"]["address"].startswith("http://127.0.0.1:")
        registry_url = state["schema_registry_url"]
        assert registry_url.startswith("http://127.0.0.1:")
        assert registry_url.endswith("/apis/ccompat/v7")
        with urllib.request.urlopen(f"{registry_url}/subjects", timeout=10) as resp:  # noqa: S310 - loopback
            assert resp.status == 200
        # The command has returned; the stack is still serving.
        brokers = build_admin({"bootstrap.servers": state["bootstrap_servers"]}).list_topics(timeout=20).brokers
        assert len(brokers) == 1
        again = json.loads(strongroom("--output", "json", "dev", "up").stdout)
        assert again["bootstrap_servers"] == state["bootstrap_servers"], "a second `up` reuses the running stack"
        status = json.loads(strongroom("--output", "json", "dev", "status").stdout)
        assert status["running"] is True
        assert status["kafka_answers"] is True
        exercise_the_stack_from_the_command_line(state)
    finally:
        down = strongroom("--output", "json", "dev", "down")
    assert down.returncode == 0, down.stderr
    assert not any(pid_alive(pid) for pid in state["pids"])
    assert json.loads(strongroom("--output", "json", "dev", "status").stdout)["running"] is False
