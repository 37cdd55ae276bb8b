"""The one place strongroom builds confluent-kafka clients, and asks them the usual questions.

Every producer, consumer and admin client starts from :class:`~strongroom.kafka.config.ClientConfig`
(resilient defaults, the user's ``--command-config``) and logs through Python logging
(:data:`LIBRDKAFKA_LOGGER`), never as raw ``%3|…`` lines on a terminal. The questions several areas
ask — where a partition's log starts and ends, what a group committed, a topic's configuration, offsets
by spec — are answered here once, with timeouts and strongroom errors: a fix to how strongroom talks
to Kafka is made in one place.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from strongroom.errors import KafkaError
from strongroom.kafka.config import ClientConfig
from strongroom.runtime import collector_paused

#: Where librdkafka's own log lines go (connection refused while a broker restarts, and the like).
LIBRDKAFKA_LOGGER = "strongroom.librdkafka"

Partition = tuple[str, int]


def client_logger() -> logging.Logger:
    """librdkafka's log lines, in Python logging: shown with ``--verbose``; otherwise only errors of the
    clients reach the operator through the errors strongroom raises, not as reconnect chatter."""
    logger = logging.getLogger(LIBRDKAFKA_LOGGER)
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.INFO if logging.getLogger().level <= logging.INFO else logging.CRITICAL)
    return logger


def _logged(conf: Mapping[str, Any]) -> dict[str, Any]:
    return {"logger": client_logger(), **conf}


def new_producer(client: ClientConfig, overrides: Mapping[str, Any] | None = None) -> Producer:
    """An idempotent ``acks=all`` producer (transactional with ``transactional.id`` in ``overrides``)."""
    return build_producer(client.producer(overrides))


def new_consumer(
    client: ClientConfig, group_id: str | None = None, overrides: Mapping[str, Any] | None = None
) -> Consumer:
    """A ``read_committed`` consumer (``assign()``-only ones need no ``group_id``)."""
    return build_consumer(client.consumer(group_id, overrides))


def new_admin(client: ClientConfig, overrides: Mapping[str, Any] | None = None) -> AdminClient:
    return build_admin(client.admin(overrides))


def build_producer(conf: Mapping[str, Any]) -> Producer:
    """A producer from a complete configuration (one built from a :class:`ClientConfig`, or a user's own
    properties being checked by ``strongroom doctor client``)."""
    return Producer(_logged(conf))


def build_consumer(conf: Mapping[str, Any]) -> Consumer:
    return Consumer(_logged(conf))


def build_admin(conf: Mapping[str, Any]) -> AdminClient:
    return AdminClient(_logged(conf))


def rdkafka_error(exc: BaseException) -> Any:
    """What a confluent-kafka exception carries: its librdkafka ``KafkaError`` (the first argument), else
    the exception itself (both have a text; only the former has ``code()`` and ``str()``)."""
    return exc.args[0] if exc.args else exc


def error_text(exc: BaseException) -> str:
    """The text of what a confluent-kafka exception carries (``Failed to get metadata: Local: Broker transport
    failure``), without the ``KafkaError{code=...}`` wrapper."""
    text = getattr(rdkafka_error(exc), "str", None)
    return str(text()) if callable(text) else str(exc)


def error_code(exc: BaseException) -> int | None:
    """The librdkafka error code a confluent-kafka exception carries; None when it carries none."""
    code = getattr(rdkafka_error(exc), "code", None)
    return int(code()) if callable(code) else None


# ------------------------------------------------------------------------------------- reading
def consume_ready(consumer: Consumer, limit: int, wait: float) -> list[Any]:
    """Up to ``limit`` messages without waiting for ``limit``: the first within ``wait``, then whatever
    else librdkafka has already fetched.

    ``consumer.consume(limit, wait)`` returns early only once it holds ``limit`` messages, so a reader
    whose fetch queue is bounded below ``limit`` (or that is simply keeping up) waits the whole ``wait``
    on every call: a catching-up key table spent 60 % of its time there.

    The second call takes what is already fetched without waiting, thousands of messages at once that all
    live until the caller is done with them: the garbage collector is paused meanwhile
    (:class:`~strongroom.runtime.CollectorPause`), instead of walking them every 700 new ones.
    """
    first: list[Any] = consumer.consume(1, wait)
    if not first or limit <= 1:
        return first
    with collector_paused:
        return first + consumer.consume(limit - 1, 0)


# ------------------------------------------------------------------------------------- the questions
def watermarks(consumer: Consumer, topic: str, partition: int, *, timeout: float = 15.0) -> tuple[int, int]:
    """``(log start, high watermark)`` from the partition's leader; :class:`KafkaError` naming the
    partition when the leader does not answer in time (confluent-kafka returns None then)."""
    problem = f"no answer in {timeout:.0f}s"
    try:
        found = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout)
    except KafkaException as exc:
        found, problem = None, str(exc)
    if found is None:
        raise KafkaError(
            f"the leader of {topic}[{partition}] cannot be asked where its log starts and ends: {problem}",
            hint="check that the partition has a leader (kafka-topics --describe) and the brokers are reachable",
        )
    return int(found[0]), int(found[1])


def log_starts(client: ClientConfig, partitions: Iterable[Partition], *, timeout: float = 15.0) -> dict[Partition, int]:
    """Each partition's log start offset; partitions whose leader does not answer are left out."""
    consumer = new_consumer(client)
    try:
        out: dict[Partition, int] = {}
        for topic, partition in partitions:
            try:
                out[(topic, partition)] = watermarks(consumer, topic, partition, timeout=timeout)[0]
            except KafkaError:
                continue
        return out
    finally:
        consumer.close()


