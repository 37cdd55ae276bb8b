"""Everything recovery asks Kafka, in one place: cluster id, offsets, consumer groups, probes, repairs.

All clients start from :class:`~strongroom.kafka.config.ClientConfig` (resilient librdkafka defaults
plus the user's ``--command-config``). Every Kafka failure becomes a :class:`~strongroom.errors.KafkaError`
naming the operation and the bootstrap servers; nothing here retries on its own beyond librdkafka.

Offsets are read ``read_committed`` (the end of a partition is its last stable offset), like the
consumers whose positions recovery moves: records of aborted transactions are invisible to them and
are not counted.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, IsolationLevel, KafkaException, TopicPartition
from confluent_kafka import KafkaError as RdKafkaError
from confluent_kafka.admin import OffsetSpec  # type: ignore[attr-defined]

from strongroom.errors import KafkaError
from strongroom.kafka.config import ClientConfig
from strongroom.kafka.transport import build_consumer, new_admin
from strongroom.recovery.errors import ScanAborted
from strongroom.recovery.search import ProbedRecord

#: Groups in these states have no members: their offsets may be changed.
INACTIVE_GROUP_STATES = frozenset({"EMPTY", "DEAD"})


@dataclass(frozen=True, slots=True)
class GroupMember:
    member_id: str
    client_id: str
    host: str

    def __str__(self) -> str:
        return f"{self.client_id or '?'}@{self.host or '?'} ({self.member_id})"


@dataclass
class GroupInfo:
    """A consumer group: its state, members, and committed offsets on one topic (partition → offset)."""

    group: str
    state: str
    members: list[GroupMember] = field(default_factory=list)
    offsets: dict[int, int | None] = field(default_factory=dict)

    @property
    def active(self) -> bool:
        return bool(self.members) or self.state not in INACTIVE_GROUP_STATES


def _state_name(state: Any) -> str:
    name = getattr(state, "name", None) or str(state)
    return str(name).upper()


class ClusterView:
    """Admin-side reads and writes recovery needs, over one AdminClient."""

    def __init__(self, client_config: ClientConfig, *, timeout: float = 30.0) -> None:
        self.client_config = client_config
        self.timeout = timeout
        self.admin = new_admin(client_config)

    def _fail(self, what: str, exc: BaseException) -> KafkaError:
        detail = exc.args[0] if isinstance(exc, KafkaException) and exc.args else exc
        return KafkaError(
            f"{what} failed on Kafka at {self.client_config.bootstrap_servers}: {detail}",
            hint="check --bootstrap-server, --command-config and that the brokers are up",
        )

    def cluster_id(self) -> str:
        try:
            cluster_id = self.admin.describe_cluster(request_timeout=self.timeout).result(self.timeout).cluster_id
        except Exception as exc:  # noqa: BLE001 - every client failure becomes a KafkaError here
            raise self._fail("describing the cluster", exc) from None
        return str(cluster_id)

    def partitions(self, topic: str) -> list[int]:
        try:
            metadata = self.admin.list_topics(topic, timeout=self.timeout)
        except Exception as exc:  # noqa: BLE001
            raise self._fail(f"reading metadata of topic {topic!r}", exc) from None
        info = metadata.topics.get(topic)
        if info is None or info.error is not None or not info.partitions:
            raise KafkaError(
                f"topic {topic!r} does not exist on Kafka at {self.client_config.bootstrap_servers}",
                hint="check the topic name (kafka-topics --list)",
            )
        return sorted(info.partitions)

    def bounds(self, topic: str, partitions: list[int]) -> dict[int, tuple[int, int]]:
        """partition → (log start offset, last stable offset)."""
        earliest = self._list_offsets(topic, partitions, OffsetSpec.earliest())  # type: ignore[no-untyped-call]
        latest = self._list_offsets(topic, partitions, OffsetSpec.latest())  # type: ignore[no-untyped-call]
        return {p: (earliest[p], latest[p]) for p in partitions}

    def _list_offsets(self, topic: str, partitions: list[int], spec: OffsetSpec) -> dict[int, int]:
        request = {TopicPartition(topic, p): spec for p in partitions}
        try:
            futures = self.admin.list_offsets(
                request, isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=self.timeout
            )
            return {tp.partition: int(f.result(self.timeout).offset) for tp, f in futures.items()}
        except Exception as exc:  # noqa: BLE001
            raise self._fail(f"listing offsets of topic {topic!r}", exc) from None

    # ------------------------------------------------------------------ consumer groups
    def groups_on_topic(self, topic: str, partitions: list[int]) -> list[GroupInfo]:
        """Every consumer group with a committed offset on ``topic``, with state and members."""
        try:
            listing = self.admin.list_consumer_groups(request_timeout=self.timeout).result(self.timeout)
        except Exception as exc:  # noqa: BLE001
            raise self._fail("listing consumer groups", exc) from None
        infos: list[GroupInfo] = []
        for listed in sorted(listing.valid, key=lambda g: g.group_id):
            offsets = self.committed(listed.group_id, topic, partitions)
            if any(o is not None for o in offsets.values()):
                info = self.describe_group(listed.group_id)
                info.offsets = offsets
                infos.append(info)
        return infos

    def committed(self, group: str, topic: str, partitions: list[int]) -> dict[int, int | None]:
        request = [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in partitions])]
        try:
            future = self.admin.list_consumer_group_offsets(request, request_timeout=self.timeout)[group]
            result = future.result(self.timeout)
        except Exception as exc:  # noqa: BLE001
            raise self._fail(f"reading committed offsets of group {group!r}", exc) from None
        out: dict[int, int | None] = {}
        for tp in result.topic_partitions:
            out[tp.partition] = tp.offset if tp.offset is not None and tp.offset >= 0 else None
        return out

    def describe_group(self, group: str) -> GroupInfo:
        try:
            description = self.admin.describe_consumer_groups([group], request_timeout=self.timeout)[group].result(
                self.timeout
            )
        except Exception as exc:  # noqa: BLE001
            raise self._fail(f"describing consumer group {group!r}", exc) from None
        members = [
            GroupMember(str(m.member_id), str(m.client_id or ""), str(m.host or "")) for m in description.members
        ]
        return GroupInfo(group, _state_name(description.state), members)

    # ------------------------------------------------------------------ repairs
    def delete_records(self, topic: str, offsets: Mapping[int, int]) -> dict[int, int]:
        """Move the log start of each partition to the offset given; returns the new low watermarks."""
        request = [TopicPartition(topic, p, o) for p, o in offsets.items()]
        try:
            futures = self.admin.delete_records(request, request_timeout=self.timeout, operation_timeout=self.timeout)
            return {tp.partition: int(f.result(self.timeout).low_watermark) for tp, f in futures.items()}
        except Exception as exc:  # noqa: BLE001
            raise self._fail(f"deleting records of topic {topic!r}", exc) from None

    def reset_offsets(self, group: str, topic: str, offsets: Mapping[int, int]) -> None:
        request = [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p, o) for p, o in offsets.items()])]
        try:
            self.admin.alter_consumer_group_offsets(request, request_timeout=self.timeout)[group].result(self.timeout)
        except Exception as exc:  # noqa: BLE001
            raise self._fail(f"resetting offsets of group {group!r}", exc) from None


class KafkaProbe:
    """One-record fetches for the boundary search: assign at an offset, poll the first record, repeat.

    The first round assigns every searching partition at its probe offset; later rounds ``seek``
    (which drops whatever was prefetched for that partition) and pause partitions that are done.
    Each round polls until every requested partition has given one record or reached its end
    (``enable.partition.eof``); later records of the same fetch are ignored. The consumer never
    commits and joins no group (``assign`` only).
    """

    def __init__(self, client_config: ClientConfig, topic: str, *, timeout: float = 30.0) -> None:
        self.topic = topic
        self.timeout = timeout
        self.fetches: dict[int, int] = {}
        overrides = {
            "enable.partition.eof": True,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            # Small prefetch: each probe needs one record, not a megabyte of its neighbours.
            "fetch.max.bytes": 1_048_576,
            "max.partition.fetch.bytes": 65_536,
            "queued.max.messages.kbytes": 16384,
            # When a fetch overfills the local queue librdkafka waits this long before fetching again
            # (default 1000 ms): a seek right after would stall a probe for a second.
            "fetch.queue.backoff.ms": 1,
            "fetch.wait.max.ms": 50,
        }
        conf = client_config.consumer(f"strongroom-recover-probe-{uuid.uuid4().hex[:12]}", overrides)
        self._consumer = build_consumer(conf)
        self._bootstrap = client_config.bootstrap_servers
        self._assigned: set[int] = set()
        self._paused: set[int] = set()

    def first_records(self, requests: Mapping[int, tuple[int, int]]) -> dict[int, ProbedRecord | None]:
        import time

        results: dict[int, ProbedRecord | None] = {}
        pending = dict(requests)
        self._position(pending)
        for p in pending:
            self.fetches[p] = self.fetches.get(p, 0) + 1
        deadline = time.monotonic() + self.timeout
        while pending:
            if time.monotonic() > deadline:
                raise ScanAborted(
                    f"no answer from Kafka at {self._bootstrap} for partitions {sorted(pending)} of "
                    f"{self.topic!r} within {self.timeout:.0f}s",
                    hint="check that the partition leaders are available, then run the scan again",
                )
            msg = self._consumer.poll(0.2)
            if msg is None:
                continue
            partition = msg.partition()
            if partition not in pending:
                continue
            error = msg.error()
            start, _ = pending[partition]
            if error is not None:
                if error.code() == RdKafkaError._PARTITION_EOF:
                    results[partition] = None
                    del pending[partition]
                    continue
                if error.retriable() or not error.fatal():
                    continue
                raise KafkaError(f"fetching {self.topic}-{partition} from Kafka at {self._bootstrap}: {error.str()}")
            offset = msg.offset()
            if offset is None or offset < start:
                continue  # stale message of an earlier assignment
            headers = msg.headers()
            results[partition] = ProbedRecord(offset, _bytes_headers(headers), msg.value())
            del pending[partition]
        return results

    def _position(self, requests: Mapping[int, tuple[int, int]]) -> None:
        """Point every requested partition at its probe offset; pause the others."""
        if not self._assigned or not set(requests) <= self._assigned:
            self._consumer.assign([TopicPartition(self.topic, p, start) for p, (start, _) in requests.items()])
            self._assigned, self._paused = set(requests), set()
            return
        done = [TopicPartition(self.topic, p) for p in self._assigned - set(requests) - self._paused]
        if done:
            self._consumer.pause(done)
            self._paused.update(tp.partition for tp in done)
        try:
            for p, (start, _) in requests.items():
                self._consumer.seek(TopicPartition(self.topic, p, start))
        except KafkaException:  # e.g. a partition whose fetcher is not running yet: start afresh
            self._consumer.assign([TopicPartition(self.topic, p, start) for p, (start, _) in requests.items()])
            self._assigned, self._paused = set(requests), set()

    def close(self) -> None:
        self._consumer.close()

    def __enter__(self) -> KafkaProbe:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _bytes_headers(headers: Any) -> list[tuple[str, bytes | None]] | None:
    if not headers:
        return None
    return [(str(k), v if v is None or isinstance(v, bytes) else str(v).encode()) for k, v in headers]
