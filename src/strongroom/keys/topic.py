"""Kafka I/O of the keys area: creating the keys and readers topics, writing records durably, scanning.

Every client starts from :class:`strongroom.kafka.config.ClientConfig` (idempotent ``acks=all``
producers, resilient timeouts). A write is only reported done when every record's delivery report
came back without error: callers use the offsets from those reports (partition order is what makes
key creation race-free and erasure final).
"""

from __future__ import annotations

import logging
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Final, NamedTuple

from confluent_kafka import OFFSET_BEGINNING, KafkaException, TopicPartition
from confluent_kafka import KafkaError as RdKafkaError
from confluent_kafka.admin import AdminClient, ConfigResource  # type: ignore[attr-defined]

from strongroom.errors import KafkaError, StrongroomError
from strongroom.kafka.config import ClientConfig
from strongroom.kafka.topics import ensure_topic
from strongroom.kafka.transport import consume_ready, error_text, new_admin, new_consumer, new_producer, watermarks
from strongroom.keys import records
from strongroom.keys.errors import KeysTopicMissing, KeysTopicResized
from strongroom.keys.murmur2 import partition_for, subject_partition
from strongroom.keys.records import KeysRecord, LayoutRecord
from strongroom.keys.topic_config import KEYS_TOPIC_CONFIG, KEYS_TOPIC_DEFAULT, READERS_TOPIC_CONFIG
from strongroom.runtime import now_ms

log = logging.getLogger(__name__)

DEFAULT_PARTITIONS: Final = 12


class RawRecord(NamedTuple):
    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None


def admin_client(client: ClientConfig) -> AdminClient:
    return new_admin(client, {"log_level": 0})


def topic_partitions(admin: AdminClient, topic: str, timeout: float = 15.0) -> int:
    """Partition count of ``topic``; :class:`KeysTopicMissing` if it does not exist."""
    try:
        metadata = admin.list_topics(topic, timeout=timeout)
    except KafkaException as exc:
        raise KafkaError(f"cannot read metadata of topic {topic!r}: {error_text(exc)}") from None
    md = metadata.topics.get(topic)
    if md is None or md.error is not None or not md.partitions:
        raise KeysTopicMissing(f"topic {topic!r} does not exist")
    return len(md.partitions)


def effective_topic_config(admin: AdminClient, topic: str, timeout: float = 15.0) -> dict[str, str]:
    """The topic's effective configuration (topic overrides merged over broker defaults)."""
    resource = ConfigResource("topic", topic)
    try:
        entries = admin.describe_configs([resource])[resource].result(timeout)
    except KafkaException as exc:
        raise KafkaError(f"cannot describe the configuration of topic {topic!r}: {error_text(exc)}") from None
    return {name: entry.value for name, entry in entries.items() if entry.value is not None}


def create_keys_topic(
    client: ClientConfig,
    topic: str = KEYS_TOPIC_DEFAULT,
    *,
    partitions: int = DEFAULT_PARTITIONS,
    replication_factor: int | None = None,
    config_overrides: Mapping[str, str | int] | None = None,
    timeout: float = 30.0,
) -> dict[str, Any]:
    """Create the keys topic (compacted, bounded compaction) and write its layout record.

    Replication factor ``min(3, brokers)`` and ``min.insync.replicas`` one less (at least 1) unless
    given. An existing topic is left as it is and reported (``created: false``).
    """
    admin = admin_client(client)
    config = {**KEYS_TOPIC_CONFIG, **{k: str(v) for k, v in (config_overrides or {}).items()}}
    ensured = ensure_topic(
        admin, topic, partitions=partitions, replication_factor=replication_factor, config=config, timeout=timeout
    )
    actual = topic_partitions(admin, topic)
    if ensured.created:
        with KeysWriter(client, topic) as writer:
            writer.write([(0, LayoutRecord(actual, now_ms()))], error=KafkaError, timeout=timeout)
    return {
        "topic": topic,
        "created": ensured.created,
        "partitions": actual,
        "replication_factor": ensured.replication_factor,
        "config": config,
    }


def create_readers_topic(client: ClientConfig, topic: str, timeout: float = 30.0) -> bool:
    """Create the (compacted, one-partition) key-readers registry topic if it does not exist."""
    return ensure_topic(admin_client(client), topic, config=READERS_TOPIC_CONFIG, timeout=timeout).created


