"""Chunk digests computed in Python (from confluent-kafka messages) equal Spark's over ledger rows."""

from __future__ import annotations

import random

from confluent_kafka import Message
from pyspark.sql import SparkSession

from strongroom.audit.digest import ChunkAccumulator, chunk_digests, plan_chunks, record_digest
from strongroom.audit.hashing import record_hashes
from strongroom.audit.schema import COLUMNS, spark_schema


def _messages(n: int, seed: int) -> list[Message]:
    rnd = random.Random(seed)
    out = []
    offset = 0
    for _ in range(n):
        offset += rnd.choice((1, 1, 1, 2, 7))  # gaps, as compaction and transaction markers leave
        key = None if rnd.random() < 0.2 else rnd.randbytes(rnd.randint(0, 40))
        value = None if rnd.random() < 0.1 else rnd.randbytes(rnd.randint(0, 300))
        headers = None if rnd.random() < 0.6 else [("h", rnd.randbytes(3)), ("n", None)]
        epoch = None if rnd.random() < 0.05 else rnd.randint(0, 2**31 - 1)
        ts = rnd.randint(-1, 2**62)
        extra = {} if epoch is None else {"leader_epoch": epoch}  # leader_epoch() is None when left out
        out.append(Message(topic="t", partition=3, offset=offset, key=key, value=value, headers=headers,
                           timestamp=(1, ts), **extra))  # fmt: skip
    return out


def _ledger_row(m: Message) -> tuple[object, ...]:
    kh, vh, hh = record_hashes(m.key(), m.value(), m.headers())
    d = {"topic": "t", "partition": 3, "offset": m.offset(), "leader_epoch": m.leader_epoch(),
         "timestamp": m.timestamp()[1], "timestamp_type": 1, "key_hash": kh, "value_hash": vh, "headers_hash": hh,
         "key_len": None, "value_len": None, "read_at": 0, "kind": "record", "range_end": None,
         "range_records": None, "range_bytes": None}  # fmt: skip
    return tuple(d.get(c) for c in COLUMNS)


def test_python_digests_equal_spark_digests(spark: SparkSession) -> None:
    msgs = _messages(3000, seed=7)
    frame = spark.createDataFrame([_ledger_row(m) for m in msgs], spark_schema())

    # record by record
    per_record = [r[0] for r in frame.select(record_digest()).collect()]
    acc = ChunkAccumulator("t", 3, chunk_size=1)
    for m in msgs:
        acc.add([m], [m.offset()])
    assert [r["digest_xor"] for r in acc.rows()] == per_record

    # per chunk, fed in uneven runs as the reader does
    acc = ChunkAccumulator("t", 3, chunk_size=500)
    i = 0
    rnd = random.Random(3)
    while i < len(msgs):
        n = rnd.randint(1, 700)
        acc.add(msgs[i : i + n], [m.offset() for m in msgs[i : i + n]])
        i += n
    spark_rows = [r.asDict() for r in chunk_digests(frame, 500).collect()]
    plan = plan_chunks(spark_rows, acc.rows(), {}, 500)
    assert plan.suspect == []
    assert plan.ok_records == len(msgs)

    # one changed value makes exactly its chunk suspect
    changed = list(msgs)
    victim = changed[1234]
    epoch = {} if victim.leader_epoch() is None else {"leader_epoch": victim.leader_epoch()}
    changed[1234] = Message(
        topic="t", partition=3, offset=victim.offset(), key=victim.key(), value=b"other", headers=victim.headers(),
        timestamp=victim.timestamp(), **epoch,
    )  # fmt: skip
    acc = ChunkAccumulator("t", 3, chunk_size=500)
    acc.add(changed, [m.offset() for m in changed])
    plan = plan_chunks(spark_rows, acc.rows(), {}, 500)
    assert plan.suspect == [("t", 3, victim.offset() // 500)]
