"""strongroom's pipelines against Spark's own Kafka sink copying the same topic.

Usage:
    .venv/bin/python bench/pipeline_bench.py [--quick] [--engine python|jvm] [--rounds 3]
        [--payloads 100,1000,10000] [--records 100=1000000,1000=500000,10000=100000] [--subjects 100000]
        [--filler words|repeat] [--batch 250000]

One local Kafka broker, one Spark session (``local[2]``), 2-partition topics. Per payload size:

* setup (untimed): produce the source topic (JSON values of exactly that size over ``--subjects``
  subjects, the subject as the record key, a ``bench-seq`` header) and, per round, a new-subject topic
  (the same records, but every tenth one with a subject never seen before);
* warm-up (untimed) of every side on a small topic (JIT, Python workers, internal topics), and an
  encrypt over the whole source topic that creates every subject's key (so the timed encrypt rounds
  are the steady state);
* ``--rounds`` interleaved rounds (the order rotates each round) of:
  - ``copy``: Spark's own Kafka sink copying the source topic (the baseline);
  - ``eos-passthrough``: strongroom's exactly-once sink copying the records unchanged (the JVM sink's
    copy with ``--engine jvm``, the Python sink with a passthrough frame otherwise);
  - ``encrypt``: the encrypt pipeline, every key existing (steady state);
  - ``encrypt-new``: the encrypt pipeline on the round's new-subject topic (10 % new subjects);
  - ``fields-encrypt`` (1 KB only): 3 JSON fields of each record;
  - ``copy-encrypted``: Spark's Kafka sink copying the round's encrypted topic (decrypt's baseline);
  - ``decrypt``: the decrypt pipeline on the round's encrypted topic;
  - ``avro-copy`` and ``avro-encrypt`` (1 KB only; ``--no-avro`` leaves them out): Spark's Kafka sink
    copying an Avro topic (the customer-event schema of the schema-aware tests, ``email`` and ``name``
    tagged PII, padded to the payload size; Confluent wire format, schemas in a real Apicurio registry
    started for the run), and the encrypt pipeline in schema mode on it. Its output is verified by
    decrypting it (untimed) back to the source's exact bytes.

Same conditions on every side: the source options come from the pipelines' own ``kafka_stream``
(read_committed, headers, ``maxOffsetsPerTrigger``), the copy's producer gets the exactly-once sink's
settings (acks=all, idempotence, lz4, linger and batch size), headers are copied; Spark's sink cannot
set a record's timestamp, strongroom's pipelines keep it. Every round's output is read back under
read_committed and verified (count, no duplicates, round-trip content hashes; benchkit.verify); a round
that fails verification stops the benchmark. Last lines: one ``RESULT <side>-vs-copy`` line each for
encrypt, decrypt, fields-encrypt, eos-passthrough and avro-encrypt (against avro-copy): the median over
the rounds of (side records/s ÷ copy records/s) at 1 KB, steady state.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from confluent_kafka import TopicPartition

from benchkit import (  # bench/ is on sys.path when a script in it runs
    SEQ_HEADER,
    Check,
    ProcessKind,
    Summary,
    TopicDigest,
    canonical_json,
    cpu_by_kind,
    cpu_delta,
    result_line,
    summarize,
    verify,
)
from strongroom.kafka.config import PRODUCER_DEFAULTS, ClientConfig, produce_when_room
from strongroom.kafka.transport import build_consumer, build_producer
from strongroom.keys.topic import create_keys_topic
from strongroom.kms.admin.local import LocalKekAdmin
from strongroom.kms.local import LocalKms
from strongroom.policies import Engine
from strongroom.rules import EncryptionRules
from strongroom.schemas.registry import RegistrySettings
from strongroom.spark.jobs.common import (
    PIPELINE_SPARK_CONF,
    Counters,
    PipelineSettings,
    StreamingJob,
    kafka_stream,
    source_rows,
)
from strongroom.spark.jobs.decrypt import DecryptJob
from strongroom.spark.jobs.encrypt import EncryptJob
from strongroom.spark.jobs.results import PipelineResult
from strongroom.spark.jvm_sink import copy_settings, jvm_tasks
from strongroom.spark.kafka_sink import BATCHING, write_exactly_once
from strongroom.spark.session import build_spark_session
from strongroom.testing.kafka_cluster import KafkaCluster
from strongroom.testing.schema_registry import SchemaRegistryServer

FIELDS = ["$.name", "$.email", "$.address"]  # 3 JSON fields of a 1 KB record
TARGETS = {"encrypt": 0.90, "decrypt": 0.90, "fields-encrypt": 0.75, "eos-passthrough": 0.95, "avro-encrypt": 0.75}
#: Each side's baseline (the cheapest real alternative moving the same records); others: ``copy``.
BASELINES = {"decrypt": "copy-encrypted", "avro-encrypt": "avro-copy"}
NEW_SUBJECT_TARGET = 0.80  # issue 13: the new-subject round reaches 0.8x of the steady state
RESULT_PAYLOAD = 1000
INTERLEAVED = ["copy", "eos-passthrough", "encrypt", "encrypt-new", "fields-encrypt", "avro-copy", "avro-encrypt"]
ONLY_AT_RESULT_PAYLOAD = {"fields-encrypt", "avro-copy", "avro-encrypt"}
AVRO_SIDES = {"avro-copy", "avro-encrypt"}
AFTER_ENCRYPT = ["copy-encrypted", "decrypt"]  # they read the round's encrypted topic


# ---------------------------------------------------------------------------------------------- records
class Filler(StrEnum):
    """What pads a record's ``notes`` to its size. lz4 compresses ``repeat`` (one character) almost away,
    which flatters the copy (sealed values never compress); ``words`` compresses about as much as text."""

    WORDS = "words"
    REPEAT = "repeat"


def word_text(size: int = 1 << 20) -> str:
    """About ``size`` characters of words drawn at random (seeded) from a small vocabulary."""
    rng = random.Random(7)
    vocabulary = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 10)))
                  for _ in range(400)]  # fmt: skip
    words: list[str] = []
    length = 0
    while length < size:
        words.append(rng.choice(vocabulary))
        length += len(words[-1]) + 1
    return " ".join(words)


WORD_TEXT = word_text()


def filler(n: int, kind: Filler, rng: random.Random) -> str:
    if kind == Filler.REPEAT or n <= 0:
        return "x" * max(0, n)
    start = rng.randrange(len(WORD_TEXT) - n) if n < len(WORD_TEXT) else 0
    return (WORD_TEXT[start : start + n] * (n // len(WORD_TEXT) + 1))[:n]


def record_value(i: int, subject: str, payload: int, rng: random.Random, kind: Filler = Filler.WORDS) -> bytes:
    """A JSON value of exactly ``payload`` bytes (records of 1 KB and more carry the 3 fields to seal)."""
    doc: dict[str, Any] = {"customer_id": subject}
    if payload >= 500:
        doc |= {"name": f"Name {i}", "email": f"user{i}@example.com",
                "address": {"street": f"{i} Main St", "city": "Porto", "country": "PT"},
                "order": {"id": i, "total": round(rng.uniform(1, 500), 2)}}  # fmt: skip
    doc["notes"] = ""
    base = len(json.dumps(doc, separators=(",", ":")))
    doc["notes"] = filler(payload - base, kind, rng)
    return json.dumps(doc, separators=(",", ":")).encode()


def produce_source(
    bootstrap: str, topic: str, records: int, subjects: int, payload: int, kind: Filler, new_tag: str = ""
) -> int:
    """Produce the benchmark records; with ``new_tag`` every tenth record has a subject never seen before."""

    def record(i: int, rng: random.Random) -> tuple[str, bytes]:
        subject = f"subject-{rng.randrange(subjects):07d}"
        if new_tag and i % 10 == 0:
            subject = f"new-{new_tag}-{i:08d}"
        return subject, record_value(i, subject, payload, rng, kind)

    return produce_records(bootstrap, topic, records, random.Random(payload), record)


#: Makes the ``i``-th record: ``(subject, value)``.
RecordMaker = Callable[[int, random.Random], tuple[str, bytes]]


def produce_records(bootstrap: str, topic: str, records: int, rng: random.Random, record: RecordMaker) -> int:
    """Produce ``record(i, rng)`` → ``(subject, value)`` for each ``i``: the subject as the key, the sequence and
    source headers; the bytes of the values produced."""
    producer = build_producer(ClientConfig(bootstrap).producer({"linger.ms": 50, "batch.size": 1_000_000}))
    size = 0
    for i in range(records):
        subject, value = record(i, rng)
        size += len(value)
        headers = [(SEQ_HEADER, str(i).encode()), ("source", b"bench")]
        produce_when_room(producer, topic, key=subject.encode(), value=value, headers=headers)
        if i % 10_000 == 0:
            producer.poll(0)
    producer.flush(600)
    return size


def avro_schema() -> dict[str, Any]:
    """The schema-aware tests' customer event (``email`` and ``name`` tagged PII) with a ``notes`` filler."""
    from strongroom.testing.schema_formats import AVRO_SCHEMA

    return {**AVRO_SCHEMA, "fields": [*AVRO_SCHEMA["fields"], {"name": "notes", "type": "string"}]}


