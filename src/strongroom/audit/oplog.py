"""The operations log: an append-only record of intentional sensitive operations.

Deleting records, resetting offsets, changing topic configs, deleting KEKs: each is legitimate when
intended and indistinguishable from an accident or an attack when not. The audit (scrub and
watcher) treats a log-start-offset advance as justified only by retention, compaction, or an entry
here; ``strongroom recover apply`` and ``strongroom audit justify`` write entries.

Storage is a Kafka topic (``strongroom-operations``) so every machine sees the same history: one
partition (a total order), replication factor min(3, brokers), ``min.insync.replicas`` one less (at least 1),
infinite retention (``retention.ms=-1``, ``retention.bytes=-1``), ``cleanup.policy=delete`` (never
compacted: history is not overwritten). Records: key = affected topic (UTF-8, empty for
cluster-wide operations), value = JSON of :class:`Operation` (schema in docs/audit.md), written by an
idempotent ``acks=all`` producer and confirmed before ``record`` returns.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from strongroom.audit.errors import OperationsLogError
from strongroom.errors import KafkaError
from strongroom.kafka.config import ClientConfig
from strongroom.kafka.topics import ensure_topic
from strongroom.kafka.transport import error_text, new_admin, new_consumer, new_producer, watermarks
from strongroom.runtime import iso_utc, now_ms, operator_name

OPERATIONS_TOPIC = "strongroom-operations"
#: Kept for ever: the log is the evidence that a log-start move or an offset reset was deliberate.
OPERATIONS_TOPIC_CONFIG = {"retention.ms": "-1", "retention.bytes": "-1", "cleanup.policy": "delete"}
SCHEMA_VERSION = 1

# Known operation kinds. Other kebab-case kinds are accepted (and shown) but justify nothing.
DELETE_RECORDS = "delete-records"
OFFSET_RESET = "offset-reset"
TOPIC_CONFIG_CHANGE = "topic-config-change"
TOPIC_DELETION = "topic-deletion"
KEK_DELETION = "kek-deletion"
KEK_DISABLE = "kek-disable"
KNOWN_KINDS = (DELETE_RECORDS, OFFSET_RESET, TOPIC_CONFIG_CHANGE, TOPIC_DELETION, KEK_DELETION, KEK_DISABLE)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PartitionChange:
    """What an operation did to one partition: e.g. delete-records moved the log start offset from
    ``before_offset`` to ``after_offset`` (records below ``after_offset`` were deleted on purpose)."""

    partition: int
    before_offset: int | None = None
    after_offset: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"partition": self.partition, "before_offset": self.before_offset, "after_offset": self.after_offset}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> PartitionChange:
        return cls(
            int(d["partition"]),
            None if d.get("before_offset") is None else int(d["before_offset"]),
            None if d.get("after_offset") is None else int(d["after_offset"]),
        )


@dataclass(frozen=True)
class Operation:
    """One intentional sensitive operation: who did what, when, why, under which plan."""

    kind: str
    reason: str
    topic: str | None = None
    partitions: tuple[PartitionChange, ...] = ()
    who: str = field(default_factory=operator_name)
    when_ms: int = field(default_factory=now_ms)
    plan_id: str | None = None
    details: Mapping[str, Any] = field(default_factory=dict)
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    #: Where the entry sits in the operations topic (set when read or recorded).
    log_offset: int | None = None

    def __post_init__(self) -> None:
        if not self.kind or not all(c.isalnum() or c == "-" for c in self.kind):
            raise OperationsLogError(
                f"operation kind {self.kind!r} is not kebab-case", hint=f"use one of {', '.join(KNOWN_KINDS)}"
            )
        if not self.reason.strip():
            raise OperationsLogError("an operation needs a reason", hint="say why the operation is intended")

    @property
    def when(self) -> str:
        return iso_utc(self.when_ms, timespec="milliseconds")

    def to_json(self) -> dict[str, Any]:
        return {
            "version": SCHEMA_VERSION,
            "id": self.id,
            "kind": self.kind,
            "topic": self.topic,
            "partitions": [p.to_json() for p in self.partitions],
            "who": self.who,
            "when": self.when,
            "when_ms": self.when_ms,
            "reason": self.reason,
            "plan_id": self.plan_id,
            "details": dict(self.details),
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any], *, log_offset: int | None = None) -> Operation:
        version = int(d.get("version", 1))
        if version > SCHEMA_VERSION:
            raise OperationsLogError(
                f"operation {d.get('id')!r} uses schema version {version}, "
                f"newer than this strongroom's ({SCHEMA_VERSION})",
                hint="upgrade strongroom",
            )
        return cls(
            kind=str(d["kind"]),
            reason=str(d["reason"]),
            topic=d.get("topic"),
            partitions=tuple(PartitionChange.from_json(p) for p in d.get("partitions", ())),
            who=str(d.get("who", "unknown")),
            when_ms=int(d["when_ms"]),
            plan_id=d.get("plan_id"),
            details=dict(d.get("details") or {}),
            id=str(d["id"]),
            log_offset=log_offset,
        )


def deletion_bounds(operations: Iterable[Operation]) -> dict[tuple[str, int], tuple[int, str]]:
    """(topic, partition) -> (highest recorded ``after_offset`` of a delete-records, its operation id).

    Delete-records only ever deletes a prefix, so the highest bound justifies every offset below it.
    """
    out: dict[tuple[str, int], tuple[int, str]] = {}
    for op in operations:
        if op.kind != DELETE_RECORDS or op.topic is None:
            continue
        for change in op.partitions:
            if change.after_offset is None:
                continue
            key = (op.topic, change.partition)
            if key not in out or change.after_offset > out[key][0]:
                out[key] = (change.after_offset, op.id)
    return out


class OperationsLog:
    """Append and read the shared operations log topic.

    >>> oplog = OperationsLog(ClientConfig("kafka:9092"))  # doctest: +SKIP
    >>> oplog.record(Operation(kind="delete-records", topic="orders",
    ...     partitions=(PartitionChange(0, before_offset=0, after_offset=1200),),
    ...     reason="GDPR erasure ticket 4711", plan_id="plan-20260101-1"))  # doctest: +SKIP
    """

    def __init__(self, client: ClientConfig, *, topic: str = OPERATIONS_TOPIC, timeout: float = 30.0) -> None:
        self.client = client
        self.topic = topic
        self.timeout = timeout
        self._ensured = False

    # ------------------------------------------------------------------ topic
    def ensure_topic(self) -> None:
        """Create the topic on first use (RF min(3, brokers), infinite retention, delete policy)."""
        if self._ensured:
            return
        try:
            ensured = ensure_topic(
                new_admin(self.client),
                self.topic,
                config=OPERATIONS_TOPIC_CONFIG,
                timeout=self.timeout,
            )
        except KafkaError as exc:
            where = f"the operations log, at {self.client.bootstrap_servers}"
            raise OperationsLogError(f"{exc.problem} ({where})") from None
        if not ensured.writable:
            raise OperationsLogError(f"the operations topic {self.topic!r} has no leader after {self.timeout:.0f}s")
        self._ensured = True

    def exists(self) -> bool:

        admin = new_admin(self.client)
        try:
            return self.topic in admin.list_topics(timeout=min(15.0, self.timeout)).topics
        except Exception as exc:  # noqa: BLE001 - KafkaException or a timeout: one clear error
            where = self.client.bootstrap_servers
            raise OperationsLogError(f"cannot reach Kafka at {where}: {error_text(exc)}") from None

    # ------------------------------------------------------------------ write
    def record(self, operation: Operation) -> Operation:
        """Append ``operation`` and wait until the cluster acknowledged it (acks=all)."""

        self.ensure_topic()
        producer = new_producer(self.client, {"linger.ms": 0})
        outcome: dict[str, Any] = {}

        def delivered(err: Any, msg: Any) -> None:
            outcome["err"] = err
            outcome["offset"] = None if err is not None else msg.offset()

        payload = json.dumps(operation.to_json(), sort_keys=True).encode()
        producer.produce(self.topic, key=(operation.topic or "").encode(), value=payload, on_delivery=delivered)
        remaining = producer.flush(self.timeout)
        if remaining or outcome.get("err") is not None or "offset" not in outcome:
            raise OperationsLogError(
                f"operation {operation.id} ({operation.kind}) was not acknowledged by the operations log: "
                f"{outcome.get('err') or 'timed out'}",
                hint="the operation is NOT recorded; check the cluster and record it again",
            )
        return Operation(**{**operation.__dict__, "log_offset": outcome["offset"]})

    # ------------------------------------------------------------------ read
    def read(self, since: int | datetime | None = None, *, topic: str | None = None) -> list[Operation]:
        """All operations (optionally since a time, for one topic), oldest first.

        A value that is not a valid operation (garbage written by another tool) is skipped with a
        warning naming its offset; it never hides the valid entries around it.
        """
        from confluent_kafka import TopicPartition

        if not self.exists():
            return []  # nothing recorded yet; reading never creates the topic
        since_ms = int(since.timestamp() * 1000) if isinstance(since, datetime) else since
        consumer = new_consumer(
            self.client,
            "strongroom-oplog-reader",
            {"enable.partition.eof": True, "isolation.level": "read_committed"},
        )
        ops: list[Operation] = []
        try:
            low, high = watermarks(consumer, self.topic, 0, timeout=self.timeout)
            if high <= low:
                return []
            consumer.assign([TopicPartition(self.topic, 0, low)])
            deadline = time.monotonic() + self.timeout
            while time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is None:
                    continue
                err = msg.error()
                if err is not None:
                    if err.code() == -191:  # _PARTITION_EOF
                        break
                    continue
                offset = msg.offset()
                try:
                    op = Operation.from_json(json.loads(msg.value() or b""), log_offset=offset)
                except OperationsLogError:
                    raise
                except Exception as exc:  # noqa: BLE001 - garbage entries are reported, not fatal
                    log.warning("skipping the malformed operations-log entry at offset %s: %s", offset, exc)
                    op = None
                wanted = op is not None and (since_ms is None or op.when_ms >= since_ms)
                if op is not None and wanted and (topic is None or op.topic == topic):
                    ops.append(op)
                if offset is not None and offset >= high - 1:
                    break
            else:
                raise OperationsLogError(f"reading the operations log {self.topic!r} timed out")
        finally:
            consumer.close()
        return ops
