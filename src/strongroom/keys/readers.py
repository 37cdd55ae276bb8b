"""The key-readers registry: every running key table says, every few seconds, how far it has read.

Erasure is only verified when every strongroom process that may hold a subject's key has applied the
erasure marker. Each :class:`~strongroom.keys.table.KeyTable` publishes a heartbeat to a small
compacted topic (one record per reader id): which keys partitions it has applied up to which offset,
whether it keeps a persistent store (which then holds wrapped keys on disk while the process is down),
and when it was last seen. A reader that closed cleanly says so; a temporary store is deleted at close.

``strongroom keys readers`` lists the registry; ``--forget ID`` removes a reader that will never come
back (after its persistent store was deleted by hand).
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field
from typing import Any, Final, Literal

from strongroom.errors import KafkaError
from strongroom.kafka.config import ClientConfig
from strongroom.kafka.transport import new_producer
from strongroom.keys.errors import KeysTopicMissing, UnknownReader
from strongroom.keys.topic import KeysTopic
from strongroom.keys.topic_config import READERS_TOPIC_DEFAULT
from strongroom.runtime import now_ms

log = logging.getLogger(__name__)

HEARTBEAT_VERSION: Final = 1
#: A reader not heard from for this many heartbeat intervals (and at least STALE_MIN_MS) is stale.
STALE_INTERVALS: Final = 3
STALE_MIN_MS: Final = 15_000

ReaderState = Literal["live", "stale", "closed"]


@dataclass
class ReaderHeartbeat:
    """One key reader's last word. ``applied[p]`` is the next offset it will apply in keys partition ``p``."""

    reader_id: str
    keys_topic: str
    host: str
    pid: int
    persistent: bool
    store: str
    started_ms: int
    last_seen_ms: int
    interval_ms: int
    applied: dict[int, int] = field(default_factory=dict)
    caught_up: bool = False
    closed: bool = False

    def to_bytes(self) -> bytes:
        document = asdict(self)
        document["applied"] = {str(p): o for p, o in self.applied.items()}
        document["v"] = HEARTBEAT_VERSION
        return json.dumps(document, separators=(",", ":")).encode("utf-8")

    @classmethod
    def from_bytes(cls, raw: bytes) -> ReaderHeartbeat:
        document: dict[str, Any] = json.loads(raw)
        if document.pop("v", None) != HEARTBEAT_VERSION:
            raise ValueError("unknown heartbeat version")
        document["applied"] = {int(p): int(o) for p, o in document.get("applied", {}).items()}
        return cls(**document)

    def state(self, now: int | None = None) -> ReaderState:
        if self.closed:
            return "closed"
        now = now_ms() if now is None else now
        stale_after = max(STALE_INTERVALS * self.interval_ms, STALE_MIN_MS)
        return "stale" if now - self.last_seen_ms > stale_after else "live"

    def holds_keys(self) -> bool:
        """Whether this reader may still hold (wrapped) keys it has not re-checked against markers."""
        return not self.closed or self.persistent

    def applied_past(self, partition: int, offset: int) -> bool:
        return self.applied.get(partition, 0) > offset


def read_registry(
    client: ClientConfig,
    readers_topic: str = READERS_TOPIC_DEFAULT,
    keys_topic: str | None = None,
    timeout: float = 60.0,
) -> dict[str, ReaderHeartbeat]:
    """The latest heartbeat of every registered reader (of ``keys_topic`` when given)."""
    topic = KeysTopic(client, readers_topic)
    registry: dict[str, ReaderHeartbeat] = {}
    try:
        records = list(topic.scan(timeout=timeout))
    except KeysTopicMissing:
        return registry
    for record in records:
        reader_id = (record.key or b"").decode("utf-8", "replace")
        if record.value is None:
            registry.pop(reader_id, None)
            continue
        try:
            heartbeat = ReaderHeartbeat.from_bytes(record.value)
        except (ValueError, TypeError, KeyError):
            log.warning("skipping unreadable heartbeat at %s/%d@%d", readers_topic, record.partition, record.offset)
            continue
        registry[heartbeat.reader_id] = heartbeat
    if keys_topic is not None:
        registry = {rid: hb for rid, hb in registry.items() if hb.keys_topic == keys_topic}
    return registry


def forget_reader(client: ClientConfig, reader_id: str, readers_topic: str = READERS_TOPIC_DEFAULT) -> ReaderHeartbeat:
    """Remove a reader from the registry (a tombstone); returns its last heartbeat."""

    registry = read_registry(client, readers_topic)
    heartbeat = registry.get(reader_id)
    if heartbeat is None:
        raise UnknownReader(f"no reader {reader_id!r} is registered in {readers_topic!r}")
    producer = new_producer(client)
    failures: list[str] = []
    producer.produce(
        readers_topic,
        key=reader_id.encode("utf-8"),
        value=None,
        on_delivery=lambda err, _msg: failures.append(str(err)) if err is not None else None,
    )
    if producer.flush(30) or failures:
        raise KafkaError(f"could not remove reader {reader_id!r}: {failures[0] if failures else 'timed out'}")
    return heartbeat
