"""Records whose key has not arrived yet: buffered in subject order, released when it arrives.

Readers can see data before its key (replication lag, mirroring, a keys topic restored later). The
decrypt pipeline must neither fail on such records nor skip them, and must keep each subject's
records in order. So:

* A batch row whose key is unknown (or whose subject already has held records) is written to the
  pending topic ``strongroom-<app>-pending`` **in the same transaction** as the batch's output and
  source offsets: the buffer is exactly as durable as the output.
* The driver mirrors the pending topic in memory (bounded by ``max_records``) as per-subject queues.
* At the start of every batch, subjects whose keys are now known (or erased, or whose KEK is lost)
  are released: their records are decrypted on the driver in buffer order and written, together with
  a *release marker* listing the buffer offsets released, in one transaction of the driver's own
  transactional id; the consumer-group offset of the pending topic moves to the oldest record still
  held. After a crash the marker says what was released, so nothing is written twice.
* A record held longer than ``timeout_s`` goes to the dead-letter topic (or stops the pipeline when
  there is none), in the same kind of transaction.

The decrypt query also subscribes to the key readers' heartbeat topic, which every key table writes
every few seconds, so batches (and therefore releases and timeouts) keep happening when no data arrives.
"""

from __future__ import annotations

import json
import logging
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from strongroom.errors import KafkaError, PipelineError
from strongroom.kafka.config import ClientConfig
from strongroom.kafka.topics import ensure_topic
from strongroom.kafka.transport import new_admin, new_consumer, new_producer, watermarks
from strongroom.spark.jobs.results import PendingStats

log = logging.getLogger(__name__)

H_SUBJECT = "strongroom.pending.subject"
H_SOURCE = "strongroom.pending.source"
H_SINCE = "strongroom.pending.since"
H_TIMESTAMP = "strongroom.pending.timestamp"
H_RULE = "strongroom.pending.rule"
MARKER_KEY = b"\x00strongroom.release"
PENDING_TOPIC_CONFIG = {"cleanup.policy": "delete", "retention.ms": str(14 * 24 * 3600 * 1000)}


@dataclass
class HeldRecord:
    """A buffered record: where it came from and its ciphertext, as it was."""

    buffer_offset: int
    subject: str
    src_topic: str
    src_partition: int
    src_offset: int
    rule: int
    since_ms: int
    timestamp_ms: int | None
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]]


@dataclass(frozen=True)
class Released:
    """What one release wrote: records released (decrypted, erased or failed) and records timed out."""

    released: int
    timed_out: int


def pending_topic_for(app_id: str) -> str:
    return f"strongroom-{app_id}-pending"


