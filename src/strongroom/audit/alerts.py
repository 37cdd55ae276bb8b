"""Alerts and events of the sensitive-operation watcher, and where they go.

An :class:`Alert` is one JSON object. ``severity`` is ``critical`` (data was or may be lost:
unjustified log-start advance, unclean election, truncation, topic deleted), ``warning`` (durability
weakened or unverifiable: config lowered, offline partition, an advance the ledger cannot check) or
``info`` (a validated sensitive operation: justified deletion, clean leader change). Warnings and
criticals are *alerts*; infos are *events*.

Sinks: JSON lines on stdout, JSON lines appended to a file, a Kafka topic (key = topic), an HTTP
webhook (one POST of the JSON per alert). A failing sink never stops the watcher: the failure is
logged and counted, and the other sinks still get the alert.
"""

from __future__ import annotations

import json
import logging
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from strongroom.kafka.config import ClientConfig
from strongroom.kafka.topics import ensure_topic
from strongroom.kafka.transport import new_admin, new_producer
from strongroom.runtime import iso_utc, now_ms

CRITICAL = "critical"
WARNING = "warning"
INFO = "info"
SEVERITIES = (INFO, WARNING, CRITICAL)

# Alert kinds
LSO_ADVANCE_UNJUSTIFIED = "lso-advance-unjustified"
LSO_ADVANCE_UNVERIFIED = "lso-advance-unverified"
LSO_ADVANCE_JUSTIFIED = "lso-advance-justified"
UNCLEAN_ELECTION = "unclean-election"
TRUNCATION = "truncation"
LEADER_CHANGE = "leader-change"
PARTITION_OFFLINE = "partition-offline"
UNDER_MIN_ISR = "under-min-isr"
CONFIG_WEAKENED = "config-weakened"
REPLICATION_LOWERED = "replication-lowered"
TOPIC_DELETED = "topic-deleted"

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Alert:
    kind: str
    severity: str
    message: str
    topic: str | None = None
    partition: int | None = None
    evidence: Mapping[str, Any] = field(default_factory=dict)
    at_ms: int = field(default_factory=now_ms)
    id: str = field(default_factory=lambda: uuid.uuid4().hex)

    @property
    def is_alert(self) -> bool:
        return self.severity in (WARNING, CRITICAL)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "at": iso_utc(self.at_ms, timespec="milliseconds"),
            "at_ms": self.at_ms,
            "kind": self.kind,
            "severity": self.severity,
            "topic": self.topic,
            "partition": self.partition,
            "message": self.message,
            "evidence": dict(self.evidence),
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Alert:
        return cls(
            kind=d["kind"],
            severity=d["severity"],
            message=d["message"],
            topic=d.get("topic"),
            partition=d.get("partition"),
            evidence=dict(d.get("evidence") or {}),
            at_ms=int(d["at_ms"]),
            id=d["id"],
        )


class AlertSink(Protocol):
    name: str

    def emit(self, alerts: Sequence[Alert]) -> None: ...

    def close(self) -> None: ...


class StdoutSink:
    name = "stdout"

    def emit(self, alerts: Sequence[Alert]) -> None:
        for alert in alerts:
            sys.stdout.write(json.dumps(alert.to_json(), sort_keys=True) + "\n")
        sys.stdout.flush()

    def close(self) -> None:
        pass


class FileSink:
    """JSON lines appended to ``path`` (the report reads ``<ledger>/alerts/alerts.jsonl``)."""

    name = "file"

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)

    def emit(self, alerts: Sequence[Alert]) -> None:
        if not alerts:
            return
        with self.path.open("a", encoding="utf-8") as fh:
            for alert in alerts:
                fh.write(json.dumps(alert.to_json(), sort_keys=True) + "\n")

    def close(self) -> None:
        pass


class KafkaSink:
    """Alerts to a Kafka topic (created when missing: RF min(3, brokers)); key = audited topic."""

    name = "kafka"

    def __init__(self, client: ClientConfig, topic: str) -> None:

        self.topic = topic
        self.client = client
        ensure_topic(new_admin(client), topic)
        self.producer = new_producer(client, {"linger.ms": 0})

    def emit(self, alerts: Sequence[Alert]) -> None:
        for alert in alerts:
            self.producer.produce(
                self.topic, key=(alert.topic or "").encode(), value=json.dumps(alert.to_json()).encode()
            )
        if alerts and self.producer.flush(30) > 0:
            log.warning("%d alerts not yet acknowledged by the alerts topic %s", len(self.producer), self.topic)

    def close(self) -> None:
        self.producer.flush(10)


class WebhookSink:
    """HTTP POST of each alert's JSON (``Content-Type: application/json``), retried 3 times."""

    name = "webhook"

    def __init__(self, url: str, *, timeout: float = 5.0, attempts: int = 3) -> None:
        from strongroom.errors import ConfigError

        if not url.startswith(("http://", "https://")):
            raise ConfigError(f"webhook URL {url!r} is not http(s)", hint="pass --webhook https://host/path")
        self.url = url
        self.timeout = timeout
        self.attempts = attempts
        self.failures = 0

    def emit(self, alerts: Sequence[Alert]) -> None:
        for alert in alerts:
            body = json.dumps(alert.to_json()).encode()
            for attempt in range(self.attempts):
                request = urllib.request.Request(  # noqa: S310 - the operator chose the URL; scheme checked
                    self.url, data=body, headers={"Content-Type": "application/json"}, method="POST"
                )
                try:
                    with urllib.request.urlopen(request, timeout=self.timeout) as resp:  # noqa: S310
                        if 200 <= resp.status < 300:
                            break
                except (urllib.error.URLError, OSError) as exc:
                    if attempt == self.attempts - 1:
                        self.failures += 1
                        log.warning("webhook %s refused alert %s: %s", self.url, alert.id, exc)
                    else:
                        time.sleep(0.2 * (attempt + 1))

    def close(self) -> None:
        pass


class Fanout:
    """Every alert to every sink; a failing sink is logged, never fatal."""

    def __init__(self, sinks: Sequence[AlertSink], *, min_severity: str = INFO) -> None:
        self.sinks = list(sinks)
        self.min_rank = SEVERITIES.index(min_severity)
        self.errors = 0

    def emit(self, alerts: Sequence[Alert]) -> None:
        wanted = [a for a in alerts if SEVERITIES.index(a.severity) >= self.min_rank]
        if not wanted:
            return
        for sink in self.sinks:
            try:
                sink.emit(wanted)
            except Exception as exc:  # noqa: BLE001 - one broken sink must not silence the others
                self.errors += 1
                log.warning("alert sink %s failed: %s", sink.name, exc)

    def close(self) -> None:
        for sink in self.sinks:
            try:
                sink.close()
            except Exception as exc:  # noqa: BLE001
                log.warning("closing alert sink %s failed: %s", sink.name, exc)


def read_alerts(path: Path) -> list[Alert]:
    """Alerts from a JSON-lines file; unreadable lines are skipped with a warning."""
    out: list[Alert] = []
    if not path.exists():
        return out
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            out.append(Alert.from_json(json.loads(line)))
        except Exception as exc:  # noqa: BLE001 - a damaged line must not hide the others
            log.warning("skipping line %d of %s: %s", number, path, exc)
    return out
