"""Exactly-once beyond the happy path (issue 11): where progress lives, input that aged out, one task per
source partition, transactions a stop leaves open, and Parquet output that commits files before offsets.

Each test runs the real pipeline (Spark, Kafka, the local KMS) in-process through the job API.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import TopicPartition
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from strongroom.errors import PipelineError
from strongroom.kafka.transport import build_admin, build_consumer, build_producer
from strongroom.spark.jobs.common import InputGapPolicy
from strongroom.spark.jobs.decrypt import DecryptJob
from strongroom.spark.jobs.encrypt import EncryptJob
from strongroom.spark.jobs.progress import APP_FILE, app_id_for
from strongroom.spark.jobs.results import DecryptResult, InputGaps
from strongroom.spark.kafka_sink import SINK_COLUMNS, TransactionalSinkConfig, write_exactly_once

FIELDS = ["$.name", "$.email", "$.address"]


def event_ids(env: Any, topic: str) -> list[str]:
    return [json.loads(m.value())["event_id"] for m in env.read(topic, idle=2.0)]


def fields_rules(topic: str) -> dict[str, Any]:
    return {"rules": [{"topic": topic, "mode": "fields", "fields": FIELDS}]}


def forget_group(env: Any, group: str) -> None:
    """What offsets.retention.minutes does to an idle pipeline's consumer group."""
    admin = build_admin(env.client.admin())
    admin.delete_consumer_groups([group])[group].result(30)


def committed(env: Any, group: str, topic: str, partitions: int) -> list[int]:
    consumer = build_consumer(env.client.consumer(group))
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)
        return [tp.offset for tp in found]
    finally:
        consumer.close()


def test_progress_survives_expired_offsets_and_a_moved_checkpoint(spark: SparkSession, pipeline_env: Any) -> None:
    env = pipeline_env
    topic = env.new_topic(partitions=2)
    events = env.produce_events(topic, 40)
    first = env.settings(fields_rules(topic), "moved")
    encrypt = EncryptJob(spark, first)
    app_id = encrypt.sink.app_id
    assert env.run(encrypt).written == 40
    recorded = json.loads((Path(first.checkpoint) / APP_FILE).read_text())
    assert recorded == {"app_id": app_id, "kind": "encrypt"}

    # The checkpoint moves elsewhere and the idle group's offsets expire: the app id comes from the checkpoint
    # and the offsets are put back from it.
    moved = env.workdir / "moved-elsewhere"
    shutil.copytree(first.checkpoint, moved)
    forget_group(env, f"strongroom-{app_id}")
    events += env.produce_events(topic, 20)
    again = EncryptJob(spark, dataclasses.replace(first, checkpoint=str(moved)))
    assert again.sink.app_id == app_id
    assert env.run(again).written == 20
    assert sorted(event_ids(env, f"{topic}.enc")) == sorted(e["event_id"] for e in events)

    # A crash after the last batch's transactions committed but before Spark recorded the batch, and
    # expired offsets: nothing can tell what that batch wrote, so the pipeline refuses to guess.
    env.produce_events(topic, 10)
    assert env.run(EncryptJob(spark, dataclasses.replace(first, checkpoint=str(moved)))).written == 10
    last = max(int(p.name) for p in (moved / "commits").iterdir() if p.name.isdigit())
    (moved / "commits" / str(last)).unlink()
    forget_group(env, f"strongroom-{app_id}")
    with pytest.raises(PipelineError, match=r"offsets\.retention\.minutes") as refused:
        env.run(EncryptJob(spark, dataclasses.replace(first, checkpoint=str(moved))))
    assert "kafka-consumer-groups" in (refused.value.hint or "")
    assert len(event_ids(env, f"{topic}.enc")) == 70


def test_input_that_aged_out_is_counted_reported_and_can_stop_the_job(
    spark: SparkSession, pipeline_env: Any, caplog: pytest.LogCaptureFixture
) -> None:
    env = pipeline_env
    topic = env.new_topic(partitions=1)
    env.produce_events(topic, 30)
    settings = env.settings(fields_rules(topic), "gaps")
    assert env.run(EncryptJob(spark, settings)).input_gaps == InputGaps({})
    env.produce_events(topic, 30)
    admin = build_admin(env.client.admin())
    for future in admin.delete_records([TopicPartition(topic, 0, 45)]).values():
        future.result(30)  # retention took offsets 30..44 before the pipeline came back
    result = env.run(EncryptJob(spark, settings))
    assert result.written == 15
    assert result.input_gaps == InputGaps({f"{topic}[0]": 15})
    assert result.input_gaps.offsets == 15
    assert any(r.levelname == "ERROR" and "aged out" in r.getMessage() for r in caplog.records)

    env.produce_events(topic, 10)
    for future in admin.delete_records([TopicPartition(topic, 0, 65)]).values():
        future.result(30)
    failing = env.settings(fields_rules(topic), "gaps", on_input_gap=InputGapPolicy.FAIL)
    with pytest.raises(PipelineError, match=r"aged out .*\[0\]: 5 offsets"):
        env.run(EncryptJob(spark, failing))


