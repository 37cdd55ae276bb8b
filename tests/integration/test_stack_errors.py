"""Failure paths of the launchers: a clear message naming cause and fix, and nothing left running."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from strongroom.errors import StackError
from strongroom.testing import kafka_dist
from strongroom.testing.kafka_cluster import KafkaCluster
from strongroom.testing.moto_server import MotoServer
from strongroom.testing.openbao import OpenBaoServer
from strongroom.testing.process import free_port, pid_alive


@pytest.fixture
def occupied_port() -> Iterator[int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


def test_port_in_use_moto(occupied_port: int) -> None:
    with pytest.raises(StackError, match=f"port {occupied_port} on 127.0.0.1 is already in use"):
        MotoServer(port=occupied_port).start()


def test_port_in_use_openbao(occupied_port: int) -> None:
    with pytest.raises(StackError, match="already in use"):
        OpenBaoServer(port=occupied_port).start()


def test_port_in_use_kafka(occupied_port: int, monkeypatch: pytest.MonkeyPatch) -> None:
    ports = iter([occupied_port, free_port()])
    monkeypatch.setattr("strongroom.testing.kafka_cluster.free_port", lambda: next(ports))
    cluster = KafkaCluster(brokers=1)
    with pytest.raises(StackError, match="already in use"):
        cluster.start()
    assert not cluster.base_dir.exists(), "a failed start must clean up its directory"


def test_broker_that_fails_to_start_names_its_log_and_leaves_nothing_running() -> None:
    # Valid enough to format, fatal when the broker instantiates it.
    bad = {"authorizer.class.name": "com.example.NoSuchAuthorizer"}
    cluster = KafkaCluster(brokers=3, broker_config=bad, keep_dirs=True)
    with pytest.raises(StackError) as err:
        cluster.start(timeout=60)
    message = str(err.value)
    assert "failed to start" in message
    assert "NoSuchAuthorizer" in message, "the log excerpt should show the cause"
    assert "server.log" in err.value.hint
    pids = [n.process.pid for n in cluster.nodes.values() if n.process and n.process.pid]
    assert pids, "the nodes were launched"
    assert not any(pid_alive(pid) for pid in pids), "a failed start must stop every node it launched"


def test_missing_java(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(StackError, match="no `java` on PATH") as err:
        kafka_dist.java_executable()
    assert "install a Java 17+" in err.value.hint


def test_maven_unreachable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """An empty local repository and offline Maven stand for an unreachable Maven Central."""
    monkeypatch.setenv("STRONGROOM_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("STRONGROOM_MAVEN_ARGS", f"-o -Dmaven.repo.local={tmp_path / 'empty-m2'}")
    with pytest.raises(StackError, match="Maven could not fetch Apache Kafka") as err:
        kafka_dist.ensure_kafka_libs()
    assert "repo1.maven.org" in err.value.hint
    assert not (tmp_path / "cache" / f"kafka-{kafka_dist.KAFKA_VERSION}" / "libs").exists()