def produce_avro_source(
    bootstrap: str, topic: str, records: int, subjects: int, payload: int, kind: Filler, registry_url: str
) -> int:
    """Avro records of ``payload`` bytes in the Confluent wire format (schema registered under
    ``<topic>-value``), the subject as the key; the same headers as :func:`produce_source`."""
    import fastavro
    from confluent_kafka.schema_registry import Schema

    from strongroom.testing.schema_formats import registry_client

    schema = avro_schema()
    schema_id = int(registry_client(registry_url).register_schema(f"{topic}-value", Schema(json.dumps(schema), "AVRO")))
    parsed = fastavro.parse_schema(schema)

    def record(i: int, rng: random.Random) -> tuple[str, bytes]:
        subject = f"subject-{rng.randrange(subjects):07d}"
        return subject, avro_value(i, subject, payload, rng, kind, parsed, schema_id)

    return produce_records(bootstrap, topic, records, random.Random(payload), record)


def avro_value(i: int, subject: str, payload: int, rng: random.Random, kind: Filler, parsed: Any,
               schema_id: int) -> bytes:  # fmt: skip
    """A framed Avro value of exactly ``payload`` bytes (``parsed``: :func:`avro_schema`, parsed by fastavro)."""
    from strongroom.schemas.wire import frame

    event = {"customer_id": subject, "email": f"user{i}@example.com", "name": f"Name {i}", "sku": f"SKU-{i}",
             "qty": i % 100, "notes": ""}  # fmt: skip
    base = len(frame(schema_id, _avro(parsed, event)))
    for length_bytes in (1, 2, 3):  # the notes string's length varint grows with it
        event["notes"] = filler(payload - base - length_bytes + 1, kind, rng)
        value = frame(schema_id, _avro(parsed, event))
        if len(value) == payload:
            return value
    return value


