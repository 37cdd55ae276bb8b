"""pytest fixtures for the real local stack, registered as the ``strongroom`` pytest plugin.

Servers are session-scoped and started only when a test asks for them; everything started is
stopped when the session ends. Each test gets its own uuid-named topics and consumer groups, so tests
never interfere through Kafka state.

* ``kafka_cluster`` - 1 broker (combined KRaft mode)
* ``kafka_cluster3`` - 3 brokers + a dedicated controller; any broker a test stopped is restarted
  before the next test that uses it
* ``kafka_cluster3_classic`` - the same with classic elections (no eligible leader replicas), for the
  tests that need an unclean election to lose acknowledged records
* ``kafka_cluster_factory`` - start a private cluster with special settings (stopped after the test)
* ``openbao`` - OpenBao dev server with Transit; ``moto_kms`` - moto server for the AWS KMS API
* ``schema_registry`` - Apicurio Registry (Confluent API at ``.url``), fetched from Maven Central on first use
* ``spark`` - one small local SparkSession with Spark's Kafka connector
* ``new_topic`` / ``new_topic3`` / ``unique_name`` / ``new_group`` - isolation helpers

Any test that uses one of the stack fixtures is marked ``integration`` automatically, so
``pytest -m "not integration"`` runs the fast suite with no JVM and no servers.
"""

from __future__ import annotations

import gc
import signal
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from strongroom.testing.kafka_cluster import KafkaCluster
    from strongroom.testing.moto_server import MotoServer
    from strongroom.testing.openbao import OpenBaoServer
    from strongroom.testing.schema_registry import SchemaRegistryServer


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


STACK_FIXTURES = {
    "kafka_cluster": "integration",
    "kafka_cluster3": "cluster3",
    "kafka_cluster_factory": "integration",
    "openbao": "integration",
    "moto_kms": "integration",
    "schema_registry": "integration",
    "spark": "spark",
    "new_topic": "integration",
    "new_topic3": "cluster3",
}


def pytest_configure(config: pytest.Config) -> None:
    # SIGTERM (a CI timeout, `kill`) normally ends Python without running atexit hooks, which would
    # leave the servers this session started running. Turn it into an orderly exit instead.
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _exit_on_sigterm)
    for line in (
        "integration: needs the real local stack (JVM, Kafka, KMS servers)",
        "spark: needs a SparkSession (implies integration)",
        "cluster3: needs the 3-broker Kafka cluster (implies integration)",
        "slow: long-running (kill loops, large data)",
    ):
        config.addinivalue_line("markers", line)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        used = set(getattr(item, "fixturenames", ())) & STACK_FIXTURES.keys()
        for name in used:
            item.add_marker(STACK_FIXTURES[name])
        if used:
            item.add_marker("integration")


@pytest.fixture(autouse=True)
def _isolated_strongroom_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Hide the developer's own strongroom state (dev stack, local keyring, config) from tests."""
    monkeypatch.setenv("STRONGROOM_HOME", str(tmp_path_factory.mktemp("strongroom-home")))


@pytest.fixture
def unique_name() -> Callable[[str], str]:
    def make(prefix: str = "t") -> str:
        return f"{prefix}-{uuid.uuid4().hex[:12]}"

    return make


@pytest.fixture
def new_group(unique_name: Callable[[str], str]) -> str:
    return unique_name("group")


def _running(cluster: KafkaCluster) -> Iterator[KafkaCluster]:
    """A session cluster: started on first use, stopped when the session ends.

    Before it stops, unreachable Kafka clients are collected while their brokers still answer: a client
    that is garbage only through a reference cycle (typically a stored exception whose traceback holds a
    test's frame, and so the test's producers and key tables) otherwise lives until the interpreter
    exits, retrying the stopped brokers and printing librdkafka's raw ``%3|...|FAIL|`` lines.
    """
    started = cluster.start()
    try:
        yield started
    finally:
        gc.collect()
        started.stop()


@pytest.fixture(scope="session")
def kafka_cluster() -> Iterator[KafkaCluster]:
    from strongroom.testing.kafka_cluster import KafkaCluster

    yield from _running(KafkaCluster(brokers=1))


