"""What the cluster says about audited partitions right now: offsets, leaders, epochs, configs.

Used by the scrub (log start and end offsets, topic configs), the watcher (every poll) and the data
source's planner. Everything goes through confluent-kafka's AdminClient:

* ``list_offsets(earliest)`` is the log start offset; ``list_offsets(latest)`` with READ_COMMITTED
  isolation is the last stable offset (the end a ``read_committed`` reader reaches) and with
  READ_UNCOMMITTED the high watermark. The ``latest`` answer's ``leader_epoch`` is the partition's
  *current* leader epoch (the broker assigns the new epoch's start offset when it becomes leader, so
  it changes on failover even before anything is written - verified on Kafka 4.3).
* Right after a leader change a broker may answer ``OFFSET_NOT_AVAILABLE`` (offset -1001) until its
  high watermark catches up (KIP-207); those answers are retried, never taken as offsets.
* ``list_topics`` metadata gives leader, replicas and ISR; ``describe_configs`` the effective topic
  configuration (topic overrides and broker defaults alike).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from strongroom.audit.errors import TopicNotFound
from strongroom.errors import KafkaError
from strongroom.kafka.config import ClientConfig
from strongroom.kafka.transport import describe_configs, new_admin
from strongroom.runtime import now_ms

#: Topic configuration keys the audit reads (justifications and weakening checks).
AUDIT_CONFIG_KEYS = (
    "retention.ms",
    "retention.bytes",
    "cleanup.policy",
    "delete.retention.ms",
    "min.insync.replicas",
    "unclean.leader.election.enable",
    "segment.ms",
    "message.timestamp.type",
)


@dataclass(frozen=True)
class PartitionState:
    """One partition as observed at ``observed_at`` (epoch ms)."""

    topic: str
    partition: int
    log_start: int
    high_watermark: int
    stable_end: int
    leader: int
    leader_epoch: int | None
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    observed_at: int

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "log_start": self.log_start,
            "high_watermark": self.high_watermark,
            "stable_end": self.stable_end,
            "leader": self.leader,
            "leader_epoch": self.leader_epoch,
            "isr": list(self.isr),
            "replicas": list(self.replicas),
            "observed_at": self.observed_at,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> PartitionState:
        return cls(
            topic=d["topic"],
            partition=int(d["partition"]),
            log_start=int(d["log_start"]),
            high_watermark=int(d["high_watermark"]),
            stable_end=int(d["stable_end"]),
            leader=int(d["leader"]),
            leader_epoch=None if d.get("leader_epoch") is None else int(d["leader_epoch"]),
            isr=tuple(int(i) for i in d.get("isr", ())),
            replicas=tuple(int(i) for i in d.get("replicas", ())),
            observed_at=int(d.get("observed_at", 0)),
        )


def config_number(config: Mapping[str, str], key: str, default: int) -> int:
    """A numeric topic setting (a missing or unreadable one counts as Kafka's ``default``)."""
    try:
        return int(config.get(key, default))
    except (TypeError, ValueError):
        return default


@dataclass(frozen=True)
class TopicState:
    name: str
    partitions: tuple[PartitionState, ...]
    config: Mapping[str, str] = field(default_factory=dict)

    @property
    def replication_factor(self) -> int:
        return max((len(p.replicas) for p in self.partitions), default=0)

    @property
    def compacted(self) -> bool:
        return "compact" in self.config.get("cleanup.policy", "delete")

    @property
    def deletes(self) -> bool:
        return "delete" in self.config.get("cleanup.policy", "delete")


#: How long a capture's listing waits for a partition's leader before leaving the partition out: the JVM reader's
#: ``OffsetPlanner`` waits as long.
CAPTURE_LISTING_TIMEOUT = 15.0


class ClusterState:
    """Admin queries over one cluster, with the retries that leader changes need."""

    def __init__(self, client: ClientConfig, *, timeout: float = 30.0, admin: Any = None) -> None:
        self.client = client
        self.timeout = timeout
        self.admin = admin if admin is not None else new_admin(client)

    # ------------------------------------------------------------------ metadata
    def metadata(self, topics: Sequence[str] | None = None) -> Any:
        try:
            return self.admin.list_topics(timeout=min(self.timeout, 15.0))
        except Exception as exc:
            raise KafkaError(
                f"cannot reach Kafka at {self.client.bootstrap_servers}: {exc}",
                hint="check --bootstrap-server and that the brokers are up",
            ) from exc

    def topic_names(self, *, include_internal: bool = False) -> list[str]:
        md = self.metadata()
        names = sorted(md.topics)
        if include_internal:
            return names
        return [n for n in names if not n.startswith("__") and not n.startswith("_confluent")]

    def partitions_of(self, topics: Iterable[str]) -> dict[str, Any]:
        """topic -> TopicMetadata, raising :class:`TopicNotFound` for a topic the cluster lacks."""
        md = self.metadata()
        out: dict[str, Any] = {}
        for topic in topics:
            tmd = md.topics.get(topic)
            if tmd is None or (tmd.error is not None and not tmd.partitions):
                raise TopicNotFound(f"topic {topic!r} does not exist on {self.client.bootstrap_servers}")
            out[topic] = tmd
        return out

    # ------------------------------------------------------------------ offsets
    def list_offsets(
        self, tps: Sequence[tuple[str, int]], spec: str, *, committed: bool = True
    ) -> dict[tuple[str, int], tuple[int, int | None]]:
        """``(offset, leader_epoch)`` per partition for ``spec`` in {earliest, latest}.

        Partitions whose leader cannot answer within the timeout are left out of the result.
        """
        from confluent_kafka import IsolationLevel, TopicPartition
        from confluent_kafka.admin._listoffsets import OffsetSpec

        make: Any = {"earliest": OffsetSpec.earliest, "latest": OffsetSpec.latest}[spec]
        isolation = IsolationLevel.READ_COMMITTED if committed else IsolationLevel.READ_UNCOMMITTED
        pending = list(tps)
        result: dict[tuple[str, int], tuple[int, int | None]] = {}
        deadline = time.monotonic() + self.timeout
        delay = 0.1
        while pending:
            request = {TopicPartition(t, p): make() for t, p in pending}
            futures: dict[Any, Any] = {}
            try:
                futures = self.admin.list_offsets(request, isolation_level=isolation, request_timeout=15)
            except Exception:  # noqa: BLE001 - transient (no controller/leader yet): retried below
                futures = {}
            by_key = {(tp.topic, tp.partition): f for tp, f in futures.items()}
            retry: list[tuple[str, int]] = []
            for tp_key in pending:
                fut = by_key.get(tp_key)
                try:
                    info = fut.result() if fut is not None else None
                except Exception:  # noqa: BLE001 - NOT_LEADER / LEADER_NOT_AVAILABLE: retry
                    info = None
                if info is None or info.offset < 0:
                    retry.append(tp_key)
                else:
                    result[tp_key] = (int(info.offset), info.leader_epoch)
            pending = retry
            if not pending or time.monotonic() >= deadline:
                break
            time.sleep(delay)
            delay = min(1.0, delay * 2)
        return result

    # ------------------------------------------------------------------ configs
    def topic_configs(self, topics: Iterable[str]) -> dict[str, dict[str, str]]:
        return describe_configs(self.admin, list(topics), timeout=self.timeout)

    # ------------------------------------------------------------------ all together
    def describe(self, topics: Sequence[str], *, with_configs: bool = True) -> dict[str, TopicState]:
        """Partition states and configs of ``topics``. Partitions without an answering leader are
        still listed, with ``leader=-1`` and offsets ``-1`` (unknown)."""
        mds = self.partitions_of(topics)
        # Offline partitions cannot answer; asking would only wait out the timeout.
        tps = [(t, p) for t, md in mds.items() for p in sorted(md.partitions) if md.partitions[p].leader >= 0]
        observed = now_ms()
        earliest = self.list_offsets(tps, "earliest")
        latest_committed = self.list_offsets(tps, "latest", committed=True)
        high = self.list_offsets(tps, "latest", committed=False)
        configs = self.topic_configs(mds) if with_configs else {}
        out: dict[str, TopicState] = {}
        for topic, md in mds.items():
            parts = []
            for p in sorted(md.partitions):
                pmd = md.partitions[p]
                lso = latest_committed.get((topic, p))
                hw = high.get((topic, p))
                epoch = hw[1] if hw is not None else (lso[1] if lso is not None else None)
                parts.append(
                    PartitionState(
                        topic=topic,
                        partition=p,
                        log_start=earliest.get((topic, p), (-1, None))[0],
                        high_watermark=hw[0] if hw is not None else -1,
                        stable_end=lso[0] if lso is not None else -1,
                        leader=int(pmd.leader),
                        leader_epoch=None if epoch is None or epoch < 0 else int(epoch),
                        isr=tuple(sorted(int(i) for i in pmd.isrs)),
                        replicas=tuple(int(i) for i in pmd.replicas),
                        observed_at=observed,
                    )
                )
            out[topic] = TopicState(topic, tuple(parts), configs.get(topic, {}))
        return out
