"""Collect a :class:`ClusterSnapshot` through the admin API: a handful of requests, whatever the rule count.

One ``DescribeCluster`` (brokers, controller - and the connectivity and authentication check), one
``Metadata`` (every topic's partitions, leaders, replicas, ISR), one ``DescribeConfigs`` for the checked
topics and one per broker. A failure to connect is turned into one clear error - unreachable,
authentication failed, TLS failed, not authorised - from the errors librdkafka reported on the way.
"""

from __future__ import annotations

import fnmatch
import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from strongroom.doctor.errors import (
    ClusterAccessDenied,
    ClusterAuthenticationFailed,
    ClusterUnreachable,
    CommandConfigError,
)
from strongroom.doctor.snapshot import (
    INTERNAL_TOPICS,
    Broker,
    ClusterSnapshot,
    ConfigValue,
    Partition,
    Topic,
    source_name,
)
from strongroom.kafka.config import ClientConfig
from strongroom.kafka.transport import build_admin, rdkafka_error

Progress = Callable[[str], None]

# librdkafka error codes (rd_kafka_resp_err_t) doctor tells apart.
_ERR_AUTHENTICATION = -169
_ERR_SSL = -181
_ERR_RESOLVE = -193
_ERR_TRANSPORT = -195
_ERR_ALL_BROKERS_DOWN = -187
_ERR_SASL_AUTHENTICATION_FAILED = 58
_AUTHORIZATION_CODES = {29, 30, 31}  # TOPIC_, GROUP_, CLUSTER_AUTHORIZATION_FAILED

_AFTER = re.compile(r"\s*\(after \d+ms in state [A-Z_]+\)\s*$")


def _clean(message: str) -> str:
    return _AFTER.sub("", message).strip()


def _code(error: Any) -> int | None:
    try:
        return int(error.code())
    except (AttributeError, TypeError, ValueError):
        return None


def _message(error: Any) -> str:
    try:
        return _clean(str(error.str()))
    except AttributeError:
        return _clean(str(error))


def connection_error(
    bootstrap: str, timeout: float, failure: Any, reported: Sequence[Any], command_config: str | None
) -> Exception:
    """The one error that explains why the first request failed, from librdkafka's reported errors."""
    errors = [failure, *reported]
    config_hint = f" in {command_config}" if command_config else " (pass --command-config with sasl.* settings)"
    for error in errors:
        if _code(error) in (_ERR_AUTHENTICATION, _ERR_SASL_AUTHENTICATION_FAILED):
            return ClusterAuthenticationFailed(
                f"authentication failed at Kafka {bootstrap}: {_message(error)}",
                hint=f"check sasl.mechanism, sasl.username and sasl.password{config_hint}",
            )
    for error in errors:
        if _code(error) in _AUTHORIZATION_CODES:
            return ClusterAccessDenied(f"not authorised at Kafka {bootstrap}: {_message(error)}")
    for error in errors:
        if _code(error) == _ERR_SSL:
            return ClusterUnreachable(
                f"TLS handshake with Kafka at {bootstrap} failed: {_message(error)}",
                hint=f"check security.protocol and ssl.ca.location{config_hint}",
            )
    for error in errors:
        if _code(error) == _ERR_RESOLVE:
            return ClusterUnreachable(
                f"cannot resolve Kafka at {bootstrap}: {_message(error)}", hint="check --bootstrap-server"
            )
    detail = next(
        (_message(e) for e in errors if _code(e) in (_ERR_TRANSPORT, _ERR_ALL_BROKERS_DOWN)),
        _message(failure),
    )
    return ClusterUnreachable(
        f"cannot reach Kafka at {bootstrap} within {timeout:g}s ({detail})",
        hint="check --bootstrap-server and network",
    )