class KeysWriter:
    """An idempotent ``acks=all`` producer for keys-topic records with explicit partitions."""

    def __init__(self, client: ClientConfig, topic: str, overrides: Mapping[str, Any] | None = None) -> None:
        self.topic = topic
        self._producer = new_producer(client, {"linger.ms": 2, **(overrides or {})})
        #: Records acknowledged so far, per partition (key creation tells its own records from others' by it).
        self.acknowledged: Counter[int] = Counter()

    def write(
        self,
        batch: Sequence[tuple[int, KeysRecord]],
        *,
        error: type[StrongroomError],
        timeout: float = 60.0,
    ) -> list[int]:
        """Write ``(partition, record)`` pairs, flush, and return their offsets in the same order.

        Raises ``error`` (naming how many records failed and why) unless every record was acknowledged
        by all in-sync replicas.
        """
        return self.write_messages(
            [(partition, *records.encode(record)) for partition, record in batch], error=error, timeout=timeout
        )

    def write_messages(
        self,
        messages: Sequence[tuple[int, bytes, bytes | None]],
        *,
        error: type[StrongroomError],
        timeout: float = 60.0,
    ) -> list[int]:
        """:meth:`write` for records already encoded as ``(partition, message key, value)``."""
        offsets: list[int | None] = [None] * len(messages)
        failures: list[str] = []
        acknowledged = self.acknowledged
        # One delivery report for the whole batch (a closure per record, and produce's keyword arguments,
        # cost more than producing it). It finds a record's place by its partition and message key; a
        # (partition, key) written twice in one batch is matched in produce order.
        first: dict[tuple[int, bytes], int] = {}
        later: dict[tuple[int, bytes], deque[int]] = {}

        def on_delivery(err: Any, msg: Any) -> None:
            place = (msg.partition(), msg.key())
            index = first.pop(place, None)
            if index is None:
                queue = later.get(place)
                if not queue:
                    failures.append(f"a delivery report for a record this batch did not write ({place[0]})")
                    return
                index = queue.popleft()
            if err is not None:
                failures.append(str(err))
            else:
                offsets[index] = msg.offset()
                acknowledged[place[0]] += 1

        topic, produce = self.topic, self._producer.produce
        try:
            for index, (partition, key, value) in enumerate(messages):
                place = (partition, key)
                if place in first or place in later:
                    later.setdefault(place, deque()).append(index)
                else:
                    first[place] = index
                try:
                    produce(topic, value, key, partition, on_delivery)  # positional: keywords cost 1-2 µs
                except BufferError:
                    self._produce(key, value, partition, on_delivery)  # waits for room
        except BufferError:
            self._producer.flush(timeout)
            raise error(f"the producer queue is full after {len(messages)} records to {self.topic!r}") from None
        remaining = self._producer.flush(timeout)
        missing = sum(1 for offset in offsets if offset is None)
        if remaining or failures or missing:
            why = failures[0] if failures else f"no acknowledgement within {timeout:.0f}s"
            raise error(
                f"{missing} of {len(messages)} records to keys topic {self.topic!r} were not acknowledged: {why}"
            )
        return [offset for offset in offsets if offset is not None]

    def _produce(self, key: bytes, value: bytes | None, partition: int, callback: Callable[[Any, Any], None]) -> None:
        while True:
            try:
                self._producer.produce(self.topic, value, key, partition, callback)
                return
            except BufferError:
                if self._producer.poll(1.0) == 0 and len(self._producer) == 0:
                    raise

    def close(self) -> None:
        self._producer.flush(5)

    def __enter__(self) -> KeysWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class KeysTopic:
    """The keys topic as seen by one client: name, partition count, layout check, watermarks, scans."""

    def __init__(self, client: ClientConfig, name: str = KEYS_TOPIC_DEFAULT) -> None:
        self.client = client
        self.name = name
        self._admin: AdminClient | None = None
        self._partitions: int | None = None

    @property
    def admin(self) -> AdminClient:
        if self._admin is None:
            self._admin = admin_client(self.client)
        return self._admin

    @property
    def partitions(self) -> int:
        if self._partitions is None:
            self._partitions = topic_partitions(self.admin, self.name)
        return self._partitions

    def partition_of(self, subject: str) -> int:
        return subject_partition(subject, self.partitions)

    def partition_of_wrapping_key(self, wk_id: bytes) -> int:
        return partition_for(wk_id, self.partitions)

    def check_layout(self, layout_partitions: int | None) -> None:
        """Refuse to write when the topic no longer has the partition count it was created with."""
        current = topic_partitions(self.admin, self.name)
        if layout_partitions is not None and current != layout_partitions:
            raise KeysTopicResized(
                f"keys topic {self.name!r} has {current} partitions but was created with {layout_partitions}"
            )
        self._partitions = current

    def read_layout(self, look_at: int = 100) -> int | None:
        """The partition count of the layout record (written first into partition 0), if there is one."""
        _ = self.partitions  # KeysTopicMissing before anything else
        low, high = self.watermarks([0])[0]
        for record in self.scan([0], end_offsets={0: min(high, low + look_at)}, timeout=30):
            if record.key == records.LAYOUT_KEY and record.value is not None:
                try:
                    layout = records.decode(record.key, record.value)
                except StrongroomError:
                    return None
                return layout.partitions if isinstance(layout, LayoutRecord) else None
        return None

    def check_written_layout(self) -> None:
        """:meth:`check_layout` against the layout record in the topic (for tools without a key table)."""
        self.check_layout(self.read_layout())

    def config(self) -> dict[str, str]:
        return effective_topic_config(self.admin, self.name)

    def watermarks(self, partitions: Iterable[int] | None = None, timeout: float = 15.0) -> dict[int, tuple[int, int]]:
        """``{partition: (log start offset, log end offset)}``."""
        wanted = list(range(self.partitions)) if partitions is None else list(partitions)
        consumer = new_consumer(self.client, "strongroom-keys-probe", {"log_level": 0})
        try:
            return {p: watermarks(consumer, self.name, p, timeout=timeout) for p in wanted}
        finally:
            consumer.close()

    def scan(
        self,
        partitions: Iterable[int] | None = None,
        *,
        end_offsets: Mapping[int, int] | None = None,
        timeout: float = 300.0,
        progress: Callable[[int, int], None] | None = None,
    ) -> Iterator[RawRecord]:
        """Every record of ``partitions`` from the log start up to ``end_offsets`` (default: the current end).

        Records come in offset order per partition (partitions interleave). Raises
        :class:`~strongroom.errors.KafkaError` if the end is not reached within ``timeout``.
        """
        wanted = sorted(set(range(self.partitions) if partitions is None else partitions))
        consumer = new_consumer(
            self.client,
            "strongroom-keys-scan",
            {"enable.partition.eof": True, "log_level": 0, "fetch.wait.max.ms": 100},
        )
        try:
            ends, total = self._scan_ends(consumer, wanted, end_offsets)
            if not ends:
                return
            consumer.assign([TopicPartition(self.name, p, OFFSET_BEGINNING) for p in ends])
            done = 0
            deadline = time.monotonic() + timeout
            while ends:
                if time.monotonic() > deadline:
                    raise KafkaError(
                        f"scanning keys topic {self.name!r} did not reach the end of partitions "
                        f"{sorted(ends)} within {timeout:.0f}s"
                    )
                for record in self._scan_fetch(consumer, ends):
                    done += 1
                    yield record
                if progress is not None:
                    progress(done, total)
        finally:
            consumer.close()

    def _scan_ends(
        self, consumer: Any, wanted: list[int], end_offsets: Mapping[int, int] | None
    ) -> tuple[dict[int, int], int]:
        """Where the scan of each non-empty partition ends (``end_offsets`` capped at the high watermark),
        and how many offsets it covers in all."""
        ends: dict[int, int] = {}
        total = 0
        for p in wanted:
            low, high = watermarks(consumer, self.name, p, timeout=15.0)
            end = high if end_offsets is None or p not in end_offsets else min(end_offsets[p], high)
            if end > low:
                ends[p] = end
                total += end - low
        return ends, total

    def _scan_fetch(self, consumer: Any, ends: dict[int, int]) -> Iterator[RawRecord]:
        """The records of one fetch below their partition's end; a partition whose end is reached (or
        compacted past) leaves ``ends``."""
        for msg in consume_ready(consumer, 1000, 0.5):
            err = msg.error()
            if err is not None and err.code() != RdKafkaError._PARTITION_EOF:
                if err.fatal():
                    raise KafkaError(f"reading keys topic {self.name!r} failed: {err}")
                log.warning("reading keys topic %s: %s (retrying)", self.name, err)
                continue
            partition, offset = msg.partition(), msg.offset()
            if partition is None or offset is None or partition not in ends:
                continue
            end = ends[partition]
            if err is not None or offset >= end:  # end of partition, or the records below it compacted away
                if offset >= end:
                    del ends[partition]
                continue
            _, timestamp = msg.timestamp()
            yield RawRecord(partition, offset, timestamp, msg.key(), msg.value())
            if offset >= end - 1:
                del ends[partition]

    def close(self) -> None:
        self._admin = None
