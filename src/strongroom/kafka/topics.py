"""Topics: input topics a command needs must exist; output and dead-letter topics are created and their size
limit known.

The producer checks every encrypted record against the output topic's ``max.message.bytes`` (minus
headroom for the record framing and headers, as the Spark pipelines do) *before* producing, so an
oversized record is rejected with a clear reason instead of failing in librdkafka minutes later.
Missing topics are created like their source topic (partitions, replication), or with the broker's
defaults when the plaintext topic does not exist — a producer may be the only writer of ``orders.enc``.
"""

from __future__ import annotations

import logging
import shlex
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from confluent_kafka import KafkaError as RdKafkaError
from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, OffsetSpec  # type: ignore[attr-defined]

from strongroom.errors import ConfigError, KafkaError
from strongroom.kafka.config import ClientConfig
from strongroom.kafka.transport import error_code, error_text, new_admin

log = logging.getLogger(__name__)

#: Bytes kept free below ``max.message.bytes`` for record framing and headers (same as the pipelines).
RECORD_HEADROOM: Final = 1024
#: librdkafka's own default ``message.max.bytes``.
RDKAFKA_MESSAGE_MAX_BYTES: Final = 1_000_000


class TopicLimits:
    """Creates missing topics (when allowed) and caches each topic's usable value size. Thread-safe."""

    def __init__(self, client: ClientConfig, *, create: bool, producer_max_bytes: int, timeout: float = 30.0) -> None:
        self.admin = new_admin(client)
        self.create = create
        self.producer_max_bytes = producer_max_bytes
        self.timeout = timeout
        self._limits: dict[str, int] = {}
        self._lock = threading.Lock()

    @classmethod
    def for_producer(cls, client: ClientConfig, producer_conf: Mapping[str, Any], *, create: bool) -> TopicLimits:
        """The limits a producer built from ``producer_conf`` meets (its ``message.max.bytes`` caps every topic's)."""
        max_bytes = int(producer_conf.get("message.max.bytes", RDKAFKA_MESSAGE_MAX_BYTES))
        return cls(client, create=create, producer_max_bytes=max_bytes)

    def max_value_bytes(self, topic: str, source: str | None = None) -> int:
        """The largest value that may go to ``topic`` (creating it first, like ``source``, if allowed)."""
        limit = self._limits.get(topic)
        if limit is not None:
            return limit
        with self._lock:
            if topic not in self._limits:
                self._ensure(topic, source)
                topic_max = self._topic_max_message_bytes(topic)
                self._limits[topic] = min(topic_max, self.producer_max_bytes) - RECORD_HEADROOM
            return self._limits[topic]

    def _ensure(self, topic: str, source: str | None) -> None:
        metadata = self._metadata()
        if topic in metadata.topics and metadata.topics[topic].error is None:
            return
        if not self.create:
            raise ConfigError(
                f"topic {topic!r} does not exist",
                hint="create it (same partitions as its source topic), or let the client create it (create_topics)",
            )
        src = metadata.topics.get(source) if source else None
        if src is not None and src.error is None and src.partitions:
            partitions = len(src.partitions)
            replicas = min(len(next(iter(src.partitions.values())).replicas), len(metadata.brokers))
        else:
            partitions, replicas = -1, -1  # the broker's num.partitions / default.replication.factor
        future = self.admin.create_topics(
            [NewTopic(topic, num_partitions=partitions, replication_factor=replicas)], operation_timeout=self.timeout
        )[topic]
        try:
            future.result(self.timeout * 2)
            log.info("created topic %s", topic)
        except Exception as exc:  # noqa: BLE001 - TOPIC_ALREADY_EXISTS from a concurrent creator is fine
            if "TOPIC_ALREADY_EXISTS" not in str(exc):
                raise KafkaError(f"cannot create topic {topic!r}: {exc}", hint="create it by hand") from None
        wait_until_writable(self.admin, topic, timeout=self.timeout)

    def _topic_max_message_bytes(self, topic: str) -> int:
        resource = ConfigResource("topic", topic)
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                configs = self.admin.describe_configs([resource])[resource].result(self.timeout)
                return int(configs["max.message.bytes"].value)
            except Exception as exc:  # noqa: BLE001 - surfaced as one clear error
                # a topic created a moment ago may not have reached every broker's metadata yet
                if "UNKNOWN_TOPIC_OR_PART" in str(exc) and time.monotonic() < deadline:
                    time.sleep(0.2)
                    continue
                raise KafkaError(f"cannot read the configuration of topic {topic!r}: {error_text(exc)}") from None

    def _metadata(self) -> Any:
        try:
            return self.admin.list_topics(timeout=self.timeout)
        except Exception as exc:  # noqa: BLE001
            raise KafkaError(f"cannot read cluster metadata: {error_text(exc)}") from None