def _avro(parsed: Any, event: dict[str, Any]) -> bytes:
    import io

    import fastavro

    out = io.BytesIO()
    fastavro.schemaless_writer(out, parsed, event)
    return out.getvalue()


def read_digest(bootstrap: str, topic: str, expected: int, canonical: bool = False) -> TopicDigest:
    """Everything committed in ``topic`` (read_committed), as a digest."""
    consumer = build_consumer(ClientConfig(bootstrap).consumer(None, {"enable.partition.eof": False}))
    partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    digest = TopicDigest()
    idle_since = time.monotonic()
    try:
        while True:
            messages = consumer.consume(10_000, timeout=1.0)
            now = time.monotonic()
            if messages:
                idle_since = now
            elif digest.records >= expected or now - idle_since > 30:
                return digest
            for message in messages:
                if message.error():
                    raise RuntimeError(f"reading {topic}: {message.error()}")
                value = canonical_json(message.value()) if canonical else message.value()
                digest.add(message.key(), value, message.headers() or [], message.timestamp()[1])
    finally:
        consumer.close()


# ---------------------------------------------------------------------------------------------- the sides
class PassthroughJob(StreamingJob[PipelineResult]):
    """strongroom's exactly-once pipeline with a passthrough transform: source, foreachBatch, the sink."""

    kind = "passthrough"
    cache_batches = False

    def __init__(self, spark: Any, settings: PipelineSettings, output_topic: str) -> None:
        import threading

        self.spark, self.settings, self.output_topic = spark, settings, output_topic
        self.sink = settings.sink(spark, self.kind)
        self.counters = Counters()
        self.error = None
        self._lock = threading.Lock()

    def source(self) -> Any:
        return kafka_stream(self.spark, self.settings, self.settings.rules.subscription())

    def result(self) -> PipelineResult:
        return self.counters.snapshot()

    def close(self) -> None:
        self.close_kept_clients()

    def _process(self, batch: Any, batch_id: int) -> None:
        from pyspark.sql import functions as F

        if self.settings.engine == Engine.JVM:  # the JVM sink's copy: the same protocol, no transform
            document = copy_settings(self.sink, {rule.topic: self.output_topic for rule in self.settings.rules.rules})
            tasks = jvm_tasks(self.spark, document)
            self.counters.add_batch(write_exactly_once(source_rows(batch), self.sink, one_task_per_partition=True,
                                                       tasks=tasks))  # fmt: skip
            return
        frame = batch.select(
            F.col("topic").alias("src_topic"), F.col("partition").alias("src_partition"),
            F.col("offset").alias("src_offset"), F.lit(True).alias("emit"),
            F.lit(self.output_topic).alias("topic"), "key", "value", "headers",
            F.unix_millis("timestamp").alias("timestamp_ms"), F.lit("ok").alias("status"),
            F.lit(None).cast("string").alias("reason"), F.lit(False).alias("fatal"),
        )  # fmt: skip
        self.counters.add_batch(write_exactly_once(frame, self.sink, one_task_per_partition=True))


