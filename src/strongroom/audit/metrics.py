"""Prometheus metrics of the watcher (``prometheus-client``, a private registry, one HTTP endpoint)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

from strongroom.audit.alerts import Alert
from strongroom.audit.kafka_state import PartitionState


class WatchMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        labels = ["topic", "partition"]
        r = self.registry
        self.log_start = Gauge("strongroom_audit_log_start_offset", "Log start offset", labels, registry=r)
        self.log_end = Gauge("strongroom_audit_high_watermark", "High watermark (log end offset)", labels, registry=r)
        self.epoch = Gauge("strongroom_audit_leader_epoch", "Current leader epoch", labels, registry=r)
        self.leader = Gauge("strongroom_audit_leader", "Current leader broker id (-1 = none)", labels, registry=r)
        self.isr = Gauge("strongroom_audit_isr_size", "In-sync replicas", labels, registry=r)
        self.alerts = Counter("strongroom_audit_alerts", "Alerts and events raised", ["kind", "severity"], registry=r)
        self.polls = Counter("strongroom_audit_polls", "Watcher polls", registry=r)
        self.poll_errors = Counter("strongroom_audit_poll_errors", "Watcher polls that failed", registry=r)
        self.last_poll = Gauge(
            "strongroom_audit_last_poll_timestamp_seconds", "Unix time of the last successful poll", registry=r
        )
        self.poll_seconds = Gauge("strongroom_audit_poll_duration_seconds", "Duration of the last poll", registry=r)
        self._server: Any = None

    def serve(self, port: int, host: str = "127.0.0.1") -> int:
        """Start the ``/metrics`` endpoint; returns the bound port (``port=0`` picks a free one)."""
        result = start_http_server(port, addr=host, registry=self.registry)
        self._server = result[0] if isinstance(result, tuple) else None
        if self._server is not None:
            return int(self._server.server_address[1])
        return port

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def observe(self, partitions: Iterable[PartitionState], alerts: Sequence[Alert], seconds: float, at: float) -> None:
        for p in partitions:
            labels = (p.topic, str(p.partition))
            if p.log_start >= 0:
                self.log_start.labels(*labels).set(p.log_start)
            if p.high_watermark >= 0:
                self.log_end.labels(*labels).set(p.high_watermark)
            if p.leader_epoch is not None:
                self.epoch.labels(*labels).set(p.leader_epoch)
            self.leader.labels(*labels).set(p.leader)
            self.isr.labels(*labels).set(len(p.isr))
        for alert in alerts:
            self.alerts.labels(alert.kind, alert.severity).inc()
        self.polls.inc()
        self.last_poll.set(at)
        self.poll_seconds.set(seconds)
