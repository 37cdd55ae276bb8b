"""What bench/pipeline_bench.py feeds both sides: records of exactly the payload size, and Spark's copy
configured like strongroom's exactly-once sink (no JVM: only the pure parts)."""

from __future__ import annotations

import importlib
import json
import random
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture(scope="module")
def pb() -> ModuleType:
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(BENCH))
        return importlib.import_module("pipeline_bench")


@pytest.mark.parametrize("payload", [100, 1000, 10000])
@pytest.mark.parametrize("filler", ["words", "repeat"])
def test_values_have_exactly_the_payload_size(pb: ModuleType, payload: int, filler: str) -> None:
    rng = random.Random(1)
    for i in (0, 7, 123_456):
        value = pb.record_value(i, f"subject-{i:07d}", payload, rng, pb.Filler(filler))
        assert len(value) == payload
        assert json.loads(value)["customer_id"] == f"subject-{i:07d}"


def test_one_kb_values_carry_the_three_fields_field_mode_seals(pb: ModuleType) -> None:
    doc = json.loads(pb.record_value(1, "s", 1000, random.Random(1)))
    assert {"name", "email", "address"} <= doc.keys()
    assert [f"$.{name}" for name in ("name", "email", "address")] == pb.FIELDS


def test_words_filler_differs_between_records(pb: ModuleType) -> None:
    rng = random.Random(1)
    notes = {json.loads(pb.record_value(1, "s", 1000, rng))["notes"] for _ in range(20)}
    assert len(notes) == 20


def test_spark_copy_gets_the_exactly_once_sinks_producer_settings(pb: ModuleType) -> None:
    from strongroom.kafka.config import PRODUCER_DEFAULTS
    from strongroom.spark.kafka_sink import BATCHING

    options = pb.copy_producer_options()
    assert options["kafka.acks"] == PRODUCER_DEFAULTS["acks"] == "all"
    assert options["kafka.enable.idempotence"] == "true"
    assert options["kafka.compression.type"] == PRODUCER_DEFAULTS["compression.type"]
    assert options["kafka.linger.ms"] == str(BATCHING["linger.ms"])
    assert options["kafka.batch.size"] == str(BATCHING["batch.size"])


def test_every_round_runs_every_side_and_decrypt_after_encrypt(pb: ModuleType) -> None:
    orders = [pb.round_order(r, 1000) for r in range(3)]
    assert len({order[0] for order in orders}) == 3  # the order rotates
    for order in orders:
        assert sorted(order) == sorted(pb.INTERLEAVED + pb.AFTER_ENCRYPT)
        assert order.index("decrypt") > order.index("encrypt")
    assert "fields-encrypt" not in pb.round_order(0, 100)


@pytest.mark.parametrize("filler", ["words", "repeat"])
def test_avro_values_have_exactly_the_payload_size_and_read_with_their_schema(pb: ModuleType, filler: str) -> None:
    import io

    import fastavro

    parsed = fastavro.parse_schema(pb.avro_schema())
    rng = random.Random(1)
    for i in (0, 7, 123_456):
        value = pb.avro_value(i, f"subject-{i:07d}", 1000, rng, pb.Filler(filler), parsed, 42)
        assert len(value) == 1000
        assert value[:5] == b"\x00\x00\x00\x00\x2a"
        event = fastavro.schemaless_reader(io.BytesIO(value[5:]), parsed, None)
        assert event["customer_id"] == f"subject-{i:07d}"
    tagged = {f["name"] for f in pb.avro_schema()["fields"] if "PII" in f.get("confluent:tags", [])}
    assert tagged == {"email", "name"}


def test_the_avro_sides_run_at_the_result_payload_only_and_can_be_left_out(pb: ModuleType) -> None:
    assert {"avro-copy", "avro-encrypt"} <= set(pb.round_order(0, 1000))
    assert not {"avro-copy", "avro-encrypt"} & set(pb.round_order(0, 100))
    assert not {"avro-copy", "avro-encrypt"} & set(pb.round_order(1, 1000, avro=False))
    assert pb.BASELINES["avro-encrypt"] == "avro-copy"