def copy_producer_options() -> dict[str, str]:
    """Spark's Kafka sink producer with the exactly-once sink's settings (Java names are librdkafka's here)."""
    settings = {key: PRODUCER_DEFAULTS[key] for key in ("acks", "enable.idempotence", "compression.type")}
    settings |= dict(BATCHING)
    return {f"kafka.{key}": str(value).lower() for key, value in settings.items()}


def spark_copy(spark: Any, settings: PipelineSettings, output_topic: str) -> None:
    """Spark's own Kafka sink (JVM, at-least-once) copying the topic: key, value and headers."""
    from pyspark.sql import functions as F

    writer = (
        kafka_stream(spark, settings, settings.rules.subscription())
        .select("key", "value", "headers", F.lit(output_topic).alias("topic"))
        .writeStream.format("kafka")
        .option("kafka.bootstrap.servers", settings.bootstrap_servers)
        .option("checkpointLocation", settings.checkpoint)
    )
    for key, value in copy_producer_options().items():
        writer = writer.option(key, value)
    writer.trigger(availableNow=True).start().awaitTermination()


@dataclass
class Measured:
    seconds: float
    cpu: dict[ProcessKind, float]
    #: The job's own seconds per phase (scan, keys, write, ...); none for Spark's copy.
    phases: dict[str, float]