def test_one_source_partition_split_over_tasks_is_made_correct_or_refused(
    spark: SparkSession, pipeline_env: Any
) -> None:
    env = pipeline_env
    topic, refused_out, careful_out = (env.new_topic(partitions=1) for _ in range(3))
    env.produce_raw(topic, [(f"k{i}".encode(), f"v{i}".encode()) for i in range(200)])
    source = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", env.bootstrap)
        .option("subscribe", topic)
        .option("minPartitions", 4)  # one Kafka partition, four tasks
        .option("includeHeaders", "true")
        .load()
    )
    assert source.rdd.getNumPartitions() == 4

    def sink_rows(out: str) -> Any:
        return source.select(
            F.col("topic").alias("src_topic"), F.col("partition").alias("src_partition"),
            F.col("offset").alias("src_offset"), F.lit(True).alias("emit"), F.lit(out).alias("topic"), "key",
            "value", "headers", F.unix_millis("timestamp").alias("timestamp_ms"), F.lit("ok").alias("status"),
            F.lit(None).cast("string").alias("reason"), F.lit(False).alias("fatal"),
        ).select(*SINK_COLUMNS)  # fmt: skip

    trusting = TransactionalSinkConfig(env.bootstrap, "split-trusting", retry_deadline_s=0)
    with pytest.raises(PipelineError, match="more than one task"):
        write_exactly_once(sink_rows(refused_out), trusting, one_task_per_partition=True)
    # The public default repartitions by source partition: every record once, in order.
    careful = TransactionalSinkConfig(env.bootstrap, "split-careful", retry_deadline_s=0)
    [summary] = write_exactly_once(sink_rows(careful_out), careful)
    assert (summary.written, summary.next_offset) == (200, 200)
    assert [m.value() for m in env.read(careful_out)] == [f"v{i}".encode() for i in range(200)]


def test_a_fatal_record_leaves_no_transaction_open(spark: SparkSession, pipeline_env: Any) -> None:
    """Each source partition's task writes in its own transaction; when one stops on a record the policy
    says to fail on, the others' transactions are aborted at once, not left to ``transaction.timeout.ms``."""
    env = pipeline_env
    topic = env.new_topic(partitions=2)
    env.produce_raw(topic, [(b"cust-1", b"not json at all")])
    env.produce_events(topic, 6000, customers=50)
    rules = {"rules": [{"topic": topic, "mode": "fields", "fields": FIELDS, "on_reject": "fail"}]}
    with pytest.raises(PipelineError, match="not JSON"):
        env.run(EncryptJob(spark, env.settings(rules, "fatal")))
    deadline = time.monotonic() + 20
    while (held := stable_lag(env, f"{topic}.enc")) and time.monotonic() < deadline:
        time.sleep(1)
    assert held == 0, f"{held} records of the output are held back from read_committed readers by an open transaction"


@pytest.mark.parametrize("checkpoint", ["kept", "new"])
def test_a_killed_runs_open_transaction_is_aborted_by_the_next_start(
    spark: SparkSession, pipeline_env: Any, checkpoint: str
) -> None:
    """A SIGKILL leaves a task's transaction open; the next start ends it at once, even on a partition that
    gets no new record, instead of leaving read_committed readers of the output stuck until it times out.
    With a new checkpoint (same app id) the abort runs while the query starts, and the first batch, which
    reads the 20 records again and skips them, waits for it: a task fenced by it would fail the run."""
    env = pipeline_env
    topic = env.new_topic(partitions=2)
    settings = env.settings(fields_rules(topic), "killed", app_id="killed-run")
    env.produce_events(topic, 20)
    assert env.run(EncryptJob(spark, settings)).written == 20
    # What the killed task of partition 1 left behind: records in an open transaction under its transactional id.
    zombie = build_producer(
        env.client.producer({"transactional.id": f"strongroom-killed-run-{topic}-1", "transaction.timeout.ms": 300_000})
    )
    zombie.init_transactions(30)
    zombie.begin_transaction()
    for _ in range(5):
        zombie.produce(f"{topic}.enc", value=b"never committed")
    zombie.flush(30)
    assert stable_lag(env, f"{topic}.enc") == 5
    if checkpoint == "new":
        settings = env.settings(fields_rules(topic), "killed-new-checkpoint", app_id="killed-run")
    result = env.run(EncryptJob(spark, settings))  # no new input at all
    assert result.written == 0
    assert stable_lag(env, f"{topic}.enc") == 0


