"""Erasures that are late, as watcher alerts (``strongroom audit watch --check-erasures``).

Every ``interval`` seconds the watcher asks ``erasure status`` (read-only: no nudge record) about every
erased subject of the keys topic; an erasure past the deadline the topic's ``segment.ms`` /
``max.compaction.lag.ms`` promise (:func:`strongroom.keys.topic_config.erasure_deadline_ms`) is raised
once per erasure request as an ``erasure-overdue`` warning on every sink, the same verdict
``strongroom erasure status --all --fail-on overdue`` exits 4 on.

An alert names the subject only by its fingerprint (alerts leave the process: Kafka topics, webhooks),
with the erasure request id and the keys partition an operator looks up with ``erasure status``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Final

from strongroom.audit.alerts import WARNING, Alert
from strongroom.envelope.errors import subject_fingerprint
from strongroom.kafka.config import ClientConfig
from strongroom.keys.verification import ErasureStatus, erasure_status

ERASURE_OVERDUE: Final = "erasure-overdue"


def overdue_alerts(statuses: Sequence[ErasureStatus], keys_topic: str) -> list[Alert]:
    """One alert per overdue erasure (pure)."""
    alerts: list[Alert] = []
    for status in statuses:
        if not status.overdue:
            continue
        request = status.request or {}
        fingerprint = subject_fingerprint(status.subject.encode())
        alerts.append(
            Alert(
                kind=ERASURE_OVERDUE,
                severity=WARNING,
                message=(
                    f"the erasure of subject {fingerprint} (request {request.get('request_id')}) is past its "
                    f"compaction deadline {status.compaction_deadline}: erased key records are still in "
                    f"{keys_topic}[{status.partition}]; run `strongroom erasure status --all` for the reasons"
                ),
                topic=keys_topic,
                partition=status.partition,
                evidence={
                    "subject_fingerprint": fingerprint,
                    "request_id": request.get("request_id"),
                    "marker_offset": request.get("marker_offset"),
                    "compaction_deadline": status.compaction_deadline,
                    "reasons": list(status.reasons),
                },
            )
        )
    return alerts


class OverdueErasures:
    """Checks the keys topic every ``interval`` seconds and raises each overdue erasure once."""

    def __init__(
        self,
        client: ClientConfig,
        *,
        keys_topic: str,
        readers_topic: str,
        interval: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.keys_topic = keys_topic
        self.readers_topic = readers_topic
        self.interval = interval
        self._clock = clock
        self._next_check = 0.0
        self._raised: set[tuple[str, str | None]] = set()

    def check(self) -> list[Alert]:
        """New overdue-erasure alerts, when a check is due (else none)."""
        now = self._clock()
        if now < self._next_check:
            return []
        self._next_check = now + self.interval
        statuses = erasure_status(
            self.client, None, topic=self.keys_topic, readers_topic=self.readers_topic, nudge=False
        )
        fresh: list[Alert] = []
        for alert in overdue_alerts(statuses, self.keys_topic):
            key = (str(alert.evidence["subject_fingerprint"]), alert.evidence["request_id"])
            if key not in self._raised:
                self._raised.add(key)
                fresh.append(alert)
        return fresh
