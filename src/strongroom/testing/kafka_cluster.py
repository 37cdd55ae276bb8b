"""A real Apache Kafka (KRaft) cluster on 127.0.0.1 for tests, demos and fault injection.

One broker runs in combined mode (broker and controller in one JVM) because it starts fastest.
Several brokers get a dedicated controller process beside them, so any broker can be stopped,
``kill -9``-ed and restarted without losing the controller quorum - the faults later tests need
(failover, unclean election, truncation) are broker faults, not quorum loss.

Each cluster lives in its own temporary directory (``node-<id>/data``, ``node-<id>/logs/server.log``)
that :meth:`KafkaCluster.stop` removes unless ``keep_dirs`` is set.

The broker defaults are tuned for a small test machine and quick reactions (fast fencing, retention
and cleaner checks every few seconds); they are listed in :data:`TEST_BROKER_DEFAULTS` and any of
them can be overridden with ``broker_config``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from strongroom._resources import resource_path
from strongroom.errors import StackError
from strongroom.testing.kafka_dist import KAFKA_VERSION, ensure_kafka_libs, java_executable
from strongroom.testing.process import ManagedProcess, free_port, port_answers, require_free_ports, tail

CONTROLLER_NODE_ID = 1000

#: Broker settings for a small, fast-reacting test cluster. Each is overridable via ``broker_config``.
TEST_BROKER_DEFAULTS: dict[str, str] = {
    "num.network.threads": "2",
    "num.io.threads": "4",
    "background.threads": "4",
    "num.partitions": "1",
    "auto.create.topics.enable": "false",
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "5",
    "transaction.state.log.num.partitions": "5",
    # The cleaner allocates this at start; 128 MiB default is wasteful on a test machine.
    "log.cleaner.dedupe.buffer.size": str(8 * 1024 * 1024),
    "log.cleaner.threads": "1",
    "log.cleaner.backoff.ms": "1000",
    "log.retention.check.interval.ms": "2000",
    "log.segment.delete.delay.ms": "1000",
    "log.initial.task.delay.ms": "1000",
    # Fence dead brokers and shrink ISRs within seconds instead of tens of seconds.
    "broker.session.timeout.ms": "6000",
    "broker.heartbeat.interval.ms": "500",
    "replica.lag.time.max.ms": "8000",
    "controller.quorum.fetch.timeout.ms": "4000",
    "unclean.leader.election.interval.ms": "1000",
}


@dataclass
class KafkaNode:
    node_id: int
    roles: str  # "broker", "controller" or "broker,controller"
    directory: Path
    broker_port: int | None = None
    controller_port: int | None = None
    sasl_port: int | None = None
    process: ManagedProcess | None = field(default=None, repr=False)

    @property
    def data_dir(self) -> Path:
        return self.directory / "data"

    @property
    def log_dir(self) -> Path:
        return self.directory / "logs"

    @property
    def log_file(self) -> Path:
        return self.log_dir / "server.log"

    @property
    def properties_file(self) -> Path:
        return self.directory / "server.properties"

    @property
    def is_broker(self) -> bool:
        return "broker" in self.roles


class KafkaCluster:
    """A KRaft cluster of ``brokers`` brokers on 127.0.0.1 with free ports.

    >>> with KafkaCluster(brokers=1) as cluster:  # doctest: +SKIP
    ...     print(cluster.bootstrap_servers)
    """

    def __init__(
        self,
        brokers: int = 1,
        *,
        broker_config: Mapping[str, str | int] | None = None,
        eligible_leader_replicas: bool = True,
        sasl_users: Mapping[str, str] | None = None,
        base_dir: Path | None = None,
        keep_dirs: bool = False,
        detached: bool = False,
        heap: str = "512m",
        version: str = KAFKA_VERSION,
        cluster_id: str | None = None,
    ) -> None:
        if brokers < 1:
            raise StackError(f"a cluster needs at least one broker, got {brokers}", hint="pass brokers >= 1")
        self.broker_count = brokers
        self.broker_config = {k: str(v) for k, v in (broker_config or {}).items()}
        self.eligible_leader_replicas = eligible_leader_replicas
        self.sasl_users = dict(sasl_users or {})
        self.keep_dirs = keep_dirs or base_dir is not None
        self.detached = detached
        self.heap = heap
        self.version = version
        self.base_dir = base_dir or Path(tempfile.mkdtemp(prefix="strongroom-kafka-"))
        self.cluster_id = cluster_id or _random_cluster_id()
        self.nodes: dict[int, KafkaNode] = {}
        self._libs: Path | None = None
        self._admin: Any = None
        self._started = False

    # ------------------------------------------------------------------ addresses
    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"127.0.0.1:{n.broker_port}" for n in self._brokers())

    @property
    def sasl_bootstrap_servers(self) -> str:
        if not self.sasl_users:
            raise StackError("this cluster has no SASL listener", hint="start it with sasl_users={...}")
        return ",".join(f"127.0.0.1:{n.sasl_port}" for n in self._brokers())

    @property
    def broker_ids(self) -> list[int]:
        return [n.node_id for n in self._brokers()]

    def broker_log(self, node_id: int) -> Path:
        return self._node(node_id).log_file

    def log_dir_of(self, node_id: int) -> Path:
        """The broker's ``log.dirs`` (partition data), e.g. for DumpLogSegments."""
        return self._node(node_id).data_dir

    # ------------------------------------------------------------------ lifecycle
    def start(self, timeout: float = 180.0) -> KafkaCluster:
        """Format every node, start them all, and wait until every broker is registered."""
        try:
            self._libs = ensure_kafka_libs(self.version)
            self._plan_nodes()
            with ThreadPoolExecutor(max_workers=len(self.nodes)) as pool:
                list(pool.map(self._format, self.nodes.values()))
            for node in self.nodes.values():
                self._launch(node)
            deadline = time.monotonic() + timeout
            for node in self.nodes.values():
                self._wait_port(node, max(1.0, deadline - time.monotonic()))
            self.wait_for_brokers(self.broker_ids, timeout=max(1.0, deadline - time.monotonic()))
        except BaseException:
            self.stop()
            raise
        self._started = True
        return self

    def stop(self) -> None:
        """Stop every node (SIGTERM, then SIGKILL) and remove the cluster's directory."""
        self._admin = None  # drop the client first so it does not reconnect to dying brokers
        # Brokers first and in parallel (their controlled shutdown needs the controller), then the rest.
        brokers = [n.process for n in self._brokers() if n.process is not None]
        with ThreadPoolExecutor(max_workers=max(1, len(brokers))) as pool:
            list(pool.map(lambda p: p.stop(), brokers))
        for node in self.nodes.values():
            if node.process is not None:
                node.process.stop()
        if not self.keep_dirs:
            shutil.rmtree(self.base_dir, ignore_errors=True)
        self._started = False

    def __enter__(self) -> KafkaCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ fault injection
    def stop_broker(self, node_id: int) -> None:
        """Clean shutdown of one broker (controlled shutdown moves its leaderships first)."""
        proc = self._node(node_id).process
        if proc is not None:
            proc.stop(timeout=60)

    def kill_broker(self, node_id: int) -> None:
        """``kill -9`` one broker: no controlled shutdown, no flush."""
        proc = self._node(node_id).process
        if proc is not None:
            proc.kill()

    def start_broker(self, node_id: int, *, wait: bool = True, timeout: float = 90.0) -> None:
        """Restart a stopped or killed broker with its data and configuration intact."""
        node = self._node(node_id)
        if node.process is not None and node.process.running():
            return
        self._launch(node)
        if wait:
            self._wait_port(node, timeout)
            self.wait_for_brokers([node_id], timeout=timeout)

    def broker_running(self, node_id: int) -> bool:
        proc = self._node(node_id).process
        return proc is not None and proc.running()

    def ensure_all_running(self, timeout: float = 90.0) -> None:
        """Restart any broker a test left stopped, so a shared cluster is whole for the next test."""
        for node_id in self.broker_ids:
            if not self.broker_running(node_id):
                self.start_broker(node_id, timeout=timeout)
        self.wait_for_brokers(self.broker_ids, timeout=timeout)

    def wait_for_brokers(self, node_ids: Sequence[int], timeout: float = 60.0) -> None:
        """Wait until the cluster metadata lists every broker in ``node_ids`` as alive."""
        admin = self.admin()
        wanted = set(node_ids)
        deadline = time.monotonic() + timeout
        seen: set[int] = set()
        while time.monotonic() < deadline:
            try:
                seen = set(admin.list_topics(timeout=5).brokers)
            except Exception:  # noqa: BLE001 - not up yet; any client error means "retry"
                seen = set()
            if wanted <= seen:
                return
            time.sleep(0.2)
        missing = sorted(wanted - seen)
        logs = ", ".join(str(self._node(i).log_file) for i in missing)
        raise StackError(
            f"Kafka brokers {missing} did not register within {timeout:.0f}s",
            hint=f"see {logs}",
        )

    # ------------------------------------------------------------------ admin helpers
    def admin(self) -> Any:
        """A cached AdminClient (a client must outlive the futures it returns)."""
        if self._admin is None:
            from strongroom.kafka.transport import build_admin

            self._admin = build_admin({"bootstrap.servers": self.bootstrap_servers})
        return self._admin

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int = 1,
        config: Mapping[str, str | int] | None = None,
        timeout: float = 30.0,
    ) -> str:
        """Create a topic and wait until every partition has a leader."""
        from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

        topic = NewTopic(
            name,
            num_partitions=partitions,
            replication_factor=replication_factor,
            config={k: str(v) for k, v in (config or {}).items()},
        )
        admin = self.admin()
        futures = admin.create_topics([topic], operation_timeout=timeout)
        try:
            futures[name].result(timeout)
        except Exception as exc:
            raise StackError(f"could not create topic {name!r}: {exc}", hint="check the topic settings") from exc
        self.wait_for_leaders(name, partitions, timeout)
        return name

    def wait_for_leaders(self, topic: str, partitions: int, timeout: float = 30.0) -> None:
        from strongroom.kafka.topics import wait_until_writable

        admin = self.admin()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            md = admin.list_topics(topic, timeout=5).topics.get(topic)
            if md is not None and md.error is None and len(md.partitions) == partitions:
                if wait_until_writable(admin, topic, timeout=max(0.0, deadline - time.monotonic())):
                    return
                break
            time.sleep(0.1)
        raise StackError(f"topic {topic!r} has partitions without a leader after {timeout:.0f}s")

    def partition_leader(self, topic: str, partition: int = 0) -> int:
        md = self.admin().list_topics(topic, timeout=10).topics[topic]
        return int(md.partitions[partition].leader)

    def partition_isr(self, topic: str, partition: int = 0) -> list[int]:
        md = self.admin().list_topics(topic, timeout=10).topics[topic]
        return [int(i) for i in md.partitions[partition].isrs]

    def run_tool(
        self, main_class: str, *args: str, check: bool = True, timeout: float = 120.0
    ) -> subprocess.CompletedProcess[str]:
        """Run one of Kafka's own command-line tools (by main class) against this cluster's jars.

        E.g. ``run_tool("org.apache.kafka.tools.DeleteRecordsCommand", "--bootstrap-server", bs,
        "--offset-json-file", path)``. See :data:`TOOLS` for the usual classes.
        """
        libs = self._libs or ensure_kafka_libs(self.version)
        cmd = [
            java_executable(), "-Xmx256m",
            f"-Dlog4j2.configurationFile={resource_path('log4j2-tools.properties')}",
            "-cp", str(libs / "*"), main_class, *args,
        ]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=timeout)
        if check and proc.returncode != 0:
            raise StackError(
                f"{main_class.rsplit('.', 1)[-1]} failed (exit {proc.returncode}): "
                f"{(proc.stderr or proc.stdout).strip()[-1500:]}",
                hint="check the tool arguments",
            )
        return proc

    def delete_records_tool(self, offsets: Mapping[tuple[str, int], int]) -> str:
        """``kafka-delete-records`` through Kafka's own tool; returns its output."""
        spec = {
            "version": 1,
            "partitions": [{"topic": t, "partition": p, "offset": o} for (t, p), o in offsets.items()],
        }
        path = self.base_dir / f"delete-records-{uuid.uuid4().hex[:8]}.json"
        path.write_text(json.dumps(spec))
        args = ("--bootstrap-server", self.bootstrap_servers, "--offset-json-file", str(path))
        return self.run_tool(TOOLS["delete-records"], *args).stdout

    def consumer_groups_tool(self, *args: str) -> str:
        """``kafka-consumer-groups`` through Kafka's own tool; returns its output."""
        return self.run_tool(TOOLS["consumer-groups"], "--bootstrap-server", self.bootstrap_servers, *args).stdout

    # ------------------------------------------------------------------ state (dev up/down)
    def describe(self) -> dict[str, Any]:
        return {
            "bootstrap_servers": self.bootstrap_servers,
            "cluster_id": self.cluster_id,
            "base_dir": str(self.base_dir),
            "nodes": [
                {
                    "node_id": n.node_id,
                    "roles": n.roles,
                    "pid": n.process.pid if n.process else None,
                    "log": str(n.log_file),
                }
                for n in self.nodes.values()
            ],
        }

    # ------------------------------------------------------------------ internals
    def _brokers(self) -> list[KafkaNode]:
        return [n for n in self.nodes.values() if n.is_broker]

    def _node(self, node_id: int) -> KafkaNode:
        try:
            return self.nodes[node_id]
        except KeyError:
            raise StackError(f"no node {node_id} in this cluster", hint=f"brokers are {self.broker_ids}") from None

    def _plan_nodes(self) -> None:
        if self.nodes:
            return
        if self.broker_count == 1:
            self.nodes[1] = KafkaNode(
                1, "broker,controller", self.base_dir / "node-1",
                broker_port=free_port(), controller_port=free_port(),
            )  # fmt: skip
        else:
            self.nodes[CONTROLLER_NODE_ID] = KafkaNode(
                CONTROLLER_NODE_ID, "controller", self.base_dir / "controller",
                controller_port=free_port(),
            )  # fmt: skip
            for i in range(1, self.broker_count + 1):
                self.nodes[i] = KafkaNode(i, "broker", self.base_dir / f"node-{i}", broker_port=free_port())
        if self.sasl_users:
            for node in self._brokers():
                node.sasl_port = free_port()
        for node in self.nodes.values():
            node.data_dir.mkdir(parents=True, exist_ok=True)
            node.log_dir.mkdir(parents=True, exist_ok=True)
            node.properties_file.write_text(self._properties(node))

    def _voter(self) -> KafkaNode:
        return next(n for n in self.nodes.values() if "controller" in n.roles)

    def _properties(self, node: KafkaNode) -> str:
        voter = self._voter()
        n_brokers = self.broker_count
        props: dict[str, str] = {
            "process.roles": node.roles,
            "node.id": str(node.node_id),
            "controller.quorum.voters": f"{voter.node_id}@127.0.0.1:{voter.controller_port}",
            "controller.listener.names": "CONTROLLER",
            "log.dirs": str(node.data_dir),
            "offsets.topic.replication.factor": str(min(3, n_brokers)),
            "transaction.state.log.replication.factor": str(min(3, n_brokers)),
            "transaction.state.log.min.isr": str(min(2, n_brokers)),
            "share.coordinator.state.topic.replication.factor": str(min(3, n_brokers)),
            "share.coordinator.state.topic.min.isr": str(min(2, n_brokers)),
            **TEST_BROKER_DEFAULTS,
        }
        listeners: list[str] = []
        advertised: list[str] = []
        protocols = ["CONTROLLER:PLAINTEXT", "PLAINTEXT:PLAINTEXT"]
        if node.is_broker:
            listeners.append(f"PLAINTEXT://127.0.0.1:{node.broker_port}")
            advertised.append(f"PLAINTEXT://127.0.0.1:{node.broker_port}")
            props["inter.broker.listener.name"] = "PLAINTEXT"
        if "controller" in node.roles:
            listeners.append(f"CONTROLLER://127.0.0.1:{node.controller_port}")
        if node.sasl_port is not None:
            listeners.append(f"SASL_PLAINTEXT://127.0.0.1:{node.sasl_port}")
            advertised.append(f"SASL_PLAINTEXT://127.0.0.1:{node.sasl_port}")
            protocols.append("SASL_PLAINTEXT:SASL_PLAINTEXT")
            users = " ".join(f'user_{u}="{p}"' for u, p in self.sasl_users.items())
            props["sasl.enabled.mechanisms"] = "PLAIN"
            props["listener.name.sasl_plaintext.plain.sasl.jaas.config"] = (
                f"org.apache.kafka.common.security.plain.PlainLoginModule required {users};"
            )
        props["listeners"] = ",".join(listeners)
        if advertised:
            props["advertised.listeners"] = ",".join(advertised)
        props["listener.security.protocol.map"] = ",".join(protocols)
        props.update(self.broker_config)
        return "".join(f"{k}={v}\n" for k, v in props.items())

    def _format(self, node: KafkaNode) -> None:
        assert self._libs is not None
        cmd = [
            java_executable(), "-Xmx256m",
            f"-Dlog4j2.configurationFile={resource_path('log4j2-tools.properties')}",
            "-cp", str(self._libs / "*"), "kafka.tools.StorageTool", "format",
            f"--cluster-id={self.cluster_id}", "-c", str(node.properties_file),  # an id may start with "-"
        ]  # fmt: skip
        if not self.eligible_leader_replicas:
            cmd += ["--feature", "eligible.leader.replicas.version=0"]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=120)
        if proc.returncode != 0:
            raise StackError(
                f"formatting Kafka node {node.node_id} failed: {(proc.stderr or proc.stdout).strip()[-1500:]}",
                hint=f"check {node.properties_file}",
            )

    def _launch(self, node: KafkaNode) -> None:
        libs = self._libs or ensure_kafka_libs(self.version)
        ports = [p for p in (node.broker_port, node.controller_port, node.sasl_port) if p is not None]
        require_free_ports(f"Kafka node {node.node_id}", *ports)
        argv = [
            java_executable(), f"-Xmx{self.heap}", "-Xms128m", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
            "-XX:+ExitOnOutOfMemoryError", "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={resource_path('log4j2-kafka.properties')}",
            f"-Dkafka.logs.dir={node.log_dir}",
            "-cp", str(libs / "*"), "kafka.Kafka", str(node.properties_file),
        ]  # fmt: skip
        node.process = ManagedProcess(
            f"Kafka node {node.node_id}", argv, node.log_dir / "stdout.log", detached=self.detached
        )
        node.process.start()

    def _wait_port(self, node: KafkaNode, timeout: float) -> None:
        port = node.broker_port if node.is_broker else node.controller_port
        assert node.process is not None
        assert port is not None
        try:
            node.process.wait_until(lambda: port_answers(port), timeout, f"port {port} answers")
        except StackError as exc:
            # The broker logs through log4j to server.log; stdout.log only has JVM-level output.
            log = "\n".join(filter(None, [tail(node.log_file), tail(node.process.log_path, 5)]))
            cause = "it exited" if not node.process.running() else f"port {port} did not answer in {timeout:.0f}s"
            if "Address already in use" in log:
                cause = f"port {port} is already in use"
            raise StackError(
                f"Kafka node {node.node_id} failed to start ({cause}); last log lines:\n{log}",
                hint=f"see the broker log {node.log_file}",
            ) from exc


TOOLS: dict[str, str] = {
    "delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "topics": "org.apache.kafka.tools.TopicCommand",
    "leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "dump-log": "org.apache.kafka.tools.DumpLogSegments",
    "configs": "kafka.admin.ConfigCommand",  # still the Scala class in Kafka 4.3
}


def _random_cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64 without padding (as StorageTool makes)."""
    import base64

    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
