"""Shared helpers for the audit's integration tests: produce, capture, scrub."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from confluent_kafka import Producer

from strongroom.kafka.config import ClientConfig


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
    producer = Producer(ClientConfig(bootstrap).producer(overrides))
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