@dataclass
class Figures:
    """Every round of every side of one payload size."""

    records: int
    nbytes: int
    rounds: dict[str, list[Measured]] = field(default_factory=dict)

    def rates(self, side: str) -> list[float]:
        return [self.records / m.seconds for m in self.rounds[side]]

    def ratios(self, side: str, baseline: str) -> Summary:
        return summarize(s / b for s, b in zip(self.rates(side), self.rates(baseline), strict=True))

    def phases(self, side: str) -> dict[str, float]:
        """The median seconds per phase the job reported over the rounds."""
        names = {name for m in self.rounds[side] for name in m.phases}
        return {n: summarize(m.phases.get(n, 0.0) for m in self.rounds[side]).median for n in sorted(names)}

    def cpu_us(self, side: str, kind: ProcessKind) -> float:
        return summarize(m.cpu[kind] for m in self.rounds[side]).median / self.records * 1e6


def engine_option(engine: str | None) -> dict[str, Any]:
    """The pipeline setting choosing the engine (``PipelineSettings.engine``); none: the jobs' default,
    which is the CLI's."""
    return {} if engine is None else {"engine": Engine(engine)}


def default_engine() -> str:
    """The engine the jobs use without ``--engine`` (python before the JVM engine's setting existed)."""
    default = next((f.default for f in dataclasses.fields(PipelineSettings) if f.name == "engine"), "python")
    return str(default)


class Bench:
    """One broker, one Spark session, one keyring: runs and verifies the sides."""

    def __init__(self, args: argparse.Namespace, cluster: KafkaCluster, spark: Any, work: Path) -> None:
        self.args, self.cluster, self.spark, self.work = args, cluster, spark, work
        self.bootstrap = cluster.bootstrap_servers
        keyring = work / "kms.json"
        LocalKekAdmin(LocalKms.from_config({"path": str(keyring), "create": True})).create_kek("strongroom-subjects")
        create_keys_topic(ClientConfig(self.bootstrap), "strongroom-keys")
        self.kms = {"provider": "local", "path": str(keyring)}
        self.runs = 0
        self.engine = engine_option(args.engine)
        #: The Apicurio registry of the Avro sides (None: ``--no-avro``).
        self.registry_url: str | None = None

    def settings(self, topic: str, engine: dict[str, Any] | None = None, **rule: Any) -> PipelineSettings:
        self.runs += 1
        engine = self.engine if engine is None else engine
        rules = EncryptionRules.single([topic], **rule)
        checkpoint = str(self.work / f"run-{self.runs}")
        registry = (
            RegistrySettings(url=self.registry_url) if rule.get("mode") == "schema" and self.registry_url else None
        )
        return PipelineSettings(
            self.bootstrap, rules, self.kms, checkpoint, max_offsets_per_trigger=self.args.batch,
            schema_registry=registry, **engine,
        )  # fmt: skip

    def side(self, name: str, source: str, output: str, sealed_as: str = "value") -> Callable[[], dict[str, float]]:
        """Build the side's job (untimed: a long-running pipeline starts once) and return what runs it;
        ``sealed_as``: the rule mode the source was sealed in (decrypt needs the same rule)."""
        if name in ("copy", "copy-encrypted", "avro-copy"):
            settings = self.settings(source)

            def copy() -> dict[str, float]:
                spark_copy(self.spark, settings, output)
                return {}

            return copy
        if name == "eos-passthrough":
            job: Any = PassthroughJob(self.spark, self.settings(source), output)
        elif name in ("encrypt", "encrypt-new", "fields-encrypt", "avro-encrypt"):
            rule: dict[str, Any] = {"output_topic": output}
            if name == "fields-encrypt":
                rule |= {"mode": "fields", "fields": FIELDS}
            if name == "avro-encrypt":
                rule |= {"mode": "schema"}
            job = EncryptJob(self.spark, self.settings(source, **rule))
        elif name == "decrypt":
            rule = {"value": {}, "fields": {"mode": "fields", "fields": FIELDS}, "schema": {"mode": "schema"}}[
                sealed_as
            ]
            job = DecryptJob(self.spark, self.settings(source, **rule), output_topic=output)
        else:
            raise ValueError(f"unknown side {name}")

        def run() -> dict[str, float]:
            try:
                return dict(job.run().seconds)
            finally:
                job.close()

        return run

    def measure(self, name: str, source: str, output: str) -> Measured:
        self.cluster.create_topic(output, partitions=2)
        run = self.side(name, source, output)
        before = cpu_by_kind()
        start = time.perf_counter()
        phases = run()
        seconds = time.perf_counter() - start
        return Measured(seconds, cpu_delta(before, cpu_by_kind()), phases)

    def untimed(self, name: str, source: str, output: str, sealed_as: str = "value") -> None:
        self.cluster.create_topic(output, partitions=2)
        self.side(name, source, output, sealed_as)()