class TopicMissing(KafkaError):
    """Topics a command reads do not exist (or this client may not see them)."""

    default_hint = "create the topics first, or check their names with kafka-topics.sh --list"


def _missing_topics_hint(bootstrap: str, missing: list[str]) -> str:
    names = " ".join(shlex.quote(topic) for topic in missing)
    tools = "; ".join(
        f"kafka-topics.sh --bootstrap-server {bootstrap} --create --topic {shlex.quote(topic)} --partitions 3"
        for topic in missing
    )
    return (
        f"create {'it' if len(missing) == 1 else 'them'} first: `strongroom dev create-topic {names} "
        f"--bootstrap-server {bootstrap}` (or {tools}), or check the name with kafka-topics.sh --list; a broker "
        "with auto.create.topics.enable=false, like strongroom's dev stack, does not create a topic when a "
        "producer writes to it"
    )


def require_topics(client: ClientConfig, topics: Iterable[str], *, timeout: float = 30.0) -> dict[str, int]:
    """Each of ``topics`` with its partition count; :class:`TopicMissing` naming every one the cluster lacks
    (or hides from this client), with the command that creates it. Commands call this before they start a
    Spark query, so a missing input topic is one clear error, not a failed query."""
    wanted = list(dict.fromkeys(topics))
    if not wanted:
        return {}
    try:
        metadata = new_admin(client).list_topics(timeout=timeout)
    except Exception as exc:  # noqa: BLE001 - KafkaException or a timeout: one clear error
        raise KafkaError(f"cannot read the topics of Kafka at {client.bootstrap_servers}: {error_text(exc)}") from None
    found = {name: info for name, info in metadata.topics.items() if info.error is None and info.partitions}
    missing = [topic for topic in wanted if topic not in found]
    if missing:
        names = ", ".join(repr(t) for t in missing)
        verb = "does not exist" if len(missing) == 1 else "do not exist"
        raise TopicMissing(
            f"topic{'s' if len(missing) > 1 else ''} {names} {verb} on Kafka at {client.bootstrap_servers}",
            hint=_missing_topics_hint(client.bootstrap_servers, missing),
        )
    return {topic: len(found[topic].partitions) for topic in wanted}


def create_topics(
    client: ClientConfig, topics: Iterable[str], *, partitions: int, replication_factor: int = -1, timeout: float = 30.0
) -> dict[str, str]:
    """Create each topic (``replication_factor`` -1: the broker's default); returns topic -> ``created`` or
    ``exists`` (an existing topic is left as it is). :class:`KafkaError` naming the topic otherwise."""
    wanted = list(dict.fromkeys(topics))
    admin = new_admin(client)  # held until every future is answered: a destroyed client fails them
    futures = admin.create_topics(
        [NewTopic(t, num_partitions=partitions, replication_factor=replication_factor) for t in wanted],
        operation_timeout=timeout,
        request_timeout=timeout,
    )
    outcome: dict[str, str] = {}
    for topic in wanted:
        try:
            futures[topic].result(timeout * 2)
            outcome[topic] = "created"
            wait_until_writable(admin, topic, timeout=timeout)
        except Exception as exc:  # noqa: BLE001 - TOPIC_ALREADY_EXISTS is an answer, the rest one clear error
            if "TOPIC_ALREADY_EXISTS" not in str(exc):
                local = (error_code(exc) or 0) < 0  # librdkafka's own: a timeout, no broker reachable
                raise KafkaError(
                    f"cannot create topic {topic!r} on Kafka at {client.bootstrap_servers}: {error_text(exc)}",
                    hint="check --bootstrap-server and that the brokers are up"
                    if local
                    else "check --partitions/--replication-factor against the cluster and that this client may "
                    "create topics",
                ) from None
            outcome[topic] = "exists"
    return outcome