def stable_lag(env: Any, topic: str) -> int:
    """Records past the last stable offset of every partition (what read_committed readers cannot reach)."""
    from confluent_kafka import IsolationLevel
    from confluent_kafka.admin import OffsetSpec

    admin = build_admin(env.client.admin())
    partitions = admin.list_topics(topic, timeout=10).topics[topic].partitions
    ends = {}
    for level in (IsolationLevel.READ_COMMITTED, IsolationLevel.READ_UNCOMMITTED):
        request = {TopicPartition(topic, p): OffsetSpec.latest() for p in partitions}
        found = admin.list_offsets(request, isolation_level=level)
        ends[level] = sum(f.result(30).offset for f in found.values())
    return int(ends[IsolationLevel.READ_UNCOMMITTED] - ends[IsolationLevel.READ_COMMITTED])


def test_parquet_output_writes_files_before_offsets_and_never_overwrites_a_later_batch(
    spark: SparkSession, pipeline_env: Any, tmp_path: Path
) -> None:
    env = pipeline_env
    topic = env.new_topic(partitions=2)
    events = env.produce_events(topic, 40)
    assert env.run(EncryptJob(spark, env.settings(fields_rules(topic), "penc"))).written == 40
    output = tmp_path / "parquet"
    dec_rules = fields_rules(f"{topic}.enc")

    def decrypt(name: str) -> DecryptResult:
        job = DecryptJob(spark, env.settings(dec_rules, name, app_id="pq"), output="parquet", output_path=str(output))
        return env.run(job)

    assert decrypt("pq1").records == {"ok": 40}
    events += env.produce_events(topic, 20)
    assert env.run(EncryptJob(spark, env.settings(fields_rules(topic), "penc"))).written == 20
    # The decrypt checkpoint is lost: batch ids start again at 0, the offsets in Kafka still say what was done.
    assert decrypt("pq2-new-checkpoint").records == {"ok": 20}
    directories = sorted(p.name for p in output.iterdir() if p.name.startswith("batch_id="))
    assert len(directories) == 2
    assert all(d.startswith("batch_id=0-") for d in directories)
    rows = spark.read.parquet(str(output)).select("value_text").collect()
    ids = sorted(json.loads(r.value_text)["event_id"] for r in rows)
    assert ids == sorted(e["event_id"] for e in events)
    decrypted = {json.loads(r.value_text)["event_id"]: json.loads(r.value_text) for r in rows}
    assert all(doc["email"] == e["email"] for e in events if (doc := decrypted[e["event_id"]]))


def test_the_app_file_is_written_whole_and_a_damaged_one_replaced(spark: SparkSession, tmp_path: Path) -> None:
    """The app file is written beside and renamed into place: a crash leaves the old file or the new one, never
    a part (a part stopped the next start until --app-id was given)."""
    checkpoint = tmp_path / "checkpoint"
    app_id = app_id_for(spark, str(checkpoint), "encrypt", None)
    assert json.loads((checkpoint / APP_FILE).read_text()) == {"app_id": app_id, "kind": "encrypt"}
    assert not [p.name for p in checkpoint.iterdir() if ".tmp" in p.name]  # no temporary file left behind
    assert app_id_for(spark, str(checkpoint), "encrypt", None) == app_id

    (checkpoint / APP_FILE).write_text('{"app_id": "encr')  # torn by a crash of a version that wrote in place
    (checkpoint / f".{APP_FILE}.crc").unlink(missing_ok=True)  # Hadoop's checksum of the whole file
    with pytest.raises(PipelineError, match="damaged"):
        app_id_for(spark, str(checkpoint), "encrypt", None)
    assert app_id_for(spark, str(checkpoint), "encrypt", "encrypt-orders") == "encrypt-orders"
    assert json.loads((checkpoint / APP_FILE).read_text()) == {"app_id": "encrypt-orders", "kind": "encrypt"}
    assert app_id_for(spark, str(checkpoint), "encrypt", None) == "encrypt-orders"
    assert not [p.name for p in checkpoint.iterdir() if ".tmp" in p.name]

    (checkpoint / APP_FILE).write_text('{"app_id": "edited-by-hand", "kind": "encrypt"}')  # its checksum file stays
    with pytest.raises(PipelineError, match=r"changed after it was written") as edited:
        app_id_for(spark, str(checkpoint), "encrypt", None)
    assert f".{APP_FILE}.crc" in (edited.value.hint or "")