def round_order(round_no: int, payload: int, avro: bool = True) -> list[str]:
    sides = [s for s in INTERLEAVED if s not in ONLY_AT_RESULT_PAYLOAD or payload == RESULT_PAYLOAD]
    sides = [s for s in sides if avro or s not in AVRO_SIDES]
    shift = round_no % len(sides)
    after = AFTER_ENCRYPT[round_no % 2 :] + AFTER_ENCRYPT[: round_no % 2]
    return sides[shift:] + sides[:shift] + after


def run_payload(bench: Bench, payload: int, records: int) -> Figures:
    args, bootstrap = bench.args, bench.bootstrap
    src, warm = f"p{payload}", f"p{payload}.warm"
    for topic in (src, warm):
        bench.cluster.create_topic(topic, partitions=2)
    nbytes = produce_source(bootstrap, src, records, args.subjects, payload, args.filler)
    produce_source(bootstrap, warm, max(1000, records // 20), args.subjects, payload, args.filler)
    avro = bench.registry_url is not None and payload == RESULT_PAYLOAD
    avro_src, avro_digest = f"{src}.avro", None
    if avro:
        assert bench.registry_url is not None
        for topic in (avro_src, f"{warm}.avro"):
            bench.cluster.create_topic(topic, partitions=2)
            n = records if topic == avro_src else max(1000, records // 20)
            produce_avro_source(bootstrap, topic, n, args.subjects, payload, args.filler, bench.registry_url)
        avro_digest = read_digest(bootstrap, avro_src, records)
    new_sources = {}
    for r in range(args.rounds):
        new_sources[r] = f"p{payload}.new{r}"
        bench.cluster.create_topic(new_sources[r], partitions=2)
        produce_source(bootstrap, new_sources[r], records, args.subjects, payload, args.filler, f"{payload}-{r}")
    print(f"\n== payload {payload} B: {records} records ({nbytes / 1e6:.0f} MB) over {args.subjects} subjects",
          flush=True)  # fmt: skip
    source_digest = read_digest(bootstrap, src, records)
    new_digests = {r: read_digest(bootstrap, t, records) for r, t in new_sources.items()}

    # warm-up, untimed: every side once on the small topic, then every subject's key created
    for side in round_order(0, payload, avro):
        source = f"{warm}.encrypt" if side in AFTER_ENCRYPT else f"{warm}.avro" if side in AVRO_SIDES else warm
        bench.untimed(side, source, f"{warm}.{side}")
    bench.untimed("encrypt", src, f"{src}.keys-primed")
    print("warm-up done (every side once; every subject's key exists)", flush=True)

    figures = Figures(records, nbytes)
    for r in range(args.rounds):
        for side in round_order(r, payload, avro):
            source = {"encrypt-new": new_sources[r], "copy-encrypted": f"{src}.encrypt.r{r}",
                      "decrypt": f"{src}.encrypt.r{r}", "avro-copy": avro_src,
                      "avro-encrypt": avro_src}.get(side, src)  # fmt: skip
            output = f"{src}.{side}.r{r}"
            measured = bench.measure(side, source, output)
            figures.rounds.setdefault(side, []).append(measured)
            expected = avro_digest if side in AVRO_SIDES else source_digest
            assert expected is not None
            verify_round(bench, side, source, output, payload, records, expected, new_digests[r])
            print(f"  round {r + 1} {side:16} {records / measured.seconds:9.0f} rec/s "
                  f"({measured.seconds:5.1f} s) verified", flush=True)  # fmt: skip
    return figures


def verify_round(bench: Bench, side: str, source: str, output: str, payload: int, records: int,
                 source_digest: TopicDigest, new_digest: TopicDigest) -> None:  # fmt: skip
    """Read the round's output back and check it; sealed outputs are opened (untimed) and compared too."""
    bootstrap = bench.bootstrap
    expected = new_digest if side == "encrypt-new" else source_digest
    checks = {"copy": Check.CONTENT, "copy-encrypted": Check.CONTENT, "eos-passthrough": Check.CONTENT_AND_TIME,
              "decrypt": Check.CONTENT_AND_TIME, "avro-copy": Check.CONTENT}  # fmt: skip
    problems: list[str]
    if side in checks:
        if side == "copy-encrypted":
            expected = read_digest(bootstrap, source, records)
        problems = verify(side, expected, read_digest(bootstrap, output, records), checks[side])
    else:  # sealed: count and duplicates here; content after opening it
        problems = verify(side, expected, read_digest(bootstrap, output, records), Check.COUNT)
        if side != "encrypt":  # the round's decrypt side opens the steady-state encrypt output
            canonical = side == "fields-encrypt"
            sealed_as = {"fields-encrypt": "fields", "avro-encrypt": "schema"}.get(side, "value")
            bench.untimed("decrypt", output, f"{output}.opened", sealed_as)
            if canonical:
                expected = read_digest(bootstrap, source, records, canonical=True)
            opened = read_digest(bootstrap, f"{output}.opened", records, canonical=canonical)
            problems += verify(f"{side} opened", expected, opened, Check.CONTENT_AND_TIME)
    if problems:
        raise SystemExit("verification failed: " + "; ".join(problems))


# ---------------------------------------------------------------------------------------------- report
def report(all_figures: dict[int, Figures], args: argparse.Namespace) -> Iterator[str]:
    engine = args.engine or default_engine()
    for payload, fig in all_figures.items():
        yield f"\npayload {payload} B, {fig.records} records, {args.rounds} rounds (engine: {engine})"
        yield f"{'side':16} {'median rec/s':>12} {'spread':>7} {'vs copy':>8} {'CPU µs/record:':16}" + " ".join(
            f"{k.value:>14}" for k in ProcessKind if k != ProcessKind.OTHER
        )
        for side in fig.rounds:
            rates = summarize(fig.rates(side))
            baseline = BASELINES.get(side, "copy")
            ratio = fig.ratios(side, baseline).median
            cpu = " ".join(f"{fig.cpu_us(side, k):14.1f}" for k in ProcessKind if k != ProcessKind.OTHER)
            yield f"{side:16} {rates.median:12.0f} {rates.spread:7.2f} {ratio:8.2f} {'':16}{cpu}"
        for side in fig.rounds:
            phases = fig.phases(side)
            if phases:
                described = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in phases.items())
                wall = summarize(m.seconds for m in fig.rounds[side]).median
                yield f"  {side}: median wall {wall:.1f} s; phases {described}"
        new_vs_steady = fig.ratios("encrypt-new", "encrypt")
        yield (f"new subjects (10 % of records) vs steady state: {new_vs_steady.median:.2f} "
               f"(spread {new_vs_steady.spread:.2f}; issue 13 target >= {NEW_SUBJECT_TARGET})")  # fmt: skip
    fig = all_figures.get(RESULT_PAYLOAD)
    if fig is None:
        yield f"no RESULT lines: the ratios are defined at {RESULT_PAYLOAD} B, which this run did not measure"
        return
    new_vs_steady = fig.ratios("encrypt-new", "encrypt").median
    for side in ("encrypt", "decrypt", "fields-encrypt", "eos-passthrough", "avro-encrypt"):
        if side not in fig.rounds:
            yield f"no RESULT {side}-vs-copy line: the side did not run (--no-avro)"
            continue
        baseline = BASELINES.get(side, "copy")
        ratios = fig.ratios(side, baseline)
        extra: dict[str, object] = {}
        if side == "encrypt":
            extra["new_subjects_vs_steady"] = new_vs_steady
        if side == "eos-passthrough":
            extra["writer"] = "jvm-sink" if engine == Engine.JVM else "python-sink"
        if side == "avro-encrypt":
            extra["baseline"] = "avro-copy"
        yield result_line(
            f"{side}-vs-copy", ratios, target=TARGETS[side], met="yes" if ratios.median >= TARGETS[side] else "no",
            rps=summarize(fig.rates(side)).median, copy_rps=summarize(fig.rates(baseline)).median,
            payload=RESULT_PAYLOAD, records=fig.records, engine=engine, filler=args.filler, **extra,
        )  # fmt: skip


def parse_records(text: str) -> dict[int, int]:
    return {int(size): int(n) for size, n in (part.split("=") for part in text.split(","))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="1 KB only, 20,000 records, 2,000 subjects, 3 rounds")
    parser.add_argument("--engine", choices=["python", "jvm"], default=None, help="default: the jobs' default")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--payloads", default="100,1000,10000", help="value sizes in bytes")
    parser.add_argument("--records", default="100=1000000,1000=500000,10000=100000", help="records per size")
    parser.add_argument("--subjects", type=int, default=100_000)
    parser.add_argument(
        "--filler", type=Filler, choices=list(Filler), default=Filler.WORDS,
        help="what pads the JSON values: random words (compress like text) or one repeated character",
    )  # fmt: skip
    parser.add_argument("--batch", type=int, default=250_000, help="maxOffsetsPerTrigger, the same on every side")
    parser.add_argument("--no-avro", dest="avro", action="store_false",
                        help="leave out the Avro sides (they start an Apicurio registry, Java 21+)")  # fmt: skip
    args = parser.parse_args()
    if args.quick:
        args.payloads, args.records, args.subjects, args.batch = "1000", "1000=20000", 2000, 10_000
    if args.rounds < 3:
        parser.error("at least 3 rounds: medians and spread need them")
    counts = parse_records(args.records)
    payloads = [int(p) for p in args.payloads.split(",")]
    work = Path(tempfile.mkdtemp(prefix="strongroom-pbench-"))
    all_figures: dict[int, Figures] = {}
    with KafkaCluster(brokers=1, broker_config={"log.retention.bytes": -1}) as cluster:
        dataplane = (args.engine or default_engine()) == "jvm"  # the JVM engine's writer is in the data-plane jar
        spark = build_spark_session(app_name="pipeline-bench", conf=PIPELINE_SPARK_CONF, dataplane=dataplane)
        registry = SchemaRegistryServer().start() if args.avro and RESULT_PAYLOAD in payloads else None
        try:
            bench = Bench(args, cluster, spark, work)
            bench.registry_url = registry.url if registry else None
            for payload in payloads:
                all_figures[payload] = run_payload(bench, payload, counts[payload])
        finally:
            spark.stop()
            if registry:
                registry.stop()
    print("\ncopy = Spark's own Kafka sink over the same source; decrypt's copy = copy-encrypted; CPU per kind: "
          "spark-jvm is driver + executors (local mode: one JVM)")  # fmt: skip
    for line in report(all_figures, args):
        print(line, flush=True)


if __name__ == "__main__":
    main()
