"""The encrypt and decrypt pipelines against the identical pipeline with a passthrough transform.

Usage: .venv/bin/python bench/pipeline_bench.py [--records 1000000] [--subjects 100000] [--mode value|fields]

One run, one local Kafka broker, one Spark session (local[2]):

1. produce N JSON records of ~1 KB over S distinct subjects to a 2-partition topic;
2. passthrough (baseline): the same streaming query shape — Kafka source, ``foreachBatch``, the same
   exactly-once transactional sink (one transaction per source partition) — copying records unchanged;
3. encrypt: the real EncryptJob (keys for S subjects created through the driver's key service, records
   sealed in the sink's tasks: one pass);
   Then the same again with every key existing (steady state: no key creation);
4. decrypt: the real DecryptJob on the encrypted topic, vs the passthrough copy of that topic.

Also printed, for context: Spark's own Kafka sink (JVM, at-least-once) copying the same topic.
Reports records/s, MB/s, CPU-seconds per GB (driver + JVM + Python workers) and peak memory of the
Spark JVM and its Python workers. Last lines: the decrypt ratio, then
``RESULT encrypt-pipeline ratio=<encrypt/passthrough> ...``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from strongroom.kafka.config import ClientConfig, produce_when_room
from strongroom.keys.topic import create_keys_topic
from strongroom.kms.admin.local import LocalKekAdmin
from strongroom.kms.local import LocalKms
from strongroom.rules import EncryptionRules
from strongroom.spark.jobs.common import PIPELINE_SPARK_CONF, Counters, PipelineSettings, StreamingJob, kafka_stream
from strongroom.spark.jobs.decrypt import DecryptJob
from strongroom.spark.jobs.encrypt import EncryptJob
from strongroom.spark.jobs.results import PipelineResult
from strongroom.spark.kafka_sink import write_exactly_once
from strongroom.spark.session import build_spark_session
from strongroom.testing.kafka_cluster import KafkaCluster


def process_tree_cpu_and_memory(root: int) -> tuple[float, dict[str, int]]:
    """CPU seconds (user+sys) of ``root`` and its descendants, and peak RSS (VmHWM) per kind."""
    ticks = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[int]] = {}
    stats: dict[int, list[str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(") ", 1)[1].split()
        except OSError:
            continue
        stats[int(entry.name)] = fields
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    cpu, memory, todo = 0.0, {"jvm": 0, "python_workers": 0}, [root]
    while todo:
        pid = todo.pop()
        todo.extend(children.get(pid, []))
        fields = stats.get(pid)
        if fields is None:
            continue
        cpu += (int(fields[11]) + int(fields[12])) / ticks
        try:
            status = Path(f"/proc/{pid}/status").read_text()
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        hwm = next((int(line.split()[1]) * 1024 for line in status.splitlines() if line.startswith("VmHWM")), 0)
        if b"java" in cmd.split(b"\0")[0]:
            memory["jvm"] = max(memory["jvm"], hwm)
        elif pid != root:
            memory["python_workers"] += hwm
    return cpu, memory


def produce(bootstrap: str, topic: str, records: int, subjects: int) -> int:
    rng = random.Random(1)
    producer = Producer(ClientConfig(bootstrap).producer({"linger.ms": 50, "batch.size": 1_000_000}))
    filler = "x" * 700
    size = 0
    for i in range(records):
        subject = f"subject-{rng.randrange(subjects):06d}"
        value = json.dumps(
            {"customer_id": subject, "name": f"Name {i}", "email": f"user{i}@example.com",
             "address": {"street": f"{i} Main St", "city": "Porto", "country": "PT"},
             "order": {"id": i, "total": round(rng.uniform(1, 500), 2)}, "notes": filler},
            separators=(",", ":"),
        ).encode()  # fmt: skip
        size += len(value)
        produce_when_room(producer, topic, key=subject.encode(), value=value, headers=[("source", b"bench")])
        if i % 10000 == 0:
            producer.poll(0)
    producer.flush(300)
    return size


class PassthroughJob(StreamingJob[PipelineResult]):
    """The identical pipeline with a passthrough transform: source, foreachBatch, exactly-once sink."""

    kind = "passthrough"

    def __init__(self, spark: Any, settings: PipelineSettings, output_suffix: str) -> None:
        import threading

        self.spark, self.settings, self.suffix = spark, settings, output_suffix
        self.sink = settings.sink(spark, self.kind)
        self.counters = Counters()
        self.error = None
        self._lock = threading.Lock()

    def source(self) -> Any:
        return kafka_stream(self.spark, self.settings, self.settings.rules.subscription())

    def result(self) -> PipelineResult:
        return self.counters.snapshot()

    def process_batch(self, batch: Any, batch_id: int) -> None:  # no caching: nothing is read twice
        from pyspark.sql import functions as F

        frame = batch.select(
            F.col("topic").alias("src_topic"), F.col("partition").alias("src_partition"),
            F.col("offset").alias("src_offset"), F.lit(True).alias("emit"),
            F.concat(F.col("topic"), F.lit(self.suffix)).alias("topic"), "key", "value", "headers",
            F.unix_millis("timestamp").alias("timestamp_ms"), F.lit("ok").alias("status"),
            F.lit(None).cast("string").alias("reason"), F.lit(False).alias("fatal"),
        )  # fmt: skip
        self.counters.add_batch(write_exactly_once(frame, self.sink))


def spark_native_copy(spark: Any, bootstrap: str, topic: str, out: str, checkpoint: str) -> None:
    """Spark's own Kafka sink (JVM, at-least-once): context for what exactly-once costs."""
    from pyspark.sql import functions as F

    query = (
        spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
        .option("startingOffsets", "earliest").option("includeHeaders", "true").load()
        .select("key", "value", "headers", F.lit(out).alias("topic"))
        .writeStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
        .option("checkpointLocation", checkpoint).trigger(availableNow=True).start()
    )  # fmt: skip
    query.awaitTermination()