@pytest.fixture(scope="session")
def _kafka_cluster3_session() -> Iterator[KafkaCluster]:
    from strongroom.testing.kafka_cluster import KafkaCluster

    yield from _running(KafkaCluster(brokers=3))


@pytest.fixture
def kafka_cluster3(_kafka_cluster3_session: KafkaCluster) -> KafkaCluster:
    _kafka_cluster3_session.ensure_all_running()
    return _kafka_cluster3_session


@pytest.fixture(scope="session")
def _kafka_cluster3_classic_session() -> Iterator[KafkaCluster]:
    from strongroom.testing.kafka_cluster import KafkaCluster

    yield from _running(KafkaCluster(brokers=3, eligible_leader_replicas=False))


@pytest.fixture
def kafka_cluster3_classic(_kafka_cluster3_classic_session: KafkaCluster) -> KafkaCluster:
    """Three brokers with classic elections (no eligible leader replicas): an unclean election can lose
    acknowledged records, which the audit's fault tests need. Shared by those tests (each uses its own
    topics); a broker a test left stopped is restarted first."""
    _kafka_cluster3_classic_session.ensure_all_running()
    return _kafka_cluster3_classic_session


@pytest.fixture
def kafka_cluster_factory() -> Iterator[Callable[..., KafkaCluster]]:
    """Start private clusters (e.g. ``eligible_leader_replicas=False``); all stopped after the test."""
    from strongroom.testing.kafka_cluster import KafkaCluster

    started: list[KafkaCluster] = []

    def make(brokers: int = 1, **kwargs: Any) -> KafkaCluster:
        cluster = KafkaCluster(brokers=brokers, **kwargs)
        started.append(cluster)
        return cluster.start()

    try:
        yield make
    finally:
        for cluster in started:
            cluster.stop()


def _topic_factory(cluster: KafkaCluster, unique_name: Callable[[str], str], default_rf: int) -> Callable[..., str]:
    def make(
        partitions: int = 1,
        *,
        replication_factor: int = default_rf,
        config: Mapping[str, str | int] | None = None,
        prefix: str = "topic",
    ) -> str:
        return cluster.create_topic(unique_name(prefix), partitions, replication_factor, config)

    return make


@pytest.fixture
def new_topic(kafka_cluster: KafkaCluster, unique_name: Callable[[str], str]) -> Callable[..., str]:
    """Create a uuid-named topic on the 1-broker cluster: ``new_topic(partitions=3, config={...})``."""
    return _topic_factory(kafka_cluster, unique_name, 1)


@pytest.fixture
def new_topic3(kafka_cluster3: KafkaCluster, unique_name: Callable[[str], str]) -> Callable[..., str]:
    """Create a uuid-named topic on the 3-broker cluster (replication factor 3 by default)."""
    return _topic_factory(kafka_cluster3, unique_name, 3)


@pytest.fixture(scope="session")
def openbao() -> Iterator[OpenBaoServer]:
    from strongroom.testing.openbao import OpenBaoServer

    server = OpenBaoServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def moto_kms() -> Iterator[MotoServer]:
    from strongroom.testing.moto_server import MotoServer

    server = MotoServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def schema_registry() -> Iterator[SchemaRegistryServer]:
    """One Apicurio Registry for the session (in-memory: tests register their own uuid-named subjects)."""
    from strongroom.testing.schema_registry import SchemaRegistryServer

    server = SchemaRegistryServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory, kafka_cluster: KafkaCluster) -> Iterator[SparkSession]:
    """One small local session for the whole run.

    It depends on ``kafka_cluster`` only so that it is torn down first: Spark's Python workers hold
    Kafka clients that would otherwise keep logging reconnect attempts to a stopped broker.
    """
    from strongroom.spark.session import build_spark_session

    warehouse: Path = tmp_path_factory.mktemp("spark-warehouse")
    session = build_spark_session(
        app_name="strongroom-tests",
        conf={
            "spark.sql.warehouse.dir": str(warehouse),
            "spark.sql.shuffle.partitions": "2",
        },
    )
    try:
        yield session
    finally:
        session.stop()