def committed(
    client: ClientConfig, group_id: str, partitions: Iterable[Partition], *, timeout: float = 60.0
) -> dict[Partition, int]:
    """The group's committed offset per partition (-1 where it has none)."""
    wanted = [TopicPartition(t, p) for t, p in partitions]
    if not wanted:
        return {}
    consumer = new_consumer(client, group_id, {"enable.auto.commit": False})
    try:
        found = consumer.committed(wanted, timeout=timeout)
    except KafkaException as exc:
        raise KafkaError(
            f"cannot read the committed offsets of consumer group {group_id}: {error_text(exc)}",
            hint="check that the brokers are reachable and this client may Describe the group",
        ) from None
    finally:
        consumer.close()
    return {(tp.topic, tp.partition): int(tp.offset) for tp in found}


def commit(client: ClientConfig, group_id: str, offsets: Mapping[Partition, int], *, timeout: float = 60.0) -> None:
    """Commit ``offsets`` for a group that has no members (a pipeline's, restoring its progress)."""
    if not offsets:
        return
    consumer = new_consumer(client, group_id, {"enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())], asynchronous=False)
    except KafkaException as exc:
        raise KafkaError(
            f"cannot commit offsets for consumer group {group_id}: {error_text(exc)}",
            hint="stop every member of the group first (kafka-consumer-groups --describe shows them)",
        ) from None
    finally:
        consumer.close()


def describe_configs(admin: AdminClient, topics: Sequence[str], *, timeout: float = 30.0) -> dict[str, dict[str, str]]:
    """Effective configuration (non-null values) of each topic."""
    from confluent_kafka.admin._config import ConfigResource

    if not topics:
        return {}
    resources = [ConfigResource(ConfigResource.Type.TOPIC, t) for t in topics]
    try:
        futures = admin.describe_configs(resources, request_timeout=timeout)
        out: dict[str, dict[str, str]] = {}
        for res, fut in futures.items():
            entries = fut.result(timeout=timeout)
            out[res.name] = {k: str(v.value) for k, v in entries.items() if v.value is not None}
        return out
    except Exception as exc:  # noqa: BLE001 - KafkaException, a timeout, a missing topic: one clear error
        raise KafkaError(
            f"cannot read the configuration of topics {list(topics)}: {exc}",
            hint="check that the topics exist and this client may DescribeConfigs",
        ) from None


def topic_partitions(admin: AdminClient, *, timeout: float = 30.0) -> dict[str, int]:
    """Every topic the cluster has (internal ones included) and its partition count."""
    metadata = admin.list_topics(timeout=timeout)
    return {name: len(topic.partitions) for name, topic in metadata.topics.items()}
