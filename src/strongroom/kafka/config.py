"""Resilient librdkafka defaults for every Kafka client strongroom creates, and how to merge user config.

Managed Kafka restarts brokers one at a time during maintenance, sometimes loses two at once, and
cross-AZ links add latency; librdkafka's defaults give up too early there. These values follow the
operational guidance collected from production MSK incidents (see docs/kafka-clients.md): re-bootstrap
when metadata is lost, longer socket and connection-setup timeouts, short capped retry and reconnect
backoff, and idempotent ``acks=all`` producers that wait out a rolling restart instead of failing.

The same table drives ``strongroom doctor client``, so the defaults we use and the advice we give
cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from strongroom.errors import ConfigError
from strongroom.text import is_utf8_text

#: For every client (producer, consumer, admin).
COMMON_DEFAULTS: dict[str, Any] = {
    "metadata.recovery.strategy": "rebootstrap",
    "metadata.recovery.rebootstrap.trigger.ms": 60_000,
    "topic.metadata.refresh.interval.ms": 30_000,
    "metadata.max.age.ms": 90_000,
    "topic.metadata.propagation.max.ms": 120_000,
    "socket.connection.setup.timeout.ms": 45_000,
    "socket.timeout.ms": 90_000,
    "socket.nagle.disable": True,
    "retry.backoff.ms": 250,
    "retry.backoff.max.ms": 1_000,
    "reconnect.backoff.ms": 250,
    "reconnect.backoff.max.ms": 10_000,
}

PRODUCER_DEFAULTS: dict[str, Any] = {
    **COMMON_DEFAULTS,
    "acks": "all",
    "enable.idempotence": True,
    "request.timeout.ms": 60_000,
    # Must exceed socket.timeout.ms and cover a broker restart plus leader election; a rolling
    # restart or two brokers down briefly must delay delivery, not fail it.
    "message.timeout.ms": 300_000,
    "linger.ms": 5,
    "compression.type": "lz4",
}

#: After a fetch found the local pre-fetch queue full (``queued.min.messages`` or
#: ``queued.max.messages.kbytes``) librdkafka waits ``fetch.queue.backoff.ms`` before fetching that partition
#: again: 1 s by default, however fast the application empties the queue. Any consumer slower than the network
#: fills it, so it stalls for up to a second each time: a key table's catch-up was held to 25k records/s (a bare
#: read of the same topic: 320k/s with 10 ms), the audit reader of a 1 KB topic to less than half its rate, and a
#: ``DecryptingConsumer`` reading 100,000 records of 1 KB to 78-81k records/s against 132-174k with 10 ms
#: (docs/benchmarks.md, "Client library"). Every consumer strongroom builds refetches soon.
REFETCH_SOON: dict[str, Any] = {"fetch.queue.backoff.ms": 10}

CONSUMER_DEFAULTS: dict[str, Any] = {
    **COMMON_DEFAULTS,
    "session.timeout.ms": 45_000,
    "heartbeat.interval.ms": 3_000,
    "max.poll.interval.ms": 300_000,
    "enable.auto.commit": False,
    "auto.offset.reset": "earliest",
    "isolation.level": "read_committed",
    **REFETCH_SOON,
}

ADMIN_DEFAULTS: dict[str, Any] = dict(COMMON_DEFAULTS)


@dataclass(frozen=True)
class ClientConfig:
    """Where to connect and how to authenticate, shared by every client a command creates.

    ``extra`` holds librdkafka properties from ``--command-config`` (security.protocol, sasl.*, ssl.*).
    """

    bootstrap_servers: str
    extra: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        # librdkafka takes UTF-8 text; a lone surrogate (bytes that were not UTF-8, from an environment variable)
        # failed inside confluent-kafka's constructor as a SystemError
        for name, value in (("bootstrap.servers", self.bootstrap_servers), *(self.extra or {}).items()):
            if isinstance(value, str) and not is_utf8_text(value):
                raise ConfigError(f"the Kafka client setting {name!r} is not valid UTF-8 text", hint="fix its value")

    def _merge(self, defaults: Mapping[str, Any], overrides: Mapping[str, Any] | None) -> dict[str, Any]:
        merged = dict(defaults)
        merged["bootstrap.servers"] = self.bootstrap_servers
        merged.update(self.extra or {})
        merged.update(overrides or {})
        return merged

    def producer(self, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return self._merge(PRODUCER_DEFAULTS, overrides)

    def consumer(self, group_id: str | None = None, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
        conf = self._merge(CONSUMER_DEFAULTS, overrides)
        if group_id is not None:
            conf["group.id"] = group_id
        elif "group.id" not in conf:
            # librdkafka requires a group id even for assign()-only consumers; they never commit.
            conf["group.id"] = "strongroom-reader"
        return conf

    def admin(self, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return self._merge(ADMIN_DEFAULTS, overrides)

    def java_client(self) -> dict[str, str]:
        """The same connection as Java client properties (for JVM readers: Spark's Kafka source, the audit's
        JVM reader). Translated: bootstrap servers, ``security.protocol``, SASL PLAIN/SCRAM user and password,
        and a PEM CA file. Anything else in ``extra`` applies to the librdkafka clients only."""
        extra = dict(self.extra or {})
        props = {"bootstrap.servers": self.bootstrap_servers}
        if "security.protocol" in extra:
            props["security.protocol"] = str(extra["security.protocol"]).upper()
        mechanism = str(extra.get("sasl.mechanism") or extra.get("sasl.mechanisms") or "")
        if mechanism:
            props["sasl.mechanism"] = mechanism.upper()
            user, password = extra.get("sasl.username"), extra.get("sasl.password")
            if user is not None and password is not None:
                module = (
                    "org.apache.kafka.common.security.scram.ScramLoginModule"
                    if mechanism.upper().startswith("SCRAM")
                    else "org.apache.kafka.common.security.plain.PlainLoginModule"
                )
                props["sasl.jaas.config"] = f'{module} required username="{user}" password="{password}";'
        if "ssl.ca.location" in extra:
            props["ssl.truststore.type"] = "PEM"
            props["ssl.truststore.location"] = str(extra["ssl.ca.location"])
        return props


def produce_when_room(producer: Any, topic: str, **kwargs: Any) -> None:
    """``producer.produce(topic, **kwargs)``; while librdkafka's local queue is full, serve delivery
    reports and retry (the queue drains as the brokers acknowledge)."""
    while True:
        try:
            producer.produce(topic, **kwargs)
            return
        except BufferError:
            producer.poll(0.05)