class PendingBuffer:
    """The driver's view of the pending topic, and the release transaction."""

    def __init__(
        self,
        client: ClientConfig,
        app_id: str,
        *,
        max_records: int = 100_000,
        timeout_s: float = 600.0,
    ) -> None:
        self.client = client
        self.app_id = app_id
        self.topic = pending_topic_for(app_id)
        self.group = f"strongroom-{app_id}-release"
        self.max_records = max_records
        self.timeout_s = timeout_s
        self.held: OrderedDict[str, deque[HeldRecord]] = OrderedDict()
        self.count = 0
        self._released: set[int] = set()
        self._position = 0
        self._producer: Any = None
        self._buffered = 0
        self._released_total = 0
        self._timed_out_total = 0
        self._ensure_topic()
        self._load()

    # ------------------------------------------------------------------ reading the buffer
    def _ensure_topic(self) -> None:
        try:
            ensure_topic(new_admin(self.client), self.topic, config=PENDING_TOPIC_CONFIG)
        except KafkaError as exc:
            raise PipelineError(f"cannot create the pending topic {self.topic!r}: {exc.problem}") from None

    def _consumer(self) -> Any:

        return new_consumer(self.client, self.group, {"enable.partition.eof": True})

    def _load(self) -> None:
        """Rebuild the held records from the release group's offset to the end (after a restart)."""
        from confluent_kafka import TopicPartition

        consumer = self._consumer()
        try:
            committed = consumer.committed([TopicPartition(self.topic, 0)], timeout=30)[0].offset
            self._position = max(committed, 0)
        finally:
            consumer.close()
        self.refresh()

    def refresh(self) -> None:
        """Read what the batch transactions appended to the pending topic since the last call."""
        from confluent_kafka import KafkaError, TopicPartition

        consumer = self._consumer()
        try:
            _, high = watermarks(consumer, self.topic, 0, timeout=30)
            if self._position >= high:
                return
            consumer.assign([TopicPartition(self.topic, 0, self._position)])
            deadline = time.monotonic() + 60
            while self._position < high and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is None:
                    continue
                if msg.error() is not None:
                    if msg.error().code() == KafkaError._PARTITION_EOF:
                        break  # transaction markers leave the position short of the high watermark
                    raise PipelineError(f"reading the pending topic {self.topic!r} failed: {msg.error()}")
                self._position = msg.offset() + 1
                self._apply(msg)
        finally:
            consumer.close()
        if self.count > self.max_records:
            raise PipelineError(
                f"{self.count} records are waiting for their keys, above the limit of {self.max_records}",
                hint="check that the keys topic is replicated/mirrored to this cluster and readable; "
                "raise --max-pending only if keys are known to lag this much",
            )

    def _apply(self, msg: Any) -> None:
        if msg.key() == MARKER_KEY:
            for offset in json.loads(msg.value())["released"]:
                self._released.add(int(offset))
                self._drop(int(offset))
            return
        if msg.offset() in self._released:
            return
        headers = list(msg.headers() or [])
        meta = {k: v for k, v in headers if k.startswith("strongroom.pending.")}
        topic, partition, offset = meta[H_SOURCE].decode().rsplit("/", 2)
        original = [(k, v) for k, v in headers if not k.startswith("strongroom.pending.")]
        ts = meta.get(H_TIMESTAMP)
        record = HeldRecord(
            buffer_offset=msg.offset(),
            subject=meta[H_SUBJECT].decode(),
            src_topic=topic,
            src_partition=int(partition),
            src_offset=int(offset),
            rule=int(meta[H_RULE]),
            since_ms=int(meta[H_SINCE]),
            timestamp_ms=int(ts) if ts else None,
            key=msg.key(),
            value=msg.value(),
            headers=original,
        )
        self.held.setdefault(record.subject, deque()).append(record)
        self.count += 1
        self._buffered += 1

    def _drop(self, buffer_offset: int) -> None:
        for subject, queue in list(self.held.items()):
            for record in list(queue):
                if record.buffer_offset == buffer_offset:
                    queue.remove(record)
                    self.count -= 1
            if not queue:
                del self.held[subject]

    def held_subjects(self) -> set[str]:
        return set(self.held)

    def snapshot(self) -> PendingStats:
        """Records buffered, released and timed out since the driver started, and held now."""
        return PendingStats(self._buffered, self._released_total, self._timed_out_total, self.count)

    # ------------------------------------------------------------------ releasing
    def release(
        self,
        resolve: Callable[[HeldRecord], tuple[str, Any] | None],
        emit: Callable[[Any, Iterable[tuple[HeldRecord, str, Any]]], None],
        dead_letter_topic: str | None,
    ) -> Released:
        """Release every subject whose first held record now resolves, and time out old records.

        ``resolve(record)`` returns None while the key is still unknown, else ``(status, payload)``
        (``ok``/``erased``/``failed`` with the decrypted value or a reason). ``emit(producer, items)``
        produces the released items into the open transaction.
        """
        now = int(time.time() * 1000)
        ready: list[tuple[HeldRecord, str, Any]] = []
        for subject in list(self.held):
            queue = self.held[subject]
            first = queue[0]
            outcome = resolve(first)
            if outcome is None:
                if now - first.since_ms > self.timeout_s * 1000:
                    if dead_letter_topic is None:
                        raise PipelineError(
                            f"record {first.src_topic}[{first.src_partition}]@{first.src_offset} has waited "
                            f"{(now - first.since_ms) / 1000:.0f}s for its key (subject key not in the keys topic)",
                            hint="check the keys topic replication, or run with a dead-letter topic",
                        )
                    ready.extend((r, "timed-out", "no key arrived within the pending timeout") for r in queue)
                continue
            for record in queue:
                status, payload = resolve(record) or ("timed-out", "key vanished during release")
                ready.append((record, status, payload))
        if not ready:
            return Released(0, 0)
        released = [r.buffer_offset for r, _, _ in ready]
        producer = self._transactional_producer()
        producer.begin_transaction()
        try:
            emit(producer, ready)
            producer.produce(self.topic, key=MARKER_KEY, value=json.dumps({"released": released}).encode())
            producer.flush(120)
            remaining = [r.buffer_offset for q in self.held.values() for r in q if r.buffer_offset not in set(released)]
            next_offset = min(remaining) if remaining else self._position
            self._commit_group(producer, next_offset)
            producer.commit_transaction(120)
        except Exception:
            producer.abort_transaction(60)
            raise
        timed_out = sum(1 for _, s, _ in ready if s == "timed-out")
        for offset in released:
            self._released.add(offset)
            self._drop(offset)
        self._released_total += len(ready) - timed_out
        self._timed_out_total += timed_out
        return Released(len(ready) - timed_out, timed_out)

    def _commit_group(self, producer: Any, next_offset: int) -> None:
        from confluent_kafka import TopicPartition

        consumer = self._consumer()
        try:
            producer.send_offsets_to_transaction(
                [TopicPartition(self.topic, 0, next_offset)], consumer.consumer_group_metadata(), 60
            )
        finally:
            consumer.close()

    def _transactional_producer(self) -> Any:
        if self._producer is None:
            self._producer = new_producer(
                self.client,
                {"transactional.id": f"strongroom-{self.app_id}-release", "transaction.timeout.ms": 600_000},
            )
            self._producer.init_transactions(120)
        return self._producer

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(30)
            self._producer = None
