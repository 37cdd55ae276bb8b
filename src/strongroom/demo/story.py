"""The demo story, chapter by chapter, on a real local stack it starts and stops itself.

Each chapter is a function ``(ctx) -> dict`` that narrates what it does on stderr-free text output
and returns facts for the JSON summary. Chapters run in order; a failed chapter stops the story
with its error and the stack is still stopped.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from strongroom.testing.kafka_cluster import KafkaCluster
    from strongroom.testing.openbao import OpenBaoServer
    from strongroom.testing.schema_registry import SchemaRegistryServer

EVENTS_TOPIC = "customer-events"
KEYS_TOPIC = "strongroom-keys"
SUBJECTS_KEK = "strongroom-subjects"
#: The demo's keys topic compacts within seconds so the erasure can be verified while you watch.
DEMO_KEYS_TOPIC_CONFIG = {
    "segment.ms": "3000",
    "max.compaction.lag.ms": "3000",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": "600000",
}


class StoryOutput(Protocol):
    """What the story prints through (the CLI's output: text, or JSON with notes on stderr)."""

    name: str

    def note(self, message: str) -> None: ...


@dataclass
class DemoContext:
    out: StoryOutput
    workdir: Path
    cluster: KafkaCluster
    openbao: OpenBaoServer
    spark_factory: Callable[[], SparkSession]
    kms_config: dict[str, Any] = field(default_factory=dict)
    keys_topic: str = KEYS_TOPIC
    facts: dict[str, Any] = field(default_factory=dict)
    _spark: SparkSession | None = None
    _registry: SchemaRegistryServer | None = None

    @property
    def spark(self) -> SparkSession:
        if self._spark is None:
            self._spark = self.spark_factory()
        return self._spark

    @property
    def registry(self) -> SchemaRegistryServer:
        """An Apicurio schema registry (Confluent API), started when a chapter first needs it."""
        if self._registry is None:
            from strongroom.testing.schema_registry import SchemaRegistryServer

            self._registry = SchemaRegistryServer(log_dir=self.workdir / "registry").start()
        return self._registry

    def say(self, text: str) -> None:
        if self.out.name == "text":
            print(text, flush=True)
        else:
            self.out.note(text)


Chapter = Callable[[DemoContext], dict[str, Any]]


@contextmanager
def demo_stack(out: StoryOutput) -> Iterator[DemoContext]:
    from strongroom.kafka.config import ClientConfig
    from strongroom.keys.topic import create_keys_topic
    from strongroom.kms.admin.local import LocalKekAdmin
    from strongroom.kms.local import LocalKms
    from strongroom.spark.jobs.common import PIPELINE_SPARK_CONF
    from strongroom.spark.session import build_spark_session
    from strongroom.testing.kafka_cluster import KafkaCluster
    from strongroom.testing.openbao import OpenBaoServer

    workdir = Path(tempfile.mkdtemp(prefix="strongroom-demo-"))
    cluster = KafkaCluster(brokers=1)
    bao = OpenBaoServer()
    ctx: DemoContext | None = None
    try:
        t0 = time.monotonic()
        cluster.start()
        bao.start()
        keyring = workdir / "local-kms.json"
        LocalKekAdmin(LocalKms.from_config({"path": str(keyring), "create": True})).create_kek(SUBJECTS_KEK)
        create_keys_topic(ClientConfig(cluster.bootstrap_servers), KEYS_TOPIC, config_overrides=DEMO_KEYS_TOPIC_CONFIG)
        ctx = DemoContext(
            out=out,
            workdir=workdir,
            cluster=cluster,
            openbao=bao,
            spark_factory=lambda: build_spark_session(app_name="strongroom-demo", conf=PIPELINE_SPARK_CONF),
            kms_config={"provider": "local", "path": str(keyring)},
        )
        ctx.say(
            f"    Kafka {cluster.bootstrap_servers}, OpenBao {bao.address} and the local KMS keyring "
            f"(KEK {SUBJECTS_KEK!r}) up in {time.monotonic() - t0:.1f}s"
        )
        yield ctx
    finally:
        if ctx is not None and ctx._spark is not None:
            ctx._spark.stop()
        if ctx is not None and ctx._registry is not None:
            ctx._registry.stop()
        bao.stop()
        cluster.stop()


def run_story(out: StoryOutput, chapters: list[tuple[str, Chapter]]) -> dict[str, Any]:
    summary: dict[str, Any] = {"chapters": []}
    print_ = print if out.name == "text" else out.note
    print_("==> Starting the embedded local stack (1 Kafka broker, OpenBao with Transit, local KMS keyring)")
    with demo_stack(out) as ctx:
        for number, (title, chapter) in enumerate(chapters, start=1):
            print_(f"\n==> {number}. {title}")
            t0 = time.monotonic()
            facts = chapter(ctx)
            facts["seconds"] = round(time.monotonic() - t0, 1)
            summary["chapters"].append({"title": title, **facts})
    print_("\n==> Stack stopped. Demo complete.")
    return summary