@dataclass(frozen=True, slots=True)
class EnsuredTopic:
    """What :func:`ensure_topic` found or did."""

    created: bool
    #: The replication factor a created topic got (the one it would have got, for a topic that existed).
    replication_factor: int
    #: Every partition's leader answered (False: writes wait in the producer, as for any unavailable leader).
    writable: bool


def ensure_topic(
    admin: AdminClient,
    topic: str,
    *,
    partitions: int = 1,
    replication_factor: int | None = None,
    config: Mapping[str, str] | None = None,
    timeout: float = 30.0,
) -> EnsuredTopic:
    """Create one of strongroom's own topics (keys, operations log, alerts, pending records) when the cluster
    lacks it, and return once it is writable. An existing topic is left as it is.

    Replication factor ``replication_factor``, or min(3, brokers); ``min.insync.replicas`` one less (at
    least 1) unless ``config`` sets it: the doctor's rule, so one broker down neither stops the writes nor
    leaves an acknowledged write on one broker (3 replicas). A concurrent creator that wins is fine.
    :class:`~strongroom.errors.KafkaError` naming the topic when the cluster cannot be read or refuses it.
    """
    try:
        metadata = admin.list_topics(timeout=timeout)
    except KafkaException as exc:
        raise KafkaError(f"cannot read the topics of the Kafka cluster: {error_text(exc)}") from None
    rf = replication_factor or max(1, min(3, len(metadata.brokers)))
    found = metadata.topics.get(topic)
    if found is not None and found.error is None:
        return EnsuredTopic(created=False, replication_factor=rf, writable=True)
    settings = {"min.insync.replicas": str(max(1, rf - 1)), **(config or {})}
    future = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=rf, config=settings)], operation_timeout=timeout
    )[topic]
    created = True
    try:
        future.result(timeout * 2)
    except Exception as exc:  # noqa: BLE001 - KafkaException or the future's timeout: one clear error
        if error_code(exc) != RdKafkaError.TOPIC_ALREADY_EXISTS:
            raise KafkaError(
                f"cannot create topic {topic!r}: {error_text(exc)}",
                hint="check that this client may create topics, and the replication factor against the brokers",
            ) from None
        created = False  # a concurrent creator was first
    writable = wait_until_writable(admin, topic, timeout=timeout)
    return EnsuredTopic(created=created, replication_factor=rf, writable=writable)


def wait_until_writable(admin: AdminClient, topic: str, *, timeout: float = 30.0) -> bool:
    """Wait until every partition of ``topic`` (just created) answers from its leader; False if some still
    do not after ``timeout`` (logged: writes to them wait in the producer, as for any unavailable leader).

    The metadata names a new partition's leader a moment before that broker hosts it. A write sent in
    between fails with ``NOT_LEADER_OR_FOLLOWER`` and is retried, while a write sent after it may reach the
    broker first and be taken (a broker accepts any sequence number from a producer it has not seen on the
    partition): the first records of a new topic could land out of order. A leader answers ``ListOffsets``
    for a partition only once it hosts it, so that is what this asks, not the metadata.
    """
    deadline = time.monotonic() + timeout
    waiting: list[TopicPartition] = []
    while True:
        if not waiting:  # the partitions, once the metadata has the topic
            found = admin.list_topics(topic, timeout=min(5.0, timeout)).topics.get(topic)
            if found is not None and found.error is None and found.partitions:
                waiting = [TopicPartition(topic, p) for p in sorted(found.partitions)]
        if waiting:
            latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
            futures = admin.list_offsets({tp: latest for tp in waiting}, request_timeout=5)
            unanswered = []
            for tp, future in futures.items():
                try:
                    future.result(10)
                except KafkaException as exc:
                    if error_code(exc) == RdKafkaError.TOPIC_AUTHORIZATION_FAILED:
                        return True  # this principal may write but not ask: its producer retries as usual
                    unanswered.append(tp)
            if not unanswered:
                return True
            waiting = unanswered
        if time.monotonic() >= deadline:
            partitions = ", ".join(str(tp.partition) for tp in waiting) or "all"
            log.warning("topic %s: partitions %s have no leader that answers after %.0fs", topic, partitions, timeout)
            return False
        time.sleep(0.05)
