"""Exact commands for the fixes doctor proposes, addressed to the cluster that was checked.

Commands use Apache Kafka's own tools (``kafka-configs.sh``, ``kafka-reassign-partitions.sh``), so an
operator can paste them. Kafka's tools are Java clients: their ``--command-config`` file needs Java
client properties (``sasl.jaas.config``), not librdkafka ones (``sasl.username``); on Amazon MSK,
broker-level settings are changed through an MSK configuration revision instead.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from strongroom.doctor.snapshot import Partition


@dataclass(frozen=True)
class KafkaTools:
    """Builds command lines for one cluster."""

    bootstrap_servers: str = "<bootstrap-servers>"
    command_config: str | None = None

    def _prefix(self, tool: str) -> list[str]:
        args = [tool, "--bootstrap-server", self.bootstrap_servers]
        if self.command_config:
            args += ["--command-config", self.command_config]
        return args

    @staticmethod
    def _configs(values: Mapping[str, Any]) -> str:
        # kafka-configs needs list values in brackets: cleanup.policy=[compact,delete]
        parts = []
        for key, value in values.items():
            text = str(value).lower() if isinstance(value, bool) else str(value)
            parts.append(f"{key}=[{text}]" if "," in text else f"{key}={text}")
        return ",".join(parts)

    def alter_topic(self, topic: str, add: Mapping[str, Any] | None = None, delete: Sequence[str] = ()) -> str:
        args = [*self._prefix("kafka-configs.sh"), "--alter", "--entity-type", "topics", "--entity-name", topic]
        if add:
            args += ["--add-config", self._configs(add)]
        if delete:
            args += ["--delete-config", ",".join(delete)]
        return shlex.join(args)

    def alter_broker_default(self, add: Mapping[str, Any] | None = None, delete: Sequence[str] = ()) -> str:
        """A cluster-wide dynamic default (applies to every broker without a per-broker value)."""
        args = [*self._prefix("kafka-configs.sh"), "--alter", "--entity-type", "brokers", "--entity-default"]
        if add:
            args += ["--add-config", self._configs(add)]
        if delete:
            args += ["--delete-config", ",".join(delete)]
        return shlex.join(args)

    def alter_broker(self, broker_id: int, add: Mapping[str, Any] | None = None, delete: Sequence[str] = ()) -> str:
        args = [*self._prefix("kafka-configs.sh"), "--alter", "--entity-type", "brokers", "--entity-name"]
        args.append(str(broker_id))
        if add:
            args += ["--add-config", self._configs(add)]
        if delete:
            args += ["--delete-config", ",".join(delete)]
        return shlex.join(args)

    def reassign(self, plan_file: str) -> str:
        args = [*self._prefix("kafka-reassign-partitions.sh"), "--reassignment-json-file", plan_file, "--execute"]
        return shlex.join(args)


def reassignment_plan(
    topic: str,
    partitions: Iterable[Partition],
    target_rf: int,
    brokers: Sequence[int],
    load: Mapping[int, int],
) -> dict[str, Any]:
    """A ``kafka-reassign-partitions`` plan that raises each partition to ``target_rf`` replicas.

    Existing replicas stay (the current leader first, so no leadership moves); new replicas go to the
    least-loaded brokers not already holding the partition, counting the replicas this plan adds.
    """
    counts = {b: load.get(b, 0) for b in brokers}
    entries: list[dict[str, Any]] = []
    for p in sorted(partitions, key=lambda p: p.id):
        replicas = list(p.replicas)
        for candidate in sorted((b for b in brokers if b not in replicas), key=lambda b: (counts[b], b)):
            if len(replicas) >= target_rf:
                break
            replicas.append(candidate)
            counts[candidate] += 1
        entries.append({"topic": topic, "partition": p.id, "replicas": replicas})
    return {"version": 1, "partitions": entries}
