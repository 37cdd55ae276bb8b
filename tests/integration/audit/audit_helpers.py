"""Shared helpers for the audit's integration tests: produce, capture, scrub."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from strongroom.kafka.config import ClientConfig
from strongroom.kafka.transport import build_producer


def produce(
    bootstrap: str,
    topic: str,
    values: Iterable[bytes],
    *,
    partition: int | None = None,
    key: Callable[[int], bytes | None] | None = None,
    acks: str = "all",
    timestamp: int | None = None,
) -> list[tuple[int, int]]:
    """Produce and wait; returns (partition, offset) of every acknowledged record."""
    overrides: dict[str, Any] = {"linger.ms": 5, "acks": acks}
    if acks != "all":
        overrides["enable.idempotence"] = False
    producer = build_producer(ClientConfig(bootstrap).producer(overrides))
    acked: list[tuple[int, int]] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is None:
            acked.append((msg.partition(), msg.offset()))

    for i, value in enumerate(values):
        kwargs: dict[str, Any] = {"value": value, "on_delivery": on_delivery, "headers": [("i", str(i).encode())]}
        if key is not None:
            kwargs["key"] = key(i)
        if partition is not None:
            kwargs["partition"] = partition
        if timestamp is not None:
            kwargs["timestamp"] = timestamp
        producer.produce(topic, **kwargs)
        producer.poll(0)
    assert producer.flush(60) == 0
    return acked


def wait_until(predicate: Callable[[], bool], timeout: float = 60.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what}")


class CollectingSink:
    """An alert sink that keeps what it gets (the watcher's real sinks are tested elsewhere)."""

    name = "collect"

    def __init__(self) -> None:
        self.alerts: list[Any] = []

    def emit(self, alerts: Any) -> None:
        self.alerts.extend(alerts)

    def close(self) -> None:
        pass

    def kinds(self, severity: str | None = None) -> set[tuple[str, str | None]]:
        return {(a.kind, a.topic) for a in self.alerts if severity is None or a.severity == severity}


def create_topic_on(cluster: Any, name: str, replicas: list[int], config: dict[str, str]) -> str:
    """A one-partition topic on exactly these replicas (the first is the preferred leader)."""
    from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

    new = NewTopic(name, num_partitions=1, replication_factor=-1, replica_assignment=[replicas], config=config)
    futures = cluster.admin().create_topics([new])
    futures[name].result(30)
    cluster.wait_for_leaders(name, 1)
    return name


def wait_for(cluster: Any, what: str, predicate: Callable[[], bool], timeout: float = 60.0) -> None:
    def safe() -> bool:
        try:
            return predicate()
        except Exception:  # noqa: BLE001 - metadata may be briefly unavailable while brokers change
            return False

    wait_until(safe, timeout, what)
