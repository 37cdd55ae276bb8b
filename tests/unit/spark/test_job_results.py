"""The pipelines' results are typed, and their JSON (``strongroom encrypt/decrypt --output json``) keeps its layout."""

from __future__ import annotations

import json
from typing import Any

from strongroom.spark.jobs.common import Counters
from strongroom.spark.jobs.results import DecryptResult, EncryptResult, InputGaps, PendingStats, PipelineResult
from strongroom.spark.kafka_sink import PartitionSummary


def task_row(topic: str, partition: int, *, written: int, skipped: int, statuses: dict[str, int]) -> dict[str, Any]:
    """A summary row as a write task sends it to the driver (statuses as JSON text)."""
    return {
        "src_topic": topic,
        "src_partition": partition,
        "committed_before": 10,
        "first_offset": 10,
        "next_offset": 10 + written + skipped,
        "written": written,
        "replayed_skipped": skipped,
        "statuses": json.dumps(statuses),
        "group_offset": 10,
    }


def counted() -> Counters:
    counters = Counters()
    counters.add_batch(
        [
            PartitionSummary.from_row(task_row("orders", 0, written=3, skipped=1, statuses={"ok": 3, "rejected": 1})),
            PartitionSummary.from_row(task_row("orders", 1, written=2, skipped=0, statuses={"ok": 2})),
        ]
    )
    counters.input_gaps["orders[1]"] = 7
    counters.seconds["write"] = 1.23456
    return counters


def test_a_task_summary_row_becomes_a_typed_summary_where_the_driver_receives_it() -> None:
    summary = PartitionSummary.from_row(task_row("orders", 2, written=5, skipped=0, statuses={"ok": 4, "dropped": 1}))
    assert summary.source_partition == ("orders", 2)
    assert (summary.written, summary.next_offset, summary.group_offset) == (5, 15, 10)
    assert summary.statuses == {"ok": 4, "dropped": 1}
    empty = PartitionSummary.from_row({**task_row("orders", 3, written=0, skipped=0, statuses={}),
                                       "statuses": None, "group_offset": None})  # fmt: skip
    assert (empty.statuses, empty.group_offset) == ({}, None)


def test_the_encrypt_result_keeps_the_json_layout_of_the_cli() -> None:
    keys = {"created": 6, "wrapping_keys_created": 1, "cache_hits": 0}
    result = EncryptResult.of(counted().snapshot(), keys=keys)
    assert (result.batches, result.written, result.replayed_skipped) == (1, 5, 1)
    assert result.records == {"ok": 5, "rejected": 1}
    assert result.input_gaps == InputGaps({"orders[1]": 7})
    data = result.to_json()
    assert list(data) == ["batches", "records", "written", "replayed_skipped", "input_gaps", "seconds", "keys"]
    assert data == {
        "batches": 1,
        "records": {"ok": 5, "rejected": 1},
        "written": 5,
        "replayed_skipped": 1,
        "input_gaps": {"offsets": 7, "partitions": {"orders[1]": 7}},
        "seconds": {"write": 1.23},
        "keys": keys,
    }
    assert json.loads(json.dumps(data)) == data  # plain JSON types only


def test_the_decrypt_result_keeps_the_json_layout_of_the_cli() -> None:
    result = DecryptResult.of(counted().snapshot(), pending=PendingStats(buffered=12, released=9, timed_out=1, held=2))
    data = result.to_json()
    assert list(data)[-1] == "pending"
    assert data["pending"] == {"buffered": 12, "released": 9, "timed_out": 1, "held": 2}
    assert list(data["pending"]) == ["buffered", "released", "timed_out", "held"]


def test_a_snapshot_does_not_change_when_the_counters_go_on() -> None:
    counters = counted()
    before = counters.snapshot()
    counters.add_batch([PartitionSummary.from_row(task_row("orders", 0, written=4, skipped=0, statuses={"ok": 4}))])
    counters.input_gaps["orders[0]"] = 1
    assert (before.batches, before.written, before.records) == (1, 5, {"ok": 5, "rejected": 1})
    assert before.input_gaps.offsets == 7
    assert counters.snapshot().written == 9


def test_the_text_output_sits_next_to_the_model() -> None:
    text = EncryptResult.of(counted().snapshot(), keys={}).render_text()
    assert text.splitlines()[0] == "encrypt: 1 batches, 5 records written"
    assert "rejected" in text
    assert text.splitlines()[-1] == "1 records of replayed batches were already written (skipped)"
    quiet = PipelineResult(0, {}, 0, 0, InputGaps({}), {}).render_text()
    assert quiet == "pipeline: 0 batches, 0 records written"


def test_a_failed_write_task_says_which_failures_are_retried() -> None:
    from confluent_kafka import KafkaError, KafkaException

    from strongroom.spark.kafka_sink import FATAL_MARK, DeliveryFailed, _task_failure

    # Broker trouble and fatal rows go on as they are: the driver retries the first and stops on the second.
    assert _task_failure(KafkaException(KafkaError(KafkaError._TRANSPORT)), {}) is None
    assert _task_failure(DeliveryFailed("writing the output of t[0] failed"), {}) is None
    assert _task_failure(RuntimeError(f"{FATAL_MARK} rejected record t[0]@3: too large"), {}) is None
    assert _task_failure(KeyboardInterrupt(), {}) is None
    # Anything else stops the write at once, naming it; a fenced producer says who took over.
    other = _task_failure(ValueError("ValueError: a bug"), {})
    assert other is not None
    assert str(other).startswith(f"{FATAL_MARK} write the output: ")
    fenced = _task_failure(RuntimeError("Producer fenced by a newer instance"), {})
    assert fenced is not None
    assert "another producer took over its transactional id" in str(fenced)