def _failure(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "timed out"
    return _message(rdkafka_error(exc))


def select_topics(names: Sequence[str], patterns: Sequence[str]) -> frozenset[str]:
    """Topics matching any shell-style pattern (all when none given), plus Kafka's internal topics."""
    chosen = {n for n in names if not patterns or any(fnmatch.fnmatchcase(n, p) for p in patterns)}
    chosen |= {n for n in names if n in INTERNAL_TOPICS}
    return frozenset(chosen)


def _config_values(entries: Mapping[str, Any]) -> dict[str, ConfigValue]:
    values: dict[str, ConfigValue] = {}
    for name, entry in entries.items():
        if getattr(entry, "is_sensitive", False):
            values[name] = ConfigValue(None, source_name(entry.source))
        else:
            values[name] = ConfigValue(entry.value, source_name(entry.source))
    return values


class _Collector:
    def __init__(
        self,
        bootstrap: str,
        properties: Mapping[str, str] | None,
        command_config: str | None,
        timeout: float,
        progress: Progress,
    ) -> None:
        from confluent_kafka import KafkaException

        self.bootstrap = bootstrap
        self.command_config = command_config
        self.timeout = timeout
        self.progress = progress
        self.reported: list[Any] = []
        conf = ClientConfig(bootstrap, extra=properties).admin(
            {
                "error_cb": self.reported.append,
                "log_level": 0,
                "socket.connection.setup.timeout.ms": int(timeout * 1000),
            }
        )
        try:
            self.admin = build_admin(conf)
        except (KafkaException, ValueError, TypeError) as exc:
            raise CommandConfigError(
                f"librdkafka refused the admin client configuration: {_message(rdkafka_error(exc))}",
                hint=f"fix {command_config}" if command_config else "check the client properties",
            ) from None

    def _wait(self, future: Any) -> Any:
        from confluent_kafka import KafkaException

        try:
            return future.result(timeout=self.timeout + 5)
        except KafkaException as exc:
            raise self._unreachable(rdkafka_error(exc)) from None
        except TimeoutError:
            raise self._unreachable("request timed out") from None

    def _unreachable(self, failure: Any) -> Exception:
        """The one error that explains a failed request (after serving ``error_cb``, whose reported
        errors say why)."""
        self.admin.poll(0)
        return connection_error(self.bootstrap, self.timeout, failure, self.reported, self.command_config)

    def collect(self, topic_patterns: Sequence[str]) -> ClusterSnapshot:
        """Brokers, topic metadata, then the configs of the checked topics and of every broker."""
        self.progress(f"connecting to {self.bootstrap}")
        cluster = self._wait(self.admin.describe_cluster(request_timeout=self.timeout))
        brokers = tuple(sorted((Broker(n.id, n.host, n.port, n.rack) for n in cluster.nodes), key=lambda b: b.id))
        self.progress(f"cluster {cluster.cluster_id}: {len(brokers)} brokers; reading topic metadata")
        partitions = self._partitions()
        checked = select_topics(sorted(partitions), topic_patterns)
        notes: list[str] = []
        if topic_patterns and not any(n not in INTERNAL_TOPICS for n in checked):
            notes.append(f"no topic matches --topic {' '.join(topic_patterns)} (only Kafka's internal topics checked)")
        self.progress(f"describing configs of {len(checked)} topics and {len(brokers)} brokers")
        topic_configs = self._topic_configs(checked, notes)
        broker_configs = self._broker_configs(brokers, notes)
        topics = {
            name: Topic(name, parts, topic_configs.get(name, {}))
            for name, parts in sorted(partitions.items())
        }  # fmt: skip
        checked_described = frozenset(n for n in checked if n in topic_configs)
        return ClusterSnapshot(
            bootstrap_servers=self.bootstrap,
            cluster_id=cluster.cluster_id,
            controller_id=cluster.controller.id if cluster.controller is not None else None,
            brokers=brokers,
            topics=topics,
            checked=checked_described,
            broker_configs=broker_configs,
            notes=tuple(notes),
        )

    def _partitions(self) -> dict[str, tuple[Partition, ...]]:
        """Every readable topic's partitions (leader, replicas, ISR), from one metadata request."""
        from confluent_kafka import KafkaException

        try:
            metadata = self.admin.list_topics(timeout=self.timeout)
        except KafkaException as exc:
            raise self._unreachable(rdkafka_error(exc)) from None
        return {
            name: tuple(
                Partition(p.id, p.leader, tuple(p.replicas), tuple(p.isrs))
                for p in sorted(meta.partitions.values(), key=lambda p: p.id)
            )
            for name, meta in metadata.topics.items()
            if meta.error is None
        }

    def _topic_configs(self, checked: frozenset[str], notes: list[str]) -> dict[str, dict[str, ConfigValue]]:
        """The configs of the checked topics (one request); a topic whose configs cannot be read is noted."""
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import ConfigResource, ResourceType  # type: ignore[attr-defined]

        configs: dict[str, dict[str, ConfigValue]] = {}
        if not checked:
            return configs
        resources = [ConfigResource(ResourceType.TOPIC, name) for name in sorted(checked)]
        futures = self.admin.describe_configs(resources, request_timeout=self.timeout)
        for resource, future in futures.items():
            try:
                configs[resource.name] = _config_values(self._wait_resource(future))
            except (KafkaException, TimeoutError) as exc:
                notes.append(f"topic {resource.name}: configs not readable ({_failure(exc)}); not checked")
        return configs

    def _broker_configs(self, brokers: Sequence[Broker], notes: list[str]) -> dict[int, dict[str, ConfigValue]]:
        """Each broker's configs (one request per broker, all in flight at once)."""
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import ConfigResource, ResourceType  # type: ignore[attr-defined]

        configs: dict[int, dict[str, ConfigValue]] = {}
        futures = {
            b.id: self.admin.describe_configs(
                [ConfigResource(ResourceType.BROKER, str(b.id))], request_timeout=self.timeout
            )
            for b in brokers
        }
        for broker_id, per_resource in futures.items():
            for future in per_resource.values():
                try:
                    configs[broker_id] = _config_values(self._wait_resource(future))
                except (KafkaException, TimeoutError) as exc:
                    notes.append(f"broker {broker_id}: configs not readable ({_failure(exc)})")
        return configs

    def _wait_resource(self, future: Any) -> Any:
        return future.result(timeout=self.timeout + 5)


def collect_snapshot(
    bootstrap: str,
    *,
    properties: Mapping[str, str] | None = None,
    command_config: str | None = None,
    topic_patterns: Sequence[str] = (),
    timeout: float = 15.0,
    progress: Progress | None = None,
) -> ClusterSnapshot:
    """Read brokers, topics, partitions and configs once; raise a clear error if the cluster cannot be read."""
    started = time.monotonic()
    collector = _Collector(bootstrap, properties, command_config, timeout, progress or (lambda _m: None))
    snapshot = collector.collect(topic_patterns)
    (progress or (lambda _m: None))(f"snapshot collected in {time.monotonic() - started:.1f}s")
    return snapshot