def measure(name: str, fn: Any, records: int, nbytes: int) -> dict[str, float]:
    cpu0, _ = process_tree_cpu_and_memory(os.getpid())
    t0 = time.perf_counter()
    fn()
    seconds = time.perf_counter() - t0
    cpu1, memory = process_tree_cpu_and_memory(os.getpid())
    gb = nbytes / 1e9
    figures = {
        "seconds": seconds,
        "records_per_s": records / seconds,
        "mb_per_s": nbytes / 1e6 / seconds,
        "cpu_s_per_gb": (cpu1 - cpu0) / gb,
        "jvm_peak_mb": memory["jvm"] / 1e6,
        "python_workers_mb": memory["python_workers"] / 1e6,
    }
    print(
        f"{name:28} {figures['records_per_s']:9.0f} rec/s {figures['mb_per_s']:7.1f} MB/s "
        f"{figures['cpu_s_per_gb']:7.1f} CPU-s/GB  JVM peak {figures['jvm_peak_mb']:6.0f} MB  "
        f"Python workers {figures['python_workers_mb']:6.0f} MB  ({seconds:.1f} s)",
        flush=True,
    )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--subjects", type=int, default=100_000)
    parser.add_argument("--mode", choices=["value", "fields"], default="value")
    parser.add_argument("--batch", type=int, default=250_000, help="maxOffsetsPerTrigger")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="strongroom-bench-"))
    with KafkaCluster(brokers=1, broker_config={"log.retention.bytes": -1}) as cluster:
        bootstrap = cluster.bootstrap_servers
        client = ClientConfig(bootstrap)
        for topic in ("events", "warmup", "events.copy", "events.enc.copy", "events.native"):
            cluster.create_topic(topic, partitions=2)
        t0 = time.perf_counter()
        nbytes = produce(bootstrap, "events", args.records, args.subjects)
        print(f"produced {args.records} records ({nbytes / 1e6:.0f} MB, {args.subjects} subjects) in "
              f"{time.perf_counter() - t0:.1f} s; mode {args.mode}; 2 partitions; local[2]", flush=True)  # fmt: skip
        keyring = work / "kms.json"
        LocalKekAdmin(LocalKms.from_config({"path": str(keyring), "create": True})).create_kek("strongroom-subjects")
        create_keys_topic(client, "strongroom-keys")
        kms = {"provider": "local", "path": str(keyring)}
        rule: dict[str, Any] = (
            {"mode": "fields", "fields": ["$.name", "$.email", "$.address"]} if args.mode == "fields" else {}
        )

        def settings(topic: str, name: str, **extra: Any) -> PipelineSettings:
            rules = EncryptionRules.single([topic], **rule, **extra)
            return PipelineSettings(bootstrap, rules, kms, str(work / name), max_offsets_per_trigger=args.batch)

        spark = build_spark_session(app_name="bench", conf=PIPELINE_SPARK_CONF)
        spark_native_copy(spark, bootstrap, "events", "warmup", str(work / "warm"))  # JIT, workers, connector

        def passthrough(topic: str, name: str) -> Any:
            return lambda: PassthroughJob(spark, settings(topic, name), ".copy").run()

        base = measure("passthrough (exactly-once)", passthrough("events", "p1"), args.records, nbytes)
        enc_job = EncryptJob(spark, settings("events", "enc"))
        enc = measure("encrypt", enc_job.run, args.records, nbytes)
        keys = enc_job.keys.stats()
        print(f"  encrypt phases (s): {enc_job.result().seconds}")
        enc_job.close()
        # Steady state: the same records again, every subject already has its key (no creation).
        warm_job = EncryptJob(spark, settings("events", "enc-warm", output_topic="$(topic).enc-warm"))
        warm = measure("encrypt, keys exist", warm_job.run, args.records, nbytes)
        print(f"  encrypt phases (s): {warm_job.result().seconds}")
        warm_job.close()
        enc_bytes = nbytes  # compare on the plaintext volume both pipelines moved
        dbase = measure("passthrough of encrypted", passthrough("events.enc", "p2"), args.records, enc_bytes)
        dec_job = DecryptJob(spark, settings("events.enc", "dec"))
        dec = measure("decrypt", dec_job.run, args.records, enc_bytes)
        print(f"  decrypt phases (s): {dec_job.result().seconds}")
        dec_job.close()
        native = measure("Spark Kafka sink (at-least-once)",
                         lambda: spark_native_copy(spark, bootstrap, "events", "events.native", str(work / "native")),
                         args.records, nbytes)  # fmt: skip
        spark.stop()
    print(f"keys: {keys['created']} subject keys, {keys['wrapping_keys_created']} KMS wrap call(s)")
    print(
        f"exactly-once sink vs Spark's at-least-once Kafka sink: {base['records_per_s'] / native['records_per_s']:.2f}x"
    )
    dec_ratio = dec["records_per_s"] / dbase["records_per_s"]
    enc_ratio = enc["records_per_s"] / base["records_per_s"]
    dec_rate, dbase_rate = dec["records_per_s"], dbase["records_per_s"]
    warm_ratio = warm["records_per_s"] / base["records_per_s"]
    print(f"encrypt with existing keys (steady state) vs passthrough: {warm_ratio:.2f}")
    print(f"RESULT decrypt-pipeline ratio={dec_ratio:.2f} dec={dec_rate:.0f}rec/s base={dbase_rate:.0f}rec/s")
    print(
        f"RESULT encrypt-pipeline ratio={enc_ratio:.2f} enc={enc['records_per_s']:.0f}rec/s "
        f"base={base['records_per_s']:.0f}rec/s mode={args.mode} records={args.records} subjects={args.subjects} "
        f"cpu_s_per_gb={enc['cpu_s_per_gb']:.0f} jvm_peak_mb={enc['jvm_peak_mb']:.0f}"
    )


if __name__ == "__main__":
    main()
